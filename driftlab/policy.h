// The library face (driftlab/model.h says what the face is): Policies. The Policy itself (parse,
// canonical string, knob table, knob-by-knob diff) is engine/policy.h's, re-exported here so that
// a caller of the face needs no engine header; added: a list of policies given as one string,
// and the framework behaviour a preset's value of a knob copies.
#pragma once
#include <string>
#include <vector>

#include "engine/policy.h"

namespace driftlab {

// "tensorflow,theano,torch" (presets, ','-separated) or "torch;torch,relu_grad_at_zero=0.5"
// (policy strings, ';'-separated: a list with a ';' or an '=' is read that way). Empty items
// are skipped; a list that names none throws.
std::vector<std::string> split_policies(const std::string& policies);

// The framework behaviour `preset`'s value of the knob copies (KnobInfo's tensorflow, theano or
// torch column; torch for any other preset name).
const std::string& preset_copies(const KnobInfo& knob, const std::string& preset);

}  // namespace driftlab
