// The study's results as one SQLite database (DIR/results.sqlite), made from the cells' files by
// collect_results: rebuilt whole each time into a temporary file and renamed over the old one, so
// collecting is idempotent and never leaves half a database; the files stay the truth (SQLite on
// a cluster's shared filesystem is unsafe to write from many nodes: only the process that
// collects writes it). Tables:
//
//   cells(hash PRIMARY KEY, step, kind, state, error, params, inputs)  state: done|failed|partial|missing;
//                                                                     params, inputs: JSON text
//   params(hash, key, value)          one row per parameter of each cell (text, as resolved)
//   measures(hash, path, value)       every number of each done cell's results.json, by JSON
//                                     pointer ("/test/accuracy", "/epochs/3/val_loss")
//   timings(hash, path, value)        the same for timings.json
//   inputs(hash, input, position)     the cells each cell needs
//
// e.g. SELECT p.value AS policy, avg(m.value) FROM measures m JOIN params p USING (hash)
//      WHERE m.path = '/test/accuracy' AND p.key = 'policy' GROUP BY p.value;
#pragma once
#include <string>
#include <vector>

namespace driftlab {
namespace study {

// Returns the number of cells written.
int collect_results(const std::string& dir);

// Runs one SQL statement on DIR/results.sqlite (read-only) and returns the header and rows.
struct QueryResult {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;  // NULL as ""
};
QueryResult query_results(const std::string& dir, const std::string& sql);

}  // namespace study
}  // namespace driftlab
