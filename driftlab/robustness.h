// The library face (driftlab/model.h says what the face is): robustness tables.
//
// This one: several saved models (fp32, int8, presets) under several attacks, each attack's
// settings those of driftlab/attack.h, over the test inputs every model classifies correctly,
// repeated with seeds seed, seed + 1, ...: the success rates, R(m) and the Wilcoxon/A12 pairs of
// attacks/robustness.h, as plain values. report/robustness.h writes the JSON, the CSV, the
// Markdown table and the chart; the command prints.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "attacks/robustness.h"
#include "driftlab/attack.h"

namespace driftlab {

struct RobustnessRequest {
  std::vector<std::string> models;  // NAME=FILE (.dlm, fp32 or int8); the first is the baseline
  // NAME=SOURCE: NAME's white-box examples are crafted on model SOURCE (transfer); without it an
  // int8 model is attacked on its straight-through gradients
  std::vector<std::string> crafts;
  std::string attacks = "fgsm,boundary";  // comma-separated: fgsm, bim, pgd, boundary, single-pixel
  int repeats = 1;                  // runs per attack, seeds settings.seed, settings.seed + 1, ...
  int64_t samples = 0;              // at most this many of the common inputs (0: all)
  AttackSettings settings;          // every attack's settings (settings.attack is not read)
  DataSpec data;                    // the test split of this data (the first model's data settings)
  DatasetLoader* loader = nullptr;  // where the split comes from (null: a loader of the call's own)
  std::string device = "cpu";       // cpu | cuda
};

struct RobustnessOutcome {
  struct Entry {
    std::string name, file;
    bool int8 = false;
    int craft = -1;      // its white-box examples are crafted on models[craft] (-1: on itself)
    std::string policy;  // the model's Policy string (an int8 model: its scheme's knobs included)
  };
  std::vector<Entry> models;
  std::vector<attacks::AttackSpec> attacks;  // as run: the convention's values filled in
  std::string convention;                    // the settings' convention, as given
  std::string inputs, device;                // the dataset's name; the device as given
  attacks::RobustnessTable table;
};

RobustnessOutcome run_robustness(const RobustnessRequest& request);

}  // namespace driftlab
