// SGD with momentum / Nesterov in each framework's formula, and weight decay placed where
// each framework puts it. The Policy is resolved once into SgdRule.
//   torch_buffer:       g' = g (+ D*p);  b = g' at the first step, else mu*b + g';
//                       p -= lr*b, or Nesterov p -= lr*(g' + mu*b)          (torch/optim/sgd.py)
//   keras_velocity:     v = mu*v - lr*g;  p += v, or Nesterov p += mu*v - lr*g   (keras/optimizers.py@2.2.4)
//   lasagne_difference: x = mu*v + (p - lr*g); v = x - p; p = x;
//                       Nesterov: x = mu*v + (p - lr*g) - p; v = x; p = mu*x + (p - lr*g)
// Weight decay D: grad_add g += D*p; l2_loss g += 2*D*p (loss += D*sum p^2); decoupled p -= lr*D*p
// before the step. Applied to biases only when weight_decay_on_bias.
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

struct SgdRule {
  SgdForm form = SgdForm::torch_buffer;
  WeightDecayMode decay = WeightDecayMode::grad_add;
  bool decay_bias = true;
};
SgdRule resolve_sgd(const Policy& policy);

class Sgd {
 public:
  Sgd(const SgdConfig& config, const SgdRule& rule);
  void step(const std::vector<std::pair<std::string, Param*>>& params);
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
