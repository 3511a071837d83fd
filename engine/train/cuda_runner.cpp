#include "engine/train/cuda_runner.h"

#include <chrono>
#include <cmath>
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
    : Runner(model, config), owned_(open_for(model)), ctx_(*owned_) {
  check_skip_supported(model, config);
  net_ = std::make_unique<DeviceNet>(ctx_, model);
  for (DeviceParam* p : net_->params())
    state_.push_back(cuda::DeviceTensor::zeros(ctx_, p->value.shape(), p->value.dtype()));
  flags_ = cuda::DeviceTensor(ctx_, {static_cast<int64_t>(state_.size())}, DType::f32);
}

CudaRunner::CudaRunner(Model& model, cuda::CudaContext& ctx, const TrainConfig& config)
    : Runner(model, config), ctx_(ctx), net_(std::make_unique<DeviceNet>(ctx, model)) {
  check_skip_supported(model, config);
  for (DeviceParam* p : net_->params())
    state_.push_back(cuda::DeviceTensor::zeros(ctx_, p->value.shape(), p->value.dtype()));
  flags_ = cuda::DeviceTensor(ctx_, {static_cast<int64_t>(state_.size())}, DType::f32);
}

std::string CudaRunner::describe() const {
  const cuda::DeviceInfo d = cuda::device_info(ctx_.device());
  return "cuda:" + std::to_string(ctx_.device()) + " " + d.name + ", " + ctx_.params().str();
}

void CudaRunner::synchronize() { ctx_.synchronize(); }

Tensor CudaRunner::logits(const Tensor& x, int64_t max_batch) { return net_->predict(x, max_batch); }

double CudaRunner::device_loss(const cuda::DeviceTensor& logits, const std::vector<int32_t>& labels,
                               cuda::DeviceTensor& dz) {
  try {
    const double loss = cuda::softmax_xent_forward_cuda(ctx_, loss_, logits, labels);
    dz = cuda::DeviceTensor(ctx_, logits.shape(), logits.dtype());
    cuda::softmax_xent_backward_cuda(ctx_, loss_, logits, labels, dz);
    return loss;
  } catch (const Error& err) {
    fail("cuda: loss, batch ", logits.dim(0), ": ", err.what());
  }
}

InputGradient CudaRunner::input_gradient(const Tensor& x, const std::vector<int32_t>& labels, Semantics s) {
  DeviceRunContext run = DeviceRunContext::recorded(ctx_, s, &dropout_rng_);
  net_->zero_grad();
  DeviceValue z = net_->forward(run, x);
  cuda::DeviceTensor dz;
  InputGradient g;
  g.loss = device_loss(*z, labels, dz);
  DeviceValue dx = net_->backward(run, std::make_shared<cuda::DeviceTensor>(std::move(dz)));
  g.logits = cuda::to_host(ctx_, *z);
  g.dx = cuda::to_host(ctx_, *dx);
  return g;
}

double CudaRunner::train_step(const Tensor& x, const std::vector<int32_t>& labels, int64_t* correct) {
  DeviceRunContext run = DeviceRunContext::training(ctx_, &dropout_rng_);
  run.input_grad = false;
  const std::vector<DeviceParam*> params = net_->params();
  net_->zero_grad();
  DeviceValue logits = net_->forward(run, x);
  cuda::DeviceTensor dz;
  double loss = device_loss(*logits, labels, dz);
  // The l2_loss mode's penalty D*sum(p^2), as Sgd::penalty adds it on the CPU.
  if (rule_.decay == WeightDecayMode::l2_loss && cfg_.sgd.weight_decay != 0.0) {
    double s = 0;
    for (DeviceParam* p : params)
      if (!p->is_bias || rule_.decay_bias) s += cuda::sum_squares_cuda(ctx_, p->value);
    loss += cfg_.sgd.weight_decay * s;
  }
  last_skip_.clear();
  if (!std::isfinite(loss)) {
    sync_to_model();  // the diagnosis runs the batch on the host with the device's weights
    std::ostringstream what;
    what << "loss is " << loss;
    return nonfinite_step(x, what.str(), "cuda");
  }
  net_->backward(run, std::make_shared<cuda::DeviceTensor>(std::move(dz)));
  cuda::fill_zero(ctx_, flags_);
  for (std::size_t i = 0; i < params.size(); ++i)
    cuda::flag_nonfinite_cuda(ctx_, params[i]->grad, flags_, static_cast<int64_t>(i));
  const Tensor flags = cuda::to_host(ctx_, flags_);
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (flags.at(static_cast<int64_t>(i)) == 0.0) continue;
    const Tensor g = cuda::to_host(ctx_, params[i]->grad);
    const int64_t bad = first_nonfinite(g);
    sync_to_model();
    return nonfinite_step(x, "gradient " + params[i]->name + ".grad[" + std::to_string(bad) + "] is not finite",
                          "cuda");
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    // The first SGD step taken (a skipped batch takes none), as the CPU's Sgd counts it.
    const SgdStepParams sp = sgd_step_params(cfg_.sgd, rule_, params[i]->is_bias, sgd_steps_ == 0);
    cuda::sgd_step_cuda(ctx_, sp, params[i]->value, params[i]->grad, state_[i]);
  }
  ++sgd_steps_;
  if (correct) *correct = count_correct(cuda::to_host(ctx_, *logits), labels);
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
        cuda::to_device(ctx_, x.dtype() == model_.dtype() ? x : x.to(model_.dtype())));
    DeviceRunContext run = DeviceRunContext::inference(ctx_);
    cuda::EventTimer timer(ctx_);
    timer.start();
    net_->forward_device(run, xd);
    t.device_forward_s = timer.stop_seconds();
  }
  return t;
}

}  // namespace driftlab
