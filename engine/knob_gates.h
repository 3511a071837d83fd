// Knobs that another knob switches off: a knob is inert under a policy when its value cannot
// change anything there, because the mechanism it parameterises is not in use (the loss-scale
// settings without loss scaling, the bias rounding of a 16-bit op without one, the TF32 rounding
// rule without a TF32 mode). Attribution and a study's explanation leave out a knob inert under
// both policies they compare: flipping it would run a cell to measure a zero by construction.
#pragma once

#include <string>

#include "engine/policy.h"

namespace driftlab {

// Whether `knob` is inert under `p` (its gate is off).
bool knob_inert(const std::string& knob, const Policy& p);

}  // namespace driftlab
