// Dynamic-range (weights-only) quantization: the per-call input quantization rules of
// core/ops/quant_dynamic.h on hand-computed cases (ties of both rounding rules, reduce_range, the
// small-scale and zero-range branches), the reference kernel's integer sums and both output rules,
// and the layers and models of quant/dynamic.h: LSTM/GRU classifiers follow the fp32 model under
// every scheme, per-row symmetric results do not depend on the batch while per-call affine ones do,
// the knobs change what they name, files round-trip, unsupported layers are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "core/error.h"
#include "kernels/cpu/registry.h"
#include "models/models.h"
#include "quant/dynamic.h"
#include "quant/model_io.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

Tensor run_kernel(const QDenseDynamicParams& p, const Tensor& x, const Tensor& w, const Tensor& ws, const Tensor* b);

// ---------------- choosing the input's scale and zero point ----------------

TEST(QuantDynamicChoose, AffineDoubleHandComputed) {
  // [-1, 3] on 0..255: s = 4/255; zp from min: 0 + 1/s = 63.75 (error |0| - 63.75 < 255 - 191.25) -> 64
  ScaleZeroPoint q = choose_affine_double(-1.f, 3.f, 0, 255);
  EXPECT_EQ(q.scale, static_cast<float>(4.0 / 255.0));
  EXPECT_EQ(q.zero_point, 64);
  // A tie: [-62.5, 192.5] gives s = 1 and zp 62.5 -> 62 (half even; half away would give 63)
  q = choose_affine_double(-62.5f, 192.5f, 0, 255);
  EXPECT_EQ(q.scale, 1.0f);
  EXPECT_EQ(q.zero_point, 62);
  // reduce_range (0..127): [-8, 23.75] -> s = 31.75/127 = 0.25, zp = 8/0.25 = 32
  q = choose_affine_double(-8.f, 23.75f, 0, 127);
  EXPECT_EQ(q.scale, 0.25f);
  EXPECT_EQ(q.zero_point, 32);
  // Only positive values: min stretched to 0, zp 0
  q = choose_affine_double(0.5f, 2.55f, 0, 255);
  EXPECT_EQ(q.scale, static_cast<float>(2.55f / 255.0));
  EXPECT_EQ(q.zero_point, 0);
  // All zero: s = 0 -> 0.1 (ATen avoids an infinite reciprocal)
  q = choose_affine_double(0.f, 0.f, 0, 255);
  EXPECT_EQ(q.scale, 0.1f);
  EXPECT_EQ(q.zero_point, 0);
  // Below SMALL_SCALE_THRESHOLD: s = 1e-3/255 < 6.1e-5 -> 6.1e-5, max stretched to 6.1e-5 * 255
  q = choose_affine_double(0.f, 1e-3f, 0, 255);
  EXPECT_EQ(q.scale, 6.1e-5f);
  EXPECT_EQ(q.zero_point, 0);
  // Both signs below the threshold: min and max amplified by 6.1e-5/s; zp kept in proportion
  q = choose_affine_double(-1e-3f, 3e-3f, 0, 255);
  EXPECT_EQ(q.scale, 6.1e-5f);
  EXPECT_EQ(q.zero_point, 64);
  EXPECT_THROW(choose_affine_double(1.f, 0.f, 0, 255), Error);
}

TEST(QuantDynamicChoose, AffineFloatHandComputed) {
  ScaleZeroPoint q = choose_affine_float(-1.f, 3.f, 0, 255);
  EXPECT_EQ(q.scale, 4.0f / 255.0f);
  EXPECT_EQ(q.zero_point, 64);  // 63.75 in float
  q = choose_affine_float(-62.5f, 192.5f, 0, 255);
  EXPECT_EQ(q.zero_point, 62);  // the tie, half even
  q = choose_affine_float(0.f, 0.f, 0, 255);  // max == min: scale 1
  EXPECT_EQ(q.scale, 1.0f);
  EXPECT_EQ(q.zero_point, 0);
}

TEST(QuantDynamicChoose, AffinePerRowHandComputed) {
  // [-1, 3]: double s = 4/255; zp from min: -128 + 63.75 = -64.25 (error 128 + 63.75 < 127 + 191.25) -> -64
  ScaleZeroPoint q = choose_affine_row(-1.f, 3.f, -128, 127, RoundRule::half_away);
  EXPECT_EQ(q.scale, static_cast<float>(4.0 / 255.0));
  EXPECT_EQ(q.zero_point, -64);
  // A tie: [-63.5, 191.5] gives s = 1 and zp -64.5: half away -65, half even -64
  EXPECT_EQ(choose_affine_row(-63.5f, 191.5f, -128, 127, RoundRule::half_away).zero_point, -65);
  EXPECT_EQ(choose_affine_row(-63.5f, 191.5f, -128, 127, RoundRule::half_even).zero_point, -64);
  // rmin == rmax (all zero): s = 1, zp = 0
  q = choose_affine_row(0.f, 0.f, -128, 127, RoundRule::half_away);
  EXPECT_EQ(q.scale, 1.0f);
  EXPECT_EQ(q.zero_point, 0);
  // All positive: rmin = 0, zp from min = -128 (error 128 + 0 < 127 + 255): <= qmin -> -128
  EXPECT_EQ(choose_affine_row(0.5f, 2.f, -128, 127, RoundRule::half_away).zero_point, -128);
}

TEST(QuantDynamicKernel, AffinePerRowAddsTheZeroPointBeforeRounding) {
  // s = 1, zp = -65 (half away): round(-65 + x) = round(-128.5, 126.5, -64.5, -65.5) = -129 -> clamp -128,
  // 127, -65, -66; minus zp: -63, 192, 0, -1. With w = (1, 1, 1, 1) * scale 1: acc = 128.
  QDenseDynamicParams p;
  p.act = DynActRule::affine_per_row;
  p.qmin = -128;
  p.qmax = 127;
  p.x_round = RoundRule::half_away;
  p.n = 1;
  p.in = 4;
  p.out = 1;
  const Tensor x = Tensor::from<float>({1, 4}, {-63.5f, 191.5f, 0.5f, -0.5f});
  const Tensor w = Tensor::from<int8_t>({1, 4}, {1, 1, 1, 1}), ws = Tensor::from<float>({1}, {1.0f});
  EXPECT_EQ(run_kernel(p, x, w, ws, nullptr).at(0), 128.0);
}

TEST(QuantDynamicChoose, SymmetricPerRowAndNonFiniteInputs) {
  QDenseDynamicParams p;
  p.act = DynActRule::symmetric_per_row;
  p.qmin = -127;
  p.qmax = 127;
  p.n = 2;
  p.in = 3;
  const std::vector<float> x = {-15.875f, 1.f, 2.f, 0.f, 0.f, 0.f};
  const DynInputQ q = choose_dynamic_input_q(p, x.data());
  ASSERT_EQ(q.scale.size(), 2u);
  EXPECT_EQ(q.scale[0], 0.125f);  // 15.875 / 127
  EXPECT_EQ(q.inv[0], 8.0f);      // 127 / 15.875
  EXPECT_EQ(q.scale[1], 1.0f);    // an all-zero row: scale 1, ints 0
  EXPECT_EQ(q.inv[1], 0.0f);
  std::vector<float> bad = x;
  bad[4] = std::nanf("");
  try {
    choose_dynamic_input_q(p, bad.data());
    FAIL() << "NaN accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("element 4 (row 1)"), std::string::npos) << e.what();
  }
}

// ---------------- the reference kernel ----------------

Tensor run_kernel(const QDenseDynamicParams& p, const Tensor& x, const Tensor& w, const Tensor& ws, const Tensor* b) {
  const KernelRegistry reg = make_cpu_registry();
  Tensor y({p.n, p.out}, DType::f32);
  reg.qdense_dynamic.reference().forward(p, x, w, ws, b, y);
  return y;
}

TEST(QuantDynamicKernel, AffineIntegersAndBothOutputRulesHandComputed) {
  // [-8, 23.75] on 0..127: s = 0.25, zp = 32. x/s = -32, 1.5, 95, 4.5 -> half even -32, 2, 95, 4.
  QDenseDynamicParams p;
  p.n = 1;
  p.in = 4;
  p.out = 1;
  p.qmax = 127;
  p.has_bias = true;
  const Tensor x = Tensor::from<float>({1, 4}, {-8.f, 0.375f, 23.75f, 1.125f});
  const Tensor w = Tensor::from<int8_t>({1, 4}, {1, -1, 2, 3});
  const Tensor ws = Tensor::from<float>({1}, {0.5f}), b = Tensor::from<float>({1}, {0.25f});
  // acc = -32 - 2 + 190 + 12 = 168; y = 168 * (0.25 * 0.5) + 0.25 = 21.25
  EXPECT_EQ(run_kernel(p, x, w, ws, &b).at(0), 21.25);
  p.out_rule = DynOutRule::prescaled_bias;  // bs = 4 * 2 = 8; (168 + 0.25 * 8) / 8 = 21.25
  EXPECT_EQ(run_kernel(p, x, w, ws, &b).at(0), 21.25);
  p.x_round = RoundRule::half_away;  // 1.5 -> 2, 4.5 -> 5: acc = 168 + 3 = 171; (171 + 2) / 8
  EXPECT_EQ(run_kernel(p, x, w, ws, &b).at(0), 173.0 / 8.0);
}

TEST(QuantDynamicKernel, SymmetricPerRowTiesHandComputed) {
  // r = 15.875, inv = 8: x * 8 = -127, 0.5, 9.5, 2.5
  QDenseDynamicParams p;
  p.act = DynActRule::symmetric_per_row;
  p.qmin = -127;
  p.qmax = 127;
  p.n = 1;
  p.in = 4;
  p.out = 1;
  p.has_bias = true;
  p.x_round = RoundRule::half_away;
  const Tensor x = Tensor::from<float>({1, 4}, {-15.875f, 0.0625f, 1.1875f, 0.3125f});
  const Tensor w = Tensor::from<int8_t>({1, 4}, {1, -1, 2, 3});
  const Tensor ws = Tensor::from<float>({1}, {0.5f}), b = Tensor::from<float>({1}, {0.25f});
  // half away: -127, 1, 10, 3 -> acc = -127 - 1 + 20 + 9 = -99; y = -99 * 0.0625 + 0.25
  EXPECT_EQ(run_kernel(p, x, w, ws, &b).at(0), -5.9375);
  // half even: -127, 0, 10, 2 -> acc = -101; y = -6.3125 + 0.25
  p.x_round = RoundRule::half_even;
  EXPECT_EQ(run_kernel(p, x, w, ws, &b).at(0), -6.0625);
}

TEST(QuantDynamicKernel, RefusesWrongShapesAndTypes) {
  QDenseDynamicParams p;
  p.n = 1;
  p.in = 4;
  p.out = 2;
  const Tensor x({1, 4}, DType::f32), w({2, 3}, DType::i8), ws({1}, DType::f32);
  EXPECT_THROW(run_kernel(p, x, w, ws, nullptr), Error);
  const Tensor w8({2, 4}, DType::i8), scales3({3}, DType::f32);
  EXPECT_THROW(run_kernel(p, x, w8, scales3, nullptr), Error);
  p.qmax = 300;
  EXPECT_THROW(run_kernel(p, x, w8, ws, nullptr), Error);
}

// ---------------- layers and models ----------------

Tensor logits(Model& m, const Tensor& x) {
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  return m.forward(ctx, x);
}

double sqnr_db(const Tensor& ref, const Tensor& got) {
  double s = 0, e = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    s += ref.at(i) * ref.at(i);
    e += (ref.at(i) - got.at(i)) * (ref.at(i) - got.at(i));
  }
  return 10 * std::log10(s / e);
}

const char* const kSchemes[] = {"tflite", "torch_qnnpack", "torch_onednn", "torch_fbgemm", "ort"};

TEST(QuantDynamicModel, LstmAndGruFollowFp32UnderEveryScheme) {
  const Tensor x = random_tensor({12, 28, 28}, DType::f32, 71, 0.0, 1.0);
  for (const char* preset : {"torch", "tensorflow"})
    for (const char* arch : {"lstm", "gru"}) {
      Model fp = build_model(arch, Policy::preset_named(preset), 3);
      const Tensor yf = logits(fp, x);
      for (const char* scheme : kSchemes) {
        SCOPED_TRACE(std::string(preset) + " " + arch + " " + scheme);
        Model q = quant::quantize_dynamic(fp, Policy::parse(std::string(preset) + ",quant_scheme=" + scheme));
        ASSERT_EQ(q.net->size(), 2u);
        // ONNX Runtime has no GRU quantizer: the GRU stays float (quant_dyn_gru=float32)
        const bool float_gru = std::string(arch) == "gru" && std::string(scheme) == "ort";
        EXPECT_EQ(q.net->layer(0).kind(), float_gru ? std::string("gru") : std::string(arch) + "_dynamic");
        EXPECT_EQ(q.net->layer(1).kind(), "qdense_dynamic");
        // 8-bit weights and inputs through 28 recurrent steps: ~30 dB observed at init; 20 dB is an
        // error of a tenth of the logits' size, which no formula slip stays under.
        EXPECT_GT(sqnr_db(yf, logits(q, x)), 20.0);
      }
    }
}

TEST(QuantDynamicModel, PerRowResultsIgnoreTheBatchPerCallAffineOnesDoNot) {
  Model fp = build_model("lstm", Policy::torch(), 5);
  const Tensor x = random_tensor({8, 28, 28}, DType::f32, 72, 0.0, 1.0);
  // Sample 0 alone, then in a batch with a sample of much larger values.
  Tensor batch = x.clone();
  for (int64_t i = 28 * 28; i < 2 * 28 * 28; ++i) batch.data<float>()[i] *= 40.f;
  Tensor alone({1, 28, 28}, DType::f32);
  std::copy_n(x.data<float>(), 28 * 28, alone.data<float>());
  for (const char* scheme : {"tflite", "torch_qnnpack"}) {
    Model q = quant::quantize_dynamic(fp, Policy::parse(std::string("torch,quant_scheme=") + scheme));
    const Tensor a = logits(q, alone), b = logits(q, batch);
    int64_t differ = 0;
    for (int64_t j = 0; j < 10; ++j) differ += a.at(j) != b.at(j);
    if (std::string(scheme) == "tflite")
      EXPECT_EQ(differ, 0) << "per-row scales: a sample's result is its own";
    else
      EXPECT_GT(differ, 0) << "one scale per call: the big sample coarsens sample 0's input";
  }
}

TEST(QuantDynamicModel, KnobsChangeWhatTheyName) {
  Model fp = build_model("lstm", Policy::torch(), 5);
  const Tensor x = random_tensor({6, 28, 28}, DType::f32, 73, -1.0, 1.5);
  Model base = quant::quantize_dynamic(fp, Policy::parse("torch,quant_scheme=torch_qnnpack"));
  const Tensor y0 = logits(base, x);
  for (const char* knob : {"quant_dyn_act=affine_float", "quant_dyn_act=symmetric_per_row",
                           "quant_dyn_act=affine_per_row", "quant_dyn_range=reduced",
                           "quant_dyn_weights=per_channel", "quant_dyn_weights=per_gate", "quant_dyn_output=prescaled_bias",
                           "quant_dyn_input_proj=per_step"}) {
    SCOPED_TRACE(knob);
    Model q = quant::quantize_dynamic(fp, Policy::parse(std::string("torch,quant_scheme=torch_qnnpack,") + knob));
    const Tensor y = logits(q, x);
    int64_t differ = 0;
    for (int64_t i = 0; i < y.numel(); ++i) differ += y.at(i) != y0.at(i);
    EXPECT_GT(differ, 0);
  }
}

TEST(QuantDynamicModel, FileRoundTripAndCliMetadata) {
  Model fp = build_model("gru", Policy::torch(), 9);
  const Policy pol = Policy::parse("torch,quant_scheme=torch_onednn");
  Model q = quant::quantize_dynamic(fp, pol);
  const std::string dir = (std::filesystem::temp_directory_path() / ("dl_dyn_" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/q.dlm";
  quant::save_quantized_model(path, q, nlohmann::json::object(), {{"scheme", "torch_onednn"}, {"mode", "dynamic"}});
  LoadedModel back = quant::load_any_model(path);
  EXPECT_TRUE(quant::is_quantized(back));
  const Tensor x = random_tensor({4, 28, 28}, DType::f32, 74, 0.0, 1.0);
  const Tensor a = logits(q, x), b = logits(back.model, x);
  for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.at(i), b.at(i)) << i;
  EXPECT_EQ(back.model.net->layer(0).kind(), "gru_dynamic");
  std::filesystem::remove_all(dir);
}

TEST(QuantDynamicModel, RefusesLayersWithoutADynamicForm) {
  Model lenet = build_model("lenet1", Policy::torch(), 1);
  try {
    quant::quantize_dynamic(lenet, Policy::torch());
    FAIL() << "a conv model was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0 (conv2d)"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(quant::needs_dynamic(lenet));
  Model lstm = build_model("lstm", Policy::torch(), 1);
  EXPECT_TRUE(quant::needs_dynamic(lstm));
}

}  // namespace
}  // namespace driftlab
