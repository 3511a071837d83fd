// The files of a robustness table (driftlab/robustness.h): OUT/robustness.json (everything: the
// models, the attacks' settings as run, the common samples, the seeds, every cell, R(m), the
// Wilcoxon/A12 pairs, the build's commit), OUT/robustness.csv (one row per model x attack x
// repeat), OUT/table.md (the Markdown table, also what the command prints) and the chart
// (OUT/chart.py, run by Python 3 with matplotlib: OUT/chart.png and OUT/chart.svg).
#pragma once
#include <string>

#include "driftlab/robustness.h"

namespace driftlab {
namespace report {

// The Markdown table: a row per model (clean accuracy, each attack's mean success rate, with its
// standard deviation over several repeats, R(m)), then a line per Wilcoxon/A12 pair.
std::string robustness_markdown(const RobustnessOutcome& o);
// Writes robustness.json, robustness.csv and table.md into `out` (created where missing).
void write_robustness(const std::string& out, const RobustnessOutcome& o);
// Writes out/chart.py and runs it on out/robustness.json (write_robustness first) with
// $DRIFTLAB_PYTHON, else /usr/bin/python3: out/chart.png, out/chart.svg. Throws with what Python
// said where it fails (matplotlib missing, ...).
void write_robustness_chart(const std::string& out);

}  // namespace report
}  // namespace driftlab
