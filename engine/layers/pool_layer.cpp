#include "engine/layers/pool_layer.h"

#include <sstream>

#include "engine/layers/layout.h"

namespace driftlab {

Pool2dParams resolve_pool2d(const Policy& policy, const Shape& in, const Pool2dSpec& spec) {
  check(in.size() == 3, "pool2d: input must be (C,H,W), got ", shape_str(in));
  Pool2dParams p;
  p.c = in[0];
  p.h = in[1];
  p.w = in[2];
  p.kh = spec.window;
  p.kw = spec.window_w > 0 ? spec.window_w : spec.window;
  p.stride_h = spec.stride > 0 ? spec.stride : p.kh;
  p.stride_w = spec.stride_w > 0 ? spec.stride_w : spec.stride > 0 ? spec.stride : p.kw;
  p.pad_t = spec.pads4[0];
  p.pad_b = spec.pads4[1];
  p.pad_l = spec.pads4[2];
  p.pad_r = spec.pads4[3];
  p.count_include_pad = spec.count_include_pad;
  p.ties = policy.maxpool_grad_ties;
  p.sum_order = policy.acc_order;  // average pooling
  p.validate();
  return p;
}

Pool2dLayer::Pool2dLayer(const Pool2dSpec& spec, const Shape& in, const Policy& policy)
    : kind_(spec.kind), p_(resolve_pool2d(policy, in, spec)), backend_(policy.pool_backend) {}

const OpTable<Pool2dKernel>& Pool2dLayer::table(const ExecContext& exec) const {
  return kind_ == PoolKind::max ? exec.kernels.maxpool2d : exec.kernels.avgpool2d;
}

std::string Pool2dLayer::describe() const {
  std::ostringstream os;
  os << kind() << " " << p_.kh << "x" << p_.kw << " stride " << p_.stride_h;
  if (p_.stride_w != p_.stride_h) os << "x" << p_.stride_w;
  if (p_.pad_t || p_.pad_b || p_.pad_l || p_.pad_r)
    os << " pad t/b/l/r " << p_.pad_t << "/" << p_.pad_b << "/" << p_.pad_l << "/" << p_.pad_r
       << (kind_ == PoolKind::avg ? (p_.count_include_pad ? " counting pads" : " not counting pads") : "");
  if (kind_ == PoolKind::max) os << " ties=" << (p_.ties == PoolTies::first ? "first" : "all");
  return os.str();
}

int Pool2dLayer::input_block(const ExecContext& exec, DType dt) const {
  return table(exec).select(backend_, p_, dt).any_block ? kAnyBlock : 0;
}

Tensor Pool2dLayer::forward(RunContext& ctx, const Tensor& x_in) {
  check_input(kind().c_str(), x_in, {p_.c, p_.h, p_.w});
  p_.n = x_in.dim(0);
  const Pool2dKernel& k = ctx.exec.pick(table(ctx.exec), backend_, p_, x_in.dtype());
  const Tensor x = k.any_block ? x_in : to_plain(x_in);
  Tensor y = Tensor::empty(p_.y_shape(), x.dtype()).with_block(x.channel_block());
  k.forward(p_, x, y);
  x_ = ctx.record ? x : Tensor();
  return y;
}

// dx in the recorded input's layout (dy converted to it).
Tensor Pool2dLayer::backward(RunContext& ctx, const Tensor& dy) {
  check(x_.defined(), kind(), ": backward without a recorded forward");
  p_.n = x_.dim(0);
  const int b = x_.channel_block();
  Tensor dx = Tensor::empty(p_.x_shape(), dy.dtype()).with_block(b);
  ctx.exec.pick(table(ctx.exec), backend_, p_, dy.dtype()).backward(p_, x_, to_block(dy, b), dx);
  x_ = Tensor();  // the backward takes the recording (engine/layers/layer.h)
  return dx;
}

}  // namespace driftlab
