// cross_policy_drift (drift/drift.h), what `driftlab drift` prints and writes: one entry per
// policy in the given order, every later policy against each earlier one, each number the
// same as computing it step by step with rebuild_under / predict_probs / compare_outputs /
// localise, and the JSON carrying the same values.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/reparam.h"
#include "drift/drift.h"
#include "engine/train/cpu_runner.h"
#include "models/models.h"
#include "report/drift.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

Dataset random_images(int64_t n) {
  Dataset d;
  d.images = random_tensor({n, 1, 28, 28}, DType::f32, 11, 0.0, 1.0);
  for (int64_t i = 0; i < n; ++i) d.labels.push_back(static_cast<int32_t>((i * 7) % 10));
  d.num_classes = 10;
  d.name = "random";
  return d;
}

TEST(DriftCrossPolicy, PairsInOrderAndEqualToTheSteps) {
  const Model weights = build_model("lenet1", Policy::tensorflow(), 3);
  const Dataset test = random_images(12);
  const std::vector<Policy> policies = {Policy::tensorflow(), Policy::theano(), Policy::torch()};
  ExecContext exec;
  CrossPolicyOptions opt;
  opt.localise_batch = 5;
  opt.batch = 4;  // more than one batch per policy
  std::vector<std::string> seen;
  const CrossPolicyDrift d = cross_policy_drift(weights, policies, test, exec, opt,
                                                [&](const PolicyAccuracy& a) { seen.push_back(a.policy.preset); });
  EXPECT_EQ(seen, (std::vector<std::string>{"tensorflow", "theano", "torch"}));
  ASSERT_EQ(d.accuracy.size(), 3u);
  EXPECT_EQ(d.localised, 5);
  // (j vs i) for i < j, by i then j: the later policy against the earlier one as the reference.
  const std::pair<int, int> order[] = {{1, 0}, {2, 0}, {2, 1}};
  ASSERT_EQ(d.pairs.size(), 3u);

  std::vector<Model> models;
  std::vector<Tensor> probs;
  for (std::size_t i = 0; i < policies.size(); ++i) {
    models.push_back(rebuild_under(weights, policies[i], true));
    CpuRunner runner(models.back(), {}, exec);
    probs.push_back(predict_probs(runner, test, opt.batch));
    EXPECT_EQ(d.accuracy[i].policy.to_string(), policies[i].to_string());
    EXPECT_EQ(d.accuracy[i].accuracy, accuracy_of(probs.back(), test.labels));
  }
  Tensor first5({5, 1, 28, 28}, DType::f32);  // the localised images
  for (int64_t i = 0; i < first5.numel(); ++i) first5.data<float>()[i] = test.images.data<float>()[i];
  for (std::size_t k = 0; k < 3; ++k) {
    const auto [j, i] = order[k];
    const PolicyPair& p = d.pairs[k];
    SCOPED_TRACE(p.a.preset + " vs " + p.b.preset);
    EXPECT_EQ(p.a.to_string(), policies[j].to_string());
    EXPECT_EQ(p.b.to_string(), policies[i].to_string());
    EXPECT_EQ(to_json(p.outputs), to_json(compare_outputs(probs[j], probs[i])));
    EXPECT_EQ(to_json(p.localisation), to_json(localise(models[j], models[i], exec, first5, opt.tolerance)));
    EXPECT_EQ(p.localisation.layers.size(), weights.net->size());
    EXPECT_EQ(p.localisation.tolerance, opt.tolerance);
  }

  const nlohmann::json j = to_json(d);
  ASSERT_EQ(j.at("accuracy").size(), 3u);
  EXPECT_EQ(j["accuracy"][2]["policy"], "torch");
  EXPECT_EQ(j["accuracy"][2]["accuracy"].get<double>(), d.accuracy[2].accuracy);
  ASSERT_EQ(j.at("pairs").size(), 3u);
  EXPECT_EQ(j["pairs"][1]["a"], "torch");
  EXPECT_EQ(j["pairs"][1]["b"], "tensorflow");
  EXPECT_EQ(j["pairs"][1]["outputs"], to_json(d.pairs[1].outputs));
  EXPECT_EQ(j["pairs"][1]["localisation"], to_json(d.pairs[1].localisation));
}

// The same policy twice is the same function: no drift anywhere. More localised images than
// the test set has localises them all.
TEST(DriftCrossPolicy, SamePolicyTwiceHasNoDrift) {
  const Model weights = build_model("lenet1", Policy::torch(), 5);
  const Dataset test = random_images(3);
  ExecContext exec;
  const CrossPolicyDrift d = cross_policy_drift(weights, {Policy::torch(), Policy::torch()}, test, exec, {});
  ASSERT_EQ(d.pairs.size(), 1u);
  EXPECT_EQ(d.localised, 3);
  EXPECT_EQ(d.pairs[0].outputs.max_abs, 0.0);
  EXPECT_EQ(d.pairs[0].outputs.misclassification, 0.0);
  EXPECT_EQ(d.pairs[0].localisation.first_divergent, -1);
  for (const LayerDrift& l : d.pairs[0].localisation.layers) EXPECT_EQ(l.max_abs, 0.0) << l.layer;
  EXPECT_EQ(d.accuracy[0].accuracy, d.accuracy[1].accuracy);
}

}  // namespace
}  // namespace driftlab
