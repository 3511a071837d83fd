// The fast pooling kernels (the registry's `fast` slots) against the reference: bit-identical
// results on awkward shapes -- max pooling (a max involves no rounding) under both tie rules
// and with NaN inputs; average pooling (the same window sums in the same order and the same
// divisor) with and without count_include_pad -- overlapping windows, padding on one side only,
// batch 1, float32 and float64, and 1 vs 2 threads. The cases are tests/cases/pool2d_cases.h's
// rows (shared with the CUDA test and the benchmark): to add one, append it there.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/ops/pool2d.h"
#include "engine/layers/layout.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "tests/cases/pool2d_cases.h"
#include "tests/test_util.h"

namespace {

using namespace driftlab;
using ::testing::HasSubstr;

Pool2dParams params(const Pool2dCase& c, PoolTies ties) {
  Pool2dParams p = c.p;
  p.ties = ties;
  return p;
}

// Inputs quantised to a few values so that ties are frequent, plus a NaN or two.
Tensor tie_heavy_input(const Pool2dParams& p, DType dt, uint64_t seed, bool with_nan) {
  Tensor x = random_tensor(p.x_shape(), dt, seed, -2.0, 2.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = std::floor(x.at(i));
    dispatch_dtype(dt, [&](auto tag) { x.data<decltype(tag)>()[i] = static_cast<decltype(tag)>(v); });
  }
  if (with_nan && x.numel() > 7)
    dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      x.data<T>()[x.numel() / 3] = std::numeric_limits<T>::quiet_NaN();
      x.data<T>()[x.numel() - 5] = std::numeric_limits<T>::quiet_NaN();
    });
  return x;
}

// The fast kernel's forward and backward at 1 and 2 threads against the reference's outputs,
// bit for bit.
void expect_fast_gives_reference_bits(const Pool2dKernel& fast, const Pool2dParams& p, const Tensor& x,
                                      const Tensor& dy, const Tensor& y_ref, const Tensor& dx_ref,
                                      const std::string& what) {
  for (int threads : {1, 2}) {
    ThreadCountGuard guard(threads);
    Tensor y(p.y_shape(), x.dtype()), dx(p.x_shape(), x.dtype());
    fast.forward(p, x, y);
    fast.backward(p, x, dy, dx);
    EXPECT_TRUE(bitwise_equal(y, y_ref)) << what << " threads=" << threads;
    EXPECT_TRUE(bitwise_equal(dx, dx_ref)) << what << " threads=" << threads;
  }
}

class Pool2dFastVsRef : public ::testing::TestWithParam<std::tuple<Pool2dCase, PoolTies, DType, bool>> {};

TEST_P(Pool2dFastVsRef, BitIdentical) {
  auto [c, ties, dt, nan] = GetParam();
  Pool2dParams p = params(c, ties);
  Tensor x = tie_heavy_input(p, dt, 11, nan);
  Tensor dy = random_tensor(p.y_shape(), dt, 12);
  Tensor y_ref(p.y_shape(), dt), dx_ref(p.x_shape(), dt);
  maxpool2d_forward_ref(p, x, y_ref);
  maxpool2d_backward_ref(p, x, dy, dx_ref);
  const KernelRegistry reg = make_cpu_registry();
  const Pool2dKernel& fast = reg.maxpool2d.at(KernelBackend::fast);
  ASSERT_STREQ(fast.name, "fast");
  expect_fast_gives_reference_bits(fast, p, x, dy, y_ref, dx_ref, c.name);
}

// Average pooling: the same cases, the divisor with and without the padding (ties and NaN play
// no part: `nan` here switches count_include_pad off).
class AvgPool2dFastVsRef : public ::testing::TestWithParam<std::tuple<Pool2dCase, PoolTies, DType, bool>> {};

TEST_P(AvgPool2dFastVsRef, BitIdentical) {
  auto [c, ties, dt, exclude_pad] = GetParam();
  Pool2dParams p = params(c, ties);
  p.count_include_pad = !exclude_pad;
  Tensor x = random_tensor(p.x_shape(), dt, 21);
  Tensor dy = random_tensor(p.y_shape(), dt, 22);
  Tensor y_ref(p.y_shape(), dt), dx_ref(p.x_shape(), dt);
  avgpool2d_forward_ref(p, x, y_ref);
  avgpool2d_backward_ref(p, dy, dx_ref);
  const KernelRegistry reg = make_cpu_registry();
  const Pool2dKernel& fast = reg.avgpool2d.at(KernelBackend::fast);
  ASSERT_STREQ(fast.name, "fast");
  expect_fast_gives_reference_bits(fast, p, x, dy, y_ref, dx_ref, c.name);
  // The other summation orders: the fast kernel still gives the reference's bits.
  for (SumOrder order : {SumOrder::descending, SumOrder::pairwise}) {
    p.sum_order = order;
    avgpool2d_forward_ref(p, x, y_ref);
    avgpool2d_backward_ref(p, dy, dx_ref);
    expect_fast_gives_reference_bits(fast, p, x, dy, y_ref, dx_ref,
                                     std::string(c.name) + " order " + std::to_string(static_cast<int>(order)));
  }
}

// Average pooling sums in params.sum_order: the window sum forward, and backward each input's sum
// over the windows covering it. Terms in float32, where 1e8 + 1 rounds to 1e8 (spacing 8):
//   [1e8, 1, -1e8, 1]  ascending ((1e8+1)-1e8)+1 = 1; descending ((1-1e8)+1)+1e8 = 0;
//                      pairwise (1e8+1)+(-1e8+1) = 0.
// A 2x2 window at stride 1 over 3x3: window (0,0) holds x[0,0],x[0,1],x[1,0],x[1,1] row-major,
// and the centre input is covered by all four windows, in row-major window order.
TEST(AvgPool2dSumOrder, ForwardAndBackwardSumInTheOrderAsked) {
  Pool2dParams p;
  p.h = p.w = 3;
  p.kh = p.kw = 2;
  p.stride_h = p.stride_w = 1;
  const Tensor x = Tensor::from<float>({1, 1, 3, 3}, {1e8f, 1, 0, -1e8f, 1, 0, 0, 0, 0});
  // dy/4 = [1e8, 1, -1e8, 1] exactly (powers of two scale exactly).
  const Tensor dy = Tensor::from<float>({1, 1, 2, 2}, {4e8f, 4, -4e8f, 4});
  const KernelRegistry reg = make_cpu_registry();
  const struct {
    SumOrder order;
    float sum;
  } want[] = {{SumOrder::ascending, 1}, {SumOrder::descending, 0}, {SumOrder::pairwise, 0}};
  for (const auto& w : want) {
    p.sum_order = w.order;
    for (KernelBackend b : {KernelBackend::reference, KernelBackend::fast}) {
      const Pool2dKernel& k = reg.avgpool2d.at(b);
      Tensor y(p.y_shape(), DType::f32), dx(p.x_shape(), DType::f32);
      k.forward(p, x, y);
      k.backward(p, x, dy, dx);
      EXPECT_EQ(y.at(0), w.sum / 4) << k.name << " order " << static_cast<int>(w.order);
      EXPECT_EQ(dx.at(4), w.sum) << k.name << " centre, order " << static_cast<int>(w.order);
      EXPECT_EQ(dx.at(0), 1e8f) << k.name << " corner: one window, no order";
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<Pool2dFastVsRef::ParamType>& info) {
  auto [c, ties, dt, nan] = info.param;
  return pool2d_case_name(c) + (ties == PoolTies::first ? "_first" : "_all") + (dt == DType::f32 ? "_f32" : "_f64") +
         (nan ? "_nan" : "");
}

INSTANTIATE_TEST_SUITE_P(Cases, Pool2dFastVsRef,
                         ::testing::Combine(::testing::ValuesIn(cases_for(kPool2dCases, kCpuTest)),
                                            ::testing::Values(PoolTies::first, PoolTies::all),
                                            ::testing::Values(DType::f32, DType::f64), ::testing::Bool()),
                         case_name);

std::string avg_case_name(const ::testing::TestParamInfo<AvgPool2dFastVsRef::ParamType>& info) {
  const Pool2dCase& c = std::get<0>(info.param);
  return pool2d_case_name(c) + (std::get<2>(info.param) == DType::f32 ? "_f32" : "_f64") +
         (std::get<3>(info.param) ? "_exclude_pad" : "_include_pad");
}

INSTANTIATE_TEST_SUITE_P(Cases, AvgPool2dFastVsRef,
                         ::testing::Combine(::testing::ValuesIn(cases_for(kPool2dCases, kCpuTest)),
                                            ::testing::Values(PoolTies::first),
                                            ::testing::Values(DType::f32, DType::f64), ::testing::Bool()),
                         avg_case_name);

// The fast kernels' channel-blocked loops (engine/layers/layout.h: (N, C/B, H, W, B), B = 8 and
// 16): x and dy handed over in the block, y and dx converted back to plain, against the
// reference on the plain tensors, bit for bit (each lane is one channel's plain scan or sum).
// Every case's geometry with its channels raised to 32 where they fill no block of 16 (two
// blocks of 16, four of 8); max pooling under both tie rules with ties and NaN, average pooling
// with both divisors and every sum order; 1 and 2 threads.
class Pool2dFastBlocked : public ::testing::TestWithParam<std::tuple<Pool2dCase, DType>> {};

void expect_blocked_gives_reference_bits(const Pool2dKernel& fast, const Pool2dParams& p, const Tensor& x,
                                         const Tensor& dy, const Tensor& y_ref, const Tensor& dx_ref,
                                         const std::string& what) {
  for (int blk : {8, 16})
    for (int threads : {1, 2}) {
      ThreadCountGuard guard(threads);
      const Tensor xb = to_block(x, blk), dyb = to_block(dy, blk);
      Tensor y = Tensor::empty(p.y_shape(), x.dtype()).with_block(blk);
      Tensor dx = Tensor::empty(p.x_shape(), x.dtype()).with_block(blk);
      fast.forward(p, xb, y);
      fast.backward(p, xb, dyb, dx);
      ASSERT_EQ(y.channel_block(), blk);
      ASSERT_EQ(dx.channel_block(), blk);
      EXPECT_TRUE(bitwise_equal(to_plain(y), y_ref)) << what << " block " << blk << " threads=" << threads;
      EXPECT_TRUE(bitwise_equal(to_plain(dx), dx_ref)) << what << " block " << blk << " threads=" << threads;
    }
}

TEST_P(Pool2dFastBlocked, MaxAndAverageGiveTheReferenceBits) {
  auto [c, dt] = GetParam();
  const KernelRegistry reg = make_cpu_registry();
  const Pool2dKernel& max = reg.maxpool2d.at(KernelBackend::fast);
  const Pool2dKernel& avg = reg.avgpool2d.at(KernelBackend::fast);
  ASSERT_TRUE(max.any_block);
  ASSERT_TRUE(avg.any_block);
  Pool2dParams p = c.p;
  if (p.c % 16 != 0) p.c = 32;
  for (PoolTies ties : {PoolTies::first, PoolTies::all}) {
    p.ties = ties;
    const Tensor x = tie_heavy_input(p, dt, 31, true);
    const Tensor dy = random_tensor(p.y_shape(), dt, 32);
    Tensor y_ref(p.y_shape(), dt), dx_ref(p.x_shape(), dt);
    maxpool2d_forward_ref(p, x, y_ref);
    maxpool2d_backward_ref(p, x, dy, dx_ref);
    expect_blocked_gives_reference_bits(max, p, x, dy, y_ref, dx_ref,
                                        std::string("max ") + (ties == PoolTies::first ? "first" : "all"));
  }
  p.ties = PoolTies::first;
  const Tensor x = random_tensor(p.x_shape(), dt, 33), dy = random_tensor(p.y_shape(), dt, 34);
  for (bool include_pad : {true, false})
    for (SumOrder order : {SumOrder::ascending, SumOrder::descending, SumOrder::pairwise}) {
      p.count_include_pad = include_pad;
      p.sum_order = order;
      Tensor y_ref(p.y_shape(), dt), dx_ref(p.x_shape(), dt);
      avgpool2d_forward_ref(p, x, y_ref);
      avgpool2d_backward_ref(p, dy, dx_ref);
      expect_blocked_gives_reference_bits(avg, p, x, dy, y_ref, dx_ref,
                                          std::string("avg include_pad=") + (include_pad ? "1" : "0") + " order " +
                                              std::to_string(static_cast<int>(order)));
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, Pool2dFastBlocked,
                         ::testing::Combine(::testing::ValuesIn(cases_for(kPool2dCases, kCpuTest)),
                                            ::testing::Values(DType::f32, DType::f64)),
                         [](const ::testing::TestParamInfo<Pool2dFastBlocked::ParamType>& i) {
                           return pool2d_case_name(std::get<0>(i.param)) +
                                  (std::get<1>(i.param) == DType::f32 ? "_f32" : "_f64");
                         });

// A blocked x with y or dx in another layout, or a block the loops are not built for, is refused
// by name.
TEST(Pool2dFastBlocked, MismatchedLayoutsAreRefused) {
  const KernelRegistry reg = make_cpu_registry();
  const Pool2dKernel& max = reg.maxpool2d.at(KernelBackend::fast);
  const Pool2dKernel& avg = reg.avgpool2d.at(KernelBackend::fast);
  Pool2dParams p = pool(2, 16, 4, 4);
  const Tensor x = to_block(random_tensor(p.x_shape(), DType::f32, 1), 16);
  const Tensor dy = to_block(random_tensor(p.y_shape(), DType::f32, 2), 16);
  Tensor y_plain(p.y_shape(), DType::f32), dx_plain(p.x_shape(), DType::f32);
  Tensor y8 = Tensor::empty(p.y_shape(), DType::f32).with_block(8);
  EXPECT_THAT(error_of([&] { max.forward(p, x, y_plain); }), HasSubstr("maxpool2d_forward_fast: y in channel block 0, x in 16"));
  EXPECT_THAT(error_of([&] { avg.forward(p, x, y8); }), HasSubstr("avgpool2d_forward_fast: y in channel block 8, x in 16"));
  EXPECT_THAT(error_of([&] { max.backward(p, x, dy, dx_plain); }),
              HasSubstr("maxpool2d_backward_fast: dx in channel block 0, x in 16"));
  EXPECT_THAT(error_of([&] { avg.backward(p, x, dy, dx_plain); }), HasSubstr("avgpool2d_backward_fast: dx in channel block 0"));
  p.c = 4;
  const Tensor x4 = to_block(random_tensor(p.x_shape(), DType::f32, 1), 4);
  Tensor y4 = Tensor::empty(p.y_shape(), DType::f32).with_block(4);
  EXPECT_THAT(error_of([&] { max.forward(p, x4, y4); }), HasSubstr("maxpool2d_forward_fast: channel block 4"));
  EXPECT_THAT(error_of([&] { avg.forward(p, x4, y4); }), HasSubstr("avgpool2d_forward_fast: channel block 4"));
}

// The reference itself on a hand-computable case: 2x2 all-equal window.
TEST(Pool2dRef, TiesFirstVsAll) {
  Pool2dParams p;
  p.n = p.c = 1;
  p.h = p.w = 2;
  Tensor x = Tensor::from<float>({1, 1, 2, 2}, {3, 3, 3, 3});
  Tensor dy = Tensor::from<float>({1, 1, 1, 1}, {1});
  Tensor dx({1, 1, 2, 2}, DType::f32);
  p.ties = PoolTies::first;
  maxpool2d_backward_ref(p, x, dy, dx);
  EXPECT_TRUE(bitwise_equal(dx, Tensor::from<float>({1, 1, 2, 2}, {1, 0, 0, 0})));
  p.ties = PoolTies::all;
  maxpool2d_backward_ref(p, x, dy, dx);
  EXPECT_TRUE(bitwise_equal(dx, Tensor::from<float>({1, 1, 2, 2}, {1, 1, 1, 1})));
}

// Padding never wins: an all-negative input keeps negative maxima at the border.
TEST(Pool2dRef, PaddingNeverWins) {
  Pool2dParams p;
  p.n = p.c = 1;
  p.h = p.w = 3;
  p.kh = p.kw = 2;
  p.stride_h = p.stride_w = 2;
  p.pad_t = p.pad_l = 1;
  Tensor x = Tensor::from<float>({1, 1, 3, 3}, {-1, -2, -3, -4, -5, -6, -7, -8, -9});
  Tensor y({1, 1, 2, 2}, DType::f32);
  maxpool2d_forward_ref(p, x, y);
  EXPECT_TRUE(bitwise_equal(y, Tensor::from<float>({1, 1, 2, 2}, {-1, -2, -4, -5})));
}

}  // namespace
