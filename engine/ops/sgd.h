// The SGD step as an op: one parameter tensor, its gradient and its optimiser state, updated
// elementwise in each framework's formula. The formula is one DL_HOST_DEVICE function, called by
// the CPU kernels (kernels/cpu/ref/sgd_ref.cpp, kernels/cpu/sgd.cpp) and the CUDA kernel
// (kernels/cuda/elementwise.cu) alike, so the devices agree by construction.
//   torch_buffer:       g' = g (+ D*p);  b = g' at the first step, else mu*b + g';
//                       p -= lr*b, or Nesterov p -= lr*(g' + mu*b)                 (torch/optim/sgd.py)
//   keras_velocity:     v = mu*v - lr*g;  p += v, or Nesterov p += mu*v - lr*g     (keras/optimizers.py@2.2.4)
//   lasagne_difference: x = mu*v + (p - lr*g); v = x - p; p = x;
//                       Nesterov: x = mu*v + (p - lr*g) - p; v = x; p = mu*x + (p - lr*g)
//                                                                                  (lasagne/updates.py)
// Weight decay D: grad_add g += D*p; l2_loss g += 2*D*p (the loss gains D*sum p^2); decoupled
// p -= lr*D*p before the step; applied only where decay_this (biases: weight_decay_on_bias).
// Without momentum every form is p -= lr*g.
#pragma once
#include "engine/core/host_device.h"
#include "engine/core/tensor.h"

namespace driftlab {

enum class SgdForm { torch_buffer, keras_velocity, lasagne_difference };
enum class WeightDecayMode { grad_add, l2_loss, decoupled };

struct SgdStepParams {
  double lr = 0.01, momentum = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  SgdForm form = SgdForm::torch_buffer;
  WeightDecayMode decay = WeightDecayMode::grad_add;
  bool decay_this = true;  // false for a bias when the policy leaves biases undecayed
  bool first = false;      // the optimiser's first step (torch_buffer starts its buffer at g)
};

// One element: p and its state s updated in place from the gradient g. Each product and sum is
// written in the order the frameworks write it; kernels are built without FMA contraction.
template <typename T>
DL_HOST_DEVICE inline void sgd_update(const SgdStepParams& c, T& p, T g, T& s) {
  const T lr = static_cast<T>(c.lr), mu = static_cast<T>(c.momentum), wd = static_cast<T>(c.weight_decay);
  if (c.decay_this && c.weight_decay > 0) {
    switch (c.decay) {
      case WeightDecayMode::grad_add: g = g + wd * p; break;
      case WeightDecayMode::l2_loss: g = g + T(2) * wd * p; break;
      case WeightDecayMode::decoupled: p -= lr * wd * p; break;
    }
  }
  if (c.momentum == 0.0) {
    p -= lr * g;
    return;
  }
  switch (c.form) {
    case SgdForm::torch_buffer:
      s = c.first ? g : mu * s + g;
      p -= lr * (c.nesterov ? g + mu * s : s);
      return;
    case SgdForm::keras_velocity:
      s = mu * s - lr * g;
      p += c.nesterov ? mu * s - lr * g : s;
      return;
    case SgdForm::lasagne_difference: {
      const T stepped = p - lr * g;
      if (c.nesterov) {
        const T x = mu * s + stepped - p;
        s = x;
        p = mu * x + stepped;
      } else {
        const T x = mu * s + stepped;
        s = x - p;
        p = x;
      }
      return;
    }
  }
}

// p, grad, state: the same shape; p and state updated in place.
struct SgdKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const SgdStepParams&, DType) = nullptr;
  void (*step)(const SgdStepParams&, Tensor& p, const Tensor& grad, Tensor& state) = nullptr;
};

}  // namespace driftlab
