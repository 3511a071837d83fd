// matmul_sum (engine/layers/math_mode.h apply_term_sums; the reference gemm's GemmSum rules,
// core/ops/gemm.h): under a bfloat16 / float16 dense layer, `per_term` sums as ATen's own CPU GEMM
// does (the forward's x W^T a float32 dot product in ascending order, the gradients' dy W and
// dy^T x in the format's arithmetic, every product and every partial sum rounded), `float32` in
// float32 rounded once. The expected values here are worked out by hand from those definitions
// (sums of ones, a tie that only one order breaks); the
// comparison with PyTorch itself is TorchAutocast.MlpGradientsAsAtenGemmWithoutOneDnn
// (tests/oracles/test_autocast_oracle_torch.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ops/gemm.h"
#include "core/ops/reduced_precision.h"
#include "engine/knob_gates.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/math_mode.h"
#include "engine/random.h"
#include "kernels/cpu/ref/ref.h"

namespace driftlab {
namespace {

// k products of ones: a float32 sum holds k exactly; bfloat16's arithmetic (8 significant bits)
// stops at 256, where 256 + 1 is a tie that rounds back to the even 256; float16's (11 bits) at
// 2048 for the same reason.
TEST(MatmulSum, RoundedSumsOfOnesStopWhereTheFormatStopsCounting) {
  for (const auto& [format, stop] : {std::pair<MathMode, float>{MathMode::bfloat16, 256.0f},
                                     std::pair<MathMode, float>{MathMode::float16, 2048.0f}}) {
    const int64_t k = 3000;
    std::vector<float> a(k, 1.0f), b(k, 1.0f);
    GemmParams p;
    p.m = p.n = 1;
    p.k = k;
    float c = 0;
    gemm_ref<float>(p, a.data(), b.data(), &c);
    EXPECT_EQ(c, 3000.0f) << "float32 sum";
    p.sum = GemmSum::rounded;
    p.term_format = format;
    gemm_ref<float>(p, a.data(), b.data(), &c);
    EXPECT_EQ(c, stop) << math_mode_name(format);
    // beta 1 starts from C (rounded to the format): 100 more ones after 200 reach 256 too.
    p.k = 100;
    p.beta = 1.0;
    c = 200.0f;
    gemm_ref<float>(p, a.data(), b.data(), &c);
    EXPECT_EQ(c, format == MathMode::bfloat16 ? 256.0f : 300.0f) << math_mode_name(format) << " from 200";
  }
}

// Every product is rounded before it is added: a = 1 + 2^-7 is a bfloat16 (7 fraction bits), a * a
// = 1 + 2^-6 + 2^-14 is exact in float32 and rounds to 1 + 2^-6 in bfloat16.
TEST(MatmulSum, RoundedSumsRoundEachProduct) {
  const float a = 1.0f + std::ldexp(1.0f, -7);
  ASSERT_EQ(round_to_bf16(a), a);
  GemmParams p;
  p.m = p.n = p.k = 1;
  float c = 0;
  gemm_ref<float>(p, &a, &a, &c);
  EXPECT_EQ(c, 1.0f + std::ldexp(1.0f, -6) + std::ldexp(1.0f, -14));
  p.sum = GemmSum::rounded;
  gemm_ref<float>(p, &a, &a, &c);
  EXPECT_EQ(c, 1.0f + std::ldexp(1.0f, -6));
}

// in_order sums in exactly sum_order: products 2^-24, 2^-24, 1 (l = 0, 1, 2) make 2^-23 first in
// ascending order, and 1 + 2^-23 is a float32; in descending order each 2^-24 meets 1 alone, a tie
// that rounds back to the even 1.
TEST(MatmulSum, InOrderSumsInTheOrderAsked) {
  const float tiny = std::ldexp(1.0f, -24);
  const std::vector<float> a = {tiny, tiny, 1.0f}, b = {1.0f, 1.0f, 1.0f};
  GemmParams p;
  p.m = p.n = 1;
  p.k = 3;
  p.sum = GemmSum::in_order;
  float c = 0;
  gemm_ref<float>(p, a.data(), b.data(), &c);
  EXPECT_EQ(c, 1.0f + std::ldexp(1.0f, -23));
  p.sum_order = SumOrder::descending;
  gemm_ref<float>(p, a.data(), b.data(), &c);
  EXPECT_EQ(c, 1.0f);
}

// The rules only in the reference: the other CPU kernels decline them, and the registry falls back.
TEST(MatmulSum, FastGemmsDeclineTheRulesAndTheReferenceRunsThem) {
  const KernelRegistry reg = make_cpu_registry();
  GemmParams p;
  p.m = p.n = p.k = 4;
  for (GemmSum s : {GemmSum::in_order, GemmSum::rounded}) {
    p.sum = s;
    for (KernelBackend b : {KernelBackend::eigen, KernelBackend::onednn})
      EXPECT_STREQ(reg.gemm.select(b, p, DType::f32).name, "reference") << gemm_sum_name(s);
  }
  p.sum = GemmSum::rounded;
  std::vector<double> a(16, 1.0), bb(16, 1.0), c(16, 0.0);
  EXPECT_THROW(gemm_ref<double>(p, a.data(), bb.data(), c.data()), Error);
  std::vector<float> af(16, 1.0f), bf(16, 1.0f), cf(16, 0.0f);
  p.alpha = 2.0;
  EXPECT_THROW(gemm_ref<float>(p, af.data(), bf.data(), cf.data()), Error);
}

// A dense layer: batch 300 of one input, 300 units. The forward's outputs are dot products of one
// term (1 * 1); dL/dx sums 300 products dy_j W_j = 1, and dL/dW_j sums 300 products dy_ij x_i = 1
// over the batch: 300 in float32, 256 once every term is a bfloat16 add. A second layer of 300
// inputs: its forward is a 300-term dot product, float32 under both rules (300).
TEST(MatmulSum, DenseLayerGradientsSumPerTermAndTheForwardInFloat32) {
  for (const std::string rule : {"float32", "per_term"}) {
    const Policy p = Policy::parse("torch,autocast=bfloat16,matmul_sum=" + rule);
    Rng rng(p.rng_engine, 3);
    DenseLayer wide(300, Shape{1}, p, rng, true), deep(1, Shape{300}, p, rng, true);
    for (DenseLayer* l : {&wide, &deep}) {
      for (Param* prm : l->params()) {
        Tensor& v = prm->value;
        for (int64_t j = 0; j < v.numel(); ++j) v.data<float>()[j] = prm == l->params()[0] ? 1.0f : 0.0f;
        prm->grad.fill(0.0);
      }
    }
    ExecContext exec;
    RunContext ctx = RunContext::training(exec, nullptr);
    Tensor x({300, 1}, DType::f32);
    x.fill(1.0);
    const Tensor y = wide.forward(ctx, x);  // (300, 300) of ones
    for (int64_t j = 0; j < y.numel(); ++j) ASSERT_EQ(y.data<float>()[j], 1.0f) << rule;
    const Tensor z = deep.forward(ctx, y);  // (300, 1): 300 ones summed
    for (int64_t j = 0; j < z.numel(); ++j) ASSERT_EQ(z.data<float>()[j], 300.0f) << rule << ": forward in float32";
    Tensor dz({300, 1}, DType::f32);
    dz.fill(1.0);
    const Tensor dy = deep.backward(ctx, dz);  // dL/dy_ij = W_j = 1: one term each
    const Tensor dx = wide.backward(ctx, dy);  // 300 terms each
    const float want = rule == "per_term" ? 256.0f : 300.0f;
    for (int64_t j = 0; j < dx.numel(); ++j) ASSERT_EQ(dx.data<float>()[j], want) << rule << ": dL/dx";
    const Tensor& dw = wide.params()[0]->grad;
    for (int64_t j = 0; j < dw.numel(); ++j) ASSERT_EQ(dw.data<float>()[j], want) << rule << ": dL/dW";
    const Tensor& dw2 = deep.params()[0]->grad;  // 300 terms each (batch 300)
    for (int64_t j = 0; j < dw2.numel(); ++j) ASSERT_EQ(dw2.data<float>()[j], want) << rule << ": dL/dW, second layer";
    // The bias gradient is a float32 sum rounded once under both (ATen's sum over the batch).
    EXPECT_EQ(wide.params()[1]->grad.data<float>()[0], 300.0f) << rule << ": dL/db";
  }
}

TEST(MatmulSum, KnobGatesAndRefusals) {
  EXPECT_EQ(Policy::torch().matmul_sum, MatmulSum::float32);
  EXPECT_EQ(Policy::tensorflow().matmul_sum, MatmulSum::float32);
  EXPECT_TRUE(knob_inert("matmul_sum", Policy::parse("torch,matmul_sum=per_term")));
  EXPECT_TRUE(knob_inert("matmul_sum", Policy::parse("torch,math_matmul=tf32")));
  EXPECT_FALSE(knob_inert("matmul_sum", Policy::parse("torch,math_matmul=bfloat16")));
  EXPECT_FALSE(knob_inert("matmul_sum", Policy::parse("torch,autocast=float16")));
  try {
    Policy::parse("torch,matmul_sum=per_terms");
    FAIL() << "an unknown value was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("matmul_sum"), std::string::npos) << e.what();
  }
  // A product of two transposed operands under per_term was not measured: refused by name.
  GemmParams g;
  g.trans_a = g.trans_b = true;
  MathSpec m{MathMode::bfloat16};
  m.per_term = true;
  try {
    apply_term_sums(g, m);
    FAIL() << "both transposed was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("matmul_sum=per_term"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace driftlab
