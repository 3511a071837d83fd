#include "core/ops/requant.h"

#include <cmath>

#include "core/error.h"

namespace driftlab {

const char* round_rule_name(RoundRule r) {
  switch (r) {
    case RoundRule::half_away: return "half_away";
    case RoundRule::half_even: return "half_even";
  }
  return "?";
}

const char* requant_rule_name(RequantRule r) {
  switch (r) {
    case RequantRule::fixed_point_double_rounding: return "fixed_point_double_rounding";
    case RequantRule::fixed_point_single_rounding: return "fixed_point_single_rounding";
    case RequantRule::float_multiply: return "float_multiply";
    case RequantRule::float_multiply_add_zp: return "float_multiply_add_zp";
  }
  return "?";
}

FixedPointMultiplier quantize_multiplier(double m, bool single_rounding) {
  check(std::isfinite(m) && m >= 0, "quantize_multiplier: multiplier ", m, " is not a finite non-negative number");
  if (m == 0.0) return {0, 0};
  int shift = 0;
  const double q = std::frexp(m, &shift);  // m = q * 2^shift, q in [0.5, 1)
  int64_t q_fixed = static_cast<int64_t>(std::round(q * static_cast<double>(int64_t{1} << 31)));  // TfLiteRound
  if (q_fixed == (int64_t{1} << 31)) {
    q_fixed /= 2;
    ++shift;
  }
  if (shift < -31) return {0, 0};
  if (single_rounding && shift > 30) return {INT32_MAX, 30};
  // Double rounding shifts x left by `shift` in int32: TFLite leaves a shift above 31 undefined.
  check(single_rounding || shift <= 31, "quantize_multiplier: multiplier ", m,
        " needs a left shift of ", shift, " (more than 31): no int32 fixed-point form");
  return {static_cast<int32_t>(q_fixed), shift};
}

void Requant::validate(const char* op, int64_t num_channels) const {
  check(!channels.empty() && (channels.size() == 1 || static_cast<int64_t>(channels.size()) == num_channels), op,
        ": requantization has ", channels.size(), " channels for ", num_channels, " outputs");
  check(lo <= hi, op, ": requantization clamp [", lo, ", ", hi, "] is empty");
  for (const RequantChannel& c : channels) {
    if (rule == RequantRule::float_multiply || rule == RequantRule::float_multiply_add_zp) {
      check(std::isfinite(c.scale) && c.scale > 0 && std::isfinite(c.bias), op, ": float requantization scale ",
            c.scale, " / bias ", c.bias, " must be finite, scale positive");
    } else {
      check(c.fixed.m0 >= 0 && c.fixed.shift >= -31 && c.fixed.shift <= 31, op, ": fixed-point multiplier (",
            c.fixed.m0, ", shift ", c.fixed.shift, ") out of range");
      check(rule != RequantRule::fixed_point_single_rounding || c.fixed.shift <= 30, op,
            ": single rounding needs shift <= 30, got ", c.fixed.shift);
    }
  }
}

namespace {

int64_t type_extent(DType t) {  // the largest |q - zp| a value of the type can produce
  check(t == DType::i8 || t == DType::u8, "quantized op: activation dtype ", dtype_name(t), " (int8 or uint8)");
  return 255;
}

}  // namespace

void check_acc_fits(const char* op, DType x, int64_t terms, bool bias) {
  // |x - zp| <= 255 and |w| <= 128: the accumulator stays in int32 when terms*255*128 (+ a bias
  // bounded by INT32_MAX/2, which quant/ checks) does.
  const int64_t bound = terms * type_extent(x) * 128;
  check(bound <= (bias ? INT32_MAX / 2 : INT32_MAX), op, ": ", terms,
        " products per output could overflow the int32 accumulator");
}

}  // namespace driftlab
