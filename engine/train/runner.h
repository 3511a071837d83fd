// The model face: one Runner per built Model, on the CPU or on a CUDA device, with the same
// calls on both. Everything above the engine (train, eval, predict, drift, attribute; next:
// quantize, attack, study runs) goes through it:
//   logits(x)                      inference semantics, on the host
//   input_gradient(x, y, s)        the Policy's loss and dL/dx under train or inference semantics
//   train_step(x, y)               one SGD step (train semantics)
//   run_epoch / evaluate           the epoch loop (shuffle, batches, progress) and loss/accuracy
//   time_prediction(x)             how long logits() takes, measured as each device is timed
// The loss is the Policy's formulation (ce_formulation, ce_clip_eps, loss_reduction); a NaN or
// infinite loss or gradient either stops training with an error naming the epoch, step, the
// failing tensor and the first layer whose output went non-finite (engine/train/nonfinite.h),
// or skips that batch's SGD step (TrainConfig::on_nonfinite), counted in EpochStats.
//
// To add a device: 1) a Runner subclass (engine/train/<device>_runner.*) implementing the pure
// virtual calls; 2) a Device value and its name; 3) a branch in open_runner; 4) the runner tests
// (tests/test_runner.cpp) parameterised over it.
#pragma once
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/model.h"
#include "core/ops/loss_scale.h"
#include "core/ops/softmax_xent.h"
#include "engine/random.h"
#include "engine/train/nonfinite.h"
#include "engine/train/optimizer.h"
#include "engine/train/schedule.h"

namespace driftlab {

enum class Device { cpu, cuda };
const char* device_name(Device d);
Device parse_device(const std::string& name);  // "device: unknown device 'X' (known: cpu, cuda)"

// The Policy's loss as op parameters (ce_formulation, ce_clip_eps, loss_reduction, acc_order).
SoftmaxXentParams resolve_loss(const Policy& policy);

struct TrainConfig {
  int epochs = 1;
  int64_t batch = 128;
  OptimConfig optim;     // the optimiser and its hyperparameters
  ScheduleSpec schedule; // the rate of each step (engine/train/schedule.h)
  bool step_losses = false;  // keep every step's loss in EpochStats::step_losses
  uint64_t seed = 1;
  OnNonFinite on_nonfinite = OnNonFinite::stop;
};

struct EpochStats {
  int epoch = 0;
  double train_loss = 0, train_acc = 0;  // running averages over the epoch's batches
  double val_loss = 0, val_acc = 0;
  double seconds = 0;                    // training time of the epoch (no validation)
  double images_per_s = 0;
  // The epoch's first step alone (its fresh memory, its first calls into each kernel: oneDNN's
  // primitives built and cached) and the rate of the steps after it, what a peer timed "after its
  // first step" is compared with; both 0 where the epoch has one batch.
  double first_step_seconds = 0;
  double images_per_s_after_first = 0;
  int64_t skipped_steps = 0;             // --on-nonfinite skip-batch: steps not taken (not in the averages)
  std::string first_skip;                // what the first skipped step's check found
  int64_t overflow_steps = 0;            // steps the dynamic loss scale skipped (in the averages: a loss was had)
  double loss_scale = 0;                 // the loss scale after the epoch's last step (0: no loss scaling)
  double lr = 0;                         // the rate of the epoch's last step
  std::vector<double> step_losses;       // TrainConfig::step_losses: each step's loss (NaN: skipped)
  uint64_t order_hash = 0;               // FNV-1a 64 of the epoch's sample order (engine/random.h)
};

// An epoch under way: what a checkpoint taken between two steps needs to finish it as an
// uninterrupted run would (the order its batches come in, the next batch, the running sums).
struct EpochProgress {
  bool active = false;             // false between epochs
  std::vector<int64_t> order;      // the epoch's sample order (already drawn from the shuffle stream)
  int64_t next_batch = 0;          // batches done
  double loss_sum = 0;             // sum of loss * batch size over the batches stepped on
  int64_t correct_sum = 0, skipped_samples = 0;
  double elapsed_s = 0;            // training time so far (the epoch's seconds go on from here)
  EpochStats stats;                // epoch, skipped_steps, first_skip, lr, step_losses, order_hash so far
};

// Everything of a Runner's training state that is not in the Model (weights and buffers are):
// what a checkpoint saves and a resumed run restores (train/checkpoint.h).
struct TrainState {
  int epoch = 0;                   // epochs finished
  int64_t step_index = 0;          // steps counted (taken or skipped)
  std::string shuffle_rng;         // the shuffle stream (mt19937_text)
  std::string dropout_rng;         // Rng::state()
  ScheduleState schedule;
  OptimState optim;
  EpochProgress progress;
  // The dynamic loss scale (Policy::loss_scale) and its count of finite steps; 0 and 0 without.
  double loss_scale = 0;
  int64_t loss_scale_finite_steps = 0;
};

struct Progress {
  int epoch, epochs;
  int64_t batch, batches;
  double loss, images_per_s, eta_s;
};
using ProgressFn = std::function<void(const Progress&)>;

struct EvalResult {
  double loss = 0, accuracy = 0;
  int64_t n = 0;
};

// The loss and its gradient with respect to the input, for one batch.
struct InputGradient {
  double loss = 0;  // the Policy's formulation and reduction (no weight-decay penalty)
  Tensor logits;    // (N, classes)
  Tensor dx;        // the input's shape, the model's dtype
};

// Wall-clock seconds of one logits() call on a batch. device_forward_s: the forward pass alone on
// input already on the device (CUDA, whole batch only); negative when not measured.
struct PredictTime {
  double host_to_host_s = 0;
  double device_forward_s = -1;
};

// Gathers samples idx[begin, begin+count) into a batch of the model's dtype.
Tensor gather_batch(const Dataset& data, const std::vector<int64_t>& idx, int64_t begin, int64_t count, DType dtype);

// Each row's class: its largest logit, the first one on ties. logits (N,K).
std::vector<int32_t> predictions(const Tensor& logits);
// Samples whose prediction is their label.
int64_t count_correct(const Tensor& logits, const std::vector<int32_t>& labels);

// An L-infinity attack's step loop on one batch (attacks/gradient.h: FGSM, or BIM / PGD at one eps),
// for a runner that can keep the iterate where its model runs. Bounds and step sizes in input
// units, rounded to the input's dtype as the host loop rounds them.
struct LinfSteps {
  bool fgsm = true;
  int steps = 1;  // BIM / PGD; FGSM takes one
  double eps = 0, step = 0, lo = 0, hi = 1;
  bool early_stop = false;  // a sample whose prediction at x_t differs from its target stays at x_t
  bool judge = false;       // also the logits at the last iterate (LinfStepsResult::last_logits)
};
struct LinfStepsResult {
  Tensor first_logits;                       // the first gradient call's logits (N, classes)
  std::vector<uint8_t> first_zero_gradient;  // per sample: the first call's dL/dx exactly zero
  Tensor last_logits;                        // LinfSteps::judge: a forward pass at the last iterate
};

// The Policy's loss-scale rule (loss_scale_init, _min, _growth_interval; core/ops/loss_scale.h),
// each setting checked (a finite float32 scale and floor, a whole interval >= 1), naming the knob.
DynamicLossScale loss_scale_rule(const Policy& policy);

class Runner {
 public:
  virtual ~Runner() = default;
  Model& model() { return model_; }
  const TrainConfig& config() const { return cfg_; }
  virtual Device device() const = 0;
  // "2 threads" or "cuda:0 NAME, gemm=cublas conv=cudnn ..."
  virtual std::string describe() const = 0;

  // Logits (N, classes) on the host under inference semantics (BatchNorm's running statistics,
  // no dropout); x in any float dtype. max_batch > 0 runs at most that many inputs at a time.
  virtual Tensor logits(const Tensor& x, int64_t max_batch = 0) = 0;
  // The loss of the Policy and dL/dx under semantics s. Inference semantics read BatchNorm's
  // running statistics and move nothing (the gradient a white-box attack on the deployed model
  // needs); train semantics use the batch statistics and move the running ones, as a framework's
  // train-mode forward does, and draw dropout masks. No weight changes. The parameters'
  // gradients are not part of the result and hold unspecified values afterwards: the CPU runner
  // computes dx only (conv2d and dense skip dW and db, RunContext::param_grads), a third less
  // work for an attack's backward.
  virtual InputGradient input_gradient(const Tensor& x, const std::vector<int32_t>& labels, Semantics s) = 0;
  // The L-inf step loop from `start` around x0 at inference semantics: each step the loss's dL/dx
  // at the iterate against `target`, then every element not frozen by early_stop moved by
  // core/ops/linf_step.h; the same arithmetic and decisions as the host loop of
  // attacks/gradient.cpp over input_gradient(), so the same bits where the gradients are.
  // x0, start (null: start at x0) and x_adv are host memory holding `shape` (N, ...) of `dtype`;
  // the last iterate is written to x_adv (which may be start). Returns false where the runner
  // does not offer it (the default: the host loop runs instead; the CUDA runner where dtype is
  // not the model's, which the host loop converts); the CUDA runner
  // keeps x0, the iterate and dL/dx on the device and brings back only the logits per step (and
  // the early-stop flags up), and with spec.judge the last iterate's logits from a forward pass
  // on the device: the judging forward with no copy of the adversarial batch up again.
  virtual bool linf_steps(const void* x0, const void* start, void* x_adv, const Shape& shape, DType dtype,
                          const std::vector<int32_t>& target, const LinfSteps& spec, LinfStepsResult* out) {
    (void)x0, (void)start, (void)x_adv, (void)shape, (void)dtype, (void)target, (void)spec, (void)out;
    return false;
  }
  // One optimiser step on a batch (train semantics) at the schedule's current rate (a step taken
  // advances the schedule); returns the loss (with the l2_loss penalty) and
  // writes the number of correct predictions. A non-finite loss or gradient throws (stop) or
  // takes no step and returns NaN (skip_batch; last_step_skipped() says so).
  virtual double train_step(const Tensor& x, const std::vector<int32_t>& labels, int64_t* correct = nullptr) = 0;
  // How long logits(x, max_batch) takes after a warm-up call (CPU: best of 3; CUDA: one call,
  // plus the device-resident forward).
  virtual PredictTime time_prediction(const Tensor& x, int64_t max_batch = 0) = 0;
  // The device's weights and BatchNorm statistics back into the Model (no-op on the CPU).
  virtual void sync_to_model() {}
  // Checkpoints (train/checkpoint.h): the optimiser's counters and state tensors on the host, and
  // back (shapes checked against the model).
  virtual OptimState optimizer_state() = 0;
  virtual void set_optimizer_state(const OptimState& s) = 0;
  LrSchedule& schedule() { return lr_schedule_; }
  // Whether the last train_step skipped its batch, and what its check found.
  bool last_step_skipped() const { return !last_skip_.empty(); }
  const std::string& last_skip() const { return last_skip_; }
  // Loss scaling (Policy::loss_scale static or dynamic): the scale the next step multiplies the
  // loss gradient by (0 without), and whether the last step was skipped by the dynamic rule for an
  // inf or NaN gradient (such a step counts and returns its loss: the scale backed off).
  double loss_scale() const { return scaling_ ? scaler_.scale : 0.0; }
  bool last_step_overflowed() const { return overflowed_; }

  // One epoch over `train`: the Policy's shuffle from the run seed's stream, batches of
  // config().batch (the last partial batch kept), a step each; `val` (may be null) evaluated after.
  EpochStats run_epoch(const Dataset& train, const Dataset* val, const ProgressFn& progress);
  // The same, resumable: continues the epoch under way (train_state().progress) or starts the
  // next, and calls between_steps() after every step with the runner in a state a checkpoint can
  // take. When it returns false the epoch stays under way and this returns false; true: the
  // epoch ended (validation included) and *stats holds it.
  bool run_epoch(const Dataset& train, const Dataset* val, const ProgressFn& progress,
                 const std::function<bool()>& between_steps, EpochStats* stats);
  // The training state beside the Model's tensors (optimiser state copied to the host), and its
  // restoration into a runner opened on the same Model, spec and data; throws naming what does
  // not fit (an RNG text, an optimiser tensor's shape, a position past the epoch's batches).
  TrainState train_state();
  void set_train_state(const TrainState& s);
  int epoch() const { return epoch_; }
  int64_t step_index() const { return step_index_; }
  const EpochProgress& epoch_progress() const { return progress_; }
  // Loss and accuracy on a dataset, logits() in batches of `batch`, the loss summed on the host.
  EvalResult evaluate(const Dataset& data, int64_t batch);

 protected:
  Runner(Model& model, const TrainConfig& config);
  // Waits for queued device work (an epoch's time includes its last step's).
  virtual void synchronize() {}
  // A step whose `what` ("loss is nan", "gradient 2.dense.weight.grad[5] is inf") is not finite:
  // names the first non-finite tensor of x's forward (the model's weights must be on the host),
  // then throws (stop) or records the skip and returns NaN (skip_batch). Counts the step.
  double nonfinite_step(const Tensor& x, const std::string& what, const char* device);

  Model& model_;
  TrainConfig cfg_;
  ExecContext exec_;  // the host's kernels (the CPU runner's everything; the loss sums on the host)
  SoftmaxXentParams loss_;
  KernelBackend loss_backend_;
  OptimRule rule_;
  LrSchedule lr_schedule_;
  std::mt19937 shuffle_rng_;
  Rng dropout_rng_;
  int epoch_ = 0;
  int64_t step_index_ = 0;
  EpochProgress progress_;
  std::string last_skip_;  // "" when the last step was taken
  bool scaling_ = false;   // Policy::loss_scale = static or dynamic
  bool dynamic_ = false;   // Policy::loss_scale = dynamic: overflowing steps skipped, the scale moves
  bool count_skipped_ = false;  // loss_scale_skipped_step = counted
  DynamicLossScale scaler_;
  bool overflowed_ = false;
};

// A Runner for `model` on `device` (cuda: device 0 with the Policy's cuda knobs; refused with
// "no CUDA device: ..." or naming the first layer without a device implementation). `exec`: the
// CPU runner's kernels and thread count. The model must outlive the runner.
std::unique_ptr<Runner> open_runner(Model& model, Device device, const TrainConfig& config = {},
                                    const ExecContext& exec = {});

}  // namespace driftlab
