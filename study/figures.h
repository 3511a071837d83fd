// The study report's figures and page. For each train step: validation accuracy and training loss
// per epoch, one line per value of the key that tells the groups apart (the policy when it varies),
// one panel per combination of the other keys, the mean over seeds with a band of one standard
// deviation; matplotlib's Agg backend, PNG and SVG, the legend below the panels (never over the
// data), the title naming the study, the step and its fixed settings (model, data, epochs, batch,
// optimiser), axes with their units. index.html holds every table and figure with the study's
// adaptations and stamp (build, spec), and a check, on load, that every figure decoded.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "study/explain.h"
#include "study/report.h"

namespace driftlab {
namespace study {

// What the figure script draws: per train step its keys, fixed settings and groups, each group
// with its seeds' per-epoch val_acc, val_loss, train_loss and train_acc.
nlohmann::ordered_json study_curves(const std::string& dir, const std::vector<ReportTable>& tables);

// OUT/curves.json, OUT/bars.json (the tables), OUT/figures.py, then the script:
// OUT/<step>_val_acc.{png,svg} and OUT/<step>_train_loss.{png,svg} for train steps, and
// OUT/<step>_bars.{png,svg}: one measure per step as bars per policy and group, whiskers +-1 sd
// (train: seconds per epoch; quantize: int8 accuracy; evaluate: accuracy; attack: success rate). Returns the SVG names (relative to OUT); throws naming the
// command and what it said when Python or matplotlib fails (DRIFTLAB_PYTHON overrides the
// interpreter, default /usr/bin/python3).
// With `explained` (study/explain.h): OUT/explained.json and per gap OUT/<step>_attribution_<i>:
// the share of the gap each knob moves from either side. Train steps with two plain presets and
// two seeds or more also get OUT/<step>_divergence: their validation accuracy's gap per epoch
// beside its seeds' spread.
std::vector<std::string> write_study_figures(const std::string& dir, const std::vector<ReportTable>& tables,
                                             const std::string& out, const std::vector<GapExplanation>& explained = {});

// The page: title, adaptations, stamp, each step's table and figures (relative links).
std::string study_html(const std::string& dir, const std::vector<ReportTable>& tables,
                       const std::vector<std::string>& figures, const std::vector<Comparison>& comparisons = {},
                       const std::string& explanations_markdown = "");

}  // namespace study
}  // namespace driftlab
