// Explaining a gap between two presets in a study: which knob moves it.
//
// explain_spec writes a spec (YAML) for one train step of a study and the steps downstream of it
// that take one model per cell (attacks, quantizations, conversions, as written): the step's grid and settings,
// with its policies replaced by the two presets and, for every knob where they differ and that can
// act on that training (study/explain.cpp relevant_knobs: no int8 knobs, no recurrent knobs for a
// model without recurrent layers, no BatchNorm knobs without BatchNorm, no Adam/RMSprop/plateau
// knobs under another optimiser or schedule, no CUDA knobs on the CPU, no NaN rules), the first
// preset with that knob set to the second's value and the second with it set to the first's.
// Run into the same folder, the cells the study already has are found done.
//
// explain_shares reads such cells back from a report's tables: for a measure, the gap m(B) - m(A)
// between two presets, and for each one-knob variant the share of that gap it moves: from A's side
// (m(A+k) - m(A)) / gap, from B's side (m(B) - m(B+k)) / gap; and whether the move is beyond the
// seeds' spread. explain_markdown turns them into one sentence per gap and a table.
#pragma once
#include <string>
#include <vector>

#include "study/report.h"
#include "study/spec.h"

namespace driftlab {
namespace study {

// The knobs of `from` vs `to` (policy strings) that can act on training `model` with these
// train parameters (the train kind's: optimizer, schedule, weight_decay, device).
std::vector<std::string> relevant_knobs(const std::string& model, const std::string& from, const std::string& to,
                                        const std::map<std::string, std::string>& train_params);

// The YAML of the explanation spec for step `step` of `spec` (a train step); `knobs` empty: the
// relevant ones. Throws naming the step when it is not a train step or has several models.
std::string explain_spec(const Spec& spec, const std::string& step, const std::string& from, const std::string& to,
                         const std::vector<std::string>& knobs = {}, const std::string& model = "");
// (`model`: of a step that trains several, the one to explain; its grid then holds that one.)

// The gaps of a study's report worth explaining: in a train table, or a table of a step downstream
// of a training (keyed by its policy), two plain presets whose means differ beyond the seeds'
// spread on a measure explained for that kind. One entry per (train step, model, a, b).
struct GapToExplain {
  std::string step, model, a, b;
};
std::vector<GapToExplain> gaps_to_explain(const Plan& plan, const std::vector<ReportTable>& tables);

struct KnobShare {
  std::string knob, side;  // side: the preset the knob was flipped on
  double mean = 0, sd = 0, share = 0;
  int n = 0;
  bool beyond_spread = false;  // |m(variant) - m(side)| > sqrt(sd_side^2 + sd_variant^2)
};
struct GapExplanation {
  std::string step, within, measure, a, b;
  double mean_a = 0, mean_b = 0, sd_a = 0, sd_b = 0;
  bool gap_beyond_spread = false;
  std::vector<KnobShare> shares;  // every one-knob variant of a or b in the table
};
// Every gap of every table on the measures explained for its kind (explained_measures), where the
// table's key is the training's policy (`policy`, or `STEP.policy` in a step downstream of it).
std::vector<GapExplanation> explain_shares(const std::vector<ReportTable>& tables);
std::vector<GapExplanation> explain_shares(const ReportTable& table, const std::string& measure);
// train: test accuracy and the final training loss (where a loss curve ends); evaluate: test
// accuracy; quantize: int8 test accuracy; attack: success rate (over all, and
// over the correctly classified); convert: misclassification.
std::vector<std::string> explained_measures(const std::string& kind);
std::string explain_markdown(const std::vector<GapExplanation>& e);

}  // namespace study
}  // namespace driftlab
