// Fast LSTM/GRU kernels: the backward through time. The design and the shared pieces:
// kernels/cpu/fast/rnn_fast_tiles.h; the forward: rnn_fast.cpp.
#include "kernels/cpu/fast/rnn_fast_tiles.h"

namespace driftlab {
namespace rnn_fast {
namespace {

// ---- backward ----
// The batch runs in chunks of kChunk rows (samples), whole chunks per thread, each chunk through
// all the steps from the last. Per step: the chunk's gate gradients (one step of them, kept in a
// two-step ring: L1/L2), then at once their products with the step's inputs added into the
// chunk's own weight-gradient sums (tile_update, transposed: columns x gates) and, where dx is
// wanted, dx = dgin W_ih for the step's rows. At the end the chunks' sums are added in chunk
// order. The chunk size is fixed, so every sum has the same terms in the same order whatever the
// thread count. Nothing of size N*T is written: the gate gradients of all steps (7.3 MB for the
// benchmark LSTM at B-128) went to memory and back for one GEMM after the loop before.
// Per row, `carry` holds the gradient reaching h_{t-1} by paths other than W_hh (the GRU's
// z*h term, r*h's r factor, a padded step's pass-through), `dcarry` the LSTM's dc_{t+1}*f.
// The tile of step t is dgrec_{t+1} W_hh (zero at the last step): panels of 64 units.
constexpr int64_t kChunk = 32;

struct Bwd {
  const Dims& d;
  const float* dh;      // dh_seq, batch-major (row n*S + t), or h_T's only (row n)
  bool dh_last;
  const float* h_seq;   // batch-major
  const uint8_t* mask;  // batch-major
  float *carry, *dcarry;
  const float* w_peep;  // LSTM peepholes (null without)
  // h_{t-1} of sample n (zero at t = 0).
  v16 hprev(int64_t n, int64_t t, int64_t u, int m) const {
    return t > 0 ? ldn(h_seq + (n * d.S + t - 1) * d.H + u * kL, m) : v16{};
  }
  bool padded(int64_t row) const { return mask && !mask[row]; }
  // The loss gradient reaching h_t of sample n from the layer's output.
  v16 dh_out(int64_t n, int64_t t, int64_t u, int m) const {
    if (dh_last) return t == d.S - 1 ? ldn(dh + n * d.H + u * kL, m) : v16{};
    return ldn(dh + (n * d.S + t) * d.H + u * kL, m);
  }
};

// One step's gate gradients of a chunk's rows [n0, n1): row n at g + (n - n0) * gs.
struct StepRows {
  float* g;
  int64_t n0, gs;
  float* row(int64_t n) const { return g + (n - n0) * gs; }
};

// Runs epi(r, q, u) for each row r < MR and each unit block u = P*4+q < UB of panel P, after
// the tile acc = a-rows x panel (a: rows [n0, n1) at stride sa; K terms; K = 0 leaves it zero).
template <typename Epi>
void bwd_tiles(const Dims& d, int64_t n0, int64_t n1, const float* a, int64_t sa, int64_t K, const float* panels,
               Epi&& epi) {
  const int64_t PU = (d.H + kNB * kL - 1) / (kNB * kL);
  for (int64_t P = 0; P < PU; ++P)
    for_row_blocks(n0, n1, [&](auto mr, int64_t n) {
      constexpr int MR = decltype(mr)::value;
      v16 acc[kMR][kNB];
      tile_madd<MR, 4, 0, true>(acc, a + (n - n0) * sa, sa, K, panels + P * K * kNB * kL);  // K = 0: zero
#pragma GCC unroll 1
      for (int r = 0; r < MR; ++r)
        for (int q = 0; q < kNB && P * kNB + q < d.UB; ++q) epi(n + r, acc[r][q], P * kNB + q);
    });
}

// Step t of an LSTM chunk: next = dg_{t+1} (null at the last step), cur = dg_t. dwp: the chunk's
// peephole-gradient sums (rows i, f, o of Hp floats; used only with kPeep).
template <bool kHard, bool kInclusive, bool kPeep>
void lstm_backward_step(const RnnParams& p, const Bwd& b, int64_t n0, int64_t n1, int64_t t, const float* pw,
                        const float* next, StepRows cur, float* dwp, int64_t Hp) {
  const Gate gt(p.gate_act);
  const Dims& d = b.d;
  const int64_t S = d.S, H = d.H, GH = d.GH;
  bwd_tiles(d, n0, n1, next ? next : cur.g, cur.gs, next ? GH : 0, pw, [&](int64_t n, v16 rec, int64_t u) {
    const int m = d.lanes(u);
    const int64_t row = n * S + t, o = d.wrow(n, t) * GH + u * kL, hu = n * H + u * kL;
    const v16 dh = rec + b.dh_out(n, t, u, m) + ldn(b.carry + hu, m);
    float* g = cur.row(n) + u * kL;
    if (b.padded(row)) {  // h_t = h_{t-1}, c_t = c_{t-1}: dh and dc pass through
      for (int q = 0; q < 4; ++q) stn(g + q * H, v16{}, m);
      stn(b.carry + hu, dh, m);
      return;
    }
    const float* y = d.act + o;
    const float* a = d.pre + o;
    const v16 i = ldn(y, m), f = ldn(y + H, m), gv = ldn(y + 2 * H, m), ov = ldn(y + 3 * H, m);
    const v16 ai = kHard ? ldn(a, m) : v16{}, af = kHard ? ldn(a + H, m) : v16{},
              ao = kHard ? ldn(a + 3 * H, m) : v16{};
    const v16 cp = t > 0 ? ldn(d.aux + d.wrow(n, t - 1) * H + u * kL, m) : v16{};
    const v16 tc = ldn(a + 2 * H, m);  // tanh(c_t), kept by the forward
    const v16 dout = dh * tc * gate_grad<kHard, kInclusive>(gt, ao, ov);
    v16 dc = dh * ov * (1.0f - tc * tc) + ldn(b.dcarry + hu, m);
    if (kPeep) dc = dc + dout * ldn(b.w_peep + 2 * H + u * kL, m);  // through o's peephole
    const v16 di = dc * gv * gate_grad<kHard, kInclusive>(gt, ai, i);
    const v16 df = dc * cp * gate_grad<kHard, kInclusive>(gt, af, f);
    stn(g, di, m);
    stn(g + H, df, m);
    stn(g + 2 * H, dc * i * (1.0f - gv * gv), m);
    stn(g + 3 * H, dout, m);
    v16 dcn = dc * f;
    if (kPeep) {
      dcn = dcn + (di * ldn(b.w_peep + u * kL, m) + df * ldn(b.w_peep + H + u * kL, m));
      // dw_c* += the gate's gradient x the c it saw: c_{t-1} for i and f, c_t for o (lanes past
      // H are zero: the panels are)
      float* s = dwp + u * kL;
      st(s, ld(s) + di * cp);
      st(s + Hp, ld(s + Hp) + df * cp);
      st(s + 2 * Hp, ld(s + 2 * Hp) + dout * ldn(d.aux + d.wrow(n, t) * H + u * kL, m));
    }
    stn(b.dcarry + hu, dcn, m);
    stn(b.carry + hu, v16{}, m);
  });
}

// dz, dn and the direct path to h_{t-1} of the GRU's state update.
template <bool kKeepsOld>
inline void gru_state_grad(v16 dh, v16 z, v16 n, v16 hp, v16& dz, v16& dn, v16& direct) {
  dz = kKeepsOld ? dh * (hp - n) : dh * (n - hp);
  dn = kKeepsOld ? dh * (1.0f - z) : dh * z;
  direct = kKeepsOld ? dh * z : dh * (1.0f - z);
}

// Step t of a reset-after GRU chunk: gin = [dar, daz, dan], grec = [dar, daz, dan*r]; next is
// grec of step t+1.
template <bool kHard, bool kInclusive, bool kKeepsOld>
void gru_after_backward_step(const RnnParams& p, const Bwd& b, int64_t n0, int64_t n1, int64_t t, const float* pw,
                             const float* next, StepRows gin, StepRows grec) {
  const Gate gt(p.gate_act);
  const Dims& d = b.d;
  const int64_t S = d.S, H = d.H, GH = d.GH;
  bwd_tiles(d, n0, n1, next ? next : grec.g, grec.gs, next ? GH : 0, pw, [&](int64_t n, v16 rec, int64_t u) {
    const int m = d.lanes(u);
    const int64_t row = n * S + t, wr = d.wrow(n, t), o = wr * GH + u * kL, hu = n * H + u * kL;
    const v16 dh = rec + b.dh_out(n, t, u, m) + ldn(b.carry + hu, m);
    float* gi = gin.row(n) + u * kL;
    float* gr = grec.row(n) + u * kL;
    if (b.padded(row)) {
      for (int q = 0; q < 3; ++q) stn(gi + q * H, v16{}, m), stn(gr + q * H, v16{}, m);
      stn(b.carry + hu, dh, m);
      return;
    }
    const float* y = d.act + o;
    const v16 rv = ldn(y, m), zv = ldn(y + H, m), nv = ldn(y + 2 * H, m);
    const v16 ar = kHard ? ldn(d.pre + o, m) : v16{}, az = kHard ? ldn(d.pre + o + H, m) : v16{};
    v16 dz, dn, direct;
    gru_state_grad<kKeepsOld>(dh, zv, nv, b.hprev(n, t, u, m), dz, dn, direct);
    const v16 dan = dn * (1.0f - nv * nv);
    const v16 daz = dz * gate_grad<kHard, kInclusive>(gt, az, zv);
    const v16 dar = dan * ldn(d.aux + wr * H + u * kL, m) * gate_grad<kHard, kInclusive>(gt, ar, rv);
    stn(gi, dar, m), stn(gi + H, daz, m), stn(gi + 2 * H, dan, m);
    stn(gr, dar, m), stn(gr + H, daz, m), stn(gr + 2 * H, dan * rv, m);
    stn(b.carry + hu, direct, m);
  });
}

// Step t of a reset-before GRU chunk (dgin = dgrec = cur): the r,z rows' tile first (z and n
// gradients), then the tile d(r*h) = dan W_hn for r's gradient and r*h's path to h_{t-1}.
template <bool kHard, bool kInclusive, bool kKeepsOld>
void gru_before_backward_step(const RnnParams& p, const Bwd& b, int64_t n0, int64_t n1, int64_t t, const float* pw,
                              const float* pn, const float* next, StepRows cur) {
  const Gate gt(p.gate_act);
  const Dims& d = b.d;
  const int64_t S = d.S, H = d.H, GH = d.GH;
  bwd_tiles(d, n0, n1, next ? next : cur.g, cur.gs, next ? 2 * H : 0, pw, [&](int64_t n, v16 rec, int64_t u) {
    const int m = d.lanes(u);
    const int64_t row = n * S + t, o = d.wrow(n, t) * GH + u * kL, hu = n * H + u * kL;
    const v16 dh = rec + b.dh_out(n, t, u, m) + ldn(b.carry + hu, m);
    float* g = cur.row(n) + u * kL;
    if (b.padded(row)) {
      for (int q = 0; q < 3; ++q) stn(g + q * H, v16{}, m);
      stn(b.carry + hu, dh, m);
      return;
    }
    const float* y = d.act + o;
    const v16 zv = ldn(y + H, m), nv = ldn(y + 2 * H, m);
    const v16 az = kHard ? ldn(d.pre + o + H, m) : v16{};
    v16 dz, dn, direct;
    gru_state_grad<kKeepsOld>(dh, zv, nv, b.hprev(n, t, u, m), dz, dn, direct);
    stn(g + H, dz * gate_grad<kHard, kInclusive>(gt, az, zv), m);
    stn(g + 2 * H, dn * (1.0f - nv * nv), m);
    stn(b.carry + hu, direct, m);
  });
  bwd_tiles(d, n0, n1, cur.g + 2 * H, cur.gs, H, pn, [&](int64_t n, v16 drh, int64_t u) {
    const int m = d.lanes(u);
    const int64_t row = n * S + t, o = d.wrow(n, t) * GH + u * kL, hu = n * H + u * kL;
    if (b.padded(row)) return;  // its gate gradients are zero, dh passed through
    const v16 rv = ldn(d.act + o, m);
    const v16 ar = kHard ? ldn(d.pre + o, m) : v16{};
    stn(cur.row(n) + u * kL, drh * b.hprev(n, t, u, m) * gate_grad<kHard, kInclusive>(gt, ar, rv), m);
    stn(b.carry + hu, ldn(b.carry + hu, m) + drh * rv, m);
  });
}

// The instantiation for the run-time gate kind, edge rule (hard sigmoid only), peepholes and
// update rule.
template <bool kPeep>
auto pick_lstm(bool hard, bool inclusive) {
  return !hard ? lstm_backward_step<false, false, kPeep>
               : (inclusive ? lstm_backward_step<true, true, kPeep> : lstm_backward_step<true, false, kPeep>);
}
template <bool kKeepsOld>
auto pick_gru_after(bool hard, bool inclusive) {
  return !hard ? gru_after_backward_step<false, false, kKeepsOld>
               : (inclusive ? gru_after_backward_step<true, true, kKeepsOld>
                            : gru_after_backward_step<true, false, kKeepsOld>);
}
template <bool kKeepsOld>
auto pick_gru_before(bool hard, bool inclusive) {
  return !hard ? gru_before_backward_step<false, false, kKeepsOld>
               : (inclusive ? gru_before_backward_step<true, true, kKeepsOld>
                            : gru_before_backward_step<true, false, kKeepsOld>);
}

// sum (cols x wp: a weight gradient's transpose, gate columns padded to whole vectors) +=
// in^T g over K rows: in is K x cols (row stride cols), g the K rows' gate gradients from the
// product's first gate column (row stride gs; readable up to wp columns).
void add_product(float* sum, int64_t cols, int64_t wp, const float* in, int64_t K, const float* g, int64_t gs) {
  for (int64_t P = 0; P * kNB * kL < wp; ++P) {
    const int64_t nb = std::min<int64_t>(kNB, (wp - P * kNB * kL) / kL);
    float* s = sum + P * kNB * kL;
    const float* gp = g + P * kNB * kL;
    for_row_blocks(0, cols, [&](auto mr, int64_t c) {
      constexpr int MR = decltype(mr)::value;
      switch (nb) {
        case 4: tile_update<MR, 4>(s + c * wp, wp, in + c, cols, K, gp, gs); break;
        case 3: tile_update<MR, 3>(s + c * wp, wp, in + c, cols, K, gp, gs); break;
        case 2: tile_update<MR, 2>(s + c * wp, wp, in + c, cols, K, gp, gs); break;
        default: tile_update<MR, 1>(s + c * wp, wp, in + c, cols, K, gp, gs); break;
      }
    });
  }
}

// dx of the rows [n0, n1) at step t = their input-gate gradients g (row stride gs) x W_ih, from
// W_ih packed in panels of 64 input columns (pwih); written into dx's batch-major rows.
void dx_step(const Dims& d, int64_t n0, int64_t n1, int64_t t, const float* g, int64_t gs, const float* pwih,
             float* dx) {
  const int64_t F = d.F, PF = (F + kNB * kL - 1) / (kNB * kL);
  for (int64_t P = 0; P < PF; ++P)
    for_row_blocks(n0, n1, [&](auto mr, int64_t n) {
      constexpr int MR = decltype(mr)::value;
      v16 acc[kMR][kNB];
      tile_madd<MR, 4, 0, true>(acc, g + (n - n0) * gs, gs, d.GH, pwih + P * d.GH * kNB * kL);
      for (int r = 0; r < MR; ++r)
        for (int q = 0; q < kNB && (P * kNB + q) * kL < F; ++q) {
          const int64_t col = (P * kNB + q) * kL;
          stn(dx + ((n + r) * d.S + t) * F + col, acc[r][q], static_cast<int>(std::min<int64_t>(kL, F - col)));
        }
    });
}

void rnn_backward_fast(const RnnParams& p, const RnnExec& ex, const float* x, const uint8_t* mask,
                       const RnnWeights<float>& w, const float* h_seq, const float* ws, const float* dh_seq,
                       float* dx, const RnnGrads<float>& gr) {
  check_rnn_params(p);
  check(ws != nullptr, rnn_cell_name(p.cell), " backward: no workspace (the forward ran without one)");
  const Dims d(p, const_cast<float*>(ws), true);  // read only here
  const int64_t N = d.N, S = d.S, F = d.F, H = d.H, GH = d.GH, Hp = d.UB * kL;
  const bool lstm = p.cell == RnnCell::lstm, gru_before = p.cell == RnnCell::gru && !p.gru_reset_after;
  const bool hard = p.gate_act.kind == ActKind::hard_sigmoid, inclusive = p.gate_act.hs_grad_edges_inclusive;
  // dgin: the gradient of the input pre-activation x W_ih^T + b_ih; dgrec: of the recurrent
  // one. They differ only in a reset-after GRU's n block, so the others share one array.
  const bool two = p.cell == RnnCell::gru && p.gru_reset_after;
  // Gate-gradient row stride: a product's last vector may read up to 15 columns past its gates.
  const int64_t GS = (GH + kL - 1) / kL * kL + kL;

  // The weight-gradient products: the sum over (step, sample) rows of in^T dg[:, a0 : a0+width],
  // `in` being `cols` inputs per row packed per step, with a column of ones whose sums are the
  // bias gradients (one pass over the gate gradients gives weights and biases). LSTM: dgin
  // against [x | h_{t-1} | 1]; reset-after GRU: dgin against [x | 1], dgrec against
  // [h_{t-1} | 1]; reset-before GRU: dg against [x | 1], its r,z columns against h_{t-1} and its
  // n columns against r*h_{t-1}. Each part sends input columns [col, col+width) to a gradient
  // (rows: the product's gates, row length width).
  enum class In { x_h_1, x_1, h_1, h, rh };
  struct Part {
    int64_t col, width;
    float* dst;
  };
  struct Product {
    bool rec;  // dgrec (else dgin)
    int64_t a0, width;
    In in;
    int64_t cols;
    std::vector<Part> parts;
    int64_t wp = 0, offset = 0;  // padded gate columns; place in a chunk's sums
  };
  std::vector<Product> prods;
  auto with_hh = [&](std::vector<Part> parts, int64_t col) {
    if (gr.db_hh) parts.push_back({col, 1, gr.db_hh});
    return parts;
  };
  if (lstm) {
    prods.push_back({false, 0, GH, In::x_h_1, F + H + 1,
                     with_hh({{0, F, gr.dw_ih}, {F, H, gr.dw_hh}, {F + H, 1, gr.db_ih}}, F + H)});
  } else if (two) {
    prods.push_back({false, 0, GH, In::x_1, F + 1, {{0, F, gr.dw_ih}, {F, 1, gr.db_ih}}});
    prods.push_back({true, 0, GH, In::h_1, H + 1, with_hh({{0, H, gr.dw_hh}}, H)});
  } else {
    prods.push_back({false, 0, GH, In::x_1, F + 1, with_hh({{0, F, gr.dw_ih}, {F, 1, gr.db_ih}}, F)});
    prods.push_back({false, 0, 2 * H, In::h, H, {{0, H, gr.dw_hh}}});
    prods.push_back({false, 2 * H, H, In::rh, H, {{0, H, gr.dw_hh + 2 * H * H}}});
  }
  int64_t PB = 0, max_cols = 0;  // sums per chunk; widest input row
  for (Product& q : prods) {
    q.wp = (q.width + kL - 1) / kL * kL;
    q.offset = PB;
    PB += q.cols * q.wp;
    max_cols = std::max(max_cols, q.cols);
  }
  const int64_t PP = p.peepholes ? 3 * Hp : 0;  // the chunk's peephole sums, after its products'
  const int64_t NC = (N + kChunk - 1) / kChunk, CS = PB + PP;
  Scratch sums(NC * CS);

  // The step's inputs of rows [n0, n1) for a product, row r at out + r*cols.
  auto pack = [&](In in, int64_t cols, int64_t n0, int64_t n1, int64_t t, float* out) {
    for (int64_t n = n0; n < n1; ++n) {
      float* o = out + (n - n0) * cols;
      const float* xr = x + (n * S + t) * F;
      const float* hr = t > 0 ? h_seq + (n * S + t - 1) * H : nullptr;
      if (in == In::x_h_1 || in == In::x_1) {
        std::memcpy(o, xr, static_cast<std::size_t>(F) * sizeof(float));
        o += F;
      }
      if (in == In::rh) {
        const float* r = d.act + d.wrow(n, t) * GH;  // the reset gate, first in the GRU's act row
        for (int64_t k = 0; k < H; ++k) o[k] = hr ? r[k] * hr[k] : 0.0f;
      } else if (in != In::x_1) {
        if (hr) std::memcpy(o, hr, static_cast<std::size_t>(H) * sizeof(float));
        else std::fill(o, o + H, 0.0f);
        o += H;
      }
      if (in == In::x_h_1 || in == In::x_1 || in == In::h_1) *o = 1.0f;
    }
  };

  std::vector<float> carry(static_cast<std::size_t>(N * H), 0.0f), dcarry(carry.size(), 0.0f);
  const Bwd b{d, dh_seq, p.dh_last_step, h_seq, mask, carry.data(), dcarry.data(), w.w_peep};
  const int64_t mm = gru_before ? 2 * H : GH;  // the W_hh rows multiplying h_{t-1} itself
  const std::vector<float> pw = pack_unit_panels(w.w_hh, 0, mm, H);
  const std::vector<float> pn = gru_before ? pack_unit_panels(w.w_hh, 2 * H, H, H) : std::vector<float>();
  const std::vector<float> pwih = dx ? pack_unit_panels(w.w_ih, 0, GH, F) : std::vector<float>();
  const auto run_lstm = p.peepholes ? pick_lstm<true>(hard, inclusive) : pick_lstm<false>(hard, inclusive);
  const auto run_after =
      p.gru_z_keeps_old ? pick_gru_after<true>(hard, inclusive) : pick_gru_after<false>(hard, inclusive);
  const auto run_before =
      p.gru_z_keeps_old ? pick_gru_before<true>(hard, inclusive) : pick_gru_before<false>(hard, inclusive);
  // Per thread: the gate gradients of two steps (the recurrence reads step t+1's while writing
  // step t's), as [dgin: step parity 0 | parity 1][dgrec: the same] with each array's two steps
  // adjacent, so that the weight-gradient products take both steps in one tile pass (K = 2 x
  // rows: half the accumulator loads and stores of one pass per step), and their packed inputs.
  const int64_t arrays = two ? 2 : 1;
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(ex.threads, NC));
#pragma omp parallel for num_threads(static_cast<int>(parts)) schedule(static, 1)
  for (int64_t th = 0; th < parts; ++th) {
    Scratch buf(2 * arrays * kChunk * GS + 2 * kChunk * max_cols);
    float* ring = buf.data();
    float* packed = ring + 2 * arrays * kChunk * GS;
    std::fill(ring, packed, 0.0f);  // columns past GH: read into unused lanes only
    for (int64_t c = NC * th / parts; c < NC * (th + 1) / parts; ++c) {
      const int64_t n0 = c * kChunk, n1 = std::min(N, n0 + kChunk), rows = n1 - n0, HS = rows * GS;
      float* sum = sums.data() + c * CS;
      std::fill(sum, sum + CS, 0.0f);
      for (int64_t t = S - 1; t >= 0; --t) {
        float* gin = ring + (t & 1) * HS;
        float* grec = gin + (arrays - 1) * 2 * HS;
        const float* next = t + 1 < S ? ring + ((t + 1) & 1) * HS + (arrays - 1) * 2 * HS : nullptr;
        if (lstm) run_lstm(p, b, n0, n1, t, pw.data(), next, {gin, n0, GS}, sum + PB, Hp);
        else if (two) run_after(p, b, n0, n1, t, pw.data(), next, {gin, n0, GS}, {grec, n0, GS});
        else run_before(p, b, n0, n1, t, pw.data(), pn.data(), next, {gin, n0, GS});
        if (dx) dx_step(d, n0, n1, t, gin, GS, pwih.data(), dx);
        // Steps t and t+1 (or t = 0 alone when S is odd): parity 0's rows first, as stored.
        const bool pair = (S - 1 - t) % 2 == 1;
        if (!pair && t > 0) continue;
        const int64_t first = pair ? 0 : (t & 1), steps = pair ? 2 : 1;
        for (const Product& q : prods) {
          for (int64_t h = first; h < first + steps; ++h)
            pack(q.in, q.cols, n0, n1, pair ? ((t & 1) == h ? t : t + 1) : t, packed + (h - first) * rows * q.cols);
          const float* g = ring + (q.rec ? 2 * HS : 0) + first * HS + q.a0;
          add_product(sum + q.offset, q.cols, q.wp, packed, steps * rows, g, GS);
        }
      }
    }
  }

  // The chunks' sums added in chunk order, transposed into the gradients (+=).
  for (const Product& q : prods) {
#pragma omp parallel for num_threads(ex.threads) schedule(static)
    for (int64_t col = 0; col < q.cols; ++col)
      for (int64_t g = 0; g < q.width; ++g) {
        float s = 0.0f;
        for (int64_t c = 0; c < NC; ++c) s += sums.data()[c * CS + q.offset + col * q.wp + g];
        for (const Part& pt : q.parts)
          if (col >= pt.col && col < pt.col + pt.width) pt.dst[g * pt.width + col - pt.col] += s;
      }
  }
  if (p.peepholes)
    for (int64_t q = 0; q < 3; ++q)
      for (int64_t j = 0; j < H; ++j) {
        float s = 0.0f;
        for (int64_t c = 0; c < NC; ++c) s += sums.data()[c * CS + PB + q * Hp + j];
        gr.dw_peep[q * H + j] += s;
      }
}


}  // namespace

void register_rnn_fast_backward(RnnKernel& k) { k.backward_f32 = rnn_backward_fast; }

}  // namespace rnn_fast
}  // namespace driftlab
