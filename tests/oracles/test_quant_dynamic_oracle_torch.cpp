// Dynamic (weights-only) int8 quantization (quant/dynamic.h) against PyTorch 1.13's quantize_dynamic
// (default_dynamic_qconfig, qint8) on its qnnpack and onednn engines, on the same weights and inputs
// (tests/oracles/torch/quant_oracle.py, kind 'dynamic'):
//  - one nn.Linear: the int8 weight, its scale and every float output bit for bit (the input's scale
//    and zero point are chosen per call by ChooseQuantizationParams; qnnpack ignores reduce_range,
//    onednn honours it and pre-scales the bias);
//  - the LSTM and GRU classifiers (seq-fashion-mnist shapes): logits compared with a bound, because
//    the gate math (sigmoid, tanh) is ATen's vectorised float code here and the C library's in
//    driftlab, ulps apart (the fp32 models differ by the same ulps, printed next to it).
#include <gtest/gtest.h>

#include "engine/layers/rnn_layer.h"
#include "models/models.h"
#include "quant/dynamic.h"
#include "tests/oracles/oracle_util.h"

namespace driftlab {
namespace {

using oracle::CaseDir;

struct DynCase {
  std::string arch, engine;
  std::string name() const { return arch + "_" + engine; }
  Policy policy() const { return Policy::parse("torch,quant_scheme=torch_" + engine); }
};
const std::vector<DynCase> kCases = {{"linear", "qnnpack"}, {"linear", "onednn"}, {"lstm", "qnnpack"},
                                     {"lstm", "onednn"},    {"gru", "qnnpack"},    {"gru", "onednn"}};

// Linear: 37 -> 19, inputs spanning both signs (so the zero point is interior) and a batch of 64.
Tensor linear_x() { return random_tensor({64, 37}, DType::f32, 501, -3.0, 5.0); }
Tensor linear_w() { return random_tensor({19, 37}, DType::f32, 502, -0.4, 0.3); }
Tensor linear_b() { return random_tensor({19}, DType::f32, 503, -1.0, 1.0); }
// The classifiers: the zoo's torch-preset models (28 steps of 28 features, 128 units, 10 classes)
// with their initial weights, and images in [0, 1).
Model rnn_model(const std::string& arch) { return build_model(arch, Policy::torch(), 11); }
Tensor rnn_x() { return random_tensor({16, 28, 28}, DType::f32, 504, 0.0, 1.0); }

// The dense layer of a model (its last) and its recurrent layer (its first).
Tensor param(Layer& l, const std::string& name) {
  for (Param* p : l.params())
    if (p->name == name) return p->value;
  ADD_FAILURE() << l.kind() << " has no parameter " << name;
  return Tensor();
}

void fill(CaseDir& d) {
  for (const DynCase& c : kCases) {
    if (c.arch == "linear") {
      d.input(c.name(), "weight", linear_w());
      d.input(c.name(), "bias", linear_b());
      d.input(c.name(), "x", linear_x());
    } else {
      Model m = rnn_model(c.arch);
      const TorchRnnWeights w = static_cast<RnnLayer&>(m.net->layer(0)).torch_weights();
      d.input(c.name(), "weight_ih", w.weight_ih);
      d.input(c.name(), "weight_hh", w.weight_hh);
      d.input(c.name(), "bias_ih", w.bias_ih);
      d.input(c.name(), "bias_hh", w.bias_hh);
      d.input(c.name(), "fc_weight", param(m.net->layer(1), "weight"));
      d.input(c.name(), "fc_bias", param(m.net->layer(1), "bias"));
      d.input(c.name(), "x", rnn_x());
    }
    d.add_case({{"name", c.name()}, {"kind", "dynamic"}, {"arch", c.arch}, {"engine", c.engine}});
  }
}
const CaseDir& dynamic_run() {
  static const CaseDir d(oracle::torch_oracle("quant_oracle.py"), "torch_quant_dynamic", fill);
  return d;
}

Tensor run_model(Model& m, const Tensor& x) {
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  return m.forward(ctx, x);
}

TEST(TorchQuantDynamic, LinearWeightsAndOutputsBitExactOnQnnpackAndOnednn) {
  ORACLE_GROUP(run, dynamic_run);
  for (const DynCase& c : kCases) {
    if (c.arch != "linear") continue;
    SCOPED_TRACE(c.name());
    const Policy pol = c.policy();
    const quant::QuantScheme s = quant::QuantScheme::from_policy(pol);
    const quant::QuantizedWeight qw = quant::quantize_weight(s, linear_w(), false, "linear");
    const Tensor ws = run.out(c.name(), "ws"), wq = run.out(c.name(), "wq");
    EXPECT_EQ(qw.scale.at(0), static_cast<float>(ws.at(0)));
    int64_t wdiff = 0;
    for (int64_t i = 0; i < wq.numel(); ++i) wdiff += qw.q.at(i) != wq.at(i);
    EXPECT_EQ(wdiff, 0) << "int8 weights differing from torch's";
    quant::QDynDenseLayer layer(quant::dynamic_params(pol), qw, linear_b());
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    const Tensor y = layer.forward(ctx, linear_x()), ty = run.out(c.name(), "y");
    ASSERT_EQ(y.numel(), ty.numel());
    int64_t differ = 0;
    for (int64_t i = 0; i < y.numel(); ++i) differ += y.at(i) != ty.at(i);
    std::cout << c.name() << ": " << differ << " of " << y.numel() << " float outputs differ from torch's\n";
    EXPECT_EQ(differ, 0);  // tolerance 0: the same integer sum and the same float32 steps
  }
}

TEST(TorchQuantDynamic, LstmAndGruClassifiersFollowTorch) {
  ORACLE_GROUP(run, dynamic_run);
  for (const DynCase& c : kCases) {
    if (c.arch == "linear") continue;
    SCOPED_TRACE(c.name());
    Model fp = rnn_model(c.arch);
    Model q = quant::quantize_dynamic(fp, c.policy());
    const Tensor x = rnn_x();
    const Tensor y = run_model(q, x), yf = run_model(fp, x);
    const Tensor ty = run.out(c.name(), "y"), tyf = run.out(c.name(), "y_fp32");
    double d_int8 = 0, d_fp32 = 0, drift = 0;
    int64_t argmax_differ = 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      d_int8 = std::max(d_int8, std::fabs(y.at(i) - ty.at(i)));
      d_fp32 = std::max(d_fp32, std::fabs(yf.at(i) - tyf.at(i)));
      drift = std::max(drift, std::fabs(ty.at(i) - tyf.at(i)));
    }
    const int64_t k = y.dim(1);
    for (int64_t n = 0; n < y.dim(0); ++n) {
      int64_t a = 0, b = 0;
      for (int64_t j = 1; j < k; ++j) {
        if (y.at(n * k + j) > y.at(n * k + a)) a = j;
        if (ty.at(n * k + j) > ty.at(n * k + b)) b = j;
      }
      argmax_differ += a != b;
    }
    std::cout << c.name() << ": max |driftlab int8 - torch int8| = " << d_int8 << " (fp32 models: " << d_fp32
              << "; torch's own int8 vs fp32 drift: " << drift << "); argmax differs on " << argmax_differ << " of "
              << y.dim(0) << "\n";
    // The bound: a hundredth of torch's own quantization drift. The gate math differs by ulps
    // (d_fp32 shows how much), which moves a rounding of the per-step quantized h only where a
    // value sits within ulps of a half step; a wrong formula (scale rule, reduce_range, bias
    // handling, sequence-wide vs per-step input scale) moves the logits by the order of `drift`.
    EXPECT_LT(d_int8, 0.01 * drift);
    EXPECT_EQ(argmax_differ, 0);
  }
}

}  // namespace
}  // namespace driftlab
