// A study's report folder (`driftlab study report DIR`, driftlab.study_report in Python): every
// step's table as Markdown, CSV and JSON, the comparisons between presets (mean +- sd over seeds,
// Wilcoxon and A12), the explanations of the gaps, the figures (SVG and PNG) and index.html that
// holds them. With `explain`, each gap beyond the seeds' spread between two plain presets first
// gets its explanation study (explain_spec: one knob flipped at a time on that step and model) run
// into DIR/explain/<step>-<model>-<a>-<b>/, taking the study's own cells from DIR, and reported
// there; its sentences join the study's report.
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace driftlab {
namespace study {

struct ReportOptions {
  std::string out;       // the report folder; empty: DIR/report
  bool figures = true;   // the SVG/PNG figures (matplotlib); false: tables and the page only
  bool explain = false;  // run the explanation studies (above)
  int jobs = 1;          // their cells at once
  // Asked by the explanation studies between cells and steps (study::StudyRunOptions::stop): true
  // ends the report with an error naming the folder to run again.
  std::function<bool()> stop;
  // A line per explanation study started ("explain: STEP MODEL, A against B: N cells in DIR").
  std::function<void(const std::string&)> note;
};

struct ReportFiles {
  std::string out;                   // the folder
  std::string markdown;              // tables.md's text
  std::vector<std::string> figures;  // the SVG figures written, relative to `out` (each with a .png beside it)
  // The tables, the figures (SVG and PNG) and index.html (last), as paths; beside them the figure
  // script's inputs (curves.json, bars.json, figures.py; study/figures.h).
  std::vector<std::string> files;
};

ReportFiles write_report(const std::string& dir, const ReportOptions& options = {});

}  // namespace study
}  // namespace driftlab
