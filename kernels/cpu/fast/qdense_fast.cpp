// Fast qdense (registry slot `fast`): x (n,in) int8|uint8, w (out,in) int8, bias (out) int32 |
// null -> y (n,out) int8|uint8, every output written (=).
//
// Bit-exact with kernels/cpu/ref/qdense_ref.cpp for every call supports() accepts, for any thread
// count: the accumulators are integers (the u8 x s8 GEMM of kernels/cpu/fast/qgemm_fast.h, whose
// opening says why they are the reference's), and every output element goes through the same
// requantize_one() of core/ops/requant.h (or its intrinsic form: the same operations per element).
// The dense layer packs its rows into a panel Xp[j/4][m][4] and runs the GEMM's tiles.
//
// This file is compiled as if with -fno-trapping-math (the pragma below): GCC 12 vectorises
// std::floor (round_with) only then. It changes no value, only whether FP exception flags may be
// raised differently; -ffp-contract=off and everything else of the build stay as they are.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <cstring>
#include <vector>

#include <omp.h>

#include "core/error.h"
#include "kernels/cpu/fast/qgemm_fast.h"
#include "kernels/cpu/quant_loops.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

using namespace qgemm_fast;
using quant_loops::check_q_io;
using quant_loops::dispatch_xy;
using quant_loops::is_q8;

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

}  // namespace

void register_qdense_fast(KernelRegistry& reg) {
  reg.qdense.at(KernelBackend::fast) = {"fast", "int8/uint8 in and out; exact sums and both int16 pair rules (no padding "
                                        "taps in a dense layer); AVX-512 VNNI where the CPU has it",
                                        qdense_supports, qdense_forward_fast};
}

}  // namespace driftlab
