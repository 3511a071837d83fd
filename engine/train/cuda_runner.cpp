#include "engine/train/cuda_runner.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>

#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

namespace {

// A skipped batch must leave no trace; on the device the train-mode forward has already moved
// BatchNorm's running statistics, which are not put back there yet: refused rather than kept.
void check_skip_supported(Model& model, const TrainConfig& config) {
  check(config.on_nonfinite != OnNonFinite::skip_batch || model.net->named_buffers().empty(),
        "train: --on-nonfinite skip-batch with --device cuda is not implemented for models with BatchNorm "
        "(the skipped batch would stay in the running statistics); use --device cpu or --on-nonfinite stop");
}

std::unique_ptr<cuda::CudaContext> open_for(Model& model) {
  check_device_supported(model);
  return open_cuda_device(resolve_cuda_exec(model.policy), "--device cuda");
}

}  // namespace

CudaRunner::CudaRunner(Model& model, const TrainConfig& config)
    : Runner(model, config), owned_(open_for(model)), ctx_(*owned_), sched_(config.optim, rule_) {
  check_skip_supported(model, config);
  net_ = std::make_unique<DeviceNet>(ctx_, model);
  init_state();
}

CudaRunner::CudaRunner(Model& model, cuda::CudaContext& ctx, const TrainConfig& config)
    : Runner(model, config), ctx_(ctx), net_(std::make_unique<DeviceNet>(ctx, model)), sched_(config.optim, rule_) {
  check_skip_supported(model, config);
  init_state();
}

void CudaRunner::init_state() {
  state_.clear();
  state1_.clear();
  const bool two = cfg_.optim.kind != OptimizerKind::sgd;
  for (DeviceParam* p : net_->params()) {
    Tensor s0(p->value.shape(), p->value.dtype());
    if (sched_.slot0_init() != 0.0) s0.fill(sched_.slot0_init());
    state_.push_back(cuda::to_device(ctx_, s0));
    state1_.push_back(two ? cuda::DeviceTensor::zeros(ctx_, p->value.shape(), p->value.dtype()) : cuda::DeviceTensor());
  }
  flags_ = cuda::DeviceTensor(ctx_, {static_cast<int64_t>(state_.size())}, DType::f32);
}

OptimState CudaRunner::optimizer_state() {
  OptimState s;
  s.steps = sched_.steps();
  s.skipped = sched_.skipped();
  s.power1 = sched_.power1();
  s.power2 = sched_.power2();
  if (s.steps == 0) return s;
  for (std::size_t i = 0; i < state_.size(); ++i) {
    s.slot0.push_back(cuda::to_host(ctx_, state_[i]));
    s.slot1.push_back(state1_[i].numel() ? cuda::to_host(ctx_, state1_[i]) : Tensor());
  }
  return s;
}

void CudaRunner::set_optimizer_state(const OptimState& s) {
  const std::vector<DeviceParam*> params = net_->params();
  const bool two = cfg_.optim.kind != OptimizerKind::sgd;
  if (s.steps > 0) {
    check(s.slot0.size() == params.size() && s.slot1.size() == params.size(), optimizer_name(cfg_.optim.kind),
          ": the state has ", s.slot0.size(), " tensors, the model ", params.size(), " parameters");
    for (std::size_t i = 0; i < params.size(); ++i) {
      check(s.slot0[i].shape() == params[i]->value.shape() && s.slot0[i].dtype() == params[i]->value.dtype() &&
                (!two || (s.slot1[i].shape() == params[i]->value.shape() &&
                          s.slot1[i].dtype() == params[i]->value.dtype())),
            optimizer_name(cfg_.optim.kind), ": state of ", params[i]->name, " does not match the parameter");
      state_[i] = cuda::to_device(ctx_, s.slot0[i]);
      state1_[i] = two ? cuda::to_device(ctx_, s.slot1[i]) : cuda::DeviceTensor();
    }
  } else {
    init_state();
  }
  sched_.restore(s.steps, s.skipped, s.power1, s.power2);
}

std::string CudaRunner::describe() const {
  const cuda::DeviceInfo d = cuda::device_info(ctx_.device());
  return "cuda:" + std::to_string(ctx_.device()) + " " + d.name + ", " + ctx_.params().str();
}

void CudaRunner::synchronize() { ctx_.synchronize(); }

Tensor CudaRunner::logits(const Tensor& x, int64_t max_batch) { return net_->predict(x, max_batch); }

double CudaRunner::device_loss(const cuda::DeviceTensor& logits, const std::vector<int32_t>& labels,
                               cuda::DeviceTensor& dz, bool with_loss) {
  try {
    const double loss = with_loss ? cuda::softmax_xent_forward_cuda(ctx_, loss_, logits, labels) : std::nan("");
    dz = cuda::DeviceTensor(ctx_, logits.shape(), logits.dtype());
    cuda::softmax_xent_backward_cuda(ctx_, loss_, logits, labels, dz);
    return loss;
  } catch (const Error& err) {
    fail("cuda: loss, batch ", logits.dim(0), ": ", err.what());
  }
}

InputGradient CudaRunner::input_gradient(const Tensor& x, const std::vector<int32_t>& labels, Semantics s) {
  DeviceRunContext run = DeviceRunContext::recorded(ctx_, s, &dropout_rng_);
  run.param_grads = false;  // dx only: conv2d and dense skip dW and db, as the CPU runner's
  DeviceValue z = net_->forward(run, x);
  cuda::DeviceTensor dz;
  InputGradient g;
  g.loss = device_loss(*z, labels, dz);
  DeviceValue dx = net_->backward(run, std::make_shared<cuda::DeviceTensor>(std::move(dz)));
  g.logits = cuda::to_host(ctx_, *z);
  g.dx = cuda::to_host(ctx_, *dx);
  return g;
}

bool CudaRunner::linf_steps(const void* x0, const void* start, void* x_adv, const Shape& shape, DType dtype,
                            const std::vector<int32_t>& target, const LinfSteps& spec, LinfStepsResult* out) {
  if (dtype != model_.dtype()) return false;  // the host loop converts
  const int64_t n = shape.at(0);
  cuda::DeviceTensor d_x0, frozen;
  DeviceValue xa;
  try {
    d_x0 = cuda::DeviceTensor(ctx_, shape, model_.dtype());
    cuda::copy_to_device(ctx_, x0, d_x0);
    xa = std::make_shared<cuda::DeviceTensor>(ctx_, shape, model_.dtype());
    if (start)
      cuda::copy_to_device(ctx_, start, *xa);
    else
      cuda::copy_device(ctx_, d_x0, *xa);
    frozen = cuda::DeviceTensor::zeros(ctx_, {n}, DType::u8);
  } catch (const Error& err) {
    fail("cuda: copying an attack's batch ", shape_str(shape), " to the device: ", err.what());
  }
  Tensor frozen_host = Tensor::zeros({n}, DType::u8);
  const cuda::LinfStepParams p{spec.fgsm, spec.eps, spec.step, spec.lo, spec.hi};
  const int steps = spec.fgsm ? 1 : spec.steps;
  for (int t = 0; t < steps; ++t) {
    DeviceRunContext run = DeviceRunContext::recorded(ctx_, Semantics::inference, &dropout_rng_);
    run.param_grads = false;  // dx only, as input_gradient
    DeviceValue z = net_->forward_device(run, xa);
    cuda::DeviceTensor dz;
    device_loss(*z, target, dz, /*with_loss=*/false);
    DeviceValue dx = net_->backward(run, std::make_shared<cuda::DeviceTensor>(std::move(dz)));
    if (t == 0) {
      out->first_logits = cuda::to_host(ctx_, *z);
      cuda::DeviceTensor zero(ctx_, {n}, DType::u8);
      cuda::rows_all_zero_cuda(ctx_, *dx, zero);
      const Tensor zh = cuda::to_host(ctx_, zero);
      out->first_zero_gradient.assign(zh.data<uint8_t>(), zh.data<uint8_t>() + n);
    }
    if (spec.early_stop) {  // a sample already misclassified at x_t stays where it is
      const std::vector<int32_t> pred = predictions(t == 0 ? out->first_logits : cuda::to_host(ctx_, *z));
      for (int64_t s = 0; s < n; ++s)
        frozen_host.data<uint8_t>()[s] = frozen_host.data<uint8_t>()[s] || pred[s] != target[s];
      cuda::copy_to_device(ctx_, frozen_host, frozen);
    }
    cuda::linf_step_cuda(ctx_, p, d_x0, *dx, frozen, *xa);
  }
  if (spec.judge) {
    DeviceRunContext run = DeviceRunContext::inference(ctx_);
    out->last_logits = cuda::to_host(ctx_, *net_->forward_device(run, xa));
  }
  cuda::copy_to_host(ctx_, *xa, x_adv);
  return true;
}

namespace {
std::size_t round_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }
}  // namespace

// One wait per step (there were six: the batch and the labels, twice, from pageable memory, the
// loss before the backward, the gradient flags, the logits). The batch and its labels go up
// from pinned memory without waiting; the per-sample losses, the gradient flags and the logits
// come back into pinned memory after the backward; the host waits once, then checks them in the
// order the CPU runner does (the loss, then each gradient in parameter order) before it queues
// the optimizer step. A batch whose loss is not finite has run its backward as well, which
// changes gradients only, and takes no step.
double CudaRunner::train_step(const Tensor& x, const std::vector<int32_t>& labels, int64_t* correct) {
  DeviceRunContext run = DeviceRunContext::training(ctx_, &dropout_rng_);
  run.input_grad = false;
  const std::vector<DeviceParam*> params = net_->params();
  const Tensor xm = model_.in_dtype(x);
  const int64_t n = xm.rank() ? xm.dim(0) : 0;
  if (!staging_) staging_ = std::make_unique<cuda::PinnedBuffer>(ctx_);
  const std::size_t x_bytes = round_up(xm.nbytes()), y_bytes = round_up(labels.size() * sizeof(int32_t));
  char* const pinned = static_cast<char*>(staging_->acquire(x_bytes + y_bytes));
  DeviceValue xd;
  try {
    std::memcpy(pinned, xm.raw(), xm.nbytes());
    xd = std::make_shared<cuda::DeviceTensor>(ctx_, xm.shape(), xm.dtype());
    cuda::copy_to_device_async(ctx_, pinned, *xd);
    staging_->mark_used();
  } catch (const Error& err) {
    fail("cuda: copying the input ", shape_str(xm.shape()), " to the device, batch ", n, ": ", err.what());
  }
  net_->zero_grad();
  DeviceValue logits = net_->forward_device(run, xd);
  const int64_t k = logits->rank() == 2 ? logits->dim(1) : 0;
  cuda::DeviceTensor y, losses, dz;
  try {
    check(logits->rank() == 2, "logits must be (N,K), got ", shape_str(logits->shape()));
    cuda::check_xent_labels("softmax_xent_forward_cuda", n, k, labels);
    std::memcpy(pinned + x_bytes, labels.data(), labels.size() * sizeof(int32_t));
    y = cuda::DeviceTensor(ctx_, {n}, DType::i32);
    cuda::copy_to_device_async(ctx_, pinned + x_bytes, y);
    staging_->mark_used();
    losses = cuda::DeviceTensor(ctx_, {n}, logits->dtype());
    cuda::softmax_xent_losses_cuda(ctx_, loss_, *logits, y, losses);
    dz = cuda::DeviceTensor(ctx_, logits->shape(), logits->dtype());
    cuda::softmax_xent_backward_cuda(ctx_, loss_, *logits, y, dz);
  } catch (const Error& err) {
    fail("cuda: loss, batch ", n, ": ", err.what());
  }
  net_->backward(run, std::make_shared<cuda::DeviceTensor>(std::move(dz)));
  cuda::fill_zero(ctx_, flags_);
  std::vector<const cuda::DeviceTensor*> grads;
  for (DeviceParam* p : params) grads.push_back(&p->grad);
  grad_table_.bind(ctx_, grads);  // the gradients' addresses go up once (they do not move)
  cuda::flag_nonfinite_many_cuda(ctx_, grad_table_, flags_);
  // The readback: losses, flags and logits into pinned memory, then one wait. (The readback
  // buffer's last copies were waited for at the end of the previous step: acquire returns at once.)
  if (!readback_) readback_ = std::make_unique<cuda::PinnedBuffer>(ctx_);
  const std::size_t l_bytes = round_up(losses.nbytes()), f_bytes = round_up(flags_.nbytes());
  char* const back_losses = static_cast<char*>(readback_->acquire(l_bytes + f_bytes + logits->nbytes()));
  char* const back_flags = back_losses + l_bytes;
  char* const back_logits = back_flags + f_bytes;
  cuda::copy_to_host_async(ctx_, losses, back_losses);
  cuda::copy_to_host_async(ctx_, flags_, back_flags);
  if (correct) cuda::copy_to_host_async(ctx_, *logits, back_logits);
  readback_->mark_used();
  ctx_.synchronize();
  Tensor host_losses = Tensor::empty(losses.shape(), losses.dtype());
  std::memcpy(host_losses.raw(), back_losses, losses.nbytes());
  double loss = cuda::softmax_xent_total(loss_, host_losses);
  // The l2_loss mode's penalty D*sum(p^2), as Optimizer::penalty adds it on the CPU (waits per
  // parameter: only this mode pays for it).
  if (const double d = sched_.penalty_factor(); d != 0.0) {
    double s = 0;
    for (DeviceParam* p : params)
      if (!p->is_bias || rule_.decay_bias) s += cuda::sum_squares_cuda(ctx_, p->value);
    loss += d * s;
  }
  last_skip_.clear();
  if (!std::isfinite(loss)) {
    sync_to_model();  // the diagnosis runs the batch on the host with the device's weights
    std::ostringstream what;
    what << "loss is " << loss;
    return nonfinite_step(x, what.str(), "cuda");
  }
  const float* flags = reinterpret_cast<const float*>(back_flags);
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (flags[i] == 0.0f) continue;
    const Tensor g = cuda::to_host(ctx_, params[i]->grad);
    const int64_t bad = first_nonfinite(g);
    sync_to_model();
    return nonfinite_step(x, "gradient " + params[i]->name + ".grad[" + std::to_string(bad) + "] is not finite",
                          "cuda");
  }
  // The step's parameters as the CPU's Optimizer forms them (a skipped batch takes no step).
  OptimStep step = sched_.next(lr_schedule_.lr());
  for (std::size_t i = 0; i < params.size(); ++i) {
    step.for_tensor(params[i]->is_bias);
    DeviceParam& p = *params[i];
    switch (step.kind) {
      case OptimizerKind::sgd: cuda::sgd_step_cuda(ctx_, step.sgd, p.value, p.grad, state_[i]); break;
      case OptimizerKind::adam: cuda::adam_step_cuda(ctx_, step.adam, p.value, p.grad, state_[i], state1_[i]); break;
      case OptimizerKind::rmsprop:
        cuda::rmsprop_step_cuda(ctx_, step.rmsprop, p.value, p.grad, state_[i], state1_[i]);
        break;
    }
  }
  lr_schedule_.after_step();
  if (correct) {
    Tensor host_logits = Tensor::empty(logits->shape(), logits->dtype());
    std::memcpy(host_logits.raw(), back_logits, logits->nbytes());
    *correct = count_correct(host_logits, labels);
  }
  ++step_index_;
  return loss;
}

PredictTime CudaRunner::time_prediction(const Tensor& x, int64_t max_batch) {
  net_->predict(x, max_batch);  // warm-up: kernel loading, cuDNN algorithm choice, allocator blocks
  PredictTime t;
  auto t0 = std::chrono::steady_clock::now();
  net_->predict(x, max_batch);
  t.host_to_host_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t n = x.rank() ? x.dim(0) : 0;
  if (max_batch == 0 || max_batch >= n) {
    DeviceValue xd = std::make_shared<cuda::DeviceTensor>(
        cuda::to_device(ctx_, model_.in_dtype(x)));
    DeviceRunContext run = DeviceRunContext::inference(ctx_);
    cuda::EventTimer timer(ctx_);
    timer.start();
    net_->forward_device(run, xd);
    t.device_forward_s = timer.stop_seconds();
  }
  return t;
}

}  // namespace driftlab
