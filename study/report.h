// The study report's tables (study/run.h's folder in, plain rows out): for each step, its cells
// grouped by everything that varies across the step except seeds (the repeats), each measure as
// mean, sample standard deviation and count over the group. What varies is read from the
// manifest: the cell's own parameters and those of the cells it needs, named step.key (an attack
// on a trained model shows train.policy, train.batch, ...). Cells not done are counted apart.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace driftlab {
namespace study {

struct Stat {
  std::string measure;     // e.g. "test accuracy"
  double mean = 0, sd = 0;  // sd: sample standard deviation (n - 1); 0 when n = 1
  int n = 0;
};

struct ReportRow {
  std::vector<std::string> values;  // one per ReportTable::keys
  std::vector<Stat> stats;          // one per ReportTable::measures (n = 0: no cell has it)
  std::vector<std::string> seeds;   // the repeats' seeds, "1,2,3"
  std::vector<std::string> cells;   // the group's cells with results (hashes, manifest order)
  std::vector<std::string> cell_seeds;  // each of those cells' seed(s)
  std::map<std::string, std::map<std::string, double>> by_seed;  // measure -> seed(s) -> value
};

struct ReportTable {
  std::string step, kind;
  std::vector<std::string> keys;      // what varies across the step (seeds excluded)
  std::vector<std::string> measures;
  std::vector<ReportRow> rows;        // in manifest order of their first cell
  int cells = 0, missing = 0;         // missing: cells without results yet (failed ones not counted)
  std::vector<std::string> failed;    // each failed cell: "<its keys and seed>: <its error.txt>"
};

std::vector<ReportTable> study_tables(const std::string& dir);

// "mean ± sd (n)", "mean (1)", "" (no value); each number to 4 decimals, to 1 from 1,000 up, or to
// 3 significant digits below 0.001 (but 0): what tables.md and the page show.
std::string stat_text(const Stat& s);

// The order seeds are listed in: as numbers where they are ("2" before "10"), a gathered cell's
// "a/b" part by part.
bool seed_less(const std::string& a, const std::string& b);

// The index in t.keys of `key`, or of a downstream step's name for its training's (`train.policy`
// for an attack on trained models); t.keys.size() when the table has neither.
std::size_t training_key(const ReportTable& t, const std::string& key = "policy");

// The papers' layout of a table over models (the robustness and convert_robustness kinds, whose
// measures are "<measure> (<model>)" and "R(<model>)"): per row of the step's table, a row per model
// and a column per measure (R last), each cell that measure's Stat. Empty for other kinds.
struct ModelTable {
  std::string group;                     // the step table's row: "key=value, ..." ("" when none)
  std::vector<std::string> models, columns;
  std::vector<std::vector<Stat>> cells;  // [model][column]; n = 0 where a model lacks the measure
  std::string seeds;
};
std::vector<ModelTable> model_tables(const ReportTable& t);

// The papers' layout of a training table (S1's Tables 2 and 3): per measure (test accuracy, seconds
// per epoch), a row per combination of the keys other than the batch size and a column per batch
// size ("B-32"). Empty when the table has no batch key or no other key.
struct BatchTable {
  std::string step, measure;
  std::vector<std::string> row_keys;              // the keys naming a row
  std::vector<std::vector<std::string>> rows;     // their values
  std::vector<std::string> batches;               // column heads' values, in first-seen order
  std::vector<std::vector<Stat>> cells;           // [row][batch]
};
std::vector<BatchTable> batch_tables(const ReportTable& t);
std::string batch_tables_markdown(const std::vector<ReportTable>& tables);

// Two values of one key (a preset against another) on every measure of every step where that key
// varies, with the other keys equal (when two or more values are plain presets, without a knob of
// their own, only those are compared): the means, whether the gap is within the seeds' spread
// (|mean a - mean b| <= sqrt(sd_a^2 + sd_b^2)), and paired by seed the Wilcoxon signed-rank p and
// the A12 effect size (attacks/stats.h: SciPy's rules, as S2 used them).
struct Comparison {
  std::string step, key, a, b, within, measure;  // within: the other keys' values
  double mean_a = 0, mean_b = 0, sd_a = 0, sd_b = 0;
  int pairs = 0;
  double p = 1, a12 = 0.5;  // meaningful when pairs >= 2
  bool within_spread = true;
};
std::vector<Comparison> study_comparisons(const std::vector<ReportTable>& tables, const std::string& key = "policy");
// S2's comparison: in each attack step whose examples other models judge, the attacked (regular)
// model's success over the inputs every model gets right against each judge's (quantized) over the
// same inputs, paired by seed (Wilcoxon signed-rank, A12). key = "judged by", a = the attacked
// model, b = the judge's step.
std::vector<Comparison> judge_comparisons(const std::vector<ReportTable>& tables);
std::string comparisons_markdown(const std::vector<Comparison>& cs);

// Markdown (one table per step, "mean +- sd (n)"), CSV (one row per group and measure: step,
// keys as key=value, measure, mean, sd, n, seeds) and JSON.
std::string tables_markdown(const std::vector<ReportTable>& t);
std::string tables_csv(const std::vector<ReportTable>& t);
std::string tables_json(const std::vector<ReportTable>& t);

}  // namespace study
}  // namespace driftlab
