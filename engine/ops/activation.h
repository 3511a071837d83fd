// Elementwise activations with every framework constant explicit.
//   relu:         y = max(x,0);  dy/dx = 1 (x>0), relu_grad_at_zero (x==0), 0 (x<0)
//   tanh, sigmoid: y = tanh(x), 1/(1+exp(-x)); gradients from y
//   hard_sigmoid: y = clip(slope*x + offset, 0, 1); dy/dx = slope inside the linear
//                 region, including its end points when grad_edges_inclusive.
// forward writes y (=), backward writes dx (=). One kernel serves both float and double.
#pragma once
#include "engine/core/tensor.h"

namespace driftlab {

enum class ActKind { relu, tanh, sigmoid, hard_sigmoid };

struct ActivationParams {
  ActKind kind = ActKind::relu;
  double relu_grad_at_zero = 0.0;
  double hs_slope = 0.2, hs_offset = 0.5;
  bool hs_grad_edges_inclusive = true;
};

const char* act_name(ActKind k);
void activation_forward_ref(const ActivationParams&, const Tensor& x, Tensor& y);
// x and y are the forward input and output (each formula uses whichever is exact).
void activation_backward_ref(const ActivationParams&, const Tensor& x, const Tensor& y,
                             const Tensor& dy, Tensor& dx);

}  // namespace driftlab
