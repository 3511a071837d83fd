// White-box L-infinity attacks through the model face (engine/train/runner.h): FGSM, BIM and
// L-inf PGD. Each step differentiates the active Policy's loss at inference semantics
// (Runner::input_gradient(x, labels, Semantics::inference): BatchNorm's running statistics, no
// dropout, nothing moved), so a preset's loss formulation shows up as what it is: under the
// Keras presets the probability clip of ce_clip_eps zeroes the gradient of confident samples,
// and FGSM then leaves them where they are (AttackResult::zero_gradient counts them).
//
// Arithmetic, in the input's dtype, element by element (what PyTorch code of these attacks
// computes on float32 tensors, torchattacks' FGSM/PGD and Foolbox 3's L-inf attacks alike):
//   FGSM:      x' = clamp(x + eps * sign(g), lo, hi)
//   BIM / PGD: x_0 = x (PGD with random_start: clamp(x + u, lo, hi), u ~ U(-eps, eps) per element
//              from Rng(mt19937_u24, seed)); then `steps` times
//              x_t+1 = clamp(x + clamp(x_t + step * sign(g_t) - x, -eps, eps), lo, hi)
// sign(0) = 0 (an element whose gradient is exactly zero does not move). eps and step are in
// input units (eps_units = absolute) or fractions of hi - lo (Foolbox 2's convention), turned
// into input units once, in double, then rounded to the dtype. The step may instead be a fraction
// of eps (Foolbox 3's rel_stepsize: step = rel * eps).
//
// FGSM with Foolbox 2's epsilon sweep (EpsSchedule::foolbox2_sweep; foolbox/attacks/gradient.py
// SingleStepGradientBaseAttack._run, v2.4.0; docs/research/attack_conventions_sources.md section 1):
// the gradient once at x; d = sign(g) * (hi - lo) in the dtype (fraction units; sign(g) in
// absolute units); eps_k = numpy's linspace(0, max_epsilon, sweep_epsilons + 1)[1:] (k * (max /
// n) in double, the last exactly max); x_k = clamp(x + d * T(eps_k), lo, hi), judged in order.
// A success among the first 20 values is refined once over linspace(0, eps_hit, 21)[1:]; a later
// one is final; where none succeeds, the second pass runs linspace(0, max, 21)[1:] (a coarser
// grid: new points only where 20 does not divide sweep_epsilons). The result is the smallest
// successful eps seen (along the ray the distance never shrinks as eps grows, so this is Foolbox
// 2's lowest-MSE adversarial), or the input where none. A misclassified input: success at eps 0.
//
// BIM / PGD with Foolbox 2's eps search (EpsSchedule::foolbox2_search; binary_search=True, the
// default of its LinfinityBasicIterativeAttack and ProjectedGradientDescentAttack:
// foolbox/attacks/iterative_projected_gradient.py _run_binary_search / _run_one, v2.4.0), per sample:
// a run is the attack at (eps, step = eps * (spec.step / spec.eps)) from x, each iterate after a
// step judged by the model; a run succeeds when an iterate is adversarial (with early_stop,
// return_early, it ends there). The search: runs at eps, 1.5 eps, 1.5^2 eps ... until one succeeds
// (at most 20; none: the sample fails, x returned); then 20 bisections between 0 and that eps,
// (good + bad) / 2 each. Every adversarial iterate any run judged is a candidate, and the one with
// the smallest mean squared distance to x is returned (Foolbox 2's Adversarial keeps the best by
// its distance, MSE by default); eps_found is the eps of the run that produced it. A misclassified
// input: success at eps 0, no run. The stepsize/eps ratio is Foolbox 2's `factor`; eps may grow
// past the range (the ball then stops binding). queries: the model evaluations spent per sample
// (gradient calls and the judging forward passes).
//
// Success (SuccessRule): the adversarial prediction differs from the label (Foolbox, torchattacks),
// or from the clean prediction (ART's compute_success_array).
//
// PGD's random restarts (ART's num_random_init; Madry et al.'s restarts): the attack `restarts`
// times, restart k from seed + k (restart 0 is the single run of the same spec), and one example
// per sample kept, by RestartSelect:
//   per_sample (ART >= 1.5: after each restart, per batch, compute_success_array and
//     `adv_x[...][attack_success] = batch[attack_success]`, art/attacks/evasion/
//     projected_gradient_descent/projected_gradient_descent_*.py; the worst case per sample):
//     restart 0's example, replaced by a later restart's wherever that restart succeeds (the
//     last successful restart's example is returned);
//   per_run (ART <= 1.4, Trusted-AI/adversarial-robustness-toolbox#714, changed by #765): the
//     whole run with the highest success rate over all inputs (`rate > rate_best`: the first of
//     equal runs), which can report a sample robust that another restart fooled.
// Success is the spec's SuccessRule in both.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "engine/train/runner.h"

namespace driftlab {
namespace attacks {

enum class AttackKind { fgsm, bim, pgd };
AttackKind parse_attack_kind(const std::string& s);  // "attack: unknown attack 'X' (known: fgsm, bim, pgd)"
const char* attack_kind_name(AttackKind k);

enum class EpsUnits { absolute, fraction_of_range };
enum class StepUnits { like_eps, fraction_of_eps };       // Foolbox 3: step = rel_stepsize * eps
enum class LabelSource { true_label, clean_prediction };  // what the loss is taken against (ART: the prediction)
// FGSM: one eps, or Foolbox 2's sweep and refinement; BIM / PGD: one eps, or Foolbox 2's eps search
enum class EpsSchedule { single, foolbox2_sweep, foolbox2_search };
enum class SuccessRule { differs_from_label, differs_from_clean_prediction };
// BIM / PGD's projection onto the eps-ball and the bounds (core/ops/linf_step.h): clip the
// perturbation, x0 + clamp(x - x0, -eps, eps), then the bounds (Foolbox, ART, torchattacks' PGD);
// or torchattacks' BIM: min(min(max(x, max(x0 - eps, lo)), x0 + eps), hi), which leaves an
// interior x exactly as it is (x0 + (x - x0) may round to a neighbour of x).
enum class Projection { clip_delta, max_min };
Projection parse_projection(const std::string& s);        // "clip-delta" | "max-min"
const char* projection_name(Projection p);
enum class RestartSelect { per_sample, per_run };
RestartSelect parse_restart_select(const std::string& s);  // "per-sample" | "per-run"
const char* restart_select_name(RestartSelect r);
SuccessRule parse_success_rule(const std::string& s);     // "label" | "clean-prediction"
const char* success_rule_name(SuccessRule r);

struct GradientAttackSpec {
  AttackKind kind = AttackKind::fgsm;
  double eps = 0.1;
  double step = 0.01;       // BIM / PGD step size (same units as eps)
  int steps = 10;           // BIM / PGD iterations
  bool random_start = false;  // PGD: start from a uniform point of the eps-ball
  bool early_stop = false;    // BIM / PGD: a sample stops moving once it is misclassified
  double lo = 0.0, hi = 1.0;  // the valid input range (clamp after every step)
  EpsUnits units = EpsUnits::absolute;
  StepUnits step_units = StepUnits::like_eps;
  LabelSource labels = LabelSource::true_label;
  EpsSchedule schedule = EpsSchedule::single;
  int sweep_epsilons = 1000;   // foolbox2_sweep: the grid (Foolbox 2's `epsilons`; Guo et al. ran 100)
  double max_epsilon = 1.0;    // foolbox2_sweep: its end, in `units` (Foolbox 2's `max_epsilon`;
                               // Guo et al.: 0.1, docs/GLOSSARY.md)
  SuccessRule success = SuccessRule::differs_from_label;
  Projection projection = Projection::clip_delta;  // BIM / PGD (FGSM's one step is the same under both)
  int restarts = 1;         // PGD with random_start: runs from seeds seed, seed + 1, ...
  RestartSelect restart_select = RestartSelect::per_sample;
  uint64_t seed = 1;        // PGD's random start
  int64_t batch = 128;      // samples per gradient call
  void validate() const;    // throws naming the field
};

// Per-sample outcome and the perturbation of the returned example.
struct AttackResult {
  Tensor x_adv;                          // the input's shape and dtype
  std::vector<int32_t> clean_pred, adv_pred;
  std::vector<uint8_t> success;          // adv_pred != label
  std::vector<double> l0, l2, linf;      // of x_adv - x, per sample
  std::vector<uint8_t> zero_gradient;    // the first step's gradient was exactly zero everywhere
  int64_t gradient_calls = 0;            // Runner::input_gradient calls (batches x steps)
  std::vector<int64_t> queries;          // decision-based attacks and the sweep: model predictions per sample
  std::vector<double> eps_found;         // the sweep: the smallest successful eps (spec units), NaN where none
  std::vector<int32_t> restart;          // restarts > 1: the restart whose example each sample returns
};

// r.l0, r.l2, r.linf of r.x_adv - x per sample (double), and r.success: adv_pred != labels, or
// != r.clean_pred under SuccessRule::differs_from_clean_prediction.
void finish_result(const Tensor& x, const std::vector<int32_t>& labels, AttackResult& r,
                   SuccessRule rule = SuccessRule::differs_from_label);

// The attack on (x, labels), batched; x in [lo, hi] (checked: an input outside is refused by
// index). Deterministic for a given spec and thread count.
AttackResult run_gradient_attack(Runner& runner, const Tensor& x, const std::vector<int32_t>& labels,
                                 const GradientAttackSpec& spec);

// Summary over the samples that `mask` selects (all when empty): success rate, mean and median of
// each norm over the successes, share of zero gradients.
struct AttackSummary {
  int64_t samples = 0, successes = 0, zero_gradients = 0;
  double success_rate = 0;
  double mean_queries = 0;  // per success, decision-based attacks
  double mean_l0 = 0, mean_l2 = 0, mean_linf = 0, median_l2 = 0, median_linf = 0;
};
AttackSummary summarize(const AttackResult& r, const std::vector<uint8_t>& mask = {});

}  // namespace attacks
}  // namespace driftlab
