// The Boundary attack (Brendel et al. 2018), decision-based (Runner::logits only), under the rules
// of Foolbox 2.4 or Foolbox 3.3 (docs/POLICIES.md, "Attack conventions": the --boundary-rules row,
// `boundary_impl`). Both share the start and the proposal; they differ in how many candidates a
// step judges, what the step statistics count and when the attack stops.
//
// Start: blended uniform noise: up to `init_directions` images drawn uniformly in [lo, hi] until
// one is misclassified, then the smallest blend (1 - e) x0 + e noise over an e grid that is
// misclassified. Foolbox 2 (BlendedUniformNoiseAttack): e in linspace(0, 1, 1001)[1:], the noise
// itself if no blend is. Foolbox 3 (LinearSearchBlendedUniformNoiseAttack(steps=50)): e in
// linspace(0, 1, 51) as float32, for the whole batch at once; a sample with no adversarial start
// fails (Foolbox 3 raises for the whole batch; here only that sample fails).
// Proposal (Foolbox 2 generate_candidate / Foolbox 3 draw_proposals, the same formula): d = x0 - x,
// |d|; eta ~ N(0, I) with its component along d removed, scaled to spherical_step |d|; spherical
// candidate x0 + (eta - d) / sqrt(1 + spherical_step^2), clipped; then a move towards x0 by
// source_step |d| plus the distance the spherical step lost, clipped.
//
// foolbox2 (boundary_attack.py v2.4, one sample at a time, float64 internals; its start is drawn
// and blended in float64 here, where Foolbox 2 rounds both to the input's dtype): up to
// max_directions candidates per step, each with its own eta; on a statistics step (every 10th,
// and every step while confirming convergence) a candidate is judged only where its spherical
// point is adversarial, the spherical outcomes feed a window of 100 and the candidates' a window
// of 30 (so the step rate is conditional on the spherical success); the first adversarial
// candidate ends the step's search and is taken if strictly closer (squared L2). Adaptation
// (when a window is full): spherical > 0.5 multiplies both steps by step_adaptation, < 0.2
// divides them; step > step_raise (0.5) / < step_lower (0.2) multiplies / divides source_step;
// a window is cleared when it adapted. Convergence: source_step < 1e-7 resets both steps to 1e-2
// (literal, as Foolbox 2) and confirms: the attack stops only after converging again and staying
// below 2e-7 for `convergence_confirm` (100) more steps. What is returned is Foolbox 2's
// Adversarial's: the closest adversarial point judged, spherical points included (clipping can
// put one strictly closer than the walk's x). With no adversarial noise image the last draw is
// blended anyway, as Foolbox 2 does after its warning.
//
// foolbox3 (boundary_attack.py v3.3, batched): `batch` samples step together and share one eta
// per step (Foolbox 3 draws one (D, 1) normal for the batch and orthogonalises it per sample);
// one candidate per sample per step, judged every step; on every 10th step the spherical points
// are judged too and both windows take every sample's outcome (the step rate is unconditional,
// hence Foolbox 3's thresholds step_raise 0.25 / step_lower 0.1). A sample whose source_step is
// below 1e-7 keeps its example but is still judged and its steps still adapt (it may resume); the
// batch stops when all have converged. Arithmetic in the input's dtype (`f64_internals` = false,
// as Foolbox 3) or in float64; distances for the accept test in float64 on the points as held.
// Queries: every judge call of the batch counts for every sample in it (what Foolbox 3 spends).
//
// art (ART's BoundaryAttack, art/attacks/evasion/boundary.py, untargeted, one sample at a time, in
// the input's dtype as ART's float32, its delta and epsilon in float64 as ART's Python floats):
// the start is the first of up to `init_directions` (100) uniform images that is misclassified, used as it is (no blend). Each iteration: up to `trials`
// (25) rounds of `max_directions` (20) orthogonal proposals x + ((1 - h)(x - x0) + eta) / h, h =
// sqrt(1 + delta^2), eta ~ N(0, I) normalised, scaled to delta |x0 - x| and then orthogonalised,
// each clipped, judged in one call; the round's success rate r adapts delta (r < 0.2: delta *=
// step_adaptation (0.667), r > 0.5: delta /= it) and the first round with a success keeps its
// adversarial proposals; then up to `trials` rounds moving all of them towards x0 by epsilon
// (clipped), the same adaptation of epsilon, the first round with a success taking its closest
// adversarial point (L2) as x. No success in `trials` rounds ends the attack (ART returns what it
// has). ART stops at epsilon < min_epsilon = 0, i.e. never: `steps` (5000) iterations.
//
// Randomness: Rng(mt19937_u24) seeded from `seed` mixed with the sample index (foolbox2, art) or
// the batch index (foolbox3); normals by the ziggurat (engine/random.h ZigguratNormal; Foolbox 2's
// randomstate draws by a ziggurat too, method='zig'). Foolbox and ART draw from numpy / the
// framework's global generator (ART's start from an unseeded RandomState); their exact noise
// cannot be reproduced, their rules are.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "engine/train/runner.h"

namespace driftlab {
namespace attacks {

enum class BoundaryRules { foolbox2, foolbox3, art };
const char* boundary_rules_name(BoundaryRules r);
// "foolbox2" | "foolbox3" | "art"; anything else is refused with the list.
BoundaryRules parse_boundary_rules(const std::string& name);

struct BoundarySpec {
  BoundaryRules rules = BoundaryRules::foolbox2;
  int steps = 5000;                 // Foolbox 2's iterations, Foolbox 3's steps (studies: Guo et al. 100
                                    // in Foolbox 2, Abyane & Hemmati 5,000 in Foolbox 3; docs/GLOSSARY.md)
  int max_directions = 25;          // candidates per step and sample (Foolbox 3: 1; ART: sample_size 20)
  int trials = 25;                  // ART's num_trial: rounds per iteration for each of its two steps
  double spherical_step = 1e-2, source_step = 1e-2;  // ART's delta and epsilon
  double step_adaptation = 1.5;     // Foolbox: > 1, steps multiplied to grow; ART: 0.667 in (0, 1), multiplied to shrink
  double step_raise = 0.5, step_lower = 0.2;  // the source step's success thresholds (Foolbox 3: 0.25 / 0.1)
  int init_directions = 1000, init_epsilons = 1000;  // Foolbox 3: 1000 / 50
  int convergence_confirm = 100;    // Foolbox 2's confirmation steps (Foolbox 3: 0, none)
  int batch = 1;                    // samples stepping together (foolbox3; foolbox2 attacks one at a time)
  bool f64_internals = true;        // Foolbox 2: float64; Foolbox 3: the input's dtype
  double lo = 0.0, hi = 1.0;
  uint64_t seed = 1;
  void validate() const;
};

// The library's defaults for `rules` (steps, candidates, thresholds, start grid, convergence,
// internals); batch 128 for foolbox3 (Foolbox 3 takes whatever batch its caller passes); art:
// ART's untargeted attack (its own default is targeted=True, which needs target labels).
BoundarySpec boundary_defaults(BoundaryRules rules);

struct BoundaryResult {
  Tensor x_adv;                          // the input where no start was found
  std::vector<int32_t> clean_pred, adv_pred;
  std::vector<uint8_t> success;          // adv_pred != label
  std::vector<double> mse;               // of the returned example as the attack holds it (float64 internals: before
                                         // the rounding to the input's dtype); 0 where the input itself
  std::vector<std::vector<double>> trace;  // per sample: the MSE of the start and of each closer point kept
  std::vector<int64_t> queries;          // model predictions spent per sample (the clean one included)
  std::vector<int> steps_run;
};

BoundaryResult run_boundary(Runner& runner, const Tensor& x, const std::vector<int32_t>& labels,
                            const BoundarySpec& spec);

// The step-size rules on their own (what both rule sets run per sample; tested directly).
namespace boundary_rules {

// The last `maxlen` outcomes since the window was cleared (Foolbox 2's deque(maxlen); Foolbox 3's
// ArrayQueue column holds the same outcomes wherever its rate is read, i.e. when full).
class SuccessWindow {
 public:
  explicit SuccessWindow(std::size_t maxlen) : maxlen_(maxlen) {}
  void push(bool success);
  bool full() const { return q_.size() == maxlen_; }
  double rate() const;
  void clear() { q_.clear(); }

 private:
  std::size_t maxlen_;
  std::deque<uint8_t> q_;
};

// One adaptation from full windows: spherical > 0.5 / < 0.2 multiplies / divides both steps by
// step_adaptation; the step window against spec.step_raise / step_lower the source step; a window
// that adapted is cleared.
void adapt(SuccessWindow& spherical, SuccessWindow& step, double& sph, double& src, const BoundarySpec& spec);
void adapt(SuccessWindow& spherical, SuccessWindow& step, float& sph, float& src, const BoundarySpec& spec);

// Foolbox 2's convergence check, run before each step: source_step < 1e-7 the first time resets
// both steps to 1e-2 and starts confirming; converged again, the attack stops once the source
// step stayed below 2e-7 for `confirm` further checks; leaving that band while confirming starts
// over. confirm = 0: stop at the first source_step < 1e-7 (Foolbox 3's per-sample rule).
class Convergence {
 public:
  explicit Convergence(int confirm) : confirm_(confirm), remaining_(confirm) {}
  bool stop(double& sph, double& src);  // true: the attack ends before this step
  bool confirming() const { return resetted_; }  // Foolbox 2 checks spherical points every step then

 private:
  int confirm_, remaining_;
  bool resetted_ = false;
};

}  // namespace boundary_rules

}  // namespace attacks
}  // namespace driftlab
