// Pooling loops shared by the CPU kernels: the window walk both max-pool kernels' references use,
// and the average pooling of both the reference (one thread) and the fast kernel (OpenMP over the
// N*C planes, Parallel). Planes are independent and each window is summed in the same order and
// divided by the same divisor, so the two average kernels give the same bits for any thread
// count. Forward writes y (=); backward writes dx (=), accumulating over overlapping windows.
#pragma once
#include "engine/ops/pool2d.h"

namespace driftlab {
namespace pool2d_loops {

// Visits the real (non-padding) input positions of window (oh,ow) in row-major order.
template <typename F>
void for_window(const Pool2dParams& p, int64_t oh, int64_t ow, F&& f) {
  for (int64_t r = 0; r < p.kh; ++r) {
    int64_t ih = oh * p.stride_h - p.pad_t + r;
    if (ih < 0 || ih >= p.h) continue;
    for (int64_t s = 0; s < p.kw; ++s) {
      int64_t iw = ow * p.stride_w - p.pad_l + s;
      if (iw < 0 || iw >= p.w) continue;
      f(ih * p.w + iw);
    }
  }
}

// kh*kw (count_include_pad), or the number of real elements in the window.
inline int64_t avg_divisor(const Pool2dParams& p, int64_t oh, int64_t ow) {
  if (p.count_include_pad) return p.kh * p.kw;
  int64_t cnt = 0;
  for_window(p, oh, ow, [&](int64_t) { ++cnt; });
  return cnt;
}

template <bool Parallel, typename T>
void avg_forward(const Pool2dParams& p, const T* x, T* y) {
  const int64_t P = p.out_h(), Q = p.out_w(), planes = p.n * p.c;
#pragma omp parallel for schedule(static) if (Parallel)
  for (int64_t nc = 0; nc < planes; ++nc) {
    const T* xp = x + nc * p.h * p.w;
    for (int64_t oh = 0; oh < P; ++oh)
      for (int64_t ow = 0; ow < Q; ++ow) {
        T acc = 0;
        for_window(p, oh, ow, [&](int64_t i) { acc += xp[i]; });
        y[(nc * P + oh) * Q + ow] = acc / static_cast<T>(avg_divisor(p, oh, ow));
      }
  }
}

template <bool Parallel, typename T>
void avg_backward(const Pool2dParams& p, const T* dy, T* dx) {
  const int64_t P = p.out_h(), Q = p.out_w(), planes = p.n * p.c;
#pragma omp parallel for schedule(static) if (Parallel)
  for (int64_t nc = 0; nc < planes; ++nc) {
    T* dxp = dx + nc * p.h * p.w;
    for (int64_t i = 0; i < p.h * p.w; ++i) dxp[i] = 0;
    for (int64_t oh = 0; oh < P; ++oh)
      for (int64_t ow = 0; ow < Q; ++ow) {
        const T g = dy[(nc * P + oh) * Q + ow] / static_cast<T>(avg_divisor(p, oh, ow));
        for_window(p, oh, ow, [&](int64_t i) { dxp[i] += g; });
      }
  }
}

// The Tensor entry points: params and shapes checked, then the loops for T.
template <bool Parallel>
void run_avg_forward(const Pool2dParams& p, const Tensor& x, Tensor& y) {
  p.validate();
  check_shape("avgpool2d_forward", "x", x, p.x_shape());
  check_shape("avgpool2d_forward", "y", y, p.y_shape());
  check_same_dtype("avgpool2d_forward", x, y);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    avg_forward<Parallel, T>(p, x.data<T>(), y.data<T>());
  });
}

// x: the forward input, not read (the registry's backward takes it for max pooling).
template <bool Parallel>
void run_avg_backward(const Pool2dParams& p, const Tensor&, const Tensor& dy, Tensor& dx) {
  p.validate();
  check_shape("avgpool2d_backward", "dy", dy, p.y_shape());
  check_shape("avgpool2d_backward", "dx", dx, p.x_shape());
  check_same_dtype("avgpool2d_backward", dy, dx);
  dispatch_dtype(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    avg_backward<Parallel, T>(p, dy.data<T>(), dx.data<T>());
  });
}

}  // namespace pool2d_loops
}  // namespace driftlab
