// Quantized convolution: x (N,C,H,W) int8|uint8, w (K,C/G,R,S) int8, bias (K) int32 | null ->
// y (N,K,P,Q) int8|uint8, every output written (=), G = g.groups (the float conv's grouping:
// core/ops/conv2d.h). acc[k] = sum over the window (of k's group's channels) of
// (x_q - x_zp) * w_q, plus the bias, in int32 (DotRule: how the products are summed), then
// requantized (Requant); both in core/ops/requant.h. Padding reads x_zp (the real value 0).
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "core/ops/conv2d.h"
#include "core/ops/requant.h"

namespace driftlab {

struct QConv2dParams {
  Conv2dParams g;                 // geometry (flip must be false: quant/ flips the weights once)
  DType x_dtype = DType::u8, y_dtype = DType::u8;
  int32_t x_zero_point = 0;
  bool has_bias = false;          // an int32 bias (K) added to the accumulator
  Requant rq;
  DotRule dot = DotRule::exact;   // int16_pairs_channels needs uint8 activations
  void validate() const;          // throws naming what is wrong
};

using QConv2dForwardFn = void (*)(const QConv2dParams&, const Tensor& x, const Tensor& w, const Tensor* bias,
                                  Tensor& y);

struct QConv2dKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const QConv2dParams&, DType) = nullptr;
  QConv2dForwardFn forward = nullptr;
};

}  // namespace driftlab
