// Fast conv_block (core/ops/conv_block.h): convolution + bias + activation + max pooling run
// image by image, the images (forward) or groups of kGroup images (backward) taken by the OpenMP
// threads as they free up.
//
// Why per image: LeNet's blocks are tiny (conv1 of LeNet-5: 1 input channel, 6 outputs, 24x24)
// and a batch-wide kernel per layer spends its time on per-op set-up, passes through memory and
// vector lanes its channel counts cannot fill (measured before this file existed: oneDNN's JIT
// convolutions were 62% of a LeNet-1 epoch on an AVX2 machine at 6% of the FMA limit;
// docs/BENCHMARKS.md, "LeNet training through fused conv blocks"). Here one image's input,
// pre-activation and gradients stay in L1/L2 while the four ops run, and the vector lanes run
// along the output rows (8 columns per AVX2 register), which every shape fills.
//
// The convolution core: a register tile of KB output channels x NV vectors of 8 output pixels;
// per tap (input channel, r, s) NV unaligned loads of the input row, KB weight broadcasts and
// KB*NV FMAs. The image is copied once into a zero-padded buffer whose rows are a multiple of 8
// columns wide (plus the kernel's width), so every load is a full vector and no tap needs a bound
// check; the extra columns and rows compute values nobody reads. The tile shape is chosen per
// call from a small set by counting FMA and load cycles (choose_tile). The input gradient is the
// same core as a 1x1 convolution of the output gradient into one plane per (c, r, s) (no
// multiplication by the zeros a full correlation over a zero-bordered gradient would do: 3x the
// work for LeNet-5's conv2), each tile added straight into place in the padded dx image (col2im
// in the core's epilogue: no column buffer); the weight gradient keeps 8 lanes per weight over a
// group of images in registers, sums them into one float per weight and group, and the groups'
// floats are summed once per call.
//
// Reproducibility: each group's dw/db lanes are summed in image order (dw: the group's sums in
// registers), then the lanes in one fixed order (hsum8), then the groups' sums in group order,
// whichever thread ran which group: the same bits run after run and for any thread count
// (ConvBlockFast.BitIdenticalAcrossRuns, ConvBlockFast.SameBitsAtOneAndTwoThreads).
// Against the reference the convolution's sums run in another order: equal within a tolerance
// (tests/ops/test_conv_block.cpp). The activation and the pooling use the shared formulas
// (activation_value / activation_grad, max_scan_takes), so y is exactly maxpool(act(z)) of the
// kernel's own z and the backward finds the same winners as the pooling layer would.
//
// AVX2 + FMA builds only; elsewhere the slot stays empty and the three layers run unfused. AVX-512
// builds add 16-float tiles (conv_core<Wide>: two 8-float vectors per register) to the tile choice.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include <omp.h>

#include "core/error.h"
#include "kernels/cpu/fast/conv_block_fast.h"
#include "kernels/cpu/pool2d_loops.h"
#include "kernels/cpu/registry.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define DL_CONV_BLOCK_FAST 1
#if defined(__AVX512F__) && defined(__AVX512DQ__)
#define DL_CONV_BLOCK_WIDE 1  // AVX-512 builds also have the 16-float tiles
#endif
#endif

namespace driftlab {

#if DL_CONV_BLOCK_FAST
namespace {

constexpr int64_t V = 8;  // floats per AVX2 register
constexpr int64_t kMaxVectors = 512;  // output vectors per plane of one core call (supports() keeps under it)
constexpr int64_t kGroup = 8;         // images whose weight-gradient sums share one pass of the dw tiles

// A thread's scratch buffer `slot`, kept between calls and set to n zeros (capacity reused): fresh
// vectors cost an allocation, and for the larger ones page faults, on every call.
enum Scratch { kIn, kZl, kAl, kDa, kDz, kDxb, kDb, kNumScratch };
std::vector<float>& scratch(Scratch slot, int64_t n) {
  thread_local std::vector<float> bufs[kNumScratch];
  std::vector<float>& b = bufs[slot];
  b.assign(static_cast<size_t>(n), 0.0f);
  return b;
}

int64_t round_up(int64_t a, int64_t m) { return (a + m - 1) / m * m; }

// The register kinds of the tiles. Narrow: one 8-float vector per AVX2 register. Wide (AVX-512):
// two consecutive 8-float vectors of a plane per 512-bit register (v, v+1: the same row, or the end
// of one row and the start of the next), loaded as two halves, so LeNet-5's 8-wide conv2 rows fill
// the lanes (16-float rows would compute half padding). kVecs: 8-float vectors per register.
struct Narrow {
  using Reg = __m256;
  static constexpr int kVecs = 1;
  static Reg set1(float v) { return _mm256_set1_ps(v); }
  static Reg broadcast(const float* w) { return _mm256_broadcast_ss(w); }
  static Reg load(const float* x, const int64_t* off) { return _mm256_loadu_ps(x + off[0]); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm256_fmadd_ps(a, b, c); }
  static void store(float* po, Reg a) { _mm256_storeu_ps(po, a); }
  static void add_into(float* out, const int64_t* at, Reg a) {
    _mm256_storeu_ps(out + at[0], _mm256_add_ps(_mm256_loadu_ps(out + at[0]), a));
  }
};
#if DL_CONV_BLOCK_WIDE
// Two 8-float vectors (a, b: anywhere) as one 512-bit register, a in the lower half.
inline __m512 load_halves(const float* a, const float* b) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(a)), _mm256_loadu_ps(b), 1);
}
struct Wide {
  using Reg = __m512;
  static constexpr int kVecs = 2;
  static Reg set1(float v) { return _mm512_set1_ps(v); }
  static Reg broadcast(const float* w) { return _mm512_set1_ps(*w); }
  static Reg load(const float* x, const int64_t* off) { return load_halves(x + off[0], x + off[1]); }
  static Reg fma(Reg a, Reg b, Reg c) { return _mm512_fmadd_ps(a, b, c); }
  static void store(float* po, Reg a) { _mm512_storeu_ps(po, a); }
  static void add_into(float* out, const int64_t* at, Reg a) {
    Narrow::add_into(out, at, _mm512_extractf32x8_ps(a, 0));  // (a cast would do; gcc 12 warns on it)
    Narrow::add_into(out, at + 1, _mm512_extractf32x8_ps(a, 1));
  }
};
#endif

// One tap of the tile: acc[kb][j] += wt[kb] * x[off[j*kVecs] ..] over NR registers. The smaller
// side of the tile is held in registers while the other streams through one register:
// KB*NR + min(KB, NR) + 1 <= 16 (Narrow) or 32 (Wide) for every tile below (holding all NV input
// vectors of the narrow 3x4 tile took 17 registers, and gcc spilled two to the stack: 24% of that
// tile's samples were one FMA reading the spilled vector).
template <typename Vr, int KB, int NR>
inline void tap(typename Vr::Reg (&acc)[KB][NR], const float* x, const int64_t* off, const float* wt) {
  using Reg = typename Vr::Reg;
  if constexpr (KB <= NR) {
    Reg wb[KB];
    for (int kb = 0; kb < KB; ++kb) wb[kb] = Vr::broadcast(wt + kb);
    for (int j = 0; j < NR; ++j) {
      const Reg xv = Vr::load(x, off + j * Vr::kVecs);
      for (int kb = 0; kb < KB; ++kb) acc[kb][j] = Vr::fma(wb[kb], xv, acc[kb][j]);
    }
  } else {
    Reg xv[NR];
    for (int j = 0; j < NR; ++j) xv[j] = Vr::load(x, off + j * Vr::kVecs);
    for (int kb = 0; kb < KB; ++kb) {
      const Reg wb = Vr::broadcast(wt + kb);
      for (int j = 0; j < NR; ++j) acc[kb][j] = Vr::fma(wb, xv[j], acc[kb][j]);
    }
  }
}

// out plane o (o < Ob, a multiple of KB), vector v (v < nvtot, a multiple of NV = NR * kVecs) of
// rows QC vectors wide:
//   out[o][v*8 + j] = bias[o] + sum_{i < Ci, r < R, s < S} in[i][row(v) + r][col(v) + j + s] * wpk[o/KB][i][r][s][o%KB]
// with row(v) = v / QC, col(v) = (v % QC) * 8; `in` holds Ci planes of Hin x Win floats, Hin >=
// nvtot/QC + R - 1 and Win >= QC*8 + S - 1. Each output is bias + its taps' products added one FMA
// at a time in (i, r, s) order, whatever the register kind: the forward's bits do not depend on it.
//
// With `add_at` (the input gradient's col2im), plane o < n_add, vector v is instead ADDED at
// out + add_at[o] + vec_at[v], and the planes past n_add (the tile's padding) are dropped. Tiles
// are added in tile order, so there the tile's shape sets the order in which an element's terms
// are added (within the summation-order bound; not the same bits across tile shapes).
template <typename Vr, int KB, int NR>
void conv_core(const float* in, int64_t Ci, int64_t Hin, int64_t Win, int64_t R, int64_t S, const float* wpk,
               const float* bias, float* out, int64_t Ob, int64_t QC, int64_t nvtot, const int64_t* add_at,
               const int64_t* vec_at, int64_t n_add) {
  constexpr int NV = NR * Vr::kVecs;
  const int64_t plane_in = Hin * Win, plane_out = nvtot * V, taps = Ci * R * S;
  // each vector's input offset, once (no division per tile)
  int64_t offs[kMaxVectors];
  for (int64_t v = 0, row = 0, col = 0; v < nvtot; ++v) {
    offs[v] = row * Win + col * V;
    if (++col == QC) col = 0, ++row;
  }
  for (int64_t og = 0; og < Ob / KB; ++og) {
    const float* wg = wpk + og * taps * KB;
    for (int64_t v0 = 0; v0 < nvtot; v0 += NV) {
      const int64_t* off = offs + v0;
      typename Vr::Reg acc[KB][NR];
      for (int kb = 0; kb < KB; ++kb) {
        const typename Vr::Reg b0 = Vr::set1(bias ? bias[og * KB + kb] : 0.0f);
        for (int j = 0; j < NR; ++j) acc[kb][j] = b0;
      }
      const float* wt = wg;
      if (R == 1 && S == 1) {  // the input gradient's 1x1 core: one flat loop over the channels
        for (int64_t i = 0; i < Ci; ++i, wt += KB) tap<Vr, KB, NR>(acc, in + i * plane_in, off, wt);
      } else
      for (int64_t i = 0; i < Ci; ++i)
        for (int64_t r = 0; r < R; ++r) {
          const float* row = in + i * plane_in + r * Win;
          for (int64_t s = 0; s < S; ++s, wt += KB) tap<Vr, KB, NR>(acc, row + s, off, wt);
        }
      if (add_at) {
        for (int kb = 0; kb < KB && og * KB + kb < n_add; ++kb)
          for (int j = 0; j < NR; ++j) Vr::add_into(out + add_at[og * KB + kb], vec_at + v0 + j * Vr::kVecs, acc[kb][j]);
        continue;
      }
      for (int kb = 0; kb < KB; ++kb) {
        float* po = out + (og * KB + kb) * plane_out + v0 * V;
        for (int j = 0; j < NR; ++j) Vr::store(po + j * Vr::kVecs * V, acc[kb][j]);
      }
    }
  }
}

using ConvCoreFn = void (*)(const float*, int64_t, int64_t, int64_t, int64_t, int64_t, const float*, const float*,
                            float*, int64_t, int64_t, int64_t, const int64_t*, const int64_t*, int64_t);

// Whether choose_tile may take the wide tiles (tests turn them off to compare the two).
bool g_wide_tiles = true;

struct Tile {
  int kb, nv;  // nv: 8-float vectors per tile (a wide tile: 2 per register)
  ConvCoreFn fn;
  bool wide = false;
};

// The register tiles: KB*NV accumulators + min(KB, NV) held + 1 streamed <= 16 registers (tap).
const Tile kTiles[] = {{4, 3, conv_core<Narrow, 4, 3>}, {3, 4, conv_core<Narrow, 3, 4>}, {2, 6, conv_core<Narrow, 2, 6>},
                       {2, 4, conv_core<Narrow, 2, 4>}, {4, 2, conv_core<Narrow, 4, 2>}, {1, 8, conv_core<Narrow, 1, 8>},
                       {3, 2, conv_core<Narrow, 3, 2>}, {2, 2, conv_core<Narrow, 2, 2>}, {1, 4, conv_core<Narrow, 1, 4>},
                       {1, 2, conv_core<Narrow, 1, 2>}, {1, 1, conv_core<Narrow, 1, 1>}};
#if DL_CONV_BLOCK_WIDE
// Wide tiles: KB*NR accumulators + min(KB, NR) held + 1 streamed <= 32 registers; nv = 2 * NR.
const Tile kWideTiles[] = {{8, 6, conv_core<Wide, 8, 3>, true},  {6, 8, conv_core<Wide, 6, 4>, true},
                           {4, 12, conv_core<Wide, 4, 6>, true}, {3, 16, conv_core<Wide, 3, 8>, true},
                           {5, 10, conv_core<Wide, 5, 5>, true}, {4, 8, conv_core<Wide, 4, 4>, true},
                           {2, 16, conv_core<Wide, 2, 8>, true}, {8, 4, conv_core<Wide, 8, 2>, true},
                           {6, 4, conv_core<Wide, 6, 2>, true},  {4, 4, conv_core<Wide, 4, 2>, true},
                           {2, 8, conv_core<Wide, 2, 4>, true},  {2, 4, conv_core<Wide, 2, 2>, true},
                           {1, 8, conv_core<Wide, 1, 4>, true},  {1, 4, conv_core<Wide, 1, 2>, true},
                           {1, 2, conv_core<Wide, 1, 1>, true}};
#endif

// The tile with the fewest estimated cycles for Ob output planes of `rows` x QC vectors: per tap
// and tile, max(FMAs, loads) / 2 (two FMA pipes, two vector loads per cycle), the padding of the
// channel count to KB and of the rows to a multiple of NV / QC vectors counted as work.
struct CoreShape {
  Tile tile;
  int64_t ob, rows, nvtot;  // padded output planes, padded rows, vectors per plane
};
// exact: only tiles whose NV divides rows*QC (an input without rows to spare past its last).
// A wide tile does the work of nv vectors with nv / 2 registers: per tap kb * nv / 2 FMAs and
// kb + nv loads. Ties go to the earlier tile (the 8-float ones come first).
CoreShape choose_tile(int64_t outputs, int64_t rows, int64_t QC, bool exact = false) {
  CoreShape best{kTiles[0], 0, 0, 0};
  double best_cost = 0;
  auto consider = [&](const Tile& t) {
    if (exact && (rows * QC) % t.nv) return;
    int64_t r = rows;
    while ((r * QC) % t.nv) ++r;  // r <= rows + nv - 1
    const int64_t ob = round_up(outputs, t.kb), nvtot = r * QC;
    if (nvtot > kMaxVectors) return;
    const int regs = t.wide ? t.nv / 2 : t.nv;
    const double per = std::max(t.kb * regs, t.kb + t.nv) / 2.0;
    const double cost = static_cast<double>(ob / t.kb) * static_cast<double>(nvtot / t.nv) * per;
    if (best.ob == 0 || cost < best_cost) best = {t, ob, r, nvtot}, best_cost = cost;
  };
  for (const Tile& t : kTiles) consider(t);
#if DL_CONV_BLOCK_WIDE
  if (g_wide_tiles)
    for (const Tile& t : kWideTiles) consider(t);
#endif
  return best;
}

// The 8 lanes of a summed in one fixed order: (l + l+4), then (l + l+2), then lane 0 + lane 1.
inline float hsum8(__m256 a) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

// The weight gradient of one (output-channel pair, input channel, kernel row, block of SB kernel
// columns) over a group of gn images: acc[kb][s] += dz_g[k0+kb][p][q..q+8) * in_g[p + r][q + s0 + s ..]
// over the images g, rows p < P and the QC vectors of each row, then each accumulator's 8 lanes
// summed (hsum8's fixed order) and STORED at dw[(k0+kb) * dw_kstride + s] (each weight has one
// call per group: no zeroed buffer to add into). A group keeps the accumulators in registers for
// gn*P*QC steps (LeNet-5's conv2 has 8 per image: one image per call spent as much on the flush
// as on the sums).
template <int KB2, int SB>
void dw_tile(const float* const* dzs, int64_t dz_off, int64_t dz_plane, const float* const* ins, int64_t in_off,
             int64_t gn, int64_t P, int64_t QC, int64_t Win, float* dw, int64_t dw_kstride) {
  __m256 acc[KB2][SB];
  for (int kb = 0; kb < KB2; ++kb)
    for (int s = 0; s < SB; ++s) acc[kb][s] = _mm256_setzero_ps();
  for (int64_t gi = 0; gi < gn; ++gi) {
    const float* dz = dzs[gi] + dz_off;
    const float* in = ins[gi] + in_off;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t qc = 0; qc < QC; ++qc) {
        __m256 d[KB2];
        for (int kb = 0; kb < KB2; ++kb) d[kb] = _mm256_loadu_ps(dz + kb * dz_plane + (p * QC + qc) * V);
        const float* x = in + p * Win + qc * V;
        for (int s = 0; s < SB; ++s) {
          const __m256 xv = _mm256_loadu_ps(x + s);
          for (int kb = 0; kb < KB2; ++kb) acc[kb][s] = _mm256_fmadd_ps(d[kb], xv, acc[kb][s]);
        }
      }
  }
  for (int kb = 0; kb < KB2; ++kb)
    for (int s = 0; s < SB; ++s) dw[kb * dw_kstride + s] = hsum8(acc[kb][s]);
}

using DwTileFn = void (*)(const float* const*, int64_t, int64_t, const float* const*, int64_t, int64_t, int64_t,
                          int64_t, int64_t, float*, int64_t);
// The tiles for sb = 1..6 kernel columns, [sb - 1].
template <int KB2>
const DwTileFn kDwTiles[6] = {dw_tile<KB2, 1>, dw_tile<KB2, 2>, dw_tile<KB2, 3>,
                              dw_tile<KB2, 4>, dw_tile<KB2, 5>, dw_tile<KB2, 6>};

#if DL_CONV_BLOCK_WIDE
// The 16 lanes of a summed in one fixed order: the two halves added lane by lane, then hsum8.
inline float hsum16(__m512 a) { return hsum8(_mm256_add_ps(_mm512_extractf32x8_ps(a, 0), _mm512_extractf32x8_ps(a, 1))); }

// dw_tile on 512-bit registers: each step takes two consecutive dz vectors of a plane (v and v+1:
// the same row, or the end of one row and the start of the next; contiguous in dz) and the two
// input vectors they meet, so an accumulator runs 16 lanes; up to 4 output channels per tile
// (KB2 x SB accumulators + KB2 dz + 1 input <= 4 x 6 + 5 = 29 of the 32 registers): per step
// KB2 + SB loads of 512 bits (the input ones as two halves) for KB2 * SB FMAs, where dw_tile<2, 5>
// made 7 loads of 256 bits for 10 FMAs of 256. An odd vector count's last step takes a zero upper
// half on both sides. Each accumulator's 16 lanes summed in hsum16's order and STORED as dw_tile's.
template <int KB2, int SB>
void dw_tile_wide(const float* const* dzs, int64_t dz_off, int64_t dz_plane, const float* const* ins, int64_t in_off,
                  int64_t gn, int64_t P, int64_t QC, int64_t Win, float* dw, int64_t dw_kstride) {
  __m512 acc[KB2][SB];
  for (int kb = 0; kb < KB2; ++kb)
    for (int s = 0; s < SB; ++s) acc[kb][s] = _mm512_setzero_ps();
  const int64_t nv = P * QC;
  for (int64_t gi = 0; gi < gn; ++gi) {
    const float* dz = dzs[gi] + dz_off;
    const float* in = ins[gi] + in_off;
    int64_t p = 0, qc = 0;  // the row and column block of vector v
    int64_t v = 0;
    for (; v + 1 < nv; v += 2) {
      const float* x0 = in + p * Win + qc * V;
      if (++qc == QC) qc = 0, ++p;
      const float* x1 = in + p * Win + qc * V;
      if (++qc == QC) qc = 0, ++p;
      __m512 d[KB2];
      for (int kb = 0; kb < KB2; ++kb) d[kb] = _mm512_loadu_ps(dz + kb * dz_plane + v * V);
      for (int s = 0; s < SB; ++s) {
        const __m512 xv = load_halves(x0 + s, x1 + s);
        for (int kb = 0; kb < KB2; ++kb) acc[kb][s] = _mm512_fmadd_ps(d[kb], xv, acc[kb][s]);
      }
    }
    if (v < nv) {  // the odd last vector: zero upper halves
      const float* x0 = in + p * Win + qc * V;
      __m512 d[KB2];
      for (int kb = 0; kb < KB2; ++kb) d[kb] = _mm512_zextps256_ps512(_mm256_loadu_ps(dz + kb * dz_plane + v * V));
      for (int s = 0; s < SB; ++s) {
        const __m512 xv = _mm512_zextps256_ps512(_mm256_loadu_ps(x0 + s));
        for (int kb = 0; kb < KB2; ++kb) acc[kb][s] = _mm512_fmadd_ps(d[kb], xv, acc[kb][s]);
      }
    }
  }
  for (int kb = 0; kb < KB2; ++kb)
    for (int s = 0; s < SB; ++s) dw[kb * dw_kstride + s] = hsum16(acc[kb][s]);
}

template <int KB2>
const DwTileFn kDwTilesWide[6] = {dw_tile_wide<KB2, 1>, dw_tile_wide<KB2, 2>, dw_tile_wide<KB2, 3>,
                                  dw_tile_wide<KB2, 4>, dw_tile_wide<KB2, 5>, dw_tile_wide<KB2, 6>};
#endif

// The weight-gradient tile for kb (<= dw_channels()) output channels and sb (<= 6) kernel columns.
int dw_channels() {
#if DL_CONV_BLOCK_WIDE
  if (g_wide_tiles) return 4;
#endif
  return 2;
}
DwTileFn dw_tile_for(int64_t kb, int64_t sb) {
#if DL_CONV_BLOCK_WIDE
  if (g_wide_tiles) {
    const DwTileFn* const wide[] = {kDwTilesWide<1>, kDwTilesWide<2>, kDwTilesWide<3>, kDwTilesWide<4>};
    return wide[kb - 1][sb - 1];
  }
#endif
  return (kb == 1 ? kDwTiles<1> : kDwTiles<2>)[sb - 1];
}

// Everything one call needs, derived once from the params.
struct Geometry {
  int64_t N, C, H, W, K, R, S, pt, pl, P, Q;
  // forward core: input buffer C x Hin x Win, output Kb x rows x QC vectors
  int64_t QC, Win, Hin;
  CoreShape fwd;
  // input gradient: plane (c,r,s)[p][q] = sum_k w'[k][c][r][s] dz[k][p][q], the forward core as a 1x1
  // convolution over dz's P*QC vectors, each tile added straight into the padded dx image
  // (C x Hx x Wx) at (p + r, q + s) (col2im in the core's epilogue), then the padding cropped.
  CoreShape bwd;
  int64_t Hx, Wx;

  explicit Geometry(const Conv2dParams& p)
      : N(p.n), C(p.c), H(p.h), W(p.w), K(p.k), R(p.r), S(p.s), pt(p.pad_t), pl(p.pad_l), P(p.out_h()),
        Q(p.out_w()) {
    QC = (Q + V - 1) / V;
    fwd = choose_tile(K, P, QC);
    Win = QC * V + S - 1;
    Hin = fwd.rows + R - 1;
    bwd = choose_tile(C * R * S, 1, P * QC, true);
    Hx = P + R - 1;
    Wx = QC * V + S - 1;
  }
  int64_t zplane() const { return fwd.nvtot * V; }  // floats per output plane of the forward core
};

// w' (the kernel the sums use: w, or w rotated 180 degrees when flip) at (k, c, r, s).
inline float effective_w(const Conv2dParams& p, const float* w, int64_t k, int64_t c, int64_t r, int64_t s) {
  if (p.flip) r = p.r - 1 - r, s = p.s - 1 - s;
  return w[((k * p.c + c) * p.r + r) * p.s + s];
}

// Forward weights [k / KB][c][r][s][k % KB], zero for the padded channels.
std::vector<float> pack_forward(const Conv2dParams& p, const float* w, const CoreShape& cs) {
  const int64_t KB = cs.tile.kb, taps = p.c * p.r * p.s;
  std::vector<float> out(static_cast<size_t>(cs.ob * taps), 0.0f);
  for (int64_t k = 0; k < p.k; ++k)
    for (int64_t c = 0; c < p.c; ++c)
      for (int64_t r = 0; r < p.r; ++r)
        for (int64_t s = 0; s < p.s; ++s)
          out[((k / KB * p.c + c) * p.r * p.s + r * p.s + s) * KB + k % KB] = effective_w(p, w, k, c, r, s);
  return out;
}

// The input gradient's plane of (c, r, s): c fastest, so that the planes of one register tile
// land in different channels (adjacent s would add to overlapping, unaligned addresses one after
// the other: a store-forwarding stall per vector, measured 1.5x slower).
inline int64_t dx_plane(const Conv2dParams& p, int64_t c, int64_t r, int64_t s) { return (s * p.r + r) * p.c + c; }

// Input-gradient weights for the 1x1 core: [o / OB][k][o % OB] = w'[k][c][r][s], o = dx_plane(c, r, s).
std::vector<float> pack_backward(const Conv2dParams& p, const float* w, const CoreShape& cs) {
  const int64_t OB = cs.tile.kb;
  std::vector<float> out(static_cast<size_t>(cs.ob * p.k), 0.0f);
  for (int64_t c = 0; c < p.c; ++c)
    for (int64_t r = 0; r < p.r; ++r)
      for (int64_t s = 0; s < p.s; ++s) {
        const int64_t o = dx_plane(p, c, r, s);
        for (int64_t k = 0; k < p.k; ++k) out[(o / OB * p.k + k) * OB + o % OB] = effective_w(p, w, k, c, r, s);
      }
  return out;
}

// Image n's input into the zero-bordered buffer (C x Hin x Win; the border is never written).
void load_image(const Geometry& g, const float* x, int64_t n, float* buf) {
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t h = 0; h < g.H; ++h)
      std::memcpy(buf + (c * g.Hin + h + g.pt) * g.Win + g.pl, x + ((n * g.C + c) * g.H + h) * g.W,
                  static_cast<size_t>(g.W) * sizeof(float));
}

// The common LeNet epilogue on 8 columns at a time: relu, then 2x2 max windows at stride 2 over
// rows whose width is a multiple of 8 (columns 2j and 2j+1 of a row pair are window j).
bool relu_2x2(const ConvBlockParams& p) {
  const Pool2dParams& q = p.pool;
  return p.act.kind == ActKind::relu && q.kh == 2 && q.kw == 2 && q.stride_h == 2 && q.stride_w == 2 &&
         q.h % 2 == 0 && q.w % 8 == 0;
}

// relu_value on 8 lanes: x where x > 0 or x is NaN, else +0.
inline __m256 relu8(__m256 z) { return _mm256_and_ps(_mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_NLE_UQ), z); }
// max_scan_takes on 8 lanes: v > cur, or v is NaN.
inline __m256 takes8(__m256 v, __m256 cur) {
  return _mm256_or_ps(_mm256_cmp_ps(v, cur, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}
// Columns 0,2,4,6 (evens) or 1,3,5,7 (odds) of a into lanes 0..3.
inline __m256 evens8(__m256 a) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, a, _MM_SHUFFLE(2, 0, 2, 0))),
                                                _MM_SHUFFLE(3, 1, 2, 0)));
}
inline __m256 odds8(__m256 a) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, a, _MM_SHUFFLE(3, 1, 3, 1))),
                                                _MM_SHUFFLE(3, 1, 2, 0)));
}
// Lanes 0..3 of e (columns 0,2,4,6) and o (columns 1,3,5,7) back into 8 columns.
inline __m256 interleave8(__m256 e, __m256 o) {
  const __m128 e4 = _mm256_castps256_ps128(e), o4 = _mm256_castps256_ps128(o);
  return _mm256_set_m128(_mm_unpackhi_ps(e4, o4), _mm_unpacklo_ps(e4, o4));
}

// y plane (PP x PQ) from the pre-activation plane z (rows of `ld` floats): the window's winner in
// act(z), scanned as the pooling kernels scan it.
void pool_forward_plane(const ConvBlockParams& p, const float* z, int64_t ld, float* y, float* scratch) {
  const Pool2dParams& pp = p.pool;
  const int64_t PP = pp.out_h(), PQ = pp.out_w();
  if (relu_2x2(p)) {
    for (int64_t oh = 0; oh < PP; ++oh) {
      const float* r0 = z + 2 * oh * ld;
      const float* r1 = r0 + ld;
      for (int64_t c = 0; c < pp.w / 8; ++c) {
        const __m256 a = relu8(_mm256_loadu_ps(r0 + 8 * c)), b = relu8(_mm256_loadu_ps(r1 + 8 * c));
        __m256 cur = evens8(a);
        const __m256 e1 = odds8(a), e2 = evens8(b), e3 = odds8(b);
        cur = _mm256_blendv_ps(cur, e1, takes8(e1, cur));
        cur = _mm256_blendv_ps(cur, e2, takes8(e2, cur));
        cur = _mm256_blendv_ps(cur, e3, takes8(e3, cur));
        _mm_storeu_ps(y + oh * PQ + 4 * c, _mm256_castps256_ps128(cur));
      }
    }
    return;
  }
  for (int64_t i = 0; i < pp.h; ++i)  // act(z) as a compact plane, then the pooling's own scan
    for (int64_t j = 0; j < pp.w; ++j) scratch[i * pp.w + j] = activation_value(p.act, z[i * ld + j]);
  for (int64_t oh = 0; oh < PP; ++oh)
    for (int64_t ow = 0; ow < PQ; ++ow) y[oh * PQ + ow] = scratch[pool2d_loops::window_argmax(pp, scratch, oh, ow)];
}

// dz plane (rows of `ld` floats, columns past Q untouched) from the pre-activation z (P x Q) and
// the pooled gradient dy (PP x PQ): the pooling's backward (dy to the winner, or to every element
// equal to the max under ties=all) then the activation's gradient, on every element.
void pool_backward_plane(const ConvBlockParams& p, const float* z, const float* dy, float* dz, int64_t ld, float* al,
                         float* da) {
  const Pool2dParams& pp = p.pool;
  const int64_t PP = pp.out_h(), PQ = pp.out_w(), P = pp.h, Q = pp.w;
  if (relu_2x2(p)) {
    const __m256 zero = _mm256_setzero_ps(), ones = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    const __m256 g0 = _mm256_set1_ps(static_cast<float>(p.act.relu_grad_at_zero));
    const bool nan_is_nan = p.act.relu_nan_grad == ReluNanGrad::nan, all = pp.ties == PoolTies::all;
    // relu_grad on 8 lanes: dy where z > 0, g0*dy where z == 0, z or dy where z is NaN, else 0.
    auto grad = [&](__m256 zv, __m256 d) {
      const __m256 nan = _mm256_cmp_ps(zv, zv, _CMP_UNORD_Q);
      return _mm256_or_ps(_mm256_or_ps(_mm256_and_ps(_mm256_cmp_ps(zv, zero, _CMP_GT_OQ), d),
                                       _mm256_and_ps(_mm256_cmp_ps(zv, zero, _CMP_EQ_OQ), _mm256_mul_ps(g0, d))),
                          _mm256_and_ps(nan, nan_is_nan ? zv : d));
    };
    for (int64_t oh = 0; oh < PP; ++oh) {
      const float* z0 = z + 2 * oh * Q;
      const float* z1 = z0 + Q;
      for (int64_t c = 0; c < Q / 8; ++c) {
        const __m256 zv0 = _mm256_loadu_ps(z0 + 8 * c), zv1 = _mm256_loadu_ps(z1 + 8 * c);
        const __m256 a = relu8(zv0), b = relu8(zv1);
        const __m256 e0 = evens8(a), e1 = odds8(a), e2 = evens8(b), e3 = odds8(b);
        const __m256 t1 = takes8(e1, e0);
        __m256 cur = _mm256_blendv_ps(e0, e1, t1);
        const __m256 t2 = takes8(e2, cur);
        cur = _mm256_blendv_ps(cur, e2, t2);
        const __m256 t3 = takes8(e3, cur);
        cur = _mm256_blendv_ps(cur, e3, t3);
        __m256 w0, w1, w2, w3;
        if (all) {  // every element equal to the max (a NaN max equals nothing)
          w0 = _mm256_cmp_ps(e0, cur, _CMP_EQ_OQ), w1 = _mm256_cmp_ps(e1, cur, _CMP_EQ_OQ);
          w2 = _mm256_cmp_ps(e2, cur, _CMP_EQ_OQ), w3 = _mm256_cmp_ps(e3, cur, _CMP_EQ_OQ);
        } else {  // the last of e1, e2, e3 to take the lead, else e0
          w3 = t3;
          w2 = _mm256_andnot_ps(t3, t2);
          w1 = _mm256_andnot_ps(_mm256_or_ps(t2, t3), t1);
          w0 = _mm256_andnot_ps(_mm256_or_ps(t1, _mm256_or_ps(t2, t3)), ones);
        }
        const __m256 g = _mm256_castps128_ps256(_mm_loadu_ps(dy + oh * PQ + 4 * c));
        const __m256 da0 = interleave8(_mm256_and_ps(w0, g), _mm256_and_ps(w1, g));
        const __m256 da1 = interleave8(_mm256_and_ps(w2, g), _mm256_and_ps(w3, g));
        _mm256_storeu_ps(dz + 2 * oh * ld + 8 * c, grad(zv0, da0));
        _mm256_storeu_ps(dz + (2 * oh + 1) * ld + 8 * c, grad(zv1, da1));
      }
    }
    return;
  }
  for (int64_t i = 0; i < P * Q; ++i) al[i] = activation_value(p.act, z[i]);
  pool2d_loops::max_backward_plane(pp, al, dy, da);
  for (int64_t i = 0; i < P; ++i)
    for (int64_t j = 0; j < Q; ++j) dz[i * ld + j] = activation_grad(p.act, z[i * Q + j], al[i * Q + j], da[i * Q + j]);
}

void forward_f32(const ConvBlockParams& p, const float* x, const float* w, const float* b, float* y, float* z) {
  const Geometry g(p.conv);
  const std::vector<float> wpk = pack_forward(p.conv, w, g.fwd);
  std::vector<float> bias(static_cast<size_t>(g.fwd.ob), 0.0f);
  if (p.bias && b) std::copy(b, b + g.K, bias.begin());
  const Pool2dParams& pp = p.pool;
  const int64_t PP = pp.out_h(), PQ = pp.out_w(), zplane = g.zplane(), ld = g.QC * V;
  const bool direct_z = z && ld == g.Q && g.fwd.rows == g.P && g.fwd.ob == g.K;
  const int T = std::max(1, std::min<int>(omp_get_max_threads(), static_cast<int>(g.N)));
#pragma omp parallel num_threads(T)
  {
    std::vector<float>& in = scratch(kIn, g.C * g.Hin * g.Win);
    std::vector<float>& zl = scratch(kZl, direct_z ? 0 : g.fwd.ob * zplane);
    std::vector<float>& al = scratch(kAl, zplane);
    // Images taken as threads free up (each image's outputs are its own: any order gives the same
    // bits): on this VM two threads rarely run at the same speed.
#pragma omp for schedule(dynamic, 2)
    for (int64_t n = 0; n < g.N; ++n) {
      load_image(g, x, n, in.data());
      // The core writes z's planes in place where its layout is z's (rows of exactly Q floats, no
      // padded rows or planes: LeNet's blocks), else into the scratch planes and z is copied out.
      float* zn = direct_z ? z + n * g.K * g.P * g.Q : zl.data();
      g.fwd.tile.fn(in.data(), g.C, g.Hin, g.Win, g.R, g.S, wpk.data(), bias.data(), zn, g.fwd.ob, g.QC,
                    g.fwd.nvtot, nullptr, nullptr, 0);
      for (int64_t k = 0; k < g.K; ++k) {
        const float* zk = zn + k * zplane;
        if (z && !direct_z)
          for (int64_t q = 0; q < g.P; ++q)
            std::memcpy(z + ((n * g.K + k) * g.P + q) * g.Q, zk + q * ld, static_cast<size_t>(g.Q) * sizeof(float));
        pool_forward_plane(p, zk, ld, y + (n * g.K + k) * PP * PQ, al.data());
      }
    }
  }
}

void backward_f32(const ConvBlockParams& p, const float* x, const float* w, const float* z, const float* dy,
                  float* dx, float* dw, float* db) {
  const Geometry g(p.conv);
  const Pool2dParams& pp = p.pool;
  const int64_t PP = pp.out_h(), PQ = pp.out_w(), ld = g.QC * V;
  const int64_t dz_plane = g.P * ld;  // dz kept as P rows of QC vectors, zero past column Q
  const int64_t crs = g.C * g.R * g.S;
  std::vector<float> w2;
  // col2im inside the core: plane (c, r, s) lands at dx row r, column s of channel c; vector
  // (p, qc) at row p, column qc*8 from there
  std::vector<int64_t> col_at, vec_at;
  if (dx) {
    w2 = pack_backward(p.conv, w, g.bwd);
    col_at.resize(static_cast<size_t>(crs));
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t r = 0; r < g.R; ++r)
        for (int64_t s = 0; s < g.S; ++s) col_at[static_cast<size_t>(dx_plane(p.conv, c, r, s))] = (c * g.Hx + r) * g.Wx + s;
    for (int64_t i = 0; i < g.P; ++i)
      for (int64_t v = 0; v < g.QC; ++v) vec_at.push_back(i * g.Wx + v * V);
  }
  const int T = std::max(1, std::min<int>(omp_get_max_threads(), static_cast<int>(g.N)));
  // Images in groups of kGroup (group j: images j*kGroup ...), taken by the threads as they free up
  // (on this VM two threads rarely run at the same speed). Each group's dw' sums [k][c][r][s] and
  // db sums [k] (each its 8 lanes over the group's images, then the lanes in hsum8's order) go to
  // the group's own slot, summed in group order below: the bits depend neither on which thread
  // ran which group nor on the thread count.
  const int64_t G = (g.N + kGroup - 1) / kGroup;
  const int64_t dw_slot = dw ? g.K * crs : 0, slot = dw ? dw_slot + g.K : 0;
  std::unique_ptr<float[]> parts(new float[static_cast<size_t>(std::max<int64_t>(1, G * slot))]);
#pragma omp parallel num_threads(T)
  {
    // a group of up to kGroup images: their dz planes and padded inputs, for the dw tiles
    const int64_t in_size = g.C * g.Hin * g.Win, dz_size = g.K * dz_plane;
    std::vector<float>& in = scratch(kIn, dw ? kGroup * in_size : 0);
    std::vector<float>& al = scratch(kAl, g.P * g.Q);
    std::vector<float>& da = scratch(kDa, g.P * g.Q);
    std::vector<float>& dzl = scratch(kDz, kGroup * dz_size);
    std::vector<float>& dxb = scratch(kDxb, dx ? g.C * g.Hx * g.Wx : 0);
    std::vector<float>& dbl = scratch(kDb, dw ? g.K * V : 0);  // the group's db lanes [k][8]
    const float* dzs[kGroup];
    const float* ins[kGroup];
    for (int64_t i = 0; i < kGroup; ++i)  // (no input buffer without dw: no offset from its null data())
      dzs[i] = dzl.data() + i * dz_size, ins[i] = dw ? in.data() + i * in_size : nullptr;
#pragma omp for schedule(dynamic, 1)
    for (int64_t grp = 0; grp < G; ++grp) {
      const int64_t n0 = grp * kGroup, gn = std::min<int64_t>(kGroup, g.N - n0);
      float* my_dw = dw ? parts.get() + grp * slot : nullptr;
      if (dw) std::fill(dbl.begin(), dbl.end(), 0.0f);
      for (int64_t gi = 0; gi < gn; ++gi) {
        const int64_t n = n0 + gi;
        float* dzi = dzl.data() + gi * dz_size;
        for (int64_t k = 0; k < g.K; ++k)
          pool_backward_plane(p, z + (n * g.K + k) * g.P * g.Q, dy + (n * g.K + k) * PP * PQ, dzi + k * dz_plane,
                              ld, al.data(), da.data());
        if (dw) {
          load_image(g, x, n, in.data() + gi * in_size);
          for (int64_t k = 0; k < g.K; ++k) {  // db: the lanes of dz's rows, image by image
            __m256 acc = _mm256_loadu_ps(dbl.data() + k * V);
            for (int64_t v = 0; v < g.P * g.QC; ++v) acc = _mm256_add_ps(acc, _mm256_loadu_ps(dzi + k * dz_plane + v * V));
            _mm256_storeu_ps(dbl.data() + k * V, acc);
          }
        }
        if (dx) {
          std::fill(dxb.begin(), dxb.end(), 0.0f);
          g.bwd.tile.fn(dzi, g.K, 1, dz_plane, 1, 1, w2.data(), nullptr, dxb.data(), g.bwd.ob, g.P * g.QC,
                        g.bwd.nvtot, col_at.data(), vec_at.data(), crs);
          for (int64_t c = 0; c < g.C; ++c)
            for (int64_t i = 0; i < g.H; ++i)
              std::memcpy(dx + ((n * g.C + c) * g.H + i) * g.W, dxb.data() + (c * g.Hx + i + g.pt) * g.Wx + g.pl,
                          static_cast<size_t>(g.W) * sizeof(float));
        }
      }
      if (!dw) continue;
      for (int64_t k = 0; k < g.K; ++k) my_dw[dw_slot + k] = hsum8(_mm256_loadu_ps(dbl.data() + k * V));
      const int64_t kbw = dw_channels();
      for (int64_t k0 = 0; k0 < g.K; k0 += kbw) {
        const int64_t kb = std::min(kbw, g.K - k0);
        for (int64_t c = 0; c < g.C; ++c)
          for (int64_t r = 0; r < g.R; ++r)
            for (int64_t s0 = 0; s0 < g.S; s0 += 6) {
              const int64_t sb = std::min<int64_t>(6, g.S - s0);
              DwTileFn f = dw_tile_for(kb, sb);
              f(dzs, k0 * dz_plane, dz_plane, ins, (c * g.Hin + r) * g.Win + s0, gn, g.P, g.QC, g.Win,
                my_dw + (k0 * g.C + c) * g.R * g.S + r * g.S + s0, crs);
            }
      }
    }  // (the loop's barrier: every group's slot is complete below)
    if (dw) {
      // Every group's sum at `at`, in group order; output channels split among the threads.
      auto group_sum = [&](int64_t at) {
        float sum = parts[static_cast<size_t>(at)];
        for (int64_t grp = 1; grp < G; ++grp) sum += parts[static_cast<size_t>(grp * slot + at)];
        return sum;
      };
#pragma omp for schedule(static)
      for (int64_t k = 0; k < g.K; ++k) {
        for (int64_t c = 0; c < g.C; ++c)  // dw' back to w's orientation (flip)
          for (int64_t r = 0; r < g.R; ++r)
            for (int64_t s = 0; s < g.S; ++s) {
              const int64_t rr = p.conv.flip ? g.R - 1 - r : r, ss = p.conv.flip ? g.S - 1 - s : s;
              dw[((k * g.C + c) * g.R + rr) * g.S + ss] += group_sum((k * g.C + c) * g.R * g.S + r * g.S + s);
            }
        if (p.bias && db) db[k] += group_sum(dw_slot + k);
      }
    }
  }
}

// What the per-image path is for: small blocks whose planes fit a core's caches. Wider layers
// (ResNet's, VGG's) are GEMM-shaped and stay with the convolution libraries.
bool supports(const ConvBlockParams& p, DType dt) {
  const Conv2dParams& c = p.conv;
  const Pool2dParams& q = p.pool;
  return dt == DType::f32 && c.groups == 1 && c.stride_h == 1 && c.stride_w == 1 && c.dil_h == 1 && c.dil_w == 1 &&
         c.pad_t < c.r && c.pad_b < c.r && c.pad_l < c.s && c.pad_r < c.s && c.c <= 32 && c.k <= 64 &&
         c.c * c.h * c.w <= 32768 && c.k * c.out_h() * c.out_w() <= 32768 &&
         (c.out_h() + 8) * ((c.out_w() + V - 1) / V) <= kMaxVectors && q.pad_t == 0 && q.pad_b == 0 &&
         q.pad_l == 0 && q.pad_r == 0 && q.kh == q.stride_h && q.kw == q.stride_w;
}

void check_call(const char* fn, const ConvBlockParams& p, const Tensor& x, const Tensor& w) {
  p.validate();
  check(supports(p, x.dtype()), fn, ": unsupported block (", p.str(), ")");
  check_shape(fn, "x", x, p.x_shape());
  check_shape(fn, "w", w, p.conv.w_shape());
}

void forward_fast(const ConvBlockParams& p, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y, Tensor* z) {
  check_call("conv_block_forward_fast", p, x, w);
  check_shape("conv_block_forward_fast", "y", y, p.y_shape());
  if (z) check_shape("conv_block_forward_fast", "z", *z, p.z_shape());
  if (p.bias) check(b != nullptr, "conv_block_forward_fast: the block has a bias but none was given");
  forward_f32(p, x.data<float>(), w.data<float>(), p.bias ? b->data<float>() : nullptr, y.data<float>(),
              z ? z->data<float>() : nullptr);
}

void backward_fast(const ConvBlockParams& p, const Tensor& x, const Tensor& w, const Tensor& z, const Tensor& dy,
                   Tensor* dx, Tensor* dw, Tensor* db) {
  check_call("conv_block_backward_fast", p, x, w);
  check_shape("conv_block_backward_fast", "z", z, p.z_shape());
  check_shape("conv_block_backward_fast", "dy", dy, p.y_shape());
  if (dx) check_shape("conv_block_backward_fast", "dx", *dx, p.x_shape());
  if (dw) check_shape("conv_block_backward_fast", "dw", *dw, p.conv.w_shape());
  backward_f32(p, x.data<float>(), w.data<float>(), z.data<float>(), dy.data<float>(), dx ? dx->data<float>() : nullptr,
               dw ? dw->data<float>() : nullptr, (dw && db) ? db->data<float>() : nullptr);
}

}  // namespace
#endif

bool conv_block_fast_has_wide_tiles() {
#if DL_CONV_BLOCK_WIDE
  return true;
#else
  return false;
#endif
}

void conv_block_fast_allow_wide_tiles(bool on) {
#if DL_CONV_BLOCK_FAST
  g_wide_tiles = on;
#else
  (void)on;
#endif
}

void register_conv_block_fast(KernelRegistry& reg) {
#if DL_CONV_BLOCK_FAST
  ConvBlockKernel k;
  k.name = "fast";
  k.supports_doc =
      "float32; conv stride 1, dilation 1, padding < kernel, <= 32 input and <= 64 output channels, input and "
      "output planes <= 32768 floats and <= 504/ceil(Q/8) - 8 output rows per image; max pool with window == stride, no padding; every activation, "
      "kernel flip, ties rule (AVX2+FMA builds)";
  k.supports = supports;
  k.forward = forward_fast;
  k.backward = backward_fast;
  reg.conv_block.at(KernelBackend::fast) = k;
#else
  (void)reg;
#endif
}

}  // namespace driftlab
