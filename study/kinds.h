// The kinds of study step and the parameters each takes (study/spec.h reads specs against this
// table; docs/STUDIES.md lists it). A parameter has a type (text, integer, real, bool, one of a
// list, a policy string, a model or dataset name) and a default; `inputs` says which kinds of
// step a kind can need (train: none; evaluate/quantize/attack: a trained model, attack also an
// int8 one).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace driftlab {
namespace study {

enum class ParamType { text, integer, real, boolean, choice, policy, model, dataset, int_list };

struct ParamDef {
  std::string key;
  ParamType type;
  std::string fallback;               // the default ("" allowed for text and optional values)
  std::vector<std::string> choices;   // ParamType::choice
  double min = 0;                     // integer / real: the smallest value allowed
};

struct KindDef {
  // The table's rows (kinds.cpp) name the first six; gathers and further are set where they apply.
  KindDef(std::string n, std::string w, std::vector<ParamDef> p, std::vector<std::string> in, int lo, int hi)
      : name(std::move(n)), what(std::move(w)), params(std::move(p)), inputs(std::move(in)), min_needs(lo),
        max_needs(hi) {}
  std::string name;
  std::string what;                   // one line for docs and messages
  std::vector<ParamDef> params;
  std::vector<std::string> inputs;    // kinds a step of this kind may need (each need one of these)
  int min_needs = 0, max_needs = 0;
  bool gathers = false;  // a cell takes many cells of its need (`gather:`): a table over models
  std::vector<std::string> further;   // kinds its second and later needs may be (empty: `inputs`)
};

const std::vector<KindDef>& kind_table();
// The kind's definition, or null.
const KindDef* find_kind(const std::string& name);
const ParamDef* find_param(const KindDef& kind, const std::string& key);

// The data a train cell without a dataset reads: Fashion-MNIST for the 28x28 CNNs, its sequential
// form for lstm/gru, IMDb for the token models; throws for the CIFAR-shaped models (no real
// CIFAR-10 installs here: the spec must say which).
std::string model_dataset(const std::string& model);

// Checks `value` against the parameter's type; returns the value in canonical form (integers and
// reals as the C++ reads them back, bools as true/false) or throws a message without location.
std::string check_value(const ParamDef& def, const std::string& value);

}  // namespace study
}  // namespace driftlab
