#include "core/ops/qadd.h"

#include <cmath>
#include <cstring>

#include "core/error.h"

namespace driftlab {

const char* qadd_rule_name(QAddRule r) {
  switch (r) {
    case QAddRule::fixed_point_shift: return "fixed_point_shift";
    case QAddRule::float_fma_tail64: return "float_fma_tail64";
    case QAddRule::float_ratio_fma: return "float_ratio_fma";
    case QAddRule::tflite_fixed_point: return "tflite_fixed_point";
  }
  return "?";
}

void QAddParams::resolve() {
  for (float sc : {a_scale, b_scale, y_scale})
    check(std::isfinite(sc) && sc > 0, "qadd: scale ", sc, " is not finite and positive");
  check(dtype == DType::u8 || dtype == DType::i8, "qadd: dtype ", dtype_name(dtype), " (int8 or uint8)");
  check(lo <= hi, "qadd: clamp [", lo, ", ", hi, "] is empty");
  check(offset == 0 || (rule == QAddRule::float_ratio_fma && offset == 128 && dtype == DType::i8), "qadd: offset ",
        offset, " (128 for int8 under float_ratio_fma, else 0)");
  if (rule == QAddRule::float_ratio_fma) {
    // MLAS qladd_avx2.cpp: the ratios, then the fixed part as ORT's build contracts it
    a_ratio = a_scale / y_scale;
    b_ratio = b_scale / y_scale;
    const float zb_term = b_ratio * static_cast<float>(b_zero_point + offset);
    fixed = static_cast<float>(y_zero_point + offset) - std::fma(a_ratio, static_cast<float>(a_zero_point + offset), zb_term);
    return;
  }
  if (rule == QAddRule::tflite_fixed_point) {
    // tflite/kernels/add.cc Prepare (int8): every multiplier below one, in double
    const double twice_max = 2.0 * static_cast<double>(a_scale > b_scale ? a_scale : b_scale);
    auto below_one = [](double r, const char* what) {
      check(r > 0 && r < 1, "qadd: TFLite's ", what, " multiplier ", r, " is not in (0, 1)");
      const FixedPointMultiplier m = quantize_multiplier(r, false);
      check(m.shift <= 0, "qadd: TFLite's ", what, " multiplier ", r, " has shift ", m.shift, " > 0");
      return m;
    };
    a_fixed = below_one(static_cast<double>(a_scale) / twice_max, "first input's");
    b_fixed = below_one(static_cast<double>(b_scale) / twice_max, "second input's");
    // (1 << 20) * s_y: a float32 product, exact (a power of two)
    y_fixed = below_one(twice_max / static_cast<double>(static_cast<float>(1 << 20) * y_scale), "output");
    return;
  }
  if (rule != QAddRule::fixed_point_shift) return;
  // pytorch_qnnp_compute_add_quantization_params (qnnpack requantization.h)
  const float ra = a_scale / y_scale, rb = b_scale / y_scale;
  const float rmax = ra > rb ? ra : rb;
  check(rmax >= 0x1.0p-14f && rmax < 0x1.0p+8f, "qadd: input/output scale ratio ", rmax,
        " outside qnnpack's [2^-14, 2^8)");
  uint32_t bits;
  std::memcpy(&bits, &rmax, 4);
  const int32_t exponent = static_cast<int32_t>(bits >> 23) - 127;
  shift = 21 - exponent;
  const float pow2 = std::ldexp(1.0f, shift);  // exact: a power of two
  a_mult = static_cast<int32_t>(round_with(ra * pow2, RoundRule::half_even));  // lrintf (FE_TONEAREST)
  b_mult = static_cast<int32_t>(round_with(rb * pow2, RoundRule::half_even));
}

}  // namespace driftlab
