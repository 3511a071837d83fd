// The u8 x s8 GEMM and the requantization rows that the fast qconv2d and qdense kernels share
// (kernels/cpu/fast/qconv2d_fast.cpp, qdense_fast.cpp; registry slot `fast`); qpool_fast.cpp reads
// its CPU check (tiles().vnni). Internal to those files, no entry point: the GEMM writes its int32
// tile (=), the rows write their outputs (=).
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
// The requantization rows run requantize_one() of core/ops/requant.h per element, with the rule
// and rounding fixed at compile time so that the loops vectorise, which changes no bit: the same
// float operations, no contraction (-ffp-contract=off). Where the build targets AVX-512 (and at run
// time where the CPU has it) the float requantization with round-half-even is written with
// intrinsics instead: the same operations per element, the rounding by a conversion whose
// immediate says nearest-even (no floating-point mode is read, as round_with reads none).
//
// Compiled as if with -fno-trapping-math, as its includers are (the same pragma): GCC 12
// vectorises std::floor (round_with) only then. It changes no value.
#pragma once
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DL_QFAST_X86 1
#endif

#include "core/error.h"
#include "core/ops/requant.h"
#include "kernels/cpu/cpu_isa.h"

namespace driftlab {
namespace qgemm_fast {

constexpr int kMaxKb = 8;  // output channels per register tile
constexpr int kMaxNv = 3;  // 16-column vectors per register tile (8 x 3 accumulators + 3 panel loads)

// ---------------------------------------------------------------------------------------------
// Requantization rows: requantize_one per element, with the rule and rounding fixed at compile
// time so that the loop vectorises.

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

inline bool cpu_has_avx2_only() {
  return cpu_supports(CpuFeature::avx2) && !cpu_supports(CpuFeature::avx512bw);
}

inline bool cpu_has_avx512bw_vl() {
  return cpu_supports(CpuFeature::avx512f) && cpu_supports(CpuFeature::avx512bw) &&
         cpu_supports(CpuFeature::avx512vl);
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
  std::vector<int8_t> w;          // (k, j4): each row zero-padded to a multiple of 4 terms
  const int8_t* borrowed = nullptr;  // or the caller's (k, j) weights where j = j4 (then w is empty)
  std::vector<int32_t> corr;      // bias[k] - zp_u * sum_j w[k][j], in wrapping int32
  const int8_t* data() const { return borrowed ? borrowed : w.data(); }
};

// The wrapping (mod 2^32) sum of n int8 values: unsigned, where int32 would be undefined.
inline uint32_t wrapping_sum(const int8_t* v, int64_t n) {
  uint32_t sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<uint32_t>(static_cast<int32_t>(v[i]));
  return sum;
}

// w (k, j) row-major, as both (K,C,R,S) and (out,in) are. Where j is a multiple of 4 the rows need
// no padding and the tiles read w itself (no copy per call: a 4096 x 4096 dense layer's 16 MiB);
// w must then outlive the result.
inline PackedWeights pack_weights(const int8_t* w, int64_t k, int64_t j, const int32_t* bias, int32_t zp_u) {
  PackedWeights p;
  p.k = k, p.j = j, p.j4 = (j + 3) / 4 * 4;
  if (p.j4 == j)
    p.borrowed = w;
  else
    p.w.assign(static_cast<std::size_t>(k * p.j4), 0);
  p.corr.resize(static_cast<std::size_t>(k));
  for (int64_t kk = 0; kk < k; ++kk) {
    if (!p.borrowed) std::memcpy(p.w.data() + kk * p.j4, w + kk * j, static_cast<std::size_t>(j));
    const uint32_t b = bias ? static_cast<uint32_t>(bias[kk]) : 0u;
    p.corr[kk] = static_cast<int32_t>(b - static_cast<uint32_t>(zp_u) * wrapping_sum(w + kk * j, j));
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

inline bool cpu_has_vnni() {
  return cpu_supports(CpuFeature::avx512f) && cpu_supports(CpuFeature::avx512bw) &&
         cpu_supports(CpuFeature::avx512vnni);
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

inline bool cpu_has_avx2() {
  return cpu_supports(CpuFeature::avx2);
}
#else
inline bool cpu_has_vnni() { return false; }
inline bool cpu_has_avx2() { return false; }
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

inline const Tiles& tiles() {
  static const Tiles t;  // a property of the CPU, decided once
  return t;
}

// c (k, mpad) = corr + w . Xp over columns [0, mpad), mpad a multiple of 16, under product rule `dot`.
inline void gemm_panel(const PackedWeights& pw, const uint8_t* xp, int64_t mpad, int32_t* c, DotRule dot) {
  const auto fn = tiles().table(dot);
  std::vector<int64_t> goff(static_cast<std::size_t>(pw.j4 / 4));
  for (std::size_t g = 0; g < goff.size(); ++g) goff[g] = static_cast<int64_t>(g) * mpad * 4;
  for (int64_t m0 = 0; m0 < mpad; m0 += 16 * kMaxNv) {
    const int nv = static_cast<int>(std::min<int64_t>(kMaxNv, (mpad - m0) / 16));
    for (int64_t k0 = 0; k0 < pw.k; k0 += kMaxKb) {
      const int kb = static_cast<int>(std::min<int64_t>(kMaxKb, pw.k - k0));
      fn[kb][nv](pw.data() + k0 * pw.j4, pw.j4, pw.corr.data() + k0, xp + m0 * 4, goff.data(),
                 c + k0 * mpad + m0, mpad);
    }
  }
}

inline int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// u = x ^ flip: 0 for uint8, 0x80 for int8 (x + 128 in two's complement).
inline uint8_t sign_flip(DType t) { return t == DType::i8 ? 0x80 : 0x00; }
inline int32_t shifted_zero_point(DType t, int32_t zp) { return t == DType::i8 ? zp + 128 : zp; }

}  // namespace qgemm_fast
}  // namespace driftlab
