// docs/POLICIES.md and the code's knob table must agree: every knob in knob_table() has a
// row in the document, every row names a real knob, and each row's tensorflow / theano /
// torch columns state exactly the values the presets set.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/policy.h"

namespace {

using driftlab::Policy;

struct DocRow {
  std::vector<std::string> cells;  // trimmed cell texts
};

std::string trim(std::string s) {
  while (!s.empty() && (s.front() == ' ')) s.erase(s.begin());
  while (!s.empty() && (s.back() == ' ')) s.pop_back();
  return s;
}

// Rows of the knob tables: lines starting with "| `name` |", keyed by name.
std::map<std::string, DocRow> read_doc_rows() {
  std::ifstream f(std::string(DRIFTLAB_SOURCE_DIR) + "/docs/POLICIES.md");
  EXPECT_TRUE(f.good()) << "docs/POLICIES.md not found";
  std::map<std::string, DocRow> rows;
  std::string line;
  bool in_knob_table = false;
  while (std::getline(f, line)) {
    if (line.rfind("| knob |", 0) == 0) in_knob_table = true;
    if (line.empty()) in_knob_table = false;
    if (!in_knob_table || line.rfind("| `", 0) != 0) continue;
    DocRow r;
    std::stringstream ss(line.substr(1));
    for (std::string cell; std::getline(ss, cell, '|');) r.cells.push_back(trim(cell));
    std::string name = r.cells.at(0);
    name = name.substr(1, name.size() - 2);  // strip the backticks
    EXPECT_EQ(rows.count(name), 0u) << "knob '" << name << "' has two rows";
    rows[name] = r;
  }
  return rows;
}

TEST(PolicyDocs, EveryKnobHasARowAndEveryRowIsAKnob) {
  auto rows = read_doc_rows();
  std::set<std::string> code;
  for (const auto& k : driftlab::knob_table()) {
    code.insert(k.name);
    EXPECT_EQ(rows.count(k.name), 1u) << "knob '" << k.name << "' is in the code but not in docs/POLICIES.md";
  }
  for (const auto& r : rows)
    EXPECT_EQ(code.count(r.first), 1u) << "docs/POLICIES.md has a row for '" << r.first << "', which is no knob";
}

TEST(PolicyDocs, PresetColumnsMatchThePresets) {
  auto rows = read_doc_rows();
  const std::vector<std::pair<int, Policy>> presets = {
      {2, Policy::tensorflow()}, {3, Policy::theano()}, {4, Policy::torch()}};
  for (const auto& k : driftlab::knob_table()) {
    auto it = rows.find(k.name);
    if (it == rows.end()) continue;  // reported by the test above
    for (const auto& [col, p] : presets) {
      std::string cell = it->second.cells.at(static_cast<std::size_t>(col));
      std::string want = p.get(k.name);
      if (cell == "(unused)") continue;  // a value the preset never reads (e.g. ce_clip_eps under torch)
      EXPECT_EQ(cell, "`" + want + "`") << "knob '" << k.name << "', preset " << p.preset;
    }
    // The values column lists every allowed value of enumerated knobs.
    for (const auto& v : k.values)
      EXPECT_NE(it->second.cells.at(1).find("`" + v + "`"), std::string::npos)
          << "knob '" << k.name << "': value '" << v << "' missing from the values column";
  }
}

}  // namespace

namespace {

// fuzz/policy.dict (fuzz_policy's dictionary, written by scripts/fuzz_corpus.py) names every knob
// of the knob table as "knob=" and every value a knob can take, so that it cannot go stale when a
// knob is added (it was written from an old model file's policy string until 2026-11-29, and lacked
// every quant_* knob, adam_form, rmsprop_form and optim_fma).
TEST(PolicyDict, CoversEveryKnobAndValue) {
  std::ifstream f(std::string(DRIFTLAB_SOURCE_DIR) + "/fuzz/policy.dict");
  ASSERT_TRUE(f.good()) << "fuzz/policy.dict not found";
  std::set<std::string> tokens;
  for (std::string line; std::getline(f, line);)
    if (line.size() >= 2 && line.front() == '"' && line.back() == '"') tokens.insert(line.substr(1, line.size() - 2));
  for (const driftlab::KnobInfo& k : driftlab::knob_table()) {
    EXPECT_TRUE(tokens.count(k.name + "=")) << k.name << "= is not in fuzz/policy.dict (run scripts/fuzz_corpus.py)";
    for (const std::string& v : k.values)
      EXPECT_TRUE(tokens.count(v)) << k.name << "'s value " << v << " is not in fuzz/policy.dict";
  }
}

}  // namespace
