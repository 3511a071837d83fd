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
// Keras's LossScaleOptimizer (keras/mixed_precision/loss_scale_optimizer.py,
// _DynamicLossScaleState.update): the same rule with initial_scale 2^15, multiplier 2 and
// dynamic_growth_steps 2000, except that the backoff stops at 1 (tf.maximum(scale / 2, 1)):
// min_scale 1 (GradScaler: 0, no floor).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace driftlab {

struct DynamicLossScale {
  float scale = 65536.0f;  // float32, as both frameworks hold it
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
  float min_scale = 0.0f;    // the backoff's floor
  int64_t finite_steps = 0;  // PyTorch's growth_tracker, Keras's counter

  // After a step's gradients were checked: whether the optimizer step is taken (false: skipped).
  bool update(bool found_nonfinite) {
    if (found_nonfinite) {
      scale = std::max(scale * backoff_factor, min_scale);
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
