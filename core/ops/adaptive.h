// The Adam and RMSprop steps as ops: one parameter tensor, its gradient and its two state tensors,
// updated elementwise in the arithmetic each framework writes. As for SGD (core/ops/sgd.h) the
// per-element formula is one DL_HOST_DEVICE function shared by the CPU loops
// (kernels/cpu/adaptive_loops.h) and the CUDA kernel (kernels/cuda/elementwise.cu), and the
// discrete choices are template parameters picked once per tensor. Every per-step scalar (1-beta,
// the bias corrections, the step size) is formed on the host by the resolver
// (engine/train/optimizer.cpp) in the framework's precision and handed over here; the kernel
// rounds each to the element type once and then does only the elementwise arithmetic below,
// each product and sum in the order written (kernels are built without FMA contraction).
//
// Adam, state m (first moment) and v (second moment), zero at the start:
//   moments weighted_sum:  m = b1*m + c1*g;  v = b2*v + (c2*g)*g  or  b2*v + c2*(g*g)
//           increment:     m = m + (g - m)*c1;  v = v + (g*g - v)*c2
//   form corrected_moments:  p = p + (-step*m) / (sqrt(v)/sqrt_bc2 + eps)      step = lr/bc1
//        corrected_quotient: p = ((m/bc1) / (sqrt(v/bc2) + eps)) * (-lr) + p
//        epsilon_hat:        p = p - (step*m) / (sqrt(v) + eps)                   step = lr_t
// RMSprop, state v (mean square) and b (momentum), v starts at v0 (0 or 1), b at 0:
//   v updated as Adam's v with rho, c = 1-rho
//   form eps_outside_root: d = sqrt(v) + eps; momentum: b = b*mu + g/d, p = p + (-lr)*b;
//                          without: p = p + ((-lr)*g)/d
//        eps_inside_root:  b = b*mu + (g*lr)/sqrt(v + eps);  p = p - b
// Weight decay D (where decay_this): grad_add g = g + D*p; l2_loss g = g + 2*D*p; decoupled
// p = p - lr*D*p; decoupled_scale p = p*k with k = 1 - lr*D formed on the host; before the step.
// fused (optim_fma=aten): what PyTorch writes as add(alpha) or addcmul is one fused multiply-add,
// as its vectorised CPU kernels compute it: g + D*p, m = fma(c1, g, b1*m), v = fma(c2*g, g, b2*v)
// (the weighted sums), and RMSprop's p + (-lr)*b; quotients (addcdiv) stay two roundings.
#pragma once
#include <cmath>
#include <type_traits>

#include "core/host_device.h"
#include "core/tensor.h"
#include "core/ops/sgd.h"

namespace driftlab {

enum class AdamForm { corrected_moments, corrected_quotient, epsilon_hat };
enum class RmspropForm { eps_outside_root, eps_inside_root };
enum class MomentUpdate { weighted_sum, increment };
enum class SquareOrder { scale_then_square, square_then_scale };  // (c*g)*g or c*(g*g)

// The scalars of one step, as the host formed them (double holds a float32 value exactly).
struct AdamStepParams {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double one_minus_beta1 = 0.1, one_minus_beta2 = 0.001;
  double eps = 1e-8;
  double bc1 = 1, bc2 = 1;       // 1 - beta^t (corrected_quotient)
  double step = 1e-3;            // lr/bc1 (corrected_moments) or lr_t (epsilon_hat)
  double sqrt_bc2 = 1;           // sqrt(1 - beta2^t) (corrected_moments)
  double weight_decay = 0, decay_scale = 1;
  WeightDecayMode decay = WeightDecayMode::grad_add;
  bool decay_this = true;
  bool fused = false;  // optim_fma=aten
  AdamForm form = AdamForm::corrected_moments;
  MomentUpdate moments = MomentUpdate::weighted_sum;
  SquareOrder square = SquareOrder::scale_then_square;
};

struct RmspropStepParams {
  double lr = 1e-2;
  double rho = 0.99, one_minus_rho = 0.01;
  double eps = 1e-8;
  double momentum = 0;
  double weight_decay = 0, decay_scale = 1;
  WeightDecayMode decay = WeightDecayMode::grad_add;
  bool decay_this = true;
  bool fused = false;  // optim_fma=aten
  RmspropForm form = RmspropForm::eps_outside_root;
  MomentUpdate moments = MomentUpdate::weighted_sum;
  SquareOrder square = SquareOrder::scale_then_square;
};

// The scalars in the element type, converted once per tensor.
template <typename T>
struct AdaptiveScalars {
  T lr, b1, b2, c1, c2, eps, bc1, bc2, step, sqrt_bc2, wd, decay_scale, mu;
};
template <typename T>
AdaptiveScalars<T> adaptive_scalars(const AdamStepParams& c) {
  return {T(c.lr), T(c.beta1), T(c.beta2), T(c.one_minus_beta1), T(c.one_minus_beta2), T(c.eps), T(c.bc1),
          T(c.bc2), T(c.step), T(c.sqrt_bc2), T(c.weight_decay), T(c.decay_scale), T(0)};
}
template <typename T>
AdaptiveScalars<T> adaptive_scalars(const RmspropStepParams& c) {
  return {T(c.lr), T(0), T(c.rho), T(0), T(c.one_minus_rho), T(c.eps), T(1), T(1), T(c.lr), T(1),
          T(c.weight_decay), T(c.decay_scale), T(c.momentum)};
}

// Where weight decay enters (none: off for this tensor, or D = 0).
enum class AdaptiveDecay { none, grad_add, l2_loss, decoupled, decoupled_scale };

template <typename T, AdaptiveDecay D, bool Fused>
DL_HOST_DEVICE inline T apply_decay(const AdaptiveScalars<T>& k, T& p, T g) {
  if constexpr (D == AdaptiveDecay::grad_add) g = mul_add<Fused>(k.wd, p, g);
  if constexpr (D == AdaptiveDecay::l2_loss) g = g + T(2) * k.wd * p;
  if constexpr (D == AdaptiveDecay::decoupled) p -= k.lr * k.wd * p;
  if constexpr (D == AdaptiveDecay::decoupled_scale) p = p * k.decay_scale;
  return g;
}

// The exponential average of g*g with weight b on the old value and c on the new.
template <MomentUpdate M, SquareOrder S, bool Fused, typename T>
DL_HOST_DEVICE inline T average_square(T v, T g, T b, T c) {
  if constexpr (M == MomentUpdate::increment) return v + (g * g - v) * c;
  else if constexpr (S == SquareOrder::scale_then_square) return mul_add<Fused>(c * g, g, b * v);
  else return mul_add<Fused>(c, g * g, b * v);
}

// The discrete choices of one step as compile-time constants (a loop over a tensor runs without a
// branch); with_adam_rule / with_rmsprop_rule pick the instantiation once per tensor.
template <AdamForm F, MomentUpdate M, SquareOrder S, AdaptiveDecay D, bool Fused>
struct AdamRuleOf {
  static constexpr AdamForm form = F;
  static constexpr MomentUpdate moments = M;
  static constexpr SquareOrder square = S;
  static constexpr AdaptiveDecay decay = D;
  static constexpr bool fused = Fused;
};
template <RmspropForm F, MomentUpdate M, SquareOrder S, AdaptiveDecay D, bool Fused, bool Momentum>
struct RmspropRuleOf {
  static constexpr RmspropForm form = F;
  static constexpr MomentUpdate moments = M;
  static constexpr SquareOrder square = S;
  static constexpr AdaptiveDecay decay = D;
  static constexpr bool fused = Fused;
  static constexpr bool momentum = Momentum;
};

// One element under rule R: p and its state (m, v) updated in place from the gradient g.
template <typename R, typename T>
DL_HOST_DEVICE inline void adam_update(const AdaptiveScalars<T>& k, T& p, T g, T& m, T& v) {
  g = apply_decay<T, R::decay, R::fused>(k, p, g);
  if constexpr (R::moments == MomentUpdate::increment) m = m + (g - m) * k.c1;
  else m = mul_add<R::fused>(k.c1, g, k.b1 * m);
  v = average_square<R::moments, R::square, R::fused>(v, g, k.b2, k.c2);
  if constexpr (R::form == AdamForm::corrected_moments) {
    p = p + (-k.step * m) / (std::sqrt(v) / k.sqrt_bc2 + k.eps);
  } else if constexpr (R::form == AdamForm::corrected_quotient) {
    p = ((m / k.bc1) / (std::sqrt(v / k.bc2) + k.eps)) * (-k.lr) + p;
  } else {
    p = p - (k.step * m) / (std::sqrt(v) + k.eps);
  }
}

// One element under rule R: p and its state (v mean square, b momentum) updated in place.
template <typename R, typename T>
DL_HOST_DEVICE inline void rmsprop_update(const AdaptiveScalars<T>& k, T& p, T g, T& v, T& b) {
  g = apply_decay<T, R::decay, R::fused>(k, p, g);
  v = average_square<R::moments, R::square, R::fused>(v, g, k.b2, k.c2);
  if constexpr (R::form == RmspropForm::eps_inside_root) {
    b = b * k.mu + (g * k.lr) / std::sqrt(v + k.eps);
    p = p - b;
  } else if constexpr (R::momentum) {
    b = b * k.mu + g / (std::sqrt(v) + k.eps);
    p = mul_add<R::fused>(-k.lr, b, p);
  } else {
    p = p + ((-k.lr) * g) / (std::sqrt(v) + k.eps);
  }
}

namespace adaptive_detail {
// Calls f(std::integral_constant<E, v>{}) for the runtime value v among Vs.
template <typename E, E... Vs, typename Fn>
void with_value(E v, Fn&& f) {
  const bool found = ((v == Vs ? (f(std::integral_constant<E, Vs>{}), true) : false) || ...);
  if (!found) fail("optimiser step: unknown option ", static_cast<int>(v));
}
template <typename P>
AdaptiveDecay decay_of(const P& c) {
  if (!c.decay_this || c.weight_decay == 0.0) return AdaptiveDecay::none;
  switch (c.decay) {
    case WeightDecayMode::grad_add: return AdaptiveDecay::grad_add;
    case WeightDecayMode::l2_loss: return AdaptiveDecay::l2_loss;
    case WeightDecayMode::decoupled: return AdaptiveDecay::decoupled;
    case WeightDecayMode::decoupled_scale: return AdaptiveDecay::decoupled_scale;
  }
  fail("optimiser step: unknown weight decay mode ", static_cast<int>(c.decay));
}
template <typename P, typename Fn>
void with_common(const P& c, Fn&& f) {
  with_value<MomentUpdate, MomentUpdate::weighted_sum, MomentUpdate::increment>(c.moments, [&](auto m) {
    with_value<SquareOrder, SquareOrder::scale_then_square, SquareOrder::square_then_scale>(c.square, [&](auto s) {
      with_value<AdaptiveDecay, AdaptiveDecay::none, AdaptiveDecay::grad_add, AdaptiveDecay::l2_loss,
                 AdaptiveDecay::decoupled, AdaptiveDecay::decoupled_scale>(decay_of(c), [&](auto d) {
        with_value<bool, false, true>(c.fused, [&](auto fu) { f(m, s, d, fu); });
      });
    });
  });
}
}  // namespace adaptive_detail

// Calls f(R{}) with the AdamRuleOf of c (host code: the CPU loops and the CUDA launch).
template <typename Fn>
void with_adam_rule(const AdamStepParams& c, Fn&& f) {
  using namespace adaptive_detail;
  with_value<AdamForm, AdamForm::corrected_moments, AdamForm::corrected_quotient, AdamForm::epsilon_hat>(
      c.form, [&](auto form) {
        with_common(c, [&](auto m, auto s, auto d, auto fu) {
          f(AdamRuleOf<decltype(form)::value, decltype(m)::value, decltype(s)::value, decltype(d)::value,
                       decltype(fu)::value>{});
        });
      });
}

// Calls f(R{}) with the RmspropRuleOf of c.
template <typename Fn>
void with_rmsprop_rule(const RmspropStepParams& c, Fn&& f) {
  using namespace adaptive_detail;
  with_value<RmspropForm, RmspropForm::eps_outside_root, RmspropForm::eps_inside_root>(c.form, [&](auto form) {
    with_common(c, [&](auto m, auto s, auto d, auto fu) {
      with_value<bool, false, true>(c.momentum != 0.0, [&](auto mom) {
        f(RmspropRuleOf<decltype(form)::value, decltype(m)::value, decltype(s)::value, decltype(d)::value,
                        decltype(fu)::value, decltype(mom)::value>{});
      });
    });
  });
}

// p, grad, and the two state tensors: one shape; p and state updated in place.
struct AdamKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const AdamStepParams&, DType) = nullptr;
  void (*step)(const AdamStepParams&, Tensor& p, const Tensor& grad, Tensor& m, Tensor& v) = nullptr;
};
struct RmspropKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const RmspropStepParams&, DType) = nullptr;
  void (*step)(const RmspropStepParams&, Tensor& p, const Tensor& grad, Tensor& v, Tensor& b) = nullptr;
};

}  // namespace driftlab
