// The optimisers: SGD with momentum / Nesterov (core/ops/sgd.h), Adam and RMSprop
// (core/ops/adaptive.h), each in the arithmetic of the framework its knobs name, and weight
// decay placed where each framework puts it (docs/TRAINING.md has every formula and its source).
// The Policy is resolved once into OptimRule; each step turns the run's hyperparameters, the
// rate of this step and the rule into the ops' parameters per parameter tensor (OptimStep), the
// per-step scalars (1-beta, bias corrections, step sizes) formed in the framework's precision.
// The CPU's Optimizer below and the device runner (engine/train/cuda_runner.cpp) take the same
// OptimStep, so the devices agree by construction.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "engine/layers/layer.h"
#include "core/ops/adaptive.h"
#include "engine/policy.h"

namespace driftlab {

enum class OptimizerKind { sgd, adam, rmsprop };
const char* optimizer_name(OptimizerKind k);
OptimizerKind parse_optimizer(const std::string& name);  // "optimizer: unknown 'X' (known: sgd, adam, rmsprop)"

// The run's hyperparameters (the CLI's --optimizer, --lr, ...). lr is the base rate; a schedule
// (engine/train/schedule.h) moves the rate of each step from it. Adam's eps and RMSprop's rho and
// eps are the Policy's (adam_eps, rmsprop_rho, rmsprop_eps): their defaults are framework choices.
struct OptimConfig {
  double lr = 0.01;
  double momentum = 0.0;  // SGD; RMSprop's momentum term
  bool nesterov = false;  // SGD
  double weight_decay = 0.0;
  OptimizerKind kind = OptimizerKind::sgd;
  double beta1 = 0.9, beta2 = 0.999;  // Adam
};
// Throws naming the bad hyperparameter (lr > 0, momentum in [0,1), nesterov needs SGD with
// momentum, weight_decay >= 0, betas in [0,1)).
void check_optim_config(const OptimConfig& config);

struct OptimRule {
  SgdForm form = SgdForm::torch_buffer;                 // sgd_form
  WeightDecayMode decay = WeightDecayMode::grad_add;    // weight_decay_mode
  bool decay_bias = true;                               // weight_decay_on_bias
  KernelBackend backend = KernelBackend::fast;          // sgd_backend (every optimiser step)
  AdamForm adam_form = AdamForm::corrected_moments;     // adam_form
  MomentUpdate moments = MomentUpdate::weighted_sum;    // optim_moment_update
  SquareOrder square = SquareOrder::scale_then_square;  // optim_square_order
  BetaPower beta_power = BetaPower::pow_float64;        // adam_beta_power
  ScalarPrecision precision = ScalarPrecision::float64; // optim_scalar_precision
  double adam_eps = 1e-8;                               // adam_eps
  RmspropForm rmsprop_form = RmspropForm::eps_outside_root;  // rmsprop_form
  double rmsprop_rho = 0.99, rmsprop_eps = 1e-8;        // rmsprop_rho, rmsprop_eps
  double rmsprop_init = 0.0;                            // rmsprop_ms_init: 0 or 1
  bool fused = false;                                   // optim_fma=aten
  AdamLrTOrder lr_t_order = AdamLrTOrder::lr_times_ratio;  // adam_lr_t_order
};
OptimRule resolve_optim(const Policy& policy);

// The op parameters of one SGD step of one parameter tensor (constant rate).
SgdStepParams sgd_step_params(const OptimConfig& config, const OptimRule& rule, bool is_bias, bool first);

// One step of the optimiser at rate `lr`: the ops' parameters for each parameter tensor.
struct OptimStep {
  OptimizerKind kind = OptimizerKind::sgd;
  SgdStepParams sgd;       // is_bias false; decay_this and first set per tensor by for_tensor
  AdamStepParams adam;
  RmspropStepParams rmsprop;
  bool decay_bias = true;
  void for_tensor(bool is_bias);  // sets decay_this of the three
};

// The optimiser's counters and per-parameter state (what a checkpoint saves). slot0/slot1 per
// parameter: SGD's momentum buffer (slot1 unused, empty); Adam's m and v; RMSprop's mean square
// and momentum. Empty before the first step.
struct OptimState {
  int64_t steps = 0;                 // steps taken
  int64_t skipped = 0;               // skipped steps counted in the step count (loss_scale_skipped_step=counted)
  double power1 = 1, power2 = 1;     // running beta1^t, beta2^t (adam_beta_power=product_float32)
  std::vector<Tensor> slot0, slot1;
};

// The scalar side of an optimiser: counts the steps and forms each step's parameters. Shared by
// the CPU Optimizer and the device runner, which keep the state tensors where their data lives.
class OptimSchedule {
 public:
  OptimSchedule(const OptimConfig& config, const OptimRule& rule);
  // The parameters of the next step at rate lr (advances the counters).
  OptimStep next(double lr);
  // A step not taken that still counts (Keras's LossScaleOptimizer skipping a step increments
  // optimizer.iterations): the step count t, and the running beta powers, advance; nothing else.
  void count_skipped();
  const OptimConfig& config() const { return cfg_; }
  const OptimRule& rule() const { return rule_; }
  int64_t steps() const { return steps_; }
  int64_t skipped() const { return skipped_; }
  double power1() const { return power1_; }
  double power2() const { return power2_; }
  void restore(int64_t steps, int64_t skipped, double power1, double power2);
  // The value RMSprop's mean square starts at (rmsprop_ms_init), 0 for the other slots.
  double slot0_init() const;
  // The l2_loss mode's penalty factor D (0 when weight decay does not enter the loss).
  double penalty_factor() const;

 private:
  OptimConfig cfg_;
  OptimRule rule_;
  int64_t steps_ = 0;    // steps taken
  int64_t skipped_ = 0;  // steps skipped but counted: Adam's t is steps_ + skipped_ + 1
  double power1_ = 1, power2_ = 1;
  void advance_powers(int64_t t);
};

class Optimizer {
 public:
  Optimizer(const OptimConfig& config, const OptimRule& rule);
  // One step at the config's lr (or at `lr` when given: the schedule's rate of this step).
  void step(const ExecContext& exec, const std::vector<std::pair<std::string, Param*>>& params);
  void step(const ExecContext& exec, const std::vector<std::pair<std::string, Param*>>& params, double lr);
  // A skipped step that counts (OptimSchedule::count_skipped).
  void count_skipped() { sched_.count_skipped(); }
  // The l2_loss mode's penalty D*sum(p^2), to add to the reported loss (0 otherwise).
  double penalty(const std::vector<std::pair<std::string, Param*>>& params) const;
  const OptimConfig& config() const { return sched_.config(); }
  void set_lr(double lr) { lr_ = lr; }
  double lr() const { return lr_; }
  // Checkpoints: the state (a copy) and its restoration (shapes checked against `params`).
  OptimState state() const;
  void set_state(const OptimState& s, const std::vector<std::pair<std::string, Param*>>& params);

 private:
  OptimSchedule sched_;
  double lr_;
  std::vector<Tensor> slot0_, slot1_;
};

}  // namespace driftlab
