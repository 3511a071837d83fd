// The fast float32 BatchNorm kernel (the registry's `fast` slot) against the reference:
// training forward (y, batch mean, variance, inverse std) and backward (dx, dgamma, dbeta) on
// awkward shapes (odd sizes, S=1 as for BatchNorm1d, a large channel as in ResNet-20's first
// stage, a shifted mean that makes the variance a small difference of large numbers), both
// agreeing with a float64 reference to within float32 rounding; the inference forward and
// backward (y and dx the reference's bits, dgamma/dbeta within rounding); the same bits at 1 and
// 2 threads; float64 input refused by the kernel and sent to the reference by the registry.
// The shapes are tests/cases/batchnorm_cases.h's rows (shared with the CUDA test and the
// benchmark): to add one, append it there.
#include <gtest/gtest.h>

#include <string>

#include "engine/layers/layout.h"
#include "core/ops/batchnorm.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "tests/cases/batchnorm_cases.h"
#include "tests/test_util.h"

namespace {

using namespace driftlab;

Tensor to_f64(const Tensor& t) {
  Tensor r(t.shape(), DType::f64);
  for (int64_t i = 0; i < t.numel(); ++i) r.data<double>()[i] = t.at(i);
  return r;
}

struct Result {
  Tensor y, mean, var, invstd, dx, dg, db;
};

const BatchNormKernel& kernel(bool fast) {
  static const KernelRegistry reg = make_cpu_registry();
  return reg.batchnorm.at(fast ? KernelBackend::fast : KernelBackend::reference);
}

// x, dy, y and dx of a run in channel block blk (0: plain): x and dy handed to the kernel as
// (N,C,S,1) tensors in that block, y and dx converted back to plain (N,C,S) for comparing.
struct Layout {
  const BatchNormCase& c;
  int blk;
  Tensor in(const Tensor& t) const { return blk ? to_block(t.reshape({c.n, c.c, c.s, 1}), blk) : t; }
  Tensor out(DType dt) const {
    return blk ? Tensor::empty({c.n, c.c, c.s, 1}, dt).with_block(blk) : Tensor({c.n, c.c, c.s}, dt);
  }
  Tensor back(const Tensor& t) const { return blk ? to_plain(t).reshape({c.n, c.c, c.s}) : t; }
};

// Inference semantics: running statistics drawn from the case's seed (variance in [0.5, 2]).
// mean/var/invstd are left empty (the inference pass has none).
Result run_infer(const BatchNormCase& c, bool fast, DType dt, int blk = 0) {
  const BatchNormParams p = batchnorm_case_params(c);
  const Shape shape{c.n, c.c, c.s};
  uint64_t seed = 29;
  for (const char* ch = c.name; *ch; ++ch) seed = seed * 31 + static_cast<unsigned char>(*ch);
  Tensor x = random_tensor(shape, DType::f32, seed, c.lo, c.hi);
  Tensor dy = random_tensor(shape, DType::f32, seed + 1);
  Tensor g = random_tensor({c.c}, DType::f32, seed + 2, 0.5, 1.5), b = random_tensor({c.c}, DType::f32, seed + 3);
  Tensor rm = random_tensor({c.c}, DType::f32, seed + 4, c.lo, c.hi), rv = random_tensor({c.c}, DType::f32, seed + 5, 0.5, 2.0);
  if (dt == DType::f64) x = to_f64(x), dy = to_f64(dy), g = to_f64(g), b = to_f64(b), rm = to_f64(rm), rv = to_f64(rv);
  const Layout l{c, blk};
  Result r{l.out(dt), {}, {}, {}, l.out(dt), Tensor({c.c}, dt), Tensor({c.c}, dt)};
  const BatchNormKernel& k = kernel(fast);
  k.forward_infer(p, l.in(x), g, b, rm, rv, r.y);
  k.backward_infer(p, l.in(x), l.in(dy), g, b, rm, rv, r.dx, r.dg, r.db);
  r.y = l.back(r.y);
  r.dx = l.back(r.dx);
  return r;
}

Result run(const BatchNormCase& c, bool fast, DType dt, int blk = 0) {
  const BatchNormParams p = batchnorm_case_params(c);
  const Shape shape{c.n, c.c, c.s};
  uint64_t seed = 17;
  for (const char* ch = c.name; *ch; ++ch) seed = seed * 31 + static_cast<unsigned char>(*ch);
  Tensor x = random_tensor(shape, DType::f32, seed, c.lo, c.hi);
  Tensor dy = random_tensor(shape, DType::f32, seed + 1);
  Tensor g = random_tensor({c.c}, DType::f32, seed + 2, 0.5, 1.5), b = random_tensor({c.c}, DType::f32, seed + 3);
  if (dt == DType::f64) x = to_f64(x), dy = to_f64(dy), g = to_f64(g), b = to_f64(b);
  const Layout l{c, blk};
  Result r{l.out(dt), Tensor({c.c}, dt), Tensor({c.c}, dt), Tensor({c.c}, dt),
           l.out(dt), Tensor({c.c}, dt), Tensor({c.c}, dt)};
  const BatchNormKernel& k = kernel(fast);
  k.forward_train(p, l.in(x), g, b, r.y, r.mean, r.var, r.invstd);
  k.backward_train(p, l.in(x), l.in(dy), g, b, r.mean, r.invstd, r.dx, r.dg, r.db);
  r.y = l.back(r.y);
  r.dx = l.back(r.dx);
  return r;
}

class BatchNormFast : public ::testing::TestWithParam<BatchNormCase> {};

TEST_P(BatchNormFast, MatchesTheFloat64ReferenceAsCloselyAsTheFloat32Reference) {
  const BatchNormCase c = GetParam();
  const Result fast = run(c, true, DType::f32), ref = run(c, false, DType::f32), exact = run(c, false, DType::f64);
  // Tolerance: float32 rounding of a sum of <= 32,768 terms (~sqrt(n) ulps in the float32
  // reference's one chain; the fast kernel's lane sums are shorter) and of the per-element
  // formulas: 2e-5 of the tensor's largest entry holds for both float32 kernels against the
  // float64 reference (a wrong formula -- biased/unbiased, a missing term -- is off by >1e-3).
  // The shifted-mean case divides by a std of 0.29 at values near 100: its outputs carry the
  // rounding of x itself (100 * 2^-24 / 0.29 = 2e-5 of xhat), so it gets 1e-4.
  const double tol = c.lo >= 100.0 ? 1e-4 : 2e-5;
  const std::pair<const char*, Tensor Result::*> fields[] = {{"y", &Result::y},       {"mean", &Result::mean},
                                                             {"var", &Result::var},   {"invstd", &Result::invstd},
                                                             {"dx", &Result::dx},     {"dgamma", &Result::dg},
                                                             {"dbeta", &Result::db}};
  for (const auto& [name, f] : fields) {
    EXPECT_TRUE(near_normwise(fast.*f, exact.*f, tol)) << name << " fast vs float64 reference";
    EXPECT_TRUE(near_normwise(ref.*f, exact.*f, tol)) << name << " float32 reference vs float64 reference";
  }
}

TEST_P(BatchNormFast, InferenceMatchesTheReference) {
  const BatchNormCase c = GetParam();
  const Result fast = run_infer(c, true, DType::f32), ref = run_infer(c, false, DType::f32),
               exact = run_infer(c, false, DType::f64);
  // y and dx are elementwise with a per-channel scale, written as the reference writes them: the
  // same bits. dgamma and dbeta are sums of N*S terms in another order (lanes, rows in double):
  // the 2e-5 of the training sums above; both float32 kernels against the float64 reference.
  EXPECT_TRUE(bitwise_equal(fast.y, ref.y));
  EXPECT_TRUE(bitwise_equal(fast.dx, ref.dx));
  const double tol = c.lo >= 100.0 ? 1e-4 : 2e-5;
  for (Tensor Result::*f : {&Result::y, &Result::dx, &Result::dg, &Result::db}) {
    EXPECT_TRUE(near_normwise(fast.*f, exact.*f, tol)) << "fast vs float64 reference";
    EXPECT_TRUE(near_normwise(ref.*f, exact.*f, tol)) << "float32 reference vs float64 reference";
  }
}

// The kernel's channel-blocked loops (engine/layers/layout.h: (N, C/B, S, B)) against the float64
// reference, with the plain layout's tolerance (per-lane sums over a plane in four partial sums,
// added over images in double: chains as short as the plain kernel's or shorter); the inference y
// and dx elementwise: the plain kernel's bits. Rows whose channels fill blocks of 8 and of 16.
TEST_P(BatchNormFast, ChannelBlockedMatchesTheFloat64ReferenceAndThePlainInferenceBits) {
  const BatchNormCase c = GetParam();
  ASSERT_TRUE(kernel(true).any_block);
  const double tol = c.lo >= 100.0 ? 1e-4 : 2e-5;  // as above
  const Result exact = run(c, false, DType::f64), exact_infer = run_infer(c, false, DType::f64);
  const Result plain_infer = run_infer(c, true, DType::f32);
  for (int blk : {8, 16}) {
    if (c.c % blk != 0) continue;
    SCOPED_TRACE("channel block " + std::to_string(blk));
    const Result r = run(c, true, DType::f32, blk);
    const std::pair<const char*, Tensor Result::*> fields[] = {{"y", &Result::y},       {"mean", &Result::mean},
                                                               {"var", &Result::var},   {"invstd", &Result::invstd},
                                                               {"dx", &Result::dx},     {"dgamma", &Result::dg},
                                                               {"dbeta", &Result::db}};
    for (const auto& [name, f] : fields) EXPECT_TRUE(near_normwise(r.*f, exact.*f, tol)) << name << " blocked vs float64 reference";
    const Result ri = run_infer(c, true, DType::f32, blk);
    EXPECT_TRUE(bitwise_equal(ri.y, plain_infer.y));
    EXPECT_TRUE(bitwise_equal(ri.dx, plain_infer.dx));
    EXPECT_TRUE(near_normwise(ri.dg, exact_infer.dg, tol));
    EXPECT_TRUE(near_normwise(ri.db, exact_infer.db, tol));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, BatchNormFast, ::testing::ValuesIn(cases_for(kBatchNormCases, kCpuTest)),
                         [](const ::testing::TestParamInfo<BatchNormCase>& i) { return batchnorm_case_name(i.param); });

TEST(BatchNormFast, SameBitsForOneAndTwoThreads) {
  const BatchNormCase c = case_named(kBatchNormCases, "resnet_stage1_32x16x1024");
  Result one, two;
  {
    ThreadCountGuard g(1);
    one = run(c, true, DType::f32);
  }
  {
    ThreadCountGuard g(2);
    two = run(c, true, DType::f32);
  }
  EXPECT_TRUE(bitwise_equal(one.y, two.y));
  EXPECT_TRUE(bitwise_equal(one.dx, two.dx));
  EXPECT_TRUE(bitwise_equal(one.dg, two.dg));
}

TEST(BatchNormFast, ChannelBlockedSameBitsForOneAndTwoThreads) {
  const BatchNormCase c = case_named(kBatchNormCases, "resnet_stage1_32x16x1024");
  Result one, two;
  {
    ThreadCountGuard g(1);
    one = run(c, true, DType::f32, 16);
  }
  {
    ThreadCountGuard g(2);
    two = run(c, true, DType::f32, 16);
  }
  for (Tensor Result::*f : {&Result::y, &Result::dx, &Result::dg, &Result::db})
    EXPECT_TRUE(bitwise_equal(one.*f, two.*f));
}

// The plain layout's sums in the order kernels/cpu/fast/batchnorm_fast.cpp states (lane_sums), as
// scalar loops here: element k of a row into lane k % 32, the lanes halved (l += l + h, h = 16 ..
// 1), the rows' sums added in double. Equal bits on every build say the kernel's order is its
// code's, not the vector width the compiler picked (under -march=cascadelake GCC gave the fused
// ReLU's sums 16-byte vectors and the plain ones 32-byte: BnReluFusion failed there).
template <typename F>
double lane_order_sum(int64_t s, F&& term) {
  float acc[32] = {};
  for (int64_t k = 0; k < s; ++k) acc[k % 32] += term(k);
  for (int h = 16; h >= 1; h /= 2)
    for (int l = 0; l < h; ++l) acc[l] += acc[l + h];
  return static_cast<double>(acc[0]);
}

TEST(BatchNormFast, PlainSumsInTheStatedLaneOrderOnEveryBuild) {
  // s: 7 and 1 (only the tail), 63 (a block and a tail), 64 (two blocks), 49, 1024
  for (const char* name :
       {"odd_3x5x7", "conv_odd_spatial", "resnet_like", "shifted_mean_8x3x49", "bn1d_6x4", "resnet_stage1_32x16x1024"}) {
    SCOPED_TRACE(name);
    const BatchNormCase c = case_named(kBatchNormCases, name);
    const Result r = run(c, true, DType::f32);
    uint64_t seed = 17;  // run()'s inputs again
    for (const char* ch = c.name; *ch; ++ch) seed = seed * 31 + static_cast<unsigned char>(*ch);
    const Tensor x = random_tensor({c.n, c.c, c.s}, DType::f32, seed, c.lo, c.hi);
    const Tensor dy = random_tensor({c.n, c.c, c.s}, DType::f32, seed + 1);
    for (int64_t ch = 0; ch < c.c; ++ch) {
      // dgamma's terms dy * xhat with the kernel's own mean and inverse std
      const float mu = r.mean.data<float>()[ch], inv = r.invstd.data<float>()[ch];
      double sx = 0, sdy = 0, sdyx = 0;
      for (int64_t i = 0; i < c.n; ++i) {
        const float* xr = x.data<float>() + (i * c.c + ch) * c.s;
        const float* dr = dy.data<float>() + (i * c.c + ch) * c.s;
        sx += lane_order_sum(c.s, [&](int64_t k) { return xr[k]; });
        sdy += lane_order_sum(c.s, [&](int64_t k) { return dr[k]; });
        sdyx += lane_order_sum(c.s, [&](int64_t k) { return dr[k] * ((xr[k] - mu) * inv); });
      }
      EXPECT_EQ(mu, static_cast<float>(sx / static_cast<double>(c.n * c.s))) << "mean, channel " << ch;
      EXPECT_EQ(r.db.data<float>()[ch], static_cast<float>(sdy)) << "dbeta, channel " << ch;
      EXPECT_EQ(r.dg.data<float>()[ch], static_cast<float>(sdyx)) << "dgamma, channel " << ch;
    }
  }
}

TEST(BatchNormFast, RefusesFloat64AndTheRegistrySendsItToTheReference) {
  const BatchNormCase c = case_named(kBatchNormCases, "odd_3x5x7");
  EXPECT_THROW(run(c, true, DType::f64), Error);
  const KernelRegistry reg = make_cpu_registry();
  EXPECT_STREQ(reg.batchnorm.select(KernelBackend::fast, batchnorm_case_params(c), DType::f64).name, "reference");
  EXPECT_STREQ(reg.batchnorm.select(KernelBackend::fast, batchnorm_case_params(c), DType::f32).name, "fast");
}

}  // namespace
