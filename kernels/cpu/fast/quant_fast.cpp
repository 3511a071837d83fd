// Fast int8 kernels: quantize/dequantize, qconv2d, qdense, qmaxpool2d, qadd, qglobal_avg_pool
// (registry slot `fast`). Layouts as the reference's: x (N,C,H,W), w (K,C,R,S), y (N,K,P,Q); dense
// x (n,in), w (out,in), y (n,out); qadd elementwise; global pooling (N,C,H,W) -> (N,C). Every
// output is written (=).
//
// Bit-exact with kernels/cpu/ref/quant_ref.cpp for every call supports() accepts, for any thread
// count: the accumulators are integers, and every output element goes through the same
// requantize_one() / quantize_one() / dequantize_one() of core/ops/quant.h. Those loops are
// written so that the compiler vectorises them (the rule and rounding are template constants),
// which changes no bit: the same float operations, no contraction (-ffp-contract=off).
//
// Conv and dense are one u8 x s8 GEMM with int32 accumulators:
//   acc[k][m] = corr[k] + sum_j u[j][m] * w[k][j],  corr[k] = bias[k] - zp_u * sum_j w[k][j]
// where u = x for uint8 and x + 128 (sign bit flipped) for int8, and zp_u the zero point moved
// alike. Since u - zp_u = x - x_zp, acc = bias + sum (x - x_zp) * w: the reference's integer
// (int32 wraps the same way mod 2^32 in both orders, and the reference's own sum fits in int32,
// QConv2dParams::validate). Padding taps read zp_u and so add 0, as the reference skips them.
// A group of four consecutive reduction terms of one column shares one 32-bit lane, what AVX-512
// VNNI's VPDPBUSD multiplies (u8 x s8) and adds in one instruction. Where the CPU lacks VNNI
// (checked at run time) a portable loop computes the same integers.
//
// Where the build targets AVX-512 (and at run time where the CPU has it) the float requantization
// with round-half-even, qadd's body, the plane row copy and the panel interleave are written with
// intrinsics instead: the same operations per element, the rounding by a conversion whose
// immediate says nearest-even (no floating-point mode is read, as round_with reads none).
//
// This file is compiled as if with -fno-trapping-math (the pragma below): GCC 12 vectorises
// std::floor (round_with) only then. It changes no value, only whether FP exception flags may be
// raised differently; -ffp-contract=off and everything else of the build stay as they are.
//
// The convolution reads no panel: the image is copied once into a quad plane (four channels'
// bytes per pixel, split into the stride's phases, padded: QuadPlane below), where each group
// (four channels of one kernel tap) over the GEMM's columns m = oh * ws + ow is one contiguous
// shifted window. The ws - Q columns past each output row are computed and dropped. Where the
// requantization is a float rule with round-half-even (both PyTorch schemes) it runs on each
// tile as it leaves the GEMM, into the output pixels; other rules requantize the tile's int32.
// The dense layer packs its rows into a panel Xp[j/4][m][4] and runs the same tiles.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include <omp.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DL_QFAST_X86 1
#endif

#include "core/error.h"
#include "kernels/cpu/pool2d_loops.h"
#include "kernels/cpu/quant_loops.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

constexpr int kMaxKb = 8;  // output channels per register tile
constexpr int kMaxNv = 3;  // 16-column vectors per register tile (8 x 3 accumulators + 3 panel loads)

// ---------------------------------------------------------------------------------------------
// Checks shared by the entry points (the reference's messages).

void check_tensor(const char* op, const char* name, const Tensor& t, const Shape& shape, DType dtype) {
  check(t.dtype() == dtype, op, ": ", name, " is ", dtype_name(t.dtype()), ", expected ", dtype_name(dtype));
  check_shape(op, name, t, shape);
}

void check_q_io(const char* op, DType x_dtype, DType y_dtype, const Tensor& x, const Shape& xs, const Tensor& w,
                const Shape& ws, const Tensor* bias, int64_t k, bool has_bias, const Tensor& y, const Shape& ys) {
  check_tensor(op, "input", x, xs, x_dtype);
  check_tensor(op, "weight", w, ws, DType::i8);
  check((bias != nullptr) == has_bias, op, ": params say ", has_bias ? "a" : "no", " bias, the call passes ",
        bias ? "one" : "none");
  if (bias) check_tensor(op, "bias", *bias, {k}, DType::i32);
  check_tensor(op, "output", y, ys, y_dtype);
}

bool is_q8(DType t) { return t == DType::u8 || t == DType::i8; }

// ---------------------------------------------------------------------------------------------
// Requantization and quantization rows: requantize_one / quantize_one per element, with the rule
// and rounding fixed at compile time so that the loop vectorises.

template <typename TY>
using RequantRowFn = void (*)(const int32_t*, int64_t, const RequantChannel&, int32_t, int32_t, int32_t, TY*);

// y[i] = requantize_one(acc[i], ch, ...), i < n: one output channel's run.
template <RequantRule R, RoundRule RR, typename TY>
void requant_row(const int32_t* __restrict acc, int64_t n, const RequantChannel& channel, int32_t zp, int32_t lo,
                 int32_t hi, TY* __restrict y) {
  const RequantChannel ch = channel;  // a local copy: stores through TY* (a char type) cannot alias it
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<TY>(requantize_one(acc[i], ch, R, RR, zp, lo, hi));
}

template <RequantRule R, typename TY>
RequantRowFn<TY> requant_row_for(RoundRule round) {
  return round == RoundRule::half_even ? requant_row<R, RoundRule::half_even, TY>
                                       : requant_row<R, RoundRule::half_away, TY>;
}

#if DL_QFAST_X86
// The float rules with round-half-even (qnnpack's, oneDNN's: what both PyTorch schemes run), 16
// accumulators per step with AVX-512: the reference's operations in its order (int32 -> float,
// + bias only when it is nonzero, * scale, [+ float(zp)], the clamp in float with NaN sent to the
// low end, the rounding, + zp). The rounding is the conversion's embedded round-to-nearest-even
// (an immediate: MXCSR's mode is not read, as round_with reads none), which is round_with(v,
// half_even) for every clamped v; max_ps(v, lo) returns lo for a NaN v, as the reference ends.
// The clamped result is in [lo, hi], a byte of TY: the truncating narrow keeps it.
template <RequantRule R, typename TY>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void requant_row_avx512(const int32_t* __restrict acc, int64_t n,
                                                                             const RequantChannel& ch, int32_t zp,
                                                                             int32_t lo, int32_t hi, TY* __restrict y) {
  static_assert(R == RequantRule::float_multiply || R == RequantRule::float_multiply_add_zp, "float rules only");
  constexpr bool kAddZp = R == RequantRule::float_multiply_add_zp;
  const bool add_bias = ch.bias != 0.f;
  const __m512 bias = _mm512_set1_ps(ch.bias), scale = _mm512_set1_ps(ch.scale);
  const __m512 fzp = _mm512_set1_ps(static_cast<float>(zp));
  const __m512 flo = _mm512_set1_ps(static_cast<float>(kAddZp ? lo : lo - zp));
  const __m512 fhi = _mm512_set1_ps(static_cast<float>(kAddZp ? hi : hi - zp));
  const __m512i izp = _mm512_set1_epi32(kAddZp ? 0 : zp);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    __m512 v = _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(m, acc + i));
    if (add_bias) v = _mm512_add_ps(v, bias);
    v = _mm512_mul_ps(v, scale);
    if (kAddZp) v = _mm512_add_ps(v, fzp);
    v = _mm512_min_ps(_mm512_max_ps(v, flo), fhi);
    const __m512i q = _mm512_add_epi32(_mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), izp);
    _mm_mask_storeu_epi8(reinterpret_cast<void*>(y + i), m, _mm512_cvtepi32_epi8(q));
  }
}

// The same operations with AVX2, 8 accumulators a step (CPUs without AVX-512). The rounding is
// ROUNDPS with its immediate (nearest even, MXCSR not read) and then a truncating conversion of
// the already integral value; the narrow packs 8 int32 (in [lo, hi], a byte of TY) with the
// type's saturating pack, which changes none of them. A tail of n % 8 goes through the reference's
// requantize_one.
template <RequantRule R, typename TY>
__attribute__((target("avx2"))) void requant_row_avx2(const int32_t* __restrict acc, int64_t n,
                                                      const RequantChannel& channel, int32_t zp, int32_t lo,
                                                      int32_t hi, TY* __restrict y) {
  static_assert(R == RequantRule::float_multiply || R == RequantRule::float_multiply_add_zp, "float rules only");
  constexpr bool kAddZp = R == RequantRule::float_multiply_add_zp;
  const RequantChannel ch = channel;
  const bool add_bias = ch.bias != 0.f;
  const __m256 bias = _mm256_set1_ps(ch.bias), scale = _mm256_set1_ps(ch.scale);
  const __m256 fzp = _mm256_set1_ps(static_cast<float>(zp));
  const __m256 flo = _mm256_set1_ps(static_cast<float>(kAddZp ? lo : lo - zp));
  const __m256 fhi = _mm256_set1_ps(static_cast<float>(kAddZp ? hi : hi - zp));
  const __m256i izp = _mm256_set1_epi32(kAddZp ? 0 : zp);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i)));
    if (add_bias) v = _mm256_add_ps(v, bias);
    v = _mm256_mul_ps(v, scale);
    if (kAddZp) v = _mm256_add_ps(v, fzp);
    v = _mm256_min_ps(_mm256_max_ps(v, flo), fhi);  // a NaN v becomes flo (max returns its second operand)
    v = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i q = _mm256_add_epi32(_mm256_cvttps_epi32(v), izp);
    const __m256i w16 = _mm256_packs_epi32(q, q);  // lane 0: q0..q3 twice, lane 1: q4..q7 twice
    const __m256i b8 = std::is_same<TY, uint8_t>::value ? _mm256_packus_epi16(w16, w16) : _mm256_packs_epi16(w16, w16);
    const __m128i lo4 = _mm256_castsi256_si128(b8), hi4 = _mm256_extracti128_si256(b8, 1);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), _mm_unpacklo_epi32(lo4, hi4));
  }
  for (; i < n; ++i) y[i] = static_cast<TY>(requantize_one(acc[i], ch, R, RoundRule::half_even, zp, lo, hi));
}

bool cpu_has_avx2_only() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && !__builtin_cpu_supports("avx512bw");
}

bool cpu_has_avx512bw_vl() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}
#endif

template <typename TY>
RequantRowFn<TY> requant_row_for(const Requant& rq) {
#if DL_QFAST_X86
  static const bool avx512 = cpu_has_avx512bw_vl(), avx2 = cpu_has_avx2_only();
  if (avx512 && rq.round == RoundRule::half_even) {
    if (rq.rule == RequantRule::float_multiply) return requant_row_avx512<RequantRule::float_multiply, TY>;
    if (rq.rule == RequantRule::float_multiply_add_zp) return requant_row_avx512<RequantRule::float_multiply_add_zp, TY>;
  }
  if (avx2 && rq.round == RoundRule::half_even) {
    if (rq.rule == RequantRule::float_multiply) return requant_row_avx2<RequantRule::float_multiply, TY>;
    if (rq.rule == RequantRule::float_multiply_add_zp) return requant_row_avx2<RequantRule::float_multiply_add_zp, TY>;
  }
#endif
  switch (rq.rule) {
    case RequantRule::fixed_point_double_rounding:
      return requant_row_for<RequantRule::fixed_point_double_rounding, TY>(rq.round);
    case RequantRule::fixed_point_single_rounding:
      return requant_row_for<RequantRule::fixed_point_single_rounding, TY>(rq.round);
    case RequantRule::float_multiply: return requant_row_for<RequantRule::float_multiply, TY>(rq.round);
    case RequantRule::float_multiply_add_zp: return requant_row_for<RequantRule::float_multiply_add_zp, TY>(rq.round);
  }
  fail("qconv2d: unknown requantization rule");
}

// ---------------------------------------------------------------------------------------------
// The u8 x s8 GEMM.

struct PackedWeights {
  int64_t k = 0, j = 0, j4 = 0;
  std::vector<int8_t> w;      // (k, j4): each row zero-padded to a multiple of 4 terms
  std::vector<int32_t> corr;  // bias[k] - zp_u * sum_j w[k][j], in wrapping int32
};

// w (k, j) row-major, as both (K,C,R,S) and (out,in) are.
PackedWeights pack_weights(const int8_t* w, int64_t k, int64_t j, const int32_t* bias, int32_t zp_u) {
  PackedWeights p;
  p.k = k, p.j = j, p.j4 = (j + 3) / 4 * 4;
  p.w.assign(static_cast<std::size_t>(k * p.j4), 0);
  p.corr.resize(static_cast<std::size_t>(k));
  for (int64_t kk = 0; kk < k; ++kk) {
    uint32_t sum = 0;  // unsigned: wraps (mod 2^32) where int32 would be undefined
    for (int64_t jj = 0; jj < j; ++jj) {
      p.w[kk * p.j4 + jj] = w[kk * j + jj];
      sum += static_cast<uint32_t>(static_cast<int32_t>(w[kk * j + jj]));
    }
    const uint32_t b = bias ? static_cast<uint32_t>(bias[kk]) : 0u;
    p.corr[kk] = static_cast<int32_t>(b - static_cast<uint32_t>(zp_u) * sum);
  }
  return p;
}

// c[kb][col] = corr[kb] + sum_g sum_t xp[goff[g] + 4*col + t] * w[kb][4g+t] for KB rows and 16*NV
// columns. w: row k0 (stride j4); xp: column m0 (group g's four terms of column col at byte
// goff[g] + 4*col: a panel's groups, or a convolution tap's shifted window of the quad plane);
// c: (k0, m0), ldc.
using TileFn = void (*)(const int8_t* w, int64_t j4, const int32_t* corr, const uint8_t* xp, const int64_t* goff,
                        int32_t* c, int64_t ldc);

// The portable loop of either rule. The int16 pair rules (DotRule::int16_pairs_*: what x86 without
// VNNI computes, ORT's MLAS and oneDNN): each group's terms t0,t1 and t2,t3 summed in pairs
// saturated to int16, as VPMADDUBSW does, the pairs then added in int32. A group is four channels
// of one tap (conv) or four consecutive row terms (dense, ORT's odd-C im2col); terms past the row
// have weight 0 and add 0.
inline int32_t sat16(int32_t v) { return std::min<int32_t>(32767, std::max<int32_t>(-32768, v)); }

template <int KB, int NV, bool Pairs>
void tile_portable_rule(const int8_t* w, int64_t j4, const int32_t* corr, const uint8_t* xp, const int64_t* goff,
                        int32_t* c, int64_t ldc) {
  for (int kb = 0; kb < KB; ++kb)
    for (int col = 0; col < 16 * NV; ++col) {
      uint32_t acc = static_cast<uint32_t>(corr[kb]);
      for (int64_t g = 0; g < j4 / 4; ++g) {
        const uint8_t* u = xp + goff[g] + col * 4;
        const int8_t* wk = w + kb * j4 + 4 * g;
        if (Pairs) {
          acc += static_cast<uint32_t>(sat16(u[0] * wk[0] + u[1] * wk[1]));
          acc += static_cast<uint32_t>(sat16(u[2] * wk[2] + u[3] * wk[3]));
        } else {
          for (int t = 0; t < 4; ++t)
            acc += static_cast<uint32_t>(static_cast<int32_t>(u[t]) * static_cast<int32_t>(wk[t]));
        }
      }
      c[kb * ldc + col] = static_cast<int32_t>(acc);
    }
}
template <int KB, int NV>
void tile_portable(const int8_t* w, int64_t j4, const int32_t* corr, const uint8_t* xp, const int64_t* goff,
                   int32_t* c, int64_t ldc) {
  tile_portable_rule<KB, NV, false>(w, j4, corr, xp, goff, c, ldc);
}
template <int KB, int NV>
void tile_pairs_portable(const int8_t* w, int64_t j4, const int32_t* corr, const uint8_t* xp, const int64_t* goff,
                         int32_t* c, int64_t ldc) {
  tile_portable_rule<KB, NV, true>(w, j4, corr, xp, goff, c, ldc);
}

#if DL_QFAST_X86
#define DL_QFAST_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
// The tile's accumulators: acc[kb][v] = corr[kb] + sum over groups (the TileFn formula).
template <int KB, int NV>
DL_QFAST_VNNI_TARGET inline __attribute__((always_inline)) void vnni_accumulate(__m512i (&acc)[KB][NV],
                                                                                 const int8_t* w, int64_t j4,
                                                                                 const int32_t* corr,
                                                                                 const uint8_t* xp,
                                                                                 const int64_t* goff) {
#pragma GCC unroll 8
  for (int kb = 0; kb < KB; ++kb)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[kb][v] = _mm512_set1_epi32(corr[kb]);
  const int64_t groups = j4 / 4;
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* xg = xp + goff[g];
    __m512i a[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) a[v] = _mm512_loadu_si512(xg + 64 * v);
#pragma GCC unroll 8
    for (int kb = 0; kb < KB; ++kb) {
      int32_t quad;
      std::memcpy(&quad, w + kb * j4 + 4 * g, 4);
      const __m512i b = _mm512_set1_epi32(quad);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[kb][v] = _mm512_dpbusd_epi32(acc[kb][v], a[v], b);
    }
  }
}

template <int KB, int NV>
DL_QFAST_VNNI_TARGET __attribute__((noinline)) void tile_vnni(const int8_t* w, int64_t j4, const int32_t* corr, const uint8_t* xp,
                                    const int64_t* goff, int32_t* c, int64_t ldc) {
  __m512i acc[KB][NV];
  vnni_accumulate<KB, NV>(acc, w, j4, corr, xp, goff);
#pragma GCC unroll 8
  for (int kb = 0; kb < KB; ++kb)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_storeu_si512(c + kb * ldc + 16 * v, acc[kb][v]);
}

bool cpu_has_vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
}

// AVX2 without VNNI, exact (Pairs false): VPMADDUBSW (u8 x s8, int16 pairs) would saturate, so
// each 32-bit lane's four bytes are split into two int16 lanes each (even terms t0, t2 and odd
// terms t1, t3, zero-extended), the weight quad alike (sign-extended), and VPMADDWD forms
// t0 w0 + t2 w2 and t1 w1 + t3 w3 exactly in int32 (|each| <= 2 * 255 * 128). The sums are the
// same integers as the portable loop's, wrapping alike mod 2^32.
// The int16-pairs rule (Pairs true, any AVX2 CPU): VPMADDUBSW is that rule (each byte pair of a
// 16-bit lane summed with saturation), VPMADDWD by ones adds a 32-bit lane's two pairs exactly.
// The TileFn's KB x 16 NV tile is computed in sub-tiles of 4 output channels x 16 columns (8
// accumulators, 4 split input vectors, 2 weight vectors: 14 of the 16 registers).
#define DL_QFAST_AVX2_TARGET __attribute__((target("avx2")))
template <int KB, int NV, bool Pairs>
DL_QFAST_AVX2_TARGET __attribute__((noinline)) void tile_avx2_rule(const int8_t* w, int64_t j4, const int32_t* corr,
                                                                   const uint8_t* xp, const int64_t* goff, int32_t* c,
                                                                   int64_t ldc) {
  const int64_t groups = j4 / 4;
  const __m256i low_bytes = _mm256_set1_epi16(0x00FF), ones = _mm256_set1_epi16(1);
#pragma GCC unroll 3
  for (int v = 0; v < NV; ++v)
#pragma GCC unroll 2
    for (int k0 = 0; k0 < KB; k0 += 4) {
      __m256i acc[4][2];
#pragma GCC unroll 4
      for (int kb = 0; kb < 4; ++kb) acc[kb][0] = acc[kb][1] = _mm256_setzero_si256();
      for (int64_t g = 0; g < groups; ++g) {
        const uint8_t* xg = xp + goff[g] + 64 * v;
        const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xg));
        const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xg + 32));
        __m256i e0 = x0, o0 = x0, e1 = x1, o1 = x1;
        if (!Pairs) {
          e0 = _mm256_and_si256(x0, low_bytes), o0 = _mm256_srli_epi16(x0, 8);
          e1 = _mm256_and_si256(x1, low_bytes), o1 = _mm256_srli_epi16(x1, 8);
        }
#pragma GCC unroll 4
        for (int kb = 0; kb < 4; ++kb) {
          if (k0 + kb >= KB) break;  // KB is a template constant: resolved at compile time
          int32_t quad;
          std::memcpy(&quad, w + (k0 + kb) * j4 + 4 * g, 4);
          const __m256i b = _mm256_set1_epi32(quad);
          if (Pairs) {
            acc[kb][0] = _mm256_add_epi32(acc[kb][0], _mm256_madd_epi16(_mm256_maddubs_epi16(x0, b), ones));
            acc[kb][1] = _mm256_add_epi32(acc[kb][1], _mm256_madd_epi16(_mm256_maddubs_epi16(x1, b), ones));
          } else {
            const __m256i we = _mm256_srai_epi16(_mm256_slli_epi16(b, 8), 8), wo = _mm256_srai_epi16(b, 8);
            acc[kb][0] = _mm256_add_epi32(acc[kb][0], _mm256_add_epi32(_mm256_madd_epi16(e0, we), _mm256_madd_epi16(o0, wo)));
            acc[kb][1] = _mm256_add_epi32(acc[kb][1], _mm256_add_epi32(_mm256_madd_epi16(e1, we), _mm256_madd_epi16(o1, wo)));
          }
        }
      }
#pragma GCC unroll 4
      for (int kb = 0; kb < 4; ++kb) {
        if (k0 + kb >= KB) break;
        const __m256i cv = _mm256_set1_epi32(corr[k0 + kb]);
        int32_t* row = c + (k0 + kb) * ldc + 16 * v;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row), _mm256_add_epi32(acc[kb][0], cv));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 8), _mm256_add_epi32(acc[kb][1], cv));
      }
    }
}
template <int KB, int NV>
void tile_avx2(const int8_t* w, int64_t j4, const int32_t* corr, const uint8_t* xp, const int64_t* goff, int32_t* c,
               int64_t ldc) {
  tile_avx2_rule<KB, NV, false>(w, j4, corr, xp, goff, c, ldc);
}
template <int KB, int NV>
void tile_pairs_avx2(const int8_t* w, int64_t j4, const int32_t* corr, const uint8_t* xp, const int64_t* goff,
                     int32_t* c, int64_t ldc) {
  tile_avx2_rule<KB, NV, true>(w, j4, corr, xp, goff, c, ldc);
}

bool cpu_has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
}
#else
bool cpu_has_vnni() { return false; }
bool cpu_has_avx2() { return false; }
#endif

// The tile functions for every (KB, NV): VNNI where the CPU has it, else AVX2, else portable.
struct Tiles {
  TileFn fn[kMaxKb + 1][kMaxNv + 1] = {};
  TileFn pairs[kMaxKb + 1][kMaxNv + 1] = {};  // DotRule::int16_pairs_hwc: AVX2 (VNNI or not), else portable
  bool vnni = false, avx2 = false;
  template <int KB, int NV>
  void fill_one() {
#if DL_QFAST_X86
    fn[KB][NV] = vnni ? tile_vnni<KB, NV> : avx2 ? tile_avx2<KB, NV> : tile_portable<KB, NV>;
    pairs[KB][NV] = avx2 ? tile_pairs_avx2<KB, NV> : tile_pairs_portable<KB, NV>;
#else
    fn[KB][NV] = tile_portable<KB, NV>;
    pairs[KB][NV] = tile_pairs_portable<KB, NV>;
#endif
  }
  // The tile table of a product rule (the int16 pair rules where supports() admits them).
  const TileFn (*table(DotRule d) const)[kMaxNv + 1] { return d == DotRule::exact ? fn : pairs; }
  template <int KB>
  void fill_row() {
    fill_one<KB, 1>(), fill_one<KB, 2>(), fill_one<KB, 3>();
  }
  Tiles() : vnni(cpu_has_vnni()), avx2(cpu_has_avx2()) {
    fill_row<1>(), fill_row<2>(), fill_row<3>(), fill_row<4>(), fill_row<5>(), fill_row<6>(), fill_row<7>(),
        fill_row<8>();
  }
};

const Tiles& tiles() {
  static const Tiles t;  // a property of the CPU, decided once
  return t;
}

// c (k, mpad) = corr + w . Xp over columns [0, mpad), mpad a multiple of 16, under product rule `dot`.
void gemm_panel(const PackedWeights& pw, const uint8_t* xp, int64_t mpad, int32_t* c, DotRule dot) {
  const auto fn = tiles().table(dot);
  std::vector<int64_t> goff(static_cast<std::size_t>(pw.j4 / 4));
  for (std::size_t g = 0; g < goff.size(); ++g) goff[g] = static_cast<int64_t>(g) * mpad * 4;
  for (int64_t m0 = 0; m0 < mpad; m0 += 16 * kMaxNv) {
    const int nv = static_cast<int>(std::min<int64_t>(kMaxNv, (mpad - m0) / 16));
    for (int64_t k0 = 0; k0 < pw.k; k0 += kMaxKb) {
      const int kb = static_cast<int>(std::min<int64_t>(kMaxKb, pw.k - k0));
      fn[kb][nv](pw.w.data() + k0 * pw.j4, pw.j4, pw.corr.data() + k0, xp + m0 * 4, goff.data(),
                 c + k0 * mpad + m0, mpad);
    }
  }
}

// dst[m*4 + t] = src_t[m] ^ flip for m < len, t < 4: four byte rows into one panel group.
void interleave4(const uint8_t* s0, const uint8_t* s1, const uint8_t* s2, const uint8_t* s3, int64_t len,
                 uint8_t flip, uint8_t* dst) {
  int64_t m = 0;
#if defined(__AVX512VBMI__)
  // 16 columns of the four rows in one register's four 128-bit lanes, one byte permutation to
  // [m][t] order: output byte 4m + t is lane t's byte m
  const __m512i idx = _mm512_set_epi8(63, 47, 31, 15, 62, 46, 30, 14, 61, 45, 29, 13, 60, 44, 28, 12, 59, 43, 27, 11,
                                      58, 42, 26, 10, 57, 41, 25, 9, 56, 40, 24, 8, 55, 39, 23, 7, 54, 38, 22, 6, 53,
                                      37, 21, 5, 52, 36, 20, 4, 51, 35, 19, 3, 50, 34, 18, 2, 49, 33, 17, 1, 48, 32,
                                      16, 0);
  const __m512i f512 = _mm512_set1_epi8(static_cast<char>(flip));
  for (; m + 16 <= len; m += 16) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + m)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s1 + m)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s2 + m)), 2);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s3 + m)), 3);
    _mm512_storeu_si512(dst + 4 * m, _mm512_xor_si512(_mm512_permutexvar_epi8(idx, v), f512));
  }
  if (m < len) {  // the last len - m < 16 columns: masked loads, one masked store (rows of 8 in ResNet-20)
    const int64_t rem = len - m;
    const __mmask16 lm = static_cast<__mmask16>((1u << rem) - 1);
    __m512i v = _mm512_castsi128_si512(_mm_maskz_loadu_epi8(lm, s0 + m));
    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(lm, s1 + m), 1);
    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(lm, s2 + m), 2);
    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(lm, s3 + m), 3);
    const __mmask64 sm = (__mmask64{1} << (4 * rem)) - 1;
    _mm512_mask_storeu_epi8(dst + 4 * m, sm, _mm512_xor_si512(_mm512_permutexvar_epi8(idx, v), f512));
    return;
  }
#endif
#if defined(__SSE2__)
  const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
  auto ld = [&](const uint8_t* s) { return _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)), f); };
  for (; m + 16 <= len; m += 16) {
    const __m128i a = ld(s0 + m), b = ld(s1 + m), c = ld(s2 + m), d = ld(s3 + m);
    const __m128i ab_lo = _mm_unpacklo_epi8(a, b), ab_hi = _mm_unpackhi_epi8(a, b);
    const __m128i cd_lo = _mm_unpacklo_epi8(c, d), cd_hi = _mm_unpackhi_epi8(c, d);
    __m128i* o = reinterpret_cast<__m128i*>(dst + 4 * m);
    _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(ab_lo, cd_lo));
    _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(ab_lo, cd_lo));
    _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(ab_hi, cd_hi));
    _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(ab_hi, cd_hi));
  }
#endif
  for (; m < len; ++m) {
    dst[4 * m + 0] = s0[m] ^ flip;
    dst[4 * m + 1] = s1[m] ^ flip;
    dst[4 * m + 2] = s2[m] ^ flip;
    dst[4 * m + 3] = s3[m] ^ flip;
  }
}

// Four byte rows split by column parity into two quad rows: even[u*4 + t] = src_t[2u] ^ flip,
// odd[u*4 + t] = src_t[2u + 1] ^ flip (a stride-2 convolution's phase planes).
void interleave4_pairs(const uint8_t* s0, const uint8_t* s1, const uint8_t* s2, const uint8_t* s3, int64_t len,
                       uint8_t flip, uint8_t* even, uint8_t* odd) {
  int64_t m = 0;
#if defined(__AVX512VBMI__)
  // 16 columns of the four rows in one register's four 128-bit lanes; one byte permutation puts
  // the 8 even columns' quads in the low 256 bits (byte 4u + t = lane t's byte 2u) and the odd
  // ones' in the high 256 bits
  const __m512i idx = _mm512_set_epi8(63, 47, 31, 15, 61, 45, 29, 13, 59, 43, 27, 11, 57, 41, 25, 9, 55, 39, 23, 7, 53,
                                      37, 21, 5, 51, 35, 19, 3, 49, 33, 17, 1, 62, 46, 30, 14, 60, 44, 28, 12, 58, 42,
                                      26, 10, 56, 40, 24, 8, 54, 38, 22, 6, 52, 36, 20, 4, 50, 34, 18, 2, 48, 32, 16, 0);
  const __m512i f512 = _mm512_set1_epi8(static_cast<char>(flip));
  for (; m < len; m += 16) {
    const int64_t rem = std::min<int64_t>(16, len - m);
    const __mmask16 lm = static_cast<__mmask16>((1u << rem) - 1);
    __m512i v = _mm512_castsi128_si512(_mm_maskz_loadu_epi8(lm, s0 + m));
    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(lm, s1 + m), 1);
    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(lm, s2 + m), 2);
    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(lm, s3 + m), 3);
    v = _mm512_xor_si512(_mm512_permutexvar_epi8(idx, v), f512);
    const int64_t ne = (rem + 1) / 2, no = rem / 2;  // even and odd columns in this step
    _mm256_mask_storeu_epi8(even + 2 * m, static_cast<__mmask32>((uint64_t{1} << (4 * ne)) - 1),
                            _mm512_castsi512_si256(v));
    _mm256_mask_storeu_epi8(odd + 2 * m, static_cast<__mmask32>((uint64_t{1} << (4 * no)) - 1),
                            _mm512_extracti64x4_epi64(v, 1));
  }
#endif
  for (; m < len; ++m) {
    uint8_t* d = (m % 2 ? odd : even) + 4 * (m / 2);
    d[0] = s0[m] ^ flip, d[1] = s1[m] ^ flip, d[2] = s2[m] ^ flip, d[3] = s3[m] ^ flip;
  }
}

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// ---------------------------------------------------------------------------------------------
// qconv2d

// dst[i] = src[i] ^ flip, i < n: an image row into the padded plane (rows of 8 to 32 bytes in
// ResNet-20: a memcpy call each cost as much as the GEMM, so the loop stays inline).
inline void copy_flip(const uint8_t* __restrict src, int64_t n, uint8_t flip, uint8_t* __restrict dst) {
#if defined(__AVX512BW__)
  // 64 bytes a step, the last step masked (GCC's own vectorisation leaves rows under 32 scalar)
  const __m512i f = _mm512_set1_epi8(static_cast<char>(flip));
  for (int64_t i = 0; i < n; i += 64) {
    const __mmask64 m = n - i >= 64 ? ~__mmask64{0} : ((__mmask64{1} << (n - i)) - 1);
    _mm512_mask_storeu_epi8(dst + i, m, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src + i), f));
  }
#else
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i] ^ flip;
#endif
}

// u = x ^ flip: 0 for uint8, 0x80 for int8 (x + 128 in two's complement).
uint8_t sign_flip(DType t) { return t == DType::i8 ? 0x80 : 0x00; }
int32_t shifted_zero_point(DType t, int32_t zp) { return t == DType::i8 ? zp + 128 : zp; }

bool has_padding(const Conv2dParams& g) { return g.pad_t || g.pad_b || g.pad_l || g.pad_r; }

bool qconv2d_supports(const QConv2dParams& p, DType dt) {
  if (dt != p.x_dtype || !is_q8(p.x_dtype) || !is_q8(p.y_dtype) || p.g.flip) return false;
  // int16 pairs: oneDNN's channels (2j, 2j+1) of one tap are the quad's (c0,c1), (c2,c3); with an
  // odd C the last channel pairs with a channel the quad fills with weight 0 ("pairs with
  // nothing", as oneDNN's). With C even ORT's adjacent (kh, kw, c) terms are the same pairs; an odd
  // C with ORT's rule takes the im2col path (qconv_im2col_pairs): its rows are ORT's (kh, kw, c)
  // order itself. A padding tap enters as the stored zero point in ORT's rule, as the plane's
  // padding bytes do; oneDNN's rule skips it, which the plane's zero-point bytes reproduce exactly
  // when their pair cannot saturate: |zp * (w0 + w1)| <= 128 * 256 = 32768 fits int16 (and is
  // then taken off by the zero-point correction like any other term) for zp <= 128. Larger zero
  // points with padding stay with the reference.
  if (p.dot == DotRule::int16_pairs_channels &&
      (p.x_dtype != DType::u8 || (has_padding(p.g) && p.x_zero_point > 128)))
    return false;
  // Padding is written as the shifted zero point, which must be a byte.
  const int32_t zp_u = shifted_zero_point(p.x_dtype, p.x_zero_point);
  return !has_padding(p.g) || (zp_u >= 0 && zp_u <= 255);
}

// The quad plane: the padded image of one input, four channels' bytes per pixel (channel 4*c4 + t
// at byte t), split by the stride into sh * sw phase planes (pixel (i, j) of the padded image in
// phase (i % sh, j % sw) at row i / sh, column j / sw). Column m = oh * ws + ow of the GEMM then
// reads, for tap (r, s) and channel quad c4, the 4-byte word at a fixed offset + m: each group of
// the reduction is one contiguous shifted window of the plane, read by the tile in place (no
// panel). At unit column stride the left and right padding share columns (a row is W + max(pad_l,
// pad_r) long; a tap past the right edge reads the next row's left padding), so fewer columns
// are computed and dropped; one slack row below holds the padding such reads meet last.
struct QuadPlane {
  int64_t sh = 1, sw = 1, c4 = 1;
  int64_t lw = 0;        // padded row length before the split
  int64_t hs = 0, ws = 0;  // rows and columns of one phase plane
  int64_t phase_px = 0, block_px = 0;  // pixels in one phase plane; in one channel quad's phases
  // pixel index of padded (row i, column j) in channel quad q
  int64_t pixel(int64_t q, int64_t i, int64_t j) const {
    return q * block_px + ((i % sh) * sw + j % sw) * phase_px + (i / sh) * ws + j / sw;
  }
};

QuadPlane quad_plane(const Conv2dParams& g) {
  QuadPlane qp;
  qp.sh = g.stride_h, qp.sw = g.stride_w, qp.c4 = (g.c + 3) / 4;
  qp.lw = g.stride_w == 1 ? g.w + std::max(g.pad_l, g.pad_r) : g.w + g.pad_l + g.pad_r;
  const int64_t hp = g.h + g.pad_t + g.pad_b;
  qp.hs = (hp + qp.sh - 1) / qp.sh + 1;
  qp.ws = (qp.lw + qp.sw - 1) / qp.sw;
  qp.phase_px = qp.hs * qp.ws;
  qp.block_px = qp.sh * qp.sw * qp.phase_px;
  return qp;
}

// The weights in the quad plane's reduction order: group (c4 * R + r) * S + s holds channels
// 4*c4 .. 4*c4 + 3 of tap (r, s), channels past C weighing 0; corr as pack_weights forms it (an
// integer sum: the order does not matter). One pass over w (this runs on every call).
PackedWeights pack_conv_weights(const int8_t* w, const Conv2dParams& g, const int32_t* bias, int32_t zp_u) {
  const int64_t C = g.c, RS = g.r * g.s, K = g.k, c4 = (C + 3) / 4;
  PackedWeights p;
  p.k = K, p.j = C * RS, p.j4 = c4 * RS * 4;
  p.w.assign(static_cast<std::size_t>(K * p.j4), 0);
  p.corr.resize(static_cast<std::size_t>(K));
  for (int64_t k = 0; k < K; ++k) {
    const int8_t* wk = w + k * C * RS;
    int8_t* pk = p.w.data() + k * p.j4;
    uint32_t sum = 0;  // unsigned: wraps (mod 2^32) where int32 would be undefined
    for (int64_t j = 0; j < C * RS; ++j) sum += static_cast<uint32_t>(static_cast<int32_t>(wk[j]));
    for (int64_t c = 0; c < C; ++c) {
      int8_t* dst = pk + (c / 4) * RS * 4 + c % 4;
      for (int64_t rs = 0; rs < RS; ++rs) dst[4 * rs] = wk[c * RS + rs];
    }
    const uint32_t b = bias ? static_cast<uint32_t>(bias[k]) : 0u;
    p.corr[k] = static_cast<int32_t>(b - static_cast<uint32_t>(zp_u) * sum);
  }
  return p;
}

// The 16 bytes at src whose bit is set in `mask`, packed, to dst (a vector of GEMM columns into
// its output pixels: the columns past a row's Q are dropped).
template <typename TY>
inline void store_valid(const TY* src, uint32_t mask, TY* dst) {
#if defined(__AVX512VBMI2__) && defined(__AVX512VL__)
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  if (mask == 0xFFFFu) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), v);
    return;
  }
  _mm_mask_storeu_epi8(dst, static_cast<__mmask16>((1u << __builtin_popcount(mask)) - 1),
                       _mm_maskz_compress_epi8(static_cast<__mmask16>(mask), v));
#else
  if (mask == 0xFFFFu) {  // a vector inside one output row: all 16 columns
    std::memcpy(dst, src, 16 * sizeof(TY));
    return;
  }
  for (int i = 0, o = 0; i < 16; ++i)
    if (mask >> i & 1u) dst[o++] = src[i];
#endif
}

// The float rules' requantization of one GEMM tile as it leaves the GEMM, into the output pixels
// (no image-sized int32 buffer, no call per row): requant_row_avx512's operations per lane, then
// each vector's valid columns packed (vpcompressb) and stored at their first pixel.
struct RqTileArgs {
  const float* scale = nullptr;  // per output channel, from the tile's first
  const float* bias = nullptr;   // (0 where the channel has none: float(acc) + 0 is float(acc), never -0)
  float fzp = 0, flo = 0, fhi = 0;
  int32_t izp = 0;
  const uint32_t* vmask = nullptr;  // per 16-column vector, from the tile's first: its valid columns
  const int64_t* vstart = nullptr;  // and the pixel of the first
  int64_t ystride = 0;              // between output channels' planes
};

template <typename TY>
using RqTileFn = void (*)(const int8_t* w, int64_t j4, const int32_t* corr, const uint8_t* xp, const int64_t* goff,
                          const RqTileArgs& ra, TY* y);

#if DL_QFAST_X86
template <int KB, int NV, RequantRule R, typename TY>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi2"))) void tile_vnni_rq(
    const int8_t* w, int64_t j4, const int32_t* corr, const uint8_t* xp, const int64_t* goff, const RqTileArgs& ra,
    TY* y) {
  static_assert(R == RequantRule::float_multiply || R == RequantRule::float_multiply_add_zp, "float rules only");
  constexpr bool kAddZp = R == RequantRule::float_multiply_add_zp;
  // The accumulators pass through 64-byte-aligned stack (L1, 1.5 KB): with the requantization
  // inlined after the reduction loop, GCC 12 spilled accumulators inside that loop (measured
  // 1.5x slower).
  alignas(64) int32_t c[KB][16 * NV];
  tile_vnni<KB, NV>(w, j4, corr, xp, goff, &c[0][0], 16 * NV);
  const __m512 fzp = _mm512_set1_ps(ra.fzp), flo = _mm512_set1_ps(ra.flo), fhi = _mm512_set1_ps(ra.fhi);
  const __m512i izp = _mm512_set1_epi32(ra.izp);
  // Everything read from ra as locals first: the byte stores below may alias it (a char type).
  uint32_t vmask[NV];
  __mmask16 smask[NV];
  TY* yv[NV];
  float scale_s[KB], bias_s[KB];
  const int64_t ystride = ra.ystride;
  for (int v = 0; v < NV; ++v) {
    vmask[v] = ra.vmask[v];
    smask[v] = static_cast<__mmask16>((1u << __builtin_popcount(vmask[v])) - 1);
    yv[v] = y + ra.vstart[v];
  }
  for (int kb = 0; kb < KB; ++kb) scale_s[kb] = ra.scale[kb], bias_s[kb] = ra.bias[kb];
#pragma GCC unroll 8
  for (int kb = 0; kb < KB; ++kb) {
    const __m512 scale = _mm512_set1_ps(scale_s[kb]), bias = _mm512_set1_ps(bias_s[kb]);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const uint32_t m = vmask[v];
      if (!m) continue;
      __m512 f = _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(_mm512_load_si512(&c[kb][16 * v])), bias), scale);
      if (kAddZp) f = _mm512_add_ps(f, fzp);
      f = _mm512_min_ps(_mm512_max_ps(f, flo), fhi);  // a NaN f becomes flo (max returns its second operand)
      const __m512i q = _mm512_add_epi32(_mm512_cvt_roundps_epi32(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), izp);
      const __m128i b = _mm512_cvtepi32_epi8(q);
      TY* dst = yv[v] + kb * ystride;
      if (m == 0xFFFFu)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), b);
      else
        _mm_mask_storeu_epi8(dst, smask[v], _mm_maskz_compress_epi8(static_cast<__mmask16>(m), b));
    }
  }
}

template <RequantRule R, typename TY>
struct RqTiles {
  RqTileFn<TY> fn[kMaxKb + 1][kMaxNv + 1] = {};
  template <int KB>
  void fill_row() {
    fn[KB][1] = tile_vnni_rq<KB, 1, R, TY>, fn[KB][2] = tile_vnni_rq<KB, 2, R, TY>, fn[KB][3] = tile_vnni_rq<KB, 3, R, TY>;
  }
  RqTiles() {
    fill_row<1>(), fill_row<2>(), fill_row<3>(), fill_row<4>(), fill_row<5>(), fill_row<6>(), fill_row<7>(),
        fill_row<8>();
  }
};
#endif

// The fused tiles for rq, or null where they do not apply (then the tile's int32 go through
// requant_row_for's row functions): the float rules with round-half-even, on a CPU with VNNI and
// VBMI2.
template <typename TY>
const RqTileFn<TY> (*rq_tiles_for(const Requant& rq))[kMaxNv + 1] {
#if DL_QFAST_X86
  static const bool ok = tiles().vnni && __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("avx512vl");
  if (!ok || rq.round != RoundRule::half_even) return nullptr;
  if (rq.rule == RequantRule::float_multiply) {
    static const RqTiles<RequantRule::float_multiply, TY> t;
    return t.fn;
  }
  if (rq.rule == RequantRule::float_multiply_add_zp) {
    static const RqTiles<RequantRule::float_multiply_add_zp, TY> t;
    return t.fn;
  }
#else
  (void)rq;
#endif
  return nullptr;
}

template <typename TX, typename TY>
void qconv_fast(const QConv2dParams& p, const TX* x, const int8_t* w, const int32_t* bias, TY* y) {
  const Conv2dParams& g = p.g;
  // Locals, not g's fields: every byte store below may alias g (a char type), which would
  // reload them in each inner loop.
  const int64_t C = g.c, H = g.h, W = g.w, K = g.k, R = g.r, S = g.s, pad_t = g.pad_t, pad_l = g.pad_l;
  const int64_t P = g.out_h(), Q = g.out_w();
  const uint8_t flip = sign_flip(p.x_dtype);
  const int32_t zp_u = shifted_zero_point(p.x_dtype, p.x_zero_point);
  const uint8_t pad_byte = static_cast<uint8_t>(zp_u);  // only read when has_padding (then a byte: supports)
  const PackedWeights pw = pack_conv_weights(w, g, bias, zp_u);
  const QuadPlane qp = quad_plane(g);
  const int64_t ld = qp.ws, M = P * ld, mpad = round_up(M, 16), groups = pw.j4 / 4;
  const RequantRowFn<TY> requant = requant_row_for<TY>(p.rq);
  const int32_t rq_zp = p.rq.zero_point, rq_lo = p.rq.lo, rq_hi = p.rq.hi;
  // Columns past the last valid one read up to mpad words past a window's start: slack after the
  // last quad's phases.
  const int64_t plane_bytes = 4 * (qp.c4 * qp.block_px + mpad + 16);

  // Each group's byte offset in the plane (tap (r, s) of quad c4 at column 0).
  std::vector<int64_t> goff(static_cast<std::size_t>(groups));
  for (int64_t q = 0; q < qp.c4; ++q)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t s = 0; s < S; ++s) goff[(q * R + r) * S + s] = 4 * qp.pixel(q, r * g.dil_h, s * g.dil_w);
  // Each 16-column vector's valid columns (oh < P, ow < Q) and where the first lands in y.
  std::vector<uint32_t> vmask(static_cast<std::size_t>(mpad / 16), 0);
  std::vector<int64_t> vstart(static_cast<std::size_t>(mpad / 16), 0);
  for (int64_t v = 0; v < mpad / 16; ++v) {
    const int64_t m0 = 16 * v;
    vstart[v] = std::min(m0 / ld, P) * Q + (m0 / ld < P ? std::min(m0 % ld, Q) : 0);
    for (int i = 0; i < 16; ++i)
      if (m0 + i < M && (m0 + i) % ld < Q) vmask[v] |= 1u << i;
  }
  const auto tile_fn = tiles().table(p.dot);
  const int64_t nblocks = (mpad / 16 + kMaxNv - 1) / kMaxNv;
  // the fused VNNI tiles sum exactly: the pairs rule requantizes the tile's int32 instead
  const auto rq_tiles = p.dot == DotRule::exact ? rq_tiles_for<TY>(p.rq) : nullptr;
  RqTileArgs ra;
  std::vector<float> scales(static_cast<std::size_t>(K)), biases(static_cast<std::size_t>(K));
  if (rq_tiles) {
    const bool add_zp = p.rq.rule == RequantRule::float_multiply_add_zp;
    for (int64_t k = 0; k < K; ++k) scales[k] = p.rq.channel(k).scale, biases[k] = p.rq.channel(k).bias;
    ra.fzp = static_cast<float>(rq_zp);
    ra.flo = static_cast<float>(add_zp ? rq_lo : rq_lo - rq_zp);
    ra.fhi = static_cast<float>(add_zp ? rq_hi : rq_hi - rq_zp);
    ra.izp = add_zp ? 0 : rq_zp;
    ra.ystride = P * Q;
  }

#pragma omp parallel
  {
    std::vector<uint8_t> plane(static_cast<std::size_t>(plane_bytes), pad_byte);
    std::vector<int32_t> cbuf(static_cast<std::size_t>(kMaxKb * 16 * kMaxNv));
    alignas(64) TY row[16 * kMaxNv];
    const std::vector<uint8_t> zeros(static_cast<std::size_t>(W), 0);  // channels past C (weights 0)
#pragma omp for schedule(static)
    for (int64_t n = 0; n < g.n; ++n) {
      // 1) the image into the plane, shifted to unsigned (padding and slack already hold zp_u)
      const uint8_t* xn = reinterpret_cast<const uint8_t*>(x) + n * C * H * W;
      for (int64_t q = 0; q < qp.c4; ++q)
        for (int64_t ih = 0; ih < H; ++ih) {
          const uint8_t* src[4];
          for (int t = 0; t < 4; ++t) src[t] = 4 * q + t < C ? xn + ((4 * q + t) * H + ih) * W : zeros.data();
          const int64_t i = ih + pad_t;
          if (qp.sw == 1) {
            interleave4(src[0], src[1], src[2], src[3], W, flip, plane.data() + 4 * qp.pixel(q, i, pad_l));
          } else if (qp.sw == 2) {
            interleave4_pairs(src[0], src[1], src[2], src[3], W, flip, plane.data() + 4 * qp.pixel(q, i, pad_l),
                              plane.data() + 4 * qp.pixel(q, i, pad_l + 1));
          } else {
            for (int64_t iw = 0; iw < W; ++iw) {
              uint8_t* d = plane.data() + 4 * qp.pixel(q, i, iw + pad_l);
              for (int t = 0; t < 4; ++t) d[t] = src[t][iw] ^ flip;
            }
          }
        }
#if DL_QFAST_X86
      // the next image's bytes towards L2 while this one's GEMM runs: from a batch too large for
      // the caches the copy above otherwise waits on memory (measured: ResNet-20's stride-2
      // 16->32 conv took 3x as long per image at batch 1000 as at batch 100)
      if (n + 1 < g.n)
        for (int64_t i = 0; i < C * H * W; i += 64)
          _mm_prefetch(reinterpret_cast<const char*>(xn + C * H * W + i), _MM_HINT_T1);
#endif
      // 2) per tile of output channels x columns: the accumulators, requantized into y's pixels
      for (int64_t k0 = 0; k0 < K; k0 += kMaxKb) {
        const int kb = static_cast<int>(std::min<int64_t>(kMaxKb, K - k0));
        for (int64_t b = 0; b < nblocks; ++b) {
          const int64_t v0 = b * kMaxNv;
          const int nv = static_cast<int>(std::min<int64_t>(kMaxNv, mpad / 16 - v0));
          if (rq_tiles) {
            RqTileArgs a = ra;
            a.scale = scales.data() + k0, a.bias = biases.data() + k0;
            a.vmask = vmask.data() + v0, a.vstart = vstart.data() + v0;
            rq_tiles[kb][nv](pw.w.data() + k0 * pw.j4, pw.j4, pw.corr.data() + k0, plane.data() + 64 * v0,
                             goff.data(), a, y + (n * K + k0) * P * Q);
            continue;
          }
          const int64_t ldc = 16 * nv;
          tile_fn[kb][nv](pw.w.data() + k0 * pw.j4, pw.j4, pw.corr.data() + k0, plane.data() + 64 * v0, goff.data(),
                          cbuf.data(), ldc);
          for (int i = 0; i < kb; ++i) {
            TY* yk = y + (n * K + k0 + i) * P * Q;
            requant(cbuf.data() + i * ldc, ldc, p.rq.channel(k0 + i), rq_zp, rq_lo, rq_hi, row);
            for (int v = 0; v < nv; ++v)
              if (vmask[v0 + v]) store_valid(row + 16 * v, vmask[v0 + v], yk + vstart[v0 + v]);
          }
        }
      }
    }
  }
}

// ORT's int16 pairs with an odd C (LeNet's and CIFAR's first convolutions: C = 1, 3): ORT pairs
// adjacent terms of the im2col row in (kh, kw, c) order, so a pair can span two taps, which the
// quad plane (four channels of one tap per group) cannot hold. Here each output pixel's im2col row
// is written in that order into a panel of quads (Xp[j/4][m][4], terms past R*S*C zero with weight
// 0, a padding tap the shifted zero point) and run by the pair tiles: their (t0,t1), (t2,t3) are
// then ORT's pairs.
template <typename TX, typename TY>
void qconv_im2col_pairs(const QConv2dParams& p, const TX* x, const int8_t* w, const int32_t* bias, TY* y) {
  const Conv2dParams& g = p.g;
  const int64_t C = g.c, H = g.h, W = g.w, K = g.k, R = g.r, S = g.s, P = g.out_h(), Q = g.out_w();
  const int64_t J = R * S * C, M = P * Q, mpad = round_up(M, 16);
  const uint8_t flip = sign_flip(p.x_dtype);
  const int32_t zp_u = shifted_zero_point(p.x_dtype, p.x_zero_point);
  // weights (K,C,R,S) to the row order (K, R,S,C)
  std::vector<int8_t> w_rsc(static_cast<std::size_t>(K * J));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t rs = 0; rs < R * S; ++rs) w_rsc[k * J + rs * C + c] = w[(k * C + c) * R * S + rs];
  const PackedWeights pw = pack_weights(w_rsc.data(), K, J, bias, zp_u);
  const RequantRowFn<TY> requant = requant_row_for<TY>(p.rq);
#pragma omp parallel
  {
    std::vector<uint8_t> panel(static_cast<std::size_t>(pw.j4 * mpad), 0);
    std::vector<int32_t> acc(static_cast<std::size_t>(K * mpad));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < g.n; ++n) {
      const uint8_t* xn = reinterpret_cast<const uint8_t*>(x + n * C * H * W);
      for (int64_t m = 0; m < M; ++m) {
        const int64_t oh = m / Q, ow = m % Q;
        int64_t j = 0;
        for (int64_t r = 0; r < R; ++r)
          for (int64_t s2 = 0; s2 < S; ++s2) {
            const int64_t ih = oh * g.stride_h - g.pad_t + r * g.dil_h, iw = ow * g.stride_w - g.pad_l + s2 * g.dil_w;
            const bool pad = ih < 0 || ih >= H || iw < 0 || iw >= W;
            for (int64_t c = 0; c < C; ++c, ++j)
              panel[((j / 4) * mpad + m) * 4 + j % 4] =
                  pad ? static_cast<uint8_t>(zp_u) : static_cast<uint8_t>(xn[(c * H + ih) * W + iw] ^ flip);
          }
      }
      gemm_panel(pw, panel.data(), mpad, acc.data(), DotRule::int16_pairs_hwc);
      for (int64_t k = 0; k < K; ++k)
        requant(acc.data() + k * mpad, M, p.rq.channel(k), p.rq.zero_point, p.rq.lo, p.rq.hi, y + (n * K + k) * M);
    }
  }
}

using quant_loops::dispatch_xy;

// x:(N,C,H,W) w:(K,C,R,S) int8, bias:(K) int32, y:(N,K,P,Q)
void qconv2d_forward_fast(const QConv2dParams& p, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  p.validate();
  check_q_io("qconv2d", p.x_dtype, p.y_dtype, x, p.g.x_shape(), w, p.g.w_shape(), bias, p.g.k, p.has_bias, y,
             p.g.y_shape());
  check(qconv2d_supports(p, x.dtype()), "qconv2d fast: called outside supports() (", p.g.str(), ")");
  dispatch_xy(p.x_dtype, p.y_dtype, "qconv2d", [&](auto xt, auto yt) {
    using TX = decltype(xt);
    using TY = decltype(yt);
    const int32_t* b = bias ? bias->data<int32_t>() : nullptr;
    if (p.dot == DotRule::int16_pairs_hwc && p.g.c % 2 == 1)
      qconv_im2col_pairs(p, x.data<TX>(), w.data<int8_t>(), b, y.data<TY>());
    else
      qconv_fast(p, x.data<TX>(), w.data<int8_t>(), b, y.data<TY>());
  });
}

// ---------------------------------------------------------------------------------------------
// qdense: the same GEMM with the batch rows as columns, in blocks of kDenseRows rows.

constexpr int64_t kDenseRows = 64;

bool qdense_supports(const QDenseParams& p, DType dt) {
  // int16 pairs: inputs (2j, 2j+1) are a panel quad's (t0,t1), (t2,t3) (ORT's and oneDNN's rule
  // for dense layers alike: no padding taps)
  return dt == p.x_dtype && is_q8(p.x_dtype) && is_q8(p.y_dtype) &&
         (p.dot == DotRule::exact || p.dot == DotRule::int16_pairs_hwc || p.dot == DotRule::int16_pairs_channels);
}

template <typename TX, typename TY>
void qdense_fast(const QDenseParams& p, const TX* x, const int8_t* w, const int32_t* bias, TY* y) {
  const uint8_t flip = sign_flip(p.x_dtype);
  const PackedWeights pw = pack_weights(w, p.out, p.in, bias, shifted_zero_point(p.x_dtype, p.x_zero_point));
  const int64_t groups = pw.j4 / 4, full = p.in / 4, blocks = (p.n + kDenseRows - 1) / kDenseRows;
  const RequantRowFn<TY> requant = requant_row_for<TY>(p.rq);
  uint32_t flip4;
  std::memset(&flip4, flip, 4);
#pragma omp parallel
  {
    std::vector<uint8_t> panel(static_cast<std::size_t>(groups * kDenseRows * 4), 0);
    std::vector<int32_t> acc(static_cast<std::size_t>(p.out * kDenseRows));
    std::vector<TY> row(kDenseRows);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t n0 = b * kDenseRows, rows = std::min(kDenseRows, p.n - n0);
      const int64_t mpad = round_up(rows, 16);
      // Xp[g][m][4] = x[n0 + m][4g .. 4g+3] shifted; terms past `in` are 0 (their weights are 0)
      for (int64_t m = 0; m < rows; ++m) {
        const uint8_t* src = reinterpret_cast<const uint8_t*>(x + (n0 + m) * p.in);
        for (int64_t gi = 0; gi < full; ++gi) {
          uint32_t quad;
          std::memcpy(&quad, src + 4 * gi, 4);
          quad ^= flip4;
          std::memcpy(panel.data() + (gi * mpad + m) * 4, &quad, 4);
        }
        for (int64_t j = full * 4; j < pw.j4; ++j)
          panel[(full * mpad + m) * 4 + (j - full * 4)] = j < p.in ? static_cast<uint8_t>(src[j] ^ flip) : 0;
      }
      gemm_panel(pw, panel.data(), mpad, acc.data(), p.dot);
      for (int64_t o = 0; o < p.out; ++o) {
        requant(acc.data() + o * mpad, rows, p.rq.channel(o), p.rq.zero_point, p.rq.lo, p.rq.hi, row.data());
        for (int64_t m = 0; m < rows; ++m) y[(n0 + m) * p.out + o] = row[m];
      }
    }
  }
}

// x:(n,in) w:(out,in) int8, bias:(out) int32, y:(n,out)
void qdense_forward_fast(const QDenseParams& p, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  p.validate();
  check_q_io("qdense", p.x_dtype, p.y_dtype, x, {p.n, p.in}, w, {p.out, p.in}, bias, p.out, p.has_bias, y,
             {p.n, p.out});
  dispatch_xy(p.x_dtype, p.y_dtype, "qdense", [&](auto xt, auto yt) {
    using TX = decltype(xt);
    using TY = decltype(yt);
    qdense_fast(p, x.data<TX>(), w.data<int8_t>(), bias ? bias->data<int32_t>() : nullptr, y.data<TY>());
  });
}

// ---------------------------------------------------------------------------------------------
// qmaxpool2d: OpenMP over the N*C planes; the unpadded 2x2 stride-2 window (every LeNet pool) as
// two vectorisable passes (row pair max, then column pair max), any other window as the
// reference's walk. An integer max rounds nothing: the same bits in any order.

bool qmaxpool2d_supports(const QPool2dParams& p, DType dt) { return dt == p.dtype && is_q8(p.dtype); }

// y[ow] = the max of the 2x2 window at columns 2ow, 2ow+1 of rows r0, r1 (vectorised: restrict).
template <typename T>
void max_2x2_row(const T* __restrict r0, const T* __restrict r1, int64_t q, T* __restrict y) {
  for (int64_t ow = 0; ow < q; ++ow)
    y[ow] = std::max(std::max(r0[2 * ow], r0[2 * ow + 1]), std::max(r1[2 * ow], r1[2 * ow + 1]));
}

#if DL_QFAST_X86
// The whole tensor's 2x2 stride-2 pooling when H and W are even (no row is left over): first each
// horizontal pair, hm[i] = max(x[2i], x[2i+1]) over the flat tensor (a pair never crosses a row),
// 64 outputs per step (each 16-bit word's two bytes compared after a shift); then each output row
// is the max of the two hm rows above it (masked loads, rows up to 64 wide).
template <bool Signed>
__attribute__((target("avx512f,avx512bw"))) void max_2x2_even_avx512(const uint8_t* x, int64_t rows_out, int64_t q,
                                                                      uint8_t* hm, uint8_t* y) {
  const int64_t pairs = rows_out * 2 * q;  // horizontal pairs in the tensor
  int64_t i = 0;
  for (; i + 64 <= pairs; i += 64) {
    const __m512i a = _mm512_loadu_si512(x + 2 * i), b = _mm512_loadu_si512(x + 2 * i + 64);
    // word w holds bytes (2w, 2w+1): the high byte shifted down meets the low byte
    const __m512i ma = Signed ? _mm512_max_epi8(a, _mm512_srai_epi16(a, 8)) : _mm512_max_epu8(a, _mm512_srli_epi16(a, 8));
    const __m512i mb = Signed ? _mm512_max_epi8(b, _mm512_srai_epi16(b, 8)) : _mm512_max_epu8(b, _mm512_srli_epi16(b, 8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(hm + i), _mm512_maskz_cvtepi16_epi8(~__mmask32{0}, ma));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(hm + i + 32), _mm512_maskz_cvtepi16_epi8(~__mmask32{0}, mb));
  }
  for (; i < pairs; ++i) {
    const uint8_t u = x[2 * i], v = x[2 * i + 1];
    hm[i] = Signed ? (static_cast<int8_t>(u) > static_cast<int8_t>(v) ? u : v) : (u > v ? u : v);
  }
  const __mmask64 m = q >= 64 ? ~__mmask64{0} : ((__mmask64{1} << q) - 1);
  for (int64_t r = 0; r < rows_out; ++r) {
    const __m512i top = _mm512_maskz_loadu_epi8(m, hm + 2 * r * q), bot = _mm512_maskz_loadu_epi8(m, hm + (2 * r + 1) * q);
    _mm512_mask_storeu_epi8(y + r * q, m, Signed ? _mm512_max_epi8(top, bot) : _mm512_max_epu8(top, bot));
  }
}
#endif

template <typename T>
void qmaxpool_fast(const QPool2dParams& p, const T* x, T* y) {
  const Pool2dParams& g = p.g;
  const int64_t P = g.out_h(), Q = g.out_w(), planes = g.n * g.c, H = g.h, W = g.w;
  const bool two_by_two = g.kh == 2 && g.kw == 2 && g.stride_h == 2 && g.stride_w == 2 && g.pad_t == 0 &&
                          g.pad_b == 0 && g.pad_l == 0 && g.pad_r == 0;
#if DL_QFAST_X86
  if (two_by_two && H % 2 == 0 && W % 2 == 0 && Q <= 64 && tiles().vnni) {  // vnni: AVX-512BW is there too
    const int64_t rows_out = planes * P;
    const int64_t per_thread = (rows_out + omp_get_max_threads() - 1) / omp_get_max_threads();
#pragma omp parallel
    {
      const int64_t r0 = std::min(rows_out, per_thread * omp_get_thread_num());
      const int64_t r1 = std::min(rows_out, r0 + per_thread);
      std::vector<uint8_t> hm(static_cast<std::size_t>((r1 - r0) * 2 * Q));
      if (r1 > r0)
        max_2x2_even_avx512<std::is_signed<T>::value>(reinterpret_cast<const uint8_t*>(x) + r0 * 2 * W, r1 - r0, Q,
                                                      hm.data(), reinterpret_cast<uint8_t*>(y) + r0 * Q);
    }
    return;
  }
#endif
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int64_t nc = 0; nc < planes; ++nc) {
      const T* xp = x + nc * H * W;
      T* yp = y + nc * P * Q;
      if (two_by_two) {
        for (int64_t oh = 0; oh < P; ++oh) max_2x2_row(xp + 2 * oh * W, xp + (2 * oh + 1) * W, Q, yp + oh * Q);
        continue;
      }
      for (int64_t oh = 0; oh < P; ++oh)
        for (int64_t ow = 0; ow < Q; ++ow) {
          T m = std::numeric_limits<T>::lowest();  // a window wholly in the padding: the type's minimum
          pool2d_loops::for_window(g, oh, ow, [&](int64_t i) { m = std::max(m, xp[i]); });
          yp[oh * Q + ow] = m;
        }
    }
  }
}

// x:(N,C,H,W) y:(N,C,P,Q)
void qmaxpool2d_forward_fast(const QPool2dParams& p, const Tensor& x, Tensor& y) {
  p.g.validate();
  check_tensor("qmaxpool2d", "input", x, p.g.x_shape(), p.dtype);
  check_tensor("qmaxpool2d", "output", y, p.g.y_shape(), p.dtype);
  if (p.dtype == DType::u8)
    qmaxpool_fast(p, x.data<uint8_t>(), y.data<uint8_t>());
  else if (p.dtype == DType::i8)
    qmaxpool_fast(p, x.data<int8_t>(), y.data<int8_t>());
  else
    fail("qmaxpool2d: dtype ", dtype_name(p.dtype), " (int8 or uint8)");
}

// ---------------------------------------------------------------------------------------------
// quantize / dequantize, per tensor: quantize_one / dequantize_one per element, OpenMP over chunks.

bool quantize_supports(const QuantizeParams& p, DType) { return p.axis < 0 && p.scale.size() == 1; }

template <ScaleOp S, RoundRule RR, typename Q>
void quantize_run(const float* __restrict x, int64_t n, float scale, float inv, int32_t zp, int32_t qmin,
                  int32_t qmax, Q* __restrict q) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<Q>(quantize_one(x[i], scale, inv, zp, S, RR, qmin, qmax));
}

template <typename Q>
using QuantizeRunFn = void (*)(const float*, int64_t, float, float, int32_t, int32_t, int32_t, Q*);

template <typename Q>
QuantizeRunFn<Q> quantize_run_for(ScaleOp op, RoundRule round) {
  const bool even = round == RoundRule::half_even;
  if (op == ScaleOp::divide)
    return even ? quantize_run<ScaleOp::divide, RoundRule::half_even, Q>
                : quantize_run<ScaleOp::divide, RoundRule::half_away, Q>;
  return even ? quantize_run<ScaleOp::mul_reciprocal, RoundRule::half_even, Q>
              : quantize_run<ScaleOp::mul_reciprocal, RoundRule::half_away, Q>;
}

constexpr int64_t kChunk = 4096;  // elements per OpenMP work item

template <typename Q>
void quantize_fast_t(const QuantizeParams& p, const float* x, int64_t n, Q* q) {
  const float scale = p.scale[0], inv = 1.0f / scale;  // float32, as ATen forms it (and the reference)
  const QuantizeRunFn<Q> run = quantize_run_for<Q>(p.op, p.round);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i0 = c * kChunk;
    run(x + i0, std::min(kChunk, n - i0), scale, inv, p.zero_point[0], p.qmin, p.qmax, q + i0);
  }
}

// x: float32, q: p.dtype, same shape
void quantize_forward_fast(const QuantizeParams& p, const Tensor& x, Tensor& q) {
  p.validate("quantize");
  check_tensor("quantize", "output", q, x.shape(), p.dtype);
  check(x.dtype() == DType::f32, "quantize: input is ", dtype_name(x.dtype()), ", expected float32");
  check(quantize_supports(p, x.dtype()), "quantize fast: per tensor only (axis ", p.axis, ")");
  const float* xs = x.data<float>();
  switch (p.dtype) {
    case DType::u8: return quantize_fast_t(p, xs, x.numel(), q.data<uint8_t>());
    case DType::i8: return quantize_fast_t(p, xs, x.numel(), q.data<int8_t>());
    case DType::i32: return quantize_fast_t(p, xs, x.numel(), q.data<int32_t>());
    default: fail("quantize: ", dtype_name(p.dtype), " is not a quantized dtype (int8, uint8, int32)");
  }
}

template <typename Q>
void dequantize_fast_t(const QuantizeParams& p, const Q* __restrict q, int64_t n, float* __restrict x) {
  const int32_t zp = p.zero_point[0];
  const float scale = p.scale[0];
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i1 = std::min(n, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < i1; ++i) x[i] = dequantize_one(q[i], zp, scale);
  }
}

// q: p.dtype, x: float32, same shape
void dequantize_forward_fast(const QuantizeParams& p, const Tensor& q, Tensor& x) {
  p.validate("dequantize");
  check(q.dtype() == p.dtype, "dequantize: input is ", dtype_name(q.dtype()), ", expected ", dtype_name(p.dtype));
  check_tensor("dequantize", "output", x, q.shape(), DType::f32);
  check(quantize_supports(p, q.dtype()), "dequantize fast: per tensor only (axis ", p.axis, ")");
  float* xs = x.data<float>();
  switch (p.dtype) {
    case DType::u8: return dequantize_fast_t(p, q.data<uint8_t>(), q.numel(), xs);
    case DType::i8: return dequantize_fast_t(p, q.data<int8_t>(), q.numel(), xs);
    case DType::i32: return dequantize_fast_t(p, q.data<int32_t>(), q.numel(), xs);
    default: fail("dequantize: ", dtype_name(p.dtype), " is not a quantized dtype (int8, uint8, int32)");
  }
}

// ---------------------------------------------------------------------------------------------
// qadd: the reference's per-element formula, with the rule fixed at compile time so that the loop
// vectorises, OpenMP over chunks of the flat tensor. Integers (fixed_point_shift) are exact in
// any order; the float rule does the same float operations per element (std::fma where the
// reference has it, nothing else contracted), so the bits are the reference's. The float rule's
// scalar tail (the last numel % 64 elements in channels-last order, or in flat order) is a set of
// fewer than 64 elements: computed first into a small buffer (so that y may alias a or b), the
// whole tensor then run with the body's formula, and the tail written over it.

bool qadd_supports(const QAddParams& p, DType dt) {
  return dt == p.dtype && is_q8(p.dtype) && p.rule != QAddRule::float_ratio_fma &&
         p.rule != QAddRule::tflite_fixed_point;  // those two: the reference
}

// The resolved numbers of one add, loop-invariant locals (stores through T* may alias a struct).
struct QAddConsts {
  float a_scale, b_scale, a_off, b_off, inv_y;  // a_off = a_scale * float(-za): the fma's addend
  int32_t za, zb, zy, lo, hi, a_mult, b_mult, shift, mask, half_mask;
};

QAddConsts qadd_consts(const QAddParams& p) {
  QAddConsts k;
  k.a_scale = p.a_scale, k.b_scale = p.b_scale;
  k.a_off = p.a_scale * static_cast<float>(-p.a_zero_point);
  k.b_off = p.b_scale * static_cast<float>(-p.b_zero_point);
  k.inv_y = 1.0f / p.y_scale;
  k.za = p.a_zero_point, k.zb = p.b_zero_point, k.zy = p.y_zero_point, k.lo = p.lo, k.hi = p.hi;
  k.a_mult = p.a_mult, k.b_mult = p.b_mult, k.shift = p.shift;
  k.mask = p.rule == QAddRule::fixed_point_shift ? static_cast<int32_t>((int64_t{1} << p.shift) - 1) : 0;
  k.half_mask = k.mask >> 1;
  return k;
}

// One element: `body` picks the float rule's vectorised-body formula (fma) or its scalar tail's.
template <QAddRule R, bool Body, typename T>
inline T qadd_one(T a, T b, const QAddConsts& k) {
  const int32_t qa = static_cast<int32_t>(a) - k.za, qb = static_cast<int32_t>(b) - k.zb;
  int32_t v;
  if (R == QAddRule::fixed_point_shift) {
    const int32_t acc = k.a_mult * qa + k.b_mult * qb;  // |acc| < 2^22 * 255 * 2: int32 (the reference's bound)
    const int32_t rem = (acc & k.mask) - (acc < 0 ? 1 : 0);
    v = (acc >> k.shift) + (rem > k.half_mask ? 1 : 0);
  } else {
    float da, db;
    if (Body) {
      da = std::fma(k.a_scale, static_cast<float>(a), k.a_off);
      db = std::fma(k.b_scale, static_cast<float>(b), k.b_off);
    } else {
      da = static_cast<float>(qa) * k.a_scale;
      db = static_cast<float>(qb) * k.b_scale;
    }
    const float c = (da + db) * k.inv_y;
    const float lo = static_cast<float>(INT32_MIN / 2), hi = static_cast<float>(INT32_MAX / 2);
    // in [-2^30, 2^30] after the clamp (scales are finite and positive: no NaN), so int32 holds
    // the rounded value and + zy as the reference's int64 does
    v = static_cast<int32_t>(round_with(std::min(std::max(c, lo), hi), RoundRule::half_even));
  }
  v += k.zy;
  return static_cast<T>(v < k.lo ? k.lo : (v > k.hi ? k.hi : v));
}

template <QAddRule R, typename T>
void qadd_run(const T* __restrict a, const T* __restrict b, int64_t n, const QAddConsts& consts, T* __restrict y) {
  const QAddConsts k = consts;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = qadd_one<R, true>(a[i], b[i], k);
}

#if defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__)
// 16 elements a step with AVX-512 (GCC's own vectorisation of qadd_one widens through several
// steps and converts floor twice): the same operations as qadd_one's body per lane. Float rule:
// vfmadd is std::fma (one rounding), then the add, the multiply, the clamp (c is never NaN: finite
// scales), and the conversion's embedded round-to-nearest-even (an immediate, no MXCSR mode), which
// is round_with(c, half_even) on the clamped range. Fixed rule: int32 lanes, the reference's
// expression ((acc & mask) - (acc < 0) is (acc & mask) + (acc >> 31)). Then + zy, the clamp, the
// narrow (a byte of T after the clamp). a, b, y may alias: each step loads before it stores.
template <QAddRule R, typename T>
void qadd_run_avx512(const T* a, const T* b, int64_t n, const QAddConsts& k, T* y) {
  constexpr bool kSigned = std::is_signed<T>::value;
  const __m512i za = _mm512_set1_epi32(k.za), zb = _mm512_set1_epi32(k.zb), zy = _mm512_set1_epi32(k.zy);
  const __m512i lo = _mm512_set1_epi32(k.lo), hi = _mm512_set1_epi32(k.hi);
  const __m512 as = _mm512_set1_ps(k.a_scale), bs = _mm512_set1_ps(k.b_scale), ao = _mm512_set1_ps(k.a_off);
  const __m512 bo = _mm512_set1_ps(k.b_off), inv = _mm512_set1_ps(k.inv_y);
  const __m512 clo = _mm512_set1_ps(static_cast<float>(INT32_MIN / 2)), chi = _mm512_set1_ps(static_cast<float>(INT32_MAX / 2));
  const __m512i am = _mm512_set1_epi32(k.a_mult), bm = _mm512_set1_epi32(k.b_mult), mask = _mm512_set1_epi32(k.mask);
  const __m512i half = _mm512_set1_epi32(k.half_mask);
  const __m128i shift = _mm_cvtsi32_si128(k.shift);
  auto widen = [](__m128i v) { return kSigned ? _mm512_cvtepi8_epi32(v) : _mm512_cvtepu8_epi32(v); };
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i ia = widen(_mm_maskz_loadu_epi8(m, a + i)), ib = widen(_mm_maskz_loadu_epi8(m, b + i));
    __m512i v;
    if (R == QAddRule::fixed_point_shift) {
      const __m512i acc = _mm512_add_epi32(_mm512_mullo_epi32(am, _mm512_sub_epi32(ia, za)),
                                           _mm512_mullo_epi32(bm, _mm512_sub_epi32(ib, zb)));
      const __m512i rem = _mm512_add_epi32(_mm512_and_si512(acc, mask), _mm512_srai_epi32(acc, 31));
      v = _mm512_sra_epi32(acc, shift);
      v = _mm512_mask_add_epi32(v, _mm512_cmpgt_epi32_mask(rem, half), v, _mm512_set1_epi32(1));
    } else {
      const __m512 da = _mm512_fmadd_ps(as, _mm512_cvtepi32_ps(ia), ao);
      const __m512 db = _mm512_fmadd_ps(bs, _mm512_cvtepi32_ps(ib), bo);
      __m512 c = _mm512_mul_ps(_mm512_add_ps(da, db), inv);
      c = _mm512_min_ps(_mm512_max_ps(c, clo), chi);
      v = _mm512_cvt_roundps_epi32(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    v = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(v, zy), lo), hi);
    _mm_mask_storeu_epi8(y + i, m, _mm512_cvtepi32_epi8(v));
  }
}
#endif

// Runs without __restrict when y aliases an input (in place): the same values, element by element.
template <QAddRule R, typename T>
void qadd_run_alias(const T* a, const T* b, int64_t n, const QAddConsts& k, T* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = qadd_one<R, true>(a[i], b[i], k);
}

template <QAddRule R, typename T>
void qadd_fast_t(const QAddParams& p, const T* a, const T* b, int64_t numel, T* y) {
  const QAddConsts k = qadd_consts(p);
  // The float rule's scalar tail: flat indices of the last numel % 64 elements in memory order.
  std::vector<std::pair<int64_t, T>> tail;
  if (R == QAddRule::float_fma_tail64) {
    const int64_t body = numel - numel % 64;
    const bool nhwc = p.n > 0;
    for (int64_t pos = body; pos < numel; ++pos) {
      int64_t i = pos;
      if (nhwc) {  // pos = ((n*H + h)*W + w)*C + c -> i = ((n*C + c)*H + h)*W + w
        const int64_t c = pos % p.c, w = (pos / p.c) % p.w, h = (pos / (p.c * p.w)) % p.h, n = pos / (p.c * p.w * p.h);
        i = ((n * p.c + c) * p.h + h) * p.w + w;
      }
      tail.emplace_back(i, qadd_one<R, false>(a[i], b[i], k));
    }
  }
  const bool alias = y == a || y == b;
  const int64_t chunks = (numel + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i0 = c * kChunk, len = std::min(kChunk, numel - i0);
#if defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__)
    qadd_run_avx512<R>(a + i0, b + i0, len, k, y + i0);
    continue;
#endif
    if (alias)
      qadd_run_alias<R>(a + i0, b + i0, len, k, y + i0);
    else
      qadd_run<R>(a + i0, b + i0, len, k, y + i0);
  }
  for (const auto& t : tail) y[t.first] = t.second;
}

// a, b, y: one shape, p.dtype (a (N,C,H,W) stored NCHW when p.n > 0)
void qadd_forward_fast(const QAddParams& p0, const Tensor& a, const Tensor& b, Tensor& y) {
  QAddParams p = p0;
  p.resolve();
  check(p.rule != QAddRule::float_ratio_fma && p.rule != QAddRule::tflite_fixed_point, "qadd fast: rule ",
        qadd_rule_name(p.rule), " is the reference kernel's only");
  if (!(a.shape() == b.shape() && y.shape() == a.shape()))  // (check() would format the shapes on every call)
    fail("qadd: shapes ", shape_str(a.shape()), ", ", shape_str(b.shape()), " -> ", shape_str(y.shape()),
         " must agree");
  for (const Tensor* t : {&a, &b, static_cast<const Tensor*>(&y)})
    check(t->dtype() == p.dtype, "qadd: ", dtype_name(t->dtype()), " tensor, expected ", dtype_name(p.dtype));
  const int64_t numel = a.numel();
  if (p.n > 0)
    check(p.n * p.c * p.h * p.w == numel, "qadd: layout (", p.n, ",", p.c, ",", p.h, ",", p.w, ") for ", numel,
          " elements");
  auto run = [&](auto tag) {
    using T = decltype(tag);
    if (p.rule == QAddRule::fixed_point_shift)
      qadd_fast_t<QAddRule::fixed_point_shift>(p, a.data<T>(), b.data<T>(), numel, y.data<T>());
    else
      qadd_fast_t<QAddRule::float_fma_tail64>(p, a.data<T>(), b.data<T>(), numel, y.data<T>());
  };
  if (p.dtype == DType::u8)
    run(uint8_t{});
  else
    run(int8_t{});
}

// ---------------------------------------------------------------------------------------------
// qglobal_avg_pool: one integer sum per (n, c) plane (exact in any order), then the reference's
// step (qgap_one, every rule); OpenMP over planes.

bool qgap_supports(const QGlobalAvgPoolParams& p, DType dt) { return dt == p.dtype && is_q8(p.dtype); }

// sum of x[0..count): int32 (count < 2^23 values of at most 255 in magnitude: below 2^31)
template <typename T>
int32_t plane_sum(const T* __restrict x, int64_t count) {
  int32_t s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < count; ++i) s += x[i];
  return s;
}

template <typename T>
void qgap_fast_t(const QGlobalAvgPoolParams& p, const T* x, T* y) {
  const int64_t count = p.h * p.w, planes = p.n * p.c;
  const int32_t qmin = std::numeric_limits<T>::min(), qmax = std::numeric_limits<T>::max();
  const QGlobalAvgPoolParams::Resolved r = p.resolve();
#pragma omp parallel for schedule(static) if (planes * count > kChunk)
  for (int64_t nc = 0; nc < planes; ++nc) y[nc] = static_cast<T>(qgap_one(r, plane_sum(x + nc * count, count), qmin, qmax));
}

// x:(N,C,H,W) y:(N,C), p.dtype
void qglobal_avg_pool_forward_fast(const QGlobalAvgPoolParams& p, const Tensor& x, Tensor& y) {
  check_tensor("qglobal_avg_pool", "input", x, {p.n, p.c, p.h, p.w}, p.dtype);
  check_tensor("qglobal_avg_pool", "output", y, {p.n, p.c}, p.dtype);
  const int64_t count = p.h * p.w;
  check(count > 0 && count < (int64_t{1} << 23), "qglobal_avg_pool: ", count, " values per channel");
  if (p.dtype == DType::u8)
    qgap_fast_t(p, x.data<uint8_t>(), y.data<uint8_t>());
  else if (p.dtype == DType::i8)
    qgap_fast_t(p, x.data<int8_t>(), y.data<int8_t>());
  else
    fail("qglobal_avg_pool: dtype ", dtype_name(p.dtype), " (int8 or uint8)");
}

}  // namespace

void register_quant_fast(KernelRegistry& reg) {
  reg.qconv2d.at(KernelBackend::fast) = {
      "fast",
      "int8/uint8 in and out, any geometry; padding only where the zero point (+128 for int8) is a byte; "
      "exact sums only (DotRule::exact); AVX-512 VNNI where the CPU has it",
      qconv2d_supports, qconv2d_forward_fast};
  reg.qdense.at(KernelBackend::fast) = {"fast", "int8/uint8 in and out; exact sums only (DotRule::exact); AVX-512 VNNI where the CPU "
                                        "has it",
                                        qdense_supports, qdense_forward_fast};
  reg.qmaxpool2d.at(KernelBackend::fast) = {"fast", "int8 and uint8, any window (2x2 stride 2 vectorised)",
                                            qmaxpool2d_supports, qmaxpool2d_forward_fast};
  reg.quantize.at(KernelBackend::fast) = {"fast", "per tensor; int8, uint8, int32", quantize_supports,
                                          quantize_forward_fast, dequantize_forward_fast};
  reg.qadd.at(KernelBackend::fast) = {"fast", "int8 and uint8, both QAddRule values, any layout", qadd_supports,
                                      qadd_forward_fast};
  reg.qglobal_avg_pool.at(KernelBackend::fast) = {"fast", "int8 and uint8", qgap_supports,
                                                  qglobal_avg_pool_forward_fast};
}

}  // namespace driftlab
