// Dynamic-range ("weights-only") quantized dense product: y = x W^T + b with float32 x and y, int8
// weights W (out,in) with one scale per tensor or per output row (zero point 0), and a float32
// bias. At every call the input is quantized with a scale and zero point chosen from its own values
// (PyTorch quantize_dynamic's Linear/LSTM/GRU, ONNX Runtime DynamicQuantizeLinear + MatMulInteger,
// TFLite's hybrid kernels); the product is exact in int32; the float output is formed by one of the
// rules below. As in core/ops/requant.h, toolchains arrive here only as arithmetic-named rules.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "core/ops/quantize.h"
#include "core/ops/requant.h"

namespace driftlab {

// How the input's quantization is chosen from its values.
enum class DynActRule {
  // One uint8 scale and zero point for the whole call (every row), in double: min/max stretched to
  // include 0; s = (double(max) - min) / (qmax - qmin); s -> 0.1 when float(s) == 0 or 1/float(s) is
  // inf; s < 6.1e-5 -> 6.1e-5 with min/max stretched by the same factor (or the non-zero end set to
  // +-6.1e-5 * (qmax - qmin)); the zero point from min or max, whichever has the smaller error
  // |qmin| - |min/s| vs |qmax| - |max/s| (double), clamped, round half even. The ints are
  // clamp(round(x op s) + zp, 0, 255) (the storage range, whatever qmin/qmax the scale was chosen for).
  affine_double,
  // One uint8 scale and zero point for the whole call, in float32: min/max stretched to include 0;
  // s = max == min ? 1 : (max - min) / (qmax - qmin); zp = round(clamp(qmin - min/s, qmin, qmax)).
  affine_float,
  // Symmetric int8 per row: r = max|x| over the row; r == 0 gives s = 1 and all-zero ints; else
  // s = r / qmax and q = clamp(round(x * (qmax / r)), -qmax, qmax) (the reciprocal formed as
  // qmax / r, not 1 / s).
  symmetric_per_row,
  // Asymmetric int8 per row, in double: rmin = min(0, min), rmax = max(0, max); rmin == rmax gives
  // s = 1, zp = 0, ints 0; else s = (rmax - rmin) / (qmax - qmin); the zero point from min or max,
  // whichever has the smaller error |qmin| + |rmin/s| vs |qmax| + |rmax/s|, <= qmin -> qmin, >= qmax ->
  // qmax, else round; s stored as float32; q = clamp(round(zp + x * (1/s)), qmin, qmax): the zero
  // point added before the rounding, in float32.
  affine_per_row,
};
const char* dyn_act_rule_name(DynActRule r);

// How the float output is formed from the exact int32 sum acc of (x_q - zp) * w_q.
enum class DynOutRule {
  // y = float(acc) * (s_x * s_w[c]) + b[c]: the scale product in float32, one multiply, then the
  // bias added.
  scale_then_bias,
  // y = (float(acc) + b[c] * bs) * (1 / bs) with bs = (1/s_x) * (1/s_w[c]), every step float32: the
  // bias pre-scaled into the accumulator's units, then one output scale.
  prescaled_bias,
};
const char* dyn_out_rule_name(DynOutRule r);

struct QDenseDynamicParams {
  int64_t n = 1, in = 1, out = 1;  // x (n,in) . w (out,in)^T
  DynActRule act = DynActRule::affine_double;
  int32_t qmin = 0, qmax = 255;    // the range the input's scale is chosen for (0..127: reduce_range)
  ScaleOp x_op = ScaleOp::mul_reciprocal;  // affine rules: x * (1/s) or x / s
  RoundRule x_round = RoundRule::half_even;
  DynOutRule out_rule = DynOutRule::scale_then_bias;
  bool has_bias = false;
  void validate() const;  // throws naming the field
};

// The input quantization a call chooses: one scale/zero point (affine rules) or one per row.
// `inv` is the multiplier the ints are formed with under ScaleOp::mul_reciprocal: 1/s (float32) for
// the affine rules, qmax/r for symmetric_per_row (0 for an all-zero row).
struct DynInputQ {
  std::vector<float> scale, inv;
  std::vector<int32_t> zero_point;
  float inv_of(int64_t row) const { return inv.size() == 1 ? inv[0] : inv[row]; }
  float scale_of(int64_t row) const { return scale.size() == 1 ? scale[0] : scale[row]; }
  int32_t zero_point_of(int64_t row) const { return zero_point.size() == 1 ? zero_point[0] : zero_point[row]; }
};
// Chooses it for x (n,in) row-major; throws naming the first non-finite element.
DynInputQ choose_dynamic_input_q(const QDenseDynamicParams& p, const float* x);
// The affine rules for one observed [min, max] (exposed for tests).
struct ScaleZeroPoint {
  float scale = 1;
  int32_t zero_point = 0;
};
ScaleZeroPoint choose_affine_double(float min, float max, int32_t qmin, int32_t qmax);
ScaleZeroPoint choose_affine_float(float min, float max, int32_t qmin, int32_t qmax);
ScaleZeroPoint choose_affine_row(float min, float max, int32_t qmin, int32_t qmax, RoundRule round);

// x f32 (n,in), w i8 (out,in), w_scale f32 (1) or (out), bias f32 (out) or null; y f32 (n,out).
using QDenseDynamicFn = void (*)(const QDenseDynamicParams&, const Tensor& x, const Tensor& w, const Tensor& w_scale,
                                 const Tensor* bias, Tensor& y);
struct QDenseDynamicKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const QDenseDynamicParams&, DType) = nullptr;
  QDenseDynamicFn forward = nullptr;
};

}  // namespace driftlab
