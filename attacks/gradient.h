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
// into input units once, in double, then rounded to the dtype.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/train/runner.h"

namespace driftlab {
namespace attacks {

enum class AttackKind { fgsm, bim, pgd };
AttackKind parse_attack_kind(const std::string& s);  // "attack: unknown attack 'X' (known: fgsm, bim, pgd)"
const char* attack_kind_name(AttackKind k);

enum class EpsUnits { absolute, fraction_of_range };
enum class LabelSource { true_label, clean_prediction };  // what the loss is taken against (ART: the prediction)

struct GradientAttackSpec {
  AttackKind kind = AttackKind::fgsm;
  double eps = 0.1;
  double step = 0.01;       // BIM / PGD step size (same units as eps)
  int steps = 10;           // BIM / PGD iterations
  bool random_start = false;  // PGD: start from a uniform point of the eps-ball
  bool early_stop = false;    // BIM / PGD: a sample stops moving once it is misclassified
  double lo = 0.0, hi = 1.0;  // the valid input range (clamp after every step)
  EpsUnits units = EpsUnits::absolute;
  LabelSource labels = LabelSource::true_label;
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
  std::vector<int64_t> queries;          // decision-based attacks: model predictions per sample
};

// r.l0, r.l2, r.linf of r.x_adv - x per sample (double), and r.success = adv_pred != labels.
void finish_result(const Tensor& x, const std::vector<int32_t>& labels, AttackResult& r);

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
