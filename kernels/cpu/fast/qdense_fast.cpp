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
// qdense: the same GEMM with the batch rows as columns. The rows go in blocks whose panel
// (Xp[j/4][m][4], groups x rows x 4 bytes) stays in a core's L2 (at most kPanelBytes, 48 to 240
// rows), all blocks' panels written first; then each work item, one block's rows by a run of
// kOutChunk output channels, runs the tiles with the channel loop outside: a tile's 8 weight rows
// are read from memory once per block and reused over its rows, where a loop over 64-row blocks
// with the columns outside streamed every weight once per 48 rows (VGG-16's 4096 x 4096 layer:
// 16 MiB of weights read about 32 times for 1,000 inputs, 66 ms of a 0.7 s int8 prediction).
// Channel runs give both threads work when there is a single block (small batches).

bool qdense_supports(const QDenseParams& p, DType dt) {
  // int16 pairs: inputs (2j, 2j+1) are a panel quad's (t0,t1), (t2,t3) (ORT's and oneDNN's rule
  // for dense layers alike: no padding taps)
  return dt == p.x_dtype && is_q8(p.x_dtype) && is_q8(p.y_dtype) &&
         (p.dot == DotRule::exact || p.dot == DotRule::int16_pairs_hwc || p.dot == DotRule::int16_pairs_channels);
}

constexpr int64_t kPanelBytes = 768 * 1024;
constexpr int64_t kOutChunk = 64;

// Rows per block for reduction length j4: a multiple of 48 (the widest tile's columns) whose
// panel fits kPanelBytes, from 48 to 240.
int64_t dense_block_rows(int64_t j4) {
  const int64_t w = 16 * kMaxNv;
  return std::max<int64_t>(w, std::min<int64_t>(5 * w, kPanelBytes / std::max<int64_t>(j4, 1) / w * w));
}

template <typename TX, typename TY>
void qdense_fast(const QDenseParams& p, const TX* x, const int8_t* w, const int32_t* bias, TY* y) {
  const uint8_t flip = sign_flip(p.x_dtype);
  const PackedWeights pw = pack_weights(w, p.out, p.in, bias, shifted_zero_point(p.x_dtype, p.x_zero_point));
  const int64_t groups = pw.j4 / 4, full = p.in / 4, R = dense_block_rows(pw.j4);
  const int64_t blocks = (p.n + R - 1) / R, chunks = (p.out + kOutChunk - 1) / kOutChunk;
  const RequantRowFn<TY> requant = requant_row_for<TY>(p.rq);
  const auto tile_fn = tiles().table(p.dot);
  std::vector<uint8_t> panels(static_cast<std::size_t>(blocks * groups * R * 4), 0);
  uint32_t flip4;
  std::memset(&flip4, flip, 4);
  auto block_mpad = [&](int64_t b) { return round_up(std::min(R, p.n - b * R), 16); };
#pragma omp parallel
  {
    // 1) the panels: Xp[g][m][4] = x[n0 + m][4g .. 4g+3] shifted; terms past `in` are 0 (their
    //    weights are 0), as are the columns past a block's rows
#pragma omp for schedule(static)
    for (int64_t r = 0; r < p.n; ++r) {
      const int64_t b = r / R, m = r % R, mpad = block_mpad(b);
      uint8_t* panel = panels.data() + b * groups * R * 4;
      const uint8_t* src = reinterpret_cast<const uint8_t*>(x + r * p.in);
      for (int64_t gi = 0; gi < full; ++gi) {
        uint32_t quad;
        std::memcpy(&quad, src + 4 * gi, 4);
        quad ^= flip4;
        std::memcpy(panel + (gi * mpad + m) * 4, &quad, 4);
      }
      for (int64_t j = full * 4; j < pw.j4; ++j)
        panel[(full * mpad + m) * 4 + (j - full * 4)] = j < p.in ? static_cast<uint8_t>(src[j] ^ flip) : 0;
    }
    // 2) per (block, run of output channels): the tiles, channel blocks outside, requantized
    //    and stored into the rows of y
    std::vector<int32_t> cbuf(static_cast<std::size_t>(kMaxKb * 16 * kMaxNv));
    std::vector<int64_t> bgoff(static_cast<std::size_t>(groups));
    alignas(64) TY rq[kMaxKb][16 * kMaxNv];
#pragma omp for schedule(static)
    for (int64_t item = 0; item < blocks * chunks; ++item) {
      const int64_t b = item / chunks, o0 = item % chunks * kOutChunk, o1 = std::min(p.out, o0 + kOutChunk);
      const int64_t n0 = b * R, rows = std::min(R, p.n - n0), mpad = block_mpad(b);
      const uint8_t* panel = panels.data() + b * groups * R * 4;
      for (int64_t g = 0; g < groups; ++g) bgoff[g] = g * mpad * 4;
      for (int64_t k0 = o0; k0 < o1; k0 += kMaxKb) {
        const int kb = static_cast<int>(std::min<int64_t>(kMaxKb, o1 - k0));
        for (int64_t m0 = 0; m0 < mpad; m0 += 16 * kMaxNv) {
          const int nv = static_cast<int>(std::min<int64_t>(kMaxNv, (mpad - m0) / 16));
          const int64_t ldc = 16 * nv, cols = std::min<int64_t>(ldc, rows - m0);
          tile_fn[kb][nv](pw.data() + k0 * pw.j4, pw.j4, pw.corr.data() + k0, panel + m0 * 4, bgoff.data(),
                          cbuf.data(), ldc);
          for (int i = 0; i < kb; ++i)
            requant(cbuf.data() + i * ldc, cols, p.rq.channel(k0 + i), p.rq.zero_point, p.rq.lo, p.rq.hi, rq[i]);
          for (int64_t m = 0; m < cols; ++m) {
            TY* yr = y + (n0 + m0 + m) * p.out + k0;
            for (int i = 0; i < kb; ++i) yr[i] = rq[i][m];
          }
        }
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
