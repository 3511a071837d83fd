#include "engine/layers/pool_layer.h"

#include <sstream>

namespace driftlab {

Pool2dParams resolve_pool2d(const Policy& policy, const Shape& in, const Pool2dSpec& spec) {
  check(in.size() == 3, "pool2d: input must be (C,H,W), got ", shape_str(in));
  Pool2dParams p;
  p.c = in[0];
  p.h = in[1];
  p.w = in[2];
  p.kh = p.kw = spec.window;
  p.stride_h = p.stride_w = spec.stride > 0 ? spec.stride : spec.window;
  p.ties = policy.maxpool_grad_ties;
  p.validate();
  return p;
}

Pool2dLayer::Pool2dLayer(const Pool2dSpec& spec, const Shape& in, const Policy& policy)
    : kind_(spec.kind), p_(resolve_pool2d(policy, in, spec)) {}

std::string Pool2dLayer::describe() const {
  std::ostringstream os;
  os << kind() << " " << p_.kh << "x" << p_.kw << " stride " << p_.stride_h;
  if (kind_ == PoolKind::max) os << " ties=" << (p_.ties == PoolTies::first ? "first" : "all");
  return os.str();
}

Tensor Pool2dLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input(kind().c_str(), x, {p_.c, p_.h, p_.w});
  p_.n = x.dim(0);
  Tensor y = Tensor::empty(p_.y_shape(), x.dtype());
  // The fast max pool equals the reference bit for bit (tests/ops/test_pool2d.cpp).
  if (kind_ == PoolKind::max)
    maxpool2d_forward_fast(p_, x, y);
  else
    avgpool2d_forward_ref(p_, x, y);
  if (ctx.training) x_ = x;
  return y;
}

Tensor Pool2dLayer::backward(RunContext&, const Tensor& dy) {
  check(x_.defined(), kind(), ": backward without a training forward");
  p_.n = x_.dim(0);
  Tensor dx = Tensor::empty(p_.x_shape(), dy.dtype());
  if (kind_ == PoolKind::max)
    maxpool2d_backward_fast(p_, x_, dy, dx);
  else
    avgpool2d_backward_ref(p_, dy, dx);
  return dx;
}

}  // namespace driftlab
