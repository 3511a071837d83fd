// Fast max pooling, float and double, NCHW, OpenMP over the N*C planes (each plane is
// independent, so the result does not depend on the thread count). The window scan is the
// reference's: first maximum in row-major order, a NaN wins and stops the scan. Forward
// writes y (=); backward writes dx (=), ties sent to the first max or to every equal element.
#include <algorithm>

#include "engine/ops/pool2d.h"

namespace driftlab {
namespace {

// Offset (within the plane) of the first max of window (oh, ow); the window is clipped to
// the real input, so padding never wins. `!(v <= best)` is true when v > best or v is NaN:
// one comparison per element gives "first max, a NaN wins and stops the scan".
template <typename T>
inline int64_t window_argmax(const Pool2dParams& p, const T* xp, int64_t oh, int64_t ow) {
  const int64_t h0 = oh * p.stride_h - p.pad_t, w0 = ow * p.stride_w - p.pad_l;
  const int64_t hs = h0 < 0 ? 0 : h0, he = std::min(h0 + p.kh, p.h);
  const int64_t ws = w0 < 0 ? 0 : w0, we = std::min(w0 + p.kw, p.w);
  int64_t best = hs * p.w + ws;
  T bv = xp[best];
  if (bv != bv) return best;  // NaN first
  for (int64_t ih = hs; ih < he; ++ih) {
    const T* row = xp + ih * p.w;
    for (int64_t iw = ws; iw < we; ++iw) {
      const T v = row[iw];
      if (!(v <= bv)) {
        best = ih * p.w + iw;
        bv = v;
        if (v != v) return best;
      }
    }
  }
  return best;
}

// x holds the window's max m: equal, or both NaN. For the first element in scan order that
// matches, this is exactly "the first max" (an earlier equal value would have won the scan).
template <typename T>
inline bool holds_max(T x, T m) {
  return x == m || (x != x && m != m);
}

// The 2x2 stride-2 unpadded window of every LeNet/VGG pool, unrolled: same scan order.
template <typename T>
inline int64_t argmax_2x2(const T* xp, int64_t w, int64_t oh, int64_t ow) {
  const int64_t i0 = (2 * oh) * w + 2 * ow;
  const int64_t idx[4] = {i0, i0 + 1, i0 + w, i0 + w + 1};
  int64_t best = i0;
  T bv = xp[i0];
  if (bv != bv) return best;
  for (int k = 1; k < 4; ++k) {
    const T v = xp[idx[k]];
    if (!(v <= bv)) {
      best = idx[k];
      bv = v;
      if (v != v) return best;
    }
  }
  return best;
}

// The scan step of the window: keep `cur` unless v beats it or is NaN; a NaN `cur` stays.
template <typename T>
inline T pick(T cur, T v) {
  return (cur != cur) ? cur : ((v > cur || v != v) ? v : cur);
}

// Backward of one plane for the tiling 2x2 window. ties=first: the input equal to the first
// max in scan order gets dy (found with the same picks as forward); ties=all: every input
// equal to the max gets dy (none when the max is NaN, as in the reference's == test).
// Rows/columns the floor-mode windows never reach (odd H or W) get 0.
template <typename T>
void backward_2x2(const Pool2dParams& p, const T* xp, const T* dyp, T* dxp) {
  const int64_t P = p.out_h(), Q = p.out_w();
  for (int64_t i = 0; i < p.h * p.w; ++i) dxp[i] = 0;
  for (int64_t oh = 0; oh < P; ++oh) {
    const T* r0 = xp + 2 * oh * p.w;
    const T* r1 = r0 + p.w;
    T* d0 = dxp + 2 * oh * p.w;
    T* d1 = d0 + p.w;
    for (int64_t ow = 0; ow < Q; ++ow) {
      const T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
      const T g = dyp[oh * Q + ow];
      const T m = pick(pick(pick(a, b), c), d);
      if (p.ties == PoolTies::all) {
        d0[2 * ow] = a == m ? g : T(0);
        d0[2 * ow + 1] = b == m ? g : T(0);
        d1[2 * ow] = c == m ? g : T(0);
        d1[2 * ow + 1] = d == m ? g : T(0);
        continue;
      }
      // First position in scan order holding the max (a NaN max is found too).
      const bool at_a = holds_max(a, m), at_b = !at_a && holds_max(b, m), at_c = !at_a && !at_b && holds_max(c, m);
      const bool at_d = !at_a && !at_b && !at_c;
      d0[2 * ow] = at_a ? g : T(0);
      d0[2 * ow + 1] = at_b ? g : T(0);
      d1[2 * ow] = at_c ? g : T(0);
      d1[2 * ow + 1] = at_d ? g : T(0);
    }
  }
}

template <typename T>
inline int64_t argmax(const Pool2dParams& p, bool is_2x2, const T* xp, int64_t oh, int64_t ow) {
  return is_2x2 ? argmax_2x2(xp, p.w, oh, ow) : window_argmax(p, xp, oh, ow);
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
        for (int64_t ow = 0; ow < Q; ++ow)  // branch-free: the compiler turns the picks into blends
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
    for (int64_t i = 0; i < p.h * p.w; ++i) dxp[i] = 0;
    for (int64_t oh = 0; oh < P; ++oh)
      for (int64_t ow = 0; ow < Q; ++ow) {
        const T g = dyp[oh * Q + ow];
        const int64_t first = argmax(p, is_2x2, xp, oh, ow);
        if (p.ties == PoolTies::first) {
          dxp[first] += g;
          continue;
        }
        const T m = xp[first];
        const int64_t h0 = oh * p.stride_h - p.pad_t, w0 = ow * p.stride_w - p.pad_l;
        for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h0 + p.kh, p.h); ++ih)
          for (int64_t iw = std::max<int64_t>(w0, 0); iw < std::min(w0 + p.kw, p.w); ++iw)
            if (xp[ih * p.w + iw] == m) dxp[ih * p.w + iw] += g;
      }
  }
}

}  // namespace

void maxpool2d_forward_fast(const Pool2dParams& p, const Tensor& x, Tensor& y) {
  p.validate();
  check_shape("maxpool2d_forward_fast", "x", x, p.x_shape());
  check_shape("maxpool2d_forward_fast", "y", y, p.y_shape());
  check_same_dtype("maxpool2d_forward_fast", x, y);
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
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward<T>(p, x.data<T>(), dy.data<T>(), dx.data<T>());
  });
}

}  // namespace driftlab
