#include "kernels/cpu/fast/round_fast.h"

#include <immintrin.h>

#include "core/error.h"
#include "kernels/cpu/cpu_isa.h"

namespace driftlab {

const char* round_path_name(RoundPath p) {
  switch (p) {
    case RoundPath::scalar: return "scalar";
    case RoundPath::avx2: return "avx2";
    case RoundPath::avx512: return "avx512";
  }
  return "?";
}

namespace {

inline float round_one(float x, RoundFormat f, Rounding rule) {
  switch (f) {
    case RoundFormat::tf32: return round_to_tf32(x, rule);
    case RoundFormat::bf16: return round_to_bf16(x, rule);
    case RoundFormat::fp16: return round_to_fp16(x);
  }
  return x;
}

int dropped_bits(RoundFormat f) { return f == RoundFormat::tf32 ? 13 : 16; }

// The bias added to the bits before the dropped ones are cleared, as a function of the kept
// least significant bit (lsb): nearest_even half-1+lsb, nearest_away half, truncate 0.
struct MantissaRule {
  uint32_t keep_mask, half_minus_one, lsb_shift;
  bool even, away;
};
MantissaRule mantissa_rule(RoundFormat f, Rounding r) {
  const int drop = dropped_bits(f);
  return {~((1u << drop) - 1u), (1u << (drop - 1)) - 1u, static_cast<uint32_t>(drop),
          r == Rounding::nearest_even, r == Rounding::nearest_away};
}

__attribute__((target("avx2,f16c"))) void round_avx2(float* d, int64_t n, RoundFormat f, Rounding rule) {
  int64_t i = 0;
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf_bits = _mm256_set1_epi32(0x7f800000),
                quiet = _mm256_set1_epi32(0x00400000);
  if (f == RoundFormat::fp16) {
    for (; i + 8 <= n; i += 8) {
      const __m256 x = _mm256_loadu_ps(d + i);
      const __m256i u = _mm256_castps_si256(x);
      const __m256 r = _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf_bits);
      const __m256i out = _mm256_blendv_epi8(_mm256_castps_si256(r), _mm256_or_si256(u, quiet), nan);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), out);
    }
  } else {
    const MantissaRule m = mantissa_rule(f, rule);
    const __m256i keep = _mm256_set1_epi32(static_cast<int>(m.keep_mask)),
                  hm1 = _mm256_set1_epi32(static_cast<int>(m.half_minus_one)), one = _mm256_set1_epi32(1);
    const __m128i shift = _mm_cvtsi32_si128(static_cast<int>(m.lsb_shift));
    for (; i + 8 <= n; i += 8) {
      const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d + i));
      __m256i bias = _mm256_setzero_si256();
      if (m.even) bias = _mm256_add_epi32(hm1, _mm256_and_si256(_mm256_srl_epi32(u, shift), one));
      if (m.away) bias = _mm256_add_epi32(hm1, one);
      const __m256i r = _mm256_and_si256(_mm256_add_epi32(u, bias), keep);
      const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf_bits);
      const __m256i out = _mm256_blendv_epi8(r, _mm256_or_si256(u, quiet), nan);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), out);
    }
  }
  for (; i < n; ++i) d[i] = round_one(d[i], f, rule);
}

__attribute__((target("avx512f"))) void round_avx512(float* d, int64_t n, RoundFormat f, Rounding rule) {
  int64_t i = 0;
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf_bits = _mm512_set1_epi32(0x7f800000),
                quiet = _mm512_set1_epi32(0x00400000);
  if (f == RoundFormat::fp16) {
    for (; i + 16 <= n; i += 16) {
      const __m512 x = _mm512_loadu_ps(d + i);
      const __m512i u = _mm512_castps_si512(x);
      const __m512 r = _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs_mask), inf_bits);
      _mm512_storeu_si512(d + i, _mm512_mask_or_epi32(_mm512_castps_si512(r), nan, u, quiet));
    }
  } else {
    const MantissaRule m = mantissa_rule(f, rule);
    const __m512i keep = _mm512_set1_epi32(static_cast<int>(m.keep_mask)),
                  hm1 = _mm512_set1_epi32(static_cast<int>(m.half_minus_one)), one = _mm512_set1_epi32(1);
    const unsigned shift = m.lsb_shift;
    for (; i + 16 <= n; i += 16) {
      const __m512i u = _mm512_loadu_si512(d + i);
      __m512i bias = _mm512_setzero_si512();
      if (m.even) bias = _mm512_add_epi32(hm1, _mm512_and_si512(_mm512_srli_epi32(u, shift), one));
      if (m.away) bias = _mm512_add_epi32(hm1, one);
      const __m512i r = _mm512_and_si512(_mm512_add_epi32(u, bias), keep);
      const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs_mask), inf_bits);
      _mm512_storeu_si512(d + i, _mm512_mask_or_epi32(r, nan, u, quiet));
    }
  }
  for (; i < n; ++i) d[i] = round_one(d[i], f, rule);
}

}  // namespace

void round_floats_reference(float* d, int64_t n, RoundFormat f, Rounding rule) {
  for (int64_t i = 0; i < n; ++i) d[i] = round_one(d[i], f, rule);
}

bool round_path_available(RoundPath p) {
  switch (p) {
    case RoundPath::scalar: return true;
    case RoundPath::avx2: return cpu_supports(CpuFeature::avx2) && cpu_supports(CpuFeature::f16c);
    case RoundPath::avx512: return cpu_supports(CpuFeature::avx512f);
  }
  return false;
}

namespace {
void run_path(RoundPath p, float* d, int64_t n, RoundFormat f, Rounding rule) {
  switch (p) {
    case RoundPath::scalar: round_floats_reference(d, n, f, rule); return;
    case RoundPath::avx2: round_avx2(d, n, f, rule); return;
    case RoundPath::avx512: round_avx512(d, n, f, rule); return;
  }
}
}  // namespace

void round_floats_on(RoundPath p, float* d, int64_t n, RoundFormat f, Rounding rule) {
  check(round_path_available(p), "round_floats: this CPU has no ", round_path_name(p), " path");
  run_path(p, d, n, f, rule);
}

RoundPath best_round_path() {
  static const RoundPath best = round_path_available(RoundPath::avx512) ? RoundPath::avx512
                                : round_path_available(RoundPath::avx2)  ? RoundPath::avx2
                                                                         : RoundPath::scalar;
  return best;
}

// The path found once (best_round_path): no CPUID per call.
void round_floats(float* d, int64_t n, RoundFormat f, Rounding rule) { run_path(best_round_path(), d, n, f, rule); }

}  // namespace driftlab
