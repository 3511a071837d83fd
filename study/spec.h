// A study spec (studies/*.yaml; docs/STUDIES.md has the format): named steps, each one kind of
// measurement (train, evaluate, quantize, attack, ...) over a grid of values. A step that
// `needs` another runs once per cell of it (and of its own grid): the steps form a small DAG and
// the cells a larger one. Reading checks everything it can before any work: the YAML, every key
// against its kind's table (study/kinds.h), every value's type and range, policy strings
// (Policy::parse), model and dataset names, the steps' dependencies (an unknown step, a cycle,
// a kind that cannot take that input); each error names the file and the line.
//
// plan() expands the steps into cells. A cell's hash is fnv1a64 over its canonical text: its
// kind, every parameter of the kind resolved (defaults, the spec's `defaults`, the step's `set`,
// its grid values), the hashes of the cells it needs, and the build that computes it (the
// commit): a cell changes, so do its hash and its dependants' hashes, and nothing else's.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace driftlab {
namespace study {

// A value as the spec wrote it, with its line (1-based).
struct SpecValue {
  std::string text;
  int line = 0;
};

struct StepSpec {
  std::string name;  // its key under `steps:`
  std::string kind;  // `do:`
  int line = 0;      // the line of its name
  std::vector<SpecValue> needs;                                       // steps whose cells it takes
  std::vector<std::pair<std::string, std::vector<SpecValue>>> grid;   // key -> values, as written
  std::map<std::string, SpecValue> set;                               // fixed values
  // gather: [policy]: one cell takes all the cells of its needs that differ only in these
  // keys (a robustness table over the presets' models), instead of one cell per input.
  std::vector<SpecValue> gather;
};

struct Spec {
  std::string file;   // for messages
  std::string name;   // `study:`
  std::string title;
  std::vector<std::string> adaptations;  // how the study departs from the paper (shown in reports)
  std::map<std::string, SpecValue> defaults;  // every step takes those its kind has
  std::vector<StepSpec> steps;  // dependencies first (the written order where it is free)
};

// Throws "FILE:LINE: ..." on the first problem. `file` names the text in messages.
Spec parse_spec(const std::string& text, const std::string& file);
Spec read_spec(const std::string& path);  // "FILE: cannot read" when unreadable

struct Cell {
  std::string step, kind;
  std::map<std::string, std::string> params;  // every parameter of the kind, resolved
  std::vector<std::size_t> inputs;            // the cells it needs (indices into Plan::cells), in `needs` order
  std::string canonical;                      // what the hash covers
  std::string hash;                           // 16 lower-case hex digits
};

struct Plan {
  Spec spec;
  std::string build;         // the build the hashes include (the commit; "+dirty" when the tree was)
  std::vector<Cell> cells;   // inputs before the cells that need them
};

// The cells of every step: the product of its grid, times the combinations of its inputs: each
// cell of its first need joined with each cell of every further need that agrees with it on the
// grid values they share (needs: [train, int8] pairs every trained model with each int8 model
// made from it). A combination with no agreeing cell is an input missing: an error naming the
// line of that need. A step with `gather: [keys]` instead takes, per cell, every cell of its
// needs that differs only in those keys, in plan order; the gathered keys are then no longer
// coordinates of its cells.
// More than max_cells cells is refused (a grid typed one level too deep multiplies the study).
Plan plan(const Spec& spec, const std::string& build, std::size_t max_cells = 1000000);

// The manifest: one JSON object per line and cell (cell_json): hash, step, kind, params, inputs
// (hashes). study/run.h read_plan reads it back.
std::string manifest_jsonl(const Plan& p);
nlohmann::ordered_json cell_json(const Plan& p, const Cell& c);

// A cell's labels: its own parameters by key, and those of the cells it needs (theirs first, all
// the way up) as step.key: what tells cells apart in the report's groups, the progress lines and
// the names of a robustness table's models.
std::map<std::string, std::string> cell_labels(const Plan& p, const Cell& c);

}  // namespace study
}  // namespace driftlab
