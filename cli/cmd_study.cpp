// driftlab study plan / kinds: a study spec's cells and their hashes (study/spec.h), and the kinds
// of step a spec can use with their parameters (study/kinds.h).
#include "cli/commands.h"

#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>

#include "core/error.h"
#include "engine/build_info.h"
#include "study/kinds.h"
#include "study/spec.h"

namespace driftlab {
namespace cli {
namespace {

void study_plan(const std::string& spec_path, const std::string& manifest) {
  const study::Plan p = study::plan(study::read_spec(spec_path), build_commit());
  std::map<std::string, int> per_step;
  for (const study::Cell& c : p.cells) ++per_step[c.step];
  std::cout << "study " << p.spec.name << (p.spec.title.empty() ? "" : ": " + p.spec.title) << "\n"
            << p.cells.size() << " cells in " << p.spec.steps.size() << " steps (build " << p.build << ")\n";
  for (const study::StepSpec& s : p.spec.steps) {
    std::cout << "  " << std::left << std::setw(16) << s.name << std::setw(14) << s.kind << std::right << std::setw(6)
              << per_step[s.name] << " cells";
    for (std::size_t i = 0; i < s.needs.size(); ++i) std::cout << (i ? ", " : "  needs ") << s.needs[i].text;
    std::cout << "\n";
  }
  if (manifest.empty()) return;
  const std::string tmp = manifest + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary);
    check(f.good(), manifest, ": cannot write");
    f << study::manifest_jsonl(p);
    check(f.good(), manifest, ": cannot write");
  }
  check(std::rename(tmp.c_str(), manifest.c_str()) == 0, manifest, ": cannot write");
  std::cout << "manifest: " << manifest << "\n";
}

const char* type_name(study::ParamType t) {
  switch (t) {
    case study::ParamType::text: return "text";
    case study::ParamType::integer: return "integer";
    case study::ParamType::real: return "number";
    case study::ParamType::boolean: return "true|false";
    case study::ParamType::choice: return "one of";
    case study::ParamType::policy: return "policy string";
    case study::ParamType::model: return "model name";
    case study::ParamType::dataset: return "dataset name";
    case study::ParamType::int_list: return "integers, comma-separated";
  }
  return "";
}

void study_kinds() {
  for (const study::KindDef& k : study::kind_table()) {
    std::cout << k.name << ": " << k.what << "\n";
    if (k.max_needs) {
      std::cout << "  needs " << k.min_needs;
      if (k.max_needs != k.min_needs) std::cout << " to " << k.max_needs;
      std::cout << " step(s) of kind";
      for (std::size_t i = 0; i < k.inputs.size(); ++i) std::cout << (i ? " or " : " ") << k.inputs[i];
      std::cout << "\n";
    }
    for (const study::ParamDef& d : k.params) {
      std::cout << "  " << std::left << std::setw(18) << d.key << type_name(d.type);
      for (std::size_t i = 0; i < d.choices.size(); ++i) std::cout << (i ? "|" : " ") << d.choices[i];
      std::cout << "  (default: " << (d.fallback.empty() ? "unset" : d.fallback) << ")\n";
    }
  }
}

}  // namespace

void register_study(CLI::App& app) {
  auto* st = app.add_subcommand("study", "studies: a spec's grid of measurements, its cells and their hashes");
  st->require_subcommand(1);
  auto* pl = st->add_subcommand("plan", "read a study spec, check it, and list its cells (with --manifest: one JSON line per cell)");
  auto spec = std::make_shared<std::string>(), manifest = std::make_shared<std::string>();
  pl->add_option("spec", *spec, "the study spec (YAML, docs/STUDIES.md)")->required();
  pl->add_option("--manifest", *manifest, "write the cells here: hash, step, kind, params, inputs");
  pl->callback([spec, manifest] { study_plan(*spec, *manifest); });
  auto* kinds = st->add_subcommand("kinds", "the kinds of step a spec can use and the parameters of each");
  kinds->callback([] { study_kinds(); });
}

}  // namespace cli
}  // namespace driftlab
