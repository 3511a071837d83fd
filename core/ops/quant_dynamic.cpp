#include "core/ops/quant_dynamic.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace driftlab {

const char* dyn_act_rule_name(DynActRule r) {
  switch (r) {
    case DynActRule::affine_double: return "affine_double";
    case DynActRule::affine_float: return "affine_float";
    case DynActRule::symmetric_per_row: return "symmetric_per_row";
    case DynActRule::affine_per_row: return "affine_per_row";
  }
  return "?";
}

const char* dyn_out_rule_name(DynOutRule r) {
  switch (r) {
    case DynOutRule::scale_then_bias: return "scale_then_bias";
    case DynOutRule::prescaled_bias: return "prescaled_bias";
  }
  return "?";
}

void QDenseDynamicParams::validate() const {
  check(n >= 1 && in >= 1 && out >= 1, "qdense_dynamic: sizes n=", n, " in=", in, " out=", out, " must be >= 1");
  if (act == DynActRule::affine_per_row) {
    check(qmin >= -128 && qmin < qmax && qmax <= 127, "qdense_dynamic: affine_per_row needs -128 <= qmin < qmax <= "
          "127 (int8), got [", qmin, ", ", qmax, "]");
  } else if (act == DynActRule::symmetric_per_row) {
    check(qmin == -qmax && qmax >= 1 && qmax <= 127, "qdense_dynamic: symmetric_per_row needs qmin = -qmax in "
          "[-127, -1], got [", qmin, ", ", qmax, "]");
  } else {
    check(qmin >= 0 && qmin < qmax && qmax <= 255, "qdense_dynamic: ", dyn_act_rule_name(act), " needs 0 <= qmin < "
          "qmax <= 255 (uint8), got [", qmin, ", ", qmax, "]");
  }
  // |x_q - zp| <= 255 and |w_q| <= 128: in * 255 * 128 must stay inside int32.
  check(in <= (int64_t{1} << 31) / (255 * 128), "qdense_dynamic: ", in, " inputs per output could overflow the int32 sum");
}

// PyTorch ChooseQuantizationParams (aten/src/ATen/native/quantized/cpu/quant_utils.h), with its
// types: min and max float, the scale double, the small-scale stretch in float.
ScaleZeroPoint choose_affine_double(float min, float max, int32_t qmin, int32_t qmax) {
  constexpr float kSmallScale = 6.1e-5f;  // SMALL_SCALE_THRESHOLD
  check(min <= max, "dynamic quantization: min ", min, " > max ", max);
  min = std::min(min, 0.f);
  max = std::max(max, 0.f);
  double scale = (static_cast<double>(max) - min) / (qmax - qmin);
  if (static_cast<float>(scale) == 0.0f || std::isinf(1.0f / static_cast<float>(scale))) scale = 0.1;
  if (scale < kSmallScale) {
    const float org_scale = static_cast<float>(scale);
    scale = kSmallScale;
    if (min == 0.0f) {
      max = kSmallScale * (qmax - qmin);
    } else if (max == 0.0f) {
      min = -kSmallScale * (qmax - qmin);
    } else {
      const float amplifier = kSmallScale / org_scale;
      min *= amplifier;
      max *= amplifier;
    }
  }
  const double from_min = qmin - min / scale, from_max = qmax - max / scale;
  const double err_min = std::abs(qmin) - std::abs(min / scale), err_max = std::abs(qmax) - std::abs(max / scale);
  const double initial = err_min < err_max ? from_min : from_max;
  int32_t zp;
  if (initial < qmin)
    zp = qmin;
  else if (initial > qmax)
    zp = qmax;
  else
    zp = static_cast<int32_t>(round_with(initial, RoundRule::half_even));
  return {static_cast<float>(scale), zp};
}

// ONNX DynamicQuantizeLinear in float32 (onnx/defs/quantization: y_scale = (max - min) / (qmax -
// qmin) over the range stretched to 0; zp = saturate(round(qmin - min / y_scale))).
ScaleZeroPoint choose_affine_float(float min, float max, int32_t qmin, int32_t qmax) {
  check(min <= max, "dynamic quantization: min ", min, " > max ", max);
  min = std::min(min, 0.f);
  max = std::max(max, 0.f);
  const float scale = max == min ? 1.0f : (max - min) / static_cast<float>(qmax - qmin);
  float zp = static_cast<float>(qmin) - min / scale;
  zp = std::max(static_cast<float>(qmin), std::min(static_cast<float>(qmax), zp));
  return {scale, static_cast<int32_t>(round_with(zp, RoundRule::half_even))};
}

// TFLite PortableAsymmetricQuantizeFloats (tensorflow/lite/kernels/internal/reference/
// portable_tensor_utils.cc): double range and zero point, round half away, scale stored as float.
ScaleZeroPoint choose_affine_row(float min, float max, int32_t qmin, int32_t qmax, RoundRule round) {
  const double rmin = std::fmin(0.0, min), rmax = std::fmax(0.0, max);
  if (rmin == rmax) return {1.0f, 0};
  const double scale = (rmax - rmin) / (static_cast<double>(qmax) - qmin);
  const double from_min = qmin - rmin / scale, from_max = qmax - rmax / scale;
  const double err_min = std::abs(static_cast<double>(qmin)) + std::abs(rmin / scale);
  const double err_max = std::abs(static_cast<double>(qmax)) + std::abs(rmax / scale);
  const double zpd = err_min < err_max ? from_min : from_max;
  int32_t zp;
  if (zpd <= qmin)
    zp = qmin;
  else if (zpd >= qmax)
    zp = qmax;
  else
    zp = static_cast<int32_t>(round_with(zpd, round));
  return {static_cast<float>(scale), zp};
}

DynInputQ choose_dynamic_input_q(const QDenseDynamicParams& p, const float* x) {
  p.validate();
  const int64_t total = p.n * p.in;
  for (int64_t i = 0; i < total; ++i)
    check(std::isfinite(x[i]), "qdense_dynamic: input element ", i, " (row ", i / p.in, ") is ", x[i],
          ": dynamic quantization needs finite inputs");
  DynInputQ q;
  if (p.act == DynActRule::symmetric_per_row) {
    for (int64_t r = 0; r < p.n; ++r) {
      float amax = 0;
      for (int64_t k = 0; k < p.in; ++k) amax = std::max(amax, std::abs(x[r * p.in + k]));
      q.scale.push_back(amax == 0 ? 1.0f : amax / static_cast<float>(p.qmax));
      q.inv.push_back(amax == 0 ? 0.0f : static_cast<float>(p.qmax) / amax);
      q.zero_point.push_back(0);
    }
    return q;
  }
  if (p.act == DynActRule::affine_per_row) {
    for (int64_t r = 0; r < p.n; ++r) {
      const float* row = x + r * p.in;
      const ScaleZeroPoint s = choose_affine_row(*std::min_element(row, row + p.in), *std::max_element(row, row + p.in),
                                                 p.qmin, p.qmax, p.x_round);
      q.scale.push_back(s.scale);
      q.zero_point.push_back(s.zero_point);
      q.inv.push_back(1.0f / s.scale);
    }
    return q;
  }
  float lo = x[0], hi = x[0];
  for (int64_t i = 1; i < total; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const ScaleZeroPoint s = p.act == DynActRule::affine_double ? choose_affine_double(lo, hi, p.qmin, p.qmax)
                                                              : choose_affine_float(lo, hi, p.qmin, p.qmax);
  q.scale.push_back(s.scale);
  q.zero_point.push_back(s.zero_point);
  q.inv.push_back(1.0f / s.scale);
  return q;
}

}  // namespace driftlab
