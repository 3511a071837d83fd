#include "engine/train/sgd.h"

namespace driftlab {

SgdRule resolve_sgd(const Policy& policy) {
  return {policy.sgd_form, policy.weight_decay_mode, policy.weight_decay_on_bias, policy.sgd_backend};
}

void check_sgd_config(const SgdConfig& config) {
  check(config.lr > 0, "sgd: lr=", config.lr, " must be > 0");
  check(config.momentum >= 0 && config.momentum < 1, "sgd: momentum=", config.momentum, " must be in [0,1)");
  check(!config.nesterov || config.momentum > 0, "sgd: nesterov needs momentum > 0");
  check(config.weight_decay >= 0, "sgd: weight_decay=", config.weight_decay, " must be >= 0");
}

SgdStepParams sgd_step_params(const SgdConfig& c, const SgdRule& r, bool is_bias, bool first) {
  SgdStepParams p;
  p.lr = c.lr, p.momentum = c.momentum, p.weight_decay = c.weight_decay, p.nesterov = c.nesterov;
  p.form = r.form;
  p.decay = r.decay;
  p.decay_this = !is_bias || r.decay_bias;
  p.first = first;
  return p;
}

Sgd::Sgd(const SgdConfig& config, const SgdRule& rule) : cfg_(config), rule_(rule) { check_sgd_config(config); }

void Sgd::step(const ExecContext& exec, const std::vector<std::pair<std::string, Param*>>& params) {
  const bool first = steps_ == 0;
  if (first) {
    state_.clear();
    for (auto& np : params) state_.emplace_back(np.second->value.shape(), np.second->value.dtype());
  }
  check(state_.size() == params.size(), "sgd: ", params.size(), " parameters, but the optimiser state has ",
        state_.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    Param& prm = *params[i].second;
    const SgdStepParams sp = sgd_step_params(cfg_, rule_, prm.is_bias, first);
    exec.pick(exec.kernels.sgd, rule_.backend, sp, prm.value.dtype()).step(sp, prm.value, prm.grad, state_[i]);
  }
  ++steps_;
}

double Sgd::penalty(const std::vector<std::pair<std::string, Param*>>& params) const {
  if (rule_.decay != WeightDecayMode::l2_loss || cfg_.weight_decay == 0.0) return 0.0;
  double s = 0;
  for (auto& np : params) {
    if (np.second->is_bias && !rule_.decay_bias) continue;
    const Tensor& v = np.second->value;
    for (int64_t i = 0; i < v.numel(); ++i) s += v.at(i) * v.at(i);
  }
  return cfg_.weight_decay * s;
}

}  // namespace driftlab
