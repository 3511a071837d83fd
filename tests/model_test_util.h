// Helpers for tests that run whole models (the model face on the CPU and the device).
#pragma once
#include <cstring>
#include <string>

#include "engine/model.h"
#include "tests/test_util.h"

namespace driftlab {

// Every BatchNorm's running mean in [-0.5, 0.5] and running variance in [0.5, 2] (drawn from
// seed, seed+1, ...), away from their initial 0 and 1, so that inference semantics (which read
// them) differ from the training ones (which read the batch's statistics).
inline void randomise_running_stats(Model& m, uint64_t seed) {
  for (auto& nb : m.net->named_buffers()) {
    Tensor& v = nb.second->value;
    const bool var = nb.first.find("running_var") != std::string::npos;
    if (!var && nb.first.find("running_mean") == std::string::npos) continue;
    const Tensor r = random_tensor(v.shape(), v.dtype(), seed++, var ? 0.5 : -0.5, var ? 2.0 : 0.5);
    std::memcpy(v.raw(), r.raw(), v.nbytes());
  }
}

}  // namespace driftlab
