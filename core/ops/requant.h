// The arithmetic every integer (int8/uint8) op shares: the rounding rules, gemmlowp/TFLite
// fixed-point multipliers, the requantization of an int32 accumulator to an output integer, and
// the rule by which qconv2d and qdense sum their products (DotRule). The ops themselves, each with
// its params and kernel table: core/ops/quantize.h (quantize, dequantize), qconv2d.h, qdense.h,
// qpool.h (max pooling, global average pooling), qadd.h. Everything a toolchain decides (TFLite,
// PyTorch's engines, ONNX Runtime) arrives in them already resolved into numbers and
// arithmetic-named rules by quant/ (quant/scheme.h): scales, zero points, fixed-point multipliers
// and shifts, a rounding rule, the clamp range. No scheme name reaches these functions.
//
// Every rounding is written out below and needs no floating-point environment: round_half_even
// does not call nearbyint (which follows fesetround), so a kernel's bits never depend on a mode
// left behind by other code.
//
// The quantized-value convention shared by every op: a tensor of int8 or uint8 values q with a
// scale s (float32) and zero point zp (int32) stands for the real values s * (q - zp).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/host_device.h"
#include "core/tensor.h"

namespace driftlab {

// Ties of a float-to-integer rounding.
enum class RoundRule {
  half_away,  // std::round: TFLite's TfLiteRound, gemmlowp
  half_even,  // nearbyint under FE_TONEAREST: PyTorch (ATen, qnnpack, oneDNN), numpy.round (ONNX Runtime)
};
const char* round_rule_name(RoundRule r);

// Rounds v to an integer-valued float. Exact for every float: v - floor(v) is exact below 2^23
// and every float at or above 2^23 is already an integer.
template <typename F>
DL_HOST_DEVICE inline F round_with(F v, RoundRule rule) {
  if (!(v == v)) return v;  // NaN stays NaN; the caller decides what it becomes
  F f = std::floor(v);
  F frac = v - f;
  if (frac > F(0.5)) return f + F(1);
  if (frac < F(0.5)) return f;
  // a tie: x.5 exactly
  if (rule == RoundRule::half_away) return v < F(0) ? f : f + F(1);
  F half = f * F(0.5);
  return std::floor(half) == half ? f : f + F(1);  // f even: keep it
}

// --------------------------------------------------------------------------------------------
// Fixed-point requantization (gemmlowp, TFLite). A real multiplier M in (0, 1) or above is held as
// an int32 m0 in [2^30, 2^31) and a shift with M ~= m0 * 2^(shift - 31).

struct FixedPointMultiplier {
  int32_t m0 = 0;
  int32_t shift = 0;
};

// TFLite QuantizeMultiplier (tensorflow/lite/kernels/internal/quantization_util.cc): M == 0 gives
// (0, 0); q = frexp(M, &shift); m0 = round_half_away(q * 2^31) (int64); m0 == 2^31 halves it and
// adds one to shift; a shift below -31 gives (0, 0) (every bit would be shifted out). With
// single_rounding (TFLITE_SINGLE_ROUNDING), a shift above 30 saturates to (2^31 - 1, 30).
// M must be finite and non-negative (checked: throws naming the value).
FixedPointMultiplier quantize_multiplier(double m, bool single_rounding);

// gemmlowp SaturatingRoundingDoublingHighMul: the high 32 bits of 2*a*b, rounded by a nudge of
// +2^30 (a*b >= 0) or 1-2^30 (a*b < 0) and a division by 2^31 that truncates toward zero. The
// nudge makes ties round toward +infinity, not away from zero: 2*(-1)*2^30 / 2^32 = -0.5 gives 0,
// -1.5 gives -1 (tests/ops/test_quant_kernels.cpp). The one overflow (a == b == INT32_MIN)
// saturates to INT32_MAX.
DL_HOST_DEVICE inline int32_t sat_rounding_doubling_high_mul(int32_t a, int32_t b) {
  if (a == b && a == INT32_MIN) return INT32_MAX;
  const int64_t ab = static_cast<int64_t>(a) * static_cast<int64_t>(b);
  const int64_t nudge = ab >= 0 ? (int64_t{1} << 30) : (int64_t{1} - (int64_t{1} << 30));
  return static_cast<int32_t>((ab + nudge) / (int64_t{1} << 31));  // C++ '/' truncates toward zero
}

// gemmlowp RoundingDivideByPOT: x / 2^e rounded half away from zero, e in [0, 31]
// (mask = 2^e - 1 formed in int64 so that e = 31 is defined).
DL_HOST_DEVICE inline int32_t rounding_divide_by_pot(int32_t x, int e) {
  const int32_t mask = static_cast<int32_t>((int64_t{1} << e) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> e) + (remainder > threshold ? 1 : 0);  // >> of a negative int32: arithmetic (C++20, every compiler)
}

// TFLite MultiplyByQuantizedMultiplier, double rounding (the default build): left shift
// max(shift, 0) (wrapping in two's complement as TFLite's int32 product does on every target),
// the rounding doubling high multiply, then a rounding right shift by max(-shift, 0).
DL_HOST_DEVICE inline int32_t mbqm_double_rounding(int32_t x, FixedPointMultiplier m) {
  const int left = m.shift > 0 ? m.shift : 0;
  const int right = m.shift > 0 ? 0 : -m.shift;
  const int32_t shifted = static_cast<int32_t>(static_cast<uint32_t>(x) << left);
  return rounding_divide_by_pot(sat_rounding_doubling_high_mul(shifted, m.m0), right);
}

// TFLite MultiplyByQuantizedMultiplier under TFLITE_SINGLE_ROUNDING: one rounding in int64,
// (x * m0 + 2^(30 - shift)) >> (31 - shift), shift in [-31, 30]. A result outside int32 (TFLite
// DCHECKs it cannot happen) saturates here.
DL_HOST_DEVICE inline int32_t mbqm_single_rounding(int32_t x, FixedPointMultiplier m) {
  const int total = 31 - m.shift;
  const int64_t round = int64_t{1} << (total - 1);
  int64_t r = (static_cast<int64_t>(x) * m.m0 + round) >> total;
  if (r > INT32_MAX) r = INT32_MAX;
  if (r < INT32_MIN) r = INT32_MIN;
  return static_cast<int32_t>(r);
}

// --------------------------------------------------------------------------------------------
// Requantization: an int32 accumulator to an output integer.

enum class RequantRule {
  fixed_point_double_rounding,  // TFLite default: mbqm_double_rounding
  fixed_point_single_rounding,  // TFLite with TFLITE_SINGLE_ROUNDING
  float_multiply,               // qnnpack, fbgemm, ONNX Runtime MLAS: round(float(acc) [+ bias] * scale) + zp
  float_multiply_add_zp,        // oneDNN (PyTorch onednn engine): round((float(acc) [+ bias]) * scale + float(zp))
};
const char* requant_rule_name(RequantRule r);

// One output channel's numbers.
struct RequantChannel {
  FixedPointMultiplier fixed;  // fixed-point rules
  float scale = 0.f;           // float_multiply: the multiplier (s_in * s_w / s_out, formed by quant/)
  float bias = 0.f;            // float_multiply: added to float(acc) before the multiply (oneDNN, fbgemm)
};

struct Requant {
  RequantRule rule = RequantRule::float_multiply;
  RoundRule round = RoundRule::half_even;  // float_multiply's rounding (the fixed rules round as written above)
  int32_t zero_point = 0;                  // added after the multiply
  int32_t lo = 0, hi = 255;                // clamp of the result (ReLU fused: lo = max(qmin, zero_point))
  std::vector<RequantChannel> channels;    // one per output channel, or one for every channel

  const RequantChannel& channel(int64_t c) const { return channels.size() == 1 ? channels[0] : channels[c]; }
  void validate(const char* op, int64_t num_channels) const;  // throws naming op and the bad field
};

// acc already holds any int32 bias. Float rule: v = float(acc) + bias (only when bias != 0: adding
// +0.f would turn -0 into +0, which rounds the same, so this is only a speed choice), v *= scale,
// clamped to [lo - zp, hi - zp] in float (which also sends NaN to lo - zp and saturates infinities),
// rounded, plus zp. Fixed rules: mbqm(acc) + zp, clamped.
DL_HOST_DEVICE inline int32_t requantize_one(int32_t acc, const RequantChannel& ch, RequantRule rule,
                                             RoundRule round, int32_t zp, int32_t lo, int32_t hi) {
  if (rule == RequantRule::float_multiply_add_zp) {
    // The zero point joins before the rounding (oneDNN's output scale then shift): the clamp is
    // then on [lo, hi] directly.
    float v = static_cast<float>(acc);
    if (ch.bias != 0.f) v = v + ch.bias;
    v = v * ch.scale + static_cast<float>(zp);
    const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
    v = v < flo ? flo : v;
    v = v > fhi ? fhi : v;
    if (!(v == v)) v = flo;
    return static_cast<int32_t>(round_with(v, round));
  }
  if (rule == RequantRule::float_multiply) {
    float v = static_cast<float>(acc);
    if (ch.bias != 0.f) v = v + ch.bias;
    v = v * ch.scale;
    const float flo = static_cast<float>(lo - zp), fhi = static_cast<float>(hi - zp);
    v = v < flo ? flo : v;  // NaN compares false twice: becomes flo below
    v = v > fhi ? fhi : v;
    if (!(v == v)) v = flo;
    return static_cast<int32_t>(round_with(v, round)) + zp;
  }
  int64_t r = rule == RequantRule::fixed_point_double_rounding ? mbqm_double_rounding(acc, ch.fixed)
                                                               : mbqm_single_rounding(acc, ch.fixed);
  r += zp;
  return static_cast<int32_t>(r < lo ? lo : (r > hi ? hi : r));
}

// --------------------------------------------------------------------------------------------
// Quantized convolution and dense layer: acc[k] = sum over the window of (x_q - x_zp) * w_q
// (the weight zero point is 0 in every scheme driftlab models: symmetric weights), plus the int32
// bias, in int32 (exact: every term is an integer; the build refuses shapes whose sum could leave
// int32), then requantized. Padding reads x_zp (the real value 0).

// How a conv/dense with uint8 activations sums its products before the bias and requantization.
enum class DotRule {
  // acc = sum (x - x_zp) * w in int32: the integer convolution. What VNNI's VPDPBUSD, qnnpack,
  // TFLite's reference kernels and every int8 kernel on a CPU with AVX-512 VNNI / AVX-VNNI compute.
  exact,
  // x86 without VNNI (AVX2, or AVX-512 before VNNI), as oneDNN's int8 conv and inner product run
  // there (PyTorch's onednn engine): VPMADDUBSW multiplies the stored uint8 values (not x - x_zp) by
  // the int8 weights and adds the two products of a pair into an int16 with saturation
  // ([-32768, 32767]); VPMADDWD then adds pairs in int32, and x_zp * sum(w) is subtracted after.
  // acc = sum over pairs sat16(x[a] w[a] + x[b] w[b]) - x_zp * sum w. Pairs: input channels 2j and
  // 2j+1 of one kernel tap (an odd channel count pairs the last with nothing); dense: inputs 2j,
  // 2j+1. Padding taps add nothing. Equal to `exact` unless a pair leaves int16. uint8 activations
  // only. Ran against PyTorch 1.13's onednn engine on Zen 3 (docs/QUANT_SOURCES.md section S2.9).
  int16_pairs_channels,
  // The same int16 pairs as ONNX Runtime's MLAS runs a u8 x s8 QGEMM on x86 without VNNI: adjacent
  // terms 2j, 2j+1 of the im2col row in (kh, kw, c) order, so with an odd channel count a pair
  // spans two taps; a padding tap enters as the stored zero point; dense: inputs 2j, 2j+1. int8
  // activations are run as uint8 + 128 with zero point + 128 (ORT's x86 QDQ rewrite). Ran against
  // ONNX Runtime 1.23 on Zen 3 (docs/QUANT_SOURCES.md section S2.9).
  int16_pairs_hwc,
};

// Throws naming op when `terms` products per output could leave the int32 accumulator (the
// validate() of qconv2d and qdense; `bias`: an int32 bias is added too).
void check_acc_fits(const char* op, DType x, int64_t terms, bool bias);

}  // namespace driftlab
