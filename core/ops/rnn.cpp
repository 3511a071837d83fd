#include "core/ops/rnn.h"

#include "core/error.h"

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
  if (p.math != MathMode::float32 && p.math != MathMode::tf32)
    fail(op, ": math mode ", p.math == MathMode::bfloat16 ? "bfloat16" : "float16",
         " is not built for recurrent layers (float32 or tf32)");
  if (p.autocast == MathMode::tf32) fail(op, ": autocast format tf32 (bfloat16, float16 or float32 = off)");
  if (p.autocast != MathMode::float32) {
    const char* what = p.gate_act.kind != ActKind::sigmoid ? "hard sigmoid gates"
                       : !p.two_biases                     ? "one bias"
                       : p.peepholes                       ? "peepholes"
                       : p.cell == RnnCell::gru && !p.gru_reset_after ? "the reset applied before the product"
                       : p.cell == RnnCell::gru && !p.gru_z_keeps_old ? "z taking the new state"
                       : p.math != MathMode::float32                  ? "a tf32 math mode"
                                                                      : nullptr;
    if (what) fail(op, ": autocast emulates PyTorch's cell only; this one has ", what);
  }
}

int64_t rnn_workspace_size(const RnnParams& p) {
  const int64_t nt = p.batch * p.steps;
  const int64_t blocks = p.autocast == MathMode::float32 ? 2 : 4;  // + xin, rec under autocast
  return blocks * nt * rnn_gates(p.cell) * p.hidden + nt * p.hidden;
}

}  // namespace driftlab
