// rnn: an LSTM or GRU cell run over a sequence, forward and full backpropagation through time.
// Kernels see one canonical layout only (layers convert the frameworks' layouts at init and at
// weight import/export):
//   x (N,T,F), batch-major; h_seq (N,T,H): the hidden state after every step, h_{-1} = 0.
//   w_ih (G*H, F), w_hh (G*H, H): G row blocks of H rows each, gate order LSTM i,f,g,o and
//   GRU r,z,n (G = 4 or 3); b_ih (G*H); b_hh (G*H) only when two_biases (else null).
// Math (sr = gate_act, sigmoid or hard sigmoid; a_in = x W_ih^T + b_ih, a_rec = h W_hh^T + b_hh):
//   LSTM: a = a_in + a_rec; i=sr(a_i) f=sr(a_f) g=tanh(a_g) o=sr(a_o); c'=f*c+i*g; h'=o*tanh(c')
//         with peepholes (Lasagne): a_i += w_ci*c, a_f += w_cf*c (the previous cell state) and
//         a_o += w_co*c' (the new one); w_peep (3*H) holds w_ci, w_cf, w_co
//   GRU:  r = sr(a_in_r + a_rec_r), z = sr(a_in_z + a_rec_z),
//         reset_after:  n = tanh(a_in_n + r * (h W_hn^T + b_hn))
//         reset before: n = tanh(a_in_n + (r*h) W_hn^T + b_hn)
//         z_keeps_old:  h' = z*h + (1-z)*n;   else h' = (1-z)*h + z*n
// Padding mask (optional, null = every step is data): mask (N,T), 1 = data, 0 = padding. At a
// padded step the state carries over unchanged, h_t = h_{t-1} and c_t = c_{t-1} (h_{-1} = c_{-1}
// = 0), the step's input is not read, and its workspace rows are zero (LSTM aux: the carried c);
// so h_seq holds the state after every step, and the gradient at a padded step passes straight
// to h_{t-1} (and c_{t-1}) with zero gate gradients and dx = 0 there. Writing zeros as the
// output of padded steps instead of the carried state is the layer's job (a mask on h_seq).
// The workspace may be null when no backward follows (inference): the kernel then keeps what it
// needs itself (the fast kernel one step of it). The backward refuses a null workspace.
// Forward writes h_seq and the workspace (=); backward writes dx (=, when non-null) and ADDS
// into dw_ih, dw_hh, db_ih, db_hh (db_hh only when two_biases), dw_peep (only with peepholes).
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.h"
#include "core/ops/activation.h"
#include "core/ops/common.h"
#include "core/ops/gemm.h"
#include "core/ops/reduced_precision.h"

namespace driftlab {

enum class RnnCell { lstm, gru };
const char* rnn_cell_name(RnnCell c);
inline int64_t rnn_gates(RnnCell c) { return c == RnnCell::lstm ? 4 : 3; }

struct RnnParams {
  RnnCell cell = RnnCell::lstm;
  int64_t batch = 0, steps = 0, input = 0, hidden = 0;  // N, T, F, H
  // The recurrent (gate) activation: kind sigmoid or hard_sigmoid, with the hard sigmoid's
  // slope, offset and gradient-edge rule. The candidate/cell activation is always tanh.
  ActivationParams gate_act{ActKind::sigmoid};
  bool two_biases = true;        // b_hh exists (added to a_rec; inside r* for reset_after)
  bool gru_reset_after = true;   // r multiplies (h W_hn^T + b_hn) instead of h
  bool gru_z_keeps_old = true;   // h' = z*h + (1-z)*n (else z takes the new state)
  bool peepholes = false;        // LSTM only: diagonal cell-to-gate weights w_peep
  // The backward's dh holds only the last step's gradient, (N,H): a layer that returns its last
  // state, whose other states reach the loss only through the recurrence (no (N,T,H) of zeros).
  bool dh_last_step = false;
  SumOrder sum_order = SumOrder::ascending;  // reference kernels only
  // The math mode of the gate products (float32, tf32, bfloat16, float16): every operand of a
  // product that a GEMM forms is rounded to the mode (TF32 by tf32_rule; bfloat16 and float16 to
  // nearest even), float32 accumulation, the product's result kept in float32: in the forward x,
  // W_ih, h_{t-1} (the GRU's r*h_{t-1}) and W_hh; in the backward the gate gradients, the weights,
  // x and h_{t-1} (r*h_{t-1}) of dx, dh_{t-1}, dW_ih and dW_hh. Bias sums, the cell's elementwise
  // math, the states and the peepholes stay float32 (cuDNN's RNN runs its GEMMs on tensor cores,
  // the rest in its own kernels; float16 operands of a float32 RNN are its
  // CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION). Kernels that do not say they support it are not picked.
  MathMode math = MathMode::float32;
  Rounding tf32_rule = Rounding::nearest_even;
  // Autocast as PyTorch runs it on the CPU inside nn.LSTM / nn.GRU (bfloat16 or float16; float32 =
  // off; R() = rounding to it; bench/peers/rnn_autocast_probe.py checks these rounding points bit for
  // bit against PyTorch 1.13). Forward, per step: the input projection xi = R(R(x) R(W_ih)^T + R(b_ih))
  // (float32 sum, one rounding), or with input_bias_twice R(R(R(x) R(W_ih)^T) + R(b_ih)); the
  // recurrent product hr = R(R(h_{t-1}) R(W_hh)^T + R(b_hh)). LSTM: a = R(hr + xi), the gates R(act(a)),
  // c = (f*c_{t-1} + R(i*g)) and h = o*tanh(c) in float32. GRU: r, z = R(sr(R(hr + xi))),
  // n = R(tanh(R(xi_n + R(hr_n * r)))), h = ((h_{t-1} - n)*z) + n in float32 (z keeps the old state).
  // Backward: each gradient in its tensor's dtype (the gate gradients rounded, sigmoid_backward
  // R(dy (1 - y) y), tanh_backward R(dy (1 - y^2))); dh_{t-1} through R(h) is R(dgates W_hh) (+ the GRU's
  // float32 direct path); dW_hh and db_hh are each step's rounded product, accumulated over the steps
  // (last to first) in the format; dx, dW_ih, db_ih one rounded product or sum over all steps.
  // Needs PyTorch's cell: sigmoid gates, two biases, reset_after, z_keeps_old, no peepholes, no
  // mask, float32 (check_rnn_params refuses the rest).
  MathMode autocast = MathMode::float32;
  bool input_bias_twice = false;
  // The forward starts from RnnWeights::h0 / c0 instead of zeros (the reference kernel only:
  // others decline it): one step computed from a given state, as the oracle test does.
  bool initial_state = false;
};

// Throws naming the field when a size is < 1 or the gate activation is not sigmoid/hard_sigmoid.
void check_rnn_params(const RnnParams& p);

// Workspace the forward fills for its own kernel's backward, in elements (the reference's
// rows batch-major (N,T,...); the fast kernel's time-major and with only what its backward
// reads: no pre-activations of sigmoid gates, whose derivative needs only y; the LSTM's
// tanh(c_t) in the g gate's pre slot, which no backward reads):
//   pre (N,T,G*H): gate pre-activations (LSTM a; GRU r,z: a_in+a_rec, n: its tanh argument)
//   act (N,T,G*H): the activated gates
//   aux (N,T,H):   LSTM: the cell state c_t;  GRU: the recurrent part of n before the reset
//                  (h W_hn^T + b_hn) for reset_after, (r*h) W_hn^T + b_hn for reset before
// Under autocast (the reference kernel's rows, every value but c_t in the format) two more follow:
//   xin (N,T,G*H): the input projection xi;  rec (N,T,G*H): the recurrent product hr
// and pre holds the rounded gate sums (GRU n: its rounded tanh argument).
int64_t rnn_workspace_size(const RnnParams& p);

// The gate activation and its derivative, shared by every rnn kernel (the CPU reference and
// the CUDA kernels call these very functions) so that they agree on the hard sigmoid's clip
// points: `a` is the pre-activation, `y` the activated value.
// Inclusive edges test the clipped value slope*a+offset in T against [0,1] (Keras, Theano);
// exclusive edges test a itself strictly inside (-offset/slope, (1-offset)/slope) (torch).
template <typename T>
DL_HOST_DEVICE inline T rnn_gate(const ActivationParams& g, T a) {
  if (g.kind == ActKind::sigmoid) return T(1) / (T(1) + std::exp(-a));
  return hard_sigmoid_of(g, a);
}
template <typename T>
DL_HOST_DEVICE inline T rnn_gate_grad(const ActivationParams& g, T a, T y) {
  if (g.kind == ActKind::sigmoid) return y * (T(1) - y);
  const T slope = static_cast<T>(g.hs_slope);
  if (g.hs_grad_edges_inclusive) {
    const T v = slope * a + static_cast<T>(g.hs_offset);
    return (v >= T(0) && v <= T(1)) ? slope : T(0);
  }
  const double lo = -g.hs_offset / g.hs_slope, hi = (1.0 - g.hs_offset) / g.hs_slope;
  const double ad = static_cast<double>(a);
  return (ad > lo && ad < hi) ? slope : T(0);
}

// What a kernel runs with: its OpenMP thread count (the fast kernel's; the reference runs on one).
struct RnnExec {
  int threads = 1;
};

// The parameters a kernel reads (w_peep: null unless p.peepholes) and the gradients it adds to
// (db_hh null without two biases, dw_peep null without peepholes).
template <typename T>
struct RnnWeights {
  const T *w_ih = nullptr, *w_hh = nullptr, *b_ih = nullptr, *b_hh = nullptr, *w_peep = nullptr;
  // The state before step 0, (N,H) each, read only under RnnParams::initial_state (c0: LSTM).
  const T *h0 = nullptr, *c0 = nullptr;
};
template <typename T>
struct RnnGrads {
  T *dw_ih = nullptr, *dw_hh = nullptr, *db_ih = nullptr, *db_hh = nullptr, *dw_peep = nullptr;
};

// x:(N,T,F) mask:(N,T)|null; w: w_ih (G*H,F) w_hh (G*H,H) b_ih (G*H) b_hh (G*H)|null
// w_peep (3*H)|null -> h_seq:(N,T,H), ws
template <typename T>
using RnnForwardFn = void (*)(const RnnParams&, const RnnExec&, const T* x, const uint8_t* mask,
                              const RnnWeights<T>& w, T* h_seq, T* ws);
// dh_seq:(N,T,H) (the loss gradient w.r.t. every h_t; (N,H), h_T's, with dh_last_step) ->
// dx:(N,T,F)|null (=), g's gradients (+=); mask as in the forward (the same one).
template <typename T>
using RnnBackwardFn = void (*)(const RnnParams&, const RnnExec&, const T* x, const uint8_t* mask,
                               const RnnWeights<T>& w, const T* h_seq, const T* ws, const T* dh_seq, T* dx,
                               const RnnGrads<T>& g);

struct RnnKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const RnnParams&, DType) = nullptr;
  RnnForwardFn<float> forward_f32 = nullptr;
  RnnForwardFn<double> forward_f64 = nullptr;  // null when the backend has no double path
  RnnBackwardFn<float> backward_f32 = nullptr;
  RnnBackwardFn<double> backward_f64 = nullptr;
};


}  // namespace driftlab
