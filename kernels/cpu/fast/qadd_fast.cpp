// Fast qadd (registry slot `fast`): a, b, y int8|uint8 of one shape, elementwise, every output
// written (=); y may be a or b (in place). The rules fixed_point_shift and float_fma_tail64 (the
// others stay with the reference).
//
// Bit-exact with kernels/cpu/ref/qadd_ref.cpp for every call supports() accepts, for any thread
// count (below: the same operations per element as the reference's qadd_one of core/ops/qadd.h).
// Where the build targets AVX-512 the body is written with intrinsics: the same operations per
// element, the rounding by a conversion whose immediate says nearest-even (no floating-point mode
// is read, as round_with reads none).
//
// This file is compiled as if with -fno-trapping-math (the pragma below): GCC 12 vectorises
// std::floor (round_with) only then. It changes no value, only whether FP exception flags may be
// raised differently; -ffp-contract=off and everything else of the build stay as they are.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "core/error.h"
#include "kernels/cpu/quant_loops.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

using quant_loops::is_q8;
using quant_loops::kChunk;

// ---------------------------------------------------------------------------------------------
// qadd: the reference's per-element formula, with the rule fixed at compile time so that the loop
// vectorises, OpenMP over chunks of the flat tensor. Integers (fixed_point_shift) are exact in
// any order; the float rule does the same float operations per element (std::fma where the
// reference has it, nothing else contracted), so the bits are the reference's. The float rule's
// scalar tail (the last numel % 64 elements in channels-last order, or in flat order) is a set of
// fewer than 64 elements: computed first into a small buffer (so that y may alias a or b), the
// whole tensor then run with the body's formula, and the tail written over it.

bool qadd_supports(const QAddParams& p, DType dt) {
  return dt == p.dtype && is_q8(p.dtype) && p.rule != QAddRule::tflite_fixed_point;  // that one: the reference
}

// The resolved numbers of one add, loop-invariant locals (stores through T* may alias a struct).
struct QAddConsts {
  float a_scale, b_scale, a_off, b_off, inv_y;  // a_off = a_scale * float(-za): the fma's addend
  int32_t za, zb, zy, lo, hi, a_mult, b_mult, shift, mask, half_mask;
  // float_ratio_fma: the ratios, the fixed term and the offset
  float a_ratio, b_ratio, fixed;
  int32_t off;
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
  k.a_ratio = p.a_ratio, k.b_ratio = p.b_ratio, k.fixed = p.fixed, k.off = p.offset;
  return k;
}

// One element: `body` picks the float rule's vectorised-body formula (fma) or its scalar tail's.
template <QAddRule R, bool Body, typename T>
inline T qadd_one(T a, T b, const QAddConsts& k) {
  if (R == QAddRule::float_ratio_fma) {  // the reference's formula (core/ops/qadd.h): b's fma, then a's
    const float t = std::fma(static_cast<float>(static_cast<int32_t>(b) + k.off), k.b_ratio, k.fixed);
    const float r = std::fma(static_cast<float>(static_cast<int32_t>(a) + k.off), k.a_ratio, t);
    const bool fits = r >= -2147483648.0f && r < 2147483648.0f;
    int64_t w = fits ? static_cast<int64_t>(round_with(r, RoundRule::half_even)) : int64_t{INT32_MIN};
    const int64_t tlo = int64_t{std::numeric_limits<T>::min()} + k.off;  // the shifted type's range
    const int64_t thi = int64_t{std::numeric_limits<T>::max()} + k.off;
    w = (w < tlo ? tlo : (w > thi ? thi : w)) - k.off;
    return static_cast<T>(w < k.lo ? k.lo : (w > k.hi ? k.hi : w));
  }
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
  const __m512i off = _mm512_set1_epi32(k.off);
  const __m512i tlo = _mm512_set1_epi32(std::numeric_limits<T>::min() + k.off);  // the shifted type's range
  const __m512i thi = _mm512_set1_epi32(std::numeric_limits<T>::max() + k.off);
  const __m512 ar = _mm512_set1_ps(k.a_ratio), br = _mm512_set1_ps(k.b_ratio), fixed = _mm512_set1_ps(k.fixed);
  auto widen = [](__m128i v) { return kSigned ? _mm512_cvtepi8_epi32(v) : _mm512_cvtepu8_epi32(v); };
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512i ia = widen(_mm_maskz_loadu_epi8(m, a + i)), ib = widen(_mm_maskz_loadu_epi8(m, b + i));
    __m512i v;
    if (R == QAddRule::float_ratio_fma) {
      // b's fma, then a's; the conversion rounds half to even by its immediate, and gives INT32_MIN
      // (the "integer indefinite") out of range, as the reference's cvtps2dq model does
      const __m512 t = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(ib, off)), br, fixed);
      const __m512 r = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(ia, off)), ar, t);
      v = _mm512_cvt_roundps_epi32(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      v = _mm512_sub_epi32(_mm512_min_epi32(_mm512_max_epi32(v, tlo), thi), off);
      v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
      _mm_mask_storeu_epi8(y + i, m, _mm512_cvtepi32_epi8(v));
      continue;
    }
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
  check(p.rule != QAddRule::tflite_fixed_point, "qadd fast: rule ", qadd_rule_name(p.rule),
        " is the reference kernel's only");
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
    else if (p.rule == QAddRule::float_ratio_fma)
      qadd_fast_t<QAddRule::float_ratio_fma>(p, a.data<T>(), b.data<T>(), numel, y.data<T>());
    else
      qadd_fast_t<QAddRule::float_fma_tail64>(p, a.data<T>(), b.data<T>(), numel, y.data<T>());
  };
  if (p.dtype == DType::u8)
    run(uint8_t{});
  else
    run(int8_t{});
}

}  // namespace

void register_qadd_fast(KernelRegistry& reg) {
  reg.qadd.at(KernelBackend::fast) = {"fast", "int8 and uint8, every QAddRule but tflite_fixed_point, any layout",
                                      qadd_supports, qadd_forward_fast};
}

}  // namespace driftlab
