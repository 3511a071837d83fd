// drift/: weight conversion between conventions, Openja et al.'s output-error definitions
// (docs/GLOSSARY.md), layer localisation, per-knob attribution (inference and training) and
// `explain`'s examples.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>

#include "models/reparam.h"
#include "drift/drift.h"
#include "drift/explain.h"
#include "engine/random.h"
#include "models/models.h"
#include "tests/test_util.h"

namespace {

using namespace driftlab;

Dataset synthetic(int64_t n, uint64_t seed) {
  Dataset d;
  d.images = Tensor({n, 1, 28, 28}, DType::f32);
  Rng rng(RngEngine::mt19937_u24, seed);
  for (int64_t i = 0; i < d.images.numel(); ++i) d.images.data<float>()[i] = rng.uniform_f32();
  for (int64_t i = 0; i < n; ++i) d.labels.push_back(static_cast<int32_t>(rng.next_u32() % 10));
  d.num_classes = 10;
  d.name = "synthetic";
  return d;
}

Tensor logits(Model& m, const Tensor& x) {
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  return m.forward(ctx, x);
}

TEST(DriftConvert, ConvertedWeightsComputeTheSameFunctionUnderEveryPreset) {
  Model src = build_model("lenet5", Policy::tensorflow(), 3);  // glorot: logits of order 1
  Tensor x = synthetic(8, 1).images;
  Tensor ref = logits(src, x);
  for (const char* preset : {"torch", "theano"}) {
    Model conv = rebuild_under(src, Policy::preset_named(preset), true);
    Model raw = rebuild_under(src, Policy::preset_named(preset), false);
    // Converted: same mathematics, different summation order (eigen vs onednn, permuted dense
    // columns): float32 sums of <= 400 products, far inside 1e-5 of the logit scale.
    EXPECT_TRUE(all_close(logits(conv, x), ref, 1e-5, 1e-5)) << preset;
    // Raw tensors under another convention are another function: the flip (theano) or the
    // flatten order (both) moves the logits by far more than rounding.
    Tensor r = logits(raw, x);
    double worst = 0;
    for (int64_t i = 0; i < r.numel(); ++i) worst = std::max(worst, std::abs(r.at(i) - ref.at(i)));
    std::cout << preset << ": raw-weight logits differ by up to " << worst << "\n";
    EXPECT_GT(worst, 5e-2) << preset;
  }
}

// Residual networks: the layers inside a block are converted by their own kind too (their kernels
// rotated across conv_kernel_flip, their BatchNorm running statistics carried over). The two
// policies differ in conv_kernel_flip only, so converted weights must compute the same logits;
// the running statistics are made non-trivial first, so that a block whose statistics stayed
// behind (the destination's initial mean 0, variance 1) would show.
TEST(DriftConvert, ResidualBlocksAreConvertedLayerByLayer) {
  for (const char* name : {"resnet20", "resnet20b"}) {
    SCOPED_TRACE(name);
    Model src = build_model(name, Policy::tensorflow(), 3);
    Rng rng(RngEngine::mt19937_u24, 7);
    for (auto& nb : src.net->named_buffers()) {
      const bool var = nb.first.find("running_var") != std::string::npos;
      float* v = nb.second->value.data<float>();
      for (int64_t i = 0; i < nb.second->value.numel(); ++i) v[i] = var ? 0.5f + rng.uniform_f32() : rng.uniform_f32() - 0.5f;
    }
    Tensor x({4, 3, 32, 32}, DType::f32);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = rng.uniform_f32();
    const Tensor ref = logits(src, x);
    Model flipped = rebuild_under(src, Policy::parse("tensorflow,conv_kernel_flip=true"), true);
    // The same products summed in the same order by the reference and fast kernels, but through
    // 20 convolutions in float32 whose kernels are now read mirrored: within 1e-4 of logits of
    // order 1 (before the fix the blocks' raw kernels moved them by more than 0.1).
    EXPECT_TRUE(all_close(logits(flipped, x), ref, 1e-4, 1e-4));
    Model raw = rebuild_under(src, Policy::parse("tensorflow,conv_kernel_flip=true"), false);
    Tensor r = logits(raw, x);
    double worst = 0;
    for (int64_t i = 0; i < r.numel(); ++i) worst = std::max(worst, std::abs(r.at(i) - ref.at(i)));
    EXPECT_GT(worst, 1e-2) << "raw kernels under the flip should be another function";
  }
}

// LSTM peepholes across a conversion: into a layer with them they arrive as zero (the same
// function); out of a layer with them into one without, the conversion is refused by name.
TEST(DriftConvert, LstmPeepholesZeroInRefusedOut) {
  Model plain = build_model("lstm", Policy::torch(), 3);
  Policy pp = Policy::torch();
  pp.set("lstm_peepholes", "lasagne");
  Tensor x({4, 28, 28}, DType::f32);  // 4 sequences of 28 steps x 28 features
  Rng rng(RngEngine::mt19937_u24, 1);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = rng.uniform_f32();
  Model peep = rebuild_under(plain, pp, true);
  EXPECT_TRUE(all_close(logits(peep, x), logits(plain, x), 0, 0));
  Model drawn = build_model("lstm", pp, 3);  // N(0, 0.1^2) peepholes
  try {
    rebuild_under(drawn, Policy::torch(), true);
    FAIL() << "peepholes dropped silently";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lstm_peepholes"), std::string::npos) << e.what();
  }
}

TEST(DriftConvert, RoundTripIsExact) {
  Model src = build_model("lenet1", Policy::tensorflow(), 5);
  Model there = rebuild_under(src, Policy::theano(), true);
  Model back = rebuild_under(there, Policy::tensorflow(), true);
  auto a = src.net->named_params(), b = back.net->named_params();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bitwise_equal(a[i].second->value, b[i].second->value)) << a[i].first;
}

TEST(DriftMetrics, S3Definitions) {
  // y_o the reference, y_a the other: deltas [+0.1, -0.1, -0.5, +0.5]
  Tensor yo = Tensor::from<double>({2, 2}, {0.5, 0.5, 0.8, 0.2});
  Tensor ya = Tensor::from<double>({2, 2}, {0.6, 0.4, 0.3, 0.7});
  OutputDrift d = compare_outputs(ya, yo);
  // Tolerances: a few double roundings of values ~1.
  EXPECT_NEAR(d.abs_err_mean, 0.0, 1e-15);                                   // the signed mean cancels
  EXPECT_NEAR(d.rel_err_mean, (0.2 - 0.2 - 0.625 + 2.5) / 4, 1e-15);         // mean of delta / y_o
  EXPECT_NEAR(d.mean_abs, 0.3, 1e-15);
  EXPECT_NEAR(d.max_abs, 0.5, 1e-15);
  EXPECT_DOUBLE_EQ(d.misclassification, 0.5);  // row 0: argmax 0 vs 0 (first of a tie); row 1: 1 vs 0
}

TEST(DriftLocalise, RawWeightsDivergeAtTheKnobsLayer) {
  Model src = build_model("lenet5", Policy::torch(), 3);
  Tensor x = synthetic(4, 2).images;
  ExecContext exec;
  // Theano flips the kernel: the very first conv diverges.
  Model th = rebuild_under(src, Policy::theano(), false);
  Localisation a = localise(th, src, exec, x, 1e-5);
  EXPECT_EQ(a.first_divergent, 0);
  // TensorFlow flattens hwc; flatten outputs are compared in chw order, so the first layer that
  // differs is the dense layer that consumes them (index 7).
  Model tf = rebuild_under(src, Policy::tensorflow(), false);
  Localisation b = localise(tf, src, exec, x, 1e-5);
  EXPECT_EQ(b.first_divergent, 7);
  EXPECT_LT(b.layers[6].max_rel, 1e-5) << "flatten outputs must agree after reordering";
  // Converted weights: nothing diverges beyond float32 rounding.
  Model tc = rebuild_under(src, Policy::tensorflow(), true);
  EXPECT_EQ(localise(tc, src, exec, x, 1e-5).first_divergent, -1);
}

TEST(DriftAttribute, InferenceOnlyKnobsAndPathShares) {
  Model src = build_model("lenet1", Policy::torch(), 7);
  Dataset test = synthetic(64, 3);
  ExecContext exec;
  AttributeOptions opt;
  opt.batch = 64;
  Attribution a = attribute(src, Policy::tensorflow(), Policy::torch(), test, nullptr, exec, opt);
  // Every knob that differs is flipped but six whose mechanism is off under both presets
  // (engine/knob_gates.h): the loss-scale settings without loss scaling, the 16-bit ops' bias
  // rounding in float32, the recurrent layers' autocast rule without autocast. Flipping them could
  // only measure zero.
  const std::vector<std::string> inert = {"loss_scale_init", "loss_scale_min", "loss_scale_skipped_step",
                                          "conv_bias_rounding", "matmul_bias_rounding", "rnn_autocast_rule"};
  ASSERT_EQ(a.single.size(), diff(Policy::tensorflow(), Policy::torch()).size() - inert.size());
  for (const auto& e : a.single)
    EXPECT_EQ(std::find(inert.begin(), inert.end(), e.knob), inert.end()) << e.knob << " is inert: left out";
  for (const auto& e : a.single) {
    // Training-only knobs cannot change a forward pass of given weights.
    if (e.knob == "ce_formulation" || e.knob == "sgd_form" || e.knob == "init_weight" || e.knob == "shuffle" ||
        e.knob == "rng_engine" || e.knob == "weight_decay_mode") {
      EXPECT_TRUE(e.changes_nothing) << e.knob;
    }
  }
  double shares = 0;
  for (const auto& s : a.path) shares += s.share;
  ASSERT_GT(a.total.mean_abs, 0.0) << "eigen vs onednn must differ somewhere in the last bits";
  EXPECT_NEAR(shares, 1.0, 1e-9) << "the path ends at `to`, so the shares add to 1";
  EXPECT_EQ(a.path.back().distance_to_to, 0.0);
}

TEST(DriftAttribute, TrainingMakesTrainingKnobsMatter) {
  Model src = build_model("lenet1", Policy::tensorflow(), 7);
  Dataset train = synthetic(96, 4), test = synthetic(32, 5);
  ExecContext exec;
  AttributeOptions opt;
  opt.train_epochs = 1;
  opt.train.batch = 32;
  opt.train.optim = {0.05, 0.9, false, 0.0};
  opt.batch = 32;
  Attribution a = attribute(src, Policy::tensorflow(), Policy::torch(), test, &train, exec, opt);
  ASSERT_TRUE(a.trained);
  for (const auto& e : a.single) {
    std::cout << e.knob << ": weight distance after 1 epoch " << e.weight_distance << "\n";
    // Another data order: a different trajectory, by far more than rounding.
    if (e.knob == "shuffle") {
      EXPECT_GT(e.weight_distance, 1e-3);
    }
    // LeNet-1 has no dropout: the stream is never drawn after init (weights come from the file).
    if (e.knob == "rng_engine") {
      EXPECT_TRUE(e.changes_nothing);
    }
    // Converted weights make the flatten order a re-parameterisation: only rounding remains
    // (the dense GEMM adds its terms in another order), at float32 level after 3 steps.
    if (e.knob == "flatten_order") {
      EXPECT_LT(e.weight_distance, 1e-4);
    }
  }
}

TEST(DriftExplain, EveryKnobHasALiveExample) {
  for (const auto& k : knob_table()) {
    std::string text;
    ASSERT_NO_THROW(text = explain_knob(k.name)) << k.name;
    EXPECT_NE(text.find("example (computed now"), std::string::npos) << k.name;
    EXPECT_NE(text.find(k.source.substr(0, 20)), std::string::npos) << k.name;
  }
  std::string pad = explain_knob("conv_same_pad");
  EXPECT_NE(pad.find("conv_same_pad=after: pads top/bottom/left/right 0/1/0/1"), std::string::npos) << pad;
  EXPECT_NE(pad.find("conv_same_pad=before: pads top/bottom/left/right 1/0/1/0"), std::string::npos) << pad;
  EXPECT_NE(pad.find("refused"), std::string::npos) << pad;
  EXPECT_THROW(explain_knob("bn_epsilon"), Error);
  // The int8 knobs whose effect a few logits cannot show: their examples must show it somewhere.
  // The count printed after `marker` on the first line of `value` that has it (-1 where none does).
  auto count = [](const std::string& text, const std::string& value, const std::string& marker) -> long {
    for (std::size_t line = text.find("    " + value + " "); line != std::string::npos;
         line = text.find("    " + value + " ", line + 1)) {
      const std::size_t at = text.find(marker, line), eol = text.find('\n', line);
      if (at != std::string::npos && at < eol) return std::stol(text.substr(at + marker.size()));
    }
    return -1;
  };
  // Ties rounded apart: half_even moves some of the sweep's exact ties (every other one, by parity).
  const std::string rnd = explain_knob("quant_round");
  EXPECT_EQ(count(rnd, "quant_round=half_away", "first value's: "), 0) << rnd;
  EXPECT_GT(count(rnd, "quant_round=half_even", "first value's: "), 0) << rnd;
  // The residual add's rules part on some of an add's 65,536 stored pairs; the average pool's on
  // ResNet-20's logits (LeNet-1, which the other examples use, has neither).
  const std::string add = explain_knob("quant_add");
  EXPECT_GT(count(add.substr(add.find("over all 65,536 pairs")), "quant_add=float_fma_tail64", "first value's: "), 0)
      << add;
  const std::string pool = explain_knob("quant_avg_pool");
  EXPECT_NE(pool.find("ResNet-20"), std::string::npos) << pool;
  EXPECT_GT(count(pool, "quant_avg_pool=tflite_integer_mean", "from the first value: "), 0) << pool;
  // The knobs that form a conv layer's stored numbers act near ties only; the one-layer sweep
  // (2.4 million weights, 65,536 biases and multipliers, 16.8 million requantized outputs) shows them.
  const std::string wop = explain_knob("quant_weight_scale_op");
  EXPECT_EQ(count(wop, "quant_weight_scale_op=divide", "weights "), 0) << wop;
  EXPECT_GT(count(wop, "quant_weight_scale_op=mul_reciprocal", "weights "), 0) << wop;
  EXPECT_GT(count(wop, "quant_weight_scale_op=mul_inverse_range", "weights "), 0) << wop;
  const std::string bias = explain_knob("quant_bias");
  EXPECT_GT(count(bias, "quant_bias=int32_mul_reciprocal", "biases "), 0) << bias;
  EXPECT_GT(count(bias, "quant_bias=float_in_requant", "channel 0's outputs "), 0) << bias;
  const std::string mult = explain_knob("quant_multiplier");
  EXPECT_GT(count(mult, "quant_multiplier=float32_mul_reciprocal", "multipliers "), 0) << mult;
  EXPECT_GT(count(mult, "quant_multiplier=float64", "channel 0's outputs "), 0) << mult;
  EXPECT_GT(count(mult, "quant_multiplier=reciprocal_scales", "channel 0's outputs "), 0) << mult;
  // float32 and float64 products of two float32 scales round to the same float32 (the double
  // product is exact): if this ever differs, float64 no longer rounds s_b once to float32, as the
  // knob's row in docs/POLICIES.md says it does.
  const std::string prod = explain_knob("quant_bias_product");
  EXPECT_EQ(count(prod, "quant_bias_product=float64", "biases "), 0) << prod;
  EXPECT_EQ(count(prod, "quant_bias_product=float64", "channel 0's outputs "), 0) << prod;
}

}  // namespace
