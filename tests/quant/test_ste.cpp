// The straight-through estimator of an int8 model (quant/ste.h): the fake-quant layer's values and
// mask at hand-computed edges, the fake-quantized float graph against the int8 model it mirrors,
// its STE gradient against the same graph written by hand from the dequantized weights, and the
// STE runner's split (decisions from the int8 model, gradient from the graph). The PyTorch oracle
// (torch.fake_quantize_per_tensor_affine under autograd) is tests/oracles/test_torch_ste.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dropout_layer.h"
#include "engine/train/runner.h"
#include "models/models.h"
#include "quant/ptq.h"
#include "quant/qlayers.h"
#include "quant/ste.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

QuantizeParams u8(float scale, int32_t zp, ScaleOp op = ScaleOp::divide, RoundRule r = RoundRule::half_even) {
  QuantizeParams p;
  p.scale = {scale};
  p.zero_point = {zp};
  p.qmin = 0, p.qmax = 255, p.dtype = DType::u8, p.op = op, p.round = r;
  return p;
}

// scale 0.25 (exact in binary), zero point 10: integers 0..255 are reals -2.5 .. 61.25.
TEST(SteFakeQuant, ValuesAndMaskAtTheEdges) {
  quant::FakeQuantLayer fq({9}, u8(0.25f, 10));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::from<float>({1, 9}, {0.f, 0.125f, 0.375f, -2.5f, -2.625f, 61.25f, 61.375f, 100.f, nan});
  ExecContext exec;
  RunContext rc = RunContext::recorded(exec, Semantics::inference);
  const Tensor y = fq.forward(rc, x);
  // 0.125/0.25 = 0.5 -> 0 (half even); 0.375 -> 1.5 -> 2 -> 0.5; -2.5 -> -10 -> q 0 (inside: the
  // edge itself); -2.625 -> -10.5 -> -10 (half even: inside); 61.375 -> 245.5 -> 246 -> clamped to
  // 245 + 10 = 255 (outside); NaN -> qmin.
  const float want_y[] = {0.f, 0.f, 0.5f, -2.5f, -2.5f, 61.25f, 61.25f, 61.25f, -2.5f};
  const float want_mask[] = {1, 1, 1, 1, 1, 1, 0, 0, 0};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(y.data<float>()[i], want_y[i]) << i;
  const Tensor dy = Tensor::from<float>({1, 9}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  const Tensor dx = fq.backward(rc, dy);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(dx.data<float>()[i], want_mask[i] * dy.data<float>()[i]) << i;
  // the same through x * (1/s) and half away from zero: 0.125 -> 0.5 -> 1 -> 0.25
  quant::FakeQuantLayer away({9}, u8(0.25f, 10, ScaleOp::mul_reciprocal, RoundRule::half_away));
  EXPECT_EQ(away.forward(rc, x).data<float>()[1], 0.25f);
  // -2.625 -> -10.5 -> -11 under half away: now outside, masked
  EXPECT_EQ(away.backward(rc, dy).data<float>()[4], 0.f);
  // a backward without a recorded forward is refused
  EXPECT_THROW(away.backward(rc, dy), Error);
}

quant::PtqResult quantized(const char* model, const char* scheme) {
  Model m = build_model(model, Policy::parse("torch"), 3);
  return quant::quantize_model(m, Policy::parse(std::string("torch,quant_scheme=") + scheme),
                               random_tensor({64, 1, 28, 28}, DType::f32, 11, 0.0, 1.0));
}

Tensor logits(Model& m, const Tensor& x) {
  ExecContext exec;
  RunContext rc = RunContext::inference(exec);
  return m.forward(rc, x);
}

// How closely the mirror's logits b follow the int8 model's a: the largest difference in output
// steps (s_out), the rows whose argmax agree, the elements equal.
struct Following {
  double worst_steps = 0;
  int64_t same_argmax = 0, equal = 0;
};
Following following(const Tensor& a, const Tensor& b, float s_out) {
  EXPECT_EQ(a.shape(), b.shape());
  Following f;
  const int64_t k_n = a.dim(1);
  for (int64_t i = 0; i < a.dim(0); ++i) {
    int64_t ia = 0, ib = 0;
    for (int64_t k = 0; k < k_n; ++k) {
      const int64_t j = i * k_n + k;
      f.worst_steps = std::max(f.worst_steps, std::fabs(a.at(j) - b.at(j)) / s_out);
      f.equal += a.at(j) == b.at(j);
      if (a.at(j) > a.at(i * k_n + ia)) ia = k;
      if (b.at(j) > b.at(i * k_n + ib)) ib = k;
    }
    f.same_argmax += ia == ib;
  }
  return f;
}

// The float mirror computes what the int8 model computes, but with float sums: each fake-quantized
// activation may land one step from the int8 one where a float sum rounds across a step boundary,
// and such steps propagate. Bound: the logits within 3 output steps (the output scale s_out, one
// for the rounding at the output, two for propagated input steps through the dense head), and the
// predicted class the same for at least 95% of the inputs (a 1-step difference decides only
// near-ties). Measured: see the printed line.
TEST(SteModel, MirrorFollowsTheInt8Model) {
  const Tensor x = random_tensor({200, 1, 28, 28}, DType::f32, 12, 0.0, 1.0);
  for (const char* model : {"lenet1", "lenet5"})
    for (const char* scheme : {"tflite", "torch_qnnpack", "torch_onednn", "torch_fbgemm", "ort"}) {
      quant::PtqResult q = quantized(model, scheme);
      Model fake = quant::fake_quant_model(q.model);
      const Tensor a = logits(q.model, x);
      const Following f = following(a, logits(fake, x), q.points.back().q.scale);
      std::cout << model << " " << scheme << ": fake-quant logits equal the int8 model's in " << f.equal << " of "
                << a.numel() << ", worst " << f.worst_steps << " output steps, argmax agreement " << f.same_argmax
                << "/" << a.dim(0) << "\n";
      EXPECT_LE(f.worst_steps, 3.0) << model << " " << scheme;
      EXPECT_GE(f.same_argmax, 190) << model << " " << scheme;
    }
}

// The STE gradient is the mirror's ordinary backward (LeNet-5, torch_qnnpack): the mirror's first
// conv holds exactly the dequantized int8 weights, and dL/dx is exactly zero wherever the input's
// fake quantization saturates, the mask computed here on its own from the input scale.
TEST(SteModel, GradientIsTheMaskedFloatGradient) {
  quant::PtqResult q = quantized("lenet5", "torch_qnnpack");
  Model fake = quant::fake_quant_model(q.model);
  // the mirror's layers: fake_quant, conv2d, relu, fake_quant, maxpool, ...
  ASSERT_EQ(fake.net->layer(0).kind(), "fake_quant");
  ASSERT_EQ(fake.net->layer(1).kind(), "conv2d");
  ASSERT_EQ(fake.net->layer(2).kind(), "relu");
  ASSERT_EQ(fake.net->layer(3).kind(), "fake_quant");
  auto* qc = quant::quant_layer_as<quant::QConv2dLayer>(q.model.net->layer(1));
  auto* fc = layer_as<Conv2dLayer>(fake.net->layer(1));
  ASSERT_TRUE(qc && fc);
  // the dequantized weights: s_w[k] * w_q exactly
  const quant::QLinearSpec spec = qc->spec();
  const int64_t per = fc->weight().value.numel() / fc->op_params().k;
  for (int64_t i = 0; i < fc->weight().value.numel(); ++i)
    ASSERT_EQ(fc->weight().value.data<float>()[i],
              static_cast<float>(spec.weight.q.data<int8_t>()[i]) * spec.weight.scale_of(i / per));
  // whole-model STE gradient: dL/dx is zero exactly where the input fake-quant saturates, and the
  // gradient is not zero everywhere (inputs in [0,1] are inside the input range)
  const Tensor x = random_tensor({6, 1, 28, 28}, DType::f32, 13, -0.2, 1.2);
  std::vector<int32_t> labels = {0, 1, 2, 3, 4, 5};
  auto runner = open_runner(fake, Device::cpu);
  const InputGradient g = runner->input_gradient(x, labels, Semantics::inference);
  const float s_in = q.points[0].q.scale;
  const int32_t zp_in = q.points[0].q.zero_point;
  int64_t masked = 0, nonzero = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = std::nearbyint(x.data<float>()[i] * (1.0f / s_in)) + static_cast<float>(zp_in);
    const bool inside = v >= 0.f && v <= 255.f;  // torch_qnnpack: uint8, x * (1/s), half even
    if (!inside) {
      ++masked;
      EXPECT_EQ(g.dx.data<float>()[i], 0.f) << i;
    }
    nonzero += g.dx.data<float>()[i] != 0.f;
  }
  EXPECT_GT(masked, 100);   // -0.2..0 and 1..1.2 of the inputs fall outside [0, 1]'s range
  EXPECT_GT(nonzero, 100);
}

// The STE runner: logits and the reported loss are the int8 model's; the gradient is the mirror's.
TEST(SteRunner, DecisionsFromInt8GradientFromTheMirror) {
  quant::PtqResult q = quantized("lenet5", "tflite");
  Model fake = quant::fake_quant_model(q.model);
  auto ste = quant::open_ste_runner(q.model, fake);
  const Tensor x = random_tensor({5, 1, 28, 28}, DType::f32, 14, 0.0, 1.0);
  const std::vector<int32_t> labels = {1, 3, 5, 7, 9};
  const Tensor int8_logits = logits(q.model, x);
  const Tensor got = ste->logits(x);
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(got.at(i), int8_logits.at(i));
  const InputGradient g = ste->input_gradient(x, labels, Semantics::inference);
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_EQ(g.logits.at(i), int8_logits.at(i));
  const InputGradient h = open_runner(fake, Device::cpu)->input_gradient(x, labels, Semantics::inference);
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(g.dx.at(i), h.dx.at(i));
  EXPECT_THROW(ste->train_step(x, labels), Error);
}

// ResNet-20 int8 (identity and option-A blocks, the add + relu fused, global average pooling): the
// mirror's float add and average replace the scheme's integer add (fixed point, or float with its
// own roundings) and integer mean, so each block's output may land one step from the int8 one
// where a sum sits near a rounding boundary, and nine blocks propagate such steps. Bound: 8 output
// steps, the predicted class the same for at least 90% of 40 inputs of an untrained network (whose
// logits crowd together). Measured: the printed line.
TEST(SteModel, Resnet20MirrorFollowsTheInt8Model) {
  Model m = build_model("resnet20", Policy::parse("torch"), 3);
  const Tensor calib = random_tensor({16, 3, 32, 32}, DType::f32, 15, -1.0, 1.0);
  const Tensor x = random_tensor({40, 3, 32, 32}, DType::f32, 16, -1.0, 1.0);
  for (const char* scheme : {"torch_qnnpack", "torch_onednn", "ort"}) {
    quant::PtqResult q = quant::quantize_model(m, Policy::parse(std::string("torch,quant_scheme=") + scheme), calib);
    Model fake = quant::fake_quant_model(q.model);
    const Tensor a = logits(q.model, x);
    const Following f = following(a, logits(fake, x), q.points.back().q.scale);
    std::cout << "resnet20 " << scheme << ": worst " << f.worst_steps << " output steps, argmax agreement "
              << f.same_argmax << "/" << a.dim(0) << "\n";
    EXPECT_LE(f.worst_steps, 8.0) << scheme;
    EXPECT_GE(f.same_argmax, 36) << scheme;
    // and its STE gradient exists and is not all zero
    const InputGradient g = quant::open_ste_runner(q.model, fake)->input_gradient(
        x, std::vector<int32_t>(40, 3), Semantics::inference);
    double gmax = 0;
    for (int64_t i = 0; i < g.dx.numel(); ++i) gmax = std::max(gmax, std::fabs(g.dx.at(i)));
    EXPECT_GT(gmax, 0.0) << scheme;
  }
}

// What the mirror cannot build is refused by layer path and kind.
TEST(SteModel, UnknownLayersRefusedByName) {
  quant::PtqResult q = quantized("lenet1", "tflite");
  q.model.net->add(std::make_unique<DropoutLayer>(0.5, q.model.net->current_shape()));
  try {
    quant::fake_quant_model(q.model);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("(dropout)"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace driftlab
