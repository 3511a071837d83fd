// Vendor backends against the CPU reference: cuBLAS gemm (FP32 and TF32 math), cuDNN conv
// (three passes, flip, heuristic and exhaustive search, deterministic mode bit-identical twice,
// the chosen algorithm recorded, asymmetric pads falling back to the own kernel and logged),
// cuDNN pooling, BatchNorm and softmax inside the loss. Skips without a device.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "core/ops/conv2d.h"
#include "core/ops/gemm.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cuda/ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace driftlab {
namespace {

cuda::CudaExecParams vendor_params(bool deterministic, bool tf32, cuda::CudnnAlgoSearch search) {
  cuda::CudaExecParams e = one_backend(cuda::CudaBackend::vendor, deterministic);
  e.tf32_matmul = e.tf32_conv = tf32;
  e.algo_search = search;
  return e;
}

// TF32 rounds each float32 input to 10 explicit mantissa bits (unit roundoff 2^-11), so every
// product carries up to 2*2^-11 relative error on top of the float32 accumulation.
double tf32_extra(bool tf32) { return tf32 ? 2 * 0x1.0p-11 : 0.0; }

TEST(CudaCublas, GemmMatchesReferenceFp32AndTf32) {
  REQUIRE_CUDA_DEVICE();
  for (bool tf32 : {false, true})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        cuda::CudaContext ctx(vendor_params(false, tf32, cuda::CudnnAlgoSearch::heuristic));
        GemmParams p;
        p.m = 67, p.n = 45, p.k = 131, p.trans_a = ta, p.trans_b = tb, p.alpha = 0.75, p.beta = 0.5;
        Tensor a = random_tensor(ta ? Shape{p.k, p.m} : Shape{p.m, p.k}, DType::f32, 1);
        Tensor b = random_tensor(tb ? Shape{p.n, p.k} : Shape{p.k, p.n}, DType::f32, 2);
        Tensor c0 = random_tensor({p.m, p.n}, DType::f32, 3);
        Tensor ref = c0.to(DType::f64), bound = abs64(c0);
        gemm_ref<double>(p, a.to(DType::f64).data<double>(), b.to(DType::f64).data<double>(), ref.data<double>());
        gemm_ref<double>(p, abs64(a).data<double>(), abs64(b).data<double>(), bound.data<double>());
        cuda::DeviceTensor da = cuda::to_device(ctx, a), db = cuda::to_device(ctx, b), dc = cuda::to_device(ctx, c0);
        cuda::gemm_cuda(ctx, p, da, db, dc);  // dispatches to cuBLAS
        // gamma_{K+2} bound of the float32 sum (see cuda_test_util.h) plus TF32's input rounding.
        const double atol = (gamma_n(p.k + 2, DType::f32) + tf32_extra(tf32)) * max_abs(bound);
        EXPECT_TRUE(all_close(cuda::to_host(ctx, dc), ref, atol, 0.0)) << "tf32 " << tf32 << " ta " << ta << " tb " << tb;
      }
}

struct VConv {
  const char* name;
  Conv2dParams p;
};

Conv2dParams vconv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                   const std::function<void(Conv2dParams&)>& edit) {
  Conv2dParams p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.k = k, p.r = r, p.s = s;
  edit(p);
  return p;
}

const std::vector<VConv>& vconv_cases() {
  static const std::vector<VConv> cs = {
      {"odd_pad1", vconv(3, 3, 9, 11, 5, 3, 3, [](Conv2dParams& p) { p.pad_t = p.pad_b = p.pad_l = p.pad_r = 1; })},
      {"stride2_flip", vconv(2, 4, 10, 9, 6, 3, 3,
                             [](Conv2dParams& p) {
                               p.stride_h = p.stride_w = 2, p.flip = true;
                               p.pad_t = p.pad_b = 1;
                             })},
      {"lenet_conv2", vconv(5, 6, 12, 12, 16, 5, 5, [](Conv2dParams&) {})},
      {"dilation2", vconv(2, 2, 9, 11, 3, 3, 2, [](Conv2dParams& p) { p.dil_h = p.dil_w = 2; })},
  };
  return cs;
}

class CudaCudnnConv : public ::testing::TestWithParam<std::tuple<VConv, DType, bool>> {};

TEST_P(CudaCudnnConv, AllPassesMatchReference) {
  REQUIRE_CUDA_DEVICE();
  const Conv2dParams& p = std::get<0>(GetParam()).p;
  const DType dt = std::get<1>(GetParam());
  const bool tf32 = std::get<2>(GetParam()) && dt == DType::f32;
  cuda::CudaContext ctx(vendor_params(false, tf32, cuda::CudnnAlgoSearch::heuristic));
  Tensor x = random_tensor(p.x_shape(), dt, 10), w = random_tensor(p.w_shape(), dt, 11);
  Tensor b = random_tensor({p.k}, dt, 12), dy = random_tensor(p.y_shape(), dt, 13);
  Tensor x64 = x.to(DType::f64), w64 = w.to(DType::f64), b64 = b.to(DType::f64), dy64 = dy.to(DType::f64);
  cuda::DeviceTensor gx = cuda::to_device(ctx, x), gw = cuda::to_device(ctx, w), gb = cuda::to_device(ctx, b);
  cuda::DeviceTensor gdy = cuda::to_device(ctx, dy);
  const double extra = tf32_extra(tf32);
  // Algorithms such as FFT and Winograd transform the inputs; their error is not covered by
  // gamma_n of a direct sum. cuDNN documents no bound: allow 4x the direct-sum bound plus
  // 16 eps of the bound's size, which a wrong index or a wrong flip exceeds by orders of magnitude.
  auto tol = [&](int64_t terms, const Tensor& bound) {
    return (4 * gamma_n(terms, dt) + 16 * dtype_eps(dt) + extra) * max_abs(bound);
  };

  Tensor ry(p.y_shape(), DType::f64), by(p.y_shape(), DType::f64), ab = abs64(b);
  conv2d_forward_ref(p, x64, w64, &b64, ry);
  conv2d_forward_ref(p, abs64(x), abs64(w), &ab, by);
  cuda::DeviceTensor y(ctx, p.y_shape(), dt);
  cuda::conv2d_forward_cuda(ctx, p, gx, gw, &gb, y);
  EXPECT_TRUE(all_close(cuda::to_host(ctx, y), ry, tol(p.c * p.r * p.s + 1, by), 0.0)) << "forward";

  Tensor rdx(p.x_shape(), DType::f64), bdx(p.x_shape(), DType::f64);
  conv2d_backward_data_ref(p, dy64, w64, rdx);
  conv2d_backward_data_ref(p, abs64(dy), abs64(w), bdx);
  cuda::DeviceTensor dx(ctx, p.x_shape(), dt);
  cuda::conv2d_backward_data_cuda(ctx, p, gdy, gw, dx);
  EXPECT_TRUE(all_close(cuda::to_host(ctx, dx), rdx, tol(p.k * p.r * p.s, bdx), 0.0)) << "backward_data";

  Tensor rdw(p.w_shape(), DType::f64), bdw(p.w_shape(), DType::f64), rdb({p.k}, DType::f64), bdb({p.k}, DType::f64);
  conv2d_backward_weight_ref(p, x64, dy64, rdw, &rdb);
  conv2d_backward_weight_ref(p, abs64(x), abs64(dy), bdw, &bdb);
  cuda::DeviceTensor dw = cuda::DeviceTensor::zeros(ctx, p.w_shape(), dt), db = cuda::DeviceTensor::zeros(ctx, {p.k}, dt);
  cuda::conv2d_backward_weight_cuda(ctx, p, gx, gdy, dw, &db);
  const int64_t terms = p.n * p.out_h() * p.out_w();
  EXPECT_TRUE(all_close(cuda::to_host(ctx, dw), rdw, tol(terms, bdw), 0.0)) << "dw";
  EXPECT_TRUE(all_close(cuda::to_host(ctx, db), rdb, tol(terms, bdb), 0.0)) << "db";

  // Every pass chose and recorded an algorithm.
  int recorded = 0;
  for (const cuda::AlgoRecord& r : ctx.algo_log()) {
    EXPECT_GE(r.algo, 0) << r.op;
    EXPECT_NE(r.algo_name, "?") << r.op;
    ++recorded;
  }
  EXPECT_EQ(recorded, 3);
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaCudnnConv,
                         ::testing::Combine(::testing::ValuesIn(vconv_cases()),
                                            ::testing::Values(DType::f32, DType::f64), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  dtype_name(std::get<1>(info.param)) + (std::get<2>(info.param) ? "_tf32" : "");
                         });

// deterministic=true: only CUDNN_DETERMINISTIC algorithms, so two runs give the same bits,
// with both search modes.
TEST(CudaCudnnConvDeterminism, BitIdenticalTwice) {
  REQUIRE_CUDA_DEVICE();
  for (auto search : {cuda::CudnnAlgoSearch::heuristic, cuda::CudnnAlgoSearch::exhaustive}) {
    cuda::CudaContext ctx(vendor_params(true, false, search));
    Conv2dParams p = vconv(16, 16, 32, 32, 32, 3, 3, [](Conv2dParams& q) { q.pad_t = q.pad_b = q.pad_l = q.pad_r = 1; });
    cuda::DeviceTensor x = cuda::to_device(ctx, random_tensor(p.x_shape(), DType::f32, 1));
    cuda::DeviceTensor w = cuda::to_device(ctx, random_tensor(p.w_shape(), DType::f32, 2));
    cuda::DeviceTensor dy = cuda::to_device(ctx, random_tensor(p.y_shape(), DType::f32, 3));
    Tensor out[2][3];
    for (auto& o : out) {
      cuda::DeviceTensor y(ctx, p.y_shape(), DType::f32), dx(ctx, p.x_shape(), DType::f32);
      cuda::DeviceTensor dw = cuda::DeviceTensor::zeros(ctx, p.w_shape(), DType::f32);
      cuda::conv2d_forward_cuda(ctx, p, x, w, nullptr, y);
      cuda::conv2d_backward_data_cuda(ctx, p, dy, w, dx);
      cuda::conv2d_backward_weight_cuda(ctx, p, x, dy, dw, nullptr);
      o[0] = cuda::to_host(ctx, y), o[1] = cuda::to_host(ctx, dx), o[2] = cuda::to_host(ctx, dw);
    }
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(bitwise_equal(out[0][i], out[1][i])) << "pass " << i;
    for (const cuda::AlgoRecord& r : ctx.algo_log()) EXPECT_TRUE(r.deterministic) << r.op << " " << r.algo_name;
  }
}

TEST(CudaCudnnConvFallback, AsymmetricPadsRunOwnKernelAndAreLogged) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx(vendor_params(false, false, cuda::CudnnAlgoSearch::heuristic));
  Conv2dParams p = vconv(2, 3, 8, 8, 4, 3, 3, [](Conv2dParams& q) {
    q.stride_h = q.stride_w = 2;
    q.pad_b = q.pad_r = 1;  // TF 'SAME' with stride 2 on an even input
  });
  Tensor x = random_tensor(p.x_shape(), DType::f64, 1), w = random_tensor(p.w_shape(), DType::f64, 2);
  Tensor ref(p.y_shape(), DType::f64);
  conv2d_forward_ref(p, x, w, nullptr, ref);
  cuda::DeviceTensor gx = cuda::to_device(ctx, x), gw = cuda::to_device(ctx, w), y(ctx, p.y_shape(), DType::f64);
  cuda::conv2d_forward_cuda(ctx, p, gx, gw, nullptr, y);
  // 27 double products: gamma_27 (f64) of values <= 27.
  EXPECT_TRUE(all_close(cuda::to_host(ctx, y), ref, gamma_n(28, DType::f64) * 27, 0.0));
  ASSERT_EQ(ctx.algo_log().size(), 1u);
  EXPECT_EQ(ctx.algo_log()[0].algo_name, "own (fallback)");
  EXPECT_THROW(cuda::conv2d_forward_cudnn(ctx, p, gx, gw, nullptr, y), Error);
}

TEST(CudaCudnnPool, MatchesReference) {
  REQUIRE_CUDA_DEVICE();
  for (bool det : {false, true})
    for (DType dt : {DType::f32, DType::f64}) {
      cuda::CudaContext ctx(vendor_params(det, false, cuda::CudnnAlgoSearch::heuristic));
      Pool2dParams p;
      p.n = 3, p.c = 5, p.h = 11, p.w = 13, p.kh = p.kw = 3, p.stride_h = p.stride_w = 2;
      p.pad_t = p.pad_b = p.pad_l = p.pad_r = 1;
      // Continuous random values: no ties, so cuDNN's undocumented tie rule does not matter.
      Tensor x = random_tensor(p.x_shape(), dt, 5), dy = random_tensor(p.y_shape(), dt, 6);
      cuda::DeviceTensor gx = cuda::to_device(ctx, x), gdy = cuda::to_device(ctx, dy);
      cuda::DeviceTensor y(ctx, p.y_shape(), dt), dx(ctx, p.x_shape(), dt);
      for (bool include : {true, false}) {
        p.count_include_pad = include;
        Tensor ry(p.y_shape(), dt), rdx(p.x_shape(), dt);
        maxpool2d_forward_ref(p, x, ry);
        cuda::maxpool2d_forward_cuda(ctx, p, gx, y);
        EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, y), ry)) << "max forward";
        maxpool2d_backward_ref(p, x, dy, rdx);
        cuda::maxpool2d_backward_cuda(ctx, p, gx, y, gdy, dx);
        // Windows overlap (3x3, stride 2): an input that is the maximum of up to 4 windows sums
        // their dy, and cuDNN adds them in its own order (first H200 run, 2026-11-27: 1 ulp in
        // float32, bitwise in float64 on that data): gamma_4 of 4 terms <= 1.
        EXPECT_TRUE(all_close(cuda::to_host(ctx, dx), rdx, gamma_n(4, dt) * 4, 0)) << "max backward";
        avgpool2d_forward_ref(p, x, ry);
        cuda::avgpool2d_forward_cuda(ctx, p, gx, y);
        // cuDNN may multiply by 1/count instead of dividing and sum in its own order:
        // 9 terms <= 1 and one scaling, gamma_10 of 9 plus the 1/count rounding.
        EXPECT_TRUE(all_close(cuda::to_host(ctx, y), ry, (gamma_n(10, dt) + dtype_eps(dt)) * 9, 0)) << "avg fwd";
        avgpool2d_backward_ref(p, dy, rdx);
        cuda::avgpool2d_backward_cuda(ctx, p, gx, y, gdy, dx);
        // each dx sums at most 4 windows' dy/count (stride 2, window 3)
        EXPECT_TRUE(all_close(cuda::to_host(ctx, dx), rdx, (gamma_n(5, dt) + dtype_eps(dt)) * 4, 0)) << "avg bwd";
      }
    }
}

TEST(CudaCudnnBatchNorm, MatchesReference) {
  REQUIRE_CUDA_DEVICE();
  for (DType dt : {DType::f32, DType::f64}) {
    cuda::CudaContext ctx(vendor_params(false, false, cuda::CudnnAlgoSearch::heuristic));
    BatchNormParams p;
    p.n = 6, p.c = 7, p.s = 25, p.eps = 1e-3;
    const Shape xs = {p.n, p.c, p.s}, cs = {p.c};
    Tensor x = random_tensor(xs, dt, 1, -2, 3), g = random_tensor(cs, dt, 2, 0.5, 1.5), b = random_tensor(cs, dt, 3);
    Tensor dy = random_tensor(xs, dt, 4);
    Tensor ry(xs, DType::f64), rm(cs, DType::f64), rv(cs, DType::f64), ri(cs, DType::f64);
    Tensor x64 = x.to(DType::f64), g64 = g.to(DType::f64), dy64 = dy.to(DType::f64);
    batchnorm_forward_train_ref(p, x64, g64, b.to(DType::f64), ry, rm, rv, ri);
    Tensor rdx(xs, DType::f64), rdg(cs, DType::f64), rdb(cs, DType::f64);
    batchnorm_backward_ref(p, x64, dy64, g64, b.to(DType::f64), rm, ri, rdx, rdg, rdb);
    cuda::DeviceTensor gx = cuda::to_device(ctx, x), gg = cuda::to_device(ctx, g), gb = cuda::to_device(ctx, b);
    cuda::DeviceTensor gdy = cuda::to_device(ctx, dy);
    cuda::DeviceTensor y(ctx, xs, dt), m(ctx, cs, dt), v(ctx, cs, dt), inv(ctx, cs, dt), dx(ctx, xs, dt);
    cuda::DeviceTensor dg = cuda::DeviceTensor::zeros(ctx, cs, dt), db = cuda::DeviceTensor::zeros(ctx, cs, dt);
    cuda::batchnorm_forward_train_cuda(ctx, p, gx, gg, gb, y, m, v, inv);
    cuda::batchnorm_backward_cuda(ctx, p, gx, gdy, gg, m, inv, dx, dg, db);
    // cuDNN's sums are in an undocumented order (float accumulators possible): gamma_{N*S}
    // of the summed magnitudes (|x| <= 3, count 150) for the statistics, then the same
    // elementwise budget as the own kernel's test, scaled by 4 for the unknown order.
    const double count = static_cast<double>(p.n * p.s), u = dtype_eps(dt) / 2;
    const double stat_rel = gamma_n(p.n * p.s, dt) * 9 + 8 * u;  // (|x|+|mu|)^2/var <= ~9 for these values
    EXPECT_TRUE(all_close(cuda::to_host(ctx, m), rm, gamma_n(p.n * p.s, dt) * 3, 0));
    EXPECT_TRUE(all_close(cuda::to_host(ctx, inv), ri, 0, stat_rel));
    // var = 1/inv^2 - eps: inv's relative error doubles, and eps/var (<= 1e-3/0.5) adds nothing material.
    EXPECT_TRUE(all_close(cuda::to_host(ctx, v), rv, 0, 2 * stat_rel + 8 * u));
    const double ysz = max_abs(g64) * 5 * max_abs(ri) + 1;
    EXPECT_TRUE(all_close(cuda::to_host(ctx, y), ry, 4 * (16 * u + stat_rel) * ysz, 0)) << "y";
    const double xhat = 5 * max_abs(ri);
    const double dxsz = max_abs(g64) * max_abs(ri) * max_abs(dy64) * (2 + xhat * xhat);
    EXPECT_TRUE(all_close(cuda::to_host(ctx, dx), rdx, 4 * (16 * u + stat_rel) * dxsz, 0)) << "dx";
    EXPECT_TRUE(all_close(cuda::to_host(ctx, dg), rdg, 4 * gamma_n(p.n * p.s, dt) * count * xhat, 0));
    EXPECT_TRUE(all_close(cuda::to_host(ctx, db), rdb, 4 * gamma_n(p.n * p.s, dt) * count, 0));
  }
}

TEST(CudaCudnnSoftmax, LossMatchesReference) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx(vendor_params(false, false, cuda::CudnnAlgoSearch::heuristic));
  for (DType dt : {DType::f32, DType::f64})
    for (CeFormulation form : {CeFormulation::log_softmax, CeFormulation::softmax_clip, CeFormulation::softmax_log}) {
      SoftmaxXentParams p;
      p.form = form;
      Tensor z = random_tensor({31, 10}, dt, 7, -5, 5);
      std::vector<int32_t> labels(31);
      for (int i = 0; i < 31; ++i) labels[i] = (i * 3) % 10;
      const double ref = softmax_xent_forward_ref(p, z, labels);
      Tensor rdz(z.shape(), dt);
      softmax_xent_backward_ref(p, z, labels, rdz);
      cuda::DeviceTensor gz = cuda::to_device(ctx, z), dz(ctx, z.shape(), dt);
      const double got = cuda::softmax_xent_forward_cuda(ctx, p, gz, labels);
      cuda::softmax_xent_backward_cuda(ctx, p, gz, labels, dz);
      // cuDNN's exp and sums differ from the reference's: per sample ~10 roundings of values
      // up to |z|+log K ~ 8, averaged over the batch.
      const double eps = dtype_eps(dt);
      EXPECT_NEAR(got, ref, 16 * eps * 10) << static_cast<int>(form);
      EXPECT_TRUE(all_close(cuda::to_host(ctx, dz), rdz, 16 * eps, 64 * eps)) << static_cast<int>(form);
    }
}

}  // namespace
}  // namespace driftlab
