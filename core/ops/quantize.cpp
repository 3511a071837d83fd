#include "core/ops/quantize.h"

#include <cmath>

#include "core/error.h"

namespace driftlab {

const char* scale_op_name(ScaleOp s) {
  switch (s) {
    case ScaleOp::divide: return "divide";
    case ScaleOp::mul_reciprocal: return "mul_reciprocal";
  }
  return "?";
}

void check_zero_point(const char* op, const char* field, int64_t zp, DType dtype) {
  if (dtype != DType::i8 && dtype != DType::u8) return;
  const int64_t lo = dtype == DType::i8 ? -128 : 0, hi = dtype == DType::i8 ? 127 : 255;
  check(zp >= lo && zp <= hi, op, ": ", field, " zero point ", zp, " is outside ", dtype_name(dtype), "'s ", lo, "..",
        hi);
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
  for (int32_t zp : zero_point) check_zero_point(op, "the", zp, dtype);
}

}  // namespace driftlab
