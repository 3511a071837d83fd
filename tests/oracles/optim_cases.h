// The optimiser cases every training oracle runs (tests/oracles/test_*_oracle*.cpp): Adam and
// RMSprop, with and without weight decay, with a learning-rate schedule, 20 steps from the same
// weights. One table, so that PyTorch and TF.js, LeNet-5 and the LSTM classifier run the same
// cases; each framework's script reads the case's JSON (optim_case_json) and builds its own
// optimiser from it, driftlab builds its TrainConfig (optim_train_config).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "engine/policy.h"
#include "engine/train/runner.h"

namespace driftlab {

struct OptimVariant {
  const char* name;
  const char* optimizer;  // the framework's class: adam, adamw (torch.optim.AdamW), rmsprop
  double lr, weight_decay, momentum;
  bool schedule;          // StepLR(step_size 5, gamma 0.5) stepped after every optimiser step
};

// lr 1e-3 (both frameworks' Adam default; RMSprop's in Keras and TF.js); weight decay 1e-2 so
// that its term is visible in 20 steps; RMSprop's momentum 0.9 once.
inline const OptimVariant kOptimVariants[] = {
    {"adam", "adam", 1e-3, 0.0, 0.0, false},
    {"adam_wd_step", "adam", 1e-3, 1e-2, 0.0, true},
    {"adamw", "adamw", 1e-3, 1e-2, 0.0, false},
    {"rmsprop", "rmsprop", 1e-3, 0.0, 0.0, false},
    {"rmsprop_momentum_wd_step", "rmsprop", 1e-3, 1e-2, 0.9, true},
};
constexpr int64_t kOptimStepSize = 5;
constexpr double kOptimGamma = 0.5;
constexpr double kOptimBeta1 = 0.9, kOptimBeta2 = 0.999;

// The case fields a framework script needs; eps and RMSprop's decay are the policy's (adam_eps,
// rmsprop_eps, rmsprop_rho), so the framework is handed driftlab's values and the test checks
// that the preset's defaults are the framework's elsewhere (tests/test_optimizer.cpp).
inline nlohmann::json optim_case_json(const OptimVariant& v, const Policy& p) {
  nlohmann::json j = {{"optimizer", v.optimizer}, {"lr", v.lr},          {"weight_decay", v.weight_decay},
                      {"momentum", v.momentum},   {"beta1", kOptimBeta1}, {"beta2", kOptimBeta2},
                      {"eps", v.optimizer[0] == 'r' ? p.rmsprop_eps : p.adam_eps},
                      {"alpha", p.rmsprop_rho},   {"nesterov", false}};
  j["schedule"] = v.schedule ? nlohmann::json{{"step_size", kOptimStepSize}, {"gamma", kOptimGamma}}
                             : nlohmann::json(nullptr);
  return j;
}

// The policy a variant runs under: AdamW is Adam with decoupled_scale weight decay.
inline Policy optim_policy(const OptimVariant& v, Policy p) {
  if (std::string(v.optimizer) == "adamw") p.weight_decay_mode = WeightDecayMode::decoupled_scale;
  return p;
}

inline TrainConfig optim_train_config(const OptimVariant& v, int64_t batch) {
  TrainConfig cfg;
  cfg.batch = batch;
  cfg.optim.kind = std::string(v.optimizer) == "rmsprop" ? OptimizerKind::rmsprop : OptimizerKind::adam;
  cfg.optim.lr = v.lr;
  cfg.optim.weight_decay = v.weight_decay;
  cfg.optim.momentum = v.momentum;
  cfg.optim.beta1 = kOptimBeta1;
  cfg.optim.beta2 = kOptimBeta2;
  if (v.schedule)
    cfg.schedule = parse_schedule("step:step=" + std::to_string(kOptimStepSize) + ",gamma=0.5,every=batch");
  return cfg;
}

}  // namespace driftlab
