// Fast LSTM/GRU kernels (float32). The samples of a batch never interact inside a recurrent
// layer, so the batch is split once into one row range per thread and each thread runs its
// rows through all the steps on its own: no barrier and no GEMM call per step. Per step and
// per block of 16 hidden units, a register-tiled multiply-add (tile_madd: up to 6 rows x 4
// 16-lane accumulators) computes the gate pre-activations of those units from x_t and h_{t-1}
// against weights packed once per call (one K x (4x16) panel per unit block: the i,f,g,o or
// n_in,r,z,n_rec columns of those units side by side), and the gate math runs on the
// accumulators before anything is stored (the tile's epilogue). The backward runs the same
// way over fixed chunks of rows: per step one tile dh_{t-1} = dgrec_t W_hh per 6 rows x 64
// units with the cell's gradient math in its epilogue, then the step's parameter-gradient and
// dx products from the same tiles (tile_update), while the step's gate gradients are still in
// cache. No GEMM library is called, so the kernel is the same under the eigen and onednn
// backends. Each value is summed in a fixed order that does not depend on how rows are split
// among threads, so results do not depend on the thread count. exp and tanh are this file's polynomial versions (Cephes
// coefficients; measured at most 1.3 ulp from the exact value, exp over [-87, 88] and tanh over
// [-12, 12], 2 million points each, AVX-512 build; the reference kernels call libm, as PyTorch's
// vectorised Sleef kernels differ from its scalar ones). Layout and math: core/ops/rnn.h. A
// padded step (mask 0) copies the state and its workspace rows and gate gradients are zero,
// as in the reference. Forward writes h_seq and ws (=); backward writes dx (=) and adds into
// dw_ih, dw_hh, db_ih, db_hh (+=). Checked against kernels/cpu/ref/rnn_ref.cpp by
// tests/ops/test_rnn.cpp.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__) || defined(__FMA__)
#include <immintrin.h>
#endif

#include "core/error.h"
#include "kernels/cpu/registry.h"
#include "core/ops/rnn.h"

namespace driftlab {
namespace {

constexpr int kL = 16;   // lanes of one vector: the hidden units of one unit block
constexpr int kMR = 6;   // rows (samples) of one tile
constexpr int kNB = 4;   // 16-lane accumulators per tile row (gate groups, or unit blocks)

typedef float v16 __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

inline v16 splat(float s) {
#if defined(__AVX512F__)
  return (v16)_mm512_set1_ps(s);
#else
  v16 v;
  for (int l = 0; l < 16; ++l) v[l] = s;
  return v;
#endif
}
inline v16 ld(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void st(float* p, v16 v) { std::memcpy(p, &v, sizeof v); }
// The first m lanes (m <= 16; the rest read as 0 / not written): a unit block past H's end.
inline v16 ldn(const float* p, int m) {
  if (m == kL) return ld(p);
  v16 v = {};
  std::memcpy(&v, p, static_cast<std::size_t>(m) * sizeof(float));
  return v;
}
inline void stn(float* p, v16 v, int m) {
  if (m == kL) return st(p, v);
  std::memcpy(p, &v, static_cast<std::size_t>(m) * sizeof(float));
}
inline v16 sel(v16i m, v16 a, v16 b) { return m ? a : b; }

// a*b + c, one rounding where the CPU has a 16-lane FMA (the tiles' multiply-adds only; the
// gate math below keeps separate roundings, as -ffp-contract=off does everywhere else).
inline v16 fmadd(v16 a, v16 b, v16 c) {
#if defined(__AVX512F__)
  return (v16)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif defined(__FMA__)
  // AVX2: the two 8-lane halves fused, as the AVX-512 build rounds (a * b + c would be a
  // multiply and an add under -ffp-contract=off: two roundings and twice the instructions)
  __m256 a0, a1, b0, b1, c0, c1;
  std::memcpy(&a0, &a, 32), std::memcpy(&a1, reinterpret_cast<const char*>(&a) + 32, 32);
  std::memcpy(&b0, &b, 32), std::memcpy(&b1, reinterpret_cast<const char*>(&b) + 32, 32);
  std::memcpy(&c0, &c, 32), std::memcpy(&c1, reinterpret_cast<const char*>(&c) + 32, 32);
  const __m256 r0 = _mm256_fmadd_ps(a0, b0, c0), r1 = _mm256_fmadd_ps(a1, b1, c1);
  v16 r;
  std::memcpy(&r, &r0, 32), std::memcpy(reinterpret_cast<char*>(&r) + 32, &r1, 32);
  return r;
#else
  return a * b + c;
#endif
}

// exp(x): x = n ln2 + r with ln2 split in two parts, Cephes expf's degree-6 polynomial for
// e^r, times 2^n. Inputs are clamped to [-87.3, 88.3], so 2^n stays a normal float. With
// AVX-512 the clamp is min/max, n is rounded by vrndscaleps, the reduction and polynomial are
// fused multiply-adds and 2^n is applied by vscalefps (about half the instructions); without
// it, n is rounded with the 1.5*2^23 trick and 2^n assembled in the exponent bits.
#if defined(__AVX512F__)
// Full-mask forms of max, min, roundscale and scalef: GCC 12's unmasked intrinsics read an
// uninitialised "undefined" operand and warn (-Wuninitialized) wherever they are inlined.
constexpr __mmask16 kAll = 0xFFFF;
// vmaxps/vminps return their second operand when either is NaN, so the clamps pass the bound
// first and the input second: a NaN input comes out NaN (sigmoid and tanh of NaN are NaN, as in
// the reference's libm calls and the portable code's compares), never the bound.
inline __m512 vmax(__m512 bound, __m512 x) { return _mm512_mask_max_ps(bound, kAll, bound, x); }
inline __m512 vmin(__m512 bound, __m512 x) { return _mm512_mask_min_ps(bound, kAll, bound, x); }
#endif

__attribute__((always_inline)) inline v16 vexp(v16 x) {
#if defined(__AVX512F__)
  __m512 v = vmin(_mm512_set1_ps(88.3f), vmax(_mm512_set1_ps(-87.3f), (__m512)x));
  const __m512 l2 = _mm512_mul_ps(v, _mm512_set1_ps(1.44269504088896341f));
  const __m512 n = _mm512_mask_roundscale_ps(l2, kAll, l2, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), v);
  const __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), v);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return (v16)_mm512_mask_scalef_ps(p, kAll, p, n);
#else
  const v16 lo = splat(-87.3f), hi = splat(88.3f), magic = splat(12582912.0f);
  x = sel(x < lo, lo, x);
  x = sel(x > hi, hi, x);
  const v16 big = x * 1.44269504088896341f + magic;  // round(x log2 e) in the low mantissa bits
  const v16 n = big - magic;
  const v16 r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  v16 p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const v16i bits = ((v16i)big - (v16i)magic + 127) << 23;
  return p * (v16)bits;
#endif
}

// tanh: Cephes tanhf's odd polynomial for |x| < 0.625, else 1 - 2/(e^{2|x|} + 1) with the sign.
__attribute__((always_inline)) inline v16 vtanh(v16 x) {
#if defined(__AVX512F__)
  const __m512 xv = (__m512)x, ax = _mm512_abs_ps(xv), z = _mm512_mul_ps(xv, xv);
  __m512 p = _mm512_set1_ps(-5.70498872745e-3f);
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(2.06390887954e-2f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-5.37397155531e-2f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(1.33314422036e-1f));
  p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(-3.33332819422e-1f));
  const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), xv, xv);
  const __m512 a9 = vmin(_mm512_set1_ps(9.0f), ax);
  const __m512 e = (__m512)vexp((v16)_mm512_add_ps(a9, a9));
  const __m512 big = _mm512_sub_ps(_mm512_set1_ps(1.0f),
                                   _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
  // |tanh| with x's sign bit, or the polynomial below 0.625
  const __m512 sbig = _mm512_or_ps(big, _mm512_and_ps(xv, _mm512_set1_ps(-0.0f)));
  return (v16)_mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.625f), _CMP_LT_OQ), sbig, small);
#else
  const v16 ax = (v16)((v16i)x & 0x7fffffff);
  const v16 z = x * x;
  v16 p = splat(-5.70498872745e-3f);
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const v16 small = p * z * x + x;
  const v16 nine = splat(9.0f);
  const v16 big = 1.0f - 2.0f / (vexp(2.0f * sel(ax > nine, nine, ax)) + 1.0f);
  return sel(ax < splat(0.625f), small, sel(x < v16{}, -big, big));
#endif
}

// The gate activation (rnn_gate) and its derivative (rnn_gate_grad) on 16 lanes, the kind and
// edge rule fixed at compile time. Exclusive edges compare a with -offset/slope and
// (1-offset)/slope in float: exact for both hard-sigmoid kinds (+-2.5 and +-3).
struct Gate {
  float slope, offset, lo, hi;
  explicit Gate(const ActivationParams& g)
      : slope(static_cast<float>(g.hs_slope)),
        offset(static_cast<float>(g.hs_offset)),
        lo(static_cast<float>(-g.hs_offset / g.hs_slope)),
        hi(static_cast<float>((1.0 - g.hs_offset) / g.hs_slope)) {}
};
template <bool kHard>
inline v16 gate(const Gate& g, v16 a) {
  if (!kHard) return 1.0f / (1.0f + vexp(-a));
  const v16 v = a * g.slope + g.offset;
  return sel(v < v16{}, v16{}, sel(v > splat(1.0f), splat(1.0f), v));
}
template <bool kHard, bool kInclusive>
inline v16 gate_grad(const Gate& g, v16 a, v16 y) {
  if (!kHard) return y * (1.0f - y);
  v16i in;
  if (kInclusive) {
    const v16 v = a * g.slope + g.offset;
    in = (v >= v16{}) & (v <= splat(1.0f));
  } else {
    in = (a > splat(g.lo)) & (a < splat(g.hi));
  }
  return sel(in, splat(g.slope), v16{});
}

// c[r][j] += sum_k a[r*sa + k*ka] * b[k*bs + j*16 .. +16] for r < MR, j < NB, k in order: the
// register-tiled multiply-add both tile kinds below are made of. Each accumulator lane sums its
// K products in k order whatever the tile shape.
template <int MR, int NB>
__attribute__((always_inline)) inline void madd_core(v16 (&c)[kMR][kNB], const float* a, int64_t sa, int64_t ka,
                                                     int64_t K, const float* b, int64_t bs) {
  for (int64_t k = 0; k < K; ++k) {
    v16 bv[NB];
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) bv[j] = ld(b + k * bs + j * kL);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const v16 av = splat(a[r * sa + k * ka]);
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) c[r][j] = fmadd(av, bv[j], c[r][j]);
    }
  }
}

// acc[r][G0+j] += sum_k a[r*sa + k] * b[k][j] for r < MR, j < NB: b is a K x (NB*16) panel.
// Not inlined: the accumulators live in registers here and in memory (L1) for the epilogue,
// which would otherwise spill them around its own temporaries.
// kInit: the tile starts at zero (all kNB groups of the MR rows) instead of acc's values.
template <int MR, int NB, int G0, bool kInit>
__attribute__((noinline)) void tile_madd(v16 (&acc)[kMR][kNB], const float* a, int64_t sa, int64_t K,
                                         const float* b) {
  static_assert(G0 + NB <= kNB, "accumulator groups");
  v16 c[kMR][kNB];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < kNB; ++j) {
      if (j >= G0 && j < G0 + NB) c[r][j - G0] = kInit ? v16{} : acc[r][j];
      else if (kInit) acc[r][j] = v16{};
    }
  madd_core<MR, NB>(c, a, sa, 1, K, b, NB * kL);
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) acc[r][G0 + j] = c[r][j];
}

// c[r*cs + j*16 + l] += sum_k a[r + k*ka] * b[k*bs + j*16 + l] for r < MR, j < NB: a tile of a
// weight gradient (transposed, in memory) plus the products of K (step, sample) rows, b being
// gate gradients (row stride bs) and a the inputs they multiply (row stride ka).
template <int MR, int NB>
__attribute__((noinline)) void tile_update(float* c, int64_t cs, const float* a, int64_t ka, int64_t K,
                                           const float* b, int64_t bs) {
  v16 acc[kMR][kNB];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) acc[r][j] = ld(c + r * cs + j * kL);
  madd_core<MR, NB>(acc, a, 1, ka, K, b, bs);
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) st(c + r * cs + j * kL, acc[r][j]);
}

// Calls f(std::integral_constant<int, MR>, n) for the row blocks of [n0, n1): MR = 6, the
// last block shorter. (Splitting a 6+2 remainder as 4+4 measured no faster: both load the
// panel twice.)
template <typename F>
void for_row_blocks(int64_t n0, int64_t n1, F&& f) {
  int64_t n = n0;
  for (; n + kMR <= n1; n += kMR) f(std::integral_constant<int, kMR>{}, n);
  switch (n1 - n) {
    case 5: f(std::integral_constant<int, 5>{}, n); break;
    case 4: f(std::integral_constant<int, 4>{}, n); break;
    case 3: f(std::integral_constant<int, 3>{}, n); break;
    case 2: f(std::integral_constant<int, 2>{}, n); break;
    case 1: f(std::integral_constant<int, 1>{}, n); break;
    default: break;
  }
}

// Runs body(n0, n1) on the batch split into one contiguous row range per thread.
template <typename F>
void for_thread_rows(int64_t N, int threads, F&& body) {
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, N));
#pragma omp parallel for num_threads(static_cast<int>(parts)) schedule(static, 1)
  for (int64_t c = 0; c < parts; ++c) body(N * c / parts, N * (c + 1) / parts);
}

// Packs w (rows of length K, row stride K) into per-unit-block panels for tile_madd: panel u
// holds K x (count*16): column j*16+l is row rows[j]*H + u*16 + l of w (zero past H).
std::vector<float> pack_gate_panels(const float* w, int64_t K, int64_t H, std::initializer_list<int64_t> rows) {
  const int64_t UB = (H + kL - 1) / kL, NB = static_cast<int64_t>(rows.size());
  std::vector<float> p(static_cast<std::size_t>(UB * K * NB * kL), 0.0f);
  for (int64_t u = 0; u < UB; ++u)
    for (int64_t k = 0; k < K; ++k) {
      int64_t j = 0;
      for (int64_t g : rows) {
        for (int64_t l = 0; l < kL && u * kL + l < H; ++l)
          p[static_cast<std::size_t>(((u * K + k) * NB + j) * kL + l)] = w[(g * H + u * kL + l) * K + k];
        ++j;
      }
    }
  return p;
}

// Packs rows [r0, r0+K) of w (row length H) into panels of 4 unit blocks for the backward
// tiles: panel P holds K x 64, column c being w[(r0+k)*H + P*64 + c] (zero past H).
std::vector<float> pack_unit_panels(const float* w, int64_t r0, int64_t K, int64_t H) {
  const int64_t P = (H + kNB * kL - 1) / (kNB * kL);
  std::vector<float> p(static_cast<std::size_t>(P * K * kNB * kL), 0.0f);
  for (int64_t q = 0; q < P; ++q)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < kNB * kL && q * kNB * kL + c < H; ++c)
        p[static_cast<std::size_t>((q * K + k) * kNB * kL + c)] = w[(r0 + k) * H + q * kNB * kL + c];
  return p;
}

// Bias per unit block and gate group: out[(u*count + j)*16 + l] = sum of the given vectors at
// row rows[j]*H + u*16 + l (null vectors skipped).
std::vector<float> pack_bias(const float* b1, const float* b2, int64_t H,
                             std::initializer_list<std::pair<int64_t, int>> groups) {
  const int64_t UB = (H + kL - 1) / kL, NB = static_cast<int64_t>(groups.size());
  std::vector<float> p(static_cast<std::size_t>(UB * NB * kL), 0.0f);
  for (int64_t u = 0; u < UB; ++u) {
    int64_t j = 0;
    for (const auto& g : groups) {  // g.second: 1 = b1 only, 2 = b2 only, 3 = b1 + b2
      for (int64_t l = 0; l < kL && u * kL + l < H; ++l) {
        const int64_t i = g.first * H + u * kL + l;
        const float v1 = (g.second & 1) && b1 ? b1[i] : 0.0f, v2 = (g.second & 2) && b2 ? b2[i] : 0.0f;
        p[static_cast<std::size_t>((u * NB + j) * kL + l)] = v1 + v2;
      }
      ++j;
    }
  }
  return p;
}

// A float buffer left uninitialised (every element is written before it is read).
class Scratch {
 public:
  explicit Scratch(int64_t n) : p_(n > 0 ? new float[static_cast<std::size_t>(n)] : nullptr) {}
  float* data() { return p_.get(); }

 private:
  std::unique_ptr<float[]> p_;
};

// The sizes every driver uses and the workspace views (core/ops/rnn.h's pre, act, aux). With a
// workspace for the backward its rows are (step, sample) pairs, time-major: row t*N + n, so the
// rows a thread touches at one step are contiguous (batch-major ones are 43 KB apart; the change
// measured within this machine's noise). Without one
// (inference) the forward keeps one step: row n, read (the LSTM's c_{t-1}) before it is
// overwritten. The layout is this kernel pair's own: only its backward reads it.
struct Dims {
  int64_t N, S, F, H, GH, UB;
  int64_t wt;  // workspace row of (n, t) = t*wt + n: wt = N, or 0 for the one-step workspace
  float *pre, *act, *aux;
  Dims(const RnnParams& p, float* ws, bool all_steps)
      : N(p.batch), S(p.steps), F(p.input), H(p.hidden), GH(rnn_gates(p.cell) * p.hidden),
        UB((p.hidden + kL - 1) / kL), wt(all_steps ? p.batch : 0), pre(ws),
        act(ws + N * (all_steps ? S : 1) * GH), aux(ws + 2 * N * (all_steps ? S : 1) * GH) {}
  int lanes(int64_t u) const { return static_cast<int>(std::min<int64_t>(kL, H - u * kL)); }
  int64_t wrow(int64_t n, int64_t t) const { return t * wt + n; }
};

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
    for (int64_t u = 0; u < d.UB; ++u) {
      const int m = d.lanes(u);
      const v16 bhn = ld(pbn + u * kL);
      for_row_blocks(n0, n1, [&](auto mr, int64_t n) {
        constexpr int MR = decltype(mr)::value;
        v16 acc[kMR][kNB];
        tile_madd<MR, 1, 0, true>(acc, rh + n * H, H, H, pn + u * H * kL);
#pragma GCC unroll 1
        for (int r = 0; r < MR; ++r) {
          const RowAt w(d, h_seq, n + r, t, u);
          if (mask && !mask[w.row]) continue;
          const v16 rn = acc[r][0] + bhn;
          const v16 an = ldn(w.a + 2 * H, m) + rn;
          const v16 nv = vtanh(an);
          stn(w.a + 2 * H, an, m);
          stn(w.y + 2 * H, nv, m);
          stn(w.ax, rn, m);
          stn(w.h, gru_state<kKeepsOld>(ldn(w.y + H, m), nv, w.hprev(d, t, m)), m);
        }
      });
    }
  }
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
    const std::vector<float> pn = pack_gate_panels(w_hh, H, H, {2});
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

void register_rnn_fast(KernelRegistry& reg) {
  RnnKernel k;
  k.name = "fast";  // register-tiled products and the cell math fused; calls no GEMM
  k.supports_doc = "every params field, float32";
  k.supports = [](const RnnParams&, DType dt) { return dt == DType::f32; };
  k.forward_f32 = rnn_forward_fast;
  k.backward_f32 = rnn_backward_fast;
  reg.rnn.at(KernelBackend::fast) = k;
}

}  // namespace driftlab
