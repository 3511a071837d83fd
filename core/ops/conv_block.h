// conv_block: a convolution, its bias, an activation and a max pooling as one op, so that a kernel
// can run the four per image (LeNet's blocks: conv -> relu -> maxpool) with the image's
// activations in L1/L2 instead of four batch-wide passes through memory.
//
//   z = conv2d(x, w) + b           (core/ops/conv2d.h, every Conv2dParams field)
//   a = activation(z)              (core/ops/activation.h, the shared per-element formulas)
//   y = maxpool2d(a)               (core/ops/pool2d.h: max_scan_takes, ties first | all)
//
// The op means exactly the three layers one after the other: its reference kernel
// (kernels/cpu/ref/conv_block_ref.cpp) is the three reference kernels composed. A fast kernel
// differs from it only in the order of the convolution's sums (and of dw, db over the batch); the
// activation and the pooling are computed with the same formulas and scan, so y equals
// maxpool(act(z)) of its own z bit for bit.
//
// forward writes y (=) and, when z is given, the pre-activation z (N,K,P,Q) for the backward
// (the activation's gradient reads z, and the pooling finds each window's winner again in act(z)).
// backward writes dx (=) when dx is given, and ADDS into dw and db when dw is given (param_grads).
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "core/ops/activation.h"
#include "core/ops/conv2d.h"
#include "core/ops/pool2d.h"

namespace driftlab {

struct ConvBlockParams {
  Conv2dParams conv;  // n is the batch
  bool bias = true;
  ActivationParams act;
  Pool2dParams pool;  // max pooling over (n, conv.k, conv.out_h(), conv.out_w())

  Shape x_shape() const { return conv.x_shape(); }
  Shape z_shape() const { return conv.y_shape(); }
  Shape y_shape() const { return pool.y_shape(); }
  std::string str() const;
  void validate() const;  // throws when the three parts do not chain
};

struct ConvBlockKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const ConvBlockParams&, DType) = nullptr;
  void (*forward)(const ConvBlockParams&, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,
                  Tensor* z) = nullptr;
  void (*backward)(const ConvBlockParams&, const Tensor& x, const Tensor& w, const Tensor& z, const Tensor& dy,
                   Tensor* dx, Tensor* dw, Tensor* db) = nullptr;
};

}  // namespace driftlab
