// The attack settings shared by driftlab attack and driftlab robustness (cli/cmd_attack.cpp defines
// the functions), and how a convention fills the ones the command line did not give.
#pragma once
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "attacks/boundary.h"
#include "attacks/gradient.h"
#include "cli/common.h"

namespace driftlab {
namespace cli {

struct AttackOptions {
  std::string weights, attack = "fgsm", input, labels, out, eps_units = "absolute", labels_from = "true";
  std::string convention = "driftlab", eps_schedule = "single", step_units = "eps", success = "label", eight_bit = "off";
  std::string boundary_rules;  // empty: the convention's
  std::string projection = "clip-delta";
  std::vector<std::string> judges;
  double eps = 0.1, step = 0.01, lo = NAN, hi = NAN, max_epsilon = 1.0;
  int steps = 10, threads = 0, iterations = 5000, max_directions = 25, epsilons = 1000;
  int64_t max_pixels = 1000;
  bool random_start = false, early_stop = false, transposed_index = false, png = false;
  uint64_t seed = 1;
  int64_t batch = 128;
  DataOptions data;
  DeviceOptions dev;
  std::set<std::string> given;  // the flags given on the command line (a convention fills the others)
};

// The convention's value for every attack setting the command line did not give.
void apply_convention(AttackOptions& o, attacks::AttackKind kind, bool decision);
// The Boundary attack's spec: the rules of --boundary-rules, else of the convention (driftlab:
// Foolbox 2's), with that library's defaults for every flag not given.
attacks::BoundarySpec boundary_spec(const AttackOptions& o, double lo, double hi);
// The white-box spec of the options (after the convention filled what was not given); lo/hi
// are the caller's.
attacks::GradientAttackSpec gradient_spec(AttackOptions& o, attacks::AttackKind kind, bool decision);

}  // namespace cli
}  // namespace driftlab
