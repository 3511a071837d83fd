// The files of one attack on a saved model (driftlab/attack.h): OUT/adversarial.npy (the
// examples in the input space), OUT/png/adv_<i>.png (8-bit images, when asked), OUT/result.json
// (the settings as run, the summaries, the transfer to the judges, the build's commit) and
// OUT/samples.csv (one row per input: label, predictions, success, norms, queries, the eps found,
// the judges' predictions).
#pragma once
#include <string>

#include "driftlab/attack.h"

namespace driftlab {
namespace report {

// Writes the files above into `out` (created where missing); png: the PNG images too.
void write_attack(const std::string& out, const AttackOutcome& o, bool png);

// v with `prec` digits after the point (std::fixed): the number format of the attack and
// robustness files.
std::string fixed_point(double v, int prec);

}  // namespace report
}  // namespace driftlab
