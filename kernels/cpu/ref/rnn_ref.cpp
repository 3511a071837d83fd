// Reference LSTM/GRU kernels, float and double, single-threaded loops: the oracle for the
// fast kernel (kernels/cpu/fast/rnn_fast.cpp). Layout and math: core/ops/rnn.h (x (N,T,F) batch-major,
// weights (G*H, F|H) gate row blocks LSTM i,f,g,o / GRU r,z,n). Every dot product and every
// parameter-gradient sum over the N*T (sample, step) pairs is one ordered_sum in
// params.sum_order. A padded step (mask 0) copies the state and zeroes its workspace rows and
// gate gradients. Forward writes h_seq and ws (=); backward writes dx (=) and adds into
// dw_ih, dw_hh, db_ih, db_hh (+=).
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/ops/rnn.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

// A GEMM operand under the params' math mode (tf32, bfloat16, float16: rounded; float32: as it
// is). A reduced mode runs on float32 only (the layer refuses it under dtype=float64).
template <typename T>
T op(const RnnParams& p, T v) {
  if (p.math == MathMode::float32) return v;
  return static_cast<T>(round_operand(static_cast<float>(v), p.math, p.tf32_rule));
}

template <typename T>
T dot(const RnnParams& p, const T* a, const T* b, int64_t n, std::vector<T>& terms) {
  terms.resize(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) terms[static_cast<std::size_t>(i)] = op(p, a[i]) * op(p, b[i]);
  return ordered_sum(terms.data(), n, p.sum_order);
}

}  // namespace

template <typename T>
void rnn_forward_ref(const RnnParams& p, const RnnExec&, const T* x, const uint8_t* mask, const RnnWeights<T>& w,
                     T* h_seq, T* ws) {
  const T *w_ih = w.w_ih, *w_hh = w.w_hh, *b_ih = w.b_ih, *b_hh = w.b_hh, *w_peep = w.w_peep;
  check_rnn_params(p);
  if (p.autocast != MathMode::float32) {
    if constexpr (std::is_same_v<T, float>) return rnn_forward_autocast(p, x, mask, w, h_seq, ws);
    fail(rnn_cell_name(p.cell), ": autocast needs float32 (the layer refuses dtype=float64)");
  }
  check(!p.initial_state || (w.h0 && (p.cell == RnnCell::gru || w.c0)), rnn_cell_name(p.cell),
        ": initial_state without h0/c0");
  const int64_t N = p.batch, S = p.steps, F = p.input, H = p.hidden, G = rnn_gates(p.cell), GH = G * H;
  std::vector<T> own(ws ? 0 : static_cast<std::size_t>(rnn_workspace_size(p)));  // inference: no caller workspace
  if (!ws) ws = own.data();
  T* pre = ws;
  T* act = ws + N * S * GH;
  T* aux = ws + 2 * N * S * GH;
  const std::vector<T> zeros(static_cast<std::size_t>(H), T(0));
  std::vector<T> terms, rh(static_cast<std::size_t>(H));
  for (int64_t t = 0; t < S; ++t)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t row = n * S + t;
      const T* xt = x + row * F;
      const T* h0 = p.initial_state ? w.h0 + n * H : zeros.data();
      const T* c0 = p.initial_state && p.cell == RnnCell::lstm ? w.c0 + n * H : zeros.data();
      const T* hp = t > 0 ? h_seq + (row - 1) * H : h0;
      T* a = pre + row * GH;
      T* y = act + row * GH;
      T* h = h_seq + row * H;
      T* ax = aux + row * H;
      if (mask && !mask[row]) {  // padding: h (and the LSTM's c) carry over from t-1
        const T* cp = p.cell == RnnCell::lstm && t > 0 ? aux + (row - 1) * H : c0;
        for (int64_t g = 0; g < GH; ++g) a[g] = y[g] = T(0);
        for (int64_t j = 0; j < H; ++j) {
          h[j] = hp[j];
          ax[j] = cp[j];
        }
        continue;
      }
      auto a_in = [&](int64_t g) { return dot(p, xt, w_ih + g * F, F, terms) + b_ih[g]; };
      auto a_rec = [&](int64_t g, const T* hin) {
        const T d = dot(p, hin, w_hh + g * H, H, terms);
        return b_hh ? d + b_hh[g] : d;
      };
      if (p.cell == RnnCell::lstm) {
        const T* cp = t > 0 ? aux + (row - 1) * H : c0;
        for (int64_t g = 0; g < GH; ++g) {
          a[g] = a_in(g) + a_rec(g, hp);
          if (p.peepholes && g < 2 * H) a[g] += w_peep[g] * cp[g % H];  // i, f see c_{t-1}
          if (g < 3 * H || !p.peepholes) y[g] = g / H == 2 ? std::tanh(a[g]) : rnn_gate(p.gate_act, a[g]);
        }
        for (int64_t j = 0; j < H; ++j) {
          const T i = y[j], f = y[H + j], gg = y[2 * H + j];
          ax[j] = f * cp[j] + i * gg;
          if (p.peepholes) {  // o sees the new c
            a[3 * H + j] += w_peep[2 * H + j] * ax[j];
            y[3 * H + j] = rnn_gate(p.gate_act, a[3 * H + j]);
          }
          h[j] = y[3 * H + j] * std::tanh(ax[j]);
        }
      } else {
        for (int64_t g = 0; g < 2 * H; ++g) {  // r and z
          a[g] = a_in(g) + a_rec(g, hp);
          y[g] = rnn_gate(p.gate_act, a[g]);
        }
        const T* r = y;
        const T* z = y + H;
        if (!p.gru_reset_after)
          for (int64_t j = 0; j < H; ++j) rh[static_cast<std::size_t>(j)] = r[j] * hp[j];
        for (int64_t j = 0; j < H; ++j) {
          const int64_t g = 2 * H + j;
          if (p.gru_reset_after) {
            ax[j] = a_rec(g, hp);
            a[g] = a_in(g) + r[j] * ax[j];
          } else {
            ax[j] = a_rec(g, rh.data());
            a[g] = a_in(g) + ax[j];
          }
          y[g] = std::tanh(a[g]);
          const T nv = y[g];
          h[j] = p.gru_z_keeps_old ? z[j] * hp[j] + (T(1) - z[j]) * nv : (T(1) - z[j]) * hp[j] + z[j] * nv;
        }
      }
    }
}

template <typename T>
void rnn_backward_ref(const RnnParams& p, const RnnExec&, const T* x, const uint8_t* mask, const RnnWeights<T>& w,
                      const T* h_seq, const T* ws, const T* dh_seq, T* dx, const RnnGrads<T>& gr_out) {
  const T *w_ih = w.w_ih, *w_hh = w.w_hh, *w_peep = w.w_peep;
  T *dw_ih = gr_out.dw_ih, *dw_hh = gr_out.dw_hh, *db_ih = gr_out.db_ih, *db_hh = gr_out.db_hh;
  check_rnn_params(p);
  if (p.autocast != MathMode::float32) {
    if constexpr (std::is_same_v<T, float>) return rnn_backward_autocast(p, x, mask, w, h_seq, ws, dh_seq, dx, gr_out);
    fail(rnn_cell_name(p.cell), ": autocast needs float32 (the layer refuses dtype=float64)");
  }
  check(!p.initial_state, rnn_cell_name(p.cell), ": the backward from a given initial state is not built");
  check(ws != nullptr, rnn_cell_name(p.cell), " backward: no workspace (the forward ran without one)");
  const int64_t N = p.batch, S = p.steps, F = p.input, H = p.hidden, G = rnn_gates(p.cell), GH = G * H;
  const int64_t NS = N * S;
  const T* pre = ws;
  const T* act = ws + NS * GH;
  const T* aux = ws + 2 * NS * GH;
  const bool gru_before = p.cell == RnnCell::gru && !p.gru_reset_after;
  // dgin: gradient w.r.t. the input pre-activation x W_ih^T + b_ih; dgrec: w.r.t. the
  // recurrent one h W_hh^T + b_hh (the GRU's n block differs: r* after, or (r*h) as input).
  std::vector<T> dgin(static_cast<std::size_t>(NS * GH)), dgrec(static_cast<std::size_t>(NS * GH));
  std::vector<T> dh_next(static_cast<std::size_t>(N * H), T(0)), dc_next(static_cast<std::size_t>(N * H), T(0));
  const std::vector<T> zeros(static_cast<std::size_t>(H), T(0));
  std::vector<T> terms(static_cast<std::size_t>(GH)), drh(static_cast<std::size_t>(H));
  for (int64_t t = S - 1; t >= 0; --t)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t row = n * S + t;
      const T* hp = t > 0 ? h_seq + (row - 1) * H : zeros.data();
      const T* a = pre + row * GH;
      const T* y = act + row * GH;
      const T* ax = aux + row * H;
      T* gi = dgin.data() + row * GH;
      T* gr = dgrec.data() + row * GH;
      T* dhn = dh_next.data() + n * H;
      std::vector<T> dh(static_cast<std::size_t>(H));
      const T* dh_out = p.dh_last_step ? (t == S - 1 ? dh_seq + n * H : zeros.data()) : dh_seq + row * H;
      for (int64_t j = 0; j < H; ++j) dh[j] = dh_out[j] + dhn[j];
      if (mask && !mask[row]) {  // h_t = h_{t-1}, c_t = c_{t-1}: dh and dc pass through unchanged
        for (int64_t g = 0; g < GH; ++g) gi[g] = gr[g] = T(0);
        for (int64_t j = 0; j < H; ++j) dhn[j] = dh[j];
        continue;
      }
      std::vector<T> dhp(static_cast<std::size_t>(H), T(0));  // direct (non-matmul) paths to h_{t-1}
      if (p.cell == RnnCell::lstm) {
        const T* cp = t > 0 ? aux + (row - 1) * H : zeros.data();
        T* dcn = dc_next.data() + n * H;
        for (int64_t j = 0; j < H; ++j) {
          const T i = y[j], f = y[H + j], g = y[2 * H + j], o = y[3 * H + j];
          const T tc = std::tanh(ax[j]);
          gi[3 * H + j] = dh[j] * tc * rnn_gate_grad(p.gate_act, a[3 * H + j], o);
          T dc = dh[j] * o * (T(1) - tc * tc) + dcn[j];
          if (p.peepholes) dc += gi[3 * H + j] * w_peep[2 * H + j];  // through o's peephole
          gi[j] = dc * g * rnn_gate_grad(p.gate_act, a[j], i);
          gi[H + j] = dc * cp[j] * rnn_gate_grad(p.gate_act, a[H + j], f);
          gi[2 * H + j] = dc * i * (T(1) - g * g);
          dcn[j] = dc * f;
          if (p.peepholes) dcn[j] += gi[j] * w_peep[j] + gi[H + j] * w_peep[H + j];
        }
        for (int64_t g = 0; g < GH; ++g) gr[g] = gi[g];
      } else {
        const T* r = y;
        const T* z = y + H;
        const T* nv = y + 2 * H;
        std::vector<T> dr(static_cast<std::size_t>(H));
        for (int64_t j = 0; j < H; ++j) {
          const T dz = p.gru_z_keeps_old ? dh[j] * (hp[j] - nv[j]) : dh[j] * (nv[j] - hp[j]);
          const T dn = p.gru_z_keeps_old ? dh[j] * (T(1) - z[j]) : dh[j] * z[j];
          dhp[j] = p.gru_z_keeps_old ? dh[j] * z[j] : dh[j] * (T(1) - z[j]);
          const T dan = dn * (T(1) - nv[j] * nv[j]);
          gi[2 * H + j] = dan;
          if (p.gru_reset_after) {
            dr[j] = dan * ax[j];
            gr[2 * H + j] = dan * r[j];
          } else {
            gr[2 * H + j] = dan;
          }
          gi[H + j] = dz * rnn_gate_grad(p.gate_act, a[H + j], z[j]);
        }
        if (!p.gru_reset_after)
          for (int64_t k = 0; k < H; ++k) {  // d(r*h)[k] = sum_j dan[j] w_hn[j,k]
            for (int64_t j = 0; j < H; ++j) terms[j] = op(p, gr[2 * H + j]) * op(p, w_hh[(2 * H + j) * H + k]);
            drh[k] = ordered_sum(terms.data(), H, p.sum_order);
            dr[k] = drh[k] * hp[k];
            dhp[k] += drh[k] * r[k];
          }
        for (int64_t j = 0; j < H; ++j) gi[j] = dr[j] * rnn_gate_grad(p.gate_act, a[j], r[j]);
        for (int64_t g = 0; g < 2 * H; ++g) gr[g] = gi[g];
      }
      // dh_{t-1} = direct paths + sum over the gate rows multiplying h_{t-1} of dgrec * W_hh.
      const int64_t mm_rows = gru_before ? 2 * H : GH;
      for (int64_t k = 0; k < H; ++k) {
        for (int64_t g = 0; g < mm_rows; ++g) terms[g] = op(p, gr[g]) * op(p, w_hh[g * H + k]);
        dhn[k] = dhp[k] + ordered_sum(terms.data(), mm_rows, p.sum_order);
      }
    }
  // Parameter gradients: sums over the N*S (sample, step) pairs; and dx.
  std::vector<T> col(static_cast<std::size_t>(NS));
  for (int64_t g = 0; g < GH; ++g) {
    for (int64_t f = 0; f < F; ++f) {
      for (int64_t i = 0; i < NS; ++i) col[i] = op(p, dgin[i * GH + g]) * op(p, x[i * F + f]);
      dw_ih[g * F + f] += ordered_sum(col.data(), NS, p.sum_order);
    }
    for (int64_t i = 0; i < NS; ++i) col[i] = dgin[i * GH + g];
    db_ih[g] += ordered_sum(col.data(), NS, p.sum_order);
    const bool reset_input = gru_before && g >= 2 * H;  // the n rows multiply r*h_{t-1}
    for (int64_t k = 0; k < H; ++k) {
      for (int64_t i = 0; i < NS; ++i) {
        const int64_t t = i % S;
        const T hv = t > 0 ? h_seq[(i - 1) * H + k] : T(0);
        col[i] = op(p, dgrec[i * GH + g]) * op(p, reset_input ? act[i * GH + k] * hv : hv);
      }
      dw_hh[g * H + k] += ordered_sum(col.data(), NS, p.sum_order);
    }
    if (db_hh) {
      for (int64_t i = 0; i < NS; ++i) col[i] = dgrec[i * GH + g];
      db_hh[g] += ordered_sum(col.data(), NS, p.sum_order);
    }
  }
  if (p.peepholes)  // dw_c* = sum over (sample, step) of the gate's gradient x the cell state it saw
    for (int64_t q = 0; q < 3; ++q)
      for (int64_t j = 0; j < H; ++j) {
        const int64_t gate = q < 2 ? q : 3;
        for (int64_t i = 0; i < NS; ++i) {
          const T c = q == 2 ? aux[i * H + j] : (i % S > 0 ? aux[(i - 1) * H + j] : T(0));
          col[i] = dgin[i * GH + gate * H + j] * c;
        }
        gr_out.dw_peep[q * H + j] += ordered_sum(col.data(), NS, p.sum_order);
      }
  if (dx)
    for (int64_t i = 0; i < NS; ++i)
      for (int64_t f = 0; f < F; ++f) {
        for (int64_t g = 0; g < GH; ++g) terms[g] = op(p, dgin[i * GH + g]) * op(p, w_ih[g * F + f]);
        dx[i * F + f] = ordered_sum(terms.data(), GH, p.sum_order);
      }
}

#define DL_INSTANTIATE(T)                                                                                   \
  template void rnn_forward_ref<T>(const RnnParams&, const RnnExec&, const T*, const uint8_t*,               \
                                   const RnnWeights<T>&, T*, T*);                                            \
  template void rnn_backward_ref<T>(const RnnParams&, const RnnExec&, const T*, const uint8_t*,              \
                                    const RnnWeights<T>&, const T*, const T*, const T*, T*, const RnnGrads<T>&);
DL_INSTANTIATE(float)
DL_INSTANTIATE(double)
#undef DL_INSTANTIATE

void register_rnn_ref(KernelRegistry& reg) {
  RnnKernel k;
  k.name = "reference";
  k.supports_doc = "every params field, float32 and float64 (math tf32 and autocast: float32)";
  k.supports = [](const RnnParams&, DType) { return true; };
  k.forward_f32 = rnn_forward_ref<float>;
  k.forward_f64 = rnn_forward_ref<double>;
  k.backward_f32 = rnn_backward_ref<float>;
  k.backward_f64 = rnn_backward_ref<double>;
  reg.rnn.at(KernelBackend::reference) = k;
}

}  // namespace driftlab
