#include "engine/knob_gates.h"

namespace driftlab {

namespace {
bool sixteen_bit(MathMode m) { return m == MathMode::bfloat16 || m == MathMode::float16; }
}  // namespace

std::string inert_reason(const std::string& knob, const Policy& p) {
  if (knob == "loss_scale_init" && p.loss_scale == LossScale::none) return "loss_scale=none";
  if ((knob == "loss_scale_growth_interval" || knob == "loss_scale_min" || knob == "loss_scale_skipped_step") &&
      p.loss_scale != LossScale::dynamic)
    return "loss_scale=" + p.get("loss_scale") + " (the dynamic rule's setting)";
  if (knob == "conv_bias_rounding" && p.autocast == Autocast::off && !sixteen_bit(p.math_conv))
    return "no bfloat16 / float16 convolution (autocast=off, math_conv=" + p.get("math_conv") + ")";
  if (knob == "matmul_bias_rounding" && p.autocast == Autocast::off && !sixteen_bit(p.math_matmul))
    return "no bfloat16 / float16 dense layer (autocast=off, math_matmul=" + p.get("math_matmul") + ")";
  if (knob == "tf32_rounding" && p.math_conv != MathMode::tf32 && p.math_matmul != MathMode::tf32 &&
      p.math_rnn != MathMode::tf32)
    return "no tf32 math mode (math_conv=" + p.get("math_conv") + ", math_matmul=" + p.get("math_matmul") +
           ", math_rnn=" + p.get("math_rnn") + ")";
  return "";
}

}  // namespace driftlab
