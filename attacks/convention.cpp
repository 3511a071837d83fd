#include "attacks/convention.h"

#include "core/error.h"

namespace driftlab {
namespace attacks {

Convention convention(const std::string& name) {
  Convention c;
  c.name = name;
  if (name == "driftlab") {
    c.source = "driftlab's own defaults (attacks/gradient.h)";
    return c;
  }
  if (name == "foolbox2") {
    // eps and step as fractions of the bounds' range; FGSM's epsilon sweep (epsilons=1000,
    // max_epsilon=1); the loss against the label passed; Misclassification (prediction != label);
    // BIM/PGD return_early and their eps search (binary_search=True, from eps 0.3).
    c.units = EpsUnits::fraction_of_range;
    c.fgsm_schedule = EpsSchedule::foolbox2_sweep;
    c.iterative_schedule = EpsSchedule::foolbox2_search;
    c.sweep_epsilons = 1000, c.max_epsilon = 1.0;
    c.early_stop = true;
    c.eps = 0.3, c.bim_step = 0.05, c.pgd_step = 0.01, c.bim_steps = 10, c.pgd_steps = 40;
    c.source = "foolbox 2.4.0 foolbox/attacks/gradient.py (SingleStepGradientBaseAttack._run, GradientSignAttack), "
               "foolbox/attacks/iterative_projected_gradient.py, foolbox/criteria.py (Misclassification)";
    return c;
  }
  if (name == "foolbox3") {
    // absolute eps; step = rel_stepsize * eps (BIM 0.2, PGD 0.01 / 0.3); no early stop; PGD
    // starts at a uniform point of the ball; success: prediction != label.
    c.step_units = StepUnits::fraction_of_eps;
    c.pgd_random_start = true;
    c.bim_step = 0.2, c.pgd_step = 0.01 / 0.3, c.bim_steps = 10, c.pgd_steps = 40;
    c.source = "foolbox 3.3.4 foolbox/attacks/gradient_descent_base.py, basic_iterative_method.py, "
               "projected_gradient_descent.py, fast_gradient_method.py";
    return c;
  }
  if (name == "art") {
    // absolute eps and eps_step; y=None: the loss against the model's own predictions; success:
    // the prediction changed (compute_success_array); no random init by default.
    c.labels = LabelSource::clean_prediction;
    c.success = SuccessRule::differs_from_clean_prediction;
    c.eps = 0.3, c.bim_step = 0.1, c.pgd_step = 0.1, c.bim_steps = 100, c.pgd_steps = 100;
    c.source = "adversarial-robustness-toolbox 1.20 art/attacks/evasion/fast_gradient.py, "
               "projected_gradient_descent/projected_gradient_descent.py, iterative_method.py, "
               "art/utils.py (compute_success_array)";
    return c;
  }
  if (name == "torchattacks") {
    // absolute eps = 8/255, alpha = 2/255, 10 steps; PGD random start; clamp to [0, 1].
    c.pgd_random_start = true;
    c.eps = 8.0 / 255, c.bim_step = 2.0 / 255, c.pgd_step = 2.0 / 255, c.bim_steps = 10, c.pgd_steps = 10;
    c.bim_projection = Projection::max_min;  // bim.py's max/min projection; pgd.py clamps the delta
    c.source = "torchattacks 3.5 torchattacks/attacks/fgsm.py, bim.py, pgd.py";
    return c;
  }
  fail("attack: unknown convention '", name, "' (known: driftlab, foolbox2, foolbox3, art, torchattacks)");
}

}  // namespace attacks
}  // namespace driftlab
