// SGD update formulas step by step, hand-checked (engine/train/optimizer.h; training-quant-attacks.md
// A.5-A.6): torch_buffer (buffer = g at step 1), keras_velocity (v starts at 0) and
// lasagne_difference (v computed through p), plain and Nesterov, with weight decay, a learning
// rate change, and the float32 bit loss of the Lasagne form. Knob-level effects (same trajectory
// in float64, weight_decay_mode, weight_decay_on_bias) are in tests/test_knobs.cpp.
//
// To add a case: 1) a hand computation in a comment, one line per step; 2) run() it and compare.
#include <gtest/gtest.h>

#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "engine/layers/layer.h"
#include "engine/policy.h"
#include "engine/train/optimizer.h"
#include "kernels/cpu/registry.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

// Hand values are decimal fractions; float64 rounding over a few steps of values ~1 is ~1e-16:
// 1e-13 is tight enough to catch any wrong coefficient (those err by >= 1e-4 here).
constexpr double kHandTol = 1e-13;

OptimConfig config(double lr, double momentum, bool nesterov = false, double wd = 0.0) {
  OptimConfig c;
  c.lr = lr;
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weight_decay = wd;
  return c;
}

OptimRule rule(SgdForm form, WeightDecayMode decay = WeightDecayMode::grad_add, bool decay_bias = true) {
  OptimRule r;
  r.form = form;
  r.decay = decay;
  r.decay_bias = decay_bias;
  return r;
}

// One scalar parameter p0 stepped with the gradients gs; returns p after each step.
std::vector<double> run(const OptimConfig& c, const OptimRule& r, double p0, const std::vector<double>& gs,
                        DType dt = DType::f64) {
  Param p{"w", Tensor({1}, dt), Tensor({1}, dt), false};
  p.value.fill(p0);
  Optimizer sgd(c, r);
  const std::vector<std::pair<std::string, Param*>> params = {{"w", &p}};
  std::vector<double> out;
  for (double g : gs) {
    p.grad.fill(g);
    sgd.step(ExecContext{}, params);
    out.push_back(p.value.at(0));
  }
  return out;
}

const SgdForm kForms[] = {SgdForm::torch_buffer, SgdForm::keras_velocity, SgdForm::lasagne_difference};
std::string name(SgdForm f) {
  return f == SgdForm::torch_buffer ? "torch_buffer" : f == SgdForm::keras_velocity ? "keras_velocity" : "lasagne_difference";
}

TEST(OptimRule, ResolvedFromThePolicy) {
  const OptimRule t = resolve_optim(Policy::torch()), k = resolve_optim(Policy::tensorflow()),
                l = resolve_optim(Policy::parse("theano,sgd_form=lasagne_difference,weight_decay_mode=decoupled"));
  EXPECT_EQ(t.form, SgdForm::torch_buffer);
  EXPECT_EQ(t.decay, WeightDecayMode::grad_add);
  EXPECT_TRUE(t.decay_bias);
  EXPECT_EQ(k.form, SgdForm::keras_velocity);
  EXPECT_EQ(k.decay, WeightDecayMode::l2_loss);
  EXPECT_FALSE(k.decay_bias);
  EXPECT_EQ(l.form, SgdForm::lasagne_difference);
  EXPECT_EQ(l.decay, WeightDecayMode::decoupled);
}

TEST(OptimRule, PlainSgdIsTheSameInEveryForm) {
  // momentum 0: p -= lr*g. p0=1, g=0.5, lr=0.1: 0.95, 0.9, 0.85.
  for (SgdForm f : kForms) {
    const auto p = run(config(0.1, 0.0), rule(f), 1.0, {0.5, 0.5, 0.5});
    EXPECT_NEAR(p[0], 0.95, kHandTol) << name(f);
    EXPECT_NEAR(p[1], 0.90, kHandTol) << name(f);
    EXPECT_NEAR(p[2], 0.85, kHandTol) << name(f);
  }
}

TEST(OptimRule, MomentumFirstStepsHandChecked) {
  // p0=1, lr=0.1, mu=0.9, gradients 0.5, -0.2, 0.1.
  // torch_buffer: b1 = g1 = 0.5 (the buffer starts AT the first gradient), p1 = 1 - 0.05 = 0.95
  //               b2 = 0.45 - 0.2 = 0.25,   p2 = 0.95 - 0.025 = 0.925
  //               b3 = 0.225 + 0.1 = 0.325, p3 = 0.925 - 0.0325 = 0.8925
  // keras_velocity: v0 = 0; v1 = -0.05, p1 = 0.95; v2 = -0.045 + 0.02 = -0.025, p2 = 0.925;
  //               v3 = -0.0225 - 0.01 = -0.0325, p3 = 0.8925
  // lasagne_difference: x1 = 0 + (1 - 0.05) = 0.95, v1 = -0.05; x2 = -0.045 + (0.95 + 0.02) = 0.925,
  //               v2 = -0.025; x3 = -0.0225 + (0.925 - 0.01) = 0.8925
  for (SgdForm f : kForms) {
    const auto p = run(config(0.1, 0.9), rule(f), 1.0, {0.5, -0.2, 0.1});
    EXPECT_NEAR(p[0], 0.95, kHandTol) << name(f);
    EXPECT_NEAR(p[1], 0.925, kHandTol) << name(f);
    EXPECT_NEAR(p[2], 0.8925, kHandTol) << name(f);
  }
  // Constant g = 0.5 (the knob test's case): p1 = 0.95, p2 = 0.95 - 0.1*(0.45 + 0.5) = 0.855.
  for (SgdForm f : kForms) {
    const auto p = run(config(0.1, 0.9), rule(f), 1.0, {0.5, 0.5});
    EXPECT_NEAR(p[0], 0.95, kHandTol) << name(f);
    EXPECT_NEAR(p[1], 0.855, kHandTol) << name(f);
  }
}

TEST(OptimRule, NesterovFirstStepsHandChecked) {
  // p0=1, lr=0.1, mu=0.9, gradients 0.5, -0.2.
  // torch: b1 = 0.5, p1 = 1 - 0.1*(0.5 + 0.9*0.5) = 0.905;
  //        b2 = 0.45 - 0.2 = 0.25, p2 = 0.905 - 0.1*(-0.2 + 0.225) = 0.9025
  // keras: v1 = -0.05, p1 = 1 + (0.9*-0.05 - 0.05) = 0.905;
  //        v2 = -0.045 + 0.02 = -0.025, p2 = 0.905 + (0.9*-0.025 + 0.02) = 0.9025
  // lasagne: x1 = 0 + 0.95 - 1 = -0.05 = v1, p1 = 0.9*-0.05 + 0.95 = 0.905;
  //        x2 = 0.9*-0.05 + 0.925 - 0.905 = -0.025 = v2, p2 = 0.9*-0.025 + 0.925 = 0.9025
  for (SgdForm f : kForms) {
    const auto p = run(config(0.1, 0.9, true), rule(f), 1.0, {0.5, -0.2});
    EXPECT_NEAR(p[0], 0.905, kHandTol) << name(f);
    EXPECT_NEAR(p[1], 0.9025, kHandTol) << name(f);
  }
  // Constant g = 0.5: p2 = 0.905 - 0.1*(0.5 + 0.9*0.95) = 0.7695.
  for (SgdForm f : kForms) EXPECT_NEAR(run(config(0.1, 0.9, true), rule(f), 1.0, {0.5, 0.5})[1], 0.7695, kHandTol);
}

TEST(OptimRule, LearningRateChangeSplitsTorchFromKeras) {
  // Step 1 at lr 0.1 (p1 = 0.95 everywhere), step 2 at lr 0.2, g = 0.5, mu = 0.9:
  // torch rescales the whole buffer: b2 = 0.95, p2 = 0.95 - 0.2*0.95 = 0.76.
  // keras keeps the old lr inside v:  v2 = 0.9*-0.05 - 0.2*0.5 = -0.145, p2 = 0.805.
  // lasagne likewise: x2 = 0.9*-0.05 + (0.95 - 0.1) = 0.805.
  auto two_steps = [](SgdForm f) {
    Param p{"w", Tensor({1}, DType::f64), Tensor({1}, DType::f64), false};
    p.value.fill(1.0);
    Optimizer sgd(config(0.1, 0.9), rule(f));
    const std::vector<std::pair<std::string, Param*>> params = {{"w", &p}};
    p.grad.fill(0.5);
    sgd.step(ExecContext{}, params);
    sgd.set_lr(0.2);
    EXPECT_EQ(sgd.lr(), 0.2);
    sgd.step(ExecContext{}, params);
    return p.value.at(0);
  };
  EXPECT_NEAR(two_steps(SgdForm::torch_buffer), 0.76, kHandTol);
  EXPECT_NEAR(two_steps(SgdForm::keras_velocity), 0.805, kHandTol);
  EXPECT_NEAR(two_steps(SgdForm::lasagne_difference), 0.805, kHandTol);
  std::cout << "  [effect] lr 0.1 -> 0.2 after one step: keras - torch = "
            << two_steps(SgdForm::keras_velocity) - two_steps(SgdForm::torch_buffer) << "\n";
}

TEST(OptimRule, WeightDecayEntersTheMomentum) {
  // p0=2, g=0.5, D=0.01, lr=0.1, mu=0.9, keras_velocity with l2_loss (g' = g + 2Dp):
  //   g1' = 0.54, v1 = -0.054, p1 = 1.946; g2' = 0.5 + 0.02*1.946 = 0.53892,
  //   v2 = -0.0486 - 0.053892 = -0.102492, p2 = 1.843508
  const auto k = run(config(0.1, 0.9, false, 0.01), rule(SgdForm::keras_velocity, WeightDecayMode::l2_loss), 2.0,
                     {0.5, 0.5});
  EXPECT_NEAR(k[0], 1.946, kHandTol);
  EXPECT_NEAR(k[1], 1.843508, kHandTol);
  // torch_buffer with grad_add (g' = g + Dp): b1 = 0.52, p1 = 1.948;
  //   g2' = 0.5 + 0.01948 = 0.51948, b2 = 0.468 + 0.51948 = 0.98748, p2 = 1.849252
  const auto t = run(config(0.1, 0.9, false, 0.01), rule(SgdForm::torch_buffer), 2.0, {0.5, 0.5});
  EXPECT_NEAR(t[0], 1.948, kHandTol);
  EXPECT_NEAR(t[1], 1.849252, kHandTol);
}

TEST(OptimRule, BiasesSkipDecayOnlyWhenRuleSaysSo) {
  for (bool decay_bias : {true, false}) {
    Param w{"weight", Tensor({1}, DType::f64), Tensor({1}, DType::f64), false};
    Param b{"bias", Tensor({1}, DType::f64), Tensor({1}, DType::f64), true};
    w.value.fill(2.0);
    b.value.fill(2.0);
    w.grad.fill(0.5);
    b.grad.fill(0.5);
    Optimizer sgd(config(0.1, 0.0, false, 0.01), rule(SgdForm::torch_buffer, WeightDecayMode::l2_loss, decay_bias));
    const std::vector<std::pair<std::string, Param*>> params = {{"w", &w}, {"b", &b}};
    // penalty D*sum p^2 over the decayed parameters: 0.04 per parameter.
    EXPECT_NEAR(sgd.penalty(params), decay_bias ? 0.08 : 0.04, kHandTol);
    sgd.step(ExecContext{}, params);
    EXPECT_NEAR(w.value.at(0), 1.946, kHandTol);                       // 2 - 0.1*(0.5 + 0.04)
    EXPECT_NEAR(b.value.at(0), decay_bias ? 1.946 : 1.95, kHandTol);  // undecayed: 2 - 0.05
  }
}

TEST(OptimRule, LasagneLosesTheStepWhenPDwarfsV) {
  // float32, p0 = 1000 (spacing 6.1e-5 there), g = 1e-4, lr = 0.1, mu = 0.9: lr*g = 1e-5 is below
  // half a spacing, so p - lr*g rounds back to p. Lasagne computes v = (mu*v + (p - lr*g)) - p = 0
  // and never moves; torch and keras accumulate b (or v) towards g/(1-mu) and move once
  // lr*b ~ 1e-4 exceeds half a spacing (A.5: "loses low-order bits of v whenever |p| >> |v|").
  const std::vector<double> gs(200, 1e-4);
  const double lasagne = run(config(0.1, 0.9), rule(SgdForm::lasagne_difference), 1000.0, gs, DType::f32).back();
  const double torch = run(config(0.1, 0.9), rule(SgdForm::torch_buffer), 1000.0, gs, DType::f32).back();
  const double keras = run(config(0.1, 0.9), rule(SgdForm::keras_velocity), 1000.0, gs, DType::f32).back();
  EXPECT_EQ(lasagne, 1000.0);
  EXPECT_LT(torch, 1000.0);
  EXPECT_LT(keras, 1000.0);
  // In exact arithmetic all three would have moved ~200 * 1e-4 = 0.02 (minus the warm-up).
  std::cout << "  [effect] float32 p after 200 steps from 1000: lasagne " << lasagne << ", torch " << torch
            << ", keras " << keras << "\n";
}

TEST(OptimRule, StateIsPerElementAndPerParameter) {
  // Two parameters of two elements with different gradients: each element follows its own scalar
  // trajectory (here momentum, torch form).
  Param a{"a", Tensor::from<double>({2}, {1.0, -1.0}), Tensor({2}, DType::f64), false};
  Param b{"b", Tensor::from<double>({2}, {0.5, 2.0}), Tensor({2}, DType::f64), false};
  Optimizer sgd(config(0.1, 0.9), rule(SgdForm::torch_buffer));
  const std::vector<std::pair<std::string, Param*>> params = {{"a", &a}, {"b", &b}};
  const double ga[2] = {0.5, -0.3}, gb[2] = {0.0, 1.0};
  for (int s = 0; s < 3; ++s) {
    for (int i = 0; i < 2; ++i) {
      a.grad.data<double>()[i] = ga[i];
      b.grad.data<double>()[i] = gb[i];
    }
    sgd.step(ExecContext{}, params);
  }
  const double p0[4] = {1.0, -1.0, 0.5, 2.0}, g[4] = {0.5, -0.3, 0.0, 1.0};
  const double got[4] = {a.value.at(0), a.value.at(1), b.value.at(0), b.value.at(1)};
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(got[i], run(config(0.1, 0.9), rule(SgdForm::torch_buffer), p0[i], {g[i], g[i], g[i]})[2], kHandTol) << i;
}

TEST(OptimRule, Float32ParametersStayFloat32) {
  const auto p = run(config(0.1, 0.9), rule(SgdForm::keras_velocity), 1.0, {0.5, 0.5}, DType::f32);
  // float32 rounding of a handful of operations near 1: a few ulps (1.2e-7 each).
  EXPECT_NEAR(p[1], 0.855, 1e-6);
}

TEST(OptimRule, RejectsBadConfigAndChangedParameterList) {
  EXPECT_THROW(Optimizer(config(0.0, 0.0), rule(SgdForm::torch_buffer)), Error);
  EXPECT_THROW(Optimizer(config(0.1, 1.0), rule(SgdForm::torch_buffer)), Error);
  EXPECT_THROW(Optimizer(config(0.1, -0.1), rule(SgdForm::torch_buffer)), Error);
  EXPECT_THROW(Optimizer(config(0.1, 0.0, true), rule(SgdForm::torch_buffer)), Error);  // Nesterov needs momentum
  EXPECT_THROW(Optimizer(config(0.1, 0.0, false, -1e-4), rule(SgdForm::torch_buffer)), Error);

  Param a{"a", Tensor({1}, DType::f64), Tensor({1}, DType::f64), false};
  Param b{"b", Tensor({1}, DType::f64), Tensor({1}, DType::f64), false};
  Optimizer sgd(config(0.1, 0.9), rule(SgdForm::torch_buffer));
  sgd.step(ExecContext{}, {{"a", &a}});
  try {
    sgd.step(ExecContext{}, {{"a", &a}, {"b", &b}});
    FAIL() << "a changed parameter list must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 parameters"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace driftlab

namespace driftlab {
namespace {

// The SGD op's two CPU kernels (the registry's reference and fast slots) call the same
// element formula: the same bits for every form, decay placement and Nesterov, on a tensor
// large enough for the fast kernel's threads (1, 2, 3).
TEST(SgdKernels, FastGivesTheReferenceBits) {
  const KernelRegistry reg = make_cpu_registry();
  const SgdKernel &ref = reg.sgd.reference(), &fast = reg.sgd.at(KernelBackend::fast);
  ASSERT_STREQ(fast.name, "fast");
  for (DType dt : {DType::f32, DType::f64})
    for (SgdForm form : {SgdForm::torch_buffer, SgdForm::keras_velocity, SgdForm::lasagne_difference})
      for (WeightDecayMode decay : {WeightDecayMode::grad_add, WeightDecayMode::l2_loss, WeightDecayMode::decoupled})
        for (bool nesterov : {false, true}) {
          SgdStepParams c;
          c.lr = 0.05, c.momentum = 0.9, c.weight_decay = 1e-3, c.nesterov = nesterov, c.form = form, c.decay = decay;
          const Tensor p0 = random_tensor({70000}, dt, 1), s0 = random_tensor({70000}, dt, 2),
                       g = random_tensor({70000}, dt, 3);
          Tensor p_ref = p0.clone(), s_ref = s0.clone();
          ref.step(c, p_ref, g, s_ref);
          for (int threads : {1, 2, 3}) {
            ThreadCountGuard guard(threads);
            Tensor p = p0.clone(), s = s0.clone();
            fast.step(c, p, g, s);
            EXPECT_TRUE(bitwise_equal(p, p_ref)) << static_cast<int>(form) << " " << static_cast<int>(decay);
            EXPECT_TRUE(bitwise_equal(s, s_ref));
          }
        }
}

}  // namespace
}  // namespace driftlab
