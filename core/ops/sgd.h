// The SGD step as an op: one parameter tensor, its gradient and its optimiser state, updated
// elementwise in each framework's formula. The formula is one DL_HOST_DEVICE function
// (sgd_update), called by the CPU kernels (kernels/cpu/sgd_loops.h) and the CUDA kernel
// (kernels/cuda/elementwise.cu) alike, so the devices agree by construction; its discrete
// choices are template parameters (with_sgd_rule), so each tensor's loop has no branch.
//   torch_buffer:       g' = g (+ D*p);  b = g' at the first step, else mu*b + g';
//                       p -= lr*b, or Nesterov p -= lr*(g' + mu*b)                 (torch/optim/sgd.py)
//   keras_velocity:     v = mu*v - lr*g;  p += v, or Nesterov p += mu*v - lr*g     (keras/optimizers.py@2.2.4)
//   lasagne_difference: x = mu*v + (p - lr*g); v = x - p; p = x;
//                       Nesterov: x = mu*v + (p - lr*g) - p; v = x; p = mu*x + (p - lr*g)
//                                                                                  (lasagne/updates.py)
// Weight decay D: grad_add g += D*p; l2_loss g += 2*D*p (the loss gains D*sum p^2); decoupled
// p -= lr*D*p before the step; applied only where decay_this (biases: weight_decay_on_bias).
// Without momentum every form is p -= lr*g.
// fused (optim_fma=aten): the terms PyTorch writes as add(alpha) are one fused multiply-add, as its
// vectorised CPU kernels compute them (ATen's add with alpha is fmadd): the decay g + D*p, the
// Nesterov term g + mu*b, and the parameter update p - lr*b; the others round every operation.
#pragma once
#include <cmath>

#include "core/host_device.h"
#include "core/tensor.h"

namespace driftlab {

enum class SgdForm { torch_buffer, keras_velocity, lasagne_difference };
// decoupled: p -= lr*D*p (tf.keras's optimizers); decoupled_scale: p *= (1 - lr*D) with the factor
// formed on the host (torch.optim.AdamW): Adam and RMSprop only (core/ops/adaptive.h).
enum class WeightDecayMode { grad_add, l2_loss, decoupled, decoupled_scale };

struct SgdStepParams {
  double lr = 0.01, momentum = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  SgdForm form = SgdForm::torch_buffer;
  WeightDecayMode decay = WeightDecayMode::grad_add;
  bool decay_this = true;  // false for a bias when the policy leaves biases undecayed
  bool first = false;      // the optimiser's first step (torch_buffer starts its buffer at g)
  bool fused = false;      // optim_fma=aten: PyTorch's add(alpha) terms as one fma
};

// x + a*y with one rounding (Fused) or two: ATen's add(alpha) in its vectorised CPU kernels, or
// every operation rounded.
template <bool Fused, typename T>
DL_HOST_DEVICE inline T mul_add(T a, T y, T x) {
  if constexpr (Fused) return std::fma(a, y, x);
  else return x + a * y;
}

// Where weight decay enters a step (none: off for this tensor, or D = 0).
enum class DecayAt { none, grad_add, l2_loss, decoupled };

// The discrete choices of one step as compile-time constants, so that a loop over a tensor's
// elements runs without a branch (with_sgd_rule picks the instantiation once per tensor).
template <SgdForm Form, DecayAt Decay, bool Momentum, bool Nesterov, bool First, bool Fused = false>
struct SgdRuleOf {
  static constexpr SgdForm form = Form;
  static constexpr DecayAt decay = Decay;
  static constexpr bool momentum = Momentum;  // false: p -= lr*g whatever the form
  static constexpr bool nesterov = Nesterov;
  static constexpr bool first = First;        // torch_buffer starts its buffer at g
  static constexpr bool fused = Fused;        // optim_fma=aten
};

// One element under rule R: p and its state s updated in place from the gradient g. Each product
// and sum is written in the order the frameworks write it; kernels are built without FMA
// contraction. lr, mu (momentum), wd (weight decay) in the element type.
template <typename R, typename T>
DL_HOST_DEVICE inline void sgd_update(T lr, T mu, T wd, T& p, T g, T& s) {
  if constexpr (R::decay == DecayAt::grad_add) g = mul_add<R::fused>(wd, p, g);
  if constexpr (R::decay == DecayAt::l2_loss) g = g + T(2) * wd * p;
  if constexpr (R::decay == DecayAt::decoupled) p -= lr * wd * p;
  if constexpr (!R::momentum) {
    if constexpr (R::fused) p = std::fma(-lr, g, p);
    else p -= lr * g;
  } else if constexpr (R::form == SgdForm::torch_buffer) {
    s = R::first ? g : mu * s + g;
    const T d = R::nesterov ? mul_add<R::fused>(mu, s, g) : s;
    if constexpr (R::fused) p = std::fma(-lr, d, p);
    else p -= lr * d;
  } else if constexpr (R::form == SgdForm::keras_velocity) {
    s = mu * s - lr * g;
    p += R::nesterov ? mu * s - lr * g : s;
  } else {  // lasagne_difference
    const T stepped = p - lr * g;
    if constexpr (R::nesterov) {
      const T x = mu * s + stepped - p;
      s = x;
      p = mu * x + stepped;
    } else {
      const T x = mu * s + stepped;
      s = x - p;
      p = x;
    }
  }
}

namespace sgd_detail {
template <SgdForm F, bool M, bool N, bool First, bool Fu, typename Fn>
void with_decay(const SgdStepParams& c, Fn&& f) {
  if (!(c.decay_this && c.weight_decay > 0)) return f(SgdRuleOf<F, DecayAt::none, M, N, First, Fu>{});
  switch (c.decay) {
    case WeightDecayMode::grad_add: return f(SgdRuleOf<F, DecayAt::grad_add, M, N, First, Fu>{});
    case WeightDecayMode::l2_loss: return f(SgdRuleOf<F, DecayAt::l2_loss, M, N, First, Fu>{});
    case WeightDecayMode::decoupled: return f(SgdRuleOf<F, DecayAt::decoupled, M, N, First, Fu>{});
    case WeightDecayMode::decoupled_scale:
      fail("sgd: weight_decay_mode=decoupled_scale is torch.optim.AdamW's form, for Adam and RMSprop; SGD's "
           "decoupled decay is weight_decay_mode=decoupled");
  }
  fail("sgd: unknown weight decay mode ", static_cast<int>(c.decay));
}
template <SgdForm F, bool Fu, typename Fn>
void with_nesterov(const SgdStepParams& c, Fn&& f) {
  if (c.nesterov) return with_decay<F, true, true, false, Fu>(c, f);
  with_decay<F, true, false, false, Fu>(c, f);
}
template <bool Fu, typename Fn>
void with_form(const SgdStepParams& c, Fn&& f) {
  if (c.momentum == 0.0) return with_decay<SgdForm::torch_buffer, false, false, false, Fu>(c, f);
  switch (c.form) {
    case SgdForm::torch_buffer:
      if (c.nesterov)
        return c.first ? with_decay<SgdForm::torch_buffer, true, true, true, Fu>(c, f)
                       : with_decay<SgdForm::torch_buffer, true, true, false, Fu>(c, f);
      return c.first ? with_decay<SgdForm::torch_buffer, true, false, true, Fu>(c, f)
                     : with_decay<SgdForm::torch_buffer, true, false, false, Fu>(c, f);
    case SgdForm::keras_velocity: return with_nesterov<SgdForm::keras_velocity, Fu>(c, f);
    case SgdForm::lasagne_difference: return with_nesterov<SgdForm::lasagne_difference, Fu>(c, f);
  }
  fail("sgd: unknown form ", static_cast<int>(c.form));
}
}  // namespace sgd_detail

// Calls f(R{}) with the SgdRuleOf of c (host code: the CPU loops and the CUDA launch).
template <typename Fn>
void with_sgd_rule(const SgdStepParams& c, Fn&& f) {
  if (c.fused) return sgd_detail::with_form<true>(c, f);
  sgd_detail::with_form<false>(c, f);
}

// p, grad, state: the same shape; p and state updated in place.
struct SgdKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const SgdStepParams&, DType) = nullptr;
  void (*step)(const SgdStepParams&, Tensor& p, const Tensor& grad, Tensor& state) = nullptr;
};

}  // namespace driftlab
