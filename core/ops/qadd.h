// The quantized elementwise add (the residual add): a, b, y int8|uint8 of one shape, each with its
// own scale and zero point, every output written (=). QAddRule: the toolchains' formulas; qadd_one
// is the per-element formula the reference and CUDA kernels call, its fixed-point steps
// core/ops/requant.h's.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "core/tensor.h"
#include "core/ops/requant.h"

namespace driftlab {

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
  // ran: docs/QUANT_SOURCES.md section S2.5): ratios r_a = s_a/s_y, r_b = s_b/s_y in float32; one fixed part
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

struct QAddKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const QAddParams&, DType) = nullptr;
  QAddFn forward = nullptr;
};

}  // namespace driftlab
