// The activations' one case table: every kind with every framework constant the knobs can set
// (relu's gradient at 0, both hard sigmoids with both gradient-edge rules), read by
// tests/ops/test_activation.cpp (the fast kernel against the reference, bit for bit) and
// tests/cuda/test_elementwise_cuda.cpp (the CUDA kernels against the reference). No benchmark
// reads it yet.
//
// To add a case: 1) append a row built with act_kind(kind), act_relu(g0) or
// act_hard_sigmoid(slope, inclusive), named for the framework behaviour it copies; 2) if a
// consumer cannot afford it, narrow `uses` with a comment why.
#pragma once
#include <ostream>
#include <string>

#include "core/ops/activation.h"
#include "tests/cases/case_uses.h"

namespace driftlab {

constexpr ActivationParams act_kind(ActKind kind) {
  ActivationParams p{};
  p.kind = kind;
  return p;
}
constexpr ActivationParams act_relu(double grad_at_zero) {
  ActivationParams p = act_kind(ActKind::relu);
  p.relu_grad_at_zero = grad_at_zero;
  return p;
}
// slope*x + 0.5 clipped to [0, 1]; `inclusive`: the gradient at the clip points is the slope.
constexpr ActivationParams act_hard_sigmoid(double slope, bool inclusive) {
  ActivationParams p = act_kind(ActKind::hard_sigmoid);
  p.hs_slope = slope, p.hs_offset = 0.5, p.hs_grad_edges_inclusive = inclusive;
  return p;
}

struct ActivationCase {
  const char* name;
  ActivationParams p;
  unsigned uses = kAllUses;
};

inline constexpr ActivationCase kActivationCases[] = {
    {"relu", act_relu(0.0)},
    {"relu_grad_half_at_0", act_relu(0.5)},
    {"relu_grad_one_at_0", act_relu(1.0)},
    {"tanh", act_kind(ActKind::tanh)},
    {"sigmoid", act_kind(ActKind::sigmoid)},
    {"hard_sigmoid_keras_inclusive", act_hard_sigmoid(0.2, true)},  // 0.2x+0.5, Keras's edges
    {"hard_sigmoid_keras_exclusive", act_hard_sigmoid(0.2, false)},
    {"hard_sigmoid_torch_inclusive", act_hard_sigmoid(1.0 / 6.0, true)},
    {"hard_sigmoid_torch_exclusive", act_hard_sigmoid(1.0 / 6.0, false)},  // x/6+0.5, torch's edges
};

// The gtest-safe name of a row.
inline std::string activation_case_name(const ActivationCase& c) { return case_test_name(c.name); }

// gtest prints a parameter with PrintTo when it finds one (by argument lookup): the row's name.
inline void PrintTo(const ActivationCase& c, std::ostream* os) { *os << c.name; }

}  // namespace driftlab
