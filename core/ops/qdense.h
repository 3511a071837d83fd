// Quantized dense layer: x (n,in) int8|uint8, w (out,in) int8, bias (out) int32 | null ->
// y (n,out) int8|uint8, every output written (=). acc[o] = sum_j (x_q - x_zp) * w_q, plus the
// bias, in int32 (DotRule), then requantized (Requant); both in core/ops/requant.h.
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "core/ops/requant.h"

namespace driftlab {

struct QDenseParams {
  int64_t n = 1, in = 1, out = 1;  // x (n,in) . w (out,in)^T
  DType x_dtype = DType::u8, y_dtype = DType::u8;
  int32_t x_zero_point = 0;
  bool has_bias = false;
  Requant rq;
  DotRule dot = DotRule::exact;
  void validate() const;
};

using QDenseForwardFn = void (*)(const QDenseParams&, const Tensor& x, const Tensor& w, const Tensor* bias,
                                 Tensor& y);

struct QDenseKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const QDenseParams&, DType) = nullptr;
  QDenseForwardFn forward = nullptr;
};

}  // namespace driftlab
