// Fast dynamic-range dense kernel, qdense_dynamic (registry slot `fast`): x f32 (n,in), w i8 (out,in),
// w_scale f32 (1)|(out), bias f32 (out)|null -> y f32 (n,out), every output written (=).
//
// Bit-exact with kernels/cpu/ref/quant_dynamic_ref.cpp for every params value and any thread count:
// the input's quantization is chosen by the same choose_dynamic_input_q(); each input value goes
// through the same float32 operations (kernels/cpu/quant_dynamic_loops.h, restated with AVX-512
// intrinsics: multiply or divide, round_with's floor / fraction / tie test, the clamp, a truncating
// conversion); the sums are exact integers; each output is formed by the reference's float32 steps
// in its order (separate multiplies and adds: the build has -ffp-contract=off, and intrinsics are
// not contracted either).
//
// The integer product is one u8 x s8 GEMM with VPDPBUSD (AVX-512 VNNI):
//   acc[r][c] = sum_k u[r][k] * w[c][k] - (zp_r + o) * sum_k w[c][k],   u = x_q + o
// with o = 0 for the uint8 (affine) rules and 128 for the int8 (per-row) rules, so u is in [0, 255].
// Since u - (zp_r + o) = x_q - zp_r, acc is the reference's sum; every term and partial sum is
// bounded by in * 255 * 128, which QDenseDynamicParams::validate() keeps inside int32.
// Layouts, built per call: u (n, k4) uint8 with k4 = in rounded up to 4 (padding 0); the weights
// Wp (k4/4, out16, 4) int8 with out16 = out rounded up to 16 (padding 0): one 64-byte load is 16
// outputs x 4 consecutive k, VPDPBUSD's operand; a row's 4 bytes at k are broadcast against it.
// A register tile is kRows rows x kBlocks 16-output blocks; tiles are split over OpenMP threads,
// each output computed by one thread the same way whatever the count.
//
// Where the CPU lacks AVX-512 VNNI (checked at run time) a portable loop of the shared formulas
// computes the same values.
//
// Not matched: under affine_per_row, a row whose scale underflows float32 to 0 (a range below
// ~1e-43) makes 1/s infinite and 0 * inf NaN, whose conversion to int the reference leaves to the
// compiler (undefined behaviour in C++); the two kernels may then differ.
#include <algorithm>
#include <cstring>
#include <vector>

#include <omp.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DL_QDYN_X86 1
#endif

#include "core/error.h"
#include "core/ops/quant_dynamic.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/quant_dynamic_loops.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

constexpr int kRows = 4;    // input rows per register tile
constexpr int kBlocks = 4;  // 16-output blocks per register tile (4 x 4 accumulators + 4 weight loads)

// What one call computes before the products, padded for the tiles.
struct Prepared {
  int64_t k4 = 0, out16 = 0;
  std::vector<uint8_t> u;                     // (n, k4): x_q + o
  std::vector<int32_t> wp;                    // (k4/4, out16): 4 int8 weights per lane
  std::vector<int32_t> wsum;                  // (out16): sum_k w[c][k]
  std::vector<int32_t> zpo;                   // (n): zp_r + o
  std::vector<float> sx, inv_sx;              // (n): the row's input scale and 1/scale
  std::vector<float> sw, inv_sw, bias;        // (out16): weight scale, 1/scale, bias (0 past out)
};

int32_t input_offset(DynActRule act) {
  return act == DynActRule::symmetric_per_row || act == DynActRule::affine_per_row ? 128 : 0;
}

// Wp and the per-output vectors; wsum from the original weights.
void prepare_weights(const QDenseDynamicParams& p, const Tensor& w, const Tensor& w_scale, const Tensor* bias,
                     Prepared& pr) {
  const int64_t in = p.in, out = p.out, k4 = pr.k4, out16 = pr.out16, groups = k4 / 4;
  const int8_t* ws = w.data<int8_t>();
  pr.wp.assign(static_cast<std::size_t>(groups * out16), 0);
  pr.wsum.assign(static_cast<std::size_t>(out16), 0);
  for (int64_t c = 0; c < out; ++c) {
    const int8_t* row = ws + c * in;
    int32_t s = 0;
    for (int64_t k = 0; k < in; ++k) s += row[k];
    pr.wsum[static_cast<std::size_t>(c)] = s;
    const int64_t full = in / 4;
    for (int64_t g = 0; g < full; ++g) std::memcpy(&pr.wp[static_cast<std::size_t>(g * out16 + c)], row + 4 * g, 4);
    if (full < groups) {
      int8_t last[4] = {0, 0, 0, 0};
      std::memcpy(last, row + 4 * full, static_cast<std::size_t>(in - 4 * full));
      std::memcpy(&pr.wp[static_cast<std::size_t>(full * out16 + c)], last, 4);
    }
  }
  const float* sw = w_scale.data<float>();
  pr.sw.assign(static_cast<std::size_t>(out16), 1.0f);
  pr.inv_sw.assign(static_cast<std::size_t>(out16), 1.0f);
  pr.bias.assign(static_cast<std::size_t>(out16), 0.0f);
  for (int64_t c = 0; c < out; ++c) {
    const float s = w_scale.numel() == 1 ? sw[0] : sw[c];
    pr.sw[static_cast<std::size_t>(c)] = s;
    pr.inv_sw[static_cast<std::size_t>(c)] = 1.0f / s;
    if (bias) pr.bias[static_cast<std::size_t>(c)] = bias->data<float>()[c];
  }
}

// ---------------------------------------------------------------------------------------------
// Portable path: the shared formulas, one output at a time.

void quantize_rows_portable(const QDenseDynamicParams& p, const float* x, const DynInputQ& q, Prepared& pr) {
  const int32_t o = input_offset(p.act);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < p.n; ++r)
    for (int64_t k = 0; k < p.in; ++k)
      pr.u[static_cast<std::size_t>(r * pr.k4 + k)] = static_cast<uint8_t>(
          quant_dynamic_loops::quantize_input_one(p, x[r * p.in + k], q.scale_of(r), q.inv_of(r), q.zero_point_of(r)) + o);
}

void products_portable(const QDenseDynamicParams& p, const Tensor& w, const Tensor* bias, const Prepared& pr,
                       float* y) {
  const int8_t* ws = w.data<int8_t>();
  const float* b = bias ? bias->data<float>() : nullptr;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < p.n; ++r)
    for (int64_t c = 0; c < p.out; ++c) {
      uint32_t acc = 0;  // wraps like int32; the final value is the reference's (see the header)
      for (int64_t k = 0; k < p.in; ++k)
        acc += static_cast<uint32_t>(static_cast<int32_t>(pr.u[static_cast<std::size_t>(r * pr.k4 + k)]) *
                                     static_cast<int32_t>(ws[c * p.in + k]));
      acc -= static_cast<uint32_t>(pr.zpo[static_cast<std::size_t>(r)]) *
             static_cast<uint32_t>(pr.wsum[static_cast<std::size_t>(c)]);
      y[r * p.out + c] = quant_dynamic_loops::output_one(p.out_rule, static_cast<int32_t>(acc),
                                                         pr.sx[static_cast<std::size_t>(r)],
                                                         pr.sw[static_cast<std::size_t>(c)], b ? b + c : nullptr);
    }
}

// ---------------------------------------------------------------------------------------------
// AVX-512 VNNI path.

#if DL_QDYN_X86
#define DL_QDYN_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

bool cpu_has_vnni() {
  return cpu_supports(CpuFeature::avx512f) && cpu_supports(CpuFeature::avx512bw) &&
         cpu_supports(CpuFeature::avx512vl) && cpu_supports(CpuFeature::avx512vnni);
}

// Full-mask forms of max, min, roundscale and the conversions: GCC 12's unmasked intrinsics read an
// uninitialised "undefined" operand and warn (-Wuninitialized) wherever they are inlined (as in
// kernels/cpu/fast/rnn_fast.cpp). max/min keep the instruction's operand order: (a > b ? a : b), the second
// operand where either is NaN.
constexpr __mmask16 kAll = 0xFFFF;
DL_QDYN_TARGET inline __m512 vmax(__m512 a, __m512 b) { return _mm512_mask_max_ps(a, kAll, a, b); }
DL_QDYN_TARGET inline __m512 vmin(__m512 a, __m512 b) { return _mm512_mask_min_ps(a, kAll, a, b); }
DL_QDYN_TARGET inline __m512 vfloor(__m512 v) {
  return _mm512_mask_roundscale_ps(v, kAll, v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
}
DL_QDYN_TARGET inline __m512i vtrunc_i32(__m512 v) {
  return _mm512_mask_cvttps_epi32(_mm512_setzero_si512(), kAll, v);
}
DL_QDYN_TARGET inline __m512 vto_f32(__m512i v) { return _mm512_mask_cvtepi32_ps(_mm512_setzero_ps(), kAll, v); }

// round_with (core/ops/requant.h) lane by lane: f = floor(v), frac = v - f (exact); above one half
// f + 1, below f, a tie by the rule. NaN stays NaN (f + 1 of NaN).
DL_QDYN_TARGET inline __m512 round_avx512(__m512 v, RoundRule rule) {
  const __m512 f = vfloor(v);
  const __m512 frac = _mm512_sub_ps(v, f);
  const __m512 half = _mm512_set1_ps(0.5f);
  const __mmask16 gt = _mm512_cmp_ps_mask(frac, half, _CMP_GT_OQ);
  const __mmask16 lt = _mm512_cmp_ps_mask(frac, half, _CMP_LT_OQ);
  __mmask16 tie_up;
  if (rule == RoundRule::half_away) {
    tie_up = static_cast<__mmask16>(~_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ));  // !(v < 0)
  } else {
    const __m512 h = _mm512_mul_ps(f, half);  // floor(h) == h: f even, kept
    tie_up = _mm512_cmp_ps_mask(vfloor(h), h, _CMP_NEQ_UQ);
  }
  const __mmask16 up = static_cast<__mmask16>(gt | (static_cast<__mmask16>(~(gt | lt)) & tie_up));
  return _mm512_mask_add_ps(f, up, f, _mm512_set1_ps(1.0f));
}

// One row of u: quantize_input_one() + o for 16 values at a time.
DL_QDYN_TARGET void quantize_row_avx512(const QDenseDynamicParams& p, const float* x, float s, float inv, int32_t zp,
                                        uint8_t* u) {
  const bool per_row_affine = p.act == DynActRule::affine_per_row;
  const bool divide = (p.act == DynActRule::affine_double || p.act == DynActRule::affine_float) &&
                      p.x_op == ScaleOp::divide;
  // quantize_one's clamp bounds (qmin - zp, qmax - zp in float) and what is added after the conversion
  int32_t lo, hi, add;
  if (per_row_affine) {
    lo = p.qmin, hi = p.qmax, add = 128;
  } else if (p.act == DynActRule::symmetric_per_row) {
    lo = -p.qmax, hi = p.qmax, add = 128;  // zp 0
  } else {
    lo = 0, hi = 255, add = zp;
  }
  const float sub = per_row_affine ? 0.0f : static_cast<float>(zp);
  const __m512 vlo = _mm512_set1_ps(static_cast<float>(lo) - sub), vhi = _mm512_set1_ps(static_cast<float>(hi) - sub);
  const __m512 vs = _mm512_set1_ps(s), vinv = _mm512_set1_ps(inv), vzp = _mm512_set1_ps(static_cast<float>(zp));
  const __m512i vadd = _mm512_set1_epi32(add);
  for (int64_t k = 0; k < p.in; k += 16) {
    const __mmask16 m = p.in - k >= 16 ? static_cast<__mmask16>(0xffff)
                                       : static_cast<__mmask16>((1u << (p.in - k)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + k);
    __m512 f;
    if (per_row_affine) {
      f = round_avx512(_mm512_add_ps(vzp, _mm512_mul_ps(v, vinv)), p.x_round);
      f = vmax(vlo, f);  // std::max(f, lo) = f < lo ? lo : f (NaN stays, as there)
      f = vmin(vhi, f);  // std::min(f, hi) = hi < f ? hi : f
    } else {
      f = round_avx512(divide ? _mm512_div_ps(v, vs) : _mm512_mul_ps(v, vinv), p.x_round);
      f = vmax(f, vlo);  // !(f >= lo) -> lo, NaN included (MAXPS returns the second operand)
      f = vmin(f, vhi);  // f > hi -> hi
    }
    const __m512i q = _mm512_add_epi32(vtrunc_i32(f), vadd);
    _mm512_mask_cvtepi32_storeu_epi8(u + k, m, q);
  }
}

struct TileArgs {
  const QDenseDynamicParams* p;
  const Prepared* pr;
  float* y;
};

// y rows [r0, r0 + R), 16-output blocks [b0, b0 + B): the sums, the zero-point correction, the
// output rule (output_one's steps), stored with a mask past `out`.
template <int R, int B>
DL_QDYN_TARGET void tile_vnni(const TileArgs& a, int64_t r0, int64_t b0) {
  const Prepared& pr = *a.pr;
  const int64_t k4 = pr.k4, out16 = pr.out16, out = a.p->out, groups = k4 / 4;
  __m512i acc[R][B];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int b = 0; b < B; ++b) acc[r][b] = _mm512_setzero_si512();
  const uint8_t* u = pr.u.data() + r0 * k4;
  const int32_t* wp = pr.wp.data() + b0 * 16;
  for (int64_t g = 0; g < groups; ++g) {
    __m512i wv[B];
#pragma GCC unroll 4
    for (int b = 0; b < B; ++b) wv[b] = _mm512_loadu_si512(wp + g * out16 + 16 * b);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      int32_t quad;
      std::memcpy(&quad, u + r * k4 + 4 * g, 4);
      const __m512i xv = _mm512_set1_epi32(quad);
#pragma GCC unroll 4
      for (int b = 0; b < B; ++b) acc[r][b] = _mm512_dpbusd_epi32(acc[r][b], xv, wv[b]);
    }
  }
  const bool scale_then_bias = a.p->out_rule == DynOutRule::scale_then_bias, has_bias = a.p->has_bias;
  const __m512 one = _mm512_set1_ps(1.0f);
#pragma GCC unroll 4
  for (int b = 0; b < B; ++b) {
    const int64_t c0 = (b0 + b) * 16;
    const __mmask16 m = out - c0 >= 16 ? static_cast<__mmask16>(0xffff)
                                       : static_cast<__mmask16>((1u << (out - c0)) - 1);
    const __m512i wsum = _mm512_loadu_si512(pr.wsum.data() + c0);
    const __m512 bias = _mm512_loadu_ps(pr.bias.data() + c0);
    const __m512 sw = _mm512_loadu_ps((scale_then_bias ? pr.sw : pr.inv_sw).data() + c0);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const int64_t row = r0 + r;
      const __m512i corr = _mm512_mullo_epi32(_mm512_set1_epi32(pr.zpo[static_cast<std::size_t>(row)]), wsum);
      const __m512 facc = vto_f32(_mm512_sub_epi32(acc[r][b], corr));
      __m512 v;
      if (scale_then_bias) {  // facc * (s_x * s_w) [+ b]
        v = _mm512_mul_ps(facc, _mm512_mul_ps(_mm512_set1_ps(pr.sx[static_cast<std::size_t>(row)]), sw));
        if (has_bias) v = _mm512_add_ps(v, bias);
      } else {  // bs = (1/s_x) * (1/s_w); (facc [+ b * bs]) * (1/bs)
        const __m512 bs = _mm512_mul_ps(_mm512_set1_ps(pr.inv_sx[static_cast<std::size_t>(row)]), sw);
        const __m512 num = has_bias ? _mm512_add_ps(facc, _mm512_mul_ps(bias, bs)) : facc;
        v = _mm512_mul_ps(num, _mm512_div_ps(one, bs));
      }
      _mm512_mask_storeu_ps(a.y + row * out + c0, m, v);
    }
  }
}

using TileFn = void (*)(const TileArgs&, int64_t, int64_t);

struct Tiles {
  TileFn fn[kRows + 1][kBlocks + 1] = {};
  template <int R>
  void fill_row() {
    fn[R][1] = tile_vnni<R, 1>, fn[R][2] = tile_vnni<R, 2>, fn[R][3] = tile_vnni<R, 3>, fn[R][4] = tile_vnni<R, 4>;
  }
  Tiles() { fill_row<1>(), fill_row<2>(), fill_row<3>(), fill_row<4>(); }
};
static_assert(kRows == 4 && kBlocks == 4, "Tiles fills 1..4 x 1..4");

void forward_vnni(const QDenseDynamicParams& p, const float* x, const DynInputQ& q, Prepared& pr, float* y) {
  static const Tiles tiles;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < p.n; ++r)
    quantize_row_avx512(p, x + r * p.in, q.scale_of(r), q.inv_of(r), q.zero_point_of(r),
                        pr.u.data() + r * pr.k4);
  const int64_t row_tiles = (p.n + kRows - 1) / kRows, blocks = pr.out16 / 16;
  const int64_t block_tiles = (blocks + kBlocks - 1) / kBlocks;
  const TileArgs args{&p, &pr, y};
  // block tile outer: a thread's consecutive tiles share their weights (k4 * 256 bytes) in L1
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < row_tiles * block_tiles; ++t) {
    const int64_t r0 = (t % row_tiles) * kRows, b0 = (t / row_tiles) * kBlocks;
    const int R = static_cast<int>(std::min<int64_t>(kRows, p.n - r0));
    const int B = static_cast<int>(std::min<int64_t>(kBlocks, blocks - b0));
    tiles.fn[R][B](args, r0, b0);
  }
}
#else
bool cpu_has_vnni() { return false; }
#endif

// x:(n,in) w:(out,in) w_scale:(1)|(out) bias:(out)|null -> y:(n,out)
void qdense_dynamic_fast(const QDenseDynamicParams& p, const Tensor& x, const Tensor& w, const Tensor& w_scale,
                         const Tensor* bias, Tensor& y) {
  quant_dynamic_loops::check_call(p, x, w, w_scale, bias, y);
  static const bool vnni = cpu_has_vnni();  // a property of the CPU, decided once
  const float* xs = x.data<float>();
  const DynInputQ q = choose_dynamic_input_q(p, xs);
  Prepared pr;
  pr.k4 = (p.in + 3) / 4 * 4;
  pr.out16 = (p.out + 15) / 16 * 16;
  pr.u.assign(static_cast<std::size_t>(p.n * pr.k4), 0);
  const int32_t o = input_offset(p.act);
  pr.zpo.resize(static_cast<std::size_t>(p.n));
  pr.sx.resize(static_cast<std::size_t>(p.n));
  pr.inv_sx.resize(static_cast<std::size_t>(p.n));
  for (int64_t r = 0; r < p.n; ++r) {
    pr.zpo[static_cast<std::size_t>(r)] = q.zero_point_of(r) + o;
    pr.sx[static_cast<std::size_t>(r)] = q.scale_of(r);
    pr.inv_sx[static_cast<std::size_t>(r)] = 1.0f / q.scale_of(r);
  }
  prepare_weights(p, w, w_scale, bias, pr);
#if DL_QDYN_X86
  if (vnni) {
    forward_vnni(p, xs, q, pr, y.data<float>());
    return;
  }
#endif
  (void)vnni;
  quantize_rows_portable(p, xs, q, pr);
  products_portable(p, w, bias, pr, y.data<float>());
}

}  // namespace

void register_quant_dynamic_fast(KernelRegistry& reg) {
  reg.qdense_dynamic.at(KernelBackend::fast) = {
      "fast", "every params field (AVX-512 VNNI where the CPU has it, else a portable loop)",
      [](const QDenseDynamicParams&, DType) { return true; }, qdense_dynamic_fast};
}

}  // namespace driftlab
