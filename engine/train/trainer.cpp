#include "engine/train/trainer.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "engine/random.h"

namespace driftlab {

SoftmaxXentParams resolve_loss(const Policy& policy) {
  SoftmaxXentParams p;
  p.form = policy.ce_formulation;
  p.clip_eps = policy.ce_clip_eps;
  p.mean = policy.loss_reduction == LossReduction::mean;
  p.sum_order = policy.acc_order;
  return p;
}

Tensor gather_batch(const Dataset& data, const std::vector<int64_t>& idx, int64_t begin, int64_t count,
                    DType dtype) {
  Shape s = data.images.shape();
  const int64_t per = data.images.numel() / s[0];
  s[0] = count;
  Tensor b(s, dtype);
  const float* src = data.images.data<float>();
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dst = b.data<T>();
    for (int64_t i = 0; i < count; ++i) {
      const float* row = src + idx[begin + i] * per;
      for (int64_t j = 0; j < per; ++j) dst[i * per + j] = static_cast<T>(row[j]);
    }
  });
  return b;
}

int64_t count_correct(const Tensor& logits, const std::vector<int32_t>& labels) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j)
      if (logits.at(i * k + j) > logits.at(i * k + best)) best = j;
    c += best == labels[i];
  }
  return c;
}

namespace {

// First parameter gradient that is not finite, or "" when all are.
std::string first_nonfinite_grad(Sequential& net) {
  for (auto& np : net.named_params()) {
    const Tensor& g = np.second->grad;
    int64_t bad = dispatch_dtype(g.dtype(), [&](auto tag) -> int64_t {
      using T = decltype(tag);
      const T* d = g.data<T>();
      T sum = 0;  // x*0 is 0 for finite x and NaN for Inf/NaN: the sum is finite iff all are
      for (int64_t i = 0; i < g.numel(); ++i) sum += d[i] * T(0);
      if (std::isfinite(sum)) return -1;
      for (int64_t i = 0; i < g.numel(); ++i)
        if (!std::isfinite(d[i])) return i;
      return -1;
    });
    if (bad >= 0) return np.first + ".grad[" + std::to_string(bad) + "]";
  }
  return "";
}

}  // namespace

EvalResult evaluate(Model& model, ExecContext& exec, const Dataset& data, int64_t batch) {
  check(batch >= 1, "evaluate: batch=", batch, " must be >= 1");
  const int64_t n = data.images.dim(0);
  std::vector<int64_t> idx(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[i] = i;
  RunContext ctx{exec, false, nullptr};
  SoftmaxXentParams lp = resolve_loss(model.policy);
  lp.mean = false;
  EvalResult r;
  int64_t correct = 0;
  for (int64_t b = 0; b < n; b += batch) {
    int64_t cnt = std::min(batch, n - b);
    Tensor x = gather_batch(data, idx, b, cnt, model.dtype());
    std::vector<int32_t> y(data.labels.begin() + b, data.labels.begin() + b + cnt);
    Tensor logits = model.forward(ctx, x);
    r.loss += softmax_xent_forward_ref(lp, logits, y);
    correct += count_correct(logits, y);
  }
  r.n = n;
  r.loss /= static_cast<double>(n);
  r.accuracy = static_cast<double>(correct) / static_cast<double>(n);
  return r;
}

Trainer::Trainer(Model& model, ExecContext& exec, const TrainConfig& config)
    : model_(model),
      exec_(exec),
      cfg_(config),
      loss_(resolve_loss(model.policy)),
      sgd_(config.sgd, resolve_sgd(model.policy)),
      shuffle_rng_(static_cast<uint32_t>(config.seed & 0xffffffffu)),
      dropout_rng_(model.policy.rng_engine, config.seed + 1) {
  check(config.batch >= 1, "train: batch=", config.batch, " must be >= 1");
  check(config.epochs >= 0, "train: epochs=", config.epochs, " must be >= 0");
  warm_up_gemms(exec.kernels);  // library set-up outside the first epoch's timer (registry.h)
}

double Trainer::step(const Tensor& x, const std::vector<int32_t>& labels, int64_t* correct) {
  RunContext ctx{exec_, true, &dropout_rng_};
  ctx.input_grad = false;
  auto params = model_.net->named_params();
  model_.net->zero_grad();
  Tensor logits = model_.forward(ctx, x);
  double loss = softmax_xent_forward_ref(loss_, logits, labels) + sgd_.penalty(params);
  check(std::isfinite(loss), "train: loss is ", loss, " at epoch ", epoch_ + 1, " step ", step_index_ + 1,
        " (lr=", cfg_.sgd.lr, "); the logits or weights diverged");
  Tensor dz(logits.shape(), logits.dtype());
  softmax_xent_backward_ref(loss_, logits, labels, dz);
  model_.net->backward(ctx, dz);
  std::string bad = first_nonfinite_grad(*model_.net);
  check(bad.empty(), "train: non-finite gradient ", bad, " at epoch ", epoch_ + 1, " step ", step_index_ + 1);
  sgd_.step(params);
  if (correct) *correct = count_correct(logits, labels);
  ++step_index_;
  return loss;
}

EpochStats train_epoch(const Dataset& train, const Policy& policy, DType dtype, int64_t batch, int epoch, int epochs,
                       std::mt19937& shuffle_rng, const BatchStepFn& step, const ProgressFn& progress) {
  using clock = std::chrono::steady_clock;
  const int64_t n = train.images.dim(0);
  check(n > 0, "train: dataset '", train.name, "' is empty");
  std::vector<int64_t> order = permutation(n, policy.shuffle, shuffle_rng);
  const int64_t batches = (n + batch - 1) / batch;
  EpochStats st;
  st.epoch = epoch + 1;
  double loss_sum = 0;
  int64_t correct_sum = 0;
  auto t0 = clock::now();
  for (int64_t b = 0; b < batches; ++b) {
    int64_t begin = b * batch, cnt = std::min(batch, n - begin);
    Tensor x = gather_batch(train, order, begin, cnt, dtype);
    std::vector<int32_t> y(static_cast<std::size_t>(cnt));
    for (int64_t i = 0; i < cnt; ++i) y[i] = train.labels[order[begin + i]];
    int64_t correct = 0;
    double loss = step(x, y, &correct);
    loss_sum += loss * static_cast<double>(cnt);
    correct_sum += correct;
    if (progress) {
      double el = std::chrono::duration<double>(clock::now() - t0).count();
      double ips = static_cast<double>(begin + cnt) / std::max(el, 1e-9);
      progress({epoch + 1, epochs, b + 1, batches, loss_sum / static_cast<double>(begin + cnt), ips,
                static_cast<double>(n - begin - cnt) / ips});
    }
  }
  st.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  st.images_per_s = static_cast<double>(n) / st.seconds;
  st.train_loss = loss_sum / static_cast<double>(n);
  st.train_acc = static_cast<double>(correct_sum) / static_cast<double>(n);
  return st;
}

EpochStats Trainer::run_epoch(const Dataset& train, const Dataset* val, const ProgressFn& progress) {
  EpochStats st = train_epoch(
      train, model_.policy, model_.dtype(), cfg_.batch, epoch_, cfg_.epochs, shuffle_rng_,
      [this](const Tensor& x, const std::vector<int32_t>& y, int64_t* correct) { return step(x, y, correct); },
      progress);
  if (val) {
    EvalResult e = evaluate(model_, exec_, *val, 1000);
    st.val_loss = e.loss;
    st.val_acc = e.accuracy;
  }
  ++epoch_;
  return st;
}

}  // namespace driftlab
