// Robustness of several models under several attacks, as the studies of Guo et al. and of Abyane &
// Hemmati compare them (docs/GLOSSARY.md): every attack on every model over the samples that every
// model classifies correctly (Guo et al.: 1,000 such test images; Abyane & Hemmati: 3,000), repeated
// with different seeds, the success rate per (model, attack) with its mean and standard deviation
// over the repeats, Guo et al.'s robustness indicator R(m) (attacks/stats.h min_max_indicator over
// the mean success rates), and Abyane & Hemmati's paired Wilcoxon signed-rank test with A12 between
// the first model and each other one (paired over the (attack, repeat) success rates).
//
// A model may take its white-box examples from another (craft_on): the examples are crafted on
// that model and judged on this one (transfer: Abyane & Hemmati's int8 models, attacked through
// their fp32 version). Decision-based attacks always query the model itself (an int8 model's integer
// decisions). Repeat r runs with seed + r: PGD's random start, Boundary's draws and the single
// pixel order change with it; FGSM and BIM are deterministic, their repeats equal.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attacks/attack.h"
#include "attacks/stats.h"

namespace driftlab {
namespace attacks {

struct RobustnessModel {
  std::string name;
  Runner* runner = nullptr;
  int craft_on = -1;  // white-box examples crafted on models[craft_on] (-1: on this model)
};

// An attack of the table: any kind (attack.h); each repeat runs it with its own seed.
using RobustnessAttack = AttackSpec;

struct RobustnessCell {
  std::vector<double> rates;        // success rate per repeat over the common samples
  std::vector<int64_t> successes;   // per repeat
  double mean = 0, std = 0;         // of rates (std: the sample standard deviation, n - 1; 0 for one repeat)
  double mean_l2 = 0, mean_linf = 0, mean_queries = 0;  // per success, over every repeat
};

struct RobustnessTable {
  std::vector<std::string> models, attacks;
  std::vector<int64_t> common;                   // the samples every model classifies correctly (indices)
  std::vector<double> clean_accuracy;            // per model, over every input given
  std::vector<std::vector<RobustnessCell>> cell; // [model][attack]
  std::vector<double> r;                         // R(m) per model
  std::vector<uint64_t> seeds;                   // per repeat
  struct Pair {                                  // model 0 against model k
    int k = 0;
    WilcoxonResult wilcoxon;
    double a12 = 0.5;
  };
  std::vector<Pair> pairs;                       // empty where fewer than 2 paired values
};

// x, labels: the candidate inputs (in the models' input space: the models must share it). At most
// `max_samples` of the common samples (0: all), the first in order.
RobustnessTable run_robustness(const std::vector<RobustnessModel>& models, const std::vector<RobustnessAttack>& attacks,
                               const Tensor& x, const std::vector<int32_t>& labels, int repeats, uint64_t seed,
                               int64_t max_samples = 0);

}  // namespace attacks
}  // namespace driftlab
