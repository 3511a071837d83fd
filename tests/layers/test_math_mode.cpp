// The math-mode knobs (math_conv, math_matmul, tf32_rounding; engine/layers/math_mode.h) through
// the convolution and dense layers, under every CPU backend:
// - TF32: forward, dL/dx and dL/dW are float64 sums of the TF32-rounded operands within the
//   float32 accumulation bound, and the bound tells rounded from unrounded operands;
// - float16 / bfloat16: the same with the result rounded to the format, every output representable;
// - against the NVIDIA H200's answers (tests/data/h200_reduced_precision, PyTorch 2.11): the dense
//   layer under math_matmul=tf32 / bfloat16 / float16 gives cuBLAS's TF32 matmul and autocast's
//   matmuls within the bound, the convolution under math_conv=float16 / bfloat16 autocast's conv2d;
// - the knobs' refusals (dtype=float64, --device cuda) and the unfused path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "core/ops/reduced_precision.h"
#include "engine/cuda/device_net.h"
#include "engine/io/npy.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/sequential.h"
#include "engine/random.h"
#include "tests/ops/reduced_precision_util.h"
#include "tests/test_util.h"

namespace {

using namespace driftlab;
using rp_test::capture;
using rp_test::sum_bound_gamma;
using rp_test::half_step;

struct Mode {
  const char* name;
  float (*operand)(float);
  int result_mbits;  // 23: float32 result
};
float rne_tf32(float x) { return round_to_tf32(x); }
float away_tf32(float x) { return round_to_tf32(x, Rounding::nearest_away); }
float to_bf16(float x) { return round_to_bf16(x); }
float to_fp16(float x) { return round_to_fp16(x); }
float same(float x) { return x; }

// The worst |got - reference| per bound over y = a @ b^T (a: (m, k), b: (n, k)), the reference a
// float64 sum of the operands as `op` rounds them.
double worst_matmul(const float* a, const float* b, const float* y, int64_t m, int64_t n, int64_t k,
                    float (*op)(float), int result_mbits) {
  double worst = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, mag = 0;
      for (int64_t t = 0; t < k; ++t) {
        const double p = static_cast<double>(op(a[i * k + t])) * op(b[j * k + t]);
        sum += p, mag += std::fabs(p);
      }
      const double bound = sum_bound_gamma(k) * mag + half_step(sum, result_mbits) * 1.0000001 + 1e-30;
      worst = std::max(worst, std::fabs(y[i * n + j] - sum) / bound);
    }
  return worst;
}

Tensor transposed(const Tensor& t) {  // (r, c) -> (c, r)
  Tensor r({t.dim(1), t.dim(0)}, t.dtype());
  for (int64_t i = 0; i < t.dim(0); ++i)
    for (int64_t j = 0; j < t.dim(1); ++j) r.data<float>()[j * t.dim(0) + i] = t.data<float>()[i * t.dim(1) + j];
  return r;
}

// A dense layer's forward, dL/dx and dL/dW against the float64 sums of rounded operands, under
// each mode and gemm backend; in TF32, the unrounded operands' sums fall outside the bound.
TEST(MathMode, DenseForwardAndBothGradientsAreRoundedOperandsSummedInFloat32) {
  const int64_t n = 8, in = 300, out = 16;
  const Tensor x = random_tensor({n, in}, DType::f32, 3, -2.0, 2.0);
  const Tensor dy = random_tensor({n, out}, DType::f32, 4, -1.0, 1.0);
  for (const Mode& md : {Mode{"tf32", rne_tf32, 23}, Mode{"bfloat16", to_bf16, 7}, Mode{"float16", to_fp16, 10}})
    for (const char* backend : {"reference", "eigen", "onednn"}) {
      SCOPED_TRACE(std::string(md.name) + " " + backend);
      const Policy p = Policy::parse(std::string("torch,math_matmul=") + md.name + ",gemm_backend=" + backend);
      Rng rng(p.rng_engine, 5);
      DenseLayer d(out, {in}, p, rng, false);
      Tensor& w = d.params()[0]->value;  // (out, in)
      w = random_tensor({out, in}, DType::f32, 6, -1.0, 1.0);
      ExecContext exec;
      RunContext ctx = RunContext::training(exec, nullptr);
      const Tensor y = d.forward(ctx, x);
      d.params()[0]->grad.zero();
      const Tensor dx = d.backward(ctx, dy);
      const Tensor& dw = d.params()[0]->grad;
      // y = x W^T, dx = dy W (k = out), dW = dy^T x (k = n)
      EXPECT_LE(worst_matmul(x.data<float>(), w.data<float>(), y.data<float>(), n, out, in, md.operand, md.result_mbits), 1.0);
      const Tensor wt = transposed(w), dyt = transposed(dy), xt = transposed(x);
      EXPECT_LE(worst_matmul(dy.data<float>(), wt.data<float>(), dx.data<float>(), n, in, out, md.operand, md.result_mbits), 1.0);
      EXPECT_LE(worst_matmul(dyt.data<float>(), xt.data<float>(), dw.data<float>(), out, in, n, md.operand, md.result_mbits), 1.0);
      if (md.result_mbits == 23) {  // the bound tells the modes apart: float32 operands miss it
        EXPECT_GT(worst_matmul(x.data<float>(), w.data<float>(), y.data<float>(), n, out, in, same, 23), 1.0);
      } else {  // every result representable in the format
        for (const Tensor* t : {&y, &dx, &dw})
          for (int64_t i = 0; i < t->numel(); ++i)
            ASSERT_EQ(md.operand(t->data<float>()[i]), t->data<float>()[i]) << i;
      }
    }
}

// The convolution: forward and both gradients through every conv backend, against float64 sums
// of the rounded operands (a 3x3 convolution with padding 1, 12 -> 8 channels).
TEST(MathMode, ConvForwardAndBothGradientsAreRoundedOperandsSummedInFloat32) {
  const int64_t n = 2, c = 12, h = 7, k = 8;
  const Tensor x = random_tensor({n, c, h, h}, DType::f32, 7, -2.0, 2.0);
  const Tensor dy = random_tensor({n, k, h, h}, DType::f32, 8, -1.0, 1.0);
  for (const Mode& md : {Mode{"tf32", rne_tf32, 23}, Mode{"float16", to_fp16, 10}})
    for (const char* backend : {"reference", "eigen", "onednn"}) {
      SCOPED_TRACE(std::string(md.name) + " " + backend);
      const Policy p = Policy::parse(std::string("torch,math_conv=") + md.name + ",conv_backend=" + backend);
      Conv2dSpec cs;
      cs.out_channels = k;
      cs.pad = PadMode::explicit_pad;
      cs.pad_h = cs.pad_w = 1;
      cs.bias = false;
      Rng rng(p.rng_engine, 9);
      Conv2dLayer conv(cs, {c, h, h}, p, rng);
      Tensor& w = conv.params()[0]->value;
      w = random_tensor({k, c, 3, 3}, DType::f32, 10, -1.0, 1.0);
      ExecContext exec;
      RunContext ctx = RunContext::training(exec, nullptr);
      const Tensor y = conv.forward(ctx, x);
      conv.params()[0]->grad.zero();
      const Tensor dx = conv.backward(ctx, dy);
      const Tensor& dw = conv.params()[0]->grad;
      auto X = [&](int64_t b, int64_t ch, int64_t i, int64_t j) -> double {
        if (i < 0 || j < 0 || i >= h || j >= h) return 0;
        return md.operand(x.data<float>()[((b * c + ch) * h + i) * h + j]);
      };
      auto W = [&](int64_t o, int64_t ch, int64_t r, int64_t s) -> double {
        return md.operand(w.data<float>()[((o * c + ch) * 3 + r) * 3 + s]);
      };
      auto DY = [&](int64_t b, int64_t o, int64_t i, int64_t j) -> double {
        if (i < 0 || j < 0 || i >= h || j >= h) return 0;
        return md.operand(dy.data<float>()[((b * k + o) * h + i) * h + j]);
      };
      double worst = 0;
      auto check = [&](double got, double sum, double mag, int64_t terms) {
        worst = std::max(worst, std::fabs(got - sum) / (sum_bound_gamma(terms) * mag + half_step(sum, md.result_mbits) * 1.0000001 + 1e-30));
      };
      for (int64_t b = 0; b < n; ++b)
        for (int64_t o = 0; o < k; ++o)
          for (int64_t i = 0; i < h; ++i)
            for (int64_t j = 0; j < h; ++j) {
              double s = 0, m = 0;
              for (int64_t ch = 0; ch < c; ++ch)
                for (int64_t r = 0; r < 3; ++r)
                  for (int64_t q = 0; q < 3; ++q) {
                    const double t = X(b, ch, i + r - 1, j + q - 1) * W(o, ch, r, q);
                    s += t, m += std::fabs(t);
                  }
              check(y.data<float>()[((b * k + o) * h + i) * h + j], s, m, c * 9);
            }
      for (int64_t b = 0; b < n; ++b)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t i = 0; i < h; ++i)
            for (int64_t j = 0; j < h; ++j) {
              double s = 0, m = 0;
              for (int64_t o = 0; o < k; ++o)
                for (int64_t r = 0; r < 3; ++r)
                  for (int64_t q = 0; q < 3; ++q) {
                    const double t = DY(b, o, i - r + 1, j - q + 1) * W(o, ch, r, q);
                    s += t, m += std::fabs(t);
                  }
              check(dx.data<float>()[((b * c + ch) * h + i) * h + j], s, m, k * 9);
            }
      for (int64_t o = 0; o < k; ++o)
        for (int64_t ch = 0; ch < c; ++ch)
          for (int64_t r = 0; r < 3; ++r)
            for (int64_t q = 0; q < 3; ++q) {
              double s = 0, m = 0;
              for (int64_t b = 0; b < n; ++b)
                for (int64_t i = 0; i < h; ++i)
                  for (int64_t j = 0; j < h; ++j) {
                    const double t = X(b, ch, i + r - 1, j + q - 1) * DY(b, o, i, j);
                    s += t, m += std::fabs(t);
                  }
              check(dw.data<float>()[((o * c + ch) * 3 + r) * 3 + q], s, m, n * h * h);
            }
      EXPECT_LE(worst, 1.0);
    }
}


// The dense layer under each math_matmul against the H200's matmul of the same operands (64x512
// @ 512x64): cuBLAS with allow_tf32, autocast float16 and bfloat16 (PyTorch 2.11). The bound is
// the float32 accumulation bound of the device's unknown order around the rounded operands' sum,
// plus half a step of the result format: the device and driftlab each within it of that sum, so
// within twice of each other.
TEST(MathMode, DenseLayerGivesTheH200sMatmulInEachMode) {
  const Tensor a = read_npy(capture("mm_a")), b = read_npy(capture("mm_b"));
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
  const Tensor bt = transposed(b);  // the dense weight (out, in)
  for (const auto& [mode, file, md] : {std::tuple<const char*, const char*, Mode>{"tf32", "mm_tf32", {"tf32", rne_tf32, 23}},
                                       {"bfloat16", "mm_bf16", {"bfloat16", to_bf16, 7}},
                                       {"float16", "mm_fp16", {"float16", to_fp16, 10}}})
    for (const char* backend : {"reference", "onednn"}) {
      SCOPED_TRACE(std::string(mode) + " " + backend);
      const Policy p = Policy::parse(std::string("torch,math_matmul=") + mode + ",gemm_backend=" + backend);
      Rng rng(p.rng_engine, 1);
      DenseLayer d(n, {k}, p, rng, false);
      d.params()[0]->value = bt.clone();
      ExecContext exec;
      RunContext ctx = RunContext::inference(exec);
      const Tensor y = d.forward(ctx, a);
      const Tensor dev = read_npy(capture(file));
      double worst = 0;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0, mag = 0;
          for (int64_t t = 0; t < k; ++t) {
            const double p = static_cast<double>(md.operand(a.data<float>()[i * k + t])) * md.operand(bt.data<float>()[j * k + t]);
            sum += p, mag += std::fabs(p);
          }
          const double bound = 2 * (sum_bound_gamma(k) * mag + half_step(sum, md.result_mbits) * 1.0000001);
          worst = std::max(worst, std::fabs(y.data<float>()[i * n + j] - dev.data<float>()[i * n + j]) / bound);
        }
      EXPECT_LE(worst, 1.0);
    }
}

// The convolution under math_conv=float16 / bfloat16 against autocast's conv2d on the H200
// (4x16x16x16 input, 32 3x3 filters, padding 1), the same bound.
TEST(MathMode, ConvLayerGivesTheH200sAutocastConv) {
  const Tensor x = read_npy(capture("conv_x")), w = read_npy(capture("conv_w"));
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), k = w.dim(0);
  for (const auto& [mode, file, md] : {std::tuple<const char*, const char*, Mode>{"float16", "conv_fp16", {"float16", to_fp16, 10}},
                                       {"bfloat16", "conv_bf16", {"bfloat16", to_bf16, 7}}}) {
    SCOPED_TRACE(mode);
    Conv2dSpec cs;
    cs.out_channels = k;
    cs.pad = PadMode::explicit_pad;
    cs.pad_h = cs.pad_w = 1;
    cs.bias = false;
    const Policy p = Policy::parse(std::string("torch,math_conv=") + mode);
    Rng rng(p.rng_engine, 1);
    Conv2dLayer conv(cs, {c, h, h}, p, rng);
    conv.params()[0]->value = w.clone();
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    const Tensor y = conv.forward(ctx, x), dev = read_npy(capture(file));
    ASSERT_EQ(y.shape(), dev.shape());
    double worst = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t o = 0; o < k; ++o)
        for (int64_t i = 0; i < h; ++i)
          for (int64_t j = 0; j < h; ++j) {
            double s = 0, mag = 0;
            for (int64_t ch = 0; ch < c; ++ch)
              for (int64_t r = 0; r < 3; ++r)
                for (int64_t q = 0; q < 3; ++q) {
                  const int64_t yi = i + r - 1, xj = j + q - 1;
                  if (yi < 0 || xj < 0 || yi >= h || xj >= h) continue;
                  const double t = static_cast<double>(md.operand(x.data<float>()[((b * c + ch) * h + yi) * h + xj])) *
                                   md.operand(w.data<float>()[((o * c + ch) * 3 + r) * 3 + q]);
                  s += t, mag += std::fabs(t);
                }
            const int64_t at = ((b * k + o) * h + i) * h + j;
            const double bound = 2 * (sum_bound_gamma(c * 9) * mag + half_step(s, md.result_mbits) * 1.0000001) + 1e-30;
            worst = std::max(worst, std::fabs(y.data<float>()[at] - dev.data<float>()[at]) / bound);
          }
    EXPECT_LE(worst, 1.0);
  }
}

// The message of what f throws ("" when it does not).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(MathMode, RefusedWhereItDoesNotApplyAndUnfusedWhereItDoes) {
  Rng rng(RngEngine::mt19937_u24, 1);
  EXPECT_THAT(error_of([&] { DenseLayer(4, {8}, Policy::parse("torch,dtype=float64,math_matmul=tf32"), rng); }),
              testing::HasSubstr("math_matmul=tf32 rounds float32 operands: it needs dtype=float32"));
  EXPECT_THAT(error_of([] { resolve_cuda_exec(Policy::parse("torch,math_conv=float16")); }),
              testing::HasSubstr("cuda: math_conv=float16 is emulated on the CPU only"));
  EXPECT_THAT(error_of([] { Policy::parse("torch,math_conv=fp8"); }),
              testing::HasSubstr("knob 'math_conv' has no value 'fp8'"));
  // A conv -> ReLU -> max pool run: fused under float32, unfused (each layer's kernel) under tf32,
  // whose rounding the fused kernels do not apply.
  for (const char* mode : {"float32", "tf32"}) {
    const Policy p = Policy::parse(std::string("torch,math_conv=") + mode);
    Sequential net({1, 28, 28});  // LeNet-5's first block
    Conv2dSpec cs;
    cs.out_channels = 6;
    cs.kernel_h = cs.kernel_w = 5;
    auto& conv = static_cast<Conv2dLayer&>(net.add(std::make_unique<Conv2dLayer>(cs, Shape{1, 28, 28}, p, rng)));
    net.add(std::make_unique<ActivationLayer>(ActKind::relu, Shape{6, 24, 24}, p));
    net.add(std::make_unique<Pool2dLayer>(Pool2dSpec{}, Shape{6, 24, 24}, p));
    const std::string d = conv.describe();
    EXPECT_EQ(d.find("fused with") != std::string::npos, std::string(mode) == "float32") << d;
    if (std::string(mode) == "tf32") EXPECT_NE(d.find("math tf32 (nearest_even)"), std::string::npos) << d;
  }
}

// The GPU variants: each framework's defaults on an Ampere-or-later GPU over its CPU preset (whose
// numbers they leave alone): PyTorch TF32 for convolutions only, TensorFlow for both; on the
// device a tf32 math mode is the libraries' TF32, which needs its tf32_* knob; PyTorch's CUDA
// autocast runs cuDNN's RNN as one op (rnn_autocast_rule=layer, as the tensorflow preset already is).
TEST(MathMode, GpuVariantsAreTheFrameworksGpuDefaults) {
  EXPECT_EQ(Policy::parse("torch_gpu").to_string(),
            "torch,math_conv=tf32,math_rnn=tf32,conv_bias_rounding=twice,rnn_autocast_rule=layer");
  EXPECT_EQ(Policy::parse("tensorflow_gpu").to_string(),
            "tensorflow,math_conv=tf32,math_matmul=tf32,math_rnn=tf32,tf32_matmul=true,tf32_conv=true");
  EXPECT_EQ(Policy::parse("torch_gpu,math_matmul=tf32").to_string(),
            "torch,math_conv=tf32,math_matmul=tf32,math_rnn=tf32,conv_bias_rounding=twice,rnn_autocast_rule=layer");
  EXPECT_EQ(Policy::torch().math_conv, MathMode::float32);
  EXPECT_EQ(Policy::tensorflow().math_matmul, MathMode::float32);
  const cuda::CudaExecParams t = resolve_cuda_exec(Policy::parse("torch_gpu"));
  EXPECT_TRUE(t.tf32_conv);
  EXPECT_FALSE(t.tf32_matmul);
  const cuda::CudaExecParams k = resolve_cuda_exec(Policy::parse("tensorflow_gpu"));
  EXPECT_TRUE(k.tf32_conv && k.tf32_matmul);
  EXPECT_THAT(error_of([] { resolve_cuda_exec(Policy::parse("torch,math_matmul=tf32")); }),
              testing::HasSubstr("cuda: math_matmul=tf32 needs tf32_matmul=true on the device"));
  EXPECT_THAT(error_of([] { Policy::parse("pytorch_gpu"); }),
              testing::HasSubstr("(allowed: tensorflow, theano, torch; GPU defaults: tensorflow_gpu, torch_gpu)"));
}

}  // namespace
