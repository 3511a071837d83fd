#include "engine/layers/global_avg_pool_layer.h"

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

Tensor GlobalAvgPoolLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input("global_avg_pool", x, in_);
  // Plain only (input_block 0: Sequential and the graph convert before); the pooling kernel would
  // take a blocked x, but the layer's (N,C) result and its dx are plain.
  check(x.channel_block() == 0, "global_avg_pool: a channel-blocked (nChw", x.channel_block(),
        "c) input; the layer takes plain (N,C,H,W)");
  p_.n = x.dim(0);
  Tensor y = Tensor::empty(p_.y_shape(), x.dtype());  // (N,C,1,1)
  ctx.exec.pick(ctx.exec.kernels.avgpool2d, backend_, p_, x.dtype()).forward(p_, x, y);
  recorded_ = ctx.record;
  return y.reshape({p_.n, p_.c});
}

Tensor GlobalAvgPoolLayer::backward(RunContext& ctx, const Tensor& dy) {
  check(recorded_, "global_avg_pool: backward without a recorded forward");
  check_shape("global_avg_pool backward", "dy", dy, {p_.n, p_.c});
  Tensor dx = Tensor::empty(p_.x_shape(), dy.dtype());
  // Average pooling's backward does not read the forward input: none is kept.
  ctx.exec.pick(ctx.exec.kernels.avgpool2d, backend_, p_, dy.dtype()).backward(p_, Tensor(), dy.reshape(p_.y_shape()), dx);
  return dx;
}

}  // namespace driftlab
