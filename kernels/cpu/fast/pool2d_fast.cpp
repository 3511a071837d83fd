// Fast max and average pooling, float and double, NCHW, OpenMP over the N*C planes (each plane
// is independent, so the result does not depend on the thread count). Both give the reference's
// bits: the max window scan is the reference's (max_scan_takes in row-major order: the first
// maximum, or the last NaN; a max rounds nothing), and the average adds each window in the reference's
// order and divides as it does. Forward writes y (=); backward writes dx (=), max-pool ties sent
// to the first max or to every equal element.
// The 2x2 stride-2 max windows of every LeNet/VGG pool run 16 windows per AVX-512 instruction on
// float (masks for the last group of a row), the same picks and tie tests as the scalar code.
// Channel-blocked tensors (engine/layers/layout.h, (N, C/B, H, W, B), B = 8 or 16) take their own
// loops, B channels per step: each lane is one channel's plain scan (the same picks, tie tests,
// sums and order), so a blocked run gives the plain run's bits; y and dx come in x's layout.
#include <algorithm>
#include <type_traits>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "core/ops/pool2d.h"
#include "kernels/cpu/channel_blocks.h"
#include "kernels/cpu/pool2d_loops.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

// The 2x2 stride-2 unpadded window of every LeNet/VGG pool, unrolled: same scan order.
template <typename T>
inline int64_t argmax_2x2(const T* xp, int64_t w, int64_t oh, int64_t ow) {
  const int64_t i0 = (2 * oh) * w + 2 * ow;
  const int64_t idx[4] = {i0, i0 + 1, i0 + w, i0 + w + 1};
  int64_t best = i0;
  T bv = xp[i0];
  for (int k = 1; k < 4; ++k) {
    const T v = xp[idx[k]];
    if (max_scan_takes(v, bv)) {
      best = idx[k];
      bv = v;
    }
  }
  return best;
}

// The scan step of the window on values: v replaces `cur` when max_scan_takes(v, cur).
template <typename T>
inline T pick(T cur, T v) {
  return max_scan_takes(v, cur) ? v : cur;
}

#if defined(__AVX512F__)
// 16 windows of a 2x2 float row pair at once: the same picks and tie tests as the scalar code,
// as AVX-512 masks. Even/odd columns of the two input rows are split with permutes.
struct Quad {
  __m512 a, b, c, d;  // the windows' top-left, top-right, bottom-left, bottom-right values
};
// `n` <= 16 windows: the 2n inputs of each row are loaded under masks (lanes past them read 0
// and are never stored), so a row of any width is one pass without a scalar tail.
inline Quad load_quad(const float* r0, const float* r1, int n = 16) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const int lo = std::min(2 * n, 16), hi = 2 * n - lo;
  const __mmask16 m0 = static_cast<__mmask16>((1u << lo) - 1u), m1 = static_cast<__mmask16>((1u << hi) - 1u);
  const __m512 t0 = _mm512_maskz_loadu_ps(m0, r0), t1 = _mm512_maskz_loadu_ps(m1, r0 + 16);
  const __m512 u0 = _mm512_maskz_loadu_ps(m0, r1), u1 = _mm512_maskz_loadu_ps(m1, r1 + 16);
  return {_mm512_permutex2var_ps(t0, even, t1), _mm512_permutex2var_ps(t0, odd, t1),
          _mm512_permutex2var_ps(u0, even, u1), _mm512_permutex2var_ps(u0, odd, u1)};
}
// max_scan_takes(v, cur) on 16 lanes: v > cur, or v is NaN.
inline __mmask16 takes16(__m512 v, __m512 cur) {
  return _mm512_cmp_ps_mask(v, cur, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
}
// The scan over a, b, c, d: the max and, per lane, whether b, c, d took the lead when visited.
struct Scan16 {
  __m512 m;
  __mmask16 tb, tc, td;
};
inline Scan16 scan16(const Quad& q) {
  Scan16 s;
  s.tb = takes16(q.b, q.a);
  s.m = _mm512_mask_blend_ps(s.tb, q.a, q.b);
  s.tc = takes16(q.c, s.m);
  s.m = _mm512_mask_blend_ps(s.tc, s.m, q.c);
  s.td = takes16(q.d, s.m);
  s.m = _mm512_mask_blend_ps(s.td, s.m, q.d);
  return s;
}
inline __m512 max16(const Quad& q) { return scan16(q).m; }
// Writes the first n pairs of lo/hi interleaved (lo[0], hi[0], lo[1], ...): 2n floats.
inline void store_interleaved(float* out, __m512 lo, __m512 hi, int n = 16) {
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const int l = std::min(2 * n, 16), h = 2 * n - l;
  _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << l) - 1u), _mm512_permutex2var_ps(lo, first, hi));
  _mm512_mask_storeu_ps(out + 16, static_cast<__mmask16>((1u << h) - 1u), _mm512_permutex2var_ps(lo, second, hi));
}
#endif

// Number of leading windows of a 2x2 row that the vector code handles (the rest is scalar):
// all of them for float with AVX-512 (16 at a time, the last group under masks).
template <typename T>
inline int64_t vector_windows(int64_t q) {
#if defined(__AVX512F__)
  if (std::is_same<T, float>::value) return q;
#endif
  (void)q;
  return 0;
}

// Forward of windows [0, qv) of one output row (float, AVX-512); no-op otherwise.
template <typename T>
inline void forward_row_2x2_vec(const T* r0, const T* r1, T* yrow, int64_t qv) {
#if defined(__AVX512F__)
  if constexpr (std::is_same<T, float>::value) {
    for (int64_t ow = 0; ow < qv; ow += 16) {
      const int n = static_cast<int>(std::min<int64_t>(16, qv - ow));
      _mm512_mask_storeu_ps(yrow + ow, static_cast<__mmask16>((1u << n) - 1u),
                            max16(load_quad(r0 + 2 * ow, r1 + 2 * ow, n)));
    }
    return;
  }
#endif
  (void)r0, (void)r1, (void)yrow, (void)qv;
}

// Backward of windows [0, qv) of one output row, ties = first (float, AVX-512).
template <typename T>
inline void backward_row_2x2_vec(const T* r0, const T* r1, const T* g, T* d0, T* d1, int64_t qv, PoolTies ties) {
#if defined(__AVX512F__)
  if constexpr (std::is_same<T, float>::value) {
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t ow = 0; ow < qv; ow += 16) {
      const int n = static_cast<int>(std::min<int64_t>(16, qv - ow));
      const Quad q = load_quad(r0 + 2 * ow, r1 + 2 * ow, n);
      const Scan16 s = scan16(q);
      const __m512 m = s.m, gv = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), g + ow);
      __mmask16 at_a, at_b, at_c, at_d;
      if (ties == PoolTies::all) {  // every input equal to the max (none for a NaN max)
        at_a = _mm512_cmp_ps_mask(q.a, m, _CMP_EQ_OQ);
        at_b = _mm512_cmp_ps_mask(q.b, m, _CMP_EQ_OQ);
        at_c = _mm512_cmp_ps_mask(q.c, m, _CMP_EQ_OQ);
        at_d = _mm512_cmp_ps_mask(q.d, m, _CMP_EQ_OQ);
      } else {  // the winner: the last of b, c, d to take the lead, else a
        at_d = s.td;
        at_c = static_cast<__mmask16>(s.tc & ~s.td);
        at_b = static_cast<__mmask16>(s.tb & ~(s.tc | s.td));
        at_a = static_cast<__mmask16>(~(s.tb | s.tc | s.td));
      }
      store_interleaved(d0 + 2 * ow, _mm512_mask_blend_ps(at_a, zero, gv), _mm512_mask_blend_ps(at_b, zero, gv), n);
      store_interleaved(d1 + 2 * ow, _mm512_mask_blend_ps(at_c, zero, gv), _mm512_mask_blend_ps(at_d, zero, gv), n);
    }
    return;
  }
#endif
  (void)r0, (void)r1, (void)g, (void)d0, (void)d1, (void)qv, (void)ties;
}

// Backward of one plane for the tiling 2x2 window. ties=first: the scan's winner gets dy (the
// first max, or the last NaN); ties=all: every input equal to the max gets dy (none when the
// max is NaN, as in the reference's == test).
// Rows/columns the floor-mode windows never reach (odd H or W) get 0.
template <typename T>
void backward_2x2(const Pool2dParams& p, const T* xp, const T* dyp, T* dxp) {
  const int64_t P = p.out_h(), Q = p.out_w();
  // Rows/columns no window reaches (odd H or W) stay 0; the windows write the rest.
  if (2 * P != p.h || 2 * Q != p.w)
    for (int64_t i = 0; i < p.h * p.w; ++i) dxp[i] = 0;
  for (int64_t oh = 0; oh < P; ++oh) {
    const T* r0 = xp + 2 * oh * p.w;
    const T* r1 = r0 + p.w;
    T* d0 = dxp + 2 * oh * p.w;
    T* d1 = d0 + p.w;
    const int64_t qv = vector_windows<T>(Q);
    backward_row_2x2_vec(r0, r1, dyp + oh * Q, d0, d1, qv, p.ties);
    for (int64_t ow = qv; ow < Q; ++ow) {
      const T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
      const T g = dyp[oh * Q + ow];
      const bool tb = max_scan_takes(b, a);
      const T m1 = tb ? b : a;
      const bool tc = max_scan_takes(c, m1);
      const T m2 = tc ? c : m1;
      const bool td = max_scan_takes(d, m2);
      const T m = td ? d : m2;
      if (p.ties == PoolTies::all) {
        d0[2 * ow] = a == m ? g : T(0);
        d0[2 * ow + 1] = b == m ? g : T(0);
        d1[2 * ow] = c == m ? g : T(0);
        d1[2 * ow + 1] = d == m ? g : T(0);
        continue;
      }
      // The winner: the last of b, c, d to take the lead, else a.
      const bool at_d = td, at_c = tc && !td, at_b = tb && !tc && !td, at_a = !tb && !tc && !td;
      d0[2 * ow] = at_a ? g : T(0);
      d0[2 * ow + 1] = at_b ? g : T(0);
      d1[2 * ow] = at_c ? g : T(0);
      d1[2 * ow + 1] = at_d ? g : T(0);
    }
  }
}

template <typename T>
inline int64_t argmax(const Pool2dParams& p, bool is_2x2, const T* xp, int64_t oh, int64_t ow) {
  return is_2x2 ? argmax_2x2(xp, p.w, oh, ow) : pool2d_loops::window_argmax(p, xp, oh, ow);
}

bool plain_2x2(const Pool2dParams& p) {
  return p.kh == 2 && p.kw == 2 && p.stride_h == 2 && p.stride_w == 2 && p.pad_t == 0 && p.pad_b == 0 &&
         p.pad_l == 0 && p.pad_r == 0;
}

template <typename T>
void forward(const Pool2dParams& p, const T* x, T* y) {
  const int64_t P = p.out_h(), Q = p.out_w(), planes = p.n * p.c;
  const bool is_2x2 = plain_2x2(p);
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < planes; ++nc) {
    const T* xp = x + nc * p.h * p.w;
    T* yp = y + nc * P * Q;
    for (int64_t oh = 0; oh < P; ++oh) {
      if (is_2x2) {
        const T* r0 = xp + 2 * oh * p.w;
        const T* r1 = r0 + p.w;
        const int64_t qv = vector_windows<T>(Q);
        forward_row_2x2_vec(r0, r1, yp + oh * Q, qv);
        for (int64_t ow = qv; ow < Q; ++ow)  // the rest: the same picks, one window at a time
          yp[oh * Q + ow] = pick(pick(pick(r0[2 * ow], r0[2 * ow + 1]), r1[2 * ow]), r1[2 * ow + 1]);
        continue;
      }
      for (int64_t ow = 0; ow < Q; ++ow) yp[oh * Q + ow] = xp[argmax(p, is_2x2, xp, oh, ow)];
    }
  }
}

template <typename T>
void backward(const Pool2dParams& p, const T* x, const T* dy, T* dx) {
  const int64_t P = p.out_h(), Q = p.out_w(), planes = p.n * p.c;
  const bool is_2x2 = plain_2x2(p);
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < planes; ++nc) {
    const T* xp = x + nc * p.h * p.w;
    const T* dyp = dy + nc * P * Q;
    T* dxp = dx + nc * p.h * p.w;
    if (is_2x2) {  // windows tile the input: each input gets its own window's share, branch-free
      backward_2x2(p, xp, dyp, dxp);
      continue;
    }
    pool2d_loops::max_backward_plane(p, xp, dyp, dxp);
  }
}

// ---- channel-blocked (N, C/B, H, W, B): one plane per image and block, B channels per position ----

// B float lanes (channels of a blocked position) in one register, for the blocked loops below:
// max_scan_takes, blends and the masks' logic as vector instructions. ok = false: no such
// register for this B and type (float64, or an ISA without it); the lane loops run.
template <int B, typename T>
struct VecLanes {
  static constexpr bool ok = false;
};
#if defined(__AVX512F__)
template <>
struct VecLanes<16, float> {
  static constexpr bool ok = true;
  using V = __m512;
  using M = __mmask16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float v) { return _mm512_set1_ps(v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static M takes(V v, V cur) { return takes16(v, cur); }
  static V select(M m, V a, V b) { return _mm512_mask_blend_ps(m, a, b); }  // m ? b : a
  static M eq(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static M and_not(M a, M b) { return static_cast<M>(a & ~b); }
  static M or_(M a, M b) { return static_cast<M>(a | b); }
  static M not_(M a) { return static_cast<M>(~a); }
};
#endif
#if defined(__AVX2__)
template <>
struct VecLanes<8, float> {
  static constexpr bool ok = true;
  using V = __m256;
  using M = __m256;  // all-ones / all-zeros lanes
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float v) { return _mm256_set1_ps(v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static M takes(V v, V cur) {  // v > cur, or v is NaN
    return _mm256_or_ps(_mm256_cmp_ps(v, cur, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  static V select(M m, V a, V b) { return _mm256_blendv_ps(a, b, m); }  // m ? b : a
  static M eq(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  static M and_not(M a, M b) { return _mm256_andnot_ps(b, a); }  // a & ~b
  static M or_(M a, M b) { return _mm256_or_ps(a, b); }
  static M not_(M a) { return _mm256_xor_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(-1))); }
};
#endif

// One clipped window [hs, he) x [ws, we) of a blocked plane (row width w), B lanes in vector
// registers (L = VecLanes<B, float>): window_argmax's scan from the window's first element.
// Forward: the max to yo. Backward: dy (g) added to each lane's winner (ties=first: the scan's
// last lead, its position carried as a float, exact below 2^24 positions) or to every element
// equal to the lane's max (ties=all), position by position in row-major order, +0 elsewhere:
// dx starts at +0 and only ever has dy added, so it is never -0 and adding +0 leaves its bits.
template <int B, typename L>
inline typename L::V max_window_vec(const float* xp, int64_t w, int64_t hs, int64_t he, int64_t ws, int64_t we,
                                     typename L::V* best) {
  auto m = L::load(xp + (hs * w + ws) * B);
  if (best) *best = L::set1(static_cast<float>(hs * w + ws));
  for (int64_t ih = hs; ih < he; ++ih)
    for (int64_t iw = ws; iw < we; ++iw) {
      const auto v = L::load(xp + (ih * w + iw) * B);
      const auto t = L::takes(v, m);
      m = L::select(t, m, v);
      if (best) *best = L::select(t, *best, L::set1(static_cast<float>(ih * w + iw)));
    }
  return m;
}

template <int B, typename L>
inline void max_window_backward_vec(const float* xp, int64_t w, int64_t hs, int64_t he, int64_t ws, int64_t we,
                                    const float* g, float* dxp, bool all) {
  typename L::V best;
  const auto m = max_window_vec<B, L>(xp, w, hs, he, ws, we, all ? nullptr : &best);
  const auto gv = L::load(g), z = L::zero();
  for (int64_t ih = hs; ih < he; ++ih)
    for (int64_t iw = ws; iw < we; ++iw) {
      const int64_t pos = ih * w + iw;
      const auto at = all ? L::eq(L::load(xp + pos * B), m) : L::eq(best, L::set1(static_cast<float>(pos)));
      float* d = dxp + pos * B;
      L::store(d, L::add(L::load(d), L::select(at, z, gv)));
    }
}

// Forward: each window's scan (window_argmax's: the clipped window in row-major order), lane by
// lane. The scan starts from the window's first element and visits it again, which changes
// nothing (max_scan_takes(v, v) holds only for a NaN, which then stays).
template <int B, typename T>
void max_forward_blocked(const Pool2dParams& p, const T* x, T* y) {
  const int64_t P = p.out_h(), Q = p.out_w(), planes = p.n * p.c / B;
  const bool is_2x2 = plain_2x2(p), vec_positions = p.h * p.w < (int64_t{1} << 24);
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < planes; ++nc) {
    const T* xp = x + nc * p.h * p.w * B;
    T* yp = y + nc * P * Q * B;
    for (int64_t oh = 0; oh < P; ++oh)
      for (int64_t ow = 0; ow < Q; ++ow) {
        T* yo = yp + (oh * Q + ow) * B;
        if (is_2x2) {  // the plain 2x2 path's picks: a, then b, c, d
          const T* a = xp + ((2 * oh) * p.w + 2 * ow) * B;
          const T* c = a + p.w * B;
          for (int l = 0; l < B; ++l) yo[l] = pick(pick(pick(a[l], a[B + l]), c[l]), c[B + l]);
          continue;
        }
        const auto [hs, he, ws, we] = pool2d_loops::clipped_window(p, oh, ow);
        if constexpr (VecLanes<B, T>::ok) {
          if (vec_positions) {
            VecLanes<B, T>::store(yo, max_window_vec<B, VecLanes<B, T>>(xp, p.w, hs, he, ws, we, nullptr));
            continue;
          }
        }
        T m[B];
        for (int l = 0; l < B; ++l) m[l] = xp[(hs * p.w + ws) * B + l];
        for (int64_t ih = hs; ih < he; ++ih)
          for (int64_t iw = ws; iw < we; ++iw) {
            const T* v = xp + (ih * p.w + iw) * B;
            for (int l = 0; l < B; ++l) m[l] = pick(m[l], v[l]);
          }
        for (int l = 0; l < B; ++l) yo[l] = m[l];
      }
  }
}

// One blocked 2x2 window's backward in vector registers (L = VecLanes<B, float>): the scan's
// picks and the tie rule's masks as backward_row_2x2_vec computes them on plain rows.
template <int B, bool All, typename L>
inline void backward_2x2_vec(const float* a, const float* c, const float* g, float* da, float* dc) {
  using M = typename L::M;
  const auto va = L::load(a), vb = L::load(a + B), vc = L::load(c), vd = L::load(c + B), gv = L::load(g);
  const M tb = L::takes(vb, va);
  auto m = L::select(tb, va, vb);
  const M tc = L::takes(vc, m);
  m = L::select(tc, m, vc);
  const M td = L::takes(vd, m);
  m = L::select(td, m, vd);
  M at_a, at_b, at_c, at_d;
  if constexpr (All) {  // every input equal to the max (none for a NaN max)
    at_a = L::eq(va, m), at_b = L::eq(vb, m), at_c = L::eq(vc, m), at_d = L::eq(vd, m);
  } else {  // the winner: the last of b, c, d to take the lead, else a
    at_d = td;
    at_c = L::and_not(tc, td);
    at_b = L::and_not(tb, L::or_(tc, td));
    at_a = L::not_(L::or_(tb, L::or_(tc, td)));
  }
  const auto z = L::zero();
  L::store(da, L::select(at_a, z, gv));
  L::store(da + B, L::select(at_b, z, gv));
  L::store(dc, L::select(at_c, z, gv));
  L::store(dc + B, L::select(at_d, z, gv));
}

// One blocked 2x2 window's backward, B lanes (channels) at once: backward_2x2's picks and tie
// tests per lane (the tie rule a template argument); in vector registers where VecLanes has them
// (the compiler leaves this lane loop scalar and branchy: 17x slower on VGG's maps, bm_pool2d).
template <int B, bool All, typename T>
inline void backward_2x2_lanes(const T* a, const T* c, const T* g, T* __restrict da, T* __restrict dc) {
  if constexpr (VecLanes<B, T>::ok) return backward_2x2_vec<B, All, VecLanes<B, T>>(a, c, g, da, dc);
  for (int l = 0; l < B; ++l) {
    const T va = a[l], vb = a[B + l], vc = c[l], vd = c[B + l], gl = g[l];
    const bool tb = max_scan_takes(vb, va);
    const T m1 = tb ? vb : va;
    const bool tc = max_scan_takes(vc, m1);
    const T m2 = tc ? vc : m1;
    const bool td = max_scan_takes(vd, m2);
    const T m = td ? vd : m2;
    bool at_a, at_b, at_c, at_d;
    if constexpr (All) {  // every input equal to the max (none for a NaN max)
      at_a = va == m, at_b = vb == m, at_c = vc == m, at_d = vd == m;
    } else {  // the winner: the last of b, c, d to take the lead, else a
      at_d = td, at_c = tc & !td, at_b = tb & !tc & !td, at_a = !tb & !tc & !td;
    }
    da[l] = at_a ? gl : T(0);
    da[B + l] = at_b ? gl : T(0);
    dc[l] = at_c ? gl : T(0);
    dc[B + l] = at_d ? gl : T(0);
  }
}

// Backward. The tiling 2x2 window: each input's own window decides it (backward_2x2's picks and
// tie tests, lane by lane), positions no window reaches get 0. Other windows: dx zeroed, then
// window by window in row-major order dy to each lane's winner (ties=first) or to every element
// equal to the lane's max (ties=all; none for a NaN max): max_backward_plane's additions in its
// order.
template <int B, typename T>
void max_backward_blocked(const Pool2dParams& p, const T* x, const T* dy, T* dx) {
  const int64_t P = p.out_h(), Q = p.out_w(), planes = p.n * p.c / B, plane = p.h * p.w * B;
  const bool is_2x2 = plain_2x2(p), all = p.ties == PoolTies::all;
  const bool vec_positions = p.h * p.w < (int64_t{1} << 24);  // max_window_vec's float positions
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < planes; ++nc) {
    const T* xp = x + nc * plane;
    const T* dyp = dy + nc * P * Q * B;
    T* dxp = dx + nc * plane;
    if (is_2x2) {
      if (2 * P != p.h || 2 * Q != p.w)
        for (int64_t i = 0; i < plane; ++i) dxp[i] = 0;
      for (int64_t oh = 0; oh < P; ++oh)
        for (int64_t ow = 0; ow < Q; ++ow) {
          const int64_t o = ((2 * oh) * p.w + 2 * ow) * B;
          const T* a = xp + o;
          const T* c = a + p.w * B;
          const T* g = dyp + (oh * Q + ow) * B;
          T* da = dxp + o;
          T* dc = da + p.w * B;
          if (all)
            backward_2x2_lanes<B, true>(a, c, g, da, dc);
          else
            backward_2x2_lanes<B, false>(a, c, g, da, dc);
        }
      continue;
    }
    for (int64_t i = 0; i < plane; ++i) dxp[i] = 0;
    for (int64_t oh = 0; oh < P; ++oh)
      for (int64_t ow = 0; ow < Q; ++ow) {
        const auto [hs, he, ws, we] = pool2d_loops::clipped_window(p, oh, ow);
        const T* g = dyp + (oh * Q + ow) * B;
        if constexpr (VecLanes<B, T>::ok) {
          if (vec_positions) {
            max_window_backward_vec<B, VecLanes<B, T>>(xp, p.w, hs, he, ws, we, g, dxp, all);
            continue;
          }
        }
        int64_t best[B];
        T m[B];
        for (int l = 0; l < B; ++l) {
          best[l] = hs * p.w + ws;
          m[l] = xp[best[l] * B + l];
        }
        for (int64_t ih = hs; ih < he; ++ih)
          for (int64_t iw = ws; iw < we; ++iw)
            for (int l = 0; l < B; ++l) {
              const T v = xp[(ih * p.w + iw) * B + l];
              if (max_scan_takes(v, m[l])) {
                best[l] = ih * p.w + iw;
                m[l] = v;
              }
            }
        if (!all) {
          for (int l = 0; l < B; ++l) dxp[best[l] * B + l] += g[l];
          continue;
        }
        for (int64_t ih = hs; ih < he; ++ih)
          for (int64_t iw = ws; iw < we; ++iw)
            for (int l = 0; l < B; ++l)
              if (xp[(ih * p.w + iw) * B + l] == m[l]) dxp[(ih * p.w + iw) * B + l] += g[l];
      }
  }
}

void maxpool2d_forward_fast(const Pool2dParams& p, const Tensor& x, Tensor& y) {
  p.validate();
  check_shape("maxpool2d_forward_fast", "x", x, p.x_shape());
  check_shape("maxpool2d_forward_fast", "y", y, p.y_shape());
  check_same_dtype("maxpool2d_forward_fast", x, y);
  if (x.channel_block() != 0) {
    check_same_block("maxpool2d_forward_fast", x, y, "y");
    return for_block("maxpool2d_forward_fast", x, [&](auto blk) {
      dispatch_dtype(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        max_forward_blocked<decltype(blk)::value, T>(p, x.blocked_data<T>(), y.blocked_data<T>());
      });
    });
  }
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    forward<T>(p, x.data<T>(), y.data<T>());
  });
}

void maxpool2d_backward_fast(const Pool2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dx) {
  p.validate();
  check_shape("maxpool2d_backward_fast", "x", x, p.x_shape());
  check_shape("maxpool2d_backward_fast", "dy", dy, p.y_shape());
  check_shape("maxpool2d_backward_fast", "dx", dx, p.x_shape());
  check_same_dtype("maxpool2d_backward_fast", x, dy);
  check_same_dtype("maxpool2d_backward_fast", x, dx);
  if (x.channel_block() != 0) {
    check_same_block("maxpool2d_backward_fast", x, dy, "dy");
    check_same_block("maxpool2d_backward_fast", x, dx, "dx");
    return for_block("maxpool2d_backward_fast", x, [&](auto blk) {
      dispatch_dtype(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        max_backward_blocked<decltype(blk)::value, T>(p, x.blocked_data<T>(), dy.blocked_data<T>(),
                                                      dx.blocked_data<T>());
      });
    });
  }
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward<T>(p, x.data<T>(), dy.data<T>(), dx.data<T>());
  });
}

// Average pooling: plain tensors through the shared loops' entry points, channel-blocked ones
// through the same loops compiled for their block.
void avgpool2d_forward_fast(const Pool2dParams& p, const Tensor& x, Tensor& y) {
  if (x.channel_block() == 0) return pool2d_loops::run_avg_forward<true>(p, x, y);
  p.validate();
  check_shape("avgpool2d_forward_fast", "x", x, p.x_shape());
  check_shape("avgpool2d_forward_fast", "y", y, p.y_shape());
  check_same_dtype("avgpool2d_forward_fast", x, y);
  check_same_block("avgpool2d_forward_fast", x, y, "y");
  for_block("avgpool2d_forward_fast", x, [&](auto blk) {
    dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      pool2d_loops::avg_forward<true, decltype(blk)::value, T>(p, x.blocked_data<T>(), y.blocked_data<T>());
    });
  });
}

void avgpool2d_backward_fast(const Pool2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dx) {
  if (dy.channel_block() == 0) return pool2d_loops::run_avg_backward<true>(p, x, dy, dx);
  p.validate();
  check_shape("avgpool2d_backward_fast", "dy", dy, p.y_shape());
  check_shape("avgpool2d_backward_fast", "dx", dx, p.x_shape());
  check_same_dtype("avgpool2d_backward_fast", dy, dx);
  check_same_block("avgpool2d_backward_fast", dy, dx, "dx");
  for_block("avgpool2d_backward_fast", dy, [&](auto blk) {
    dispatch_dtype(dy.dtype(), [&](auto tag) {
      using T = decltype(tag);
      pool2d_loops::avg_backward<true, decltype(blk)::value, T>(p, dy.blocked_data<T>(), dx.blocked_data<T>());
    });
  });
}

}  // namespace

void register_pool2d_fast(KernelRegistry& reg) {
  Pool2dKernel k;
  k.name = "fast";
  k.supports_doc = "every params field, float32 and float64, plain or channel-blocked (8 or 16); the reference's bits "
                   "(OpenMP over planes)";
  k.supports = [](const Pool2dParams&, DType) { return true; };
  k.any_block = true;
  k.forward = maxpool2d_forward_fast;
  k.backward = maxpool2d_backward_fast;
  reg.maxpool2d.at(KernelBackend::fast) = k;
  k.forward = avgpool2d_forward_fast;
  k.backward = avgpool2d_backward_fast;
  reg.avgpool2d.at(KernelBackend::fast) = k;
}

}  // namespace driftlab
