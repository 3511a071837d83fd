// attacks/gradient.h against the same attacks written with PyTorch 1.13 autograd
// (tests/oracles/torch/oracle.py run_attack): LeNet-5, ResNet-20 (random BatchNorm statistics) and
// the LSTM classifier (28 steps of 28 features, LSTM 128, dense 10) under the torch preset, in eval() mode, F.cross_entropy, FGSM, BIM (10 steps) and PGD (10 steps
// from a random start drawn by driftlab and handed to the script), and BIM with torchattacks'
// projection (bim.py's max/min lines).
//
// What must agree: the sign of the clean input gradient wherever PyTorch's gradient is not within
// rounding of zero (the two gradients differ by up to ~6e-7 of the largest element, measured in
// TorchOracleInputGradient, so an element below 1e-5 of the largest may take either sign: those
// are counted and printed), and every element of the adversarial examples within 1 ulp, except
// where an element's sign went the other way at some step (counted and printed: each such
// element is off by one step or 2*eps, never by a rounding). On both models and all three
// attacks these counts are printed and bounded below.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "attacks/gradient.h"
#include "engine/random.h"
#include "engine/train/cpu_runner.h"
#include "models/models.h"
#include "tests/oracles/oracle_util.h"

namespace driftlab {
namespace {

using oracle::CaseDir;

constexpr uint64_t kSeed = 21;
constexpr int64_t kBatch = 4;
constexpr double kEps = 0.03, kStep = 0.01;
constexpr int kSteps = 10;
constexpr uint64_t kNoiseSeed = 5;

struct ArchCase {
  const char* arch;
  double lo, hi;
};
const ArchCase kArchs[] = {{"lenet5", 0.0, 1.0}, {"resnet20", -1.0, 1.0}, {"lstm", 0.0, 1.0}};

Tensor clean_input(const ArchCase& a) {
  const std::string arch = a.arch;
  if (arch == "lenet5") return random_tensor({kBatch, 1, 28, 28}, DType::f32, 41, a.lo, a.hi);
  if (arch == "lstm") return random_tensor({kBatch, 28, 28}, DType::f32, 44, a.lo, a.hi);
  return random_tensor({kBatch, 3, 32, 32}, DType::f32, 42, a.lo, a.hi);
}

// PGD's start as run_gradient_attack draws it: Rng(mt19937_u24, seed).uniform<float>(-eps, eps)
// per element, in order.
Tensor pgd_noise(const Tensor& x) {
  Tensor n(x.shape(), DType::f32);
  Rng rng(RngEngine::mt19937_u24, kNoiseSeed);
  for (int64_t i = 0; i < n.numel(); ++i) n.data<float>()[i] = rng.uniform<float>(-float(kEps), float(kEps));
  return n;
}

void fill_attacks(CaseDir& r) {
  for (const ArchCase& a : kArchs) {
    Model m = oracle::model_with_random_state(a.arch, Policy::torch(), kSeed);
    const std::string n = std::string(a.arch) + "_attack";
    const auto params = m.net->named_params();
    const auto stats = m.net->named_buffers();
    for (std::size_t i = 0; i < params.size(); ++i) r.input(n, "p" + std::to_string(i), params[i].second->value);
    for (std::size_t j = 0; j < stats.size(); ++j) r.input(n, "s" + std::to_string(j), stats[j].second->value);
    const Tensor x = clean_input(a);
    r.input(n, "x", x);
    r.input(n, "labels", oracle::labels_tensor(oracle::random_labels(kBatch, 10, 43)));
    r.input(n, "noise", pgd_noise(x));
    r.add_case({{"name", n}, {"kind", "attack"}, {"arch", a.arch}, {"num_params", params.size()},
                {"num_stats", stats.size()}, {"lo", a.lo}, {"hi", a.hi}, {"eps", kEps}, {"step", kStep},
                {"steps", kSteps}});
  }
}
const CaseDir& attack_run() {
  static const CaseDir run(oracle::torch_oracle("oracle.py"), "torch_attack", fill_attacks);
  return run;
}

TEST(TorchAttackOracle, FgsmBimPgdEqualPytorchAutogradInEvalMode) {
  ORACLE_GROUP(run, attack_run);
  for (const ArchCase& a : kArchs) {
    SCOPED_TRACE(a.arch);
    const std::string n = std::string(a.arch) + "_attack";
    Model m = build_model(a.arch, Policy::torch(), kSeed);
    auto params = m.net->named_params();
    auto stats = m.net->named_buffers();
    for (std::size_t i = 0; i < params.size(); ++i) params[i].second->value = run.in(n, "p" + std::to_string(i));
    for (std::size_t j = 0; j < stats.size(); ++j) stats[j].second->value = run.in(n, "s" + std::to_string(j));
    CpuRunner runner(m);
    const Tensor x = run.in(n, "x");
    const std::vector<int32_t> y = oracle::labels_of(run.in(n, "labels"));

    // the clean gradient's sign
    const Tensor g = runner.input_gradient(x, y, Semantics::inference).dx, gt = run.out(n, "g0");
    const double gmax = oracle::max_abs(gt);
    int64_t flips_small = 0, flips_large = 0;
    for (int64_t i = 0; i < g.numel(); ++i) {
      const float a1 = g.data<float>()[i], b1 = gt.data<float>()[i];
      const int sa = (a1 > 0) - (a1 < 0), sb = (b1 > 0) - (b1 < 0);
      if (sa == sb) continue;
      (std::fabs(b1) < 1e-5 * gmax ? flips_small : flips_large) += 1;
    }
    std::cout << a.arch << ": clean gradient signs differing from PyTorch's: " << flips_large
              << " where |g| >= 1e-5 of the largest, " << flips_small << " below (of " << g.numel() << ")\n";
    EXPECT_EQ(flips_large, 0);

    for (const char* kind : {"fgsm", "bim", "pgd", "bim_torchattacks"}) {
      attacks::GradientAttackSpec spec;
      const bool tattacks = std::string(kind) == "bim_torchattacks";  // torchattacks' projection
      spec.kind = attacks::parse_attack_kind(tattacks ? "bim" : kind);
      if (tattacks) spec.projection = attacks::Projection::max_min;
      spec.eps = kEps, spec.step = kStep, spec.steps = kSteps;
      spec.lo = a.lo, spec.hi = a.hi;
      spec.random_start = spec.kind == attacks::AttackKind::pgd;
      spec.seed = kNoiseSeed;
      const attacks::AttackResult r = attacks::run_gradient_attack(runner, x, y, spec);
      const Tensor want = run.out(n, kind);
      int64_t within = 0, off = 0, worst = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        const int64_t u = oracle::ulps_between(r.x_adv.data<float>()[i], want.data<float>()[i]);
        (u <= 1 ? within : off) += 1;
        worst = std::max(worst, u);
      }
      std::cout << a.arch << " " << kind << ": " << within << " of " << want.numel() << " elements within 1 ulp of "
                << "PyTorch's, " << off << " beyond (largest " << worst << " ulps)\n";
      // Beyond 1 ulp only where a gradient sign went the other way: at most the clean gradient's
      // near-zero flips for FGSM, and a few per step for BIM/PGD.
      EXPECT_LE(off, spec.kind == attacks::AttackKind::fgsm ? flips_small : flips_small + 8 * kSteps) << kind;
    }
  }
}

}  // namespace
}  // namespace driftlab
