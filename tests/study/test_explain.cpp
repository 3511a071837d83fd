// Explaining a gap (study/explain.h): the knobs proposed for a training are the ones that can act
// on it, the written spec is a valid one with both presets and every one-knob variant, and the
// shares are the fractions of the gap each variant moves, from either side, on known values.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "engine/policy.h"
#include "study/explain.h"
#include "study/spec.h"

namespace driftlab {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

TEST(StudyExplain, KnobsThatCannotActOnTheTrainingAreLeftOut) {
  const std::map<std::string, std::string> sgd = {{"optimizer", "sgd"}, {"device", "cpu"}, {"weight_decay", "0"}};
  const std::vector<std::string> lenet = study::relevant_knobs("lenet5", "torch", "tensorflow", sgd);
  for (const char* k : {"init_weight", "init_bias", "sgd_form", "ce_formulation", "flatten_order", "shuffle"})
    EXPECT_TRUE(contains(lenet, k)) << k;
  for (const std::string& k : lenet) {
    const std::string g = knob_info(k).group;
    EXPECT_NE(g, "quant") << k;
    EXPECT_NE(g, "batchnorm") << k;  // LeNet-5 has no BatchNorm
    EXPECT_NE(g, "recurrent") << k;
    EXPECT_NE(g, "cuda") << k;
    EXPECT_EQ(k.rfind("rnn_", 0), std::string::npos) << k;
    EXPECT_EQ(k.rfind("adam", 0), std::string::npos) << k;
    EXPECT_EQ(k.rfind("weight_decay", 0), std::string::npos) << k;  // no decay asked
    EXPECT_EQ(k.find("nan"), std::string::npos) << k;
  }
  // Knobs whose mechanism is off under both presets (engine/knob_gates.h): the loss-scale settings
  // without loss scaling, the 16-bit bias rounding in float32; they come in where it is on.
  for (const char* k : {"loss_scale_init", "loss_scale_min", "loss_scale_skipped_step", "conv_bias_rounding",
                        "matmul_bias_rounding"})
    EXPECT_FALSE(contains(lenet, k)) << k;
  const std::vector<std::string> mixed = study::relevant_knobs(
      "lenet5", "torch,autocast=float16,loss_scale=dynamic", "tensorflow,autocast=float16,loss_scale=dynamic", sgd);
  for (const char* k : {"loss_scale_init", "loss_scale_min", "loss_scale_skipped_step", "conv_bias_rounding",
                        "matmul_bias_rounding"})
    EXPECT_TRUE(contains(mixed, k)) << k;
  // ResNet-20 has BatchNorm: its knobs that differ come in; under Adam, Adam's knobs and not sgd_form.
  const std::map<std::string, std::string> adam = {{"optimizer", "adam"}, {"device", "cpu"}, {"weight_decay", "0"}};
  const std::vector<std::string> resnet = study::relevant_knobs("resnet20", "torch", "tensorflow", adam);
  EXPECT_TRUE(contains(resnet, "bn_eps"));
  EXPECT_TRUE(contains(resnet, "adam_eps"));
  EXPECT_FALSE(contains(resnet, "sgd_form"));
  // The LSTM: its recurrent initialisers; not the knobs of layers it does not have (convolutions,
  // a flatten, a GRU), which the presets also set apart.
  const std::vector<std::string> lstm = study::relevant_knobs("lstm", "torch", "tensorflow", sgd);
  for (const char* k : {"rnn_recurrent_init", "lstm_forget_bias_init", "init_weight", "weight_layout"})
    EXPECT_TRUE(contains(lstm, k)) << k;
  for (const char* k : {"conv_same_pad", "conv_kernel_flip", "model_conv_padding", "flatten_order", "gru_gate_order",
                        "gru_reset_after"})
    EXPECT_FALSE(contains(lstm, k)) << k;
  const std::vector<std::string> gru = study::relevant_knobs("gru", "torch", "tensorflow", sgd);
  EXPECT_TRUE(contains(gru, "gru_reset_after"));
  EXPECT_FALSE(contains(gru, "lstm_forget_bias_init"));
  // and LeNet-5 keeps its convolution's and flatten's
  for (const char* k : {"conv_same_pad", "flatten_order"}) EXPECT_TRUE(contains(lenet, k)) << k;
}

TEST(StudyExplain, TheWrittenSpecHoldsBothPresetsAndEveryOneKnobVariant) {
  const study::Spec spec = study::parse_spec(R"(study: l5
defaults: {limit: 300}
steps:
  train:
    do: train
    grid: {policy: [torch, tensorflow], seed: [1, 2]}
    set: {model: lenet5, epochs: 2}
)",
                                             "l5.yaml");
  const std::string y = study::explain_spec(spec, "train", "torch", "tensorflow", {"init_weight", "sgd_form"});
  const study::Plan p = study::plan(study::parse_spec(y, "explain.yaml"), "b");
  std::set<std::string> policies;
  for (const study::Cell& c : p.cells) policies.insert(c.params.at("policy"));
  EXPECT_EQ(policies, (std::set<std::string>{
                          Policy::parse("torch").to_string(), Policy::parse("tensorflow").to_string(),
                          Policy::parse("torch,init_weight=glorot_uniform").to_string(),
                          Policy::parse("tensorflow,init_weight=kaiming_uniform_sqrt5").to_string(),
                          Policy::parse("torch,sgd_form=keras_velocity").to_string(),
                          Policy::parse("tensorflow,sgd_form=torch_buffer").to_string()}));
  EXPECT_EQ(p.cells.size(), 6u * 2u);  // x seeds
  EXPECT_EQ(p.cells[0].params.at("limit"), "300");
  EXPECT_EQ(p.cells[0].params.at("epochs"), "2");
  // The cells of the two presets are the original study's cells: the same hashes.
  const study::Plan orig = study::plan(spec, "b");
  std::set<std::string> hashes;
  for (const study::Cell& c : p.cells) hashes.insert(c.hash);
  for (const study::Cell& c : orig.cells) EXPECT_TRUE(hashes.count(c.hash)) << c.params.at("policy");
  // A knob that is the same under both presets, a step of another kind, several models: refused.
  EXPECT_THROW(study::explain_spec(spec, "train", "torch", "tensorflow", {"adam_lr_t_order"}), Error);
  EXPECT_THROW(study::explain_spec(spec, "nope", "torch", "tensorflow"), Error);
}

// The steps downstream of the train step that take one model per cell come along (an attack on
// each variant's model, its int8 models); a step that gathers, or needs a step left out, does not.
TEST(StudyExplain, TheWrittenSpecCarriesTheStepsDownstreamOfTheTraining) {
  const study::Spec spec = study::parse_spec(R"(study: l5
defaults: {limit: 300}
steps:
  train:
    do: train
    grid: {policy: [torch, tensorflow], seed: [1, 2]}
    set: {model: lenet5, epochs: 2}
  other: {do: train, set: {model: lenet1}}
  int8: {do: quantize, needs: train, set: {scheme: tflite}}
  fgsm:
    do: attack
    needs: [train, int8]
    grid: {eps: [0.05, 0.1]}
  rob: {do: robustness, needs: train, gather: [policy]}
  judged: {do: attack, needs: [other, int8]}
)",
                                             "l5.yaml");
  const std::string y = study::explain_spec(spec, "train", "torch", "tensorflow", {"init_weight"});
  const study::Spec e = study::parse_spec(y, "explain.yaml");
  std::vector<std::string> steps;
  for (const study::StepSpec& s : e.steps) steps.push_back(s.name);
  EXPECT_EQ(steps, (std::vector<std::string>{"train", "int8", "fgsm"})) << y;
  const study::Plan p = study::plan(e, "b");
  std::map<std::string, int> per_step;
  for (const study::Cell& c : p.cells) ++per_step[c.step];
  // 4 policies x 2 seeds; an int8 model each; two attacks on each pair
  EXPECT_EQ(per_step, (std::map<std::string, int>{{"train", 8}, {"int8", 8}, {"fgsm", 16}}));
  // the attacks on the two presets' models are the study's own cells
  const study::Plan orig = study::plan(spec, "b");
  std::set<std::string> hashes;
  for (const study::Cell& c : p.cells) hashes.insert(c.hash);
  int found = 0;
  for (const study::Cell& c : orig.cells) found += c.step == "fgsm" && hashes.count(c.hash);
  EXPECT_EQ(found, 8);
}

// A gap in a step downstream of the training (an attack's success, keyed by train.policy) is
// explained as a training's is.
TEST(StudyExplain, GapsDownstreamOfTheTrainingAreExplainedToo) {
  study::ReportTable t;
  t.step = "fgsm";
  t.kind = "attack";
  t.keys = {"train.policy"};
  t.measures = {"success rate"};
  auto r = [](const std::string& policy, double mean) {
    study::ReportRow x;
    x.values = {Policy::parse(policy).to_string()};
    x.stats = {{"success rate", mean, 0.01, 3}};
    return x;
  };
  t.rows = {r("torch", 0.50), r("tensorflow", 0.70), r("torch,init_weight=glorot_uniform", 0.66)};
  const std::vector<study::GapExplanation> e = study::explain_shares({t});
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].measure, "success rate");
  ASSERT_EQ(e[0].shares.size(), 1u);
  EXPECT_NEAR(e[0].shares[0].share, 0.8, 1e-12);  // (0.66 - 0.50) / 0.20
}

// Which gaps `study report --explain` explains: two plain presets beyond the seeds' spread, in a
// train table or downstream of one (the model from the row, or the step's one model); not a gap
// within the spread, not a one-knob variant.
TEST(StudyExplain, GapsToExplainAreThePlainPresetsBeyondTheSpread) {
  const study::Plan p = study::plan(study::parse_spec(R"(study: g
steps:
  train: {do: train, grid: {model: [lenet1, lenet5], policy: [torch, tensorflow, theano]}}
  fgsm: {do: attack, needs: train}
)",
                                                      "g.yaml"),
                                    "b");
  auto r = [](std::vector<std::string> values, double mean, double sd) {
    study::ReportRow x;
    x.values = std::move(values);
    x.stats = {{"test accuracy", mean, sd, 3}};
    return x;
  };
  study::ReportTable t;
  t.step = "train";
  t.kind = "train";
  t.keys = {"model", "policy"};
  t.measures = {"test accuracy"};
  t.rows = {r({"lenet1", "torch"}, 0.70, 0.01), r({"lenet1", "tensorflow"}, 0.71, 0.01),  // within
            r({"lenet1", "theano"}, 0.80, 0.01),                                           // beyond both
            r({"lenet1", Policy::parse("torch,init_weight=glorot_uniform").to_string()}, 0.9, 0.01),
            r({"lenet5", "torch"}, 0.70, 0.01), r({"lenet5", "tensorflow"}, 0.60, 0.01)};
  study::ReportTable a;
  a.step = "fgsm";
  a.kind = "attack";
  a.keys = {"train.model", "train.policy"};
  a.measures = {"success rate"};
  a.rows = {r({"lenet5", "theano"}, 0.5, 0.01), r({"lenet5", "torch"}, 0.9, 0.01)};
  a.rows[0].stats[0].measure = a.rows[1].stats[0].measure = "success rate";
  const std::vector<study::GapToExplain> g = study::gaps_to_explain(p, {t, a});
  std::vector<std::string> got;
  for (const study::GapToExplain& x : g) got.push_back(x.step + " " + x.model + " " + x.a + " " + x.b);
  EXPECT_EQ(got, (std::vector<std::string>{"train lenet1 torch theano", "train lenet1 tensorflow theano",
                                           "train lenet5 torch tensorflow", "train lenet5 theano torch"}));
}

study::ReportRow row(const std::string& policy, double mean, double sd) {
  study::ReportRow r;
  r.values = {policy};
  r.stats = {{"test accuracy", mean, sd, 3}};
  return r;
}

TEST(StudyExplain, SharesAreTheFractionOfTheGapEachVariantMoves) {
  study::ReportTable t;
  t.step = "train";
  t.kind = "train";
  t.keys = {"policy"};
  t.measures = {"test accuracy"};
  t.rows = {row("torch", 0.70, 0.01), row("tensorflow", 0.80, 0.01),
            row(Policy::parse("torch,init_weight=glorot_uniform").to_string(), 0.79, 0.01),
            row(Policy::parse("tensorflow,init_weight=kaiming_uniform_sqrt5").to_string(), 0.72, 0.01),
            row(Policy::parse("torch,sgd_form=keras_velocity").to_string(), 0.705, 0.01)};
  const std::vector<study::GapExplanation> e = study::explain_shares({t});
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].a, "torch");
  EXPECT_EQ(e[0].b, "tensorflow");
  EXPECT_TRUE(e[0].gap_beyond_spread);  // 0.10 > sqrt(2) * 0.01
  ASSERT_EQ(e[0].shares.size(), 3u);
  for (const study::KnobShare& s : e[0].shares) {
    if (s.knob == "init_weight" && s.side == "torch") {
      EXPECT_NEAR(s.share, 0.9, 1e-12);  // (0.79 - 0.70) / 0.10
      EXPECT_TRUE(s.beyond_spread);
    } else if (s.knob == "init_weight") {
      EXPECT_EQ(s.side, "tensorflow");
      EXPECT_NEAR(s.share, 0.8, 1e-12);  // (0.80 - 0.72) / 0.10
      EXPECT_TRUE(s.beyond_spread);
    } else {
      EXPECT_EQ(s.knob, "sgd_form");
      EXPECT_NEAR(s.share, 0.05, 1e-12);
      EXPECT_FALSE(s.beyond_spread);  // 0.005 < sqrt(2) * 0.01
    }
  }
  const std::string md = study::explain_markdown(e);
  EXPECT_NE(md.find("Moved beyond the seeds' spread by `init_weight` (from torch's side 90%, from tensorflow's side 80%"),
            std::string::npos) << md;
  EXPECT_NE(md.find("Within the spread: sgd_form."), std::string::npos) << md;
}

}  // namespace
}  // namespace driftlab
