// BatchNorm over channels of a (C,H,W) or (F) input. The Policy's bn_eps, bn_momentum,
// bn_running_var and bn_zero_debias are resolved into BatchNormParams here, bn_backend into the
// kernel; the running-variance estimator depends on the input rank under the Keras-on-TF rule
// (4-D goes through TF's fused kernel, which already corrects by n/(n-1), before Keras's own
// n/(n-1-eps)). Train semantics normalise with the batch statistics and move the running ones;
// inference semantics use the running statistics and never move them, forward and backward.
#pragma once
#include "core/ops/activation.h"
#include "core/ops/batchnorm.h"
#include "engine/layers/layer.h"
#include "engine/policy.h"

namespace driftlab {

BatchNormParams resolve_batchnorm(const Policy& policy, const Shape& in);

class BatchNormLayer : public Layer {
 public:
  DL_ACCEPT_VISITOR(batchnorm)
  BatchNormLayer(const Shape& in, const Policy& policy);
  std::string kind() const override { return "batchnorm"; }
  std::string describe() const override;
  Shape output_shape() const override { return shape_; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  // backward() takes the gradient of what the last recorded forward returned: after
  // forward_relu, of the ReLU's output.
  Tensor backward(RunContext& ctx, const Tensor& dy) override;
  // This batchnorm and the ReLU layer after it (`relu`: its params) as one op
  // (BatchNormParams::relu; Sequential calls it): the two layers' results, bit for bit, with no
  // pass and no tensor of their own for the ReLU.
  Tensor forward_relu(RunContext& ctx, const Tensor& x, const ActivationParams& relu);
  // A prediction (inference semantics, nothing recorded) of relu(this batchnorm's output +
  // residual), residual in x's layout, as one op (BatchNormKernel::forward_infer_add; ResidualLayer
  // calls it for its block's tail); whether this layer's kernel for dt has that op.
  Tensor forward_infer_add_relu(RunContext& ctx, const Tensor& x, const Tensor& residual, const ActivationParams& relu);
  // The same without the ReLU: this batchnorm's output + residual (a graph's batchnorm -> add, as
  // MobileNetV2's blocks end).
  Tensor forward_infer_add(RunContext& ctx, const Tensor& x, const Tensor& residual);
  // A prediction (inference semantics, nothing recorded) of `clip` (a clip layer's params: ReLU6,
  // ONNX Clip) applied to this batchnorm's output, as one op (BatchNormParams::clip; a graph calls
  // it for a batchnorm node followed by a clip node): the two layers' bits.
  Tensor forward_infer_clip(RunContext& ctx, const Tensor& x, const ActivationParams& clip);
  bool has_infer_add(const ExecContext& exec, DType dt) const;
  // This batchnorm's inference forward as a convolution's per-channel op (ConvChannelOp: the
  // running mean, its kernel's inference scale, gamma, beta; act none), for a prediction that runs
  // the convolution after or before it and this batchnorm as one op; false (e untouched) where its
  // kernel for dt does not say its scale (BatchNormKernel::infer_scale).
  bool infer_channel_op(const ExecContext& exec, DType dt, ConvChannelOp& e) const;
  // Whether infer_channel_op would give one, without computing it (a fusion's probe).
  bool has_channel_op(const ExecContext& exec, DType dt) const;
  std::vector<Param*> params() override { return {&gamma_, &beta_}; }
  std::vector<Param*> buffers() override;
  // Any channel block where its kernel takes blocked tensors (BatchNormKernel::any_block).
  int input_block(const ExecContext& exec, DType dt) const override;
  const BatchNormParams& op_params() const { return p_; }  // n is set per call
  // Every running-statistics tensor, in batchnorm_update_running's argument order (buffers()
  // leaves out the zero-debias ones when they are unused).
  std::vector<Param*> running_state() { return {&running_mean_, &running_var_, &biased_mean_, &biased_var_, &steps_}; }

 private:
  Shape shape_;
  BatchNormParams p_;
  KernelBackend backend_;
  Param gamma_, beta_;
  Param running_mean_, running_var_, biased_mean_, biased_var_, steps_;
  Tensor x_, mean_, var_, invstd_;
  Semantics recorded_ = Semantics::train;  // the semantics of the recorded forward
  BatchNormParams recorded_p_;             // its params (the fused ReLU's fields among them)
  Tensor run_forward(RunContext& ctx, const Tensor& x, const BatchNormParams& p);
  // p_ with the fused ReLU of `relu` (a ReLU layer's params; anything else is refused).
  BatchNormParams with_relu(const ActivationParams& relu) const;
  // forward_infer_add_relu and forward_infer_add under q (p_, with the ReLU or without).
  Tensor run_infer_add(RunContext& ctx, const Tensor& x, const Tensor& residual, BatchNormParams q);
};

}  // namespace driftlab
