// The reference LSTM/GRU under autocast (RnnParams::autocast, core/ops/rnn.h): PyTorch's CPU
// autocast inside nn.LSTM / nn.GRU, whose rounding points bench/peers/rnn_autocast_probe.py writes
// out op by op and checks bit for bit against PyTorch 1.13. Every product of two format values is
// exact in float32 (8 + 8 or 11 + 11 significant bits), so a GEMM here is a float32 ordered_sum of
// exact terms rounded once, as oneDNN's bfloat16 GEMM is (in its own order); an elementwise op on
// format values is its float32 computation rounded once, as PyTorch's CPU kernels for bfloat16
// compute (sigmoid, tanh, sigmoid_backward, tanh_backward, add, mul: checked over every bfloat16
// input or 10^6 random pairs when this was written). Float32 only; no mask.
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/ref/ref.h"

namespace driftlab {
namespace {

struct Fmt {
  MathMode f;
  float operator()(float v) const { return round_result(v, f); }
};

// sum_i R(a_i) R(b_i) in float32, in the params' order (the rounding of the result is the caller's).
float dot_r(const RnnParams& p, const Fmt& R, const float* a, int64_t a_stride, const float* b, int64_t b_stride,
            int64_t n, std::vector<float>& terms) {
  terms.resize(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) terms[static_cast<std::size_t>(i)] = R(a[i * a_stride]) * R(b[i * b_stride]);
  return ordered_sum(terms.data(), n, p.sum_order);
}

float sigmoid_f(float a) { return rnn_gate(ActivationParams{ActKind::sigmoid}, a); }

}  // namespace

void rnn_forward_autocast(const RnnParams& p, const float* x, const uint8_t* mask, const RnnWeights<float>& w,
                          float* h_seq, float* ws) {
  check_rnn_params(p);
  const char* op = rnn_cell_name(p.cell);
  check(mask == nullptr, op, ": autocast with a padding mask is not emulated (PyTorch's packed sequences "
                             "under autocast were not traced)");
  check(!p.initial_state || (w.h0 && (p.cell == RnnCell::gru || w.c0)), op, ": initial_state without h0/c0");
  const Fmt R{p.autocast};
  const int64_t N = p.batch, S = p.steps, F = p.input, H = p.hidden, G = rnn_gates(p.cell), GH = G * H;
  const int64_t NS = N * S;
  std::vector<float> own(ws ? 0 : static_cast<std::size_t>(rnn_workspace_size(p)));
  if (!ws) ws = own.data();
  float* pre = ws;
  float* act = ws + NS * GH;
  float* aux = ws + 2 * NS * GH;
  float* xin = aux + NS * H;
  float* rec = xin + NS * GH;
  std::vector<float> terms, hb(static_cast<std::size_t>(H));
  const std::vector<float> zeros(static_cast<std::size_t>(H), 0.0f);
  // The input projection over the whole sequence: one linear.
  for (int64_t row = 0; row < NS; ++row)
    for (int64_t g = 0; g < GH; ++g) {
      const float s = dot_r(p, R, x + row * F, 1, w.w_ih + g * F, 1, F, terms);
      xin[row * GH + g] = p.input_bias_twice ? R(R(s) + R(w.b_ih[g])) : R(s + R(w.b_ih[g]));
    }
  for (int64_t t = 0; t < S; ++t)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t row = n * S + t;
      const float* hp = t > 0 ? h_seq + (row - 1) * H : p.initial_state ? w.h0 + n * H : zeros.data();
      float* a = pre + row * GH;
      float* y = act + row * GH;
      float* xi = xin + row * GH;
      float* hr = rec + row * GH;
      float* h = h_seq + row * H;
      float* ax = aux + row * H;
      for (int64_t k = 0; k < H; ++k) hb[static_cast<std::size_t>(k)] = R(hp[k]);
      for (int64_t g = 0; g < GH; ++g) hr[g] = R(dot_r(p, R, hb.data(), 1, w.w_hh + g * H, 1, H, terms) + R(w.b_hh[g]));
      if (p.cell == RnnCell::lstm) {
        const float* cp = t > 0 ? aux + (row - 1) * H : p.initial_state ? w.c0 + n * H : zeros.data();
        for (int64_t g = 0; g < GH; ++g) {
          a[g] = R(hr[g] + xi[g]);
          y[g] = R(g / H == 2 ? std::tanh(a[g]) : sigmoid_f(a[g]));
        }
        for (int64_t j = 0; j < H; ++j) {
          const float i = y[j], f = y[H + j], gg = y[2 * H + j], o = y[3 * H + j];
          const float fc = f * cp[j];  // a format value times the float32 state: float32
          ax[j] = fc + R(i * gg);
          const float tc = std::tanh(ax[j]);
          h[j] = o * tc;
        }
      } else {
        for (int64_t g = 0; g < 2 * H; ++g) {  // r and z
          a[g] = R(hr[g] + xi[g]);
          y[g] = R(sigmoid_f(a[g]));
        }
        for (int64_t j = 0; j < H; ++j) {
          const int64_t g = 2 * H + j;
          const float r = y[j], z = y[H + j];
          ax[j] = hr[g];
          a[g] = R(xi[g] + R(hr[g] * r));
          y[g] = R(std::tanh(a[g]));
          const float d = hp[j] - y[g];  // float32 state minus a format value: float32
          const float dz = d * z;
          h[j] = dz + y[g];
        }
      }
    }
}

void rnn_backward_autocast(const RnnParams& p, const float* x, const uint8_t* mask, const RnnWeights<float>& w,
                           const float* h_seq, const float* ws, const float* dh_seq, float* dx,
                           const RnnGrads<float>& gr) {
  check_rnn_params(p);
  const char* op = rnn_cell_name(p.cell);
  check(mask == nullptr, op, ": autocast with a padding mask is not emulated");
  check(!p.initial_state, op, ": the backward from a given initial state is not built");
  check(ws != nullptr, op, " backward: no workspace (the forward ran without one)");
  const Fmt R{p.autocast};
  const int64_t N = p.batch, S = p.steps, F = p.input, H = p.hidden, G = rnn_gates(p.cell), GH = G * H;
  const int64_t NS = N * S;
  const float* act = ws + NS * GH;
  const float* aux = ws + 2 * NS * GH;
  // dgin: the gradients of the input projection's result (LSTM: the gates' pre-activations; GRU
  // r, z, n's argument); dgrec: of the recurrent product's (GRU n: times r).
  std::vector<float> dgin(static_cast<std::size_t>(NS * GH)), dgrec(static_cast<std::size_t>(NS * GH));
  std::vector<float> dh_next(static_cast<std::size_t>(N * H), 0.0f), dc_next(static_cast<std::size_t>(N * H), 0.0f);
  // The recurrent weight's and bias's gradients, accumulated over the steps in the format (autocast
  // casts W_hh once and caches it: every step's gradient is added to that one cast's).
  std::vector<float> acc_w(static_cast<std::size_t>(GH * H), 0.0f), acc_b(static_cast<std::size_t>(GH), 0.0f);
  std::vector<float> terms, col(static_cast<std::size_t>(NS));
  auto sig_bw = [&](float d, float y) { return R(d * (1.0f - y) * y); };  // sigmoid_backward
  auto tanh_bw = [&](float d, float y) { return R(d * (1.0f - y * y)); };  // tanh_backward
  for (int64_t t = S - 1; t >= 0; --t) {
    for (int64_t n = 0; n < N; ++n) {
      const int64_t row = n * S + t;
      const float* y = act + row * GH;
      float* gi = dgin.data() + row * GH;
      float* gh = dgrec.data() + row * GH;
      float* dhn = dh_next.data() + n * H;
      const float* dh_out = p.dh_last_step ? (t == S - 1 ? dh_seq + n * H : nullptr) : dh_seq + row * H;
      std::vector<float> direct(static_cast<std::size_t>(H), 0.0f);
      for (int64_t j = 0; j < H; ++j) {
        const float dh = (dh_out ? dh_out[j] : 0.0f) + dhn[j];
        if (p.cell == RnnCell::lstm) {
          const float i = y[j], f = y[H + j], g = y[2 * H + j], o = y[3 * H + j];
          const float c = aux[row * H + j], cp = t > 0 ? aux[(row - 1) * H + j] : 0.0f;
          const float tc = std::tanh(c);
          const float dho = dh * o;
          const float dc = dho * (1.0f - tc * tc) + dc_next[n * H + j];
          const float d_o = R(dh * tc), d_ig = R(dc), d_f = R(dc * cp);
          dc_next[n * H + j] = dc * f;
          gi[j] = sig_bw(R(d_ig * g), i);
          gi[H + j] = sig_bw(d_f, f);
          gi[2 * H + j] = tanh_bw(R(d_ig * i), g);
          gi[3 * H + j] = sig_bw(d_o, o);
        } else {
          const float r = y[j], z = y[H + j], nv = y[2 * H + j], hn = aux[row * H + j];
          const float hp = t > 0 ? h_seq[(row - 1) * H + j] : 0.0f;
          const float d_hmn = dh * z;  // d(h - n), float32
          const float dz = R(dh * (hp - nv));
          const float dn = R(R(dh) + R(-d_hmn));  // n's two uses, each gradient cast, summed in the format
          const float da_n = tanh_bw(dn, nv);
          gi[j] = sig_bw(R(da_n * hn), r);
          gi[H + j] = sig_bw(dz, z);
          gi[2 * H + j] = da_n;
          direct[static_cast<std::size_t>(j)] = d_hmn;
        }
      }
      for (int64_t g = 0; g < GH; ++g) gh[g] = p.cell == RnnCell::gru && g >= 2 * H ? R(gi[g] * y[g - 2 * H]) : gi[g];
      // dh_{t-1}: through the cast of h, one product in the format, then float32 (+ the GRU's direct path).
      for (int64_t k = 0; k < H; ++k)
        dhn[k] = direct[static_cast<std::size_t>(k)] + R(dot_r(p, R, gh, 1, w.w_hh + k, H, GH, terms));
    }
    // This step's dW_hh = dgrec^T R(h_{t-1}) and db_hh = sum over the batch, each rounded, then added
    // to the accumulated gradient in the format.
    std::vector<float> a(static_cast<std::size_t>(N)), b(static_cast<std::size_t>(N));
    for (int64_t g = 0; g < GH; ++g) {
      for (int64_t n = 0; n < N; ++n) a[static_cast<std::size_t>(n)] = dgrec[(n * S + t) * GH + g];
      for (int64_t k = 0; k < H; ++k) {
        for (int64_t n = 0; n < N; ++n) b[static_cast<std::size_t>(n)] = t > 0 ? h_seq[(n * S + t - 1) * H + k] : 0.0f;
        const float step = R(dot_r(p, R, a.data(), 1, b.data(), 1, N, terms));
        acc_w[g * H + k] = R(acc_w[g * H + k] + step);
      }
      acc_b[g] = R(acc_b[g] + R(ordered_sum(a.data(), N, p.sum_order)));
    }
  }
  for (int64_t g = 0; g < GH; ++g) {
    for (int64_t f = 0; f < F; ++f) gr.dw_ih[g * F + f] += R(dot_r(p, R, dgin.data() + g, GH, x + f, F, NS, terms));
    for (int64_t i = 0; i < NS; ++i) col[static_cast<std::size_t>(i)] = dgin[i * GH + g];
    gr.db_ih[g] += R(ordered_sum(col.data(), NS, p.sum_order));
    for (int64_t k = 0; k < H; ++k) gr.dw_hh[g * H + k] += acc_w[g * H + k];
    gr.db_hh[g] += acc_b[g];
  }
  if (dx)
    for (int64_t i = 0; i < NS; ++i)
      for (int64_t f = 0; f < F; ++f) dx[i * F + f] = R(dot_r(p, R, dgin.data() + i * GH, 1, w.w_ih + f, F, GH, terms));
}

}  // namespace driftlab
