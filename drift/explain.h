// `driftlab explain KNOB`: what the knob does, its value per framework, where the framework
// defines it, and a tiny example computed live by the engine's own kernels.
#pragma once
#include <string>

namespace driftlab {

// Throws for an unknown knob (listing the known ones).
std::string explain_knob(const std::string& knob);

}  // namespace driftlab
