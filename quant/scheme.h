// A quantization scheme: the quant_* knobs of a Policy resolved once into arithmetic-named
// choices (QuantScheme), and the functions that turn calibrated float ranges and float weights
// into the numbers the integer kernels take (core/ops/quant.h): activation scale and zero
// point, integer weights and their scales, the bias, the requantization of each output channel.
// Every formula here is one toolchain's, chosen by a field; docs/QUANT_SOURCES.md gives each
// toolchain's source and what was run to confirm it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "core/ops/qadd.h"
#include "core/ops/qpool.h"
#include "core/ops/quantize.h"
#include "core/ops/requant.h"
#include "engine/policy.h"
#include "quant/observer.h"

namespace driftlab {
namespace quant {

struct QuantScheme {
  std::string toolchain;               // the quant_scheme it started from (reports only)
  DType act_dtype = DType::u8;
  int32_t act_qmin = 0, act_qmax = 255;  // what the scale is computed for (reduce_range narrows it)
  int32_t act_type_min = 0, act_type_max = 255;  // what kernels clamp to
  ObserverConfig observer;
  int32_t w_qmin = -128, w_qmax = 127;
  bool conv_per_channel = false, dense_per_channel = false;
  WeightScaleOp weight_op = WeightScaleOp::mul_reciprocal;
  ScaleOp act_op = ScaleOp::mul_reciprocal;
  RoundRule round = RoundRule::half_even;
  RoundRule zp_round = RoundRule::half_even;
  ZeroPointForm zp_form = ZeroPointForm::qmin_minus_round;
  bool scale_in_double = false;
  ScaleFloor scale_floor = ScaleFloor::float32_eps;
  QuantBias bias = QuantBias::int32_mul_reciprocal;
  bool bias_product_in_double = true;
  RequantRule requant = RequantRule::float_multiply;
  QuantMultiplier multiplier = QuantMultiplier::float32_mul_reciprocal;
  bool relu_fused = true;
  DotRule dot = DotRule::exact;  // how conv/dense sum their products (quant_u8s8_dot)
  QAddRule add_rule = QAddRule::fixed_point_shift;
  int32_t add_offset = 0;  // QAddParams::offset (ORT on x86: int8 activations run as uint8 + 128)
  QAvgPoolRule avg_pool_rule = QAvgPoolRule::shared_qparams;
  // its own observer: every rule but PyTorch's (ORT's QLinearGlobalAveragePool, TFLite's MEAN)
  bool avg_pool_own_qparams() const { return avg_pool_rule != QAvgPoolRule::shared_qparams; }

  static QuantScheme from_policy(const Policy& p);
};

// An activation's affine quantization: real = scale * (q - zero_point).
struct ActQParams {
  float scale = 1.f;
  int32_t zero_point = 0;
};

// Scale and zero point of an activation observed over [min, max] (0 always included), by the
// scheme's formula: PyTorch _calculate_qparams (float32, qmin - round(min/s), max(s, eps)),
// TFLite GetAsymmetricQuantizationParams (float32, round(qmin - min/s) half away), ONNX Runtime
// compute_scale_zp (the span in float32, the division and the zero point in float64, s < tiny ->
// 1). Throws naming `what` when the range is not finite, or when the scale would be 0 under
// quant_scale_floor=none (TFLite would store scale 0 for an all-zero activation).
ActQParams activation_qparams(const QuantScheme& s, Range r, const std::string& what);

// Symmetric int8 weights, per tensor or per output channel (axis 0): scale = 2*amax/(qmax-qmin)
// in the scheme's precision, floored; an all-zero channel gets scale 1 (TFLite's
// PortableSymmetricQuantizeFloats rule; PyTorch's floor gives eps) and integers 0.
struct QuantizedWeight {
  Tensor q;                   // int8, the float weight's shape
  std::vector<float> scale;   // one, or one per output channel
  float scale_of(int64_t c) const { return scale.size() == 1 ? scale[0] : scale[c]; }
};
QuantizedWeight quantize_weight(const QuantScheme& s, const Tensor& w, bool per_channel, const std::string& what);

// The bias of output channel c for an input scale s_in: int32 round(b/(s_in*s_w[c])) or
// round(b*(1/(s_in*s_w[c]))) (clamped to +-(2^31-1); refused beyond +-2^30, where the int32
// accumulator could overflow), or float32 b/(s_in*s_w[c]) for the requantization to add. An
// undefined bias gives an undefined tensor.
Tensor quantize_bias(const QuantScheme& s, float s_in, const QuantizedWeight& w, const Tensor& bias,
                     const std::string& what);

// The requantization of a conv/dense output: per channel multiplier s_in*s_w[c]/s_out (float32
// product then division, or in double), as a float or a fixed-point multiplier; a float32 bias
// (from quantize_bias under float_in_requant) goes inside it; clamp at the zero point when a ReLU
// is fused.
Requant make_requant(const QuantScheme& s, float s_in, const QuantizedWeight& w, int64_t channels,
                     const Tensor& float_bias, ActQParams out, bool relu, const std::string& what);

// The quantize op for an activation (per tensor) under the scheme.
QuantizeParams act_quantize_params(const QuantScheme& s, ActQParams q);

}  // namespace quant
}  // namespace driftlab
