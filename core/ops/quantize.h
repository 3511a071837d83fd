// Quantize (float32 -> int8, uint8 or int32) and dequantize (back): the params, the per-element
// formulas every backend calls (reference, fast CPU, CUDA: DL_HOST_DEVICE), the kernel table.
// Per tensor, or per channel of one axis; any shape, the output the input's (every element
// written). The rounding rules are core/ops/requant.h's.
#pragma once
#include <cstdint>
#include <vector>

#include "core/host_device.h"
#include "core/tensor.h"
#include "core/ops/requant.h"

namespace driftlab {

// Quantize (float -> int) and dequantize (int -> float).

enum class ScaleOp {
  divide,          // x / s: TFLite Quantize, ONNX QuantizeLinear
  mul_reciprocal,  // x * (1/s) with 1/s rounded to float32 first: PyTorch quantize_per_tensor
};
const char* scale_op_name(ScaleOp s);

// Throws "op: field zero point Z is outside DTYPE's LO..HI" unless zp is a value of dtype (int8 or
// uint8; other dtypes are not checked): q - zp then cannot leave int32 for any q of the type.
void check_zero_point(const char* op, const char* field, int64_t zp, DType dtype);

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

using QuantizeFn = void (*)(const QuantizeParams&, const Tensor& x, Tensor& q);
using DequantizeFn = void (*)(const QuantizeParams&, const Tensor& q, Tensor& x);

struct QuantizeKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const QuantizeParams&, DType) = nullptr;
  QuantizeFn quantize = nullptr;
  DequantizeFn dequantize = nullptr;
};

}  // namespace driftlab
