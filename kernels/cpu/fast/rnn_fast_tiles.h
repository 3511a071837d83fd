// The fast LSTM/GRU kernels' shared pieces: the 16-lane vector type and its loads, the gate
// math, the register tiles, the weight packing and the workspace views (Dims). The kernels:
// rnn_fast.cpp (the forward) and rnn_fast_backward.cpp. What the kernels do:
//
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
#pragma once
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
namespace rnn_fast {


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
// The divide form (PyTorch's hardsigmoid: (x + shift) clamped to [0, range], divided by range)
// takes shift and range as core/ops/activation.h's hard_sigmoid_of casts them, so that each lane
// is that scalar's value: one add, two compares and one correctly rounded divide.
struct Gate {
  float slope, offset, lo, hi, shift, range;
  bool divide;
  explicit Gate(const ActivationParams& g)
      : slope(static_cast<float>(g.hs_slope)),
        offset(static_cast<float>(g.hs_offset)),
        lo(static_cast<float>(-g.hs_offset / g.hs_slope)),
        hi(static_cast<float>((1.0 - g.hs_offset) / g.hs_slope)),
        shift(static_cast<float>(g.hs_offset / g.hs_slope)),
        range(static_cast<float>(1.0 / g.hs_slope)),
        divide(g.hs_divide) {}
};
template <bool kHard>
inline v16 gate(const Gate& g, v16 a) {
  if (!kHard) return 1.0f / (1.0f + vexp(-a));
  if (g.divide) {
    const v16 v = a + g.shift;
    return sel(v < v16{}, v16{}, sel(v > splat(g.range), splat(g.range), v)) / g.range;
  }
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
inline std::vector<float> pack_gate_panels(const float* w, int64_t K, int64_t H, std::initializer_list<int64_t> rows) {
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
inline std::vector<float> pack_unit_panels(const float* w, int64_t r0, int64_t K, int64_t H) {
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
inline std::vector<float> pack_bias(const float* b1, const float* b2, int64_t H,
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

// The kernels are reachable through the registry only (tests/test_registry.cpp): rnn_fast.cpp
// registers the pair, its forward and, through this, the backward of rnn_fast_backward.cpp.
void register_rnn_fast_backward(RnnKernel& k);

}  // namespace rnn_fast
}  // namespace driftlab
