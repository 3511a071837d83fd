// The one dispatch from an attack's name to its implementation (attack.h).
#include "attacks/attack.h"

namespace driftlab {
namespace attacks {

bool is_decision_based(const std::string& name) { return name == "boundary" || name == "single-pixel"; }

bool is_white_box(const std::string& name) { return name == "fgsm" || name == "bim" || name == "pgd"; }

AttackResult run_attack(Runner& runner, const Tensor& x, const std::vector<int32_t>& y, const AttackSpec& spec) {
  AttackResult r;
  if (spec.name == "single-pixel") {
    SinglePixelResult d = run_single_pixel(runner, x, y, spec.pixel);
    r.x_adv = d.x_adv, r.clean_pred = d.clean_pred, r.adv_pred = d.adv_pred, r.queries = d.queries;
    finish_result(x, y, r);
  } else if (spec.name == "boundary") {
    BoundaryResult d = run_boundary(runner, x, y, spec.boundary);
    r.x_adv = d.x_adv, r.clean_pred = d.clean_pred, r.adv_pred = d.adv_pred, r.queries = d.queries;
    finish_result(x, y, r);
  } else {
    GradientAttackSpec g = spec.gradient;
    g.kind = parse_attack_kind(spec.name);
    r = run_gradient_attack(runner, x, y, g);
  }
  return r;
}

}  // namespace attacks
}  // namespace driftlab
