#include "engine/train/optimizer.h"

#include <cmath>

namespace driftlab {

const char* optimizer_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::adam: return "adam";
    case OptimizerKind::rmsprop: return "rmsprop";
  }
  return "?";
}

OptimizerKind parse_optimizer(const std::string& name) {
  for (OptimizerKind k : {OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::rmsprop})
    if (name == optimizer_name(k)) return k;
  fail("optimizer: unknown '", name, "' (known: sgd, adam, rmsprop)");
}

OptimRule resolve_optim(const Policy& policy) {
  OptimRule r;
  r.form = policy.sgd_form;
  r.decay = policy.weight_decay_mode;
  r.decay_bias = policy.weight_decay_on_bias;
  r.backend = policy.sgd_backend;
  r.adam_form = policy.adam_form;
  r.moments = policy.optim_moment_update;
  r.square = policy.optim_square_order;
  r.beta_power = policy.adam_beta_power;
  r.precision = policy.optim_scalar_precision;
  r.adam_eps = policy.adam_eps;
  r.rmsprop_form = policy.rmsprop_form;
  r.rmsprop_rho = policy.rmsprop_rho;
  r.rmsprop_eps = policy.rmsprop_eps;
  r.rmsprop_init = policy.rmsprop_ms_init == RmspropInit::ones ? 1.0 : 0.0;
  r.fused = policy.optim_fma == OptimFma::aten;
  r.lr_t_order = policy.adam_lr_t_order;
  return r;
}

void check_optim_config(const OptimConfig& c) {
  const char* name = optimizer_name(c.kind);
  check(c.lr > 0, name, ": lr=", c.lr, " must be > 0");
  check(c.momentum >= 0 && c.momentum < 1, name, ": momentum=", c.momentum, " must be in [0,1)");
  check(!c.nesterov || (c.kind == OptimizerKind::sgd && c.momentum > 0),
        c.kind == OptimizerKind::sgd ? "sgd: nesterov needs momentum > 0" : "nesterov is an SGD option");
  check(c.kind != OptimizerKind::adam || c.momentum == 0.0,
        "adam: --momentum is for sgd and rmsprop (Adam's first moment is --beta1)");
  check(c.weight_decay >= 0, name, ": weight_decay=", c.weight_decay, " must be >= 0");
  check(c.beta1 >= 0 && c.beta1 < 1, name, ": beta1=", c.beta1, " must be in [0,1)");
  check(c.beta2 >= 0 && c.beta2 < 1, name, ": beta2=", c.beta2, " must be in [0,1)");
}

SgdStepParams sgd_step_params(const OptimConfig& c, const OptimRule& r, bool is_bias, bool first) {
  SgdStepParams p;
  p.lr = c.lr, p.momentum = c.momentum, p.weight_decay = c.weight_decay, p.nesterov = c.nesterov;
  p.form = r.form;
  p.decay = r.decay;
  p.decay_this = !is_bias || r.decay_bias;
  p.first = first;
  p.fused = r.fused;
  return p;
}

void OptimStep::for_tensor(bool is_bias) {
  const bool d = !is_bias || decay_bias;
  sgd.decay_this = adam.decay_this = rmsprop.decay_this = d;
}

OptimSchedule::OptimSchedule(const OptimConfig& config, const OptimRule& rule) : cfg_(config), rule_(rule) {
  check_optim_config(config);
  check(rule.adam_eps >= 0 && rule.rmsprop_eps >= 0, "optimizer: adam_eps and rmsprop_eps must be >= 0");
  check(rule.rmsprop_rho >= 0 && rule.rmsprop_rho < 1, "rmsprop: rmsprop_rho=", rule.rmsprop_rho,
        " must be in [0,1)");
}

void OptimSchedule::restore(int64_t steps, int64_t skipped, double power1, double power2) {
  check(steps >= 0 && skipped >= 0, "optimizer state: steps=", steps, ", skipped=", skipped, " must be >= 0");
  steps_ = steps, skipped_ = skipped, power1_ = power1, power2_ = power2;
}

// The running product: beta at step 1, times beta (in float32) after every step.
void OptimSchedule::advance_powers(int64_t t) {
  if (cfg_.kind != OptimizerKind::adam || rule_.beta_power != BetaPower::product_float32) return;
  power1_ = t == 1 ? double(float(cfg_.beta1)) : double(float(power1_) * float(cfg_.beta1));
  power2_ = t == 1 ? double(float(cfg_.beta2)) : double(float(power2_) * float(cfg_.beta2));
}

void OptimSchedule::count_skipped() {
  advance_powers(steps_ + skipped_ + 1);
  ++skipped_;
}

double OptimSchedule::slot0_init() const { return cfg_.kind == OptimizerKind::rmsprop ? rule_.rmsprop_init : 0.0; }

double OptimSchedule::penalty_factor() const {
  return rule_.decay == WeightDecayMode::l2_loss ? cfg_.weight_decay : 0.0;
}

namespace {

// The per-step scalars in precision T: double (Python and JavaScript numbers: PyTorch, TF.js) or
// float (graph tensors: Keras, TF1, Theano). Every value is rounded to T as it is formed.
template <typename T>
struct Scalars {
  static T one_minus(double b) { return T(1) - T(b); }
};

// beta^t for step t: pow in double (PyTorch: beta ** step in Python), pow in float32 (Keras:
// K.pow of a float32 variable), or the float32 running product (TF1's beta1_power variable, TF.js's
// accBeta1: beta at step 1, times beta after every step).
double beta_power(BetaPower how, double beta, int64_t t, double running) {
  switch (how) {
    case BetaPower::pow_float64: return std::pow(beta, static_cast<double>(t));
    case BetaPower::pow_float32: return std::pow(static_cast<float>(beta), static_cast<float>(t));
    case BetaPower::product_float32: return running;
  }
  fail("adam: unknown adam_beta_power ", static_cast<int>(how));
}

template <typename T>
void form_adam(const OptimConfig& c, const OptimRule& r, double lr, double p1, double p2, AdamStepParams& a) {
  // 1 - beta^t: in the powers' own precision (float32 unless pow_float64), else in T.
  const bool f32_powers = r.beta_power != BetaPower::pow_float64;
  const double bc1 = f32_powers ? double(1.0f - float(p1)) : double(T(1) - T(p1));
  const double bc2 = f32_powers ? double(1.0f - float(p2)) : double(T(1) - T(p2));
  const T tlr = T(lr);
  a.lr = double(tlr);
  a.beta1 = c.beta1, a.beta2 = c.beta2;
  a.one_minus_beta1 = double(T(1) - T(c.beta1));
  a.one_minus_beta2 = double(T(1) - T(c.beta2));
  a.eps = r.adam_eps;
  a.bc1 = bc1, a.bc2 = bc2;
  a.sqrt_bc2 = double(T(std::sqrt(T(bc2))));
  switch (r.adam_form) {
    case AdamForm::corrected_moments: a.step = double(tlr / T(bc1)); break;  // lr / bias_correction1
    case AdamForm::corrected_quotient: a.step = a.lr; break;
    // lr_t = lr * (sqrt(1 - beta2^t) / (1 - beta1^t)) (Keras 2.2.4), or (lr * sqrt(..)) / (..) (TF1, Lasagne)
    case AdamForm::epsilon_hat:
      a.step = r.lr_t_order == AdamLrTOrder::lr_times_ratio ? double(tlr * (T(std::sqrt(T(bc2))) / T(bc1)))
                                                            : double((tlr * T(std::sqrt(T(bc2)))) / T(bc1));
      break;
  }
  a.weight_decay = c.weight_decay;
  a.decay_scale = double(T(1) - tlr * T(c.weight_decay));  // AdamW: param.mul_(1 - lr * weight_decay)
}

template <typename T>
void form_rmsprop(const OptimConfig& c, const OptimRule& r, double lr, RmspropStepParams& m) {
  const T tlr = T(lr);
  m.lr = double(tlr);
  m.rho = r.rmsprop_rho;
  m.one_minus_rho = double(T(1) - T(r.rmsprop_rho));
  m.eps = r.rmsprop_eps;
  m.momentum = c.momentum;
  m.weight_decay = c.weight_decay;
  m.decay_scale = double(T(1) - tlr * T(c.weight_decay));
}

}  // namespace

OptimStep OptimSchedule::next(double lr) {
  check(lr > 0, optimizer_name(cfg_.kind), ": the rate of step ", steps_ + 1, " is ", lr, "; it must be > 0");
  OptimStep s;
  s.kind = cfg_.kind;
  s.decay_bias = rule_.decay_bias;
  OptimConfig c = cfg_;
  c.lr = lr;
  s.sgd = sgd_step_params(c, rule_, false, steps_ == 0);
  const int64_t t = steps_ + skipped_ + 1;
  advance_powers(t);
  if (cfg_.kind == OptimizerKind::adam) {
    const double p1 = beta_power(rule_.beta_power, cfg_.beta1, t, power1_);
    const double p2 = beta_power(rule_.beta_power, cfg_.beta2, t, power2_);
    AdamStepParams& a = s.adam;
    if (rule_.precision == ScalarPrecision::float32) form_adam<float>(cfg_, rule_, lr, p1, p2, a);
    else form_adam<double>(cfg_, rule_, lr, p1, p2, a);
    a.decay = rule_.decay;
    a.fused = rule_.fused;
    a.form = rule_.adam_form;
    a.moments = rule_.moments;
    a.square = rule_.square;
  }
  if (cfg_.kind == OptimizerKind::rmsprop) {
    RmspropStepParams& m = s.rmsprop;
    if (rule_.precision == ScalarPrecision::float32) form_rmsprop<float>(cfg_, rule_, lr, m);
    else form_rmsprop<double>(cfg_, rule_, lr, m);
    m.decay = rule_.decay;
    m.fused = rule_.fused;
    m.form = rule_.rmsprop_form;
    m.moments = rule_.moments;
    m.square = rule_.square;
  }
  ++steps_;
  return s;
}

Optimizer::Optimizer(const OptimConfig& config, const OptimRule& rule) : sched_(config, rule), lr_(config.lr) {}

void Optimizer::step(const ExecContext& exec, const std::vector<std::pair<std::string, Param*>>& params) {
  step(exec, params, lr_);
}

void Optimizer::step(const ExecContext& exec, const std::vector<std::pair<std::string, Param*>>& params, double lr) {
  const OptimizerKind kind = sched_.config().kind;
  if (sched_.steps() == 0 && slot0_.empty()) {
    for (auto& np : params) {
      const Tensor& v = np.second->value;
      slot0_.emplace_back(v.shape(), v.dtype());
      if (sched_.slot0_init() != 0.0) slot0_.back().fill(sched_.slot0_init());
      slot1_.push_back(kind == OptimizerKind::sgd ? Tensor() : Tensor(v.shape(), v.dtype()));
    }
  }
  check(slot0_.size() == params.size(), optimizer_name(kind), ": ", params.size(),
        " parameters, but the optimiser state has ", slot0_.size());
  OptimStep s = sched_.next(lr);
  const KernelBackend be = sched_.rule().backend;
  for (std::size_t i = 0; i < params.size(); ++i) {
    Param& prm = *params[i].second;
    s.for_tensor(prm.is_bias);
    const DType dt = prm.value.dtype();
    switch (kind) {
      case OptimizerKind::sgd:
        exec.pick(exec.kernels.sgd, be, s.sgd, dt).step(s.sgd, prm.value, prm.grad, slot0_[i]);
        break;
      case OptimizerKind::adam:
        exec.pick(exec.kernels.adam, be, s.adam, dt).step(s.adam, prm.value, prm.grad, slot0_[i], slot1_[i]);
        break;
      case OptimizerKind::rmsprop:
        exec.pick(exec.kernels.rmsprop, be, s.rmsprop, dt).step(s.rmsprop, prm.value, prm.grad, slot0_[i], slot1_[i]);
        break;
    }
  }
}

double Optimizer::penalty(const std::vector<std::pair<std::string, Param*>>& params) const {
  const double d = sched_.penalty_factor();
  if (d == 0.0) return 0.0;
  double s = 0;
  for (auto& np : params) {
    if (np.second->is_bias && !sched_.rule().decay_bias) continue;
    const Tensor& v = np.second->value;
    for (int64_t i = 0; i < v.numel(); ++i) s += v.at(i) * v.at(i);
  }
  return d * s;
}

OptimState Optimizer::state() const {
  OptimState s;
  s.steps = sched_.steps();
  s.skipped = sched_.skipped();
  s.power1 = sched_.power1();
  s.power2 = sched_.power2();
  for (const Tensor& t : slot0_) s.slot0.push_back(t.clone());
  for (const Tensor& t : slot1_) s.slot1.push_back(t.numel() ? t.clone() : Tensor());
  return s;
}

void Optimizer::set_state(const OptimState& s, const std::vector<std::pair<std::string, Param*>>& params) {
  const char* name = optimizer_name(sched_.config().kind);
  const bool started = s.steps > 0;
  check(!started || (s.slot0.size() == params.size() && s.slot1.size() == params.size()), name, ": the state has ",
        s.slot0.size(), " tensors, the model ", params.size(), " parameters");
  std::vector<Tensor> a, b;
  for (std::size_t i = 0; started && i < params.size(); ++i) {
    const Tensor& v = params[i].second->value;
    check(s.slot0[i].shape() == v.shape() && s.slot0[i].dtype() == v.dtype(), name, ": state of ", params[i].first,
          " is ", shape_str(s.slot0[i].shape()), " ", dtype_name(s.slot0[i].dtype()), ", the parameter ",
          shape_str(v.shape()), " ", dtype_name(v.dtype()));
    const bool two = sched_.config().kind != OptimizerKind::sgd;
    check(!two || (s.slot1[i].shape() == v.shape() && s.slot1[i].dtype() == v.dtype()), name, ": second state of ",
          params[i].first, " does not match the parameter");
    a.push_back(s.slot0[i].clone());
    b.push_back(two ? s.slot1[i].clone() : Tensor());
  }
  sched_.restore(s.steps, s.skipped, s.power1, s.power2);
  slot0_ = std::move(a);
  slot1_ = std::move(b);
}

}  // namespace driftlab
