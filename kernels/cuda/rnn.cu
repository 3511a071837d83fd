// Own CUDA LSTM/GRU kernels, float and double, forward and full BPTT, every RnnParams field
// (gate activation and hard-sigmoid edges, one or two biases, GRU reset before/after and both
// update conventions, Lasagne peepholes, padding mask, last-step gradient). Math and masks:
// core/ops/rnn.h; the CPU reference (kernels/cpu/ref/rnn_ref.cpp) is what the tests compare
// with (tests/cuda/test_rnn_cuda.cpp).
//
// Layout. x (N,T,F) and h_seq (N,T,H) are batch-major as on the CPU; inside, everything is
// time-major so that one step's rows are contiguous for the gemms: x_tm (T,N,F), h_tm
// (T+1,N,H) with h_{-1} = 0 in block 0, c_tm likewise, gate arrays (T,N,G*H).
// Forward: ain = x_t W_ih^T for all t (one gemm over T*N rows), then per step t: arec =
// h_{t-1} W_hh^T (gemm; none at t = 0),
// then one elementwise kernel (thread per sample and unit) adds the biases in the reference's
// association ((x.w + b_ih) + (h.w + b_hh)) and runs the cell; the reset-before GRU needs a
// second gemm, (r*h_{t-1}) W_hn^T, and a second kernel. Backward, per step from the last:
// rec = dgrec_{t+1} W_hh (gemm), one kernel for the cell's gradient (the reset-before GRU: a
// gemm d(r*h) = dan W_hn and a second kernel), the gate gradients of every step kept; then the
// weight gradients are one gemm each over all T*N rows (dW += dg^T [x | h_{t-1} | r*h_{t-1}]),
// the bias gradients column sums in ascending row order, dx one gemm.
// Built with -fmad=false: the gate math rounds product by product as the CPU code does
// (-ffp-contract=off); the gemms (gemm.cu) keep FMA. No atomics: the same bits on every run.
// Forward writes h_seq (=); backward writes dx (=) and ADDS into the gradients.
#include <algorithm>
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {
namespace {

cudaStream_t stream_of(CudaContext& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }
constexpr int kThreads = 256;

// out (B,A,C) = in (A,B,C) with the first two axes swapped.
template <typename T>
__global__ void swap01_kernel(long long A, long long B, long long C, const T* __restrict__ in, T* __restrict__ out) {
  DL_GRID_STRIDE(i, A * B * C) {
    const long long c = i % C, r = i / C, b = r % B, a = r / B;
    out[(b * A + a) * C + c] = in[i];
  }
}
template <typename T>
void swap01(CudaContext& ctx, long long A, long long B, long long C, const T* in, T* out) {
  if (A * B * C == 0) return;
  swap01_kernel<T><<<dl_blocks(A * B * C, kThreads), kThreads, 0, stream_of(ctx)>>>(A, B, C, in, out);
  DL_CUDA_LAUNCH_CHECK("swap01_kernel");
}

// One step's pointers for the forward cell kernels (rows n < N of one step; units j < H).
template <typename T>
struct FwdStep {
  long long N, H, GH, t, T_;  // T_: steps, for h_seq's batch-major index
  ActivationParams gate;  // rnn_gate / rnn_gate_grad (core/ops/rnn.h), the CPU's own functions
  bool keeps_old;
  const T *ain, *arec;     // (N,GH) x_t W_ih^T; h_{t-1} W_hh^T or null at t = 0 (reset-before GRU: (N,2H))
  const T *b_ih, *b_hh;    // b_hh null with one bias
  const T* w_peep;         // LSTM peepholes (3H) or null
  const T* mask;           // (N) this step's mask, or null
  const T *h_prev, *c_prev;
  T *h, *c;                // this step's state (N,H)
  T* h_seq;                // (N,T,H) batch-major output
  T *pre, *act, *aux;      // (N,GH), (N,GH), (N,H) this step's workspace rows, null in inference
  T* rh;                   // reset-before GRU: (N,H) r*h_{t-1}
  const T* rec_n;          // reset-before GRU second pass: (N,H) (r*h) W_hn^T
};

// a = (x.w + b_ih) + (h.w [+ b_hh]): the reference's association (rnn_ref.cpp a_in + a_rec).
template <typename T>
__device__ T gate_sum(const FwdStep<T>& s, long long n, long long g, long long rec_cols, const T* rec) {
  const T r = rec ? rec[n * rec_cols + g] : T(0);
  return (s.ain[n * s.GH + g] + s.b_ih[g]) + (s.b_hh ? r + s.b_hh[g] : r);
}

template <typename T>
__device__ void store_gate(const FwdStep<T>& s, long long n, long long g, T a, T y) {
  if (s.pre) s.pre[n * s.GH + g] = a, s.act[n * s.GH + g] = y;
}

// h_t of sample n, unit j: into this step's state and h_seq (batch-major).
template <typename T>
__device__ void store_state(const FwdStep<T>& s, long long n, long long j, T h) {
  s.h[n * s.H + j] = h;
  s.h_seq[(n * s.T_ + s.t) * s.H + j] = h;
}

// A padded step: gate rows zero, aux = the carried LSTM cell (0 for the GRU), state carried.
template <typename T>
__device__ void pad_step(const FwdStep<T>& s, long long n, long long j, int gates, bool lstm) {
  for (int q = 0; q < gates; ++q) store_gate(s, n, q * s.H + j, T(0), T(0));
  const long long k = n * s.H + j;
  if (lstm) s.c[k] = s.c_prev[k];
  else if (s.aux) s.aux[k] = T(0);
  store_state(s, n, j, s.h_prev[k]);
}

template <typename T>
__global__ void lstm_fwd_kernel(FwdStep<T> s) {
  DL_GRID_STRIDE(i, s.N * s.H) {
    const long long n = i / s.H, j = i % s.H, H = s.H;
    if (s.mask && s.mask[n] == T(0)) {
      pad_step(s, n, j, 4, true);
      continue;
    }
    const T cp = s.c_prev[i];
    T a[4], y[4];
    for (int q = 0; q < 4; ++q) a[q] = gate_sum(s, n, q * H + j, s.GH, s.arec);
    if (s.w_peep) {  // i and f see c_{t-1}
      a[0] += s.w_peep[j] * cp;
      a[1] += s.w_peep[H + j] * cp;
    }
    y[0] = rnn_gate(s.gate, a[0]);
    y[1] = rnn_gate(s.gate, a[1]);
    y[2] = tanh(a[2]);
    const T c = y[1] * cp + y[0] * y[2];
    if (s.w_peep) a[3] += s.w_peep[2 * H + j] * c;  // o sees the new c
    y[3] = rnn_gate(s.gate, a[3]);
    for (int q = 0; q < 4; ++q) store_gate(s, n, q * H + j, a[q], y[q]);
    s.c[i] = c;
    store_state(s, n, j, y[3] * tanh(c));
  }
}

template <typename T>
__device__ T gru_new_state(bool keeps_old, T z, T nv, T hp) {
  return keeps_old ? z * hp + (T(1) - z) * nv : (T(1) - z) * hp + z * nv;
}

// The GRU's candidate from its pre-activation an (recurrent part ax) and the new state.
template <typename T>
__device__ void gru_candidate(const FwdStep<T>& s, long long n, long long j, T an, T ax, T z) {
  const T nv = tanh(an);
  store_gate(s, n, 2 * s.H + j, an, nv);
  if (s.aux) s.aux[n * s.H + j] = ax;
  store_state(s, n, j, gru_new_state(s.keeps_old, z, nv, s.h_prev[n * s.H + j]));
}

// Reset after: arec holds all three recurrent blocks; n = tanh(a_in_n + r * (h.w_hn [+ b_hn])).
template <typename T>
__global__ void gru_after_fwd_kernel(FwdStep<T> s) {
  DL_GRID_STRIDE(i, s.N * s.H) {
    const long long n = i / s.H, j = i % s.H, H = s.H;
    if (s.mask && s.mask[n] == T(0)) {
      pad_step(s, n, j, 3, false);
      continue;
    }
    const T ar = gate_sum(s, n, j, s.GH, s.arec), az = gate_sum(s, n, H + j, s.GH, s.arec);
    const T r = rnn_gate(s.gate, ar), z = rnn_gate(s.gate, az);
    const T rec = s.arec ? s.arec[n * s.GH + 2 * H + j] : T(0);
    const T ax = s.b_hh ? rec + s.b_hh[2 * H + j] : rec;
    store_gate(s, n, j, ar, r);
    store_gate(s, n, H + j, az, z);
    gru_candidate(s, n, j, (s.ain[n * s.GH + 2 * H + j] + s.b_ih[2 * H + j]) + r * ax, ax, z);
  }
}

// Reset before, first pass: r and z (arec: the (N,2H) r,z blocks), rh = r * h_{t-1}.
template <typename T>
__global__ void gru_before_rz_kernel(FwdStep<T> s) {
  DL_GRID_STRIDE(i, s.N * s.H) {
    const long long n = i / s.H, j = i % s.H, H = s.H;
    if (s.mask && s.mask[n] == T(0)) {
      store_gate(s, n, j, T(0), T(0));
      store_gate(s, n, H + j, T(0), T(0));
      s.rh[i] = T(0);
      continue;
    }
    const T ar = gate_sum(s, n, j, 2 * H, s.arec), az = gate_sum(s, n, H + j, 2 * H, s.arec);
    const T r = rnn_gate(s.gate, ar), z = rnn_gate(s.gate, az);
    store_gate(s, n, j, ar, r);
    store_gate(s, n, H + j, az, z);
    s.rh[i] = r * s.h_prev[i];
    // The next pass reads z from act; in inference (no workspace) it is kept in h's slot of
    // this step, which the second pass overwrites.
    if (!s.act) s.h[i] = z;
  }
}

// Reset before, second pass: n = tanh(a_in_n + ((r*h).w_hn [+ b_hn])) and the new state.
template <typename T>
__global__ void gru_before_n_kernel(FwdStep<T> s) {
  DL_GRID_STRIDE(i, s.N * s.H) {
    const long long n = i / s.H, j = i % s.H, H = s.H;
    if (s.mask && s.mask[n] == T(0)) {
      store_gate(s, n, 2 * H + j, T(0), T(0));
      if (s.aux) s.aux[i] = T(0);
      store_state(s, n, j, s.h_prev[i]);
      continue;
    }
    const T z = s.act ? s.act[n * s.GH + H + j] : s.h[i];
    const T ax = s.b_hh ? s.rec_n[i] + s.b_hh[2 * H + j] : s.rec_n[i];
    gru_candidate(s, n, j, (s.ain[n * s.GH + 2 * H + j] + s.b_ih[2 * H + j]) + ax, ax, z);
  }
}

// c (m,n) = alpha * op(a) op(b) + beta * c with the own tiled gemm.
template <typename T>
void gemm(CudaContext& ctx, long long m, long long n, long long k, bool ta, bool tb, double beta, const T* a,
          const T* b, T* c) {
  if (m == 0 || n == 0) return;
  GemmParams p;
  p.m = m, p.n = n, p.k = k, p.trans_a = ta, p.trans_b = tb, p.beta = beta;
  gemm_own_raw<T>(ctx, p, a, b, c);
}

template <typename T>
const T* ptr(const DeviceTensor* t) {
  return t ? t->data<T>() : nullptr;
}

template <typename T>
void forward_own(CudaContext& ctx, const RnnParams& p, const DeviceTensor& x, const DeviceTensor* mask,
                 const RnnDeviceWeights& w, DeviceTensor& h_seq, RnnDeviceState* st) {
  const long long N = p.batch, S = p.steps, F = p.input, H = p.hidden, GH = rnn_gates(p.cell) * H;
  const DType dt = x.dtype();
  const bool lstm = p.cell == RnnCell::lstm, before = !lstm && !p.gru_reset_after;
  // Time-major input and mask; the state (training: all steps, kept; inference: two steps).
  DeviceTensor x_tm(ctx, {S, N, F}, dt), mask_tm;
  swap01(ctx, N, S, F, x.data<T>(), x_tm.data<T>());
  if (mask) {
    mask_tm = DeviceTensor(ctx, {S, N}, dt);
    swap01(ctx, N, S, 1, mask->data<T>(), mask_tm.data<T>());
  }
  const bool train = st != nullptr;
  if (train) *st = RnnDeviceState{};  // nothing of an earlier call (of either implementation) stays
  const long long hs = train ? S + 1 : 2;
  DeviceTensor h_tm = DeviceTensor::zeros(ctx, {hs, N, H}, dt);
  DeviceTensor c_tm = lstm ? DeviceTensor::zeros(ctx, {hs, N, H}, dt) : DeviceTensor();
  DeviceTensor pre, act, aux, rh_all;
  if (train) {
    pre = DeviceTensor(ctx, {S, N, GH}, dt);
    act = DeviceTensor(ctx, {S, N, GH}, dt);
    if (!lstm) aux = DeviceTensor(ctx, {S, N, H}, dt);
  }
  if (before) rh_all = DeviceTensor(ctx, {train ? S : 1, N, H}, dt);
  DeviceTensor ain(ctx, {S, N, GH}, dt), arec(ctx, {N, GH}, dt), rec_n;
  if (before) rec_n = DeviceTensor(ctx, {N, H}, dt);
  const T* wih = w.w_ih->data<T>();
  const T* whh = w.w_hh->data<T>();
  // ain = x_t W_ih^T for every step at once: one gemm over the S*N rows instead of one per
  // step inside the recurrence. Each element is the same K-ordered sum as the per-step gemm's
  // while F < 1024; from there the own gemm may split K by the tile count, which differs.
  gemm<T>(ctx, S * N, GH, F, false, true, 0.0, x_tm.data<T>(), wih, ain.data<T>());
  for (long long t = 0; t < S; ++t) {
    const long long cur = train ? t + 1 : (t + 1) % 2, prev = train ? t : t % 2;
    FwdStep<T> s{};
    s.N = N, s.H = H, s.GH = GH, s.t = t, s.T_ = S;
    s.gate = p.gate_act;
    s.keeps_old = p.gru_z_keeps_old;
    s.b_ih = w.b_ih->data<T>(), s.b_hh = ptr<T>(w.b_hh), s.w_peep = ptr<T>(w.w_peep);
    s.mask = mask ? mask_tm.data<T>() + t * N : nullptr;
    s.h_prev = h_tm.data<T>() + prev * N * H;
    s.h = h_tm.data<T>() + cur * N * H;
    if (lstm) s.c_prev = c_tm.data<T>() + prev * N * H, s.c = c_tm.data<T>() + cur * N * H;
    s.h_seq = h_seq.data<T>();
    if (train) {
      s.pre = pre.data<T>() + t * N * GH, s.act = act.data<T>() + t * N * GH;
      if (!lstm) s.aux = aux.data<T>() + t * N * H;
    }
    // arec = h_{t-1} W_hh^T (the r,z rows only before the reset-before n pass).
    s.ain = ain.data<T>() + t * N * GH;
    if (t > 0) {
      gemm<T>(ctx, N, before ? 2 * H : GH, H, false, true, 0.0, s.h_prev, whh, arec.data<T>());
      s.arec = arec.data<T>();
    }
    const unsigned blocks = dl_blocks(N * H, kThreads);  // N, H >= 1 (check_rnn_params)
    if (lstm) {
      lstm_fwd_kernel<T><<<blocks, kThreads, 0, stream_of(ctx)>>>(s);
      DL_CUDA_LAUNCH_CHECK("lstm_fwd_kernel");
    } else if (!before) {
      gru_after_fwd_kernel<T><<<blocks, kThreads, 0, stream_of(ctx)>>>(s);
      DL_CUDA_LAUNCH_CHECK("gru_after_fwd_kernel");
    } else {
      s.rh = rh_all.data<T>() + (train ? t : 0) * N * H;
      gru_before_rz_kernel<T><<<blocks, kThreads, 0, stream_of(ctx)>>>(s);
      DL_CUDA_LAUNCH_CHECK("gru_before_rz_kernel");
      gemm<T>(ctx, N, H, H, false, true, 0.0, s.rh, whh + 2 * H * H, rec_n.data<T>());
      s.rec_n = rec_n.data<T>();
      gru_before_n_kernel<T><<<blocks, kThreads, 0, stream_of(ctx)>>>(s);
      DL_CUDA_LAUNCH_CHECK("gru_before_n_kernel");
    }
  }
  if (train) {
    st->vendor = false;
    st->x_tm = std::move(x_tm);
    st->h_tm = std::move(h_tm);
    st->c_tm = std::move(c_tm);
    st->pre = std::move(pre);
    st->act = std::move(act);
    st->aux = std::move(aux);
    st->rh = before ? std::move(rh_all) : DeviceTensor();
    st->mask_tm = std::move(mask_tm);
  }
}

// ---- backward ----

template <typename T>
struct BwdStep {
  long long N, H, GH, t, T_;
  ActivationParams gate;  // rnn_gate / rnn_gate_grad (core/ops/rnn.h), the CPU's own functions
  bool keeps_old, dh_last;
  const T* dh;          // the layer's gradient: (N,T,H) batch-major, or (N,H) with dh_last
  const T* rec;         // (N,H) dgrec_{t+1} W_hh, or null at the last step
  const T* mask;        // (N) this step's, or null
  const T *pre, *act, *aux;  // this step's rows (N,GH), (N,GH), (N,H)
  const T *h_prev, *c_prev, *c;  // (N,H): h_{t-1}; LSTM c_{t-1}, c_t
  const T* w_peep;
  T *carry, *dcarry;    // (N,H): the gradient reaching h_{t-1} by direct paths; the LSTM's dc_{t+1} f
  T *gin, *grec;        // (N,GH) this step's input / recurrent gate gradients (grec null: same as gin)
  T *drz, *dan;         // reset-before GRU: (N,2H) r,z gradients, (N,H) n's; drh (N,H) d(r*h)
  const T* drh;
};

// dh_t = dh_out + (carry + rec): the reference's dh_out + dh_next, dh_next = direct + W_hh sum.
template <typename T>
__device__ T dh_total(const BwdStep<T>& s, long long n, long long j) {
  const long long k = n * s.H + j;
  T out;
  if (s.dh_last) out = s.t == s.T_ - 1 ? s.dh[k] : T(0);
  else out = s.dh[(n * s.T_ + s.t) * s.H + j];
  return out + (s.rec ? s.carry[k] + s.rec[k] : s.carry[k]);
}

template <typename T>
__global__ void lstm_bwd_kernel(BwdStep<T> s) {
  DL_GRID_STRIDE(i, s.N * s.H) {
    const long long n = i / s.H, j = i % s.H, H = s.H, o = n * s.GH;
    const T dh = dh_total(s, n, j);
    if (s.mask && s.mask[n] == T(0)) {  // h and c carried: dh and dc pass through
      for (int q = 0; q < 4; ++q) s.gin[o + q * H + j] = T(0);
      s.carry[i] = dh;
      continue;
    }
    const T iv = s.act[o + j], f = s.act[o + H + j], g = s.act[o + 2 * H + j], ov = s.act[o + 3 * H + j];
    const T cp = s.c_prev[i], tc = tanh(s.c[i]);
    const T dgo = dh * tc * rnn_gate_grad(s.gate, s.pre[o + 3 * H + j], ov);
    T dc = dh * ov * (T(1) - tc * tc) + s.dcarry[i];
    if (s.w_peep) dc += dgo * s.w_peep[2 * H + j];  // through o's peephole
    const T dgi = dc * g * rnn_gate_grad(s.gate, s.pre[o + j], iv);
    const T dgf = dc * cp * rnn_gate_grad(s.gate, s.pre[o + H + j], f);
    s.gin[o + j] = dgi;
    s.gin[o + H + j] = dgf;
    s.gin[o + 2 * H + j] = dc * iv * (T(1) - g * g);
    s.gin[o + 3 * H + j] = dgo;
    T dcn = dc * f;
    if (s.w_peep) dcn += dgi * s.w_peep[j] + dgf * s.w_peep[H + j];
    s.dcarry[i] = dcn;
    s.carry[i] = T(0);
  }
}

template <typename T>
__device__ void gru_state_grads(bool keeps_old, T dh, T z, T nv, T hp, T& dz, T& dn, T& direct) {
  dz = keeps_old ? dh * (hp - nv) : dh * (nv - hp);
  dn = keeps_old ? dh * (T(1) - z) : dh * z;
  direct = keeps_old ? dh * z : dh * (T(1) - z);
}

template <typename T>
__global__ void gru_after_bwd_kernel(BwdStep<T> s) {
  DL_GRID_STRIDE(i, s.N * s.H) {
    const long long n = i / s.H, j = i % s.H, H = s.H, o = n * s.GH;
    const T dh = dh_total(s, n, j);
    if (s.mask && s.mask[n] == T(0)) {
      for (int q = 0; q < 3; ++q) s.gin[o + q * H + j] = s.grec[o + q * H + j] = T(0);
      s.carry[i] = dh;
      continue;
    }
    const T r = s.act[o + j], z = s.act[o + H + j], nv = s.act[o + 2 * H + j];
    T dz, dn, direct;
    gru_state_grads(s.keeps_old, dh, z, nv, s.h_prev[i], dz, dn, direct);
    const T dan = dn * (T(1) - nv * nv);
    const T dr = dan * s.aux[i];
    const T dar = dr * rnn_gate_grad(s.gate, s.pre[o + j], r);
    const T daz = dz * rnn_gate_grad(s.gate, s.pre[o + H + j], z);
    s.gin[o + j] = s.grec[o + j] = dar;
    s.gin[o + H + j] = s.grec[o + H + j] = daz;
    s.gin[o + 2 * H + j] = dan;
    s.grec[o + 2 * H + j] = dan * r;
    s.carry[i] = direct;
  }
}

// Reset before, first pass: z and n gradients, the direct path; dan kept for d(r*h) = dan W_hn.
template <typename T>
__global__ void gru_before_bwd_zn_kernel(BwdStep<T> s) {
  DL_GRID_STRIDE(i, s.N * s.H) {
    const long long n = i / s.H, j = i % s.H, H = s.H, o = n * s.GH;
    const T dh = dh_total(s, n, j);
    if (s.mask && s.mask[n] == T(0)) {
      s.drz[n * 2 * H + j] = s.drz[n * 2 * H + H + j] = T(0);
      s.dan[i] = T(0);
      s.carry[i] = dh;
      continue;
    }
    const T z = s.act[o + H + j], nv = s.act[o + 2 * H + j];
    T dz, dn, direct;
    gru_state_grads(s.keeps_old, dh, z, nv, s.h_prev[i], dz, dn, direct);
    s.dan[i] = dn * (T(1) - nv * nv);
    s.drz[n * 2 * H + H + j] = dz * rnn_gate_grad(s.gate, s.pre[o + H + j], z);
    s.carry[i] = direct;
  }
}

// Reset before, second pass (after drh = dan W_hn): r's gradient and r*h's path to h_{t-1}.
template <typename T>
__global__ void gru_before_bwd_r_kernel(BwdStep<T> s) {
  DL_GRID_STRIDE(i, s.N * s.H) {
    const long long n = i / s.H, k = i % s.H, H = s.H, o = n * s.GH;
    if (s.mask && s.mask[n] == T(0)) continue;  // its gradients are zero, dh passed through
    const T r = s.act[o + k];
    const T dr = s.drh[i] * s.h_prev[i];
    s.drz[n * 2 * H + k] = dr * rnn_gate_grad(s.gate, s.pre[o + k], r);
    s.carry[i] = s.carry[i] + s.drh[i] * r;
  }
}

// dw_peep[q*H + j] += sum over (sample, step) of the gate's gradient times the cell state it
// saw: c_{t-1} for i (q = 0) and f (q = 1), c_t for o (q = 2). Samples outer, steps inner:
// the reference's order.
template <typename T>
__global__ void peephole_grad_kernel(long long N, long long S, long long H, const T* __restrict__ dg,
                                     const T* __restrict__ c_tm, T* __restrict__ dw) {
  DL_GRID_STRIDE(i, 3 * H) {
    const long long q = i / H, j = i % H, gate = q < 2 ? q : 3;
    T acc = T(0);
    for (long long n = 0; n < N; ++n)
      for (long long t = 0; t < S; ++t) {
        const T c = c_tm[((q < 2 ? t : t + 1) * N + n) * H + j];
        acc += dg[(t * N + n) * 4 * H + gate * H + j] * c;
      }
    dw[i] += acc;
  }
}

template <typename T>
void backward_own(CudaContext& ctx, const RnnParams& p, const RnnDeviceWeights& w, const RnnDeviceState& st,
                  const DeviceTensor& dh, DeviceTensor* dx, const RnnDeviceGrads& g) {
  const long long N = p.batch, S = p.steps, F = p.input, H = p.hidden, GH = rnn_gates(p.cell) * H;
  const DType dt = st.x_tm.dtype();
  const bool lstm = p.cell == RnnCell::lstm, before = !lstm && !p.gru_reset_after;
  const bool split_rec = !lstm && p.gru_reset_after;  // dgrec differs from dgin (r * in n's block)
  // Gate gradients of every step: gin (T,N,GH); grec only where it differs (reset-after GRU);
  // the reset-before GRU keeps its r,z and n columns apart so that each gemm reads contiguous rows.
  DeviceTensor gin, grec, drz, dan, drh;
  if (before) {
    drz = DeviceTensor(ctx, {S, N, 2 * H}, dt);
    dan = DeviceTensor(ctx, {S, N, H}, dt);
    drh = DeviceTensor(ctx, {N, H}, dt);
  } else {
    gin = DeviceTensor(ctx, {S, N, GH}, dt);
    if (split_rec) grec = DeviceTensor(ctx, {S, N, GH}, dt);
  }
  DeviceTensor carry = DeviceTensor::zeros(ctx, {N, H}, dt), dcarry, rec(ctx, {N, H}, dt);
  if (lstm) dcarry = DeviceTensor::zeros(ctx, {N, H}, dt);
  const T* whh = w.w_hh->data<T>();
  const T* wih = w.w_ih->data<T>();
  const unsigned blocks = dl_blocks(N * H, kThreads);  // N, H >= 1 (check_rnn_params)
  for (long long t = S - 1; t >= 0; --t) {
    BwdStep<T> s{};
    s.N = N, s.H = H, s.GH = GH, s.t = t, s.T_ = S;
    s.gate = p.gate_act;
    s.keeps_old = p.gru_z_keeps_old, s.dh_last = p.dh_last_step;
    s.dh = dh.data<T>();
    s.mask = st.mask_tm.numel() > 0 ? st.mask_tm.data<T>() + t * N : nullptr;
    s.pre = st.pre.data<T>() + t * N * GH, s.act = st.act.data<T>() + t * N * GH;
    if (!lstm) s.aux = st.aux.data<T>() + t * N * H;
    s.h_prev = st.h_tm.data<T>() + t * N * H;
    if (lstm) s.c_prev = st.c_tm.data<T>() + t * N * H, s.c = st.c_tm.data<T>() + (t + 1) * N * H;
    s.w_peep = ptr<T>(w.w_peep);
    s.carry = carry.data<T>();
    if (lstm) s.dcarry = dcarry.data<T>();
    // rec = dgrec_{t+1} W_hh over the rows that multiply h_{t-1} itself.
    if (t + 1 < S) {
      if (before)
        gemm<T>(ctx, N, H, 2 * H, false, false, 0.0, drz.data<T>() + (t + 1) * N * 2 * H, whh, rec.data<T>());
      else
        gemm<T>(ctx, N, H, GH, false, false, 0.0, (split_rec ? grec : gin).data<T>() + (t + 1) * N * GH, whh,
                rec.data<T>());
      s.rec = rec.data<T>();
    }
    if (lstm) {
      s.gin = gin.data<T>() + t * N * GH;
      lstm_bwd_kernel<T><<<blocks, kThreads, 0, stream_of(ctx)>>>(s);
      DL_CUDA_LAUNCH_CHECK("lstm_bwd_kernel");
    } else if (split_rec) {
      s.gin = gin.data<T>() + t * N * GH, s.grec = grec.data<T>() + t * N * GH;
      gru_after_bwd_kernel<T><<<blocks, kThreads, 0, stream_of(ctx)>>>(s);
      DL_CUDA_LAUNCH_CHECK("gru_after_bwd_kernel");
    } else {
      s.drz = drz.data<T>() + t * N * 2 * H, s.dan = dan.data<T>() + t * N * H;
      gru_before_bwd_zn_kernel<T><<<blocks, kThreads, 0, stream_of(ctx)>>>(s);
      DL_CUDA_LAUNCH_CHECK("gru_before_bwd_zn_kernel");
      gemm<T>(ctx, N, H, H, false, false, 0.0, s.dan, whh + 2 * H * H, drh.data<T>());  // d(r*h) = dan W_hn
      s.drh = drh.data<T>();
      gru_before_bwd_r_kernel<T><<<blocks, kThreads, 0, stream_of(ctx)>>>(s);
      DL_CUDA_LAUNCH_CHECK("gru_before_bwd_r_kernel");
    }
  }
  // Parameter gradients over all T*N rows (+=), and dx.
  const long long R = S * N;
  const T* x_tm = st.x_tm.data<T>();
  const T* h_prev = st.h_tm.data<T>();  // rows 0..R-1 of h_tm are h_{t-1} for every (t, n)
  T* dwih = g.dw_ih->data<T>();
  T* dwhh = g.dw_hh->data<T>();
  T* dbih = g.db_ih->data<T>();
  T* dbhh = g.db_hh ? g.db_hh->data<T>() : nullptr;
  DeviceTensor dx_tm = dx ? DeviceTensor(ctx, {S, N, F}, dt) : DeviceTensor();
  if (!before) {
    const T* gi = gin.data<T>();
    const T* gr = (split_rec ? grec : gin).data<T>();
    gemm<T>(ctx, GH, F, R, true, false, 1.0, gi, x_tm, dwih);
    gemm<T>(ctx, GH, H, R, true, false, 1.0, gr, h_prev, dwhh);
    add_column_sums_raw<T>(ctx, R, GH, gi, dbih);
    if (dbhh) add_column_sums_raw<T>(ctx, R, GH, gr, dbhh);
    if (dx) gemm<T>(ctx, R, F, GH, false, false, 0.0, gi, wih, dx_tm.data<T>());
    if (p.peepholes && R * H > 0) {
      peephole_grad_kernel<T><<<dl_blocks(3 * H, kThreads), kThreads, 0, stream_of(ctx)>>>(
          N, S, H, gi, st.c_tm.data<T>(), g.dw_peep->data<T>());
      DL_CUDA_LAUNCH_CHECK("peephole_grad_kernel");
    }
  } else {
    const T* rz = drz.data<T>();
    const T* an = dan.data<T>();
    gemm<T>(ctx, 2 * H, F, R, true, false, 1.0, rz, x_tm, dwih);
    gemm<T>(ctx, H, F, R, true, false, 1.0, an, x_tm, dwih + 2 * H * F);
    gemm<T>(ctx, 2 * H, H, R, true, false, 1.0, rz, h_prev, dwhh);
    gemm<T>(ctx, H, H, R, true, false, 1.0, an, st.rh.data<T>(), dwhh + 2 * H * H);  // n rows see r*h_{t-1}
    add_column_sums_raw<T>(ctx, R, 2 * H, rz, dbih);
    add_column_sums_raw<T>(ctx, R, H, an, dbih + 2 * H);
    if (dbhh) {
      add_column_sums_raw<T>(ctx, R, 2 * H, rz, dbhh);
      add_column_sums_raw<T>(ctx, R, H, an, dbhh + 2 * H);
    }
    if (dx) {
      gemm<T>(ctx, R, F, 2 * H, false, false, 0.0, rz, wih, dx_tm.data<T>());
      gemm<T>(ctx, R, F, H, false, false, 1.0, an, wih + 2 * H * F, dx_tm.data<T>());
    }
  }
  if (dx) swap01(ctx, S, N, F, dx_tm.data<T>(), dx->data<T>());
}

// ---- glue and embedding ----

template <typename T>
__global__ void last_step_kernel(long long N, long long S, long long H, const T* __restrict__ seq, T* __restrict__ y) {
  DL_GRID_STRIDE(i, N * H) {
    const long long n = i / H, j = i % H;
    y[i] = seq[(n * S + S - 1) * H + j];
  }
}

template <typename T>
__global__ void zero_masked_rows_kernel(long long rows, long long H, const T* __restrict__ mask, T* __restrict__ seq) {
  DL_GRID_STRIDE(i, rows * H) {
    if (mask[i / H] == T(0)) seq[i] = T(0);
  }
}

template <typename T>
__global__ void embedding_gather_kernel(long long cells, long long D, const int* __restrict__ ids,
                                        const T* __restrict__ table, T* __restrict__ y) {
  DL_GRID_STRIDE(i, cells * D) {
    const long long c = i / D, d = i % D;
    y[i] = table[static_cast<long long>(ids[c]) * D + d];
  }
}

// For distinct id u (ascending) with positions pos[start[u] .. start[u+1]) (ascending):
// dtable[id[u], d] += dy[pos, d], added one by one in that order (the CPU layer's loop).
template <typename T>
__global__ void embedding_scatter_kernel(long long distinct, long long D, const int* __restrict__ uid,
                                         const int* __restrict__ start, const int* __restrict__ pos,
                                         const T* __restrict__ dy, T* __restrict__ dtable) {
  DL_GRID_STRIDE(i, distinct * D) {
    const long long u = i / D, d = i % D;
    T acc = dtable[static_cast<long long>(uid[u]) * D + d];
    for (int k = start[u]; k < start[u + 1]; ++k) acc += dy[static_cast<long long>(pos[k]) * D + d];
    dtable[static_cast<long long>(uid[u]) * D + d] = acc;
  }
}

DeviceBytes upload_ints(CudaContext& ctx, const std::vector<int>& v) {
  return bytes_to_device(ctx, v.data(), v.size() * sizeof(int));
}

}  // namespace

void check_rnn_weights(const char* fn, const RnnParams& p, const RnnDeviceWeights& w, DType dt) {
  const int64_t GH = rnn_gates(p.cell) * p.hidden;
  check(w.w_ih && w.w_hh && w.b_ih, fn, ": weight_ih, weight_hh and bias_ih are required");
  check_device_shape(fn, "weight_ih", *w.w_ih, {GH, p.input});
  check_device_shape(fn, "weight_hh", *w.w_hh, {GH, p.hidden});
  check_device_shape(fn, "bias_ih", *w.b_ih, {GH});
  check((w.b_hh != nullptr) == p.two_biases, fn, ": bias_hh ", w.b_hh ? "given" : "missing", " with two_biases=",
        p.two_biases);
  if (w.b_hh) check_device_shape(fn, "bias_hh", *w.b_hh, {GH});
  check((w.w_peep != nullptr) == p.peepholes, fn, ": peephole weights ", w.w_peep ? "given" : "missing",
        " with peepholes=", p.peepholes);
  if (w.w_peep)
    check(w.w_peep->numel() == 3 * p.hidden, fn, ": weight_peephole has shape ", shape_str(w.w_peep->shape()),
          ", expected 3*", p.hidden, " values");
  for (const DeviceTensor* t : {w.w_ih, w.w_hh, w.b_ih, w.b_hh, w.w_peep})
    check(!t || t->dtype() == dt, fn, ": weights are ", dtype_name(t ? t->dtype() : dt), ", x is ", dtype_name(dt));
}

void check_rnn_grads(const char* fn, const RnnParams& p, const RnnDeviceGrads& g, DType dt) {
  const int64_t GH = rnn_gates(p.cell) * p.hidden;
  check(g.dw_ih && g.dw_hh && g.db_ih && (g.db_hh != nullptr) == p.two_biases && (g.dw_peep != nullptr) == p.peepholes,
        fn, ": the gradients do not match the parameters (two_biases=", p.two_biases, ", peepholes=", p.peepholes, ")");
  check_device_shape(fn, "dweight_ih", *g.dw_ih, {GH, p.input});
  check_device_shape(fn, "dweight_hh", *g.dw_hh, {GH, p.hidden});
  check_device_shape(fn, "dbias_ih", *g.db_ih, {GH});
  if (g.db_hh) check_device_shape(fn, "dbias_hh", *g.db_hh, {GH});
  if (g.dw_peep)
    check(g.dw_peep->numel() == 3 * p.hidden, fn, ": dweight_peephole has ", g.dw_peep->numel(), " values, expected ",
          3 * p.hidden);
  for (const DeviceTensor* t : {g.dw_ih, g.dw_hh, g.db_ih, g.db_hh, g.dw_peep})
    check(!t || t->dtype() == dt, fn, ": gradients are ", dtype_name(t ? t->dtype() : dt), ", x is ", dtype_name(dt));
}

void check_rnn_backward_io(const char* fn, const RnnParams& p, const DeviceTensor& dh, const DeviceTensor* dx,
                           DType dt) {
  check_device_shape(fn, "dh", dh, p.dh_last_step ? Shape{p.batch, p.hidden} : Shape{p.batch, p.steps, p.hidden});
  check(dh.dtype() == dt, fn, ": dh is ", dtype_name(dh.dtype()), ", x was ", dtype_name(dt));
  if (dx) {
    check_device_shape(fn, "dx", *dx, {p.batch, p.steps, p.input});
    check(dx->dtype() == dt, fn, ": dx is ", dtype_name(dx->dtype()), ", x was ", dtype_name(dt));
  }
}

void rnn_forward_own(CudaContext& ctx, const RnnParams& p, const DeviceTensor& x, const DeviceTensor* mask,
                     const RnnDeviceWeights& w, DeviceTensor& h_seq, RnnDeviceState* state) {
  const char* fn = "rnn_forward_own";
  check_rnn_params(p);
  check_device_shape(fn, "x", x, {p.batch, p.steps, p.input});
  check_device_shape(fn, "h_seq", h_seq, {p.batch, p.steps, p.hidden});
  check_rnn_weights(fn, p, w, x.dtype());
  check(h_seq.dtype() == x.dtype(), fn, ": h_seq and x dtypes differ");
  if (mask) {
    check_device_shape(fn, "mask", *mask, {p.batch, p.steps});
    check(mask->dtype() == x.dtype(), fn, ": mask dtype differs from x's");
  }
  dispatch_dtype(x.dtype(), [&](auto tag) { forward_own<decltype(tag)>(ctx, p, x, mask, w, h_seq, state); });
}

void rnn_backward_own(CudaContext& ctx, const RnnParams& p, const RnnDeviceWeights& w, const RnnDeviceState& st,
                      const DeviceTensor& dh, DeviceTensor* dx, const RnnDeviceGrads& g) {
  const char* fn = "rnn_backward_own";
  check_rnn_params(p);
  check(!st.vendor && st.h_tm.numel() > 0 && st.act.numel() > 0, fn,
        ": no own-kernel training forward to go back through");
  // The state must be the forward's of these very params (a changed cell or reset rule would
  // read arrays that were never filled).
  const int64_t S = p.steps, N = p.batch, H = p.hidden, GH = rnn_gates(p.cell) * H;
  check_device_shape(fn, "state x_tm", st.x_tm, {S, N, p.input});
  check_device_shape(fn, "state h_tm", st.h_tm, {S + 1, N, H});
  check_device_shape(fn, "state pre", st.pre, {S, N, GH});
  check_device_shape(fn, "state act", st.act, {S, N, GH});
  if (p.cell == RnnCell::lstm) check_device_shape(fn, "state c_tm", st.c_tm, {S + 1, N, H});
  else check_device_shape(fn, "state aux", st.aux, {S, N, H});
  if (p.cell == RnnCell::gru && !p.gru_reset_after) check_device_shape(fn, "state rh", st.rh, {S, N, H});
  if (st.mask_tm.numel() > 0) check_device_shape(fn, "state mask_tm", st.mask_tm, {S, N});
  const DType dt = st.x_tm.dtype();
  check_rnn_weights(fn, p, w, dt);
  check_rnn_grads(fn, p, g, dt);
  check_rnn_backward_io(fn, p, dh, dx, dt);
  dispatch_dtype(dt, [&](auto tag) { backward_own<decltype(tag)>(ctx, p, w, st, dh, dx, g); });
}

void rnn_last_step_cuda(CudaContext& ctx, const DeviceTensor& h_seq, DeviceTensor& y) {
  check(h_seq.rank() == 3, "rnn_last_step_cuda: h_seq has shape ", shape_str(h_seq.shape()), ", expected (N,T,H)");
  const long long N = h_seq.dim(0), S = h_seq.dim(1), H = h_seq.dim(2);
  check_device_shape("rnn_last_step_cuda", "y", y, {N, H});
  if (N * H == 0) return;
  dispatch_dtype(h_seq.dtype(), [&](auto tag) {
    using T = decltype(tag);
    last_step_kernel<T><<<dl_blocks(N * H, kThreads), kThreads, 0, stream_of(ctx)>>>(N, S, H, h_seq.data<T>(),
                                                                                     y.data<T>());
    DL_CUDA_LAUNCH_CHECK("last_step_kernel");
  });
}

void rnn_zero_masked_rows_cuda(CudaContext& ctx, const DeviceTensor& mask, DeviceTensor& seq) {
  check(seq.rank() == 3 && mask.numel() == seq.dim(0) * seq.dim(1), "rnn_zero_masked_rows_cuda: mask ",
        shape_str(mask.shape()), " does not match the sequence ", shape_str(seq.shape()));
  const long long rows = mask.numel(), H = seq.dim(2);
  if (rows * H == 0) return;
  dispatch_dtype(seq.dtype(), [&](auto tag) {
    using T = decltype(tag);
    zero_masked_rows_kernel<T><<<dl_blocks(rows * H, kThreads), kThreads, 0, stream_of(ctx)>>>(
        rows, H, mask.data<T>(), seq.data<T>());
    DL_CUDA_LAUNCH_CHECK("zero_masked_rows_kernel");
  });
}

void swap_batch_time_cuda(CudaContext& ctx, const DeviceTensor& in, DeviceTensor& out) {
  check(in.rank() == 3, "swap_batch_time_cuda: input has shape ", shape_str(in.shape()), ", expected rank 3");
  check_device_shape("swap_batch_time_cuda", "out", out, {in.dim(1), in.dim(0), in.dim(2)});
  check(in.dtype() == out.dtype(), "swap_batch_time_cuda: dtypes differ");
  dispatch_dtype(in.dtype(), [&](auto tag) {
    using T = decltype(tag);
    swap01<T>(ctx, in.dim(0), in.dim(1), in.dim(2), in.data<T>(), out.data<T>());
  });
}

void embedding_forward_cuda(CudaContext& ctx, const DeviceTensor& table, const std::vector<int64_t>& ids,
                            DeviceTensor& y) {
  check(table.rank() == 2, "embedding_forward_cuda: table has shape ", shape_str(table.shape()));
  const long long V = table.dim(0), D = table.dim(1), cells = static_cast<long long>(ids.size());
  check(y.numel() == cells * D && y.dtype() == table.dtype(), "embedding_forward_cuda: y ", shape_str(y.shape()),
        " does not hold ", cells, " rows of ", D);
  std::vector<int> id32(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    check(ids[i] >= 0 && ids[i] < V, "embedding_forward_cuda: id ", ids[i], " at ", i, " outside 0..", V - 1);
    id32[i] = static_cast<int>(ids[i]);
  }
  if (cells * D == 0) return;
  DeviceBytes dev = upload_ints(ctx, id32);
  dispatch_dtype(table.dtype(), [&](auto tag) {
    using T = decltype(tag);
    embedding_gather_kernel<T><<<dl_blocks(cells * D, kThreads), kThreads, 0, stream_of(ctx)>>>(
        cells, D, static_cast<const int*>(dev.get()), table.data<T>(), y.data<T>());
    DL_CUDA_LAUNCH_CHECK("embedding_gather_kernel");
  });
}

void embedding_backward_cuda(CudaContext& ctx, const std::vector<int64_t>& ids, const DeviceTensor& dy,
                             DeviceTensor& dtable) {
  check(dtable.rank() == 2, "embedding_backward_cuda: dtable has shape ", shape_str(dtable.shape()));
  const long long V = dtable.dim(0), D = dtable.dim(1), cells = static_cast<long long>(ids.size());
  check(dy.numel() == cells * D && dy.dtype() == dtable.dtype(), "embedding_backward_cuda: dy ",
        shape_str(dy.shape()), " does not hold ", cells, " rows of ", D);
  check(cells < (1LL << 31), "embedding_backward_cuda: ", cells, " positions exceed the int32 index range");
  if (cells * D == 0) return;
  // Positions grouped by id: a stable sort by id keeps each id's positions ascending.
  std::vector<int> order(static_cast<std::size_t>(cells));
  for (long long i = 0; i < cells; ++i) {
    check(ids[i] >= 0 && ids[i] < V, "embedding_backward_cuda: id ", ids[i], " at ", i, " outside 0..", V - 1);
    order[i] = static_cast<int>(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return ids[a] < ids[b]; });
  std::vector<int> uid, start;
  for (long long k = 0; k < cells; ++k)
    if (k == 0 || ids[order[k]] != ids[order[k - 1]]) {
      uid.push_back(static_cast<int>(ids[order[k]]));
      start.push_back(static_cast<int>(k));
    }
  start.push_back(static_cast<int>(cells));
  DeviceBytes d_uid = upload_ints(ctx, uid), d_start = upload_ints(ctx, start), d_pos = upload_ints(ctx, order);
  const long long distinct = static_cast<long long>(uid.size());
  dispatch_dtype(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    embedding_scatter_kernel<T><<<dl_blocks(distinct * D, kThreads), kThreads, 0, stream_of(ctx)>>>(
        distinct, D, static_cast<const int*>(d_uid.get()), static_cast<const int*>(d_start.get()),
        static_cast<const int*>(d_pos.get()), dy.data<T>(), dtable.data<T>());
    DL_CUDA_LAUNCH_CHECK("embedding_scatter_kernel");
  });
}

}  // namespace cuda
}  // namespace driftlab
