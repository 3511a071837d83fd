// SGD with momentum / Nesterov in each framework's formula (engine/ops/sgd.h, the op both devices
// run), and weight decay placed where each framework puts it. The Policy is resolved once into
// SgdRule; each step turns the run's hyperparameters and the rule into the op's SgdStepParams
// per parameter tensor (sgd_step_params), on the CPU (Sgd below) and on the device
// (engine/train/cuda_runner.cpp) alike.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "engine/layers/layer.h"
#include "engine/policy.h"

namespace driftlab {

struct SgdConfig {
  double lr = 0.01;
  double momentum = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
};
// Throws naming the bad hyperparameter (lr > 0, momentum in [0,1), nesterov needs momentum,
// weight_decay >= 0).
void check_sgd_config(const SgdConfig& config);

struct SgdRule {
  SgdForm form = SgdForm::torch_buffer;                 // sgd_form
  WeightDecayMode decay = WeightDecayMode::grad_add;    // weight_decay_mode
  bool decay_bias = true;                               // weight_decay_on_bias
  KernelBackend backend = KernelBackend::fast;          // sgd_backend
};
SgdRule resolve_sgd(const Policy& policy);

// The op parameters of one step of one parameter tensor.
SgdStepParams sgd_step_params(const SgdConfig& config, const SgdRule& rule, bool is_bias, bool first);

class Sgd {
 public:
  Sgd(const SgdConfig& config, const SgdRule& rule);
  void step(const ExecContext& exec, const std::vector<std::pair<std::string, Param*>>& params);
  // The l2_loss mode's penalty D*sum(p^2), to add to the reported loss (0 otherwise).
  double penalty(const std::vector<std::pair<std::string, Param*>>& params) const;
  const SgdConfig& config() const { return cfg_; }
  void set_lr(double lr) { cfg_.lr = lr; }

 private:
  SgdConfig cfg_;
  SgdRule rule_;
  std::vector<Tensor> state_;  // momentum buffer / velocity per parameter
  long steps_ = 0;
};

}  // namespace driftlab
