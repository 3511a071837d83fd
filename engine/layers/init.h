// Default initialisers, drawn in the framework's own weight layout so that the RNG stream
// fills the same elements in the same order, then stored in driftlab's layout:
// conv OIHW (K,C,R,S), dense (out,in).
#pragma once
#include "core/tensor.h"
#include "engine/policy.h"

namespace driftlab {

class Rng;

// Weight conversion between driftlab's layout and the framework layout named by `layout`:
// 4-D OIHW <-> HWIO, 2-D (out,in) <-> (in,out). Used by init and by weight import/export.
Tensor to_framework_layout(const Tensor& w, WeightLayout layout);
Tensor from_framework_layout(const Tensor& w_framework, WeightLayout layout);

// glorot_uniform: U(+-sqrt(6/(fan_in+fan_out))); kaiming_uniform_sqrt5: U(+-1/sqrt(fan_in)).
void init_weight(Tensor& w, int64_t fan_in, int64_t fan_out, const Policy& policy, Rng& rng);
// zeros (draws nothing) or U(+-1/sqrt(fan_in)).
void init_bias(Tensor& b, int64_t fan_in, const Policy& policy, Rng& rng);

}  // namespace driftlab
