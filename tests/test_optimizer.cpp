// Adam, AdamW and RMSprop (core/ops/adaptive.h, engine/train/optimizer.h) and the learning-rate
// schedules (engine/train/schedule.h): first steps computed by hand in double, the fast kernels
// against the reference bit for bit, the knobs' presets, the schedules against PyTorch's and
// Keras's sequences, and the size of each formula difference on LeNet-5 after 100 steps of
// Fashion-MNIST. The framework oracles are in tests/oracles (torch.optim, tf.train.adam/rmsprop).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "engine/data/datasets.h"
#include "engine/data/idx.h"
#include "engine/layers/layer.h"
#include "engine/policy.h"
#include "engine/train/cpu_runner.h"
#include "engine/train/optimizer.h"
#include "engine/train/schedule.h"
#include "kernels/cpu/registry.h"
#include "models/models.h"
#include "tests/require_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

// One scalar parameter p0 stepped with gradients gs under `policy`; returns p after each step.
std::vector<double> run1(const OptimConfig& c, const Policy& policy, double p0, const std::vector<double>& gs) {
  Optimizer opt(c, resolve_optim(policy));
  Param prm{"w", Tensor::from<double>({1}, {p0}), Tensor({1}, DType::f64), false};
  std::vector<double> out;
  for (double g : gs) {
    prm.grad.data<double>()[0] = g;
    opt.step(ExecContext{}, {{"w", &prm}});
    out.push_back(prm.value.at(0));
  }
  return out;
}

OptimConfig adam(double lr = 0.1) {
  OptimConfig c;
  c.kind = OptimizerKind::adam;
  c.lr = lr;
  return c;
}
OptimConfig rmsprop(double lr = 0.1, double mu = 0.0) {
  OptimConfig c;
  c.kind = OptimizerKind::rmsprop;
  c.lr = lr;
  c.momentum = mu;
  return c;
}

// Step 1, g = 0.5, lr 0.1, betas 0.9 / 0.999: m = 0.05, v = 0.00025, bc1 = 0.1, bc2 = 0.001.
TEST(Adam, FirstStepOfEachFormByHand) {
  Policy t = Policy::torch();  // corrected_moments, eps 1e-8
  const double torch_step = (0.1 / 0.1) * 0.05 / (std::sqrt(0.00025) / std::sqrt(0.001) + 1e-8);
  EXPECT_NEAR(run1(adam(), t, 1.0, {0.5})[0], 1.0 - torch_step, 1e-15);
  t.set("adam_form", "corrected_quotient");  // TF.js: (m/bc1) / (sqrt(v/bc2) + eps)
  EXPECT_NEAR(run1(adam(), t, 1.0, {0.5})[0], 1.0 - (0.05 / 0.1) / (std::sqrt(0.00025 / 0.001) + 1e-8) * 0.1, 1e-15);
  t.set("adam_form", "epsilon_hat");  // lr_t = lr*sqrt(bc2)/bc1; eps meets the uncorrected sqrt(v)
  const double lr_t = 0.1 * (std::sqrt(0.001) / 0.1);
  EXPECT_NEAR(run1(adam(), t, 1.0, {0.5})[0], 1.0 - lr_t * 0.05 / (std::sqrt(0.00025) + 1e-8), 1e-15);
  // epsilon_hat's eps weighs 1/sqrt(bc2) = 31.6 times more at step 1: a visibly smaller first step.
  EXPECT_GT(run1(adam(), t, 1.0, {0.5})[0] - (1.0 - torch_step), 5e-8);
}

TEST(Adam, WeightDecayPlacements) {
  OptimConfig c = adam();
  c.weight_decay = 0.1;
  Policy t = Policy::torch();  // grad_add: g = 0.5 + 0.1*1 = 0.6 enters the moments
  const double g = 0.6, m = 0.1 * g, v = 0.001 * g * g;
  EXPECT_NEAR(run1(c, t, 1.0, {0.5})[0], 1.0 - (0.1 / 0.1) * m / (std::sqrt(v) / std::sqrt(0.001) + 1e-8), 1e-15);
  t.set("weight_decay_mode", "decoupled_scale");  // AdamW: p *= 1 - lr*D, then the plain step
  const double step = (0.1 / 0.1) * 0.05 / (std::sqrt(0.00025) / std::sqrt(0.001) + 1e-8);
  EXPECT_NEAR(run1(c, t, 1.0, {0.5})[0], 1.0 * (1 - 0.1 * 0.1) - step, 1e-15);
  // SGD has no decoupled_scale in any framework: refused, naming the knob value to use.
  OptimConfig s;
  s.lr = 0.1, s.weight_decay = 0.1;
  EXPECT_THROW(run1(s, t, 1.0, {0.5}), Error);
}

TEST(Adam, RejectsMomentumAndBadBetas) {
  OptimConfig c = adam();
  c.momentum = 0.9;
  EXPECT_THROW(Optimizer(c, resolve_optim(Policy::torch())), Error);
  c = adam();
  c.beta2 = 1.0;
  EXPECT_THROW(Optimizer(c, resolve_optim(Policy::torch())), Error);
  c = adam();
  c.nesterov = true;
  EXPECT_THROW(Optimizer(c, resolve_optim(Policy::torch())), Error);
}

// Step 1, g = 0.5, lr 0.1: v = (1-rho)*0.25.
TEST(Rmsprop, FirstStepOfEachFormByHand) {
  Policy t = Policy::torch();  // rho 0.99, eps 1e-8 outside the root
  EXPECT_NEAR(run1(rmsprop(), t, 1.0, {0.5})[0], 1.0 - 0.1 * 0.5 / (std::sqrt(0.01 * 0.25) + 1e-8), 1e-15);
  t.set("rmsprop_form", "eps_inside_root");
  EXPECT_NEAR(run1(rmsprop(), t, 1.0, {0.5})[0], 1.0 - 0.5 * 0.1 / std::sqrt(0.01 * 0.25 + 1e-8), 1e-15);
  t.set("rmsprop_ms_init", "ones");  // TF1: the mean square starts at 1, the first step is tiny
  EXPECT_NEAR(run1(rmsprop(), t, 1.0, {0.5})[0], 1.0 - 0.5 * 0.1 / std::sqrt(0.99 + 0.01 * 0.25 + 1e-8), 1e-15);
  Policy k = Policy::tensorflow();  // Keras: rho 0.9, eps 1e-7
  k.dtype = FloatType::float64;
  k.optim_scalar_precision = ScalarPrecision::float64;
  EXPECT_NEAR(run1(rmsprop(), k, 1.0, {0.5})[0], 1.0 - 0.1 * 0.5 / (std::sqrt(0.1 * 0.25) + 1e-7), 1e-15);
}

TEST(Rmsprop, MomentumTermsByHand) {
  Policy t = Policy::torch();  // b = mu*b + g/d; p -= lr*b
  const double d1 = std::sqrt(0.01 * 0.25) + 1e-8, v2 = 0.99 * 0.0025 + 0.01 * 0.25, d2 = std::sqrt(v2) + 1e-8;
  const double b1 = 0.5 / d1, b2 = 0.9 * b1 + 0.5 / d2;
  const std::vector<double> p = run1(rmsprop(0.1, 0.9), t, 1.0, {0.5, 0.5});
  EXPECT_NEAR(p[0], 1.0 - 0.1 * b1, 1e-15);
  EXPECT_NEAR(p[1], 1.0 - 0.1 * b1 - 0.1 * b2, 1e-14);
}

// optim_fma=aten rounds p - lr*g once: lr 0.1, g = 0.3 in float32, p = 1 (where one and two
// roundings part: 0.97 either way, one ulp apart).
TEST(OptimizerKnobs, AtenFmaRoundsTheUpdateOnce) {
  Policy t = Policy::torch();
  t.dtype = FloatType::float32;
  OptimConfig c;
  c.lr = 0.1;
  Optimizer fused(c, resolve_optim(t));
  t.optim_fma = OptimFma::none;
  Optimizer plain(c, resolve_optim(t));
  Param a{"w", Tensor::from<float>({1}, {1.0f}), Tensor::from<float>({1}, {0.3f}), false};
  Param b{"w", Tensor::from<float>({1}, {1.0f}), Tensor::from<float>({1}, {0.3f}), false};
  fused.step(ExecContext{}, {{"w", &a}});
  plain.step(ExecContext{}, {{"w", &b}});
  const float one = 1.0f, lr = 0.1f, g = 0.3f;
  const float prod = lr * g;  // rounded: the two-rounding form's product
  EXPECT_EQ(a.value.data<float>()[0], std::fma(-lr, g, one));
  EXPECT_EQ(b.value.data<float>()[0], one - prod);
  EXPECT_NE(a.value.data<float>()[0], b.value.data<float>()[0]);
}

// Every rule combination, float32 and float64, on 70K elements (the fast kernel's OpenMP split):
// the fast kernel gives the reference's bits.
TEST(AdaptiveKernels, FastIsTheReferenceBitForBit) {
  const KernelRegistry reg = make_cpu_registry();
  const Shape shape{70001};
  for (DType dt : {DType::f32, DType::f64})
    for (AdamForm f : {AdamForm::corrected_moments, AdamForm::corrected_quotient, AdamForm::epsilon_hat})
      for (MomentUpdate mu : {MomentUpdate::weighted_sum, MomentUpdate::increment})
        for (SquareOrder sq : {SquareOrder::scale_then_square, SquareOrder::square_then_scale})
          for (WeightDecayMode d : {WeightDecayMode::grad_add, WeightDecayMode::l2_loss, WeightDecayMode::decoupled,
                                    WeightDecayMode::decoupled_scale}) {
            AdamStepParams a;
            a.form = f, a.moments = mu, a.square = sq, a.decay = d, a.weight_decay = 1e-2, a.decay_scale = 0.9999;
            a.fused = sq == SquareOrder::scale_then_square;
            a.bc1 = 0.19, a.bc2 = 0.002, a.step = 5e-3, a.sqrt_bc2 = std::sqrt(0.002);
            RmspropStepParams r;
            r.form = f == AdamForm::epsilon_hat ? RmspropForm::eps_inside_root : RmspropForm::eps_outside_root;
            r.moments = mu, r.square = sq, r.decay = d, r.weight_decay = 1e-2, r.decay_scale = 0.9999;
            r.momentum = mu == MomentUpdate::increment ? 0.9 : 0.0;
            r.fused = a.fused;
            Tensor p0 = random_tensor(shape, dt, 1), g = random_tensor(shape, dt, 2);
            Tensor s0 = random_tensor(shape, dt, 3), s1 = random_tensor(shape, dt, 4);
            dispatch_dtype(dt, [&](auto tag) {  // v >= 0
              using T = decltype(tag);
              for (int64_t i = 0; i < s1.numel(); ++i) s1.data<T>()[i] = std::fabs(s1.data<T>()[i]);
            });
            Tensor pr = p0.clone(), pf = p0.clone(), ar = s0.clone(), af = s0.clone(), br = s1.clone(),
                   bf = s1.clone();
            reg.adam.at(KernelBackend::reference).step(a, pr, g, ar, br);
            reg.adam.at(KernelBackend::fast).step(a, pf, g, af, bf);
            EXPECT_TRUE(bitwise_equal(pf, pr) && bitwise_equal(af, ar) && bitwise_equal(bf, br))
                << "adam form " << static_cast<int>(f) << " " << dtype_name(dt);
            pr = p0.clone(), pf = p0.clone(), ar = s1.clone(), af = s1.clone(), br = s0.clone(), bf = s0.clone();
            reg.rmsprop.at(KernelBackend::reference).step(r, pr, g, ar, br);
            reg.rmsprop.at(KernelBackend::fast).step(r, pf, g, af, bf);
            EXPECT_TRUE(bitwise_equal(pf, pr) && bitwise_equal(af, ar) && bitwise_equal(bf, br))
                << "rmsprop form " << static_cast<int>(r.form) << " " << dtype_name(dt);
          }
}

TEST(OptimizerKnobs, PresetsCopyTheirFrameworks) {
  const Policy t = Policy::torch(), k = Policy::tensorflow(), th = Policy::theano();
  EXPECT_EQ(t.adam_form, AdamForm::corrected_moments);  // torch/optim/adam.py
  EXPECT_EQ(t.adam_eps, 1e-8);
  EXPECT_EQ(t.rmsprop_rho, 0.99);
  EXPECT_EQ(t.rmsprop_eps, 1e-8);
  EXPECT_EQ(t.optim_scalar_precision, ScalarPrecision::float64);
  EXPECT_EQ(t.optim_fma, OptimFma::aten);  // ATen's Vectorized add(alpha) is fmadd
  for (const Policy* p : {&k, &th}) {  // Keras 2.2.4's optimizers on either backend
    EXPECT_EQ(p->adam_form, AdamForm::epsilon_hat);
    EXPECT_EQ(p->adam_eps, 1e-7);
    EXPECT_EQ(p->rmsprop_rho, 0.9);
    EXPECT_EQ(p->rmsprop_eps, 1e-7);
    EXPECT_EQ(p->optim_scalar_precision, ScalarPrecision::float32);
    EXPECT_EQ(p->plateau_rule, PlateauRule::keras);
    EXPECT_EQ(p->optim_fma, OptimFma::none);
  }
  EXPECT_THROW(Policy::parse("torch,adam_form=keras"), Error);
  EXPECT_THROW(Policy::parse("torch,rmsprop_rho=1"), Error);
}

// Float32 scalars: 1 - 0.9 formed in float32 is 0.100000024, in double then rounded 0.1f.
TEST(OptimizerKnobs, ScalarPrecisionChangesOneMinusBeta) {
  OptimSchedule d(adam(), resolve_optim(Policy::torch()));
  Policy f = Policy::torch();
  f.optim_scalar_precision = ScalarPrecision::float32;
  OptimSchedule s(adam(), resolve_optim(f));
  EXPECT_EQ(static_cast<float>(d.next(0.1).adam.one_minus_beta1), 0.1f);
  EXPECT_EQ(s.next(0.1).adam.one_minus_beta1, static_cast<double>(1.0f - 0.9f));
  EXPECT_NE(1.0f - 0.9f, 0.1f);
}

// epsilon_hat's lr_t grouped as Keras does, lr*(sqrt(bc2)/bc1), or as TF1 and Lasagne do,
// (lr*sqrt(bc2))/bc1, in float32 scalars: the same value at most steps, an ulp apart at some.
TEST(OptimizerKnobs, EpsilonHatStepSizeGrouping) {
  Policy k = Policy::tensorflow();  // epsilon_hat, float32 scalars, pow_float32
  Policy t = k;
  t.adam_lr_t_order = AdamLrTOrder::lr_sqrt_then_divide;
  OptimSchedule a(adam(1e-3), resolve_optim(k)), b(adam(1e-3), resolve_optim(t));
  int parted = 0;
  for (int step = 1; step <= 2000; ++step) {
    const double sa = a.next(1e-3).adam.step, sb = b.next(1e-3).adam.step;
    const float bc1 = 1.0f - std::pow(0.9f, static_cast<float>(step)), bc2 = 1.0f - std::pow(0.999f, static_cast<float>(step));
    EXPECT_EQ(sa, static_cast<double>(1e-3f * (std::sqrt(bc2) / bc1))) << step;
    EXPECT_EQ(sb, static_cast<double>((1e-3f * std::sqrt(bc2)) / bc1)) << step;
    parted += sa != sb;
  }
  EXPECT_GT(parted, 0);
  std::cout << "  lr_t groupings part at " << parted << " of the first 2000 steps (float32, lr 1e-3)\n";
}

// TF1 / TF.js: beta^t as a float32 running product, which drifts from pow in double.
TEST(OptimizerKnobs, RunningBetaPowerIsAFloat32Product) {
  Policy p = Policy::torch();
  p.adam_beta_power = BetaPower::product_float32;
  OptimSchedule s(adam(), resolve_optim(p));
  float prod = 0.999f;
  for (int t = 1; t <= 1000; ++t) {
    const OptimStep st = s.next(0.1);
    if (t > 1) prod *= 0.999f;
    EXPECT_EQ(st.adam.bc2, static_cast<double>(1.0f - prod)) << "step " << t;
  }
  EXPECT_NE(static_cast<double>(1.0f - prod), 1.0 - std::pow(0.999, 1000.0));
}

// The rate sequences of PyTorch 1.13's schedulers (printed by torch.optim.lr_scheduler here:
// StepLR(2, 0.1): 1, .1, .1, .010000000000000002, ...; the chained products, not 10^-k).
TEST(Schedules, StepMultiStepExponentialAsTorchChainsThem) {
  const Policy t = Policy::torch();
  auto run = [&](const std::string& spec, double lr0, int epochs) {
    LrSchedule s(parse_schedule(spec), lr0, t);
    std::vector<double> out;
    for (int e = 0; e < epochs; ++e) {
      s.after_epoch(std::numeric_limits<double>::quiet_NaN());
      out.push_back(s.lr());
    }
    return out;
  };
  EXPECT_EQ(run("step:step=2,gamma=0.1", 1.0, 6),
            (std::vector<double>{1.0, 0.1, 0.1, 0.010000000000000002, 0.010000000000000002, 0.0010000000000000002}));
  EXPECT_EQ(run("multistep:milestones=2;5,gamma=0.1", 1.0, 6),
            (std::vector<double>{1.0, 0.1, 0.1, 0.1, 0.010000000000000002, 0.010000000000000002}));
  EXPECT_EQ(run("exponential:gamma=0.95", 0.1, 5),
            (std::vector<double>{0.095, 0.09025, 0.0857375, 0.08145062499999998, 0.07737809374999999}));
}

TEST(Schedules, InverseTimeEveryBatchInFloat32) {
  LrSchedule k(parse_schedule("inverse_time:decay=0.01"), 0.1, Policy::tensorflow());
  EXPECT_EQ(k.lr(), static_cast<double>(0.1f));
  for (int i = 0; i < 10; ++i) k.after_step();
  EXPECT_EQ(k.lr(), static_cast<double>(0.1f * (1.0f / (1.0f + 0.01f * 10.0f))));
  LrSchedule t(parse_schedule("inverse_time:decay=0.01"), 0.1, Policy::torch());
  for (int i = 0; i < 10; ++i) t.after_step();
  EXPECT_EQ(t.lr(), 0.1 * (1.0 / (1.0 + 0.01 * 10.0)));
}

// A loss that never improves, patience 2, cooldown 2, factor 0.5. PyTorch 1.13's
// ReduceLROnPlateau (run here) reduces after epochs 4 and 9; Keras 2.2.4's callback (wait >=
// patience, and the epoch that ends a cooldown counts) after 3, 6, 9 and 12.
TEST(Schedules, PlateauInTorchAndKerasConventions) {
  auto run = [](PlateauRule rule) {
    Policy p = Policy::torch();
    p.plateau_rule = rule;
    LrSchedule s(parse_schedule("plateau:factor=0.5,patience=2,cooldown=2"), 1.0, p);
    std::vector<double> out;
    for (int e = 0; e < 12; ++e) {
      s.after_epoch(1.0);
      out.push_back(s.lr());
    }
    return out;
  };
  EXPECT_EQ(run(PlateauRule::torch),
            (std::vector<double>{1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25}));
  EXPECT_EQ(run(PlateauRule::keras),
            (std::vector<double>{1, 1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125, 0.125, 0.125, 0.0625}));
  // Relative (torch) vs absolute (Keras) threshold 0.1: 10 -> 9.5 is no improvement relatively
  // (needs < 9) and one absolutely (needs < 9.9).
  Policy p = Policy::torch();
  LrSchedule s(parse_schedule("plateau:factor=0.5,patience=0,threshold=0.1"), 1.0, p);
  s.after_epoch(10.0);
  s.after_epoch(9.5);  // relative: 9.5 < 10*0.9 = 9 is false: a bad epoch, patience 0: reduce
  EXPECT_EQ(s.lr(), 0.5);
  p.plateau_rule = PlateauRule::keras;
  LrSchedule a(parse_schedule("plateau:factor=0.5,patience=1,threshold=0.1"), 1.0, p);
  a.after_epoch(10.0);
  a.after_epoch(9.5);  // absolute: 9.5 < 10 - 0.1: an improvement, no reduction
  EXPECT_EQ(a.lr(), static_cast<double>(1.0f));
}

TEST(Schedules, ParseErrorsNameTheField) {
  EXPECT_EQ(schedule_string(parse_schedule("step:step=30,gamma=0.1")), "step:step=30,gamma=0.1");
  EXPECT_EQ(schedule_string(parse_schedule("multistep:milestones=3;8,gamma=0.5,every=batch")),
            "multistep:milestones=3;8,gamma=0.5,every=batch");
  for (const char* bad : {"cosine:t=3", "step:gamma=0.1", "step:step=0", "step:step=2,gamma=-1",
                          "multistep:milestones=5;3", "plateau:factor=2", "inverse_time:decay=x", "step:step=2,foo=1",
                          "exponential:gamma"}) {
    try {
      parse_schedule(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("schedule:"), std::string::npos) << e.what();
    }
  }
}

// The size of each formula difference on a real model: LeNet-5 trained 100 steps (batch 32) on
// Fashion-MNIST from the same weights and batches, the torch preset against the same with one
// knob flipped; printed, with the minimum each kind of difference must reach (below).
TEST(OptimizerDrift, EachFormulaDifferenceAfter100Steps) {
  DataSpec spec;
  spec.limit = 3200;
  const std::string dir = kDefaultFashionMnistDir;
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(dir) / "train-images-idx3-ubyte", ec) &&
      !std::filesystem::exists(std::filesystem::path(dir) / "train-images-idx3-ubyte.gz", ec))
    DRIFTLAB_SKIP_OR_REQUIRE("Fashion-MNIST not found in " + dir);
  DatasetLoader loader;
  const Dataset train = loader.load(spec, Split::train);
  auto run = [&](const OptimConfig& oc, const std::string& policy, double* loss) {
    // Every flip is an optimiser knob on the torch preset: the same initial weights (seed 3).
    Model built = build_model("lenet5", Policy::parse(policy), 3);
    TrainConfig cfg;
    cfg.batch = 32;
    cfg.optim = oc;
    CpuRunner r(built, cfg, ExecContext{});
    std::vector<int64_t> idx(3200);
    for (int64_t i = 0; i < 3200; ++i) idx[i] = i;
    for (int s = 0; s < 100; ++s) {
      Tensor x = gather_batch(train, idx, s * 32, 32, DType::f32);
      std::vector<int32_t> y(train.labels.begin() + s * 32, train.labels.begin() + s * 32 + 32);
      *loss = r.train_step(x, y);
    }
    std::vector<Tensor> w;
    for (auto& np : built.net->named_params()) w.push_back(np.second->value.clone());
    return w;
  };
  // A formula difference (eps placement or value, RMSprop's root, start or decay) changes the
  // trajectory itself: > 1e-2 of the largest weight. A rounding difference (the same algebra,
  // another rounding) must change the weights (a knob with no effect would not be wired), by
  // anything from an ulp to ~1e-1: Adam normalises each gradient element by its own size, so one
  // ulp can flip the sign of a noise-sized element's step, or not.
  struct Flip {
    const char* what;
    OptimConfig oc;
    const char* base;
    const char* flipped;
    double min_effect;
  };
  constexpr double kFormula = 1e-2, kRounding = 0.0;
  const Flip flips[] = {
      {"Adam eps after the bias correction vs epsilon hat", adam(1e-3), "torch", "torch,adam_form=epsilon_hat", kFormula},
      {"Adam eps 1e-8 vs Keras's 1e-7", adam(1e-3), "torch", "torch,adam_eps=1e-7", kFormula},
      {"Adam bias correction of v inside the root (TF.js)", adam(1e-3), "torch", "torch,adam_form=corrected_quotient",
       kRounding},
      {"Adam beta^t as a float32 running product", adam(1e-3), "torch", "torch,adam_beta_power=product_float32",
       kRounding},
      {"Adam scalars in float32", adam(1e-3), "torch", "torch,optim_scalar_precision=float32", kRounding},
      {"Adam moments by increment (TF1)", adam(1e-3), "torch", "torch,optim_moment_update=increment", kRounding},
      {"Adam second moment (1-b)*(g*g)", adam(1e-3), "torch", "torch,optim_square_order=square_then_scale", kRounding},
      {"Adam with every operation rounded (no ATen fma)", adam(1e-3), "torch", "torch,optim_fma=none", kRounding},
      {"RMSprop eps inside vs outside the root", rmsprop(1e-3), "torch", "torch,rmsprop_form=eps_inside_root", kFormula},
      {"RMSprop mean square starting at ones (TF1)", rmsprop(1e-3), "torch", "torch,rmsprop_ms_init=ones", kFormula},
      {"RMSprop rho 0.99 vs Keras's 0.9", rmsprop(1e-3), "torch", "torch,rmsprop_rho=0.9", kFormula},
  };
  std::cout << "  LeNet-5, Fashion-MNIST, 100 steps of batch 32, lr 1e-3, from the same weights:\n"
            << "  knob flipped against the torch preset                 max|dw|/max|w|   loss at step 100\n";
  for (const Flip& f : flips) {
    double l0 = 0, l1 = 0;
    const std::vector<Tensor> a = run(f.oc, f.base, &l0), b = run(f.oc, f.flipped, &l1);
    double dw = 0, wmax = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
      for (int64_t e = 0; e < a[i].numel(); ++e) {
        dw = std::max(dw, std::fabs(a[i].at(e) - b[i].at(e)));
        wmax = std::max(wmax, std::fabs(a[i].at(e)));
      }
    std::cout << "  " << f.what << std::string(52 - std::string(f.what).size(), ' ') << "  " << dw / wmax << "   "
              << l0 << " vs " << l1 << "\n";
    EXPECT_GT(dw / wmax, f.min_effect) << f.what << (f.min_effect > 0 ? ": smaller than a formula difference"
                                                                       : ": no effect at all");
    EXPECT_TRUE(std::isfinite(l0) && std::isfinite(l1)) << f.what;
  }
}

}  // namespace
}  // namespace driftlab
