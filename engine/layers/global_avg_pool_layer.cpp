#include "engine/layers/global_avg_pool_layer.h"

#include "engine/layers/layout.h"

namespace driftlab {

GlobalAvgPoolLayer::GlobalAvgPoolLayer(const Shape& in, const Policy& policy) : in_(in), backend_(policy.pool_backend) {
  check(in.size() == 3, "global_avg_pool: input must be (C,H,W), got ", shape_str(in));
  p_.c = in[0];
  p_.h = p_.kh = in[1];
  p_.w = p_.kw = in[2];
  p_.stride_h = p_.stride_w = 1;
  p_.sum_order = policy.acc_order;
  p_.validate();
}

int GlobalAvgPoolLayer::input_block(const ExecContext& exec, DType dt) const {
  return exec.kernels.avgpool2d.select(backend_, p_, dt).any_block ? kAsProduced : 0;
}

// A channel-blocked x: the kernel writes y as (N, C/B, 1, 1, B), whose bytes are (N, C) plain
// (one position a plane), so the result is that storage relabelled; dy likewise for the backward.
Tensor GlobalAvgPoolLayer::forward(RunContext& ctx, const Tensor& x_in) {
  check_input("global_avg_pool", x_in, in_);
  p_.n = x_in.dim(0);
  const Pool2dKernel& k = ctx.exec.pick(ctx.exec.kernels.avgpool2d, backend_, p_, x_in.dtype());
  const Tensor x = k.any_block ? x_in : to_plain(x_in);
  Tensor y = Tensor::empty(p_.y_shape(), x.dtype()).with_block(x.channel_block());  // (N,C,1,1)
  k.forward(p_, x, y);
  recorded_ = ctx.record;
  recorded_block_ = x.channel_block();
  return y.with_block(0).reshape({p_.n, p_.c});
}

Tensor GlobalAvgPoolLayer::backward(RunContext& ctx, const Tensor& dy) {
  check(recorded_, "global_avg_pool: backward without a recorded forward");
  recorded_ = false;  // the backward takes the recording (engine/layers/layer.h)
  check_shape("global_avg_pool backward", "dy", dy, {p_.n, p_.c});
  const int b = recorded_block_;
  Tensor dx = Tensor::empty(p_.x_shape(), dy.dtype()).with_block(b);
  // Average pooling's backward does not read the forward input: none is kept.
  ctx.exec.pick(ctx.exec.kernels.avgpool2d, backend_, p_, dy.dtype())
      .backward(p_, Tensor(), dy.reshape(p_.y_shape()).with_block(b), dx);
  return dx;
}

}  // namespace driftlab
