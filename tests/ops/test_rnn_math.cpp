// The recurrent layers' math mode (RnnParams::math, knob math_rnn): under tf32, bfloat16 and
// float16 the reference rnn kernel rounds every operand of its gate products to the mode and
// accumulates in float32. The references here are float64 sums of the rounded operands (exact
// products: at most two 11-bit significands), bounded by Higham's float32 accumulation bound
// gamma_K * sum|terms| plus the bias add; every step is checked given the kernel's own state
// before it (h_{t-1}, the GRU's r), so an error cannot hide behind the recurrence. The float32 mode
// falls outside that bound (the test tells the modes apart). Backward: one sample and one step,
// where the input gate gradients are the bias gradient itself (db_ih = dgin), so dW_ih must be the
// product of the rounded gradient and the rounded input exactly (in float32: at most 22
// significant bits), and dx the float64 sum within the bound.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/ops/reduced_precision.h"
#include "core/ops/rnn.h"
#include "engine/cuda/device_net.h"
#include "kernels/cpu/ref/ref.h"
#include "models/models.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

constexpr MathMode kModes[] = {MathMode::tf32, MathMode::bfloat16, MathMode::float16};
const char* mode_name(MathMode m) { return m == MathMode::tf32 ? "tf32" : m == MathMode::bfloat16 ? "bfloat16" : "float16"; }
// An operand as the kernel rounds it under mode m (TF32 to nearest even), in double.
double rounded(float v, MathMode m) { return static_cast<double>(round_operand(v, m, Rounding::nearest_even)); }

// gamma_K = K u / (1 - K u), u = 2^-24: the float32 accumulation bound of K terms.
double gamma(int64_t k) {
  const double u = std::ldexp(1.0, -24);
  return static_cast<double>(k) * u / (1 - static_cast<double>(k) * u);
}

std::vector<float> values(int64_t n, double phase, double scale) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(std::sin(1.7 * i + phase) * scale);
  return v;
}

struct Case {
  RnnCell cell;
  bool reset_after;
};

TEST(RnnMath, ForwardIsTheFloat64SumOfRoundedOperandsPerStep) {
  for (const MathMode mode : kModes)
  for (const Case c : {Case{RnnCell::lstm, true}, Case{RnnCell::gru, true}, Case{RnnCell::gru, false}}) {
    SCOPED_TRACE(mode_name(mode));
    auto tf = [&](float v) { return rounded(v, mode); };
    RnnParams p;
    p.cell = c.cell;
    p.gru_reset_after = c.reset_after;
    p.batch = 3, p.steps = 4, p.input = 5, p.hidden = 6;
    const int64_t N = p.batch, S = p.steps, F = p.input, H = p.hidden, GH = rnn_gates(c.cell) * H;
    const std::vector<float> x = values(N * S * F, 0.1, 1.3), w_ih = values(GH * F, 0.7, 0.6),
                             w_hh = values(GH * H, 1.9, 0.5), b_ih = values(GH, 2.3, 0.2), b_hh = values(GH, 3.1, 0.2);
    const RnnWeights<float> w{w_ih.data(), w_hh.data(), b_ih.data(), b_hh.data(), nullptr};
    std::vector<float> h(static_cast<std::size_t>(N * S * H)), ws(static_cast<std::size_t>(rnn_workspace_size(p)));
    std::vector<float> h32(h.size()), ws32(ws.size());
    rnn_forward_ref<float>(p, RnnExec{}, x.data(), nullptr, w, h32.data(), ws32.data());
    p.math = mode;
    rnn_forward_ref<float>(p, RnnExec{}, x.data(), nullptr, w, h.data(), ws.data());
    const float* pre = ws.data();
    const float* act = ws.data() + N * S * GH;
    const float* aux = ws.data() + 2 * N * S * GH;
    int64_t checked = 0, float32_outside = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t t = 0; t < S; ++t) {
        const int64_t row = n * S + t;
        const float* hp = t > 0 ? h.data() + (row - 1) * H : nullptr;
        // What the rounded products sum to, and their sum of magnitudes, over x and over h (or r*h).
        auto in_sum = [&](int64_t g, double* mag) {
          double s = 0;
          for (int64_t f = 0; f < F; ++f) {
            const double term = tf(x[row * F + f]) * tf(w_ih[g * F + f]);
            s += term, *mag += std::abs(term);
          }
          return s;
        };
        auto rec_sum = [&](int64_t g, bool reset_input, double* mag) {
          double s = 0;
          for (int64_t k = 0; k < H && hp; ++k) {
            const float hv = reset_input ? act[row * GH + k] * hp[k] : hp[k];  // r*h as the kernel forms it
            const double term = tf(hv) * tf(w_hh[g * H + k]);
            s += term, *mag += std::abs(term);
          }
          return s;
        };
        auto expect_within = [&](float got, double want, double mag, int64_t k, float got32) {
          const double bound = gamma(k) * mag + std::ldexp(std::abs(want), -23);  // the sums, then the adds
          EXPECT_NEAR(got, want, bound) << rnn_cell_name(c.cell) << " row " << row;
          float32_outside += std::abs(static_cast<double>(got32) - want) > bound;
          ++checked;
        };
        for (int64_t g = 0; g < GH; ++g) {
          const bool n_block = c.cell == RnnCell::gru && g >= 2 * H;
          double mag = std::abs(b_ih[g]) + std::abs(b_hh[g]);
          if (!n_block) {  // pre = a_in + a_rec
            const double want = in_sum(g, &mag) + b_ih[g] + rec_sum(g, false, &mag) + b_hh[g];
            expect_within(pre[row * GH + g], want, mag, F + H + 2, ws32[row * GH + g]);
          } else {  // the GRU's recurrent n part, held in aux: h W_hn^T + b_hn or (r*h) W_hn^T + b_hn
            const int64_t j = g - 2 * H;
            const double want = rec_sum(g, !c.reset_after, &mag) + b_hh[g];
            expect_within(aux[row * H + j], want, mag, H + 1, ws32[2 * N * S * GH + row * H + j]);
          }
        }
      }
    EXPECT_EQ(checked, N * S * GH);
    // The float32 mode's sums (its own states) are outside the mode's bound almost everywhere.
    EXPECT_GT(float32_outside, checked / 2) << rnn_cell_name(c.cell);
  }
}

TEST(RnnMath, BackwardOneStepGradients) {
  for (const MathMode mode : kModes) {
  SCOPED_TRACE(mode_name(mode));
  auto tf = [&](float v) { return rounded(v, mode); };
  RnnParams p;
  p.cell = RnnCell::lstm;
  p.batch = 1, p.steps = 1, p.input = 7, p.hidden = 5;
  p.math = mode;
  const int64_t F = p.input, H = p.hidden, GH = 4 * H;
  const std::vector<float> x = values(F, 0.2, 1.1), w_ih = values(GH * F, 0.9, 0.7), w_hh = values(GH * H, 1.4, 0.5),
                           b_ih = values(GH, 2.6, 0.3), b_hh = values(GH, 0.4, 0.3), dh = values(H, 1.1, 0.8);
  const RnnWeights<float> w{w_ih.data(), w_hh.data(), b_ih.data(), b_hh.data(), nullptr};
  std::vector<float> h(static_cast<std::size_t>(H)), ws(static_cast<std::size_t>(rnn_workspace_size(p)));
  rnn_forward_ref<float>(p, RnnExec{}, x.data(), nullptr, w, h.data(), ws.data());
  std::vector<float> dx(static_cast<std::size_t>(F)), dw_ih(static_cast<std::size_t>(GH * F), 0.f),
      dw_hh(static_cast<std::size_t>(GH * H), 0.f), db_ih(static_cast<std::size_t>(GH), 0.f),
      db_hh(static_cast<std::size_t>(GH), 0.f);
  const RnnGrads<float> gr{dw_ih.data(), dw_hh.data(), db_ih.data(), db_hh.data(), nullptr};
  rnn_backward_ref<float>(p, RnnExec{}, x.data(), nullptr, w, h.data(), ws.data(), dh.data(), dx.data(), gr);
  // One (sample, step): db_ih is the input gate gradient itself; a product of two TF32 (or bfloat16,
  // float16) values is exact in float32, so each dW_ih element is that product, bit for bit.
  int64_t rounded_differs = 0;
  for (int64_t g = 0; g < GH; ++g)
    for (int64_t f = 0; f < F; ++f) {
      ASSERT_EQ(dw_ih[g * F + f], static_cast<float>(tf(db_ih[g])) * static_cast<float>(tf(x[f]))) << g << "," << f;
      rounded_differs += dw_ih[g * F + f] != db_ih[g] * x[f];
    }
  EXPECT_GT(rounded_differs, GH * F / 2);  // the unrounded products differ: the operands were rounded
  for (int64_t f = 0; f < F; ++f) {
    double want = 0, mag = 0;
    for (int64_t g = 0; g < GH; ++g) {
      const double term = tf(db_ih[g]) * tf(w_ih[g * F + f]);
      want += term, mag += std::abs(term);
    }
    EXPECT_NEAR(dx[f], want, gamma(GH) * mag) << f;
  }
  // h_{-1} = 0: no recurrent weight gradient.
  for (float v : dw_hh) EXPECT_EQ(v, 0.0f);
  }
}

TEST(RnnMath, KnobReachesTheLayerAndIsRefusedWhereNotBuilt) {
  using testing::HasSubstr;
  EXPECT_THAT(error_of([] { build_model("lstm", Policy::parse("torch,math_rnn=tf32,dtype=float64"), 1); }),
              HasSubstr("math_rnn=tf32 rounds float32 operands: it needs dtype=float32"));
  EXPECT_THAT(error_of([] { Policy::parse("torch,math_rnn=fp8"); }), HasSubstr("allowed: float32, tf32, bfloat16, float16"));
  EXPECT_THAT(error_of([] { resolve_cuda_exec(Policy::parse("torch,math_rnn=tf32,tf32_conv=false")); }),
              HasSubstr("math_rnn=tf32 needs tf32_conv=true"));
  EXPECT_THAT(error_of([] { resolve_cuda_exec(Policy::parse("torch,math_rnn=bfloat16")); }),
              HasSubstr("math_rnn=bfloat16 is emulated on the CPU only"));
  EXPECT_THAT(error_of([] { build_model("lstm", Policy::parse("torch,autocast=bfloat16,math_rnn=float16"), 1); }),
              HasSubstr("math_rnn=float16: rnn_autocast_rule=ops emulates PyTorch's cell"));
  // The model under each mode computes other logits than under float32 (the knob reaches the kernel).
  Model a = build_model("lstm", Policy::parse("torch"), 1);
  Tensor x({2, a.input_shape[0], a.input_shape[1]}, DType::f32);
  for (int64_t j = 0; j < x.numel(); ++j) x.data<float>()[j] = static_cast<float>(std::sin(0.37 * j));
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  const Tensor ya = a.forward(ctx, x);
  for (const MathMode mode : kModes) {
    Model b = build_model("lstm", Policy::parse(std::string("torch,math_rnn=") + mode_name(mode)), 1);
    const Tensor yb = b.forward(ctx, x);
    int64_t differ = 0;
    for (int64_t j = 0; j < ya.numel(); ++j) differ += ya.data<float>()[j] != yb.data<float>()[j];
    EXPECT_GT(differ, 0) << mode_name(mode);
  }
}

}  // namespace
}  // namespace driftlab
