// The attack libraries' conventions (docs/research/attack_conventions_sources.md; the table in
// docs/POLICIES.md, "Attack conventions"): what "FGSM at eps 0.03" means in Foolbox 2, Foolbox 3,
// ART and torchattacks (the Python attack libraries, docs/GLOSSARY.md), resolved into the
// explicit fields of GradientAttackSpec (eps units, step rule, the loss's labels, the success
// rule, FGSM's schedule, early stopping, PGD's random start) and the libraries' default numbers.
// A convention is a preset: `driftlab attack --convention X` takes each of its values unless the
// corresponding flag is given. What a library does that driftlab does not reproduce is refused
// by name where the spec is validated (GradientAttackSpec::validate), never run silently another way.
#pragma once
#include <string>

#include "attacks/gradient.h"

namespace driftlab {
namespace attacks {

struct Convention {
  std::string name;  // foolbox2 | foolbox3 | art | torchattacks | driftlab (the spec's own defaults)
  EpsUnits units = EpsUnits::absolute;
  StepUnits step_units = StepUnits::like_eps;
  LabelSource labels = LabelSource::true_label;
  SuccessRule success = SuccessRule::differs_from_label;
  EpsSchedule fgsm_schedule = EpsSchedule::single;
  EpsSchedule iterative_schedule = EpsSchedule::single;  // BIM / PGD
  int sweep_epsilons = 1000;
  double max_epsilon = 1.0;
  bool early_stop = false;        // BIM / PGD
  bool pgd_random_start = false;
  Projection bim_projection = Projection::clip_delta;  // torchattacks' BIM: max_min (its PGD clips the delta)
  // The library's default numbers (NaN / 0: none, the user must give them).
  double eps = 0, bim_step = 0, pgd_step = 0;
  int bim_steps = 0, pgd_steps = 0;
  std::string source;  // where the library defines these (file and version)
};

// "driftlab", "foolbox2", "foolbox3", "art", "torchattacks"; anything else is refused with the list.
Convention convention(const std::string& name);

}  // namespace attacks
}  // namespace driftlab
