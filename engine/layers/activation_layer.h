// Activation layer: relu / tanh / sigmoid / hard_sigmoid, with relu_grad_at_zero and the
// hard-sigmoid formula and gradient edges resolved from the Policy into ActivationParams.
#pragma once
#include "engine/layers/layer.h"
#include "core/ops/activation.h"
#include "engine/policy.h"

namespace driftlab {

ActivationParams resolve_activation(const Policy& policy, ActKind kind);

class ActivationLayer : public Layer {
 public:
  DL_ACCEPT_VISITOR(activation)
  ActivationLayer(ActKind kind, const Shape& in, const Policy& policy);
  // clip(x, lo, hi) (ReLU6 is 0, 6): bounds a file states, not a knob.
  static std::unique_ptr<ActivationLayer> clip(double lo, double hi, const Shape& in, const Policy& policy);
  // clip(slope*x + offset, 0, 1) with the slope and offset a file states (ONNX HardSigmoid's alpha,
  // beta), not hard_sigmoid_kind's; the gradient's edges stay hard_sigmoid_grad_edges'.
  static std::unique_ptr<ActivationLayer> hard_sigmoid(double slope, double offset, const Shape& in, const Policy& policy);
  std::string kind() const override { return act_name(p_.kind); }
  std::string describe() const override;
  Shape output_shape() const override { return shape_; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  Tensor backward(RunContext& ctx, const Tensor& dy) override;
  int input_block(const ExecContext&, DType) const override { return kAnyBlock; }  // elementwise
  const ActivationParams& op_params() const { return p_; }

 private:
  ActivationParams p_;
  Shape shape_;
  KernelBackend backend_;
  // The recorded forward's x and y, labelled plain (the kernels' view); y_ is defined exactly when
  // the forward was recorded. A ReLU whose kernel has relu_forward_any_zero keeps y alone (x_
  // undefined) where no x was +-0: its backward is then relu_backward_of_output's, the same bits,
  // and an x that nothing else keeps (a residual block's sum) is freed as the forward returns.
  Tensor x_, y_;
  int block_ = 0;  // the channel block of the recorded forward's x
};

}  // namespace driftlab
