// attacks/gradient.h: FGSM, BIM and PGD through the model face. The update is the documented
// formula element by element (recomputed here from Runner::input_gradient), the bounds and the
// eps-ball hold, a seed fixes PGD's random start, early stopping freezes misclassified samples,
// and the Keras presets' probability clip shows up as samples whose gradient is exactly zero.
// The oracle against PyTorch autograd is tests/oracles/test_attack_oracle_torch.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>

#include "attacks/gradient.h"
#include "engine/train/cpu_runner.h"
#include "models/models.h"
#include "tests/model_test_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

using attacks::AttackKind;
using attacks::GradientAttackSpec;

TEST(GradientAttack, FgsmIsClampOfXPlusEpsSignOfTheInferenceGradient) {
  Model m = build_model("lenet5", Policy::torch(), 3);
  CpuRunner runner(m);
  const Tensor x = random_tensor({6, 1, 28, 28}, DType::f32, 5, 0.0, 1.0);
  const std::vector<int32_t> y = cyclic_labels(6);
  GradientAttackSpec spec;
  spec.eps = 0.1;
  spec.batch = 4;  // two batches: 4 + 2
  const attacks::AttackResult r = attacks::run_gradient_attack(runner, x, y, spec);
  const InputGradient g = runner.input_gradient(x, y, Semantics::inference);
  const float eps = 0.1f;
  int64_t moved = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float xi = x.data<float>()[i], gi = g.dx.data<float>()[i];
    const float s = gi > 0 ? 1.f : gi < 0 ? -1.f : 0.f;
    const float want = std::min(std::max(xi + eps * s, 0.f), 1.f);
    ASSERT_EQ(r.x_adv.data<float>()[i], want) << i;
    moved += want != xi;
  }
  EXPECT_GT(moved, x.numel() / 2);
  EXPECT_EQ(r.gradient_calls, 2);
  // the clean predictions come from the first gradient call's logits: logits()'s
  EXPECT_EQ(r.clean_pred, predictions(runner.logits(x)));
  for (int64_t s = 0; s < 6; ++s) {
    EXPECT_LE(r.linf[s], 0.1 + 1e-7);
    EXPECT_EQ(r.success[s], r.adv_pred[s] != y[s]);
  }
}

TEST(GradientAttack, BimAndPgdStayInTheBallAndTheBoundsAndFollowTheSeed) {
  Model m = build_model("lenet5", Policy::torch(), 3);
  CpuRunner runner(m);
  const Tensor x = random_tensor({4, 1, 28, 28}, DType::f32, 6, 0.0, 1.0);
  const std::vector<int32_t> y = cyclic_labels(4);
  for (const AttackKind kind : {AttackKind::bim, AttackKind::pgd}) {
    GradientAttackSpec spec;
    spec.kind = kind;
    spec.eps = 0.05, spec.step = 0.02, spec.steps = 5;
    spec.random_start = kind == AttackKind::pgd;
    spec.seed = 7;
    const attacks::AttackResult a = attacks::run_gradient_attack(runner, x, y, spec);
    const attacks::AttackResult b = attacks::run_gradient_attack(runner, x, y, spec);
    EXPECT_EQ(std::memcmp(a.x_adv.raw(), b.x_adv.raw(), a.x_adv.nbytes()), 0) << "the same spec twice";
    EXPECT_EQ(a.gradient_calls, 5);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float v = a.x_adv.data<float>()[i];
      ASSERT_GE(v, 0.f);
      ASSERT_LE(v, 1.f);
      // x0 + clamp(d, -eps, eps) rounds once: at most half an ulp of 1 past eps
      ASSERT_LE(std::fabs(double(v) - double(x.data<float>()[i])), 0.05 + 6e-8) << i;
    }
    if (kind == AttackKind::pgd) {
      spec.seed = 8;
      const attacks::AttackResult c = attacks::run_gradient_attack(runner, x, y, spec);
      EXPECT_NE(std::memcmp(a.x_adv.raw(), c.x_adv.raw(), a.x_adv.nbytes()), 0) << "another seed, another start";
    }
  }
}

// torchattacks' BIM projection (attacks::Projection::max_min), recomputed step by step from
// input_gradient with bim.py's lines as float operations: a = clamp(x0 - eps, min=lo); b = x where
// x >= a else a; c = x0 + eps where b > x0 + eps else b; clamp(c, max=hi). Bit for bit; against the
// default clip-delta form the iterates differ by an ulp where x0 + (x - x0) rounds away from x,
// and such differences may grow where a later sign goes the other way.
TEST(GradientAttack, TorchattacksBimProjectionIsItsMaxMinForm) {
  Model m = build_model("lenet5", Policy::torch(), 3);
  CpuRunner runner(m);
  const Tensor x = random_tensor({3, 1, 28, 28}, DType::f32, 9, 0.0, 1.0);
  const std::vector<int32_t> y = cyclic_labels(3);
  GradientAttackSpec spec;
  spec.kind = AttackKind::bim;
  spec.eps = 0.05, spec.step = 0.02, spec.steps = 4;
  spec.projection = attacks::Projection::max_min;
  const attacks::AttackResult r = attacks::run_gradient_attack(runner, x, y, spec);
  Tensor xa = x.clone();
  const float eps = 0.05f, step = 0.02f;
  for (int t = 0; t < 4; ++t) {
    const InputGradient g = runner.input_gradient(xa, y, Semantics::inference);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float x0 = x.data<float>()[i], gi = g.dx.data<float>()[i];
      const float adv = xa.data<float>()[i] + step * (gi > 0 ? 1.f : gi < 0 ? -1.f : 0.f);
      const float a = std::max(x0 - eps, 0.f);
      const float b = adv >= a ? adv : a;
      const float c = b > x0 + eps ? x0 + eps : b;
      xa.data<float>()[i] = std::min(c, 1.f);
    }
  }
  EXPECT_TRUE(bitwise_equal(r.x_adv, xa));
  spec.projection = attacks::Projection::clip_delta;
  const attacks::AttackResult d = attacks::run_gradient_attack(runner, x, y, spec);
  int64_t differ = 0;
  double largest = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float u = d.x_adv.data<float>()[i], v = r.x_adv.data<float>()[i];
    differ += u != v;
    largest = std::max(largest, std::fabs(double(u) - double(v)));
  }
  std::cout << "BIM-4: " << differ << " of " << x.numel() << " elements differ between the clip-delta and max-min "
            << "projections, by at most " << largest << "\n";
  spec.schedule = attacks::EpsSchedule::foolbox2_search;
  spec.projection = attacks::Projection::max_min;
  EXPECT_NE(error_of([&] { spec.validate(); }).find("Foolbox 2's eps search projects by clipping"), std::string::npos);
  EXPECT_NE(error_of([] { attacks::parse_projection("box"); }).find("unknown projection 'box'"), std::string::npos);
}

TEST(GradientAttack, EarlyStopLeavesAMisclassifiedSampleWhereItIs) {
  Model m = build_model("lenet5", Policy::torch(), 3);
  CpuRunner runner(m);
  const Tensor x = random_tensor({4, 1, 28, 28}, DType::f32, 9, 0.0, 1.0);
  // labels: sample 0 gets a wrong label (misclassified from the start), the others their prediction
  std::vector<int32_t> y = predictions(runner.logits(x));
  y[0] = (y[0] + 1) % 10;
  GradientAttackSpec spec;
  spec.kind = AttackKind::bim;
  spec.eps = 0.05, spec.step = 0.01, spec.steps = 3;
  spec.early_stop = true;
  const attacks::AttackResult r = attacks::run_gradient_attack(runner, x, y, spec);
  EXPECT_EQ(r.linf[0], 0.0) << "misclassified at x: never moved";
  EXPECT_TRUE(r.success[0]);
  EXPECT_GT(r.linf[1], 0.0);
  spec.early_stop = false;
  EXPECT_GT(attacks::run_gradient_attack(runner, x, y, spec).linf[0], 0.0);
}

TEST(GradientAttack, EpsAsAFractionOfTheRangeAndTheClippedKerasLossesZeroGradient) {
  // tensorflow preset: Keras clips probabilities at 1e-7 before the log, so a sample the model
  // is sure of has dL/dx exactly 0 and FGSM leaves it where it is. Make the model sure by
  // scaling the last layer.
  Model m = build_model("lenet5", Policy::tensorflow(), 3);
  auto params = m.net->named_params();
  for (int k = 0; k < 2; ++k) {  // the last dense layer's weight and bias
    Tensor& w = params[params.size() - 1 - k].second->value;
    for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] *= 400.f;
  }
  CpuRunner runner(m);
  const Tensor x = random_tensor({5, 1, 28, 28}, DType::f32, 10, 0.0, 255.0);
  const std::vector<int32_t> pred = predictions(runner.logits(x));
  GradientAttackSpec spec;
  spec.eps = 0.01;  // Foolbox 2's units: 1% of [0, 255]
  spec.lo = 0, spec.hi = 255;
  spec.units = attacks::EpsUnits::fraction_of_range;
  const attacks::AttackResult r = attacks::run_gradient_attack(runner, x, pred, spec);
  int64_t zero = 0;
  for (int64_t s = 0; s < 5; ++s) {
    zero += r.zero_gradient[s];
    if (r.zero_gradient[s]) {
      EXPECT_EQ(r.linf[s], 0.0) << s;
    } else {
      EXPECT_NEAR(r.linf[s], 2.55, 3e-5) << s;  // 0.01 * 255, rounded at values up to 255 (ulp 1.5e-5)
    }
  }
  EXPECT_GT(zero, 0) << "the scaled model should be sure of some sample";
  EXPECT_EQ(attacks::summarize(r).zero_gradients, zero);
}

TEST(GradientAttack, BadInputIsRefusedByName) {
  Model m = build_model("lenet5", Policy::torch(), 3);
  CpuRunner runner(m);
  Tensor x = random_tensor({2, 1, 28, 28}, DType::f32, 5, 0.0, 1.0);
  x.data<float>()[800] = 1.5f;
  GradientAttackSpec spec;
  try {
    attacks::run_gradient_attack(runner, x, {1, 2}, spec);
    FAIL() << "an input outside the bounds must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("element 800 (sample 1)"), std::string::npos) << e.what();
  }
  x.data<float>()[800] = 0.5f;
  EXPECT_THROW(attacks::run_gradient_attack(runner, x, {1}, spec), Error);  // label count
  spec.eps = -1;
  EXPECT_THROW(attacks::run_gradient_attack(runner, x, {1, 2}, spec), Error);
  spec.eps = 0.1;
  spec.random_start = true;  // FGSM has none
  EXPECT_THROW(attacks::run_gradient_attack(runner, x, {1, 2}, spec), Error);
  EXPECT_THROW(attacks::parse_attack_kind("cw"), Error);
}

// Foolbox 2's FGSM sweep, checked by brute force: every point of the first grid judged, then the
// refinement grid below the first hit (or the coarse repeat where there is none); the found eps
// is the first hit of the refinement, or the first hit itself when it is at index 20 or later.
TEST(GradientAttack, Foolbox2SweepFindsTheFirstHitAndRefinesItWhenAmongTheFirst20) {
  Model m = build_model("lenet5", Policy::torch(), 3);
  CpuRunner runner(m);
  const int64_t n = 8;
  const Tensor x = random_tensor({n, 1, 28, 28}, DType::f32, 21, 0.0, 1.0);
  std::vector<int32_t> y = predictions(runner.logits(x));  // every sample correct
  y[5] = (y[5] + 1) % 10;                                  // but this one: success at eps 0
  GradientAttackSpec spec;
  spec.schedule = attacks::EpsSchedule::foolbox2_sweep;
  spec.sweep_epsilons = 30, spec.max_epsilon = 0.3;
  spec.units = attacks::EpsUnits::fraction_of_range;
  spec.batch = 3;
  const attacks::AttackResult r = attacks::run_gradient_attack(runner, x, y, spec);
  const InputGradient g = runner.input_gradient(x, y, Semantics::inference);
  const int64_t per = 784;
  auto point = [&](int64_t s, double eps) {
    Tensor p = Tensor::empty({1, 1, 28, 28}, DType::f32);
    for (int64_t e = 0; e < per; ++e) {
      const float gi = g.dx.data<float>()[s * per + e];
      const float d = gi > 0 ? 1.f : gi < 0 ? -1.f : 0.f;  // sign(g) * (hi - lo) = sign(g)
      p.data<float>()[e] = std::min(std::max(x.data<float>()[s * per + e] + d * static_cast<float>(eps), 0.f), 1.f);
    }
    return p;
  };
  auto adversarial = [&](int64_t s, double eps) { return predictions(runner.logits(point(s, eps)))[0] != y[s]; };
  auto grid = [](double stop, int num) {  // numpy.linspace(0, stop, num + 1)[1:]
    std::vector<double> v;
    for (int k = 1; k <= num; ++k) v.push_back(k == num ? stop : k * (stop / num));
    return v;
  };
  int refined = 0, late = 0, none = 0;
  for (int64_t s = 0; s < n; ++s) {
    SCOPED_TRACE(s);
    if (s == 5) {
      EXPECT_EQ(r.eps_found[s], 0.0);
      EXPECT_TRUE(r.success[s]);
      EXPECT_EQ(r.linf[s], 0.0);
      EXPECT_EQ(r.queries[s], 1);
      continue;
    }
    const std::vector<double> g1 = grid(0.3, 30);
    std::size_t k = 0;
    while (k < g1.size() && !adversarial(s, g1[k])) ++k;
    double want = std::nan("");
    int64_t queries = 1 + static_cast<int64_t>(std::min(k + 1, g1.size()));
    if (k < g1.size() && k >= 20) {
      want = g1[k], ++late;
    } else {
      const std::vector<double> g2 = grid(k < g1.size() ? g1[k] : 0.3, 20);
      std::size_t j = 0;
      while (j < g2.size() && !adversarial(s, g2[j])) ++j;
      queries += static_cast<int64_t>(std::min(j + 1, g2.size()));
      if (j < g2.size()) want = g2[j];
      k < g1.size() ? ++refined : ++none;
    }
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(r.eps_found[s]));
      EXPECT_FALSE(r.success[s]);
      EXPECT_EQ(r.linf[s], 0.0);  // the input returned
    } else {
      EXPECT_EQ(r.eps_found[s], want);
      EXPECT_TRUE(r.success[s]);
      const Tensor p = point(s, want);
      EXPECT_EQ(std::memcmp(p.raw(), r.x_adv.data<float>() + s * per, per * 4), 0);
    }
    EXPECT_EQ(r.queries[s], queries);
  }
  std::cout << "sweep: " << refined << " refined, " << late << " found at index >= 20, " << none
            << " without a hit\n";
  // the inputs and the grid are chosen so that every path runs (seen: 4, 2 and 1)
  EXPECT_GT(refined, 0);
  EXPECT_GT(late, 0);
  EXPECT_GT(none, 0);
  EXPECT_EQ(r.gradient_calls, 3);  // one per batch
  // only FGSM sweeps
  spec.kind = AttackKind::bim;
  EXPECT_THROW(attacks::run_gradient_attack(runner, x, y, spec), Error);
}

// Foolbox 2's BIM eps search (binary_search=True) is its sequence of single-eps runs: x1.5 from the
// starting eps until a run succeeds (at most 20), then 20 bisections; the returned example is the
// closest (MSE) first-adversarial iterate of all successful runs. Recomputed here run by run with
// the single-eps attack (early stop: its result is the run's first adversarial iterate), one sample
// at a time in both (bitwise: the same batch of one).
TEST(GradientAttack, Foolbox2SearchIsItsSequenceOfSingleEpsRuns) {
  Model m = build_model("lenet5", Policy::torch(), 3);
  CpuRunner runner(m);
  const int64_t n = 5, per = 784;
  const Tensor x = random_tensor({n, 1, 28, 28}, DType::f32, 31, 0.0, 1.0);
  std::vector<int32_t> y = predictions(runner.logits(x));  // every sample correct
  y[3] = (y[3] + 1) % 10;                                  // but this one: success at eps 0, no run
  GradientAttackSpec spec;
  spec.kind = AttackKind::bim;
  spec.schedule = attacks::EpsSchedule::foolbox2_search;
  spec.units = attacks::EpsUnits::fraction_of_range;
  spec.eps = 0.004, spec.step = 0.001, spec.steps = 3, spec.early_stop = true;  // factor 0.25
  spec.batch = 1;
  const attacks::AttackResult r = attacks::run_gradient_attack(runner, x, y, spec);
  int expo_runs = 0, found = 0;
  for (int64_t s = 0; s < n; ++s) {
    SCOPED_TRACE(s);
    Tensor xs = Tensor::empty({1, 1, 28, 28}, DType::f32);
    std::memcpy(xs.raw(), x.data<float>() + s * per, per * 4);
    const std::vector<int32_t> ys{y[s]};
    if (s == 3) {
      EXPECT_EQ(r.eps_found[s], 0.0);
      EXPECT_TRUE(r.success[s]);
      EXPECT_EQ(r.linf[s], 0.0);
      continue;
    }
    double best = HUGE_VAL, best_eps = std::nan("");
    std::vector<float> best_x(per);
    auto try_eps = [&](double e) {  // one single-eps run; the candidate kept when closer
      GradientAttackSpec one = spec;
      one.schedule = attacks::EpsSchedule::single;
      one.eps = e, one.step = 0.25 * e;
      const attacks::AttackResult o = attacks::run_gradient_attack(runner, xs, ys, one);
      if (!o.success[0]) return false;
      double d2 = 0;
      for (int64_t i = 0; i < per; ++i) {
        const double d = static_cast<double>(o.x_adv.data<float>()[i]) - x.data<float>()[s * per + i];
        d2 += d * d;
      }
      if (d2 < best) best = d2, best_eps = e, std::memcpy(best_x.data(), o.x_adv.raw(), per * 4);
      return true;
    };
    double e = spec.eps;
    bool hit = false;
    for (int i = 0; i < 20 && !hit; ++i, ++expo_runs) {
      hit = try_eps(e);
      if (!hit) e *= 1.5;
    }
    if (hit) {
      double good = e, bad = 0;
      for (int i = 0; i < 20; ++i) {
        const double mid = (good + bad) / 2;
        (try_eps(mid) ? good : bad) = mid;
      }
      ++found;
      EXPECT_TRUE(r.success[s]);
      EXPECT_EQ(r.eps_found[s], best_eps);
      EXPECT_EQ(std::memcmp(best_x.data(), r.x_adv.data<float>() + s * per, per * 4), 0);
      EXPECT_LE(r.linf[s], best_eps + 1e-7);  // inside the winning run's ball
    } else {
      EXPECT_FALSE(r.success[s]);
      EXPECT_TRUE(std::isnan(r.eps_found[s]));
      EXPECT_EQ(r.linf[s], 0.0);
    }
  }
  std::cout << "search: " << found << " of " << n - 1 << " samples found, " << expo_runs
            << " exponential-phase runs in all\n";
  EXPECT_GT(found, 0);
  EXPECT_GT(expo_runs, found);  // the starting eps fails somewhere: the x1.5 phase runs
  // batched (3 per call): the same kind of result, every success misclassified and in its ball
  spec.batch = 3;
  const attacks::AttackResult rb = attacks::run_gradient_attack(runner, x, y, spec);
  for (int64_t s = 0; s < n; ++s) {
    if (!rb.success[s]) continue;
    EXPECT_NE(rb.adv_pred[s], y[s]) << s;
    EXPECT_LE(rb.linf[s], rb.eps_found[s] + 1e-7) << s;
  }
  // FGSM sweeps, it does not search; the search's random start is not Foolbox 2's: refused
  spec.kind = AttackKind::fgsm;
  EXPECT_THROW(attacks::run_gradient_attack(runner, x, y, spec), Error);
  spec.kind = AttackKind::pgd, spec.random_start = true;
  EXPECT_THROW(attacks::run_gradient_attack(runner, x, y, spec), Error);
}

// ART counts a success where the prediction changed, not where it differs from the label: a
// misclassified input that keeps its prediction is a failure there, a success under the label rule.
TEST(GradientAttack, SuccessAgainstTheCleanPredictionIsArtsRule) {
  Model m = build_model("lenet5", Policy::torch(), 3);
  CpuRunner runner(m);
  const Tensor x = random_tensor({6, 1, 28, 28}, DType::f32, 5, 0.0, 1.0);
  const std::vector<int32_t> y = cyclic_labels(6);
  GradientAttackSpec spec;
  spec.eps = 0.02;
  const attacks::AttackResult a = attacks::run_gradient_attack(runner, x, y, spec);
  spec.success = attacks::SuccessRule::differs_from_clean_prediction;
  const attacks::AttackResult b = attacks::run_gradient_attack(runner, x, y, spec);
  int64_t differ = 0;
  for (int64_t s = 0; s < 6; ++s) {
    EXPECT_EQ(a.adv_pred[s], b.adv_pred[s]);
    EXPECT_EQ(a.success[s], a.adv_pred[s] != y[s]);
    EXPECT_EQ(b.success[s], b.adv_pred[s] != b.clean_pred[s]);
    differ += a.success[s] != b.success[s];
  }
  EXPECT_GT(differ, 0) << "random weights misclassify most inputs; some keep their prediction";
  EXPECT_EQ(attacks::parse_success_rule("clean-prediction"), attacks::SuccessRule::differs_from_clean_prediction);
  EXPECT_THROW(attacks::parse_success_rule("changed"), Error);
}

TEST(GradientAttack, SummaryCountsSuccessesAndMedians) {
  attacks::AttackResult r;
  r.success = {1, 0, 1, 1};
  r.zero_gradient = {0, 1, 0, 0};
  r.l0 = {1, 0, 3, 5}, r.l2 = {1, 0, 2, 4}, r.linf = {0.1, 0, 0.2, 0.3};
  const attacks::AttackSummary s = attacks::summarize(r);
  EXPECT_EQ(s.samples, 4);
  EXPECT_EQ(s.successes, 3);
  EXPECT_DOUBLE_EQ(s.success_rate, 0.75);
  EXPECT_DOUBLE_EQ(s.mean_l2, 7.0 / 3);
  EXPECT_DOUBLE_EQ(s.median_l2, 2.0);
  EXPECT_DOUBLE_EQ(s.median_linf, 0.2);
  EXPECT_EQ(s.zero_gradients, 1);
  const attacks::AttackSummary t = attacks::summarize(r, {1, 1, 0, 1});  // a denominator of three
  EXPECT_EQ(t.samples, 3);
  EXPECT_EQ(t.successes, 2);
  EXPECT_DOUBLE_EQ(t.median_l2, 2.5);
}


// PGD's restarts (gradient.h): each restart is the single run from seed + k (recomputed here with
// restarts = 1), and the example kept follows the rule: per-sample, the last restart that fooled
// the sample (else restart 0's); per-run, the whole run with the most successes (the first of equals).
TEST(GradientAttack, RestartsKeepEachSamplesSuccessfulRestartOrTheBestWholeRun) {
  Model m = build_model("lenet5", Policy::torch(), 3);
  CpuRunner runner(m);
  const int64_t n = 40;
  const Tensor x = random_tensor({n, 1, 28, 28}, DType::f32, 9, 0.0, 1.0);
  const std::vector<int32_t> y = predictions(runner.logits(x));  // move each input off its class
  GradientAttackSpec spec;
  spec.kind = AttackKind::pgd;
  spec.eps = 0.1, spec.step = 0.04, spec.steps = 3;
  spec.random_start = true;
  spec.seed = 11;
  spec.batch = 16;
  const int restarts = 4;
  std::vector<attacks::AttackResult> runs;
  int64_t calls = 0;
  std::vector<int64_t> fooled(restarts, 0);
  int64_t fooled_by_any = 0;
  for (int k = 0; k < restarts; ++k) {
    GradientAttackSpec one = spec;
    one.seed = spec.seed + static_cast<uint64_t>(k);
    runs.push_back(attacks::run_gradient_attack(runner, x, y, one));
    calls += runs.back().gradient_calls;
    for (int64_t s = 0; s < n; ++s) fooled[k] += runs.back().success[s];
  }
  for (int64_t s = 0; s < n; ++s) {
    bool any = false;
    for (int k = 0; k < restarts; ++k) any = any || runs[k].success[s];
    fooled_by_any += any;
  }
  const int best = static_cast<int>(std::max_element(fooled.begin(), fooled.end()) - fooled.begin());
  // the data must tell the two rules apart: some sample fooled only outside the best run
  ASSERT_GT(fooled_by_any, fooled[best]) << "the restarts fool the same samples; pick another eps";
  ASSERT_GT(fooled[best], 0);
  const std::size_t row = static_cast<std::size_t>(x.numel() / n) * sizeof(float);
  spec.restarts = restarts;

  spec.restart_select = attacks::RestartSelect::per_sample;
  const attacks::AttackResult ps = attacks::run_gradient_attack(runner, x, y, spec);
  EXPECT_EQ(ps.gradient_calls, calls);
  int64_t ps_fooled = 0;
  for (int64_t s = 0; s < n; ++s) {
    int kept = 0;
    for (int k = 1; k < restarts; ++k)
      if (runs[k].success[s]) kept = k;
    EXPECT_EQ(ps.restart[s], kept) << s;
    const int64_t at = s * (x.numel() / n);
    EXPECT_EQ(std::memcmp(ps.x_adv.data<float>() + at, runs[kept].x_adv.data<float>() + at, row), 0) << s;
    EXPECT_EQ(ps.success[s], runs[kept].success[s]) << s;
    ps_fooled += ps.success[s];
  }
  EXPECT_EQ(ps_fooled, fooled_by_any);

  spec.restart_select = attacks::RestartSelect::per_run;
  const attacks::AttackResult pr = attacks::run_gradient_attack(runner, x, y, spec);
  EXPECT_EQ(std::memcmp(pr.x_adv.raw(), runs[best].x_adv.raw(), pr.x_adv.nbytes()), 0);
  EXPECT_EQ(pr.success, runs[best].success);
  EXPECT_EQ(pr.restart, std::vector<int32_t>(static_cast<std::size_t>(n), best));
  EXPECT_EQ(pr.gradient_calls, calls);

  // restarts need the random start (from x each restart would repeat restart 0), and a sane count
  auto refused = [&](const std::string& what) {
    try {
      attacks::run_gradient_attack(runner, x, y, spec);
      ADD_FAILURE() << "not refused: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  spec.random_start = false;
  refused("--random-start");
  spec.random_start = true, spec.restarts = 0;
  refused("restarts 0");
  EXPECT_THROW(attacks::parse_restart_select("best"), Error);
}

}  // namespace
}  // namespace driftlab
