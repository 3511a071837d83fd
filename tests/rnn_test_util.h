// Shared by the RNN kernel tests (tests/ops/test_rnn.cpp for the CPU kernels,
// tests/cuda/test_rnn_cuda.cpp for the CUDA ones): the case and shape records and the
// RnnParams they make, the small shape's padding mask, and the padded-step contract of
// engine/ops/rnn.h, checked exactly.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "engine/core/tensor.h"
#include "engine/ops/rnn.h"

namespace driftlab {

// One cell configuration: what the knobs resolve to (engine/ops/rnn.h's RnnParams fields).
struct RnnCase {
  const char* name;
  RnnCell cell;
  ActKind gate;
  bool two_biases, reset_after, z_keeps_old;
  bool peepholes = false;
  bool inclusive = true;  // hard sigmoid: Keras's inclusive gradient edges, else torch's exclusive ones
};

struct RnnShape {
  int64_t batch, steps, input, hidden;
};
// The small shape of the mask tests (rnn_test_mask is its mask).
constexpr RnnShape kRnnSmall{5, 7, 6, 9};

// The params of a case at a shape (hard sigmoid 0.2x+0.5, Keras's and torch's).
inline RnnParams rnn_case_params(const RnnCase& c, const RnnShape& s, bool dh_last = false) {
  RnnParams p;
  p.cell = c.cell;
  p.batch = s.batch, p.steps = s.steps, p.input = s.input, p.hidden = s.hidden;
  p.gate_act.kind = c.gate;
  p.gate_act.hs_slope = 0.2;
  p.gate_act.hs_offset = 0.5;
  p.gate_act.hs_grad_edges_inclusive = c.inclusive;
  p.two_biases = c.two_biases;
  p.gru_reset_after = c.reset_after;
  p.gru_z_keeps_old = c.z_keeps_old;
  p.peepholes = c.peepholes;
  p.dh_last_step = dh_last;
  return p;
}

// For kRnnSmall's 5 samples x 7 steps: pre-padding (3 steps), post-padding (2 steps), a sequence that is
// all padding, a gap in the middle, and no padding.
inline const std::vector<uint8_t>& rnn_test_mask() {
  static const std::vector<uint8_t> m = {0, 0, 0, 1, 1, 1, 1,  //
                                         1, 1, 1, 1, 1, 0, 0,  //
                                         0, 0, 0, 0, 0, 0, 0,  //
                                         1, 1, 1, 0, 1, 1, 1,  //
                                         1, 1, 1, 1, 1, 1, 1};
  return m;
}

// At every step with mask 0: h_t equals h_{t-1} exactly (0 before the first step) and the
// step's input gradient is exactly 0. h (N,T,H), dx (N,T,F), any float dtype.
inline ::testing::AssertionResult padded_steps_carry(const RnnParams& p, const std::vector<uint8_t>& mask,
                                                     const Tensor& h, const Tensor& dx) {
  for (int64_t n = 0; n < p.batch; ++n)
    for (int64_t t = 0; t < p.steps; ++t) {
      if (mask[static_cast<std::size_t>(n * p.steps + t)]) continue;
      for (int64_t j = 0; j < p.hidden; ++j) {
        const double prev = t > 0 ? h.at((n * p.steps + t - 1) * p.hidden + j) : 0.0;
        const double now = h.at((n * p.steps + t) * p.hidden + j);
        if (now != prev)
          return ::testing::AssertionFailure() << "h at sample " << n << " step " << t << " unit " << j << " is " << now
                                               << ", the carried state is " << prev;
      }
      for (int64_t f = 0; f < p.input; ++f)
        if (dx.at((n * p.steps + t) * p.input + f) != 0.0)
          return ::testing::AssertionFailure() << "dx at sample " << n << " step " << t << " feature " << f << " is "
                                               << dx.at((n * p.steps + t) * p.input + f) << ", not 0";
    }
  return ::testing::AssertionSuccess();
}

}  // namespace driftlab
