// Batch normalisation over (N, C, S) with S = H*W (4-D input) or 1 (2-D input), per channel.
// Training:  mu = mean over (N,S); var = biased variance (1/n, n = N*S);
//            y = gamma * (x - mu) * invstd + beta, invstd = 1/sqrt(var + eps)
// Inference: y = gamma * (x - running_mean) / sqrt(running_var + eps) + beta, or with the
//            inverse-std estimator y = gamma * (x - running_mean) * running_invstd + beta.
// Running statistics: running <- keep*running + (1-keep)*batch_stat, where the variance
// statistic is the batch variance passed through `estimator` (the frameworks disagree here),
// optionally zero-debiased (TF assign_moving_average(zero_debias=True)).
// Kernels write y and dx with '='; dgamma and dbeta are ADDED into (+=).
// With `relu` set the kernels compute batchnorm followed by a ReLU as one op (below).
#pragma once
#include <cstdint>

#include "core/ops/activation.h"
#include "core/ops/common.h"
#include "core/tensor.h"

namespace driftlab {

// What is averaged into the running variance, given the biased batch variance v and n = N*S.
enum class BnVarEstimator {
  biased,            // v
  unbiased,          // v * n/(n-1)                            (PyTorch)
  keras_scaled,      // v * n/(n-1-eps)                        (Keras 2.1.4-2.3.1, 2-D on TF)
  keras_double,      // v * n/(n-1) * n/(n-1-eps)              (Keras 2.2.4 on TF, 4-D fused)
  keras_var_plus_eps,  // (v + eps) * n/(n-1-eps)              (Keras 2.2.4 on Theano)
  inv_std,           // 1/sqrt(v + eps); the running "variance" holds an inverse std (Lasagne)
};

struct BatchNormParams {
  int64_t n = 1, c = 1, s = 1;  // batch, channels, spatial size
  double eps = 1e-5;
  double keep = 0.9;            // running <- keep*running + (1-keep)*batch
  BnVarEstimator estimator = BnVarEstimator::unbiased;
  bool zero_debias = false;
  SumOrder sum_order = SumOrder::ascending;  // reference kernels only
  // A ReLU applied in the same passes (Sequential fuses a batchnorm followed by a relu into one
  // op): the forwards write relu_value(z), z = gamma * xhat + beta; the backwards take dy as the
  // gradient of relu_value(z) and use relu_grad(z, dy) (core/ops/activation.h, with the ReLU
  // layer's grad_at_zero and NaN rule) where the plain op uses dy, z recomputed from x by the
  // forward's own expression (the same bits), so nothing of z is kept. The results are those of
  // the two ops run one after the other, bit for bit.
  bool relu = false;
  double relu_grad_at_zero = 0.0;
  ReluNanGrad relu_nan_grad = ReluNanGrad::dy;
  // A clip (ReLU6, ONNX Clip: clip_value, NaN kept) applied in the same pass by the inference forward
  // only (forward_infer; a graph's prediction fuses a batchnorm and the clip after it): it writes
  // clip_value(z, clip_min, clip_max), the two ops' bits. Not with relu; every other entry refuses it.
  bool clip = false;
  double clip_min = 0.0, clip_max = 0.0;
};

// Inference semantics differentiated (attacks need dL/dx of the deployed model): with
// s = 1/sqrt(running_var + eps) (inv_std: s = running_var), a constant per channel,
//   dx = dy * (gamma*s);  dgamma += sum(dy * (x - running_mean)*s);  dbeta += sum(dy).
// The running statistics are read, never moved.
using BnForwardTrainFn = void (*)(const BatchNormParams&, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  Tensor& y, Tensor& mean, Tensor& var, Tensor& invstd);
// beta: read only under `relu` (z is recomputed), as in the forward.
using BnBackwardTrainFn = void (*)(const BatchNormParams&, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                   const Tensor& beta, const Tensor& mean, const Tensor& invstd, Tensor& dx,
                                   Tensor& dgamma, Tensor& dbeta);
using BnForwardInferFn = void (*)(const BatchNormParams&, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& running_mean, const Tensor& running_var, Tensor& y);
using BnBackwardInferFn = void (*)(const BatchNormParams&, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                   const Tensor& beta, const Tensor& running_mean, const Tensor& running_var,
                                   Tensor& dx, Tensor& dgamma, Tensor& dbeta);
// The inference forward with a residual term (x's shape and layout) added before the fused ReLU:
// y = relu_value(z + residual) under params.relu, z + residual without it, z the plain inference
// output (Sequential runs a residual block's last batchnorm, the block's add and the ReLU after it
// as this one op in predictions: the three ops' bits).
using BnForwardInferAddFn = void (*)(const BatchNormParams&, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& running_mean, const Tensor& running_var, const Tensor& residual,
                                     Tensor& y);
// Each channel's inference scale (C values, running_var's dtype) such that forward_infer writes
// gamma * ((x - running_mean) * scale) + beta, in that order, before any fused op: what an op
// fusing this batchnorm's inference forward into its own stores (a depthwise convolution's
// ConvChannelOp, core/ops/conv2d.h) needs to give this kernel's bits.
using BnInferScaleFn = void (*)(const BatchNormParams&, const Tensor& running_var, Tensor& scale);
// biased_mean/biased_var/steps hold the zero-debias state (used only when p.zero_debias; steps is
// a 1-element tensor).
using BnUpdateRunningFn = void (*)(const BatchNormParams&, const Tensor& mean, const Tensor& var, Tensor& running_mean,
                                   Tensor& running_var, Tensor& biased_mean, Tensor& biased_var, Tensor& steps);

// x (N,C,S), gamma/beta/mean/var/invstd/running (C). mean and invstd are outputs of the training
// forward, kept for its backward.
struct BatchNormKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const BatchNormParams&, DType) = nullptr;
  BnForwardTrainFn forward_train = nullptr;
  BnBackwardTrainFn backward_train = nullptr;
  BnForwardInferFn forward_infer = nullptr;
  BnBackwardInferFn backward_infer = nullptr;
  BnUpdateRunningFn update_running = nullptr;
  BnForwardInferAddFn forward_infer_add = nullptr;  // optional (null: batchnorm, add and ReLU apart)
  BnInferScaleFn infer_scale = nullptr;  // optional (null: no op fuses this kernel's inference forward)
  // Whether the four passes take a channel-blocked x (engine/layers/layout.h, any block; dy, y and dx
  // in x's layout). Kernels without it take plain tensors only.
  bool any_block = false;
};

}  // namespace driftlab
