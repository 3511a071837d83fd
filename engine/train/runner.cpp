#include "engine/train/runner.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/host_memory.h"
#include "engine/train/cpu_runner.h"
#include "engine/train/cuda_runner.h"

namespace driftlab {

const char* device_name(Device d) { return d == Device::cpu ? "cpu" : "cuda"; }

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::cpu;
  if (name == "cuda") return Device::cuda;
  fail("device: unknown device '", name, "' (known: cpu, cuda)");
}

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

std::vector<int32_t> predictions(const Tensor& logits) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  std::vector<int32_t> p(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j)
      if (logits.at(i * k + j) > logits.at(i * k + best)) best = j;
    p[static_cast<std::size_t>(i)] = static_cast<int32_t>(best);
  }
  return p;
}

int64_t count_correct(const Tensor& logits, const std::vector<int32_t>& labels) {
  const std::vector<int32_t> p = predictions(logits);
  int64_t c = 0;
  for (std::size_t i = 0; i < p.size(); ++i) c += p[i] == labels[i];
  return c;
}

DynamicLossScale loss_scale_rule(const Policy& pol) {
  check(std::isfinite(static_cast<float>(pol.loss_scale_init)), "loss_scale_init=", pol.get("loss_scale_init"),
        " is not a finite float32 (the scale is held in float32)");
  check(std::isfinite(static_cast<float>(pol.loss_scale_min)), "loss_scale_min=", pol.get("loss_scale_min"),
        " is not a finite float32 (the scale is held in float32)");
  check(std::floor(pol.loss_scale_growth_interval) == pol.loss_scale_growth_interval &&
            pol.loss_scale_growth_interval >= 1,
        "loss_scale_growth_interval=", pol.get("loss_scale_growth_interval"), " must be a whole number of steps >= 1");
  DynamicLossScale s;
  s.scale = static_cast<float>(pol.loss_scale_init);
  s.min_scale = static_cast<float>(pol.loss_scale_min);
  s.growth_interval = static_cast<int64_t>(pol.loss_scale_growth_interval);
  return s;
}

Runner::Runner(Model& model, const TrainConfig& config)
    : model_(model),
      cfg_(config),
      loss_(resolve_loss(model.policy)),
      loss_backend_(model.policy.loss_backend),
      rule_((check_optim_config(config.optim), resolve_optim(model.policy))),  // its errors before the schedule's
      lr_schedule_(config.schedule, config.optim.lr, model.policy),
      shuffle_rng_(static_cast<uint32_t>(config.seed & 0xffffffffu)),
      dropout_rng_(model.policy.rng_engine, config.seed + 1) {
  const Policy& pol = model.policy;
  if (pol.loss_scale != LossScale::none) {
    scaler_ = loss_scale_rule(pol);
    scaling_ = true;
    dynamic_ = pol.loss_scale == LossScale::dynamic;
    count_skipped_ = pol.loss_scale_skipped_step == SkippedStep::counted;
  }
  check(config.batch >= 1, "train: batch=", config.batch, " must be >= 1");
  check(config.epochs >= 0, "train: epochs=", config.epochs, " must be >= 0");
  check_optim_config(config.optim);
}

double Runner::nonfinite_step(const Tensor& x, const std::string& what, const char* device) {
  const std::string where = locate_nonfinite_forward(model_, exec_, x);
  std::ostringstream os;
  os << "train: non-finite step at epoch " << epoch_ + 1 << " step " << step_index_ + 1 << " (lr=" << lr_schedule_.lr()
     << (*device ? ", " : "") << device << "): " << what << "; first non-finite tensor in the forward: "
     << (where.empty() ? "none under inference semantics (train-only BatchNorm statistics or dropout, or the backward)"
                       : where);
  if (cfg_.on_nonfinite == OnNonFinite::stop)
    fail(os.str(), "; lower --lr, check the inputs, or pass --on-nonfinite skip-batch");
  last_skip_ = os.str();
  ++step_index_;
  return std::numeric_limits<double>::quiet_NaN();
}

EpochStats Runner::run_epoch(const Dataset& train, const Dataset* val, const ProgressFn& progress) {
  EpochStats st;
  run_epoch(train, val, progress, {}, &st);
  return st;
}

bool Runner::run_epoch(const Dataset& train, const Dataset* val, const ProgressFn& progress,
                       const std::function<bool()>& between_steps, EpochStats* stats) {
  using clock = std::chrono::steady_clock;
  const int64_t n = train.images.dim(0);
  check(n > 0, "train: dataset '", train.name, "' is empty");
  const DType dtype = model_.dtype();
  EpochProgress& p = progress_;
  if (!p.active) {
    p = EpochProgress{};
    p.active = true;
    p.order = permutation(n, model_.policy.shuffle, shuffle_rng_);
    p.stats.epoch = epoch_ + 1;
    p.stats.order_hash = order_hash(p.order);
  }
  check(static_cast<int64_t>(p.order.size()) == n, "train: the epoch under way has an order of ", p.order.size(),
        " samples, the dataset ", train.name, " has ", n);
  const int64_t batch = cfg_.batch, batches = (n + batch - 1) / batch;
  check(p.next_batch >= 0 && p.next_batch <= batches, "train: the epoch under way is at batch ", p.next_batch,
        " of ", batches);
  EpochStats& st = p.stats;
  // The epoch's time goes on from what an interrupted process had measured.
  const auto t0 = clock::now() - std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(p.elapsed_s));
  while (p.next_batch < batches) {
    const int64_t b = p.next_batch;
    int64_t begin = b * batch, cnt = std::min(batch, n - begin);
    Tensor x = gather_batch(train, p.order, begin, cnt, dtype);
    std::vector<int32_t> y(static_cast<std::size_t>(cnt));
    for (int64_t i = 0; i < cnt; ++i) y[i] = train.labels[p.order[begin + i]];
    int64_t correct = 0;
    st.lr = lr_schedule_.lr();
    double loss = train_step(x, y, &correct);
    if (cfg_.step_losses) st.step_losses.push_back(loss);
    if (last_step_overflowed()) ++st.overflow_steps;
    if (last_step_skipped()) {  // no step taken: out of the epoch's loss and accuracy
      if (st.skipped_steps++ == 0) st.first_skip = last_skip_;
      p.skipped_samples += cnt;
    } else {
      p.loss_sum += loss * static_cast<double>(cnt);
      p.correct_sum += correct;
    }
    ++p.next_batch;
    p.elapsed_s = std::chrono::duration<double>(clock::now() - t0).count();
    if (b == 0) st.first_step_seconds = p.elapsed_s;
    if (progress) {
      double ips = static_cast<double>(begin + cnt) / std::max(p.elapsed_s, 1e-9);
      const int64_t counted = std::max<int64_t>(begin + cnt - p.skipped_samples, 1);
      progress({epoch_ + 1, cfg_.epochs, b + 1, batches, p.loss_sum / static_cast<double>(counted), ips,
                static_cast<double>(n - begin - cnt) / ips});
    }
    if (between_steps && !between_steps()) {
      synchronize();
      p.elapsed_s = std::chrono::duration<double>(clock::now() - t0).count();
      return false;
    }
  }
  synchronize();  // the epoch's time includes the last step's device work
  st.loss_scale = loss_scale();
  st.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  st.images_per_s = static_cast<double>(n) / st.seconds;
  st.images_per_s_after_first = 0;
  if (batches > 1 && st.first_step_seconds > 0 && st.seconds > st.first_step_seconds)
    st.images_per_s_after_first = static_cast<double>(n - std::min(batch, n)) / (st.seconds - st.first_step_seconds);
  // Averages over the batches stepped on (NaN when every batch was skipped).
  const double counted = static_cast<double>(n - p.skipped_samples);
  st.train_loss = counted > 0 ? p.loss_sum / counted : std::numeric_limits<double>::quiet_NaN();
  st.train_acc =
      counted > 0 ? static_cast<double>(p.correct_sum) / counted : std::numeric_limits<double>::quiet_NaN();
  check(val || !lr_schedule_.needs_validation(), "train: the plateau schedule watches the validation loss; "
        "this run has no validation set");
  if (val) {
    EvalResult e = evaluate(*val, 1000);
    st.val_loss = e.loss;
    st.val_acc = e.accuracy;
  }
  lr_schedule_.after_epoch(val ? st.val_loss : std::numeric_limits<double>::quiet_NaN());
  ++epoch_;
  if (stats) *stats = std::move(st);
  progress_ = EpochProgress{};
  return true;
}

TrainState Runner::train_state() {
  TrainState s;
  s.epoch = epoch_;
  s.step_index = step_index_;
  s.shuffle_rng = mt19937_text(shuffle_rng_);
  s.dropout_rng = dropout_rng_.state();
  s.schedule = lr_schedule_.state();
  s.optim = optimizer_state();
  s.progress = progress_;
  if (scaling_) {
    s.loss_scale = scaler_.scale;
    s.loss_scale_finite_steps = scaler_.finite_steps;
  }
  return s;
}

void Runner::set_train_state(const TrainState& s) {
  check(s.epoch >= 0 && s.step_index >= 0, "train state: epoch ", s.epoch, " and step ", s.step_index,
        " must be >= 0");
  std::mt19937 shuffle;
  mt19937_from_text(shuffle, s.shuffle_rng, "train state: shuffle stream");
  Rng dropout = dropout_rng_;
  dropout.set_state(s.dropout_rng);
  check(!scaling_ || (s.loss_scale > 0 && s.loss_scale_finite_steps >= 0),
        "train state: loss_scale=dynamic needs the scale and its count of finite steps (got ", s.loss_scale, ", ",
        s.loss_scale_finite_steps, ")");
  set_optimizer_state(s.optim);  // checks every tensor against the model before anything below changes
  shuffle_rng_ = shuffle;
  dropout_rng_ = dropout;
  lr_schedule_.set_state(s.schedule);
  epoch_ = s.epoch;
  step_index_ = s.step_index;
  progress_ = s.progress;
  if (scaling_) {
    scaler_.scale = static_cast<float>(s.loss_scale);
    scaler_.finite_steps = s.loss_scale_finite_steps;
  }
}

namespace {
// An evaluation's batches (1,000 inputs) need blocks of other sizes than the training steps' (and
// the other way round), so the host cache is given back on the way in and out when it holds more
// than this: VGG-16's training blocks (about 0.9 GB at B-128) stayed resident beside its
// evaluation's, and its `driftlab train` peaked at 2.8 GB of RSS for 1.5 GB of tensors. Below it a
// model keeps its cache (LeNet's whole training set of blocks is smaller), so that small models do
// not fault their blocks in again every epoch (page clearing, roughly a tenth of a second per GB).
constexpr std::size_t kKeepAcrossEvaluation = std::size_t{256} << 20;
}  // namespace

EvalResult Runner::evaluate(const Dataset& data, int64_t batch) {
  check(batch >= 1, "evaluate: batch=", batch, " must be >= 1");
  host_memory::trim_above(kKeepAcrossEvaluation);
  struct TrimOnExit {
    ~TrimOnExit() { host_memory::trim_above(kKeepAcrossEvaluation); }
  } trim_on_exit;
  const int64_t n = data.images.dim(0);
  std::vector<int64_t> idx(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[i] = i;
  SoftmaxXentParams lp = loss_;
  lp.mean = false;
  EvalResult r;
  int64_t correct = 0;
  for (int64_t b = 0; b < n; b += batch) {
    int64_t cnt = std::min(batch, n - b);
    Tensor x = gather_batch(data, idx, b, cnt, model_.dtype());
    std::vector<int32_t> y(data.labels.begin() + b, data.labels.begin() + b + cnt);
    Tensor z = logits(x);
    r.loss += exec_.pick(exec_.kernels.softmax_xent, loss_backend_, lp, z.dtype()).forward(lp, z, y);
    correct += count_correct(z, y);
  }
  r.n = n;
  r.loss /= static_cast<double>(n);
  r.accuracy = static_cast<double>(correct) / static_cast<double>(n);
  return r;
}

std::unique_ptr<Runner> open_runner(Model& model, Device device, const TrainConfig& config,
                                    const ExecContext& exec) {
  if (device == Device::cpu) return std::make_unique<CpuRunner>(model, config, exec);
  return std::make_unique<CudaRunner>(model, config);
}

}  // namespace driftlab
