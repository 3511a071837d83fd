#include "engine/train/sgd.h"

namespace driftlab {

SgdRule resolve_sgd(const Policy& policy) {
  return {policy.sgd_form, policy.weight_decay_mode, policy.weight_decay_on_bias};
}

Sgd::Sgd(const SgdConfig& config, const SgdRule& rule) : cfg_(config), rule_(rule) {
  check(config.lr > 0, "sgd: lr=", config.lr, " must be > 0");
  check(config.momentum >= 0 && config.momentum < 1, "sgd: momentum=", config.momentum, " must be in [0,1)");
  check(!config.nesterov || config.momentum > 0, "sgd: nesterov needs momentum > 0");
  check(config.weight_decay >= 0, "sgd: weight_decay=", config.weight_decay, " must be >= 0");
}

namespace {

template <typename T>
void update(const SgdConfig& c, const SgdRule& r, bool decay_this, bool first, T* p, const T* grad, T* s,
            int64_t n) {
  const T lr = static_cast<T>(c.lr), mu = static_cast<T>(c.momentum), wd = static_cast<T>(c.weight_decay);
  const bool use_wd = decay_this && c.weight_decay > 0;
  for (int64_t i = 0; i < n; ++i) {
    T g = grad[i];
    if (use_wd) {
      if (r.decay == WeightDecayMode::grad_add) g += wd * p[i];
      if (r.decay == WeightDecayMode::l2_loss) g += T(2) * wd * p[i];
      if (r.decay == WeightDecayMode::decoupled) p[i] -= lr * wd * p[i];
    }
    if (c.momentum == 0.0) {
      p[i] -= lr * g;
      continue;
    }
    switch (r.form) {
      case SgdForm::torch_buffer: {
        s[i] = first ? g : mu * s[i] + g;
        p[i] -= lr * (c.nesterov ? g + mu * s[i] : s[i]);
        break;
      }
      case SgdForm::keras_velocity: {
        s[i] = mu * s[i] - lr * g;
        p[i] += c.nesterov ? mu * s[i] - lr * g : s[i];
        break;
      }
      case SgdForm::lasagne_difference: {
        T stepped = p[i] - lr * g;
        if (c.nesterov) {
          T x = mu * s[i] + stepped - p[i];
          s[i] = x;
          p[i] = mu * x + stepped;
        } else {
          T x = mu * s[i] + stepped;
          s[i] = x - p[i];
          p[i] = x;
        }
        break;
      }
    }
  }
}

}  // namespace

void Sgd::step(const std::vector<std::pair<std::string, Param*>>& params) {
  const bool first = steps_ == 0;
  if (first) {
    state_.clear();
    for (auto& np : params) state_.emplace_back(np.second->value.shape(), np.second->value.dtype());
  }
  check(state_.size() == params.size(), "sgd: ", params.size(), " parameters, but the optimiser state has ",
        state_.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    Param& prm = *params[i].second;
    bool decay_this = !prm.is_bias || rule_.decay_bias;
    dispatch_dtype(prm.value.dtype(), [&](auto tag) {
      using T = decltype(tag);
      update<T>(cfg_, rule_, decay_this, first, prm.value.data<T>(), prm.grad.data<T>(), state_[i].data<T>(),
                prm.value.numel());
    });
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
