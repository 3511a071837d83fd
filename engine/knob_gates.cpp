#include "engine/knob_gates.h"

#include "engine/layers/math_mode.h"

namespace driftlab {

bool knob_inert(const std::string& knob, const Policy& p) {
  if (knob == "loss_scale_init") return p.loss_scale == LossScale::none;
  if (knob == "loss_scale_growth_interval" || knob == "loss_scale_min" || knob == "loss_scale_skipped_step")
    return p.loss_scale != LossScale::dynamic;  // the dynamic rule's settings
  if (knob == "conv_bias_rounding") return p.autocast == Autocast::off && !reduced_format(p.math_conv);
  if (knob == "matmul_bias_rounding" || knob == "matmul_sum")
    return p.autocast == Autocast::off && !reduced_format(p.math_matmul);
  if (knob == "rnn_autocast_rule") return p.autocast == Autocast::off;
  if (knob == "rnn_input_bias_rounding")
    return p.autocast == Autocast::off || p.rnn_autocast_rule != RnnAutocastRule::ops;
  if (knob == "tf32_rounding")
    return p.math_conv != MathMode::tf32 && p.math_matmul != MathMode::tf32 && p.math_rnn != MathMode::tf32;
  return false;
}

}  // namespace driftlab
