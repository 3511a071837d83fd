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
}

int64_t rnn_workspace_size(const RnnParams& p) {
  const int64_t nt = p.batch * p.steps;
  return 2 * nt * rnn_gates(p.cell) * p.hidden + nt * p.hidden;
}

}  // namespace driftlab
