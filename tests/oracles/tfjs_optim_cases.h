// The Adam and RMSprop cases the TF.js oracles run (test_tfjs_oracle.cpp: the optimiser alone and
// LeNet-5; test_rnn_oracle_tfjs.cpp: the LSTM classifier). TF.js 4.22's tf.train.adam is not
// Keras 2.2.4's Adam: it bias-corrects m and v (m/(1-b1^t) over sqrt(v/(1-b2^t)) + eps), keeps
// beta^t as a float32 running product and forms 1-beta in JavaScript doubles; tf.train.rmsprop
// puts eps inside the root (as TF1). The tensorflow preset copies Keras 2.2.4 (epsilon_hat,
// float32 scalars, eps outside the root); the knobs below make it TF.js's, and the tests show both.
#pragma once
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/policy.h"
#include "engine/train/runner.h"

namespace driftlab {

inline const char* const kTfjsAdamKnobs =
    "adam_form=corrected_quotient,adam_beta_power=product_float32,optim_scalar_precision=float64";
inline const char* const kTfjsRmspropKnobs = "rmsprop_form=eps_inside_root,optim_scalar_precision=float64";

struct TfjsOptimCase {
  const char* name;
  OptimizerKind kind;
  double lr, momentum, l2;
  bool schedule;  // the rate halves after every 5 steps (StepLR(5, 0.5) per step)
};
inline const TfjsOptimCase kTfjsOptimCases[] = {
    {"adam", OptimizerKind::adam, 1e-3, 0.0, 0.0, false},
    {"adam_l2_step", OptimizerKind::adam, 1e-3, 0.0, 1e-2, true},
    {"rmsprop", OptimizerKind::rmsprop, 1e-3, 0.0, 0.0, false},
    {"rmsprop_momentum_l2_step", OptimizerKind::rmsprop, 1e-3, 0.9, 1e-2, true},
    {"adam_step", OptimizerKind::adam, 1e-3, 0.0, 0.0, true},  // the models' (their layers have no regularizer)
    {"rmsprop_momentum", OptimizerKind::rmsprop, 1e-3, 0.9, 0.0, false},
};
enum TfjsOptimCaseIndex { kTfjsAdamStep = 4, kTfjsRmsprop = 2, kTfjsRmspropMomentum = 5 };

inline double tfjs_lr_at(const TfjsOptimCase& oc, int step) {
  return oc.schedule ? oc.lr * std::pow(0.5, step / 5) : oc.lr;
}

// The fields cases.js makeOptimizer / setRate read.
inline nlohmann::json tfjs_optimizer_json(const TfjsOptimCase& oc, int steps) {
  nlohmann::json j = {{"optimizer", oc.kind == OptimizerKind::adam ? "adam" : "rmsprop"},
                      {"lr", oc.lr}, {"beta1", 0.9}, {"beta2", 0.999}, {"decay", 0.9}, {"momentum", oc.momentum}};
  if (oc.l2 > 0) j["l2"] = oc.l2;
  if (oc.schedule) {
    nlohmann::json at = nlohmann::json::array();
    for (int k = 0; k < steps; ++k) at.push_back(tfjs_lr_at(oc, k));
    j["lr_at"] = at;
  }
  return j;
}

// p with the knobs that make its optimiser TF.js's (as_tfjs), or p as it is.
inline Policy tfjs_optim_policy(const TfjsOptimCase& oc, bool as_tfjs, Policy p = Policy::tensorflow()) {
  if (!as_tfjs) return p;
  const std::string knobs = oc.kind == OptimizerKind::adam ? kTfjsAdamKnobs : kTfjsRmspropKnobs;
  std::size_t at = 0;
  while (at < knobs.size()) {
    const std::size_t comma = std::min(knobs.find(',', at), knobs.size());
    const std::string kv = knobs.substr(at, comma - at);
    p.set(kv.substr(0, kv.find('=')), kv.substr(kv.find('=') + 1));
    at = comma + 1;
  }
  return p;
}

inline TrainConfig tfjs_optim_config(const TfjsOptimCase& oc, int64_t batch) {
  TrainConfig cfg;
  cfg.batch = batch;
  cfg.optim.kind = oc.kind;
  cfg.optim.lr = oc.lr;
  cfg.optim.momentum = oc.momentum;
  cfg.optim.weight_decay = oc.l2;
  if (oc.schedule) cfg.schedule = parse_schedule("step:step=5,gamma=0.5,every=batch");
  return cfg;
}

}  // namespace driftlab
