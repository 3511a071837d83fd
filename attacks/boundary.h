// The Boundary attack (Brendel et al. 2018) as Foolbox 2.4 runs it (foolbox/attacks/
// boundary_attack.py, blended_noise.py; ../shared/policies/training-quant-attacks.md C.4), one
// sample at a time, decision-based (Runner::logits only), in float64 internally.
//
// Start: blended uniform noise: up to `init_directions` images drawn uniformly in [lo, hi] until
// one is misclassified, then the smallest blend (1 - e) x0 + e noise over e in
// linspace(0, 1, init_epsilons + 1)[1:] that is misclassified (the noise itself if none).
// Step (Foolbox 2's generate_candidate): d = x0 - x, |d|; eta ~ N(0, I) with the component along d
// removed and scaled to spherical_step * |d|; spherical candidate x0 + (eta - d) / sqrt(1 +
// spherical_step^2), clipped; then a move towards x0 by source_step * |d| plus the distance the
// spherical step lost, clipped. Up to max_directions candidates per step; the first that is
// misclassified and strictly closer to x0 (squared L2 / MSE) is taken. Every 10th step the
// spherical candidates are judged too and their success feeds the statistics (deque of 100
// spherical, 30 step outcomes); when a deque is full: spherical success > 0.5 multiplies both
// steps by step_adaptation, < 0.2 divides them; step success > 0.5 / < 0.2 multiplies / divides
// source_step; a deque is cleared after it adapted. Stops after `steps` steps or when
// source_step < 1e-7.
//
// Randomness: Rng(mt19937_u24, seed mixed with the sample index), normals by Box-Muller in double.
// Foolbox 2 draws from numpy (randomgen) without a settable seed per attack; its exact noise
// cannot be reproduced, its rules are.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/train/runner.h"

namespace driftlab {
namespace attacks {

struct BoundarySpec {
  int steps = 5000;                 // Foolbox 2's iterations (S1: 100; S2: 5,000)
  int max_directions = 25;
  double spherical_step = 1e-2, source_step = 1e-2, step_adaptation = 1.5;
  int init_directions = 1000, init_epsilons = 1000;
  double lo = 0.0, hi = 1.0;
  uint64_t seed = 1;
  void validate() const;
};

struct BoundaryResult {
  Tensor x_adv;                          // the input where no start was found
  std::vector<int32_t> clean_pred, adv_pred;
  std::vector<uint8_t> success;          // adv_pred != label
  std::vector<double> mse;               // of the returned example (0 where the input itself)
  std::vector<std::vector<double>> trace;  // per sample: the MSE after the start and after each accepted step
  std::vector<int64_t> queries;          // model predictions spent per sample (the clean one included)
  std::vector<int> steps_run;
};

BoundaryResult run_boundary(Runner& runner, const Tensor& x, const std::vector<int32_t>& labels,
                            const BoundarySpec& spec);

}  // namespace attacks
}  // namespace driftlab
