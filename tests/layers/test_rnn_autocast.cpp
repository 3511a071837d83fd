// Recurrent layers under autocast (rnn_autocast_rule=ops, PyTorch's CPU rule; the oracle against
// PyTorch is tests/oracles/test_rnn_autocast_oracle_torch.cpp): every value the rule holds in the
// format is a value of that format and the cell state is not; the layer's output is float32 for
// the layers after it; the two input-bias rules give different results; every other cell or rule
// is refused naming its knob.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ops/reduced_precision.h"
#include "core/ops/rnn.h"
#include "engine/layers/gru_layer.h"
#include "engine/layers/math_mode.h"
#include "engine/random.h"
#include "engine/layers/lstm_layer.h"
#include "kernels/cpu/ref/ref.h"
#include "models/models.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

std::vector<float> values(int64_t n, double phase, double scale) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(std::sin(1.7 * i + phase) * scale);
  return v;
}

bool in_format(float v, MathMode f) { return round_result(v, f) == v; }

struct Forward {
  std::vector<float> h, ws;
};

Forward forward(RnnCell cell, MathMode f, bool bias_twice) {
  RnnParams p;
  p.cell = cell;
  p.batch = 3, p.steps = 5, p.input = 6, p.hidden = 7;
  p.autocast = f;
  p.input_bias_twice = bias_twice;
  const int64_t GH = rnn_gates(cell) * p.hidden;
  const std::vector<float> x = values(p.batch * p.steps * p.input, 0.1, 1.3), w_ih = values(GH * p.input, 0.7, 0.6),
                           w_hh = values(GH * p.hidden, 1.9, 0.5), b_ih = values(GH, 2.3, 0.4),
                           b_hh = values(GH, 3.1, 0.4);
  Forward r;
  r.h.resize(static_cast<std::size_t>(p.batch * p.steps * p.hidden));
  r.ws.resize(static_cast<std::size_t>(rnn_workspace_size(p)));
  rnn_forward_ref<float>(p, RnnExec{}, x.data(), nullptr, {w_ih.data(), w_hh.data(), b_ih.data(), b_hh.data(), nullptr},
                         r.h.data(), r.ws.data());
  return r;
}

TEST(RnnAutocast, FormatValuesAreInTheFormatAndTheCellStateIsFloat32) {
  for (const RnnCell cell : {RnnCell::lstm, RnnCell::gru})
    for (const MathMode f : {MathMode::bfloat16, MathMode::float16}) {
      const Forward r = forward(cell, f, false);
      const std::size_t nsgh = static_cast<std::size_t>(3 * 5 * rnn_gates(cell) * 7), nsh = 3 * 5 * 7;
      // pre, act, (aux), xin, rec: every value but the LSTM's cell state in aux is a format value.
      int64_t off_format_state = 0;
      for (std::size_t i = 0; i < r.ws.size(); ++i) {
        const bool aux = i >= 2 * nsgh && i < 2 * nsgh + nsh;
        if (aux && cell == RnnCell::lstm) {
          off_format_state += !in_format(r.ws[i], f);
          continue;
        }
        ASSERT_TRUE(in_format(r.ws[i], f)) << rnn_cell_name(cell) << " " << math_mode_name(f) << " workspace " << i;
      }
      // The cell state and the new state h are float32 sums (c = f*c + R(i*g), h = o*tanh(c) or
      // ((h - n)*z) + n): most are not values of the format.
      int64_t off_format_h = 0;
      for (const float v : r.h) off_format_h += !in_format(v, f);
      EXPECT_GT(off_format_h, static_cast<int64_t>(r.h.size()) / 2) << rnn_cell_name(cell) << " " << math_mode_name(f);
      if (cell == RnnCell::lstm) {
        EXPECT_GT(off_format_state, static_cast<int64_t>(nsh) / 2) << math_mode_name(f);
      }
    }
}

TEST(RnnAutocast, TheTwoInputBiasRulesAndTheTwoFormatsDiffer) {
  for (const RnnCell cell : {RnnCell::lstm, RnnCell::gru}) {
    const Forward once = forward(cell, MathMode::bfloat16, false), twice = forward(cell, MathMode::bfloat16, true),
              half = forward(cell, MathMode::float16, false);
    int64_t rule = 0, fmt = 0;
    for (std::size_t i = 0; i < once.h.size(); ++i) {
      rule += once.h[i] != twice.h[i];
      fmt += once.h[i] != half.h[i];
    }
    EXPECT_GT(rule, 0) << rnn_cell_name(cell) << ": rnn_input_bias_rounding changes nothing";
    EXPECT_GT(fmt, 0) << rnn_cell_name(cell);
  }
}

TEST(RnnAutocast, TheLayersOutputIsFloat32AndTheDenseAfterItRounds) {
  Model m = build_model("lstm", Policy::parse("torch,autocast=bfloat16"), 1);
  ASSERT_GE(m.net->size(), 2u);
  EXPECT_EQ(m.net->layer(0).kind(), "lstm");
  EXPECT_EQ(m.net->output_format(0), MathMode::float32);
  EXPECT_EQ(m.net->layer(1).kind(), "dense");
  EXPECT_EQ(m.net->output_format(1), MathMode::bfloat16);
  // One training step's forward and backward run and give finite gradients.
  Tensor x = random_tensor({4, 28, 28}, DType::f32, 5, 0.0, 1.0);
  ExecContext exec;
  RunContext ctx = RunContext::recorded(exec, Semantics::train);
  const Tensor logits = m.forward(ctx, x);
  Tensor dl = random_tensor(logits.shape(), DType::f32, 6, -0.1, 0.1);
  m.net->zero_grad();
  m.net->backward(ctx, dl);
  for (auto& [name, p] : m.net->named_params())
    for (int64_t i = 0; i < p->grad.numel(); ++i) ASSERT_TRUE(std::isfinite(p->grad.at(i))) << name << " " << i;
}

TEST(RnnAutocast, OtherCellsAndRulesAreRefusedNamingTheKnob) {
  struct Row {
    std::string spec, cell, names;
  };
  const std::vector<Row> rows = {
      {"tensorflow,autocast=bfloat16", "lstm", "rnn_autocast_rule=layer"},
      {"torch,autocast=float16,rnn_autocast_rule=layer", "gru", "rnn_autocast_rule=layer"},
      {"torch,autocast=bfloat16,rnn_recurrent_activation=hard_sigmoid", "lstm", "rnn_recurrent_activation=hard_sigmoid"},
      {"torch,autocast=bfloat16,rnn_num_bias=1", "lstm", "rnn_num_bias=1"},
      {"torch,autocast=bfloat16,lstm_peepholes=lasagne", "lstm", "lstm_peepholes=lasagne"},
      {"torch,autocast=bfloat16,gru_reset_after=before", "gru", "gru_reset_after=before"},
      {"torch,autocast=bfloat16,gru_update_convention=z_takes_new", "gru", "gru_update_convention=z_takes_new"},
      {"torch,autocast=bfloat16,math_rnn=tf32", "lstm", "math_rnn=tf32"},
      {"torch,autocast=bfloat16,dtype=float64", "gru", "dtype=float64"},
  };
  for (const Row& r : rows) {
    const Policy p = Policy::parse(r.spec);
    Rng rng(p.rng_engine, 1);
    RnnSpec s;
    s.units = 4;
    try {
      if (r.cell == "lstm")
        LstmLayer l(s, Shape{3, 2}, p, rng);
      else
        GruLayer l(s, Shape{3, 2}, p, rng);
      ADD_FAILURE() << r.spec << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(r.names), std::string::npos) << r.spec << ": " << e.what();
    }
  }
  // A padding mask: refused at the forward that receives one, naming rnn_mask.
  const Policy p = Policy::parse("torch,autocast=bfloat16,rnn_mask=carry");
  Rng rng(p.rng_engine, 1);
  RnnSpec s;
  s.units = 4;
  LstmLayer l(s, Shape{3, 2}, p, rng);
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  ctx.step_mask = StepMask{2, 3, {1, 1, 0, 1, 0, 0}};
  try {
    l.forward(ctx, Tensor({2, 3, 2}, DType::f32));
    ADD_FAILURE() << "a padding mask under autocast: accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rnn_mask=carry"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace driftlab
