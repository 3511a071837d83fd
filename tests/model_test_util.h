// Helpers for tests that run whole models (the model face on the CPU and the device).
#pragma once
#include <cstring>
#include <string>

#include "engine/model.h"
#include "models/models.h"
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

// LeNet-5 (torch preset, random weights) with its biases zeroed: a freshly initialised model's
// argmax is mostly its last bias, the same class for nearly any input; without biases the class
// depends on the image, so single pixels and noise can change it (the decision-based attacks' tests).
inline Model input_sensitive_lenet5() {
  Model m = build_model("lenet5", Policy::torch(), 3);
  for (auto& np : m.net->named_params())
    if (np.first.size() >= 5 && np.first.compare(np.first.size() - 5, 5, ".bias") == 0) np.second->value.zero();
  return m;
}

// n labels cycling through the ten classes as (3i + 1) mod 10 (the gradient attacks' tests).
inline std::vector<int32_t> cyclic_labels(int64_t n) {
  std::vector<int32_t> y(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<std::size_t>(i)] = static_cast<int32_t>((3 * i + 1) % 10);
  return y;
}

}  // namespace driftlab
