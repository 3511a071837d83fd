#include "engine/train/cpu_runner.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include "engine/train/predict_pieces.h"

namespace driftlab {

namespace {

// First parameter gradient that is not finite, or "" when all are.
std::string first_nonfinite_grad(Sequential& net) {
  for (auto& np : net.named_params()) {
    const Tensor& g = np.second->grad;
    const bool all_finite = dispatch_dtype(g.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* d = g.data<T>();
      // x*0 is 0 for finite x and NaN for Inf/NaN: the sums are finite iff all are. 16 sums side
      // by side: one running sum is a chain of dependent adds (LeNet-5's 61K gradients: ~60 us
      // of a B-32 step on one thread while the other waits); 16 fill the vector lanes.
      constexpr int kLanes = 16;
      T lane[kLanes] = {};
      const int64_t n = g.numel();
      int64_t i = 0;
      for (; i + kLanes <= n; i += kLanes)
        for (int l = 0; l < kLanes; ++l) lane[l] += d[i + l] * T(0);
      T sum = 0;
      for (; i < n; ++i) sum += d[i] * T(0);
      for (int l = 0; l < kLanes; ++l) sum += lane[l];
      return static_cast<bool>(std::isfinite(sum));
    });
    if (all_finite) continue;  // the vectorised check; the scan below only where it failed
    if (const int64_t bad = first_nonfinite(g); bad >= 0) return np.first + ".grad[" + std::to_string(bad) + "]";
  }
  return "";
}

}  // namespace

CpuRunner::CpuRunner(Model& model, const TrainConfig& config, ExecContext exec)
    : Runner(model, config), opt_(config.optim, rule_) {
  exec_ = std::move(exec);
  warm_up_gemms(exec_.kernels);  // library set-up outside the first epoch's timer (kernels/cpu/registry.h)
}

std::string CpuRunner::describe() const { return std::to_string(exec_.threads) + " threads"; }

Tensor CpuRunner::logits(const Tensor& x, int64_t max_batch) {
  check(max_batch == 0, "predict: --max-batch is for --device cuda (the CPU runs each size as one batch)");
  RunContext ctx = RunContext::inference(exec_);
  if (exec_.layer_inputs || exec_.replace_layer_input) return model_.forward(ctx, x);  // taps see the whole batch
  // The same bits as model_.forward, in pieces where the rule finds it faster (predict_pieces.h).
  const Tensor in = model_.in_dtype(x);
  return predict_in_pieces(ctx, *model_.net, in, predict_pieces(*model_.net, in.dim(0), in.dtype()));
}

InputGradient CpuRunner::input_gradient(const Tensor& x, const std::vector<int32_t>& labels, Semantics s) {
  RunContext ctx = RunContext::recorded(exec_, s, &dropout_rng_);
  ctx.param_grads = false;  // dx only: conv2d and dense skip dW and db (runner.h)
  InputGradient g;
  g.logits = model_.forward(ctx, x);
  const SoftmaxXentKernel& k = exec_.pick(exec_.kernels.softmax_xent, loss_backend_, loss_, g.logits.dtype());
  g.loss = k.forward(loss_, g.logits, labels);
  Tensor dz = Tensor::empty(g.logits.shape(), g.logits.dtype());
  k.backward(loss_, g.logits, labels, dz);
  g.dx = model_.net->backward(ctx, dz);
  return g;
}

// t's elements times f, in t's own type.
void CpuRunner::scale_elements(Tensor& t, double f) {
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = t.channel_block() ? t.blocked_data<T>() : t.data<T>();
    const T m = static_cast<T>(f);
    for (int64_t i = 0; i < t.numel(); ++i) d[i] *= m;
  });
}

// A step whose scaled gradients (or loss) overflowed: no optimizer step, the scale backed off; the
// step counts and the rate schedule moves (a loop calling scheduler.step() every iteration; Keras's
// schedules read optimizer.iterations, which the skip increments), and under
// loss_scale_skipped_step=counted so does the optimizer's step count.
double CpuRunner::overflow_step(double loss) {
  scaler_.update(true);
  overflowed_ = true;
  if (count_skipped_) opt_.count_skipped();
  lr_schedule_.after_step();
  ++step_index_;
  return loss;
}

double CpuRunner::train_step(const Tensor& x, const std::vector<int32_t>& labels, int64_t* correct) {
  last_skip_.clear();
  RunContext ctx = RunContext::training(exec_, &dropout_rng_);
  ctx.input_grad = false;
  auto params = model_.net->named_params();
  // A non-finite step leaves no trace in either mode: BatchNorm's running statistics (moved by the
  // train-mode forward) are put back as they were before the diagnosis runs the batch again, and
  // before stop's error leaves the model to its caller (they are per channel: a small copy).
  std::vector<Tensor> saved;
  for (auto& b : model_.net->named_buffers()) saved.push_back(b.second->value.clone());
  auto restore = [&] {
    std::size_t i = 0;
    for (auto& b : model_.net->named_buffers()) b.second->value = saved[i++];
  };
  model_.net->zero_grad();
  Tensor logits = model_.forward(ctx, x);
  const SoftmaxXentKernel& k = exec_.pick(exec_.kernels.softmax_xent, loss_backend_, loss_, logits.dtype());
  double loss = k.forward(loss_, logits, labels) + opt_.penalty(params);
  if (correct) *correct = count_correct(logits, labels);
  overflowed_ = false;
  if (dynamic_ && !std::isfinite(loss)) return overflow_step(loss);  // its gradients would be too
  if (!std::isfinite(loss)) {
    std::ostringstream what;
    what << "loss is " << loss;
    restore();
    return nonfinite_step(x, what.str(), "");
  }
  Tensor dz(logits.shape(), logits.dtype());
  k.backward(loss_, logits, labels, dz);
  // A power-of-two scale multiplies exactly (inf where it overflows); another static scale rounds.
  if (scaling_) scale_elements(dz, scaler_.scale);
  model_.net->backward(ctx, dz);
  if (scaling_) {
    // GradScaler's unscale_ (Keras's get_unscaled_gradients): every gradient times the scale's
    // float32 reciprocal; under the dynamic rule the step is taken only when all are finite (a
    // static scale leaves a non-finite gradient to --on-nonfinite, as any other).
    const float inv = static_cast<float>(1.0 / static_cast<double>(scaler_.scale));
    bool found_nonfinite = false;
    for (auto& np : params) {
      scale_elements(np.second->grad, inv);
      found_nonfinite = found_nonfinite || (dynamic_ && first_nonfinite(np.second->grad) >= 0);
    }
    if (found_nonfinite) return overflow_step(loss);
    if (dynamic_) scaler_.update(false);
  }
  std::string bad = first_nonfinite_grad(*model_.net);
  if (!bad.empty()) {
    restore();
    return nonfinite_step(x, "gradient " + bad + " is not finite", "");
  }
  opt_.step(exec_, params, lr_schedule_.lr());
  lr_schedule_.after_step();
  ++step_index_;
  return loss;
}

PredictTime CpuRunner::time_prediction(const Tensor& x, int64_t max_batch) {
  logits(x, max_batch);  // warm-up: primitive creation and page faults are not prediction time
  PredictTime t;
  t.host_to_host_s = std::numeric_limits<double>::infinity();
  for (int rep = 0; rep < 3; ++rep) {  // best of 3: one call is at the mercy of the machine
    auto t0 = std::chrono::steady_clock::now();
    logits(x, max_batch);
    t.host_to_host_s = std::min(t.host_to_host_s,
                                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return t;
}

}  // namespace driftlab
