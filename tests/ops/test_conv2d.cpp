// Fast conv2d kernels (eigen, onednn) against the reference, parameterised over
// (backend x dtype x case): forward (=), backward_data (=), backward_weight (+= into dw, db),
// plus the float64 fallback of oneDNN and bitwise reproducibility with 2 threads.
//
// The cases are tests/cases/conv2d_cases.h's rows (shared with the CUDA test and the
// benchmarks): to add one, append a row there; every backend and dtype picks it up.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/layers/layout.h"
#include "core/ops/conv2d.h"
#include "kernels/cpu/registry.h"
#include "kernels/cpu/ref/ref.h"
#include "tests/cases/conv2d_cases.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

struct ConvTestParam {
  KernelBackend backend;
  DType dtype;
  Conv2dCase c;
};

void PrintTo(const ConvTestParam& tp, std::ostream* os) {
  *os << backend_name(tp.backend) << " " << dtype_name(tp.dtype) << " " << tp.c.name;
}

std::vector<ConvTestParam> conv_params() {
  std::vector<ConvTestParam> out;
  for (KernelBackend b : {KernelBackend::eigen, KernelBackend::onednn})
    for (DType dt : {DType::f32, DType::f64}) {
      if (b == KernelBackend::onednn && dt == DType::f64) continue;  // no double path: see Onednn*Fallback
      for (const Conv2dCase& c : cases_for(kConv2dCases, kCpuTest)) out.push_back({b, dt, c});
    }
  return out;
}

// Inputs in [-1, 1], so every product has magnitude <= 1. Fast and reference kernels add the
// same `terms` products in different orders (blocked GEMM, FMA, per-thread partials). Each
// addition rounds by <= eps/2 of a partial sum whose size grows like sqrt(terms) for random
// signs, so the two results drift apart by ~ sqrt(terms) * sqrt(terms) * eps / 2 in the worst
// realistic case; 8 * terms * eps leaves a wide margin and is still ~1e-12 relative in double.
double sum_atol(int64_t terms, DType dt) {
  return 8.0 * static_cast<double>(std::max<int64_t>(terms, 1)) * dtype_eps(dt);
}
// Relative part: the final rounding of the output (bias add, adding into dw) is one eps of |ref|.
double out_rtol(DType dt) { return 4.0 * dtype_eps(dt); }

class Conv2dFastVsRef : public ::testing::TestWithParam<ConvTestParam> {
 protected:
  const Conv2dKernel& fast() {
    const ConvTestParam& tp = GetParam();
    const Conv2dKernel& k = reg_.conv2d.at(tp.backend);
    EXPECT_STREQ(k.name, backend_name(tp.backend));
    EXPECT_TRUE(k.supports(tp.c.p, tp.dtype)) << tp.c.p.str();
    return k;
  }
  KernelRegistry reg_ = make_cpu_registry();
};

TEST_P(Conv2dFastVsRef, Forward) {
  const ConvTestParam& tp = GetParam();
  const Conv2dParams& p = tp.c.p;
  Tensor x = random_tensor(p.x_shape(), tp.dtype, 1), w = random_tensor(p.w_shape(), tp.dtype, 2);
  Tensor b = random_tensor({p.k}, tp.dtype, 3);
  const Tensor* bp = tp.c.bias ? &b : nullptr;
  Tensor y(p.y_shape(), tp.dtype), y_ref(p.y_shape(), tp.dtype);
  y.fill(std::numeric_limits<double>::quiet_NaN());  // forward writes (=): no NaN may survive
  fast().forward(p, x, w, bp, y);
  conv2d_forward_ref(p, x, w, bp, y_ref);
  EXPECT_TRUE(all_close(y, y_ref, sum_atol(p.c * p.r * p.s + 1, tp.dtype), out_rtol(tp.dtype))) << p.str();
}

TEST_P(Conv2dFastVsRef, BackwardData) {
  const ConvTestParam& tp = GetParam();
  const Conv2dParams& p = tp.c.p;
  Tensor dy = random_tensor(p.y_shape(), tp.dtype, 4), w = random_tensor(p.w_shape(), tp.dtype, 5);
  Tensor dx(p.x_shape(), tp.dtype), dx_ref(p.x_shape(), tp.dtype);
  dx.fill(std::numeric_limits<double>::quiet_NaN());  // backward_data writes (=)
  fast().backward_data(p, dy, w, dx);
  conv2d_backward_data_ref(p, dy, w, dx_ref);
  // Each dx element sums at most K*R*S products.
  EXPECT_TRUE(all_close(dx, dx_ref, sum_atol(p.k * p.r * p.s, tp.dtype), out_rtol(tp.dtype))) << p.str();
}

TEST_P(Conv2dFastVsRef, BackwardWeightAccumulates) {
  const ConvTestParam& tp = GetParam();
  const Conv2dParams& p = tp.c.p;
  Tensor x = random_tensor(p.x_shape(), tp.dtype, 6), dy = random_tensor(p.y_shape(), tp.dtype, 7);
  // Pre-filled with known values: backward_weight must add (+=), not overwrite.
  Tensor dw = random_tensor(p.w_shape(), tp.dtype, 8, -3.0, 3.0), db = random_tensor({p.k}, tp.dtype, 9, -3.0, 3.0);
  Tensor dw_ref = dw.clone(), db_ref = db.clone();
  Tensor* dbp = tp.c.bias ? &db : nullptr;
  Tensor* dbp_ref = tp.c.bias ? &db_ref : nullptr;
  fast().backward_weight(p, x, dy, dw, dbp);
  conv2d_backward_weight_ref(p, x, dy, dw_ref, dbp_ref);
  // Each dw and db element sums N*P*Q products, then is added to a value of magnitude <= 3.
  const int64_t terms = p.n * p.out_h() * p.out_w();
  EXPECT_TRUE(all_close(dw, dw_ref, sum_atol(terms, tp.dtype), out_rtol(tp.dtype))) << p.str();
  EXPECT_TRUE(all_close(db, db_ref, sum_atol(terms, tp.dtype), out_rtol(tp.dtype))) << p.str();
  // Adding twice gives twice the gradient: the kernel neither zeroes nor caches dw.
  fast().backward_weight(p, x, dy, dw, dbp);
  conv2d_backward_weight_ref(p, x, dy, dw_ref, dbp_ref);
  EXPECT_TRUE(all_close(dw, dw_ref, 2 * sum_atol(terms, tp.dtype), out_rtol(tp.dtype))) << p.str();
}

std::string conv_param_name(const ::testing::TestParamInfo<ConvTestParam>& info) {
  return std::string(backend_name(info.param.backend)) + "_" + dtype_name(info.param.dtype) + "_" +
         conv2d_case_name(info.param.c);
}

INSTANTIATE_TEST_SUITE_P(Cases, Conv2dFastVsRef, ::testing::ValuesIn(conv_params()), conv_param_name);

// w rotated 180 degrees in (R,S): the kernel a flipped conv applies.
Tensor rotated(const Tensor& w) {
  Tensor out = w.clone();
  const int64_t rs = w.dim(2) * w.dim(3);
  dispatch_dtype(w.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = w.data<T>();
    T* dst = out.data<T>();
    for (int64_t i = 0; i < w.numel(); ++i) dst[i] = src[i - i % rs + rs - 1 - i % rs];
  });
  return out;
}

class Conv2dFlip : public ::testing::TestWithParam<std::pair<KernelBackend, DType>> {};

// flip on w == no flip on rotated w (forward, backward_data), and the flipped weight gradient is
// the rotated unflipped one. The unflipped call runs first on the same shape, so a kernel that
// caches per shape must not carry flip state over.
TEST_P(Conv2dFlip, EqualsRotatedKernel) {
  const auto [backend, dtype] = GetParam();
  const KernelRegistry reg = make_cpu_registry();
  const Conv2dKernel& k = reg.conv2d.at(backend);
  Conv2dParams plain = conv(3, 5, 9, 8, 6, 3, 2).pad(1, 0, 1, 0).stride(1, 2);
  Conv2dParams flipped = plain;
  flipped.flip = true;
  Tensor x = random_tensor(plain.x_shape(), dtype, 51), w = random_tensor(plain.w_shape(), dtype, 52);
  Tensor dy = random_tensor(plain.y_shape(), dtype, 53), w_rot = rotated(w);
  Tensor y_plain(plain.y_shape(), dtype), y_flip(plain.y_shape(), dtype);
  Tensor dx_plain(plain.x_shape(), dtype), dx_flip(plain.x_shape(), dtype);
  Tensor dw_plain(plain.w_shape(), dtype), dw_flip(plain.w_shape(), dtype);
  k.forward(plain, x, w_rot, nullptr, y_plain);
  k.backward_data(plain, dy, w_rot, dx_plain);
  k.backward_weight(plain, x, dy, dw_plain, nullptr);
  k.forward(flipped, x, w, nullptr, y_flip);
  k.backward_data(flipped, dy, w, dx_flip);
  k.backward_weight(flipped, x, dy, dw_flip, nullptr);
  // Same products, possibly summed in another order (Eigen's im2col rows are permuted by flip).
  EXPECT_TRUE(all_close(y_flip, y_plain, sum_atol(plain.c * plain.r * plain.s, dtype), out_rtol(dtype)));
  EXPECT_TRUE(all_close(dx_flip, dx_plain, sum_atol(plain.k * plain.r * plain.s, dtype), out_rtol(dtype)));
  const int64_t dw_terms = plain.n * plain.out_h() * plain.out_w();
  EXPECT_TRUE(all_close(dw_flip, rotated(dw_plain), sum_atol(dw_terms, dtype), out_rtol(dtype)));
}

INSTANTIATE_TEST_SUITE_P(Backends, Conv2dFlip,
                         ::testing::Values(std::make_pair(KernelBackend::eigen, DType::f32),
                                           std::make_pair(KernelBackend::eigen, DType::f64),
                                           std::make_pair(KernelBackend::onednn, DType::f32)),
                         [](const auto& info) {
                           return std::string(backend_name(info.param.first)) + "_" + dtype_name(info.param.second);
                         });

TEST(Conv2dOnednn, Float64FallsBackToReference) {
  const KernelRegistry reg = make_cpu_registry();
  const Conv2dParams p = conv(2, 3, 8, 8, 4, 3, 3);
  EXPECT_FALSE(reg.conv2d.at(KernelBackend::onednn).supports(p, DType::f64));
  EXPECT_STREQ(reg.conv2d.select(KernelBackend::onednn, p, DType::f64).name, "reference");
  EXPECT_STREQ(reg.conv2d.select(KernelBackend::onednn, p, DType::f32).name, "onednn");
}

// The training pair (Conv2dKernel::forward_keep / backward_both): x kept in the primitive's layout
// from the forward, dy reordered once for both gradients; the same primitives on the same bytes,
// so the separate calls' bits exactly, with either gradient alone too. Shapes: ResNet-20's
// blocked layers (where there is something to keep: checked), a strided one, the 3-channel first
// layer, a flipped kernel without bias.
TEST(Conv2dOnednn, KeptReordersGiveTheSeparateCallsBits) {
  ThreadCountGuard threads(2);
  const KernelRegistry reg = make_cpu_registry();
  const Conv2dKernel& k = reg.conv2d.at(KernelBackend::onednn);
  ASSERT_TRUE(k.forward_keep && k.backward_both);
  struct Case {
    Conv2dParams p;
    bool bias, blocked;
  };
  const Case cases[] = {{conv(5, 16, 32, 32, 16, 3, 3).pad(1), true, true},
                        {conv(4, 16, 16, 16, 32, 3, 3).pad(1).stride(2), true, true},
                        {conv(3, 3, 32, 32, 16, 3, 3).pad(1), true, false},
                        {conv(3, 16, 10, 10, 16, 3, 3).pad(1).flip(), false, true},
                        // run as GEMMs (dense plane): nothing kept
                        {conv(3, 32, 2, 2, 16, 3, 3).pad(1), true, false}};
  for (const Case& c : cases) {
    const Conv2dParams& p = c.p;
    SCOPED_TRACE(p.str());
    const Tensor x = random_tensor(p.x_shape(), DType::f32, 21), w = random_tensor(p.w_shape(), DType::f32, 22);
    const Tensor b = random_tensor({p.k}, DType::f32, 23), dy = random_tensor(p.y_shape(), DType::f32, 24);
    const Tensor dw0 = random_tensor(p.w_shape(), DType::f32, 25), db0 = random_tensor({p.k}, DType::f32, 26);
    const Tensor* bp = c.bias ? &b : nullptr;
    Tensor y1(p.y_shape(), DType::f32), dx1(p.x_shape(), DType::f32), dw1 = dw0.clone(), db1 = db0.clone();
    k.forward(p, x, w, bp, y1);
    k.backward_data(p, dy, w, dx1);
    k.backward_weight(p, x, dy, dw1, c.bias ? &db1 : nullptr);
    Tensor y2(p.y_shape(), DType::f32), dx2(p.x_shape(), DType::f32), dw2 = dw0.clone(), db2 = db0.clone();
    std::shared_ptr<void> keep;
    k.forward_keep(p, x, w, bp, y2, &keep);
    if (c.blocked) EXPECT_TRUE(keep) << "a blocked layer's x is reordered: there is something to keep";
    k.backward_both(p, x, dy, w, &dx2, &dw2, c.bias ? &db2 : nullptr, keep);
    EXPECT_TRUE(bitwise_equal(y2, y1));
    EXPECT_TRUE(bitwise_equal(dx2, dx1));
    EXPECT_TRUE(bitwise_equal(dw2, dw1));
    EXPECT_TRUE(bitwise_equal(db2, db1));
    Tensor dx3(p.x_shape(), DType::f32), dw3 = dw0.clone(), db3 = db0.clone();
    k.backward_both(p, x, dy, w, &dx3, nullptr, nullptr, nullptr);  // dx alone
    k.backward_both(p, x, dy, w, nullptr, &dw3, c.bias ? &db3 : nullptr, keep);  // the gradients alone
    EXPECT_TRUE(bitwise_equal(dx3, dx1));
    EXPECT_TRUE(bitwise_equal(dw3, dw1));
    EXPECT_TRUE(bitwise_equal(db3, db1));
  }
}

// Channel-blocked activations (engine/layers/layout.h): x, y, dy, dx handed over in nChw8c or
// nChw16c, each as its Tensor says, run the same primitives as plain ones: the same bits once
// converted back (the conversions move elements, they compute nothing). In the kernel's own block
// nothing of x needs keeping for the weight gradient. Mixed: the 3-channel first layer (plain x,
// blocked y) and a blocked x with a plain y.
TEST(Conv2dOnednn, BlockedActivationsGiveThePlainBits) {
  ThreadCountGuard threads(2);
  const KernelRegistry reg = make_cpu_registry();
  const Conv2dKernel& k = reg.conv2d.at(KernelBackend::onednn);
  ASSERT_TRUE(k.channel_block);
  const int own = k.channel_block();
  struct Case {
    Conv2dParams p;
    bool bias;
  };
  const Case cases[] = {{conv(5, 16, 32, 32, 16, 3, 3).pad(1), true},
                        {conv(4, 16, 16, 16, 32, 3, 3).pad(1).stride(2), true},
                        {conv(3, 3, 12, 12, 16, 3, 3).pad(1), true},
                        {conv(3, 16, 10, 10, 16, 3, 3).pad(1).flip(), false},
                        // run as GEMMs (dense plane), the flattened vectors in one layout whatever the caller's
                        {conv(3, 32, 2, 2, 48, 3, 3).pad(1), true},
                        {conv(2, 24, 1, 1, 16, 3, 3).pad(1).flip(), false}};
  for (const Case& c : cases) {
    const Conv2dParams& p = c.p;
    const Tensor x = random_tensor(p.x_shape(), DType::f32, 31), w = random_tensor(p.w_shape(), DType::f32, 32);
    const Tensor b = random_tensor({p.k}, DType::f32, 33), dy = random_tensor(p.y_shape(), DType::f32, 34);
    const Tensor* bp = c.bias ? &b : nullptr;
    Tensor y1(p.y_shape(), DType::f32), dx1(p.x_shape(), DType::f32), dw1(p.w_shape(), DType::f32),
        db1({p.k}, DType::f32);
    k.forward(p, x, w, bp, y1);
    k.backward_data(p, dy, w, dx1);
    k.backward_weight(p, x, dy, dw1, c.bias ? &db1 : nullptr);
    for (int blk : {8, 16}) {
      for (int xb : {0, blk}) {
        for (int yb : {0, blk}) {
          if ((xb == 0 && yb == 0) || p.c % std::max(xb, 1) != 0) continue;
          SCOPED_TRACE(p.str() + " x block " + std::to_string(xb) + " y block " + std::to_string(yb));
          const Tensor xl = to_block(x, xb), dyl = to_block(dy, yb);
          Tensor y2 = Tensor::empty(p.y_shape(), DType::f32).with_block(yb);
          Tensor dx2 = Tensor::empty(p.x_shape(), DType::f32).with_block(xb);
          Tensor dw2(p.w_shape(), DType::f32), db2({p.k}, DType::f32);
          std::shared_ptr<void> keep;
          k.forward_keep(p, xl, w, bp, y2, &keep);
          if (xb == own && own != 0) EXPECT_FALSE(keep) << "x already in the primitive's layout: nothing to keep";
          k.backward_both(p, xl, dyl, w, &dx2, &dw2, c.bias ? &db2 : nullptr, keep);
          EXPECT_TRUE(bitwise_equal(to_plain(y2), y1));
          EXPECT_TRUE(bitwise_equal(to_plain(dx2), dx1));
          EXPECT_TRUE(bitwise_equal(dw2, dw1));
          EXPECT_TRUE(bitwise_equal(db2, db1));
        }
      }
    }
  }
}

// conv_algorithm=winograd (core/ops/conv2d.h): the oneDNN kernel runs oneDNN's F(4x4, 3x3) Winograd
// primitives where oneDNN has one (AVX-512 builds of oneDNN 2.6: jit_wino_4x3), for all three passes,
// and the direct ones elsewhere (another ISA, a stride, a dense-layer convolution), with the direct
// bits there. Each pass against float64 sums: the largest error over the largest sum of |terms| of one
// output stays below 1e-4. Why that line: a structural fault (a tap, a tile edge, a layout, a
// transform entry wrong) misplaces at least one term, and a term here is about 1/288 of that scale
// on average (32 channels x 9 taps of values in [-1, 1]): 3e-3 or more; Winograd's own rounding on
// the models' layers measured 2.4e-8 to 1.5e-6 of it (bench/bm_conv_algorithms, docs/BENCHMARKS.md),
// direct's 1.5e-9 to 2.3e-7. And where Winograd runs, its forward's bits differ from direct's somewhere.
TEST(Conv2dOnednn, WinogradWhereOneDnnHasItDirectElsewhere) {
  const KernelRegistry reg = make_cpu_registry();
  const Conv2dKernel& k = reg.conv2d.at(KernelBackend::onednn);
  ASSERT_TRUE(k.algorithm);
  Conv2dParams p = conv(2, 32, 8, 8, 32, 3, 3).pad(1);
  Conv2dParams pw = p;
  pw.algorithm = ConvAlgorithm::winograd;
  const bool has = std::string(k.algorithm(pw)) == "winograd";
  if (!has) EXPECT_STREQ(k.algorithm(pw), "direct");
  const Tensor x = random_tensor(p.x_shape(), DType::f32, 1), w = random_tensor(p.w_shape(), DType::f32, 2),
               b = random_tensor({p.k}, DType::f32, 3), dy = random_tensor(p.y_shape(), DType::f32, 4);
  auto abs64 = [](const Tensor& t) {
    Tensor a = t.to(DType::f64);
    for (int64_t i = 0; i < a.numel(); ++i) a.data<double>()[i] = std::fabs(a.data<double>()[i]);
    return a;
  };
  const Tensor x64 = x.to(DType::f64), w64 = w.to(DType::f64), b64 = b.to(DType::f64), dy64 = dy.to(DType::f64);
  Tensor y64(p.y_shape(), DType::f64), ys(p.y_shape(), DType::f64), dx64(p.x_shape(), DType::f64),
      dxs(p.x_shape(), DType::f64), dw64(p.w_shape(), DType::f64), dws(p.w_shape(), DType::f64), db64({p.k}, DType::f64),
      dbs({p.k}, DType::f64);
  conv2d_forward_ref(p, x64, w64, &b64, y64);
  conv2d_backward_data_ref(p, dy64, w64, dx64);
  conv2d_backward_weight_ref(p, x64, dy64, dw64, &db64);
  const Tensor ab = abs64(b);
  conv2d_forward_ref(p, abs64(x), abs64(w), &ab, ys);  // each output's sum of |terms|
  conv2d_backward_data_ref(p, abs64(dy), abs64(w), dxs);
  conv2d_backward_weight_ref(p, abs64(x), abs64(dy), dws, &dbs);
  auto rel_error = [](const Tensor& got, const Tensor& exact, const Tensor& scale) {
    double worst = 0, top = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(got.data<float>()[i]) - exact.data<double>()[i]));
      top = std::max(top, scale.data<double>()[i]);
    }
    return worst / top;
  };
  struct Out {
    Tensor y, dx, dw, db;
  };
  auto run = [&](const Conv2dParams& q) {
    Out o{Tensor(q.y_shape(), DType::f32), Tensor(q.x_shape(), DType::f32), Tensor(q.w_shape(), DType::f32),
          Tensor({q.k}, DType::f32)};
    k.forward(q, x, w, &b, o.y);
    k.backward_data(q, dy, w, o.dx);
    k.backward_weight(q, x, dy, o.dw, &o.db);  // adds into the zeros
    return o;
  };
  const Out direct = run(p), wino = run(pw);
  for (const Out* o : {&direct, &wino}) {
    SCOPED_TRACE(o == &direct ? "direct" : "winograd");
    EXPECT_LT(rel_error(o->y, y64, ys), 1e-4);
    EXPECT_LT(rel_error(o->dx, dx64, dxs), 1e-4);
    EXPECT_LT(rel_error(o->dw, dw64, dws), 1e-4);
    EXPECT_LT(rel_error(o->db, db64, dbs), 1e-4);
  }
  if (has) {
    EXPECT_FALSE(bitwise_equal(wino.y, direct.y)) << "the Winograd forward gave the direct bits";
    std::printf("winograd / direct forward error over the scale: %.3g / %.3g\n", rel_error(wino.y, y64, ys),
                rel_error(direct.y, y64, ys));
  } else {
    EXPECT_TRUE(bitwise_equal(wino.y, direct.y));
    EXPECT_TRUE(bitwise_equal(wino.dx, direct.dx));
    EXPECT_TRUE(bitwise_equal(wino.dw, direct.dw));
  }
  // No Winograd primitive for a stride, and a dense-layer convolution stays a matrix product: the
  // direct bits.
  Conv2dParams s2 = conv(2, 32, 8, 8, 32, 3, 3).pad(1).stride(2), s2w = s2;
  s2w.algorithm = ConvAlgorithm::winograd;
  EXPECT_STREQ(k.algorithm(s2w), "direct");
  Tensor y1(s2.y_shape(), DType::f32), y2(s2.y_shape(), DType::f32);
  k.forward(s2, x, w, &b, y1);
  k.forward(s2w, x, w, &b, y2);
  EXPECT_TRUE(bitwise_equal(y1, y2));
  Conv2dParams dense = conv(2, 32, 2, 2, 32, 3, 3).pad(1);
  dense.algorithm = ConvAlgorithm::winograd;
  EXPECT_STREQ(k.algorithm(dense), "gemm");
}

// The oneDNN backend runs a convolution whose every output position meets every input position at
// one kernel tap as GEMMs over the flattened planes, and every other one with oneDNN's direct
// kernels; the choice depends only on the shape. VGG-16's 2x2 layers are such convolutions, its 4x4
// ones are not (a corner output misses the far input row), nor is a 1x1 kernel on a plane of more
// than one position, nor a stride that skips inputs.
TEST(Conv2dOnednn, DenseLayerConvolutionsRunAsGemm) {
  const KernelRegistry reg = make_cpu_registry();
  const Conv2dKernel& k = reg.conv2d.at(KernelBackend::onednn);
  ASSERT_TRUE(k.algorithm);
  EXPECT_STREQ(k.algorithm(conv(128, 512, 2, 2, 512, 3, 3).pad(1)), "gemm");
  EXPECT_STREQ(k.algorithm(conv(128, 512, 1, 1, 512, 3, 3).pad(1)), "gemm");
  EXPECT_STREQ(k.algorithm(conv(2, 16, 3, 3, 32, 5, 5).pad(2)), "gemm");
  EXPECT_STREQ(k.algorithm(conv(2, 3, 2, 2, 4, 2, 2)), "gemm");  // a kernel as large as the plane, no padding
  EXPECT_STREQ(k.algorithm(conv(128, 512, 4, 4, 512, 3, 3).pad(1)), "direct");
  EXPECT_STREQ(k.algorithm(conv(2, 16, 2, 2, 16, 1, 1)), "direct");
  EXPECT_STREQ(k.algorithm(conv(2, 16, 3, 3, 16, 3, 3).pad(1).stride(2)), "direct");
  EXPECT_STREQ(k.algorithm(conv(2, 16, 2, 2, 16, 3, 3).dilation(2).pad(2)), "direct");  // dilation skips a pair
  // A gathered matrix past 16 Mi floats: (1024*4) x (2048*4) = 32 Mi.
  EXPECT_STREQ(k.algorithm(conv(2, 2048, 2, 2, 1024, 3, 3).pad(1)), "direct");
  for (const Conv2dCase& c : kConv2dCases)
    if (std::string(c.name).rfind("dense_plane", 0) == 0 || std::string(c.name) == "vgg16_c5")
      EXPECT_STREQ(k.algorithm(c.p), "gemm") << c.name;
}

TEST(Conv2dFast, ShapeErrorsNameTheArgument) {
  const KernelRegistry reg = make_cpu_registry();
  const Conv2dParams p = conv(2, 3, 8, 8, 4, 3, 3);
  Tensor x(p.x_shape(), DType::f32), w({4, 3, 3, 2}, DType::f32), y(p.y_shape(), DType::f32);
  for (KernelBackend b : {KernelBackend::eigen, KernelBackend::onednn}) {
    try {
      reg.conv2d.at(b).forward(p, x, w, nullptr, y);
      ADD_FAILURE() << backend_name(b) << ": no error for a wrong weight shape";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("w has shape [4,3,3,2], expected [4,3,3,3]"), std::string::npos) << e.what();
    }
  }
}

class Conv2dReproducible : public ::testing::TestWithParam<std::pair<KernelBackend, DType>> {};

// Same inputs twice with 2 threads: bitwise-identical y, dx, dw, db (DESIGN rule 6).
TEST_P(Conv2dReproducible, TwoThreadsBitwiseIdentical) {
  const auto [backend, dtype] = GetParam();
  ThreadCountGuard threads(2);
  const KernelRegistry reg = make_cpu_registry();
  const Conv2dKernel& k = reg.conv2d.at(backend);
  const Conv2dParams p = conv(9, 6, 12, 12, 16, 5, 5).pad(1, 0, 0, 2);
  Tensor x = random_tensor(p.x_shape(), dtype, 11), w = random_tensor(p.w_shape(), dtype, 12);
  Tensor b = random_tensor({p.k}, dtype, 13), dy = random_tensor(p.y_shape(), dtype, 14);
  Tensor out[2][4];
  for (Tensor(&o)[4] : out) {
    o[0] = Tensor(p.y_shape(), dtype);
    o[1] = Tensor(p.x_shape(), dtype);
    o[2] = Tensor(p.w_shape(), dtype);
    o[3] = Tensor({p.k}, dtype);
    o[2].fill(0.25);
    o[3].fill(-0.5);
    k.forward(p, x, w, &b, o[0]);
    k.backward_data(p, dy, w, o[1]);
    k.backward_weight(p, x, dy, o[2], &o[3]);
  }
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(bitwise_equal(out[0][i], out[1][i])) << "output " << i;
}

INSTANTIATE_TEST_SUITE_P(Backends, Conv2dReproducible,
                         ::testing::Values(std::make_pair(KernelBackend::eigen, DType::f32),
                                           std::make_pair(KernelBackend::eigen, DType::f64),
                                           std::make_pair(KernelBackend::onednn, DType::f32)),
                         [](const auto& info) {
                           return std::string(backend_name(info.param.first)) + "_" + dtype_name(info.param.second);
                         });

}  // namespace
}  // namespace driftlab

namespace driftlab {
namespace {

// The reference's depthwise loops (one input channel per group, ascending sums: see
// kernels/cpu/ref/conv2d_ref.cpp) give the generic loops' bits: forward, input gradient and
// weight/bias gradients, float32 and float64, with padding on every side, strides, dilation,
// flip, a multiplier above 1, odd sizes, both forward loops (planes; channels innermost from 8
// channels on) and at 1 and 2 threads. Bitwise equality, not a bound:
// every output adds the same terms in the same order.
TEST(ConvRef, DepthwiseLoopsGiveTheGenericLoopsBits) {
  struct Case {
    int64_t n, c, h, w, mult, r, s, sh, sw, dh, dw, pt, pb, pl, pr;
    bool flip;
  };
  const Case cases[] = {
      {2, 8, 16, 16, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false},  // MobileNet's 3x3, stride 1
      {2, 8, 16, 16, 1, 3, 3, 2, 2, 1, 1, 0, 1, 0, 1, false},  // stride 2, TF's 'same' split
      {1, 6, 9, 11, 2, 3, 5, 2, 1, 1, 2, 2, 1, 0, 3, true},   // multiplier 2, rectangular, dilated, flipped
      {3, 4, 5, 5, 1, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2, false},   // a kernel as large as the input
      {2, 5, 1, 1, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, false},   // 1x1 maps (the end of MobileNetV2 at 32x32)
      {1, 3, 7, 8, 1, 3, 3, 3, 2, 2, 1, 3, 0, 1, 2, true},    // stride 3x2, asymmetric pads
      {2, 16, 6, 6, 1, 3, 3, 1, 1, 2, 2, 2, 1, 1, 2, true},   // 16 channels (channels-inner forward), dilated, flipped
      {3, 24, 2, 2, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false},  // 2x2 planes, MobileNetV2's late layers at 32x32
  };
  for (const Case& c : cases)
    for (DType dt : {DType::f32, DType::f64})
      for (int threads : {1, 2}) {
        Conv2dParams p;
        p.n = c.n, p.c = c.c, p.h = c.h, p.w = c.w, p.k = c.c * c.mult, p.r = c.r, p.s = c.s;
        p.stride_h = c.sh, p.stride_w = c.sw, p.dil_h = c.dh, p.dil_w = c.dw;
        p.pad_t = c.pt, p.pad_b = c.pb, p.pad_l = c.pl, p.pad_r = c.pr, p.groups = c.c, p.flip = c.flip;
        p.sum_order = SumOrder::ascending;
        SCOPED_TRACE(p.str() + (dt == DType::f64 ? " f64" : " f32") + " threads " + std::to_string(threads));
        const Tensor x = random_tensor(p.x_shape(), dt, 1, -1.0, 1.0), w = random_tensor(p.w_shape(), dt, 2, -1.0, 1.0);
        const Tensor b = random_tensor({p.k}, dt, 3, -1.0, 1.0), dy = random_tensor(p.y_shape(), dt, 4, -1.0, 1.0);
        auto run = [&](bool generic) {
          std::unique_ptr<Conv2dRefGenericLoops> only = generic ? std::make_unique<Conv2dRefGenericLoops>() : nullptr;
          const int saved = omp_get_max_threads();
          omp_set_num_threads(threads);
          Tensor y(p.y_shape(), dt), dx(p.x_shape(), dt), dw = random_tensor(p.w_shape(), dt, 5), db = random_tensor({p.k}, dt, 6);
          conv2d_forward_ref(p, x, w, &b, y);
          conv2d_backward_data_ref(p, dy, w, dx);
          conv2d_backward_weight_ref(p, x, dy, dw, &db);  // accumulates into the same starting values
          omp_set_num_threads(saved);
          return std::vector<Tensor>{y, dx, dw, db};
        };
        const std::vector<Tensor> generic = run(true), depthwise = run(false);
        const char* names[] = {"y", "dx", "dw", "db"};
        for (int i = 0; i < 4; ++i)
          EXPECT_TRUE(bitwise_equal(generic[static_cast<std::size_t>(i)], depthwise[static_cast<std::size_t>(i)])) << names[i];
      }
}

// The reference's depthwise loops on channel-blocked tensors (Conv2dKernel::any_block: a graph keeps
// its activations blocked through MobileNet's depthwise layers) against the generic loops on plain
// ones: y, dx, dw and db bit for bit, blocks of 8 and 16, both dtypes, one and two threads.
TEST(ConvRef, BlockedDepthwiseGivesTheGenericLoopsBits) {
  struct Case {
    int64_t n, c, h, w, r, s, sh, sw, dh, dw, pt, pb, pl, pr;
    bool flip, bias;
  };
  const Case cases[] = {
      {2, 16, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true},   // MobileNet's 3x3, stride 1
      {2, 32, 9, 9, 3, 3, 2, 2, 1, 1, 0, 1, 0, 1, false, false},  // stride 2, TF's 'same' split, no bias
      {1, 48, 5, 7, 3, 5, 2, 1, 2, 1, 2, 1, 0, 3, true, true},    // rectangular, dilated, flipped
      {3, 16, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true},   // a 1x1 plane: every tap but one reads padding
      {2, 64, 2, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, true},   // 2x2 planes, MobileNetV2's late layers at 32x32
      {2, 16, 3, 12, 1, 9, 1, 2, 1, 1, 0, 0, 4, 4, true, true},   // a 1x9 row: more taps than the weight gradient sums side by side
  };
  for (const Case& c : cases)
    for (DType dt : {DType::f32, DType::f64})
      for (int block : {8, 16})
        for (int threads : {1, 2}) {
          Conv2dParams p;
          p.n = c.n, p.c = c.c, p.h = c.h, p.w = c.w, p.k = c.c, p.r = c.r, p.s = c.s;
          p.stride_h = c.sh, p.stride_w = c.sw, p.dil_h = c.dh, p.dil_w = c.dw;
          p.pad_t = c.pt, p.pad_b = c.pb, p.pad_l = c.pl, p.pad_r = c.pr, p.groups = c.c, p.flip = c.flip;
          p.sum_order = SumOrder::ascending;
          SCOPED_TRACE(p.str() + (dt == DType::f64 ? " f64" : " f32") + " block " + std::to_string(block) + " threads " +
                       std::to_string(threads));
          const Tensor x = random_tensor(p.x_shape(), dt, 1, -1.0, 1.0), w = random_tensor(p.w_shape(), dt, 2, -1.0, 1.0);
          const Tensor b = random_tensor({p.k}, dt, 3, -1.0, 1.0), dy = random_tensor(p.y_shape(), dt, 4, -1.0, 1.0);
          const Tensor* bp = c.bias ? &b : nullptr;
          const int saved = omp_get_max_threads();
          omp_set_num_threads(threads);
          Tensor y(p.y_shape(), dt), dx(p.x_shape(), dt), dw = random_tensor(p.w_shape(), dt, 5), db = random_tensor({p.k}, dt, 6);
          {
            Conv2dRefGenericLoops only;
            conv2d_forward_ref(p, x, w, bp, y);
            conv2d_backward_data_ref(p, dy, w, dx);
            conv2d_backward_weight_ref(p, x, dy, dw, &db);
          }
          const Tensor xb = to_block(x, block), dyb = to_block(dy, block);
          Tensor yb = Tensor::empty(p.y_shape(), dt).with_block(block), dxb = Tensor::empty(p.x_shape(), dt).with_block(block);
          Tensor dwb = random_tensor(p.w_shape(), dt, 5), dbb = random_tensor({p.k}, dt, 6);
          const KernelRegistry reg = make_cpu_registry();
          const Conv2dKernel& ref = reg.conv2d.reference();
          ASSERT_TRUE(ref.any_block && ref.any_block(p, dt));
          conv2d_forward_ref(p, xb, w, bp, yb);
          conv2d_backward_data_ref(p, dyb, w, dxb);
          conv2d_backward_weight_ref(p, xb, dyb, dwb, &dbb);
          omp_set_num_threads(saved);
          EXPECT_TRUE(bitwise_equal(y, to_plain(yb))) << "y";
          EXPECT_TRUE(bitwise_equal(dx, to_plain(dxb))) << "dx";
          EXPECT_TRUE(bitwise_equal(dw, dwb)) << "dw";
          EXPECT_TRUE(bitwise_equal(db, dbb)) << "db";
        }
}

// Blocked tensors are refused by name outside that case: another convolution, tensors in two
// layouts, and the kernel says which params it takes them for.
TEST(ConvRef, BlockedTensorsOnlyForTheDepthwiseCase) {
  const KernelRegistry reg = make_cpu_registry();
  const Conv2dKernel& ref = reg.conv2d.reference();
  Conv2dParams p;
  p.n = 1, p.c = 16, p.h = 4, p.w = 4, p.k = 16, p.r = 3, p.s = 3, p.pad_t = p.pad_b = p.pad_l = p.pad_r = 1;
  p.sum_order = SumOrder::ascending;
  EXPECT_FALSE(ref.any_block(p, DType::f32));  // groups 1: the generic loops read plain planes
  const Tensor x = to_block(random_tensor(p.x_shape(), DType::f32, 1), 16), w = random_tensor(p.w_shape(), DType::f32, 2);
  Tensor y = Tensor::empty(p.y_shape(), DType::f32).with_block(16);
  EXPECT_NE(error_of([&] { conv2d_forward_ref(p, x, w, nullptr, y); }).find("only a depthwise convolution"), std::string::npos);
  p.groups = 16;
  EXPECT_TRUE(ref.any_block(p, DType::f32));
  Tensor yp = Tensor::empty(p.y_shape(), DType::f32);
  const Tensor wd = random_tensor(p.w_shape(), DType::f32, 2);
  EXPECT_NE(error_of([&] { conv2d_forward_ref(p, x, wd, nullptr, yp); }).find("x in channel block 16, y in 0"),
            std::string::npos);
  p.sum_order = SumOrder::pairwise;  // the generic loops again
  EXPECT_FALSE(ref.any_block(p, DType::f32));
  Conv2dParams q = p;
  q.sum_order = SumOrder::ascending, q.c = q.k = q.groups = 4, q.h = q.w = 2;  // too few channels for the lanes
  EXPECT_FALSE(ref.any_block(q, DType::f32));
}

// The depthwise forward with per-channel ops (Conv2dKernel::forward_fused: a prediction runs a
// depthwise convolution with the batchnorm and ReLU or clip before it, after it or both as one op)
// against the ops apart: the batchnorm kernel's inference forward with that activation fused, the
// convolution on plain tensors, the batchnorm after it: bit for bit, with each batchnorm kernel's
// own scale (BatchNormKernel::infer_scale), both variance estimators' forms, blocks of 8 and 16,
// NaN inputs (kept through ReLU and clip), one and two threads.
TEST(ConvRef, FusedChannelOpsGiveTheOpsApartBits) {
  struct Case {
    int64_t n, c, h, w, r, s, sh, sw, dh, pt, pb, pl, pr;
    bool flip, bias;
  };
  const Case cases[] = {
      {2, 32, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, true},   // MobileNet's 3x3, stride 1
      {2, 16, 9, 9, 3, 3, 2, 2, 1, 0, 1, 0, 1, false, false},  // stride 2, TF's 'same' split, no bias
      {1, 48, 5, 7, 3, 5, 2, 1, 2, 2, 1, 0, 3, true, true},    // rectangular, dilated, flipped
      {3, 16, 1, 1, 3, 3, 1, 1, 1, 1, 1, 1, 1, false, true},   // a 1x1 plane
  };
  const KernelRegistry reg = make_cpu_registry();
  using Act = ConvChannelOp::Act;
  enum class Where { after, before, both };
  for (const Case& c : cases)
    for (DType dt : {DType::f32, DType::f64})
      for (KernelBackend bnb : {KernelBackend::reference, KernelBackend::fast})
        for (BnVarEstimator est : {BnVarEstimator::unbiased, BnVarEstimator::inv_std})
          for (Act act : {Act::none, Act::relu, Act::clip})
            for (Where where : {Where::after, Where::before, Where::both})
              for (int block : {8, 16}) {
                const BatchNormKernel& bk = reg.batchnorm.at(bnb);
                if (!bk.supports(BatchNormParams{}, dt)) continue;  // the fast batchnorm is float32 only
                Conv2dParams p;
                p.n = c.n, p.c = c.c, p.h = c.h, p.w = c.w, p.k = c.c, p.r = c.r, p.s = c.s;
                p.stride_h = c.sh, p.stride_w = c.sw, p.dil_h = c.dh, p.dil_w = 1;
                p.pad_t = c.pt, p.pad_b = c.pb, p.pad_l = c.pl, p.pad_r = c.pr, p.groups = c.c, p.flip = c.flip;
                p.sum_order = SumOrder::ascending;
                const int threads = block == 8 ? 1 : 2;
                SCOPED_TRACE(p.str() + (dt == DType::f64 ? " f64 " : " f32 ") + bk.name + " block " +
                             std::to_string(block) + " act " + std::to_string(static_cast<int>(act)) + " where " +
                             std::to_string(static_cast<int>(where)) + (est == BnVarEstimator::inv_std ? " inv_std" : ""));
                Tensor x = random_tensor(p.x_shape(), dt, 1, -1.0, 1.0);
                const Tensor w = random_tensor(p.w_shape(), dt, 2, -1.0, 1.0), b = random_tensor({p.k}, dt, 3, -1.0, 1.0);
                // channel 0's plane: a NaN output or more
                if (dt == DType::f32) x.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
                else x.data<double>()[5] = std::numeric_limits<double>::quiet_NaN();
                // a batchnorm over `s` positions a plane with its activation, and the same as a ConvChannelOp
                auto batchnorm = [&](int64_t s, uint64_t seed, BatchNormParams& q, std::vector<Tensor>& vals,
                                     ConvChannelOp& e) {
                  q.n = p.n, q.c = p.k, q.s = s, q.eps = 1e-3, q.estimator = est;
                  q.relu = act == Act::relu, q.clip = act == Act::clip, q.clip_min = 0.0, q.clip_max = 0.75;
                  vals = {random_tensor({p.k}, dt, seed, -1.5, 1.5), random_tensor({p.k}, dt, seed + 1, -0.5, 0.5),
                          random_tensor({p.k}, dt, seed + 2, -0.3, 0.3), random_tensor({p.k}, dt, seed + 3, 0.2, 1.5)};
                  e.gamma = vals[0], e.beta = vals[1], e.mean = vals[2], e.scale = Tensor({p.k}, dt);
                  bk.infer_scale(q, vals[3], e.scale);
                  e.act = act, e.clip_min = q.clip_min, e.clip_max = q.clip_max;
                };
                BatchNormParams q1, q2;
                std::vector<Tensor> v1, v2;
                ConvChannelOp pre, post;
                batchnorm(p.h * p.w, 4, q1, v1, pre);
                batchnorm(p.out_h() * p.out_w(), 8, q2, v2, post);
                const bool before = where != Where::after, after = where != Where::before;
                const int saved = omp_get_max_threads();
                omp_set_num_threads(threads);
                Tensor xin = x;  // the ops apart, on plain tensors
                if (before) {
                  xin = Tensor(p.x_shape(), dt);
                  bk.forward_infer(q1, x, v1[0], v1[1], v1[2], v1[3], xin);
                }
                Tensor want(p.y_shape(), dt);
                conv2d_forward_ref(p, xin, w, c.bias ? &b : nullptr, want);  // plain: the channels-inner loops
                if (after) {
                  const Tensor yc = want.clone();
                  bk.forward_infer(q2, yc, v2[0], v2[1], v2[2], v2[3], want);
                }
                Tensor yb = Tensor::empty(p.y_shape(), dt).with_block(block);
                reg.conv2d.reference().forward_fused(p, to_block(x, block), w, c.bias ? &b : nullptr,
                                                     before ? &pre : nullptr, after ? &post : nullptr, yb);
                omp_set_num_threads(saved);
                const Tensor got = to_plain(yb);
                EXPECT_TRUE(bitwise_equal(want, got));
                int64_t nans = 0;
                for (int64_t i = 0; i < got.numel(); ++i) nans += std::isnan(got.at(i));
                EXPECT_GT(nans, 0) << "the NaN input reaches the output";
              }
}

// The fused ops' refusals, by name: plain tensors, no op at all, a missing or misshapen
// per-channel tensor before or after.
TEST(ConvRef, FusedChannelOpsRefusePlainTensorsAndMissingValues) {
  Conv2dParams p;
  p.n = 1, p.c = p.k = p.groups = 16, p.h = p.w = 4, p.r = p.s = 3, p.pad_t = p.pad_b = p.pad_l = p.pad_r = 1;
  p.sum_order = SumOrder::ascending;
  const Tensor x = random_tensor(p.x_shape(), DType::f32, 1), w = random_tensor(p.w_shape(), DType::f32, 2);
  ConvChannelOp e;
  e.mean = e.scale = e.gamma = random_tensor({16}, DType::f32, 3);
  Tensor y(p.y_shape(), DType::f32);
  EXPECT_NE(error_of([&] { conv2d_forward_fused_ref(p, x, w, nullptr, nullptr, &e, y); }).find("channel-blocked tensors only"),
            std::string::npos);
  Tensor yb = Tensor::empty(p.y_shape(), DType::f32).with_block(16);
  const Tensor xb = to_block(x, 16);
  EXPECT_NE(error_of([&] { conv2d_forward_fused_ref(p, xb, w, nullptr, nullptr, nullptr, yb); }).find("neither an op before"),
            std::string::npos);
  EXPECT_NE(error_of([&] { conv2d_forward_fused_ref(p, xb, w, nullptr, nullptr, &e, yb); }).find("op after beta missing"),
            std::string::npos);
  EXPECT_NE(error_of([&] { conv2d_forward_fused_ref(p, xb, w, nullptr, &e, nullptr, yb); }).find("op before beta missing"),
            std::string::npos);
  e.beta = random_tensor({8}, DType::f32, 4);
  EXPECT_NE(error_of([&] { conv2d_forward_fused_ref(p, xb, w, nullptr, &e, nullptr, yb); }).find("op before beta"),
            std::string::npos);
}

}  // namespace
}  // namespace driftlab
