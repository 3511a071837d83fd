// Fast LSTM/GRU kernels: the forward, and the registration of the pair. The design and the
// shared pieces: kernels/cpu/fast/rnn_fast_tiles.h; the backward: rnn_fast_backward.cpp.
#include "kernels/cpu/fast/rnn_fast_tiles.h"

namespace driftlab {
namespace rnn_fast {
namespace {

// ---- forward ----

// Step t, unit block u, every row block of [n0, n1): the tile acc = x_t px[u] (accumulator groups
// [0, NX)) + h_{t-1} ph[u] (groups [H0, H0+NH); none at t = 0), then epi(mr, n, acc) with the
// row block's first row n and its row count as std::integral_constant mr.
template <int NX, int NH, int H0, typename Epi>
void fwd_tiles(const Dims& d, int64_t n0, int64_t n1, int64_t t, int64_t u, const float* x, const float* h_seq,
               const float* px, const float* ph, Epi&& epi) {
  const int64_t S = d.S, F = d.F, H = d.H;
  for_row_blocks(n0, n1, [&](auto mr, int64_t n) {
    constexpr int MR = decltype(mr)::value;
    v16 acc[kMR][kNB];
    tile_madd<MR, NX, 0, true>(acc, x + (n * S + t) * F, S * F, F, px + u * F * NX * kL);
    if (t > 0) tile_madd<MR, NH, H0, false>(acc, h_seq + (n * S + t - 1) * H, S * H, H, ph + u * H * NH * kL);
    epi(mr, n, acc);
  });
}

// Sample n's views at step t in unit block u: its workspace row (pre, act, aux), h_t in h_seq,
// and the batch-major row (h_seq, mask).
struct RowAt {
  int64_t row;
  float *a, *y, *ax, *h;
  RowAt(const Dims& d, float* h_seq, int64_t n, int64_t t, int64_t u)
      : row(n * d.S + t),
        a(d.pre + d.wrow(n, t) * d.GH + u * kL),
        y(d.act + d.wrow(n, t) * d.GH + u * kL),
        ax(d.aux + d.wrow(n, t) * d.H + u * kL),
        h(h_seq + row * d.H + u * kL) {}
  // h_{t-1} (zero at t = 0).
  v16 hprev(const Dims& d, int64_t t, int m) const { return t > 0 ? ldn(h - d.H, m) : v16{}; }
  // A padded step: the gate rows zero, aux = carried (the LSTM's c_{t-1}, zero for the GRU),
  // h_t = h_{t-1}.
  void pad(const Dims& d, int64_t t, int m, v16 carried) const {
    for (int64_t q = 0; q < d.GH / d.H; ++q) stn(a + q * d.H, v16{}, m), stn(y + q * d.H, v16{}, m);
    stn(ax, carried, m);
    stn(h, hprev(d, t, m), m);
  }
};

// LSTM rows [n0, n1): accumulator groups i,f,g,o, fed by x_t and h_{t-1}. kPeep: w_peep's
// diagonal cell-to-gate terms (i and f see c_{t-1}, o the new c).
template <bool kHard, bool kPeep>
void lstm_forward_rows(const RnnParams& p, const Dims& d, int64_t n0, int64_t n1, const float* x,
                       const uint8_t* mask, const float* px, const float* ph, const float* pb, const float* w_peep,
                       float* h_seq) {
  const Gate gt(p.gate_act);
  const int64_t S = d.S, H = d.H;
  for (int64_t t = 0; t < S; ++t)
    for (int64_t u = 0; u < d.UB; ++u) {
      const int m = d.lanes(u);
      const float* bias = pb + u * 4 * kL;
      fwd_tiles<4, 4, 0>(d, n0, n1, t, u, x, h_seq, px, ph, [&](auto mr, int64_t n, v16(&acc)[kMR][kNB]) {
        constexpr int MR = decltype(mr)::value;
        // The gates of all MR rows one gate at a time, then the state row by row: short
        // independent chains, which the CPU overlaps (one row's gates in a row are a chain of
        // ~200 dependent operations).
        v16 y[kMR][4], cp[kMR];
        for (int r = 0; r < MR; ++r) cp[r] = t > 0 ? ldn(d.aux + d.wrow(n + r, t - 1) * H + u * kL, m) : v16{};
        for (int j : {0, 1, 3}) {
          if (kPeep && j == 3) break;  // o waits for the new c
          const v16 bj = ld(bias + j * kL);
          const v16 wc = kPeep ? ldn(w_peep + j * H + u * kL, m) : v16{};
          for (int r = 0; r < MR; ++r) {
            acc[r][j] = acc[r][j] + bj;
            if (kPeep) acc[r][j] = acc[r][j] + wc * cp[r];
            y[r][j] = gate<kHard>(gt, acc[r][j]);
          }
        }
        const v16 b2 = ld(bias + 2 * kL);
        for (int r = 0; r < MR; ++r) y[r][2] = vtanh(acc[r][2] + b2);
        const v16 b3 = ld(bias + 3 * kL), wco = kPeep ? ldn(w_peep + 2 * H + u * kL, m) : v16{};
#pragma GCC unroll 1
        for (int r = 0; r < MR; ++r) {
          const RowAt w(d, h_seq, n + r, t, u);
          if (mask && !mask[w.row]) {  // padding: h and c carry over, the gate rows are zero
            w.pad(d, t, m, cp[r]);
            continue;
          }
          const v16 i = y[r][0], f = y[r][1], g = y[r][2];
          const v16 cv = f * cp[r] + i * g;
          if (kPeep) acc[r][3] = (acc[r][3] + b3) + wco * cv;
          const v16 o = kPeep ? gate<kHard>(gt, acc[r][3]) : y[r][3];
          if (kHard) stn(w.a, acc[r][0], m), stn(w.a + H, acc[r][1], m), stn(w.a + 3 * H, acc[r][3], m);
          stn(w.y, i, m), stn(w.y + H, f, m), stn(w.y + 2 * H, g, m), stn(w.y + 3 * H, o, m);
          stn(w.ax, cv, m);
          const v16 tc = vtanh(cv);
          stn(w.a + 2 * H, tc, m);  // tanh(c) for the backward, in the g gate's pre slot, which it never reads
          stn(w.h, o * tc, m);
        }
      });
    }
}

// The GRU's new state from z, n and h_{t-1}.
template <bool kKeepsOld>
inline v16 gru_state(v16 z, v16 n, v16 hp) {
  return kKeepsOld ? z * hp + (1.0f - z) * n : (1.0f - z) * hp + z * n;
}

// Reset-after GRU rows: accumulator groups n_in (x only), r, z (x and h), n_rec (h only).
template <bool kHard, bool kKeepsOld>
void gru_after_forward_rows(const RnnParams& p, const Dims& d, int64_t n0, int64_t n1, const float* x,
                            const uint8_t* mask, const float* px, const float* ph, const float* pb,
                            float* h_seq) {
  const Gate gt(p.gate_act);
  const int64_t S = d.S, H = d.H;
  for (int64_t t = 0; t < S; ++t)
    for (int64_t u = 0; u < d.UB; ++u) {
      const int m = d.lanes(u);
      const float* bias = pb + u * 4 * kL;
      fwd_tiles<3, 3, 1>(d, n0, n1, t, u, x, h_seq, px, ph, [&](auto mr, int64_t n, v16(&acc)[kMR][kNB]) {
        constexpr int MR = decltype(mr)::value;
#pragma GCC unroll 1
        for (int r = 0; r < MR; ++r) {
          const RowAt w(d, h_seq, n + r, t, u);
          if (mask && !mask[w.row]) {
            w.pad(d, t, m, v16{});
            continue;
          }
          const v16 ar = acc[r][1] + ld(bias + kL), az = acc[r][2] + ld(bias + 2 * kL);
          const v16 rn = acc[r][3] + ld(bias + 3 * kL);
          const v16 rv = gate<kHard>(gt, ar), zv = gate<kHard>(gt, az);
          const v16 an = (acc[r][0] + ld(bias)) + rv * rn;
          const v16 nv = vtanh(an);
          if (kHard) stn(w.a, ar, m), stn(w.a + H, az, m);  // the sigmoid's derivative needs only y
          stn(w.y, rv, m), stn(w.y + H, zv, m), stn(w.y + 2 * H, nv, m);
          stn(w.ax, rn, m);
          stn(w.h, gru_state<kKeepsOld>(zv, nv, w.hprev(d, t, m)), m);
        }
      });
    }
}

// Reset-before GRU rows, two passes per step: groups n_in, r, z first (r*h_{t-1} into rh),
// then the n_rec tile (r*h) W_hn^T for the candidate and the new state.
template <bool kHard, bool kKeepsOld>
void gru_before_forward_rows(const RnnParams& p, const Dims& d, int64_t n0, int64_t n1, const float* x,
                             const uint8_t* mask, const float* px, const float* ph, const float* pn,
                             const float* pb, const float* pbn, float* rh, float* h_seq) {
  const Gate gt(p.gate_act);
  const int64_t S = d.S, H = d.H;
  for (int64_t t = 0; t < S; ++t) {
    for (int64_t u = 0; u < d.UB; ++u) {
      const int m = d.lanes(u);
      const float* bias = pb + u * 3 * kL;
      fwd_tiles<3, 2, 1>(d, n0, n1, t, u, x, h_seq, px, ph, [&](auto mr, int64_t n, v16(&acc)[kMR][kNB]) {
        constexpr int MR = decltype(mr)::value;
#pragma GCC unroll 1
        for (int r = 0; r < MR; ++r) {
          const RowAt w(d, h_seq, n + r, t, u);
          float* rhr = rh + (n + r) * H + u * kL;
          if (mask && !mask[w.row]) {
            w.pad(d, t, m, v16{});
            stn(rhr, v16{}, m);
            continue;
          }
          const v16 ar = acc[r][1] + ld(bias + kL), az = acc[r][2] + ld(bias + 2 * kL);
          const v16 rv = gate<kHard>(gt, ar);
          if (kHard) stn(w.a, ar, m), stn(w.a + H, az, m);
          stn(w.a + 2 * H, acc[r][0] + ld(bias), m);  // n: its x part so far, for the second pass
          stn(w.y, rv, m), stn(w.y + H, gate<kHard>(gt, az), m);
          stn(rhr, rv * w.hprev(d, t, m), m);
        }
      });
    }
    // kNB unit blocks per tile: one broadcast of r*h feeds kNB accumulators (one block per tile
    // left the pass bound by its loads: reset-before GRU inference ran ~19% slower than
    // reset-after's). Each output's sum over k is the same either way (madd_core).
    for (int64_t q = 0; q * kNB < d.UB; ++q) {
      for_row_blocks(n0, n1, [&](auto mr, int64_t n) {
        constexpr int MR = decltype(mr)::value;
        v16 acc[kMR][kNB];
        tile_madd<MR, kNB, 0, true>(acc, rh + n * H, H, H, pn + q * H * kNB * kL);
        for (int j = 0; j < kNB && q * kNB + j < d.UB; ++j) {
          const int64_t u = q * kNB + j;
          const int m = d.lanes(u);
          const v16 bhn = ld(pbn + u * kL);
#pragma GCC unroll 1
          for (int r = 0; r < MR; ++r) {
            const RowAt w(d, h_seq, n + r, t, u);
            if (mask && !mask[w.row]) continue;
            const v16 rn = acc[r][j] + bhn;
            const v16 an = ldn(w.a + 2 * H, m) + rn;
            const v16 nv = vtanh(an);
            stn(w.a + 2 * H, an, m);
            stn(w.y + 2 * H, nv, m);
            stn(w.ax, rn, m);
            stn(w.h, gru_state<kKeepsOld>(ldn(w.y + H, m), nv, w.hprev(d, t, m)), m);
          }
        }
      });
    }
  }
}

// Gate g's rows of w (K columns each) in panels of kNB unit blocks for the reset-before GRU's
// second pass: panel q holds K x (kNB*16), column c being row g*H + q*kNB*16 + c of w (zero past H).
std::vector<float> pack_gate_block_panels(const float* w, int64_t K, int64_t H, int64_t g) {
  const int64_t W = kNB * kL, Q = (H + W - 1) / W;
  std::vector<float> p(static_cast<std::size_t>(Q * K * W), 0.0f);
  for (int64_t q = 0; q < Q; ++q)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < W && q * W + c < H; ++c)
        p[static_cast<std::size_t>((q * K + k) * W + c)] = w[(g * H + q * W + c) * K + k];
  return p;
}

void rnn_forward_fast(const RnnParams& p, const RnnExec& ex, const float* x, const uint8_t* mask,
                      const RnnWeights<float>& w, float* h_seq, float* ws) {
  check_rnn_params(p);
  const float *w_ih = w.w_ih, *w_hh = w.w_hh, *b_ih = w.b_ih, *b_hh = w.b_hh;
  RnnParams one_step = p;  // inference: a workspace of one step, reused
  one_step.steps = 1;
  Scratch step_ws(ws ? 0 : rnn_workspace_size(one_step));
  const Dims d(p, ws ? ws : step_ws.data(), ws != nullptr);
  const int64_t F = d.F, H = d.H;
  const bool hard = p.gate_act.kind == ActKind::hard_sigmoid;
  if (p.cell == RnnCell::lstm) {
    const std::vector<float> px = pack_gate_panels(w_ih, F, H, {0, 1, 2, 3});
    const std::vector<float> ph = pack_gate_panels(w_hh, H, H, {0, 1, 2, 3});
    const std::vector<float> pb = pack_bias(b_ih, b_hh, H, {{0, 3}, {1, 3}, {2, 3}, {3, 3}});
    for_thread_rows(d.N, ex.threads, [&](int64_t n0, int64_t n1) {
      const auto run = p.peepholes ? (hard ? lstm_forward_rows<true, true> : lstm_forward_rows<false, true>)
                                   : (hard ? lstm_forward_rows<true, false> : lstm_forward_rows<false, false>);
      run(p, d, n0, n1, x, mask, px.data(), ph.data(), pb.data(), w.w_peep, h_seq);
    });
  } else if (p.gru_reset_after) {
    const std::vector<float> px = pack_gate_panels(w_ih, F, H, {2, 0, 1});
    const std::vector<float> ph = pack_gate_panels(w_hh, H, H, {0, 1, 2});
    const std::vector<float> pb = pack_bias(b_ih, b_hh, H, {{2, 1}, {0, 3}, {1, 3}, {2, 2}});
    const auto run = hard ? (p.gru_z_keeps_old ? gru_after_forward_rows<true, true> : gru_after_forward_rows<true, false>)
                          : (p.gru_z_keeps_old ? gru_after_forward_rows<false, true>
                                               : gru_after_forward_rows<false, false>);
    for_thread_rows(d.N, ex.threads, [&](int64_t n0, int64_t n1) {
      run(p, d, n0, n1, x, mask, px.data(), ph.data(), pb.data(), h_seq);
    });
  } else {
    const std::vector<float> px = pack_gate_panels(w_ih, F, H, {2, 0, 1});
    const std::vector<float> ph = pack_gate_panels(w_hh, H, H, {0, 1});
    const std::vector<float> pn = pack_gate_block_panels(w_hh, H, H, 2);
    const std::vector<float> pb = pack_bias(b_ih, b_hh, H, {{2, 1}, {0, 3}, {1, 3}});
    const std::vector<float> pbn = pack_bias(b_ih, b_hh, H, {{2, 2}});
    std::vector<float> rh(static_cast<std::size_t>(d.N * H));
    const auto run = hard ? (p.gru_z_keeps_old ? gru_before_forward_rows<true, true>
                                               : gru_before_forward_rows<true, false>)
                          : (p.gru_z_keeps_old ? gru_before_forward_rows<false, true>
                                               : gru_before_forward_rows<false, false>);
    for_thread_rows(d.N, ex.threads, [&](int64_t n0, int64_t n1) {
      run(p, d, n0, n1, x, mask, px.data(), ph.data(), pn.data(), pb.data(), pbn.data(), rh.data(), h_seq);
    });
  }
}

}  // namespace
}  // namespace rnn_fast

void register_rnn_fast(KernelRegistry& reg) {
  RnnKernel k;
  k.name = "fast";  // register-tiled products and the cell math fused; calls no GEMM
  k.supports_doc = "every params field but a tf32 math mode, autocast and an initial state, float32";
  k.supports = [](const RnnParams& p, DType dt) {
    // both hard-sigmoid forms (slope*x + offset, and PyTorch's divide form) are vectorised (Gate)
    return dt == DType::f32 && p.math == MathMode::float32 && p.autocast == MathMode::float32 && !p.initial_state;
  };
  k.forward_f32 = rnn_fast::rnn_forward_fast;
  rnn_fast::register_rnn_fast_backward(k);
  reg.rnn.at(KernelBackend::fast) = k;
}

}  // namespace driftlab
