// Shared by the RNN kernel tests (tests/ops/test_rnn.cpp for the CPU kernels,
// tests/cuda/test_rnn_cuda.cpp for the CUDA ones): the small shape's padding mask and the
// padded-step contract of core/ops/rnn.h, checked exactly. The cells and shapes, and the
// RnnParams they make, are tests/cases/rnn_cases.h's tables (the benchmark reads them too).
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "core/ops/rnn.h"
#include "tests/cases/rnn_cases.h"

namespace driftlab {

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
