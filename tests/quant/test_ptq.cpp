// The PTQ driver (quant/ptq.h) and the quant knobs (engine/policy.h quant group): every toolchain
// quantizes LeNet-1 and LeNet-5 into a Sequential of int8 layers whose dequantized logits follow
// the fp32 model's; quant_scheme sets the whole group and prints back; the knobs change what
// they name (a ReLU unfused changes the graph, a divide vs reciprocal changes the input integers);
// unsupported layers are refused by name.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "models/models.h"
#include <filesystem>
#include <unistd.h>

#include "models/model_file.h"
#include "quant/model_io.h"
#include "quant/ptq.h"
#include "quant/qlayers.h"
#include "quant/report.h"
#include "tests/model_test_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

Tensor logits(Model& m, const Tensor& x) {
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  return m.forward(ctx, x);
}

// Fraction of rows whose argmax agree, and the largest |a - b| relative to the fp32 logits' range.
struct Agreement {
  double argmax, max_rel;
};
Agreement compare(const Tensor& a, const Tensor& b) {
  const int64_t n = a.dim(0), k = a.dim(1);
  int64_t same = 0;
  double maxdiff = 0, lo = 1e30, hi = -1e30;
  for (int64_t i = 0; i < n; ++i) {
    int64_t ia = 0, ib = 0;
    for (int64_t j = 0; j < k; ++j) {
      if (a.at(i * k + j) > a.at(i * k + ia)) ia = j;
      if (b.at(i * k + j) > b.at(i * k + ib)) ib = j;
      maxdiff = std::max(maxdiff, std::fabs(a.at(i * k + j) - b.at(i * k + j)));
      lo = std::min(lo, a.at(i * k + j));
      hi = std::max(hi, a.at(i * k + j));
    }
    same += ia == ib;
  }
  return {double(same) / n, maxdiff / (hi - lo)};
}

TEST(QuantPolicy, SchemeSetsTheGroupAndPrintsBack) {
  for (const char* t : {"tflite", "torch_qnnpack", "torch_onednn", "torch_fbgemm", "ort"}) {
    Policy p = Policy::parse(std::string("torch,quant_scheme=") + t);
    EXPECT_EQ(p.get("quant_scheme"), t);
    EXPECT_EQ(Policy::parse(p.to_string()).to_full_string(), p.to_full_string()) << t;
    Policy q = Policy::parse(std::string("torch,quant_scheme=") + t + ",quant_round=half_away,quant_relu=separate");
    EXPECT_EQ(Policy::parse(q.to_string()).to_full_string(), q.to_full_string()) << q.to_string();
  }
  EXPECT_EQ(Policy::parse("torch,quant_scheme=tflite").quant_requant, RequantRule::fixed_point_double_rounding);
  EXPECT_EQ(Policy::parse("torch,quant_scheme=torch_onednn").quant_bias, QuantBias::float_in_requant);
  EXPECT_EQ(Policy::tensorflow().quant_scheme, QuantToolchain::tflite);
  EXPECT_EQ(Policy::torch().quant_scheme, QuantToolchain::torch_qnnpack);
  // quant_scheme after a quant_* knob would reset it silently: refused, naming both
  try {
    Policy::parse("torch,quant_round=half_away,quant_scheme=ort");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("quant_round"), std::string::npos) << e.what();
  }
}

TEST(QuantPtq, EveryToolchainQuantizesLenet5CloseToFp32) {
  Model m = build_model("lenet5", Policy::torch(), 3);
  const Tensor calib = random_tensor({64, 1, 28, 28}, DType::f32, 11, 0.0, 1.0);
  const Tensor x = random_tensor({40, 1, 28, 28}, DType::f32, 12, 0.0, 1.0);
  const Tensor ref = logits(m, x);
  for (const char* t : {"tflite", "torch_qnnpack", "torch_onednn", "torch_fbgemm", "ort"}) {
    Policy p = Policy::parse(std::string("torch,quant_scheme=") + t);
    quant::PtqResult r = quant::quantize_model(m, p, calib);
    // quantize, 2x(qconv+relu, pool), flatten, 2x qdense+relu, qdense, dequantize
    ASSERT_EQ(r.model.net->size(), 10u) << t;
    EXPECT_EQ(r.model.net->layer(0).kind(), "quantize");
    EXPECT_EQ(r.model.net->layer(1).kind(), "qconv2d");
    EXPECT_EQ(r.model.net->layer(9).kind(), "dequantize");
    EXPECT_EQ(r.points.size(), 6u);  // input + 5 conv/dense outputs
    const Tensor y = logits(r.model, x);
    ASSERT_EQ(y.dtype(), DType::f32);
    const Agreement a = compare(ref, y);
    std::cout << t << ": argmax agreement " << a.argmax << ", max |dlogit| / logit range " << a.max_rel << "\n";
    // An untrained LeNet-5's logits span a narrow range, so 8-bit steps are coarse relative to it; a
    // correct int8 model stays within a few steps of the output scale (~1/255 of the range each).
    EXPECT_LT(a.max_rel, 0.05) << t;
    // the same model twice: the same bits
    const Tensor y2 = logits(r.model, x);
    for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y.at(i), y2.at(i));
  }
}

TEST(QuantPtq, KnobsChangeWhatTheyName) {
  Model m = build_model("lenet1", Policy::torch(), 5);
  const Tensor calib = random_tensor({32, 1, 28, 28}, DType::f32, 21, 0.0, 1.0);
  Policy fused = Policy::parse("torch,quant_scheme=tflite");
  Policy separate = Policy::parse("torch,quant_scheme=tflite,quant_relu=separate");
  quant::PtqResult a = quant::quantize_model(m, fused, calib);
  quant::PtqResult b = quant::quantize_model(m, separate, calib);
  EXPECT_EQ(a.model.net->size() + 2, b.model.net->size());  // two qrelu layers of their own
  EXPECT_EQ(b.model.net->layer(2).kind(), "qrelu");
  // A fused ReLU's output range starts at 0: the int8 zero point is the type minimum.
  EXPECT_EQ(a.points[1].q.zero_point, -128);
  EXPECT_LT(b.points[1].range.min, 0.f);  // observed before the ReLU
  // What has no int8 form yet is refused by name: the option-B shortcut (resnet20b). ResNet-20 itself
  // quantizes under tflite (its ADD and MEAN: QuantAdd.TfliteWorkedExamples,
  // QuantGlobalAvgPool.TfliteMeanWorkedExamples), the MEAN with an output scale of its own.
  const Tensor c = random_tensor({2, 3, 32, 32}, DType::f32, 1);
  {
    Model r = build_model("resnet20", Policy::torch(), 1);
    quant::PtqResult t = quant::quantize_model(r, fused, c);
    bool found = false;
    for (std::size_t i = 0; i < t.model.net->size(); ++i)
      if (auto* g = quant::quant_layer_as<quant::QGlobalAvgPoolLayer>(t.model.net->layer(i))) {
        found = true;
        EXPECT_EQ(g->op_params().rule, QAvgPoolRule::tflite_integer_mean);
        EXPECT_TRUE(g->own_qparams());
      }
    EXPECT_TRUE(found);
    ExecContext exec;
    RunContext rc = RunContext::inference(exec);
    const Tensor y = t.model.forward(rc, c);
    EXPECT_EQ(y.shape(), (Shape{2, 10}));
  }
  for (const auto& [arch, want] : {std::pair<std::string, std::string>{"resnet20b", "option-B"}}) {
    Model r = build_model(arch, Policy::torch(), 1);
    try {
      quant::quantize_model(r, fused, c);
      ADD_FAILURE() << arch << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  // Calibration data of the wrong shape names both shapes.
  EXPECT_THROW(quant::quantize_model(m, fused, random_tensor({4, 1, 27, 28}, DType::f32, 1)), Error);
  // int8 models have no backward
  ExecContext exec;
  RunContext ctx = RunContext::recorded(exec, Semantics::inference);
  EXPECT_THROW(a.model.net->backward(ctx, Tensor::zeros({1, 10}, DType::f32)), Error);
}

}  // namespace
}  // namespace driftlab

namespace driftlab {
namespace {

// A quantized model written to a file and read back computes the same bits: every buffer (int8
// weights, int32 or float biases, scales, zero points) round-trips and each layer re-resolves its
// op params from them.
TEST(QuantModelFile, SavedAndLoadedInt8ModelGivesTheSameBits) {
  Model m = build_model("lenet5", Policy::torch(), 3);
  const Tensor calib = random_tensor({32, 1, 28, 28}, DType::f32, 11, 0.0, 1.0);
  const Tensor x = random_tensor({8, 1, 28, 28}, DType::f32, 12, 0.0, 1.0);
  const std::string path = (std::filesystem::temp_directory_path() / ("q_" + std::to_string(::getpid()) + ".dlm")).string();
  for (const char* t : {"tflite", "torch_onednn", "ort"}) {
    quant::PtqResult r = quant::quantize_model(m, Policy::parse(std::string("torch,quant_scheme=") + t), calib);
    quant::save_quantized_model(path, r.model, nlohmann::json::object(), {{"scheme", t}});
    LoadedModel lm = quant::load_any_model(path);
    ASSERT_TRUE(quant::is_quantized(lm));
    EXPECT_EQ(lm.model.policy.to_full_string(), r.model.policy.to_full_string());
    EXPECT_TRUE(bitwise_equal(logits(lm.model, x), logits(r.model, x))) << t;
    // the fp32 loader refuses the int8 file by name
    try {
      load_model(path);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("int8 model"), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace driftlab

namespace driftlab {
namespace {

// ResNet-20 (BatchNorm folded into the convs, residual adds with the ReLU fused, global average
// pooling) under the two PyTorch engines' schemes: the int8 logits follow fp32's; the model file
// round-trips; the report's SQNR walks inside the residual blocks.
TEST(QuantPtq, Resnet20UnderTheTorchEngines) {
  Model m = build_model("resnet20", Policy::torch(), 4);
  randomise_running_stats(m, 40);
  const Tensor calib = random_tensor({16, 3, 32, 32}, DType::f32, 41, 0.0, 1.0);
  const Tensor x = random_tensor({6, 3, 32, 32}, DType::f32, 42, 0.0, 1.0);
  const Tensor ref = logits(m, x);
  for (const char* t : {"torch_qnnpack", "torch_onednn"}) {
    const Policy p = Policy::parse(std::string("torch,quant_scheme=") + t);
    quant::PtqOptions o;
    o.calib_batch = 8;
    quant::PtqResult r = quant::quantize_model(m, p, calib, o);
    // input, stem conv, 9 blocks x (2 convs + the add), fc
    EXPECT_EQ(r.points.size(), 1u + 1u + 27u + 1u) << t;
    const Tensor y = logits(r.model, x);
    const Agreement a = compare(ref, y);
    std::cout << "resnet20 " << t << ": max |dlogit| / logit range " << a.max_rel << "\n";
    EXPECT_LT(a.max_rel, 0.1) << t;  // 20 int8 layers: a few output steps of the logit range
    const std::vector<quant::LayerSqnr> sq = quant::layer_sqnr(m, r, x);
    ASSERT_EQ(sq.size(), r.points.size());
    for (const auto& l : sq) EXPECT_GT(l.sqnr_db, 10.0) << t << " " << l.point;
    const std::string path =
        (std::filesystem::temp_directory_path() / ("qr_" + std::to_string(::getpid()) + ".dlm")).string();
    quant::save_quantized_model(path, r.model, nlohmann::json::object(), {{"scheme", t}});
    LoadedModel lm = quant::load_any_model(path);
    EXPECT_TRUE(bitwise_equal(logits(lm.model, x), y)) << t;
    std::filesystem::remove(path);
  }
}

}  // namespace
}  // namespace driftlab
