#include "study/spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "engine/random.h"
#include "study/kinds.h"

namespace driftlab {
namespace study {

namespace {

int line_of(const YAML::Node& n) { return n.Mark().line + 1; }

struct Reader {
  const std::string& file;

  [[noreturn]] void error(int line, const std::string& what) const {
    fail(file, ":", line, ": ", what);
  }
  // A map's entries in written order; a duplicate key is an error (YAML forbids them; yaml-cpp keeps both).
  struct Entry {
    std::string key;
    YAML::Node value;
    int line;  // the key's
  };
  std::vector<Entry> entries(const YAML::Node& map, const std::string& what) const {
    if (!map.IsMap()) error(line_of(map), what + " must be a map of key: value");
    std::vector<Entry> out;
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (!it->first.IsScalar()) error(line_of(it->first), what + ": a key must be a plain word");
      const std::string key = it->first.Scalar();
      if (!seen.insert(key).second) error(line_of(it->first), what + ": '" + key + "' given twice");
      out.push_back({key, it->second, line_of(it->first)});
    }
    return out;
  }
  SpecValue scalar(const YAML::Node& n, const std::string& what) const {
    if (!n.IsScalar()) error(line_of(n), what + " must be a single value");
    return {n.Scalar(), line_of(n)};
  }
  // A scalar or a list of scalars.
  std::vector<SpecValue> values(const YAML::Node& n, const std::string& what) const {
    std::vector<SpecValue> out;
    if (n.IsSequence()) {
      for (const YAML::Node& v : n) out.push_back(scalar(v, what + "'s items"));
      if (out.empty()) error(line_of(n), what + " is an empty list");
    } else {
      out.push_back(scalar(n, what));
    }
    return out;
  }
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string param_keys(const KindDef& k) {
  std::vector<std::string> keys;
  for (const ParamDef& p : k.params) keys.push_back(p.key);
  return join(keys);
}

StepSpec read_step(const Reader& r, const std::string& name, const YAML::Node& node, int name_line) {
  StepSpec s;
  s.name = name;
  s.line = name_line;
  const std::string what = "step '" + name + "'";
  bool have_do = false;
  for (const auto& [key, v, key_line] : r.entries(node, what)) {
    if (key == "do") {
      s.kind = r.scalar(v, what + ": do").text;
      have_do = true;
      if (!find_kind(s.kind)) {
        std::vector<std::string> kinds;
        for (const KindDef& k : kind_table()) kinds.push_back(k.name);
        r.error(line_of(v), what + ": unknown kind '" + s.kind + "' (known: " + join(kinds) + ")");
      }
    } else if (key == "needs") {
      s.needs = r.values(v, what + ": needs");
    } else if (key == "gather") {
      s.gather = r.values(v, what + ": gather");
    } else if (key == "grid") {
      for (const auto& e : r.entries(v, what + ": grid")) s.grid.emplace_back(e.key, r.values(e.value, what + ": " + e.key));
    } else if (key == "set") {
      for (const auto& e : r.entries(v, what + ": set")) s.set[e.key] = r.scalar(e.value, what + ": " + e.key);
    } else {
      r.error(key_line, what + ": unknown key '" + key + "' (a step takes: do, needs, gather, grid, set)");
    }
  }
  if (!have_do) r.error(name_line, what + ": no 'do:' (the kind of measurement)");
  const KindDef& kind = *find_kind(s.kind);
  // Every key of the grid and the set is the kind's, given once, with a value of its type.
  auto check_param = [&](const std::string& key, const SpecValue& v) {
    const ParamDef* def = find_param(kind, key);
    if (!def) r.error(v.line, what + " (" + s.kind + "): unknown parameter '" + key + "' (" + s.kind +
                                      " takes: " + param_keys(kind) + ")");
    try {
      check_value(*def, v.text);
    } catch (const Error& e) {
      r.error(v.line, what + ": " + e.what());
    }
  };
  for (const auto& [key, vals] : s.grid) {
    if (s.set.count(key)) r.error(s.set.at(key).line, what + ": '" + key + "' is in both grid and set");
    std::set<std::string> distinct;
    for (const SpecValue& v : vals) {
      check_param(key, v);
      if (!distinct.insert(check_value(*find_param(kind, key), v.text)).second)
        r.error(v.line, what + ": grid '" + key + "' lists '" + v.text + "' twice");
    }
  }
  for (const auto& [key, v] : s.set) check_param(key, v);
  for (std::size_t i = 0; !s.gather.empty() && i < s.needs.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (s.needs[i].text == s.needs[j].text)
        r.error(s.needs[i].line, what + ": needs '" + s.needs[i].text + "' twice (gather takes each cell once)");
  if (!s.gather.empty() && !kind.gathers)
    r.error(s.gather.front().line, what + " (" + s.kind + "): this kind takes one model per cell (gather is for "
                                       "kinds that compare models: robustness, convert_robustness)");
  if (s.gather.empty() && kind.gathers)
    r.error(name_line, what + " (" + s.kind + "): a " + s.kind + " cell compares models: give `gather: [KEY]`, the "
                           "key whose values are the models (e.g. policy)");
  const int n = static_cast<int>(s.needs.size());
  if (n < kind.min_needs || n > kind.max_needs) {
    std::ostringstream os;
    os << what << " (" << s.kind << ") needs " << kind.min_needs;
    if (kind.max_needs != kind.min_needs) os << " to " << kind.max_needs;
    os << " step(s) of kind " << (kind.inputs.empty() ? "none" : join(kind.inputs)) << ", got " << n;
    r.error(n ? s.needs.front().line : name_line, os.str());
  }
  return s;
}

// Dependencies first; the written order where the dependencies leave it free. A cycle or an
// unknown step is an error naming the line of the `needs` that makes it.
std::vector<StepSpec> order_steps(const Reader& r, std::vector<StepSpec> steps) {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < steps.size(); ++i) index[steps[i].name] = i;
  std::vector<std::string> names;
  for (const StepSpec& s : steps) names.push_back(s.name);
  for (const StepSpec& s : steps)
    for (const SpecValue& need : s.needs)
      if (!index.count(need.text))
        r.error(need.line, "step '" + s.name + "' needs '" + need.text + "': no such step (steps: " + join(names) + ")");
  std::vector<int> state(steps.size(), 0);  // 0 new, 1 on the path, 2 done
  std::vector<StepSpec> out;
  std::vector<std::string> path;
  std::function<void(std::size_t)> visit = [&](std::size_t i) {
    if (state[i] == 2) return;
    path.push_back(steps[i].name);
    state[i] = 1;
    for (const SpecValue& need : steps[i].needs) {
      const std::size_t j = index.at(need.text);
      if (state[j] == 1) {
        std::string cycle;
        for (auto p = std::find(path.begin(), path.end(), need.text); p != path.end(); ++p) cycle += *p + " -> ";
        r.error(need.line, "steps depend on each other: " + cycle + need.text);
      }
      visit(j);
    }
    state[i] = 2;
    path.pop_back();
    out.push_back(steps[i]);
  };
  for (std::size_t i = 0; i < steps.size(); ++i) visit(i);
  // Then what each kind can take (after the cycles, so that a cycle is named as one).
  for (const StepSpec& s : steps) {
    const KindDef& kind = *find_kind(s.kind);
    for (std::size_t n = 0; n < s.needs.size(); ++n) {
      const SpecValue& need = s.needs[n];
      const std::string& input_kind = steps[index.at(need.text)].kind;
      const std::vector<std::string>& takes = n > 0 && !kind.further.empty() ? kind.further : kind.inputs;
      if (std::find(takes.begin(), takes.end(), input_kind) == takes.end())
        r.error(need.line, "step '" + s.name + "' (" + s.kind + ") cannot take step '" + need.text + "' (" + input_kind +
                               ") as its " + (n == 0 ? "first" : "further") + " need: it takes " + join(takes) +
                               (kind.further.empty() ? "" : n == 0 ? " first" : " after the first"));
    }
  }
  return out;
}

}  // namespace

Spec parse_spec(const std::string& text, const std::string& file) {
  const Reader r{file};
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    r.error(e.mark.line + 1, "not valid YAML: " + e.msg);
  }
  if (!root.IsMap()) r.error(root.IsNull() ? 1 : line_of(root), "a study spec is a map (study, title, adaptations, defaults, steps)");
  Spec spec;
  spec.file = file;
  bool have_steps = false;
  std::vector<StepSpec> steps;
  for (const auto& [key, v, key_line] : r.entries(root, "the spec")) {
    if (key == "study") {
      spec.name = r.scalar(v, "study").text;
    } else if (key == "title") {
      spec.title = r.scalar(v, "title").text;
    } else if (key == "adaptations") {
      for (const SpecValue& a : r.values(v, "adaptations")) spec.adaptations.push_back(a.text);
    } else if (key == "defaults") {
      for (const auto& e : r.entries(v, "defaults")) {
        const std::string& dk = e.key;
        const SpecValue value = r.scalar(e.value, "defaults: " + dk);
        bool known = false;
        for (const KindDef& k : kind_table()) {
          const ParamDef* def = find_param(k, dk);
          if (!def) continue;
          known = true;
          try {
            check_value(*def, value.text);
          } catch (const Error& e) {
            r.error(value.line, std::string("defaults: ") + e.what());
          }
        }
        if (!known) r.error(value.line, "defaults: '" + dk + "' is no parameter of any kind (docs/STUDIES.md lists them)");
        spec.defaults[dk] = value;
      }
    } else if (key == "steps") {
      have_steps = true;
      for (const auto& e : r.entries(v, "steps")) steps.push_back(read_step(r, e.key, e.value, e.line));
      if (steps.empty()) r.error(line_of(v), "steps: no step");
    } else {
      r.error(key_line, "unknown key '" + key + "' (a spec takes: study, title, adaptations, defaults, steps)");
    }
  }
  if (spec.name.empty()) r.error(1, "no 'study:' (the study's name)");
  if (!have_steps) r.error(1, "no 'steps:'");
  spec.steps = order_steps(r, std::move(steps));
  return spec;
}

Spec read_spec(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(f.good(), path, ": cannot read the study spec");
  std::ostringstream os;
  os << f.rdbuf();
  check(!f.bad(), path, ": cannot read the study spec");
  return parse_spec(os.str(), path);
}

namespace {

std::string hex64(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// A cell's coordinates: the grid values that made it and those of every cell it needs.
using Coords = std::map<std::string, std::string>;

}  // namespace

Plan plan(const Spec& spec, const std::string& build, std::size_t max_cells) {
  const Reader r{spec.file};
  Plan p;
  p.spec = spec;
  p.build = build;
  std::map<std::string, std::vector<std::size_t>> cells_of;  // step -> its cells
  std::map<std::string, std::string> step_of_hash;
  std::vector<Coords> coords;
  for (const StepSpec& step : spec.steps) {
    const KindDef& kind = *find_kind(step.kind);
    // The grid's combinations, the last key fastest.
    std::vector<Coords> combos{{}};
    for (const auto& [key, vals] : step.grid) {
      std::vector<Coords> next;
      for (const Coords& c : combos)
        for (const SpecValue& v : vals) {
          Coords d = c;
          d[key] = check_value(*find_param(kind, key), v.text);
          next.push_back(d);
        }
      combos = next;
    }
    // The combinations of its inputs: every cell of the first need, joined with each cell of every
    // further need that agrees with it on the coordinates they share (a trained model and the int8
    // models made from it). A combination that finds no such cell is an input missing: an error.
    struct Inputs {
      std::vector<std::size_t> cells;
      Coords at;
    };
    std::vector<Inputs> joins{{}};
    if (!step.gather.empty()) {
      // Group the needs' cells by their coordinates without the gathered keys (the cells of several
      // needs in one group when those agree: conversions made by different steps in one table).
      std::set<std::string> gathered;
      for (const SpecValue& g : step.gather) gathered.insert(g.text);
      std::map<Coords, std::size_t> group_of;
      joins.clear();
      for (const SpecValue& need : step.needs)
        for (std::size_t cand : cells_of.at(need.text)) {
          Coords rest;
          bool has_key = false;
          for (const auto& [k, v] : coords[cand]) {
            if (gathered.count(k)) has_key = true;
            else rest[k] = v;
          }
          if (!has_key && step.needs.size() == 1)
            r.error(step.gather.front().line, "step '" + step.name + "': the cells of '" + need.text +
                                                  "' have no grid key among those gathered");
          auto it = group_of.find(rest);
          if (it == group_of.end()) {
            it = group_of.emplace(rest, joins.size()).first;
            joins.push_back({{}, rest});
          }
          joins[it->second].cells.push_back(cand);
        }
    }
    for (std::size_t n = 0; step.gather.empty() && n < step.needs.size(); ++n) {
      std::vector<Inputs> next;
      for (const Inputs& partial : joins) {
        int found = 0;
        for (std::size_t cand : cells_of.at(step.needs[n].text)) {
          bool agree = true;
          for (const auto& [k, v] : coords[cand]) {
            auto it = partial.at.find(k);
            if (it != partial.at.end() && it->second != v) agree = false;
          }
          if (!agree) continue;
          ++found;
          if (next.size() >= max_cells)
            r.error(step.needs[n].line, "step '" + step.name + "': its inputs combine into more than the " +
                                            std::to_string(max_cells) + " cells a study may have");
          Inputs e = partial;
          e.cells.push_back(cand);
          for (const auto& [k, v] : coords[cand]) e.at.emplace(k, v);
          next.push_back(std::move(e));
        }
        if (found == 0) {
          std::string where;
          for (const auto& [k, v] : partial.at) where += (where.empty() ? "" : ", ") + k + "=" + v;
          r.error(step.needs[n].line, "step '" + step.name + "': no cell of '" + step.needs[n].text +
                                          "' agrees with its input (" + where + "): that input is missing");
        }
      }
      joins = std::move(next);
    }
    if (joins.size() * combos.size() > max_cells - std::min(max_cells, p.cells.size()))
      r.error(step.line, "step '" + step.name + "' makes " + std::to_string(joins.size() * combos.size()) +
                             " cells, more than the " + std::to_string(max_cells) + " a study may have");
    for (const Inputs& in : joins) {
      for (const Coords& own : combos) {
        Cell c;
        c.step = step.name;
        c.kind = step.kind;
        c.inputs = in.cells;
        Coords at = in.at;
        for (const auto& [k, v] : own) at[k] = v;
        for (const ParamDef& def : kind.params) {
          std::string v = def.fallback;
          auto d = spec.defaults.find(def.key);
          if (d != spec.defaults.end()) v = d->second.text;
          auto s = step.set.find(def.key);
          if (s != step.set.end()) v = s->second.text;
          auto g = own.find(def.key);
          if (g != own.end()) v = g->second;
          try {
            c.params[def.key] = check_value(def, v);
          } catch (const Error& e) {
            const int line = s != step.set.end() ? s->second.line
                             : d != spec.defaults.end() ? d->second.line
                                                        : step.line;
            r.error(line, "step '" + step.name + "': " + e.what());
          }
        }
        // A training without a dataset reads its model's own (the same text in the hash as when the
        // spec names it).
        if (c.kind == "train" && c.params.at("dataset").empty()) {
          try {
            c.params["dataset"] = model_dataset(c.params.at("model"));
          } catch (const Error& e) {
            r.error(step.line, "step '" + step.name + "': " + e.what());
          }
        }
        std::ostringstream canon;
        canon << "driftlab study cell v1\nkind " << c.kind << "\n";
        for (const auto& [k, v] : c.params) canon << "param " << k << "=" << v << "\n";
        for (std::size_t in : c.inputs) canon << "input " << p.cells[in].hash << "\n";
        canon << "build " << build << "\n";
        c.canonical = canon.str();
        c.hash = hex64(fnv1a64(c.canonical.data(), c.canonical.size()));
        // The hash leaves the step's name out (the same computation in two studies is one cell):
        // two steps of one study that make the same cell would share its folder.
        auto seen = step_of_hash.emplace(c.hash, step.name);
        if (!seen.second)
          r.error(step.line, "step '" + step.name + "' makes the same cell as step '" + seen.first->second +
                                 "' (the same kind, parameters and inputs: cell " + c.hash + "); one step is enough");
        cells_of[step.name].push_back(p.cells.size());
        coords.push_back(at);
        p.cells.push_back(std::move(c));
      }
    }
  }
  return p;
}

nlohmann::ordered_json cell_json(const Plan& p, const Cell& c) {
  nlohmann::ordered_json j;
  j["hash"] = c.hash;
  j["step"] = c.step;
  j["kind"] = c.kind;
  j["params"] = c.params;
  std::vector<std::string> inputs;
  for (std::size_t in : c.inputs) inputs.push_back(p.cells[in].hash);
  j["inputs"] = inputs;
  return j;
}

std::string manifest_jsonl(const Plan& p) {
  std::string out;
  for (const Cell& c : p.cells) out += cell_json(p, c).dump() + "\n";
  return out;
}

namespace {
void add_labels(const Plan& p, const Cell& c, const std::string& prefix, std::map<std::string, std::string>& out) {
  for (std::size_t in : c.inputs) add_labels(p, p.cells.at(in), p.cells.at(in).step + ".", out);
  for (const auto& [k, v] : c.params) out[prefix + k] = v;
}
}  // namespace

std::map<std::string, std::string> cell_labels(const Plan& p, const Cell& c) {
  std::map<std::string, std::string> out;
  add_labels(p, c, "", out);
  return out;
}

}  // namespace study
}  // namespace driftlab
