// The library face (driftlab/model.h says what the face is): attacks on saved models.
//
// This one: the attack settings (what `driftlab attack`'s flags set), an attack library's
// convention filling the settings the caller did not give (attacks/convention.h), the runner a
// model is attacked on (the straight-through runner for an int8 model attacked white-box), and
// one attack on a saved model with everything it measures: its examples, the 8-bit round trip,
// the summaries and the transfer to judging models, as plain values. report/attack.h writes the
// files; the command prints.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attacks/attack.h"
#include "attacks/images.h"
#include "engine/data/datasets.h"
#include "engine/data/transform.h"
#include "engine/train/runner.h"
#include "models/model_file.h"

namespace driftlab {

// The settings of an attack, in the words of the command's flags (the messages name the flags).
struct AttackSettings {
  std::string attack = "fgsm";  // fgsm | bim | pgd | boundary | single-pixel
  std::string eps_units = "absolute", labels_from = "true";
  std::string convention = "driftlab", eps_schedule = "single", step_units = "eps", success = "label";
  std::string eight_bit = "off";  // off | round | truncate
  std::string boundary_rules;     // empty: the convention's
  std::string projection = "clip-delta";
  double eps = 0.1, step = 0.01, lo = NAN, hi = NAN, max_epsilon = 1.0;  // lo, hi NaN: [0, 1] normalised
  int steps = 10, iterations = 5000, max_directions = 25, epsilons = 1000;
  int64_t max_pixels = 1000;
  std::string restart_select = "per-sample";  // per-sample | per-run (pgd with --restarts)
  int restarts = 1;
  bool random_start = false, early_stop = false, transposed_index = false;
  uint64_t seed = 1;
  int64_t batch = 128;
  // The settings the caller gave, as their flags ("--eps", "--eps-units", ...): a convention
  // fills every other one.
  std::set<std::string> given;
};

// The convention's value for every setting not given.
void apply_convention(AttackSettings& s, attacks::AttackKind kind, bool decision);
// The Boundary attack's spec: the rules of s.boundary_rules, else of the convention (driftlab:
// Foolbox 2's), with that library's defaults for every setting not given.
attacks::BoundarySpec boundary_spec(const AttackSettings& s, double lo, double hi);
// The white-box spec of the settings, after apply_convention filled what was not given; its lo
// and hi are the caller's to set.
attacks::GradientAttackSpec gradient_spec(AttackSettings& s, attacks::AttackKind kind, bool decision);
// The valid input range in a model's input space: the images' [0, 1] through its normalisation
// (the same float ops as apply_norm), unless s.lo / s.hi say otherwise.
std::pair<double, double> attack_bounds(const AttackSettings& s, const InputNorm& norm);

// The runner a model is attacked on. An int8 model attacked white-box: the straight-through
// runner (quant/ste.h: the gradient of its fake-quantized float graph, the int8 model's own
// decisions), which has no device layers: on cuda it is refused with `refusal`, the caller's
// message saying what to do instead. Anything else: open_runner(model, device). The model must
// outlive the result.
struct AttackRunner {
  std::unique_ptr<Model> fake;     // the fake-quantized graph (straight-through runner only)
  std::unique_ptr<Runner> runner;  // declared after `fake`, so destroyed before it
  Runner& operator*() const { return *runner; }
};
AttackRunner open_attack_runner(LoadedModel& m, bool white_box, Device device, const std::string& refusal);

struct AttackRequest {
  std::string weights;              // the model file (.dlm, fp32 or int8)
  AttackSettings settings;
  std::string input, labels;        // attack these (.npy, the model's input shape; N classes) ...
  DataSpec data;                    // ... else the test split of this data
  DatasetLoader* loader = nullptr;  // where the split comes from (null: a loader of the call's own)
  std::vector<std::string> judges;  // model files that judge the examples too (transfer)
  std::string device = "cpu";       // cpu | cuda: where the gradients and decisions are computed
};

// A model that judged the examples (transfer): its predictions and success rates.
struct AttackJudge {
  std::string weights, model;
  bool int8 = false;
  std::vector<int32_t> clean, adv;  // its predictions on the clean and the adversarial inputs
  double clean_accuracy = 0;
  // over the samples every compared model classifies correctly, and over those it does
  int64_t samples_all = 0, successes_all = 0, samples_own = 0, successes_own = 0;
  double rate_all = 0, rate_own = 0;
};

struct AttackOutcome {
  AttackSettings settings;          // as run: the convention's values filled in
  std::string weights, model, policy, inputs, device;  // inputs: the .npy or the dataset's name
  bool int8 = false, decision = false;  // decision: a decision-based attack
  Device ran_on = Device::cpu;      // `device` parsed
  attacks::AttackSpec spec;         // gradient (bounds included) always; boundary / pixel as run
  attacks::SuccessRule rule = attacks::SuccessRule::differs_from_label;
  attacks::EightBit eight_bit = attacks::EightBit::off;
  InputNorm norm;
  std::vector<int32_t> labels;
  attacks::AttackResult result;     // judged as 8-bit images where eight_bit is on
  Tensor adversarial;               // the examples in the input space (the model's normalisation undone)
  int64_t successes_before_8bit = 0;
  double clean_accuracy = 0;
  attacks::AttackSummary over_all, over_correct;
  attacks::AttackSummary over_correct_by_all;  // with judges: over the samples every model gets right
  // Foolbox 2's eps schedules (white-box): the mean eps found over the correctly classified successes
  double mean_eps_found = 0;
  std::vector<AttackJudge> judges;
  bool eps_schedule() const;        // a white-box attack under foolbox2-sweep or foolbox2-search
};

// One attack on a saved model: its inputs (the .npy given, or the test split), the attack on the
// runner above, the examples judged again as 8-bit images where asked, by the judges, and summarised.
AttackOutcome run_attack(const AttackRequest& request);

}  // namespace driftlab
