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

// Runs body(i) for i < n: elementwise, so the element order and thread split change nothing;
// OpenMP's threads share arrays of 64K elements and more (VGG-16's 33M parameters: the update
// is a memory-bound pass that one thread does not saturate).
template <typename Body>
void for_elements(int64_t n, Body&& body) {
#pragma omp parallel for schedule(static) if (n >= (int64_t(1) << 16))
  for (int64_t i = 0; i < n; ++i) body(i);
}

// One rule's loop; grad_of(i) gives the gradient with weight decay applied (and applies the
// decoupled decay to p[i] first). Each loop body has no branch on the rule, so it vectorises.
template <typename T, typename GradOf>
void update_with(const SgdConfig& c, SgdForm form, bool first, T* p, T* s, int64_t n, GradOf grad_of) {
  const T lr = static_cast<T>(c.lr), mu = static_cast<T>(c.momentum);
  const bool nest = c.nesterov;
  if (c.momentum == 0.0) return for_elements(n, [&](int64_t i) { const T g = grad_of(i); p[i] -= lr * g; });
  switch (form) {
    case SgdForm::torch_buffer:
      if (first) return for_elements(n, [&](int64_t i) {
          const T g = grad_of(i);
          s[i] = g;
          p[i] -= lr * (nest ? g + mu * s[i] : s[i]);
        });
      return for_elements(n, [&](int64_t i) {
        const T g = grad_of(i);
        s[i] = mu * s[i] + g;
        p[i] -= lr * (nest ? g + mu * s[i] : s[i]);
      });
    case SgdForm::keras_velocity:
      return for_elements(n, [&](int64_t i) {
        const T g = grad_of(i);
        s[i] = mu * s[i] - lr * g;
        p[i] += nest ? mu * s[i] - lr * g : s[i];
      });
    case SgdForm::lasagne_difference:
      return for_elements(n, [&](int64_t i) {
        const T g = grad_of(i);
        const T stepped = p[i] - lr * g;
        if (nest) {
          const T x = mu * s[i] + stepped - p[i];
          s[i] = x;
          p[i] = mu * x + stepped;
        } else {
          const T x = mu * s[i] + stepped;
          s[i] = x - p[i];
          p[i] = x;
        }
      });
  }
}

template <typename T>
void update(const SgdConfig& c, const SgdRule& r, bool decay_this, bool first, T* p, const T* grad, T* s,
            int64_t n) {
  const T lr = static_cast<T>(c.lr), wd = static_cast<T>(c.weight_decay);
  if (!decay_this || c.weight_decay <= 0)
    return update_with(c, r.form, first, p, s, n, [&](int64_t i) { return grad[i]; });
  switch (r.decay) {
    case WeightDecayMode::grad_add:
      return update_with(c, r.form, first, p, s, n, [&](int64_t i) { return grad[i] + wd * p[i]; });
    case WeightDecayMode::l2_loss:
      return update_with(c, r.form, first, p, s, n, [&](int64_t i) { return grad[i] + T(2) * wd * p[i]; });
    case WeightDecayMode::decoupled:
      return update_with(c, r.form, first, p, s, n, [&](int64_t i) {
        p[i] -= lr * wd * p[i];
        return grad[i];
      });
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
