// One attack of any kind, and the one place an attack's name picks its implementation: the
// white-box L-inf attacks (fgsm, bim, pgd: gradient.h) and the decision-based ones (boundary:
// boundary.h, single-pixel: single_pixel.h), each answered as an AttackResult. driftlab attack
// (driftlab/attack.h) and the robustness table (robustness.h) both run their attacks here.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attacks/boundary.h"
#include "attacks/gradient.h"
#include "attacks/single_pixel.h"

namespace driftlab {
namespace attacks {

// An attack and its settings; only the part its name reads is used.
struct AttackSpec {
  std::string name;              // fgsm | bim | pgd | boundary | single-pixel
  GradientAttackSpec gradient;   // fgsm, bim, pgd (its kind is taken from the name)
  BoundarySpec boundary;         // boundary
  SinglePixelSpec pixel;         // single-pixel
};

// boundary and single-pixel: only the model's decisions are read (no gradient, no eps-ball).
bool is_decision_based(const std::string& name);
// fgsm, bim, pgd.
bool is_white_box(const std::string& name);

// The attack on (x, y) with the spec's seeds and bounds as given. The white-box attacks as
// run_gradient_attack returns them; a decision-based attack's examples, predictions and queries
// copied into an AttackResult, its norms and successes (prediction != label) by finish_result.
// An unknown name is refused by parse_attack_kind ("attack: unknown attack 'X' ...").
AttackResult run_attack(Runner& runner, const Tensor& x, const std::vector<int32_t>& y, const AttackSpec& spec);

}  // namespace attacks
}  // namespace driftlab
