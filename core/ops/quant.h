// Integer (int8/uint8) ops: quantize, dequantize, requantize, and the quantized convolution,
// dense layer and max pooling. Everything a toolchain decides (TFLite, PyTorch's engines, ONNX
// Runtime) arrives here already resolved into numbers and arithmetic-named rules by quant/
// (quant/scheme.h): scales, zero points, fixed-point multipliers and shifts, a rounding rule, the
// clamp range. No scheme name reaches these functions.
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
#include <string>
#include <vector>

#include "core/host_device.h"
#include "core/tensor.h"
#include "core/ops/conv2d.h"
#include "core/ops/pool2d.h"

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
// Quantize (float -> int) and dequantize (int -> float).

enum class ScaleOp {
  divide,          // x / s: TFLite Quantize, ONNX QuantizeLinear
  mul_reciprocal,  // x * (1/s) with 1/s rounded to float32 first: PyTorch quantize_per_tensor
};
const char* scale_op_name(ScaleOp s);

struct QuantizeParams {
  std::vector<float> scale;  // one, or one per channel of `axis`
  std::vector<int32_t> zero_point;
  int axis = -1;             // the channel axis when per channel (-1: per tensor)
  ScaleOp op = ScaleOp::divide;
  RoundRule round = RoundRule::half_even;
  int32_t qmin = -128, qmax = 127;  // clamp (the storage type's range or narrower)
  DType dtype = DType::i8;          // int8, uint8 or int32 (biases)
  void validate(const char* op) const;
};

// q = clamp(round(x op s) + zp, qmin, qmax), the clamp done in float before the conversion to
// int (so infinities saturate and NaN becomes qmin). x/s and x*(1/s) are float32 operations.
DL_HOST_DEVICE inline int32_t quantize_one(float x, float scale, float inv_scale, int32_t zp, ScaleOp op,
                                           RoundRule round, int32_t qmin, int32_t qmax) {
  float v = op == ScaleOp::divide ? x / scale : x * inv_scale;
  v = round_with(v, round);
  const float flo = static_cast<float>(qmin) - static_cast<float>(zp);
  const float fhi = static_cast<float>(qmax) - static_cast<float>(zp);
  if (!(v >= flo)) v = flo;  // also NaN
  if (v > fhi) v = fhi;
  return static_cast<int32_t>(v) + zp;
}

// y = (float)(q - zp) * s: the integer difference is exact, then one float32 multiply
// (torch dequantize, TFLite Dequantize, ONNX DequantizeLinear all compute this).
DL_HOST_DEVICE inline float dequantize_one(int32_t q, int32_t zp, float scale) {
  return static_cast<float>(q - zp) * scale;
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
  // only. Ran against PyTorch 1.13's onednn engine on Zen 3 (docs/QUANT_SOURCES.md S2.9).
  int16_pairs_channels,
  // The same int16 pairs as ONNX Runtime's MLAS runs a u8 x s8 QGEMM on x86 without VNNI: adjacent
  // terms 2j, 2j+1 of the im2col row in (kh, kw, c) order, so with an odd channel count a pair
  // spans two taps; a padding tap enters as the stored zero point; dense: inputs 2j, 2j+1. int8
  // activations are run as uint8 + 128 with zero point + 128 (ORT's x86 QDQ rewrite). Ran against
  // ONNX Runtime 1.23 on Zen 3 (docs/QUANT_SOURCES.md S2.9).
  int16_pairs_hwc,
};

struct QConv2dParams {
  Conv2dParams g;                 // geometry (flip must be false: quant/ flips the weights once)
  DType x_dtype = DType::u8, y_dtype = DType::u8;
  int32_t x_zero_point = 0;
  bool has_bias = false;          // an int32 bias (K) added to the accumulator
  Requant rq;
  DotRule dot = DotRule::exact;   // int16_pairs_channels needs uint8 activations
  void validate() const;          // throws naming what is wrong
};

struct QDenseParams {
  int64_t n = 1, in = 1, out = 1;  // x (n,in) . w (out,in)^T
  DType x_dtype = DType::u8, y_dtype = DType::u8;
  int32_t x_zero_point = 0;
  bool has_bias = false;
  Requant rq;
  DotRule dot = DotRule::exact;
  void validate() const;
};

// Max pooling on quantized values: the integer max (monotone in the real value for any positive
// scale), input and output sharing scale and zero point (what PyTorch's, TFLite's and ORT's
// quantized max pools do). The geometry's padding reads the type's minimum.
struct QPool2dParams {
  Pool2dParams g;
  DType dtype = DType::u8;
};

// Elementwise add of two quantized tensors of one shape (the residual add), each with its own
// scale and zero point, into the output's: y = clamp(requant(s_a*(a - za) + s_b*(b - zb))).
enum class QAddRule {
  // qnnpack (pytorch_qnnp_compute_add_quantization_params): ratios s_a/s_y, s_b/s_y in float32;
  // shift = 21 - exponent(max ratio); am = lrintf(ratio_a * 2^shift) (bm likewise);
  // acc = am*(a - za) + bm*(b - zb) in int32; y = (acc >> shift) + (rem > mask/2), rem = (acc & mask) -
  // (acc < 0): ties away from zero; + zy.
  fixed_point_shift,
  // ATen's x86 qadd_kernel (PyTorch onednn and fbgemm engines): per input d = fmaf(s, float(q),
  // s*float(-z)) in the vectorised body, d = float(q - z) * s in the scalar tail (the last numel % 64
  // elements of the tensor in its memory order, channels-last for a converted model: see
  // QAddParams::nhwc); y = round_half_even((d_a + d_b) * (1/s_y)) + zy.
  float_fma_tail64,
  // ONNX Runtime's QLinearAdd as its x86-64 build runs it with AVX2 (MLAS qladd_avx2.cpp, ORT 1.23,
  // ran: docs/QUANT_SOURCES.md S2.5): ratios r_a = s_a/s_y, r_b = s_b/s_y in float32; one fixed part
  // F = float(zy) - fmaf(r_a, float(za), r_b*float(zb)) (the compiler contracts r_a*za + r_b*zb into
  // that fma); per element v = fmaf(float(a), r_a, fmaf(float(b), r_b, F)) on the STORED integers
  // (b's term first); y = saturate(round_half_even(v)) (cvtps2dq, then the int16 and int8/uint8
  // saturating packs; |v| >= 2^31 converts to INT32_MIN and saturates low). Every stored integer and
  // zero point is first shifted by QAddParams::offset (ORT on x86 runs an int8 QDQ graph as uint8 +
  // 128), which changes the float roundings, not the real values.
  float_ratio_fma,
  // TFLite's int8 ADD (tflite/kernels/add.cc Prepare, reference/integer_ops/add.h AddFunc; the spec
  // with sources and worked examples: docs/research/tflite_int8_add_mean_pool.md section 2):
  // left_shift 20; twice_max = 2*max(s_a, s_b) (double); ratios s_a/twice_max, s_b/twice_max and
  // twice_max/(2^20 * s_y) as QuantizeMultiplierSmallerThanOneExp in double; per element
  // A = (q - z) * 2^20, S = MBQM(A) (double rounding: RDBPOT(SRDHM(A, m), -shift)) for each input,
  // y = MBQM(S_a + S_b) + zy, clamped. The reference and x86-without-SSE4.1 path: TFLite's NEON
  // blocks of 16 (also NEON_2_SSE on x86 SSE4.1 builds) round the input stage once and can differ by
  // one in rare cases; XNNPACK's delegate is another formula again (not modelled).
  tflite_fixed_point,
};
const char* qadd_rule_name(QAddRule r);

struct QAddParams {
  QAddRule rule = QAddRule::fixed_point_shift;
  float a_scale = 1, b_scale = 1, y_scale = 1;
  int32_t a_zero_point = 0, b_zero_point = 0, y_zero_point = 0;
  int32_t lo = 0, hi = 255;  // clamp (a fused ReLU: lo = max(qmin, zy))
  DType dtype = DType::u8;
  // float_fma_tail64: which elements are in the scalar tail is decided in channels-last order of a
  // (N,C,H,W) tensor (the memory order PyTorch's quantized conv outputs have); {0,0,0,0}: flat order.
  int64_t n = 0, c = 0, h = 0, w = 0;
  // float_ratio_fma: added to a, b and every zero point before the float formula, taken off after
  // (128 for int8 values that ONNX Runtime's x86 graph rewrite runs as uint8; 0 otherwise)
  int32_t offset = 0;
  // fixed_point_shift: derived by resolve()
  int32_t a_mult = 0, b_mult = 0, shift = 0;
  // tflite_fixed_point: derived by resolve()
  FixedPointMultiplier a_fixed, b_fixed, y_fixed;
  // float_ratio_fma: derived by resolve()
  float a_ratio = 0, b_ratio = 0, fixed = 0;
  void resolve();  // computes the fixed-point multipliers and checks every field (throws naming it)
};

// Average over all of H*W per channel (global average pooling), N = H*W, x = sum(q) - N*zp_in (exact
// in int32 below N = 2^23), clamped to the type's range after each rule's rounding:
enum class QAvgPoolRule {
  // PyTorch adaptive_avg_pool2d on channels-last input, both engines: the output keeps the input's
  // scale and zero point, M = 1.0f/N (float32).
  shared_qparams,
  // ONNX Runtime QLinearGlobalAveragePool (MLAS qlgavgpool.cpp, ORT 1.23, ran: docs/QUANT_SOURCES.md
  // S2.5): the output has its own scale and zero point, M = s_in / (s_out * float(N)) in float32
  // (MLAS refuses M outside [2^-32, 256) and N >= 2^24: so does validate()).
  // Both float rules: y = round_half_even(float(x) * M) + zp_out.
  scale_ratio,
  // TFLite's MEAN over axes [1,2] as TF >= 2.13 runs it (reduce.cc PrepareMeanOrSum, reference/reduce.h
  // QuantizedMeanOrSum; docs/research/tflite_int8_add_mean_pool.md 3.4 P1), own output scale and
  // zero point: (M, shift) = QuantizeMultiplier(double(s_in) / double(s_out)); k = min(floor(log2 N),
  // 32, 31 + shift); M' = (int64(M) << k) / N truncated; y = MBQM(x, M', shift - k) (double rounding)
  // + zp_out.
  tflite_integer_mean,
  // TF <= 2.12's reference_integer_ops::Mean (ibid. P4): a = MBQM(x, M, shift) with the ratio's
  // multiplier (N not in it), then a > 0 ? (a + N/2) / N : (a - N/2) / N (C division, truncating:
  // ties away from zero), + zp_out.
  tflite_rounded_division,
};
const char* qavg_pool_rule_name(QAvgPoolRule r);

struct QGlobalAvgPoolParams {
  int64_t n = 1, c = 1, h = 1, w = 1;
  int32_t zero_point = 0;  // the input's
  DType dtype = DType::u8;
  QAvgPoolRule rule = QAvgPoolRule::shared_qparams;
  float in_scale = 1, out_scale = 1;  // every rule but shared_qparams
  int32_t out_zero_point = 0;         // every rule but shared_qparams (which keeps zero_point)
  bool own_qparams() const { return rule != QAvgPoolRule::shared_qparams; }
  int32_t output_zero_point() const { return own_qparams() ? out_zero_point : zero_point; }
  struct Resolved;
  Resolved resolve() const;  // the numbers of the rule (checks scales and count; throws naming them)
};

// What qgap_one needs, from QGlobalAvgPoolParams::resolve().
struct QGlobalAvgPoolParams::Resolved {
  QAvgPoolRule rule = QAvgPoolRule::shared_qparams;
  int64_t count = 1;
  int32_t zp_in = 0, zp_out = 0;
  float m = 1;                 // the float rules' M
  FixedPointMultiplier fixed;  // tflite_integer_mean: (M', shift - k); tflite_rounded_division: (M, shift)
};

// One element of the quantized add, shared by the reference kernel and the CUDA kernel (their bytes
// must agree): a and b the STORED integers, tmin/tmax the value type's range, `pos` the element's
// place in memory order (qadd_memory_pos) and `body` = numel - numel % 64 (float_fma_tail64 only:
// positions at or past it are ATen's scalar tail). p must be resolve()d. Returns the clamped output.
DL_HOST_DEVICE inline int32_t qadd_one(const QAddParams& p, int32_t a, int32_t b, int64_t pos, int64_t body,
                                       int32_t tmin, int32_t tmax) {
  const int32_t qa = a - p.a_zero_point, qb = b - p.b_zero_point;
  int64_t v;
  if (p.rule == QAddRule::float_ratio_fma) {
    // b's term first, then a's, each one fma; the stored integers (shifted by the offset)
    const float t = std::fma(static_cast<float>(b + p.offset), p.b_ratio, p.fixed);
    const float r = std::fma(static_cast<float>(a + p.offset), p.a_ratio, t);
    // cvtps2dq: round half even; |r| >= 2^31 (or NaN, impossible here) gives INT32_MIN
    const bool fits = r >= -2147483648.0f && r < 2147483648.0f;
    v = (fits ? static_cast<int64_t>(round_with(r, RoundRule::half_even)) : int64_t{INT32_MIN});
    // the saturating packs: to the (shifted) type's range, then the shift taken off
    const int64_t tlo = int64_t{tmin} + p.offset, thi = int64_t{tmax} + p.offset;
    v = (v < tlo ? tlo : (v > thi ? thi : v)) - p.offset;
    return static_cast<int32_t>(v < p.lo ? p.lo : (v > p.hi ? p.hi : v));
  }
  if (p.rule == QAddRule::tflite_fixed_point) {
    // |q - z| <= 255: (q - z) * 2^20 < 2^28.1, each scaled term at most half of it, their sum
    // < 2^28: no int32 overflow anywhere (docs/research/tflite_int8_add_mean_pool.md 2.3)
    const int32_t sa = mbqm_double_rounding(qa * (1 << 20), p.a_fixed);
    const int32_t sb = mbqm_double_rounding(qb * (1 << 20), p.b_fixed);
    v = mbqm_double_rounding(sa + sb, p.y_fixed);
  } else if (p.rule == QAddRule::fixed_point_shift) {
    const int32_t acc = p.a_mult * qa + p.b_mult * qb;  // |acc| < 2^22 * 255 * 2: int32
    const int32_t mask = static_cast<int32_t>((int64_t{1} << p.shift) - 1);
    const int32_t rem = (acc & mask) - (acc < 0 ? 1 : 0);
    v = (acc >> p.shift) + (rem > (mask >> 1) ? 1 : 0);
  } else {
    float da, db;
    if (pos < body) {
      da = std::fma(p.a_scale, static_cast<float>(a), p.a_scale * static_cast<float>(-p.a_zero_point));
      db = std::fma(p.b_scale, static_cast<float>(b), p.b_scale * static_cast<float>(-p.b_zero_point));
    } else {
      da = static_cast<float>(qa) * p.a_scale;
      db = static_cast<float>(qb) * p.b_scale;
    }
    const float c = (da + db) * (1.0f / p.y_scale);
    const float lo = static_cast<float>(INT32_MIN / 2), hi = static_cast<float>(INT32_MAX / 2);
    v = static_cast<int64_t>(round_with(c < lo ? lo : (c > hi ? hi : c), RoundRule::half_even));
  }
  v += p.y_zero_point;
  return static_cast<int32_t>(v < p.lo ? p.lo : (v > p.hi ? p.hi : v));
}

// Element i's (flat NCHW index) place in memory order: channels-last when p.n > 0 (QAddParams).
DL_HOST_DEVICE inline int64_t qadd_memory_pos(const QAddParams& p, int64_t i) {
  if (p.n <= 0) return i;
  const int64_t w = i % p.w, h = (i / p.w) % p.h, c = (i / (p.w * p.h)) % p.c, n = i / (p.w * p.h * p.c);
  return ((n * p.h + h) * p.w + w) * p.c + c;
}

using QAddFn = void (*)(const QAddParams&, const Tensor& a, const Tensor& b, Tensor& y);
// One output of the global average: `sum` the plane's stored values, clamped to [tmin, tmax].
// Shared by the reference, the fast CPU and the CUDA kernels. Float rules: |sum - count*zp| <
// 2^23 * 256 is exact in float32 below 2^24 only when count < 2^16, as every caller's is (an image
// plane); MLAS converts the same int32 the same way.
DL_HOST_DEVICE inline int32_t qgap_one(const QGlobalAvgPoolParams::Resolved& r, int64_t sum, int32_t tmin,
                                       int32_t tmax) {
  const int32_t x = static_cast<int32_t>(sum - r.count * r.zp_in);
  int64_t q;
  if (r.rule == QAvgPoolRule::tflite_integer_mean) {
    q = mbqm_double_rounding(x, r.fixed);
  } else if (r.rule == QAvgPoolRule::tflite_rounded_division) {
    const int32_t a = mbqm_double_rounding(x, r.fixed);
    const int32_t half = static_cast<int32_t>(r.count / 2), n = static_cast<int32_t>(r.count);
    q = a > 0 ? (a + half) / n : (a - half) / n;
  } else {
    q = static_cast<int64_t>(round_with(static_cast<float>(x) * r.m, RoundRule::half_even));
  }
  q += r.zp_out;
  return static_cast<int32_t>(q < tmin ? tmin : (q > tmax ? tmax : q));
}

using QGlobalAvgPoolFn = void (*)(const QGlobalAvgPoolParams&, const Tensor& x, Tensor& y);
struct QAddKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const QAddParams&, DType) = nullptr;
  QAddFn forward = nullptr;
};
struct QGlobalAvgPoolKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const QGlobalAvgPoolParams&, DType) = nullptr;
  QGlobalAvgPoolFn forward = nullptr;
};

using QConv2dForwardFn = void (*)(const QConv2dParams&, const Tensor& x, const Tensor& w, const Tensor* bias,
                                  Tensor& y);
using QDenseForwardFn = void (*)(const QDenseParams&, const Tensor& x, const Tensor& w, const Tensor* bias,
                                 Tensor& y);
using QMaxPool2dForwardFn = void (*)(const QPool2dParams&, const Tensor& x, Tensor& y);
using QuantizeFn = void (*)(const QuantizeParams&, const Tensor& x, Tensor& q);
using DequantizeFn = void (*)(const QuantizeParams&, const Tensor& q, Tensor& x);

struct QConv2dKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const QConv2dParams&, DType) = nullptr;
  QConv2dForwardFn forward = nullptr;
};
struct QDenseKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const QDenseParams&, DType) = nullptr;
  QDenseForwardFn forward = nullptr;
};
struct QMaxPool2dKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const QPool2dParams&, DType) = nullptr;
  QMaxPool2dForwardFn forward = nullptr;
};
struct QuantizeKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const QuantizeParams&, DType) = nullptr;
  QuantizeFn quantize = nullptr;
  DequantizeFn dequantize = nullptr;
};

}  // namespace driftlab
