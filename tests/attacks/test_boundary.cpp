// attacks/boundary.h: properties of the Boundary attack under Foolbox 2's and Foolbox 3's rules
// (their numpy / framework noise cannot be reproduced, so there is no bit-level oracle): every
// returned example is misclassified by the model and inside the bounds, its distance to the input
// never increases from step to step, the same seed gives the same result twice, and an input the
// model already misclassifies is returned unchanged with one query. The rules that tell the two
// apart (Foolbox 3's one candidate per step judged every step, its step thresholds, Foolbox 2's
// convergence confirmation) are checked directly.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>

#include "attacks/boundary.h"
#include "engine/train/cpu_runner.h"
#include "models/models.h"
#include "tests/model_test_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

class BoundaryRules : public ::testing::TestWithParam<attacks::BoundaryRules> {};

TEST_P(BoundaryRules, AdversarialInBoundsDistanceNeverGrowsSeedRepeats) {
  Model m = input_sensitive_lenet5();
  CpuRunner runner(m);
  const Tensor x = random_tensor({3, 1, 28, 28}, DType::f32, 14, 0.0, 1.0);
  std::vector<int32_t> y = predictions(runner.logits(x));
  y[2] = (y[2] + 1) % 10;  // misclassified from the start
  attacks::BoundarySpec spec = attacks::boundary_defaults(GetParam());
  spec.steps = 60;
  spec.seed = 11;
  const attacks::BoundaryResult r = attacks::run_boundary(runner, x, y, spec);
  const std::vector<int32_t> judged = predictions(runner.logits(r.x_adv));
  for (int64_t s = 0; s < 2; ++s) {
    ASSERT_TRUE(r.success[s]) << s << ": an untrained LeNet-5 misclassifies uniform noise";
    EXPECT_NE(judged[s], y[s]) << s << ": the returned example must be adversarial";
    for (int64_t e = 0; e < 784; ++e) {
      ASSERT_GE(r.x_adv.data<float>()[s * 784 + e], 0.f);
      ASSERT_LE(r.x_adv.data<float>()[s * 784 + e], 1.f);
    }
    ASSERT_FALSE(r.trace[s].empty());
    // Foolbox takes a candidate only when strictly closer; ART takes its closest adversarial point
    // unconditionally, which by construction (a spherical step, a clip towards x0, a step by eps
    // towards x0) is never farther
    for (std::size_t k = 1; k < r.trace[s].size(); ++k) {
      if (GetParam() == attacks::BoundaryRules::art)
        EXPECT_LE(r.trace[s][k], r.trace[s][k - 1]) << s << " step " << k;
      else
        EXPECT_LT(r.trace[s][k], r.trace[s][k - 1]) << s << " step " << k;
    }
    EXPECT_LT(r.trace[s].back(), r.trace[s].front()) << s << ": 60 steps should get closer than the start";
    // the distance of the example returned, recomputed from x_adv and x (not the attack's own
    // bookkeeping): the attack holds the point in float64 and returns it rounded to float32, each
    // element moved by at most 2^-25 (values in [0, 1]), so the MSE by at most 2 * 1 * 2^-25 + 2^-50
    double mse = 0;
    for (int64_t e = 0; e < 784; ++e) {
      const double d = static_cast<double>(r.x_adv.data<float>()[s * 784 + e]) - x.data<float>()[s * 784 + e];
      mse += d * d;
    }
    mse /= 784;
    EXPECT_NEAR(mse, r.mse[s], 6e-8) << s;
    EXPECT_NEAR(mse, r.trace[s].back(), 6e-8) << s << ": the last point kept is the one returned";
    EXPECT_GT(r.queries[s], 60);
  }
  EXPECT_TRUE(r.success[2]);
  EXPECT_EQ(r.queries[2], 1);
  EXPECT_EQ(std::memcmp(r.x_adv.data<float>() + 2 * 784, x.data<float>() + 2 * 784, 784 * sizeof(float)), 0);
  const attacks::BoundaryResult again = attacks::run_boundary(runner, x, y, spec);
  EXPECT_EQ(std::memcmp(r.x_adv.raw(), again.x_adv.raw(), r.x_adv.nbytes()), 0);
  EXPECT_EQ(r.queries, again.queries);
  EXPECT_EQ(r.trace, again.trace);
  spec.max_directions = 0;
  EXPECT_THROW(attacks::run_boundary(runner, x, y, spec), Error);
}

INSTANTIATE_TEST_SUITE_P(Rules, BoundaryRules,
                         ::testing::Values(attacks::BoundaryRules::foolbox2, attacks::BoundaryRules::foolbox3,
                                           attacks::BoundaryRules::art),
                         [](const auto& info) { return std::string(attacks::boundary_rules_name(info.param)); });

// Foolbox 3: one candidate per sample and step, judged every step, the spherical points on every
// 10th: ten more steps cost every sample of the batch exactly 11 more queries (the start, the
// same seed, is the same); float32 and float64 internals both give valid examples.
TEST(Boundary, Foolbox3JudgesOneCandidatePerStepAndSphericalsEveryTenth) {
  Model m = input_sensitive_lenet5();
  CpuRunner runner(m);
  const Tensor x = random_tensor({4, 1, 28, 28}, DType::f32, 21, 0.0, 1.0);
  const std::vector<int32_t> y = predictions(runner.logits(x));
  attacks::BoundarySpec spec = attacks::boundary_defaults(attacks::BoundaryRules::foolbox3);
  spec.batch = 3;  // two batches: 3 samples stepping together, then 1
  spec.steps = 20;
  const attacks::BoundaryResult a = attacks::run_boundary(runner, x, y, spec);
  spec.steps = 30;
  const attacks::BoundaryResult b = attacks::run_boundary(runner, x, y, spec);
  for (int s = 0; s < 4; ++s) {
    ASSERT_TRUE(a.success[s] && b.success[s]) << s;
    EXPECT_EQ(b.queries[s] - a.queries[s], 11) << s;
    EXPECT_EQ(a.steps_run[s], 20);
    EXPECT_LE(b.mse[s], a.mse[s]) << s << ": the first 20 steps are the same steps";
  }
  EXPECT_EQ(a.queries[0], a.queries[2]) << "a batch's samples are judged together";
  spec.f64_internals = true;
  const attacks::BoundaryResult c = attacks::run_boundary(runner, x, y, spec);
  const std::vector<int32_t> judged = predictions(runner.logits(c.x_adv));
  for (int s = 0; s < 4; ++s) EXPECT_NE(judged[s], y[s]) << s;
  EXPECT_NE(std::memcmp(c.x_adv.raw(), b.x_adv.raw(), b.x_adv.nbytes()), 0) << "float64 internals round differently";
}

TEST(Boundary, RulesRefuseWhatTheyDoNotDo) {
  attacks::BoundarySpec fb3 = attacks::boundary_defaults(attacks::BoundaryRules::foolbox3);
  EXPECT_EQ(fb3.steps, 25000);
  EXPECT_EQ(fb3.init_epsilons, 50);
  fb3.validate();
  fb3.max_directions = 25;
  EXPECT_NE(error_of([&] { fb3.validate(); }).find("Foolbox 3's rules judge one candidate"), std::string::npos);
  attacks::BoundarySpec fb2 = attacks::boundary_defaults(attacks::BoundaryRules::foolbox2);
  fb2.validate();
  fb2.batch = 8;
  EXPECT_NE(error_of([&] { fb2.validate(); }).find("Foolbox 2's rules attack one sample at a time"), std::string::npos);
  attacks::BoundarySpec art = attacks::boundary_defaults(attacks::parse_boundary_rules("art"));
  EXPECT_EQ(art.max_directions, 20);
  EXPECT_EQ(art.step_adaptation, 0.667);
  art.validate();
  art.step_adaptation = 1.5;  // ART's step_adapt shrinks by multiplying: (0, 1)
  EXPECT_NE(error_of([&] { art.validate(); }).find("ART's step_adapt"), std::string::npos);
  EXPECT_NE(error_of([] { attacks::parse_boundary_rules("torchattacks"); }).find("unknown rules"), std::string::npos);
}

// The step thresholds: a step window at 0.3 raises Foolbox 3's source step (> 0.25) and leaves
// Foolbox 2's (0.2 .. 0.5); at 0.15 it lowers Foolbox 2's (< 0.2) and leaves Foolbox 3's (0.1 ..
// 0.25). A spherical window above 0.5 raises both steps, and an adapted window is emptied.
TEST(Boundary, StepAdaptationThresholdsOfEachRuleSet) {
  using attacks::boundary_rules::SuccessWindow;
  auto run = [](attacks::BoundaryRules rules, int step_successes_of_20, int sph_successes_of_100) {
    const attacks::BoundarySpec spec = attacks::boundary_defaults(rules);
    SuccessWindow sph_w(100), step_w(20);
    for (int k = 0; k < 100; ++k) sph_w.push(k < sph_successes_of_100);
    for (int k = 0; k < 20; ++k) step_w.push(k < step_successes_of_20);
    double sph = 1e-2, src = 1e-2;
    attacks::boundary_rules::adapt(sph_w, step_w, sph, src, spec);
    return std::make_tuple(sph, src, sph_w.full(), step_w.full());
  };
  const auto fb2 = attacks::BoundaryRules::foolbox2, fb3 = attacks::BoundaryRules::foolbox3;
  EXPECT_EQ(run(fb2, 6, 30), std::make_tuple(1e-2, 1e-2, true, true));          // 0.3: inside 0.2 .. 0.5
  EXPECT_EQ(run(fb3, 6, 30), std::make_tuple(1e-2, 1e-2 * 1.5, true, false));   // 0.3 > 0.25
  EXPECT_EQ(run(fb2, 3, 30), std::make_tuple(1e-2, 1e-2 / 1.5, true, false));   // 0.15 < 0.2
  EXPECT_EQ(run(fb3, 3, 30), std::make_tuple(1e-2, 1e-2, true, true));          // 0.15 inside 0.1 .. 0.25
  EXPECT_EQ(run(fb3, 3, 60), std::make_tuple(1e-2 * 1.5, 1e-2 * 1.5, false, true));  // spherical 0.6 > 0.5
  SuccessWindow w(3);
  w.push(true), w.push(false), w.push(false), w.push(false);  // the oldest drops out
  EXPECT_TRUE(w.full());
  EXPECT_EQ(w.rate(), 0.0);
}

// Foolbox 2's convergence: the first source_step < 1e-7 resets both steps to 1e-2 and starts
// confirming; converged again, it stops after 100 checks below 2e-7; leaving that band restarts.
TEST(Boundary, Foolbox2ConvergenceResetsThenConfirms) {
  attacks::boundary_rules::Convergence c(100);
  double sph = 3e-3, src = 5e-8;
  EXPECT_FALSE(c.stop(sph, src));
  EXPECT_TRUE(c.confirming());
  EXPECT_EQ(sph, 1e-2);
  EXPECT_EQ(src, 1e-2);
  src = 5e-8;                          // converged again: the countdown starts (99 left)
  EXPECT_FALSE(c.stop(sph, src));
  src = 1.5e-7;                        // within 2e-7: counts down
  for (int k = 0; k < 50; ++k) EXPECT_FALSE(c.stop(sph, src)) << k;
  src = 3e-7;                          // left the band: start over
  EXPECT_FALSE(c.stop(sph, src));
  EXPECT_FALSE(c.confirming());
  src = 5e-8;
  EXPECT_FALSE(c.stop(sph, src));      // a new reset
  EXPECT_EQ(src, 1e-2);
  src = 5e-8;
  int checks = 0;
  while (!c.stop(sph, src)) ++checks;
  EXPECT_EQ(checks, 99);               // the check that started the countdown, then 98 more, the 100th stops
  attacks::boundary_rules::Convergence none(0);
  src = 5e-8;
  EXPECT_TRUE(none.stop(sph, src));
}

}  // namespace
}  // namespace driftlab
