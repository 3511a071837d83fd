#include "core/ops/quant.h"

#include <cmath>
#include <cstring>
#include <limits>

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

const char* qadd_rule_name(QAddRule r) {
  switch (r) {
    case QAddRule::fixed_point_shift: return "fixed_point_shift";
    case QAddRule::float_fma_tail64: return "float_fma_tail64";
    case QAddRule::float_ratio_fma: return "float_ratio_fma";
    case QAddRule::tflite_fixed_point: return "tflite_fixed_point";
  }
  return "?";
}

const char* qavg_pool_rule_name(QAvgPoolRule r) {
  switch (r) {
    case QAvgPoolRule::shared_qparams: return "shared_qparams";
    case QAvgPoolRule::scale_ratio: return "scale_ratio";
    case QAvgPoolRule::tflite_integer_mean: return "tflite_integer_mean";
    case QAvgPoolRule::tflite_rounded_division: return "tflite_rounded_division";
  }
  return "?";
}

QGlobalAvgPoolParams::Resolved QGlobalAvgPoolParams::resolve() const {
  Resolved r;
  r.rule = rule;
  r.count = h * w;
  check(r.count > 0 && r.count < (int64_t{1} << 23), "qglobal_avg_pool: ", r.count, " values per channel");
  r.zp_in = zero_point;
  r.zp_out = output_zero_point();
  if (rule == QAvgPoolRule::shared_qparams) {
    r.m = 1.0f / static_cast<float>(r.count);
    return r;
  }
  for (float sc : {in_scale, out_scale})
    check(std::isfinite(sc) && sc > 0, "qglobal_avg_pool: scale ", sc, " is not finite and positive");
  if (rule == QAvgPoolRule::scale_ratio) {
    // MLAS CheckQLinearGlobalAveragePoolScaleAndSize: the float32 product, then the division
    r.m = in_scale / (out_scale * static_cast<float>(r.count));
    check(r.m >= 0x1.0p-32f && r.m < 256.0f, "qglobal_avg_pool: multiplier s_in/(s_out*N) = ", in_scale, "/(",
          out_scale, "*", r.count, ") = ", r.m, " outside ONNX Runtime's [2^-32, 256)");
    return r;
  }
  // TFLite PrepareMeanOrSum: the plain QuantizeMultiplier of the ratio in double (shift may be
  // positive). A left shift that could overflow x's int32 (|x| <= 255 N) is refused: TFLite's would wrap.
  const FixedPointMultiplier ratio = quantize_multiplier(static_cast<double>(in_scale) / out_scale, false);
  check(ratio.shift <= 0 || static_cast<double>(r.count) * 255.0 * std::ldexp(1.0, ratio.shift) < 2147483648.0,
        "qglobal_avg_pool: scale ratio ", in_scale, "/", out_scale, " with ", r.count,
        " values per channel overflows TFLite's int32 left shift");
  if (rule == QAvgPoolRule::tflite_rounded_division) {
    r.fixed = ratio;
    return r;
  }
  // QuantizedMeanOrSum's folding of N: k = min(floor(log2 N), 32, 31 + shift), M' = (M << k) / N
  // (int64, truncating), shift' = shift - k
  int k = 0;
  while ((int64_t{2} << k) <= r.count) ++k;
  k = std::min(k, 32);
  k = std::min(k, 31 + ratio.shift);
  r.fixed.m0 = static_cast<int32_t>((static_cast<int64_t>(ratio.m0) << k) / r.count);
  r.fixed.shift = ratio.shift - k;
  return r;
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

const char* scale_op_name(ScaleOp s) {
  switch (s) {
    case ScaleOp::divide: return "divide";
    case ScaleOp::mul_reciprocal: return "mul_reciprocal";
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

void QuantizeParams::validate(const char* op) const {
  check(!scale.empty() && scale.size() == zero_point.size(), op, ": ", scale.size(), " scales and ",
        zero_point.size(), " zero points");
  check(scale.size() == 1 || axis >= 0, op, ": ", scale.size(), " scales need a channel axis");
  check(dtype == DType::i8 || dtype == DType::u8 || dtype == DType::i32, op, ": quantized dtype ",
        dtype_name(dtype), " (int8, uint8 or int32)");
  const int64_t tmin = dtype == DType::i8 ? -128 : dtype == DType::u8 ? 0 : INT32_MIN;
  const int64_t tmax = dtype == DType::i8 ? 127 : dtype == DType::u8 ? 255 : INT32_MAX;
  check(qmin <= qmax && qmin >= tmin && qmax <= tmax, op, ": clamp [", qmin, ", ", qmax, "] outside ",
        dtype_name(dtype));
  for (std::size_t i = 0; i < scale.size(); ++i)
    check(std::isfinite(scale[i]) && scale[i] > 0, op, ": scale ", scale[i], " is not finite and positive");
}

namespace {

int64_t type_extent(DType t) {  // the largest |q - zp| a value of the type can produce
  check(t == DType::i8 || t == DType::u8, "quantized op: activation dtype ", dtype_name(t), " (int8 or uint8)");
  return 255;
}

void check_acc_fits(const char* op, DType x, int64_t terms, bool bias) {
  // |x - zp| <= 255 and |w| <= 128: the accumulator stays in int32 when terms*255*128 (+ a bias
  // bounded by INT32_MAX/2, which quant/ checks) does.
  const int64_t bound = terms * type_extent(x) * 128;
  check(bound <= (bias ? INT32_MAX / 2 : INT32_MAX), op, ": ", terms,
        " products per output could overflow the int32 accumulator");
}

}  // namespace

void QConv2dParams::validate() const {
  g.validate();
  check(!g.flip, "qconv2d: flip must be resolved into the weights");
  check(y_dtype == DType::i8 || y_dtype == DType::u8, "qconv2d: output dtype ", dtype_name(y_dtype));
  check_acc_fits("qconv2d", x_dtype, g.c * g.r * g.s, has_bias);
  check(dot != DotRule::int16_pairs_channels || x_dtype == DType::u8, "qconv2d: int16_pairs_channels (oneDNN's "
        "VPMADDUBSW pairs) takes uint8 activations, the input is ", dtype_name(x_dtype));
  rq.validate("qconv2d", g.k);
}

void QDenseParams::validate() const {
  check(n >= 0 && in > 0 && out > 0, "qdense: sizes n=", n, " in=", in, " out=", out);
  check(y_dtype == DType::i8 || y_dtype == DType::u8, "qdense: output dtype ", dtype_name(y_dtype));
  check_acc_fits("qdense", x_dtype, in, has_bias);
  check(dot != DotRule::int16_pairs_channels || x_dtype == DType::u8, "qdense: int16_pairs_channels (oneDNN's "
        "VPMADDUBSW pairs) takes uint8 activations, the input is ", dtype_name(x_dtype));
  rq.validate("qdense", out);
}

}  // namespace driftlab
