// Dynamic loss scaling, the rule of mixed-precision training: the loss is multiplied by a scale
// before the backward so that small float16 gradients do not flush to zero; the gradients are
// divided by it before the optimizer step; a step whose gradients hold an inf or NaN is skipped
// and the scale backs off; after `growth_interval` finite steps in a row it grows.
//
// PyTorch's GradScaler (torch/amp/grad_scaler.py; the update in
// aten/src/ATen/native/cuda/AmpKernels.cu, amp_update_scale_cuda_kernel, the scale held in
// float32): on an overflow scale *= backoff_factor and the count of finite steps restarts; else
// the count grows, and when it reaches growth_interval the scale is multiplied by growth_factor
// (kept only if the product is finite) and the count restarts. Defaults: init_scale 2^16, growth
// 2, backoff 0.5, interval 2000.
// Keras's LossScaleOptimizer (dynamic): the same rule with initial_scale 2^15, multiplier 2 and
// dynamic_growth_steps 2000.
#pragma once

#include <cmath>
#include <cstdint>

namespace driftlab {

struct DynamicLossScale {
  float scale = 65536.0f;  // float32, as both frameworks hold it
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
  int64_t finite_steps = 0;  // PyTorch's growth_tracker

  // After a step's gradients were checked: whether the optimizer step is taken (false: skipped).
  bool update(bool found_nonfinite) {
    if (found_nonfinite) {
      scale *= backoff_factor;
      finite_steps = 0;
      return false;
    }
    if (++finite_steps == growth_interval) {
      const float grown = scale * growth_factor;
      if (std::isfinite(grown)) scale = grown;
      finite_steps = 0;
    }
    return true;
  }
};

}  // namespace driftlab
