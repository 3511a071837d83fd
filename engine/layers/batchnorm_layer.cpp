#include "engine/layers/batchnorm_layer.h"

#include <sstream>

namespace driftlab {

BatchNormParams resolve_batchnorm(const Policy& policy, const Shape& in) {
  check(in.size() == 1 || in.size() == 3, "batchnorm: input must be (F) or (C,H,W), got ", shape_str(in));
  BatchNormParams p;
  p.c = in[0];
  p.s = in.size() == 3 ? in[1] * in[2] : 1;
  p.eps = policy.bn_eps;
  p.keep = policy.bn_momentum;
  p.zero_debias = policy.bn_zero_debias;
  p.sum_order = policy.acc_order;
  switch (policy.bn_running_var) {
    case BnRunningVar::biased: p.estimator = BnVarEstimator::biased; break;
    case BnRunningVar::unbiased: p.estimator = BnVarEstimator::unbiased; break;
    case BnRunningVar::keras_tf:
      p.estimator = in.size() == 3 ? BnVarEstimator::keras_double : BnVarEstimator::keras_scaled;
      break;
    case BnRunningVar::keras_theano: p.estimator = BnVarEstimator::keras_var_plus_eps; break;
    case BnRunningVar::lasagne_inv_std: p.estimator = BnVarEstimator::inv_std; break;
  }
  return p;
}

BatchNormLayer::BatchNormLayer(const Shape& in, const Policy& policy)
    : shape_(in), p_(resolve_batchnorm(policy, in)), backend_(policy.bn_backend) {
  DType dt = policy.dtype == FloatType::float64 ? DType::f64 : DType::f32;
  auto make = [&](const char* name, double init, bool trained) {
    Param prm{name, Tensor({p_.c}, dt), trained ? Tensor({p_.c}, dt) : Tensor(), true};
    prm.value.fill(init);
    return prm;
  };
  // gamma=1, beta=0 in every framework here (torch <= 1.1 drew gamma ~ U(0,1)); running
  // mean 0 and running variance 1 (Lasagne: running inv_std 1).
  gamma_ = make("gamma", 1.0, true);
  beta_ = make("beta", 0.0, true);
  running_mean_ = make("running_mean", 0.0, false);
  running_var_ = make("running_var", 1.0, false);
  biased_mean_ = make("biased_mean", 0.0, false);
  biased_var_ = make("biased_var", 0.0, false);
  steps_ = {"steps", Tensor({1}, dt), Tensor(), true};
}

std::vector<Param*> BatchNormLayer::buffers() {
  if (p_.zero_debias) return {&running_mean_, &running_var_, &biased_mean_, &biased_var_, &steps_};
  return {&running_mean_, &running_var_};
}

std::string BatchNormLayer::describe() const {
  std::ostringstream os;
  os << "batchnorm eps " << p_.eps << " keep " << p_.keep << " [" << backend_name(backend_) << "]";
  return os.str();
}

int BatchNormLayer::input_block(const ExecContext& exec, DType dt) const {
  return shape_.size() == 3 && exec.kernels.batchnorm.select(backend_, p_, dt).any_block ? kAnyBlock : 0;
}

Tensor BatchNormLayer::forward(RunContext& ctx, const Tensor& x) { return run_forward(ctx, x, p_); }

BatchNormParams BatchNormLayer::with_relu(const ActivationParams& relu) const {
  check(relu.kind == ActKind::relu, "batchnorm: only a ReLU fuses with it, not ", act_name(relu.kind));
  BatchNormParams p = p_;
  p.relu = true;
  p.relu_grad_at_zero = relu.relu_grad_at_zero;
  p.relu_nan_grad = relu.relu_nan_grad;
  return p;
}

Tensor BatchNormLayer::forward_relu(RunContext& ctx, const Tensor& x, const ActivationParams& relu) {
  return run_forward(ctx, x, with_relu(relu));
}

bool BatchNormLayer::has_infer_add(const ExecContext& exec, DType dt) const {
  return exec.kernels.batchnorm.select(backend_, p_, dt).forward_infer_add != nullptr;
}

bool BatchNormLayer::has_channel_op(const ExecContext& exec, DType dt) const {
  return exec.kernels.batchnorm.select(backend_, p_, dt).infer_scale && running_var_.value.dtype() == dt;
}

bool BatchNormLayer::infer_channel_op(const ExecContext& exec, DType dt, ConvChannelOp& e) const {
  if (!has_channel_op(exec, dt)) return false;
  const BatchNormKernel& k = exec.kernels.batchnorm.select(backend_, p_, dt);
  Tensor scale({p_.c}, dt);
  k.infer_scale(p_, running_var_.value, scale);
  e.mean = running_mean_.value, e.scale = scale, e.gamma = gamma_.value, e.beta = beta_.value;
  e.act = ConvChannelOp::Act::none;
  return true;
}

Tensor BatchNormLayer::forward_infer_add_relu(RunContext& ctx, const Tensor& x, const Tensor& residual,
                                              const ActivationParams& relu) {
  return run_infer_add(ctx, x, residual, with_relu(relu));
}

Tensor BatchNormLayer::forward_infer_add(RunContext& ctx, const Tensor& x, const Tensor& residual) {
  return run_infer_add(ctx, x, residual, p_);
}

Tensor BatchNormLayer::run_infer_add(RunContext& ctx, const Tensor& x, const Tensor& residual, BatchNormParams q) {
  check(ctx.semantics == Semantics::inference && !ctx.record,
        "batchnorm: the fused residual add is a prediction's op (inference semantics, nothing recorded)");
  check_input("batchnorm", x, shape_);
  p_.n = x.dim(0);
  q.n = p_.n;
  const BatchNormKernel& k = ctx.exec.pick(ctx.exec.kernels.batchnorm, backend_, q, x.dtype());
  check(k.forward_infer_add != nullptr, "batchnorm: kernel ", k.name, " has no fused residual add");
  x_ = Tensor();
  recorded_ = ctx.semantics;
  recorded_p_ = q;
  Tensor y = Tensor::empty(x.shape(), x.dtype()).with_block(x.channel_block());
  k.forward_infer_add(q, x, gamma_.value, beta_.value, running_mean_.value, running_var_.value, residual, y);
  return y;
}

Tensor BatchNormLayer::forward_infer_clip(RunContext& ctx, const Tensor& x, const ActivationParams& clip) {
  check(ctx.semantics == Semantics::inference && !ctx.record,
        "batchnorm: the fused clip is a prediction's op (inference semantics, nothing recorded)");
  check(clip.kind == ActKind::clip, "batchnorm: only a clip fuses here, not ", act_name(clip.kind));
  BatchNormParams q = p_;
  q.clip = true;
  q.clip_min = clip.clip_min;
  q.clip_max = clip.clip_max;
  return run_forward(ctx, x, q);
}

// p: the layer's params, with the fused ReLU or without (p_ itself never has it: the device
// layers are made from p_).
Tensor BatchNormLayer::run_forward(RunContext& ctx, const Tensor& x, const BatchNormParams& p) {
  check_input("batchnorm", x, shape_);
  p_.n = x.dim(0);
  BatchNormParams q = p;
  q.n = p_.n;
  Tensor y = Tensor::empty(x.shape(), x.dtype()).with_block(x.channel_block());
  const BatchNormKernel& k = ctx.exec.pick(ctx.exec.kernels.batchnorm, backend_, q, x.dtype());
  x_ = ctx.record ? x : Tensor();
  recorded_ = ctx.semantics;
  recorded_p_ = q;
  if (ctx.semantics == Semantics::inference) {
    k.forward_infer(q, x, gamma_.value, beta_.value, running_mean_.value, running_var_.value, y);
    return y;
  }
  mean_ = Tensor({p_.c}, x.dtype());
  var_ = Tensor({p_.c}, x.dtype());
  invstd_ = Tensor({p_.c}, x.dtype());
  k.forward_train(q, x, gamma_.value, beta_.value, y, mean_, var_, invstd_);
  k.update_running(q, mean_, var_, running_mean_.value, running_var_.value, biased_mean_.value, biased_var_.value,
                   steps_.value);
  return y;
}

Tensor BatchNormLayer::backward(RunContext& ctx, const Tensor& dy) {
  check(x_.defined(), "batchnorm: backward without a recorded forward");
  check_shape("batchnorm backward", "dy", dy, x_.shape());
  if (dy.channel_block() != x_.channel_block())
    fail("batchnorm backward: dy in channel block ", dy.channel_block(), ", the forward's x in ", x_.channel_block());
  Tensor dx = Tensor::empty(x_.shape(), x_.dtype()).with_block(x_.channel_block());
  const BatchNormParams& q = recorded_p_;
  const BatchNormKernel& k = ctx.exec.pick(ctx.exec.kernels.batchnorm, backend_, q, x_.dtype());
  if (recorded_ == Semantics::inference)
    k.backward_infer(q, x_, dy, gamma_.value, beta_.value, running_mean_.value, running_var_.value, dx, gamma_.grad,
                     beta_.grad);
  else
    k.backward_train(q, x_, dy, gamma_.value, beta_.value, mean_, invstd_, dx, gamma_.grad, beta_.grad);
  x_ = Tensor();  // the backward takes the recording (engine/layers/layer.h)
  return dx;
}

}  // namespace driftlab
