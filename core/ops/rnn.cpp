#include "core/ops/rnn.h"

#include "core/error.h"
#include "core/ops/rnn_autocast.h"

namespace driftlab {

const char* rnn_cell_name(RnnCell c) { return c == RnnCell::lstm ? "lstm" : "gru"; }

void check_rnn_params(const RnnParams& p) {
  const char* op = rnn_cell_name(p.cell);
  if (!(p.batch >= 1 && p.steps >= 1 && p.input >= 1 && p.hidden >= 1))
    fail(op, ": batch=", p.batch, " steps=", p.steps, " input=", p.input, " hidden=", p.hidden,
         " must all be >= 1");
  if (p.gate_act.kind != ActKind::sigmoid && p.gate_act.kind != ActKind::hard_sigmoid)
    fail(op, ": gate activation ", act_name(p.gate_act.kind), " is not sigmoid or hard_sigmoid");
  if (p.peepholes && p.cell != RnnCell::lstm) fail(op, ": peepholes are an LSTM connection");
  if (p.autocast == MathMode::tf32) fail(op, ": autocast format tf32 (bfloat16, float16 or float32 = off)");
  if (p.autocast != MathMode::float32 && rnn_autocast_gap(p) != RnnAutocastGap::none)
    fail(op, ": autocast emulates PyTorch's cell only; this one has ", rnn_autocast_gap_name(rnn_autocast_gap(p)));
}

RnnAutocastGap rnn_autocast_gap(const RnnParams& p) {
  if (p.gate_act.kind != ActKind::sigmoid) return RnnAutocastGap::hard_sigmoid;
  if (!p.two_biases) return RnnAutocastGap::one_bias;
  if (p.peepholes) return RnnAutocastGap::peepholes;
  if (p.cell == RnnCell::gru && !p.gru_reset_after) return RnnAutocastGap::reset_before;
  if (p.cell == RnnCell::gru && !p.gru_z_keeps_old) return RnnAutocastGap::z_takes_new;
  if (p.math != MathMode::float32) return RnnAutocastGap::math_mode;
  return RnnAutocastGap::none;
}

const char* rnn_autocast_gap_name(RnnAutocastGap g) {
  switch (g) {
    case RnnAutocastGap::none: return "nothing PyTorch's cell lacks";
    case RnnAutocastGap::hard_sigmoid: return "hard sigmoid gates";
    case RnnAutocastGap::one_bias: return "one bias";
    case RnnAutocastGap::peepholes: return "peepholes";
    case RnnAutocastGap::reset_before: return "the reset applied before the product";
    case RnnAutocastGap::z_takes_new: return "z taking the new state";
    case RnnAutocastGap::math_mode: return "a reduced math mode (math_rnn)";
  }
  return "?";
}

int64_t rnn_workspace_size(const RnnParams& p) {
  const int64_t nt = p.batch * p.steps;
  const int64_t blocks = p.autocast == MathMode::float32 ? 2 : 4;  // + xin, rec under autocast
  return blocks * nt * rnn_gates(p.cell) * p.hidden + nt * p.hidden;
}

}  // namespace driftlab
