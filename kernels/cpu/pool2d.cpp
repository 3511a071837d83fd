// Fast max pooling, float and double, NCHW, OpenMP over the N*C planes (each plane is
// independent, so the result does not depend on the thread count). The window scan is the
// reference's: first maximum in row-major order, a NaN wins and stops the scan. Forward
// writes y (=); backward writes dx (=), ties sent to the first max or to every equal element.
#include <cmath>

#include "engine/ops/pool2d.h"

namespace driftlab {
namespace {

// Offset (within the plane) of the first max of window (oh, ow); the window is clipped to
// the real input, so padding never wins.
template <typename T>
inline int64_t window_argmax(const Pool2dParams& p, const T* xp, int64_t oh, int64_t ow) {
  const int64_t h0 = oh * p.stride_h - p.pad_t, w0 = ow * p.stride_w - p.pad_l;
  const int64_t hs = h0 < 0 ? 0 : h0, he = std::min(h0 + p.kh, p.h);
  const int64_t ws = w0 < 0 ? 0 : w0, we = std::min(w0 + p.kw, p.w);
  int64_t best = hs * p.w + ws;
  T bv = xp[best];
  if (std::isnan(bv)) return best;
  for (int64_t ih = hs; ih < he; ++ih)
    for (int64_t iw = ws; iw < we; ++iw) {
      T v = xp[ih * p.w + iw];
      if (v > bv) {
        bv = v;
        best = ih * p.w + iw;
      } else if (std::isnan(v)) {
        return ih * p.w + iw;
      }
    }
  return best;
}

template <typename T>
void forward(const Pool2dParams& p, const T* x, T* y) {
  const int64_t P = p.out_h(), Q = p.out_w(), planes = p.n * p.c;
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < planes; ++nc) {
    const T* xp = x + nc * p.h * p.w;
    T* yp = y + nc * P * Q;
    for (int64_t oh = 0; oh < P; ++oh)
      for (int64_t ow = 0; ow < Q; ++ow) yp[oh * Q + ow] = xp[window_argmax(p, xp, oh, ow)];
  }
}

template <typename T>
void backward(const Pool2dParams& p, const T* x, const T* dy, T* dx) {
  const int64_t P = p.out_h(), Q = p.out_w(), planes = p.n * p.c;
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < planes; ++nc) {
    const T* xp = x + nc * p.h * p.w;
    const T* dyp = dy + nc * P * Q;
    T* dxp = dx + nc * p.h * p.w;
    for (int64_t i = 0; i < p.h * p.w; ++i) dxp[i] = 0;
    for (int64_t oh = 0; oh < P; ++oh)
      for (int64_t ow = 0; ow < Q; ++ow) {
        const T g = dyp[oh * Q + ow];
        const int64_t first = window_argmax(p, xp, oh, ow);
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
