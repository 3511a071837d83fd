#include "engine/layers/activation_layer.h"

#include <cmath>
#include <sstream>

namespace driftlab {

ActivationParams resolve_activation(const Policy& policy, ActKind kind) {
  ActivationParams p;
  p.kind = kind;
  p.relu_grad_at_zero = policy.relu_grad_at_zero;
  p.relu_nan_grad = policy.relu_grad_at_nan;
  if (policy.hard_sigmoid_kind == HardSigmoidKind::linear_0p2) {
    p.hs_slope = 0.2;
    p.hs_offset = 0.5;
  } else {  // relu6(x + 3) / 6, computed as PyTorch does (shift, clamp, divide)
    p.hs_slope = 1.0 / 6.0;
    p.hs_offset = 0.5;
    p.hs_divide = true;
  }
  p.hs_grad_edges_inclusive = policy.hard_sigmoid_grad_edges == GradEdges::inclusive;
  return p;
}

ActivationLayer::ActivationLayer(ActKind kind, const Shape& in, const Policy& policy)
    : p_(resolve_activation(policy, kind)), shape_(in), backend_(policy.act_backend) {}

std::unique_ptr<ActivationLayer> ActivationLayer::clip(double lo, double hi, const Shape& in, const Policy& policy) {
  check(lo <= hi, "clip: min ", lo, " above max ", hi);
  auto l = std::make_unique<ActivationLayer>(ActKind::clip, in, policy);
  l->p_.clip_min = lo;
  l->p_.clip_max = hi;
  return l;
}

std::unique_ptr<ActivationLayer> ActivationLayer::hard_sigmoid(double slope, double offset, const Shape& in,
                                                              const Policy& policy) {
  check(slope > 0 && std::isfinite(slope) && std::isfinite(offset), "hard_sigmoid: slope ", slope, ", offset ", offset,
        " (a positive finite slope wanted)");
  auto l = std::make_unique<ActivationLayer>(ActKind::hard_sigmoid, in, policy);
  l->p_.hs_slope = slope;
  l->p_.hs_offset = offset;
  l->p_.hs_divide = false;  // an imported alpha*x + beta (ONNX HardSigmoid, Keras 2) is computed so
  return l;
}

std::string ActivationLayer::describe() const {
  std::ostringstream os;
  os << act_name(p_.kind);
  if (p_.kind == ActKind::relu && p_.relu_grad_at_zero != 0.0) os << " grad@0=" << p_.relu_grad_at_zero;
  if (p_.kind == ActKind::clip) os << "(" << p_.clip_min << ", " << p_.clip_max << ")";
  if (p_.kind == ActKind::hard_sigmoid)
    os << " clip(" << p_.hs_slope << "x+" << p_.hs_offset << ") edges "
       << (p_.hs_grad_edges_inclusive ? "inclusive" : "exclusive");
  return os.str();
}

// Every activation is elementwise: a channel-blocked x runs through the kernel as the same
// elements labelled plain (with_block(0)), and y, dx get x's label back.
Tensor ActivationLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input(act_name(p_.kind), x, shape_);
  block_ = x.channel_block();
  const Tensor xe = x.with_block(0);
  Tensor y = Tensor::empty(x.shape(), x.dtype());
  const ActivationKernel& k = ctx.exec.pick(ctx.exec.kernels.activation, backend_, p_, x.dtype());
  const bool by_output = ctx.record && p_.kind == ActKind::relu && k.relu_forward_any_zero && k.relu_backward_of_output;
  bool keep_x = ctx.record;
  if (by_output)
    keep_x = k.relu_forward_any_zero(p_, xe, y);  // an x of +-0: the gradient at 0 needs x
  else
    k.forward(p_, xe, y);
  x_ = keep_x ? xe : Tensor();
  y_ = ctx.record ? y : Tensor();
  return y.with_block(block_);
}

Tensor ActivationLayer::backward(RunContext& ctx, const Tensor& dy) {
  check(y_.defined(), act_name(p_.kind), ": backward without a recorded forward");
  if (dy.channel_block() != block_)
    fail(act_name(p_.kind), " backward: dy in channel block ", dy.channel_block(), ", the forward's x in ", block_);
  Tensor dx = Tensor::empty(y_.shape(), y_.dtype());
  const ActivationKernel& k = ctx.exec.pick(ctx.exec.kernels.activation, backend_, p_, dy.dtype());
  if (!x_.defined()) {  // a ReLU whose forward found no +-0 kept y alone
    check(k.relu_backward_of_output, "relu backward: the forward kept only y, and kernel '", k.name,
          "' has no backward from it");
    k.relu_backward_of_output(p_, y_, dy.with_block(0), dx);
  } else {
    k.backward(p_, x_, y_, dy.with_block(0), dx);
  }
  x_ = y_ = Tensor();  // the backward takes the recording (engine/layers/layer.h)
  return dx.with_block(block_);
}

}  // namespace driftlab
