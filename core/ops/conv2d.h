// conv2d: explicit parameters, shape inference and the kernel table.
// Layouts: x (N,C,H,W), w (K,C/G,R,S) [OIHW], b (K), y (N,K,P,Q), G = groups.
// y[n,k,p,q] = b[k] + sum_{c',r,s} x[n,g*C/G + c',p*sh - pad_t + r*dh, q*sw - pad_l + s*dw] * w'[k,c',r,s]
// where g = k / (K/G) is output channel k's group (G = C: depthwise), and w' = w, or w rotated
// 180 degrees in (r,s) when flip is set (true convolution).
//
// Kernel contract: forward writes y (=); backward_data writes dx (=);
// backward_weight ADDS into dw and db (+=) so that gradients accumulate across calls.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "core/ops/common.h"

namespace driftlab {

// How a convolution forms its sums. direct: the products of the definition above, summed (every
// kernel here, and the frameworks' CPU convolutions: PyTorch's mkldnn convolution runs oneDNN's
// direct primitives). winograd: oneDNN's F(4x4, 3x3) Winograd primitives (jit_wino_4x3) where
// oneDNN has one for the shape (3x3, stride 1, no dilation, groups 1, float32, in all three passes),
// which transform tiles of x and w, multiply them elementwise and transform back: fewer
// multiplications, another rounding (bench/bm_conv_algorithms measures both). Only the oneDNN
// kernel runs it (Conv2dLayer refuses it on another conv_backend); where oneDNN has no Winograd
// primitive, and for a convolution that kernel runs as a dense layer, the direct algorithm runs
// (Conv2dKernel::algorithm names the one these params run).
enum class ConvAlgorithm { direct, winograd };

struct Conv2dParams {
  int64_t n = 1, c = 1, h = 1, w = 1;  // input
  int64_t k = 1, r = 1, s = 1;         // output channels, kernel rows, kernel cols
  int64_t stride_h = 1, stride_w = 1;
  int64_t dil_h = 1, dil_w = 1;
  int64_t pad_t = 0, pad_b = 0, pad_l = 0, pad_r = 0;  // explicit, possibly asymmetric
  bool flip = false;                    // rotate the kernel 180 degrees (Theano filter_flip)
  int64_t groups = 1;                   // C and K split into this many independent convolutions
  SumOrder sum_order = SumOrder::ascending;  // reference kernels only
  ConvAlgorithm algorithm = ConvAlgorithm::direct;  // the oneDNN kernel only (above)

  int64_t out_h() const { return (h + pad_t + pad_b - dil_h * (r - 1) - 1) / stride_h + 1; }
  int64_t out_w() const { return (w + pad_l + pad_r - dil_w * (s - 1) - 1) / stride_w + 1; }
  Shape x_shape() const { return {n, c, h, w}; }
  int64_t c_per_group() const { return c / groups; }
  Shape w_shape() const { return {k, c / groups, r, s}; }
  Shape y_shape() const { return {n, k, out_h(), out_w()}; }
  std::string str() const;
  void validate() const;  // throws with every value when inconsistent
};

// Explicit pads for a 'same' output of ceil(n/stride) along one axis.
// extra_after: the odd pixel goes after (TF); otherwise before (Keras-on-Theano crop).
struct AxisPad {
  int64_t before, after;
};
AxisPad same_padding(int64_t n, int64_t k, int64_t stride, int64_t dilation, bool extra_after);

using Conv2dForwardFn = void (*)(const Conv2dParams&, const Tensor& x, const Tensor& w,
                                 const Tensor* b, Tensor& y);
using Conv2dBackwardDataFn = void (*)(const Conv2dParams&, const Tensor& dy, const Tensor& w,
                                      Tensor& dx);
using Conv2dBackwardWeightFn = void (*)(const Conv2dParams&, const Tensor& x, const Tensor& dy,
                                        Tensor& dw, Tensor* db);

// A training step's pair, offered by kernels that reorder their operands (oneDNN): a recorded
// forward that keeps what backward_weight would otherwise redo (x in the primitive's layout;
// `keep` stays null where nothing needs keeping), and both gradients in one call: dx (=, where dx
// is not null) and dw/db (+=, where dw is not null; db may be null), dy reordered once for both and
// the kept x used instead of reordering x again. The same primitives on the same bytes as forward,
// backward_data and backward_weight: the same bits. `keep` is only for the x it was made from.
using Conv2dForwardKeepFn = void (*)(const Conv2dParams&, const Tensor& x, const Tensor& w, const Tensor* b,
                                     Tensor& y, std::shared_ptr<void>* keep);
using Conv2dBackwardBothFn = void (*)(const Conv2dParams&, const Tensor& x, const Tensor& dy, const Tensor& w,
                                      Tensor* dx, Tensor* dw, Tensor* db, const std::shared_ptr<void>& keep);

// A per-channel batchnorm (inference) and activation that a convolution runs on its own values
// (a graph's prediction runs a depthwise convolution with the batchnorm and ReLU or clip before it
// and the ones after it as one op):
//   act(gamma[c] * ((v - mean[c]) * scale[c]) + beta[c]),
// act none, relu_value or clip_value(., clip_min, clip_max) (core/ops/activation.h: NaN kept). A
// batchnorm's inference forward in its order (BatchNormKernel::infer_scale gives scale), then the
// activation: the bits of the ops run one after another. mean, scale, gamma, beta: one value per
// channel each (C before the convolution, K after), x's dtype.
struct ConvChannelOp {
  enum class Act { none, relu, clip };
  Tensor mean, scale, gamma, beta;
  Act act = Act::none;
  double clip_min = 0.0, clip_max = 0.0;
};
// pre (may be null): the ConvChannelOp on each input value before the convolution reads it (the
// padding stays 0, as around the separate op's output); post (may be null): on each output value,
// its bias added, as it is stored.
using Conv2dForwardFusedFn = void (*)(const Conv2dParams&, const Tensor& x, const Tensor& w, const Tensor* b,
                                      const ConvChannelOp* pre, const ConvChannelOp* post, Tensor& y);

struct Conv2dKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const Conv2dParams&, DType) = nullptr;
  Conv2dForwardFn forward = nullptr;
  Conv2dBackwardDataFn backward_data = nullptr;
  Conv2dBackwardWeightFn backward_weight = nullptr;
  Conv2dForwardKeepFn forward_keep = nullptr;    // optional (above)
  Conv2dBackwardBothFn backward_both = nullptr;  // optional, offered with forward_keep
  // Optional: the channel block (engine/layers/layout.h) in which this kernel reads and writes x, y,
  // dy and dx without a reorder, 0 where none. Kernels that offer it take those tensors in that
  // block or plain, each argument as its Tensor says; every other kernel takes plain tensors only.
  int (*channel_block)() = nullptr;
  // Optional: whether, for these params, this kernel reads x and dy in any channel block (plain or
  // blocked) and writes y and dx in x's, as per-channel layers do (a depthwise convolution with one
  // output channel per input channel). Where it says so the layer passes its input's layout through.
  bool (*any_block)(const Conv2dParams&, DType) = nullptr;
  // Optional: the forward with ConvChannelOps before and after it, for the params any_block accepts and
  // channel-blocked x and y (a prediction's op; the layer asks any_block and x's block first).
  Conv2dForwardFusedFn forward_fused = nullptr;
  // Optional, for a kernel that picks its algorithm by shape: the name of the one these params run
  // (oneDNN: "direct", "winograd" where p.algorithm asks for it and oneDNN has the primitive, or
  // "gemm" for a convolution that is a dense layer).
  const char* (*algorithm)(const Conv2dParams&) = nullptr;
};


}  // namespace driftlab
