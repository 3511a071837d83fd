// The study report's tables (study/run.h's folder in, plain rows out): for each step, its cells
// grouped by everything that varies across the step except seeds (the repeats), each measure as
// mean, sample standard deviation and count over the group. What varies is read from the
// manifest: the cell's own parameters and those of the cells it needs, named step.key (an attack
// on a trained model shows train.policy, train.batch, ...). Cells not done are counted apart.
#pragma once
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
};

struct ReportTable {
  std::string step, kind;
  std::vector<std::string> keys;      // what varies across the step (seeds excluded)
  std::vector<std::string> measures;
  std::vector<ReportRow> rows;        // in manifest order of their first cell
  int cells = 0, missing = 0;         // missing: cells without results yet
};

std::vector<ReportTable> study_tables(const std::string& dir);

// Markdown (one table per step, "mean +- sd (n)"), CSV (one row per group and measure: step,
// keys as key=value, measure, mean, sd, n, seeds) and JSON.
std::string tables_markdown(const std::vector<ReportTable>& t);
std::string tables_csv(const std::vector<ReportTable>& t);
std::string tables_json(const std::vector<ReportTable>& t);

}  // namespace study
}  // namespace driftlab
