// Fast int8 pooling (registry slot `fast`), int8|uint8 in and out, every output written (=):
// qmaxpool2d x (N,C,H,W) -> y (N,C,P,Q) and qglobal_avg_pool x (N,C,H,W) -> y (N,C).
//
// Bit-exact with kernels/cpu/ref/qpool_ref.cpp for any thread count: an integer max rounds
// nothing, and the average's plane sums are exact integers, each output then the reference's
// qgap_one() of core/ops/qpool.h. Where the CPU has AVX-512 VNNI, and so AVX-512BW (the GEMM's
// run-time check, tiles().vnni of kernels/cpu/fast/qgemm_fast.h), the 2x2 stride-2 max pool is
// written with intrinsics.
//
// This file is compiled as if with -fno-trapping-math (the pragma below): GCC 12 vectorises
// std::floor (round_with) only then. It changes no value, only whether FP exception flags may be
// raised differently; -ffp-contract=off and everything else of the build stay as they are.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include <omp.h>

#include "core/error.h"
#include "kernels/cpu/fast/qgemm_fast.h"
#include "kernels/cpu/pool2d_loops.h"
#include "kernels/cpu/quant_loops.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

using qgemm_fast::tiles;
using quant_loops::check_tensor;
using quant_loops::is_q8;
using quant_loops::kChunk;

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

void register_qpool_fast(KernelRegistry& reg) {
  reg.qmaxpool2d.at(KernelBackend::fast) = {"fast", "int8 and uint8, any window (2x2 stride 2 vectorised)",
                                            qmaxpool2d_supports, qmaxpool2d_forward_fast};
  reg.qglobal_avg_pool.at(KernelBackend::fast) = {"fast", "int8 and uint8", qgap_supports,
                                                  qglobal_avg_pool_forward_fast};
}

}  // namespace driftlab
