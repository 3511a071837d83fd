// Pooling loops shared by the CPU kernels: the window walk both max-pool kernels' references use,
// and the average pooling of both the reference (one thread) and the fast kernel (OpenMP over the
// N*C planes, Parallel). Planes are independent and each sum runs in params.sum_order over the
// same terms with the same divisor, so the two average kernels give the same bits for any thread
// count. Forward writes y (=); backward writes dx (=), accumulating over overlapping windows.
#pragma once
#include <algorithm>
#include <vector>

#include "core/ops/pool2d.h"

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

// Window (oh, ow) clipped to the real input: rows [hs, he), columns [ws, we).
struct ClippedWindow {
  int64_t hs, he, ws, we;
};
inline ClippedWindow clipped_window(const Pool2dParams& p, int64_t oh, int64_t ow) {
  const int64_t h0 = oh * p.stride_h - p.pad_t, w0 = ow * p.stride_w - p.pad_l;
  return {std::max<int64_t>(h0, 0), std::min(h0 + p.kh, p.h), std::max<int64_t>(w0, 0), std::min(w0 + p.kw, p.w)};
}

// Offset (within the plane) of the winner of window (oh, ow): max_scan_takes in row-major order
// (the first max, or the last NaN); the window is clipped to the real input, so padding never wins.
template <typename T>
inline int64_t window_argmax(const Pool2dParams& p, const T* xp, int64_t oh, int64_t ow) {
  const auto [hs, he, ws, we] = clipped_window(p, oh, ow);
  int64_t best = hs * p.w + ws;
  T bv = xp[best];
  for (int64_t ih = hs; ih < he; ++ih) {
    const T* row = xp + ih * p.w;
    for (int64_t iw = ws; iw < we; ++iw) {
      const T v = row[iw];
      if (max_scan_takes(v, bv)) {
        best = ih * p.w + iw;
        bv = v;
      }
    }
  }
  return best;
}

// One plane's max-pool backward (dx written, =): each window's dy to its winner, or under
// ties=all to every element equal to the window's max (none for a NaN max); overlapping windows
// add up. The fast pooling kernel's general windows and the fused conv_block's use it.
template <typename T>
void max_backward_plane(const Pool2dParams& p, const T* xp, const T* dyp, T* dxp) {
  const int64_t P = p.out_h(), Q = p.out_w();
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
      const auto [hs, he, ws, we] = clipped_window(p, oh, ow);
      for (int64_t ih = hs; ih < he; ++ih)
        for (int64_t iw = ws; iw < we; ++iw)
          if (xp[ih * p.w + iw] == m) dxp[ih * p.w + iw] += g;
    }
}

// kh*kw (count_include_pad), or the number of real elements in the window.
inline int64_t avg_divisor(const Pool2dParams& p, int64_t oh, int64_t ow) {
  if (p.count_include_pad) return p.kh * p.kw;
  int64_t cnt = 0;
  for_window(p, oh, ow, [&](int64_t) { ++cnt; });
  return cnt;
}

// The sum of the terms that visit(f) passes to f, in `order`: ascending accumulates as they come
// (the same bits as ordered_sum, without the buffer); the other orders collect them in buf first.
template <typename T, typename Visit>
T window_sum(SumOrder order, std::vector<T>& buf, Visit&& visit) {
  if (order == SumOrder::ascending) {
    T acc = 0;
    visit([&](T t) { acc += t; });
    return acc;
  }
  buf.clear();
  visit([&](T t) { buf.push_back(t); });
  return ordered_sum(buf.data(), static_cast<int64_t>(buf.size()), order);
}

// Average pooling over planes of B channels side by side (B = 1: plain NCHW, one plane per image
// and channel; B = 8 or 16: a channel-blocked tensor (engine/layers/layout.h), one plane per image
// and block of B channels, element i's channels at i*B .. i*B+B-1). Each lane is its own channel:
// the same terms, order and divisor as a plain plane, so a blocked run gives the plain run's bits.
template <bool Parallel, int B, typename T>
void avg_forward(const Pool2dParams& p, const T* x, T* y) {
  const int64_t P = p.out_h(), Q = p.out_w(), planes = p.n * p.c / B;
#pragma omp parallel if (Parallel)
  {
    std::vector<T> buf;
#pragma omp for schedule(static)
    for (int64_t nc = 0; nc < planes; ++nc) {
      const T* xp = x + nc * p.h * p.w * B;
      for (int64_t oh = 0; oh < P; ++oh)
        for (int64_t ow = 0; ow < Q; ++ow) {
          const T div = static_cast<T>(avg_divisor(p, oh, ow));
          T* yo = y + ((nc * P + oh) * Q + ow) * B;
          if (p.sum_order == SumOrder::ascending) {  // window_sum's ascending loop, lane by lane
            T acc[B] = {};
            for_window(p, oh, ow, [&](int64_t i) {
              for (int l = 0; l < B; ++l) acc[l] += xp[i * B + l];
            });
            for (int l = 0; l < B; ++l) yo[l] = acc[l] / div;
            continue;
          }
          for (int l = 0; l < B; ++l)
            yo[l] = window_sum<T>(p.sum_order, buf, [&](auto&& f) {
                      for_window(p, oh, ow, [&](int64_t i) { f(xp[i * B + l]); });
                    }) /
                    div;
        }
    }
  }
}

// Gathers, for each input position, dy/divisor of the windows that cover it in row-major window
// order, and sums them in sum_order (ascending gives the bits of scattering window by window).
// Planes of B channels as avg_forward's.
template <bool Parallel, int B, typename T>
void avg_backward(const Pool2dParams& p, const T* dy, T* dx) {
  const int64_t P = p.out_h(), Q = p.out_w(), planes = p.n * p.c / B;
  std::vector<T> divisor(static_cast<size_t>(P * Q));
  for (int64_t oh = 0; oh < P; ++oh)
    for (int64_t ow = 0; ow < Q; ++ow) divisor[oh * Q + ow] = static_cast<T>(avg_divisor(p, oh, ow));
  // Windows covering padded coordinate c along one axis: o*s <= c <= o*s + k - 1, 0 <= o < n.
  auto first_window = [](int64_t c, int64_t k, int64_t s) { return c < k ? int64_t{0} : (c - k) / s + 1; };
  auto last_window = [](int64_t c, int64_t s, int64_t n) { return std::min(c / s, n - 1); };
  if (Parallel && p.sum_order == SumOrder::ascending && p.stride_h >= p.kh && p.stride_w >= p.kw) {
    // Windows that do not overlap (a global average pool, 2x2 stride 2): each input position is
    // covered by at most one window, so its sum is 0 + dy/divisor of that window, or 0 (the bits
    // of the general loop below, without its per-position window search). The fast kernel
    // (Parallel) only: the reference keeps the general loop, which tests/ops/test_pool2d.cpp
    // compares this one with.
    auto window_of = [&](int64_t i, int64_t pad, int64_t k, int64_t s, int64_t n) {
      const int64_t o0 = first_window(i + pad, k, s), o1 = last_window(i + pad, s, n);
      return o0 <= o1 ? o0 : int64_t{-1};  // at most one window: o0 == o1 or none
    };
    std::vector<int64_t> win_h(static_cast<size_t>(p.h)), win_w(static_cast<size_t>(p.w));
    for (int64_t ih = 0; ih < p.h; ++ih) win_h[ih] = window_of(ih, p.pad_t, p.kh, p.stride_h, P);
    for (int64_t iw = 0; iw < p.w; ++iw) win_w[iw] = window_of(iw, p.pad_l, p.kw, p.stride_w, Q);
#pragma omp parallel for schedule(static)
    for (int64_t nc = 0; nc < planes; ++nc) {
      const T* dyp = dy + nc * P * Q * B;
      T* dxp = dx + nc * p.h * p.w * B;
      for (int64_t ih = 0; ih < p.h; ++ih)
        for (int64_t iw = 0; iw < p.w; ++iw) {
          const int64_t oh = win_h[ih], ow = win_w[iw];
          T* d = dxp + (ih * p.w + iw) * B;
          if (oh < 0 || ow < 0) {
            for (int l = 0; l < B; ++l) d[l] = 0;
            continue;
          }
          const T* g = dyp + (oh * Q + ow) * B;
          const T div = divisor[oh * Q + ow];
          for (int l = 0; l < B; ++l) {
            T acc = 0;
            acc += g[l] / div;
            d[l] = acc;
          }
        }
    }
    return;
  }
#pragma omp parallel if (Parallel)
  {
    std::vector<T> buf;
#pragma omp for schedule(static)
    for (int64_t nc = 0; nc < planes; ++nc) {
      const T* dyp = dy + nc * P * Q * B;
      T* dxp = dx + nc * p.h * p.w * B;
      for (int64_t ih = 0; ih < p.h; ++ih) {
        const int64_t ch = ih + p.pad_t, oh0 = first_window(ch, p.kh, p.stride_h),
                      oh1 = last_window(ch, p.stride_h, P);
        for (int64_t iw = 0; iw < p.w; ++iw) {
          const int64_t cw = iw + p.pad_l, ow0 = first_window(cw, p.kw, p.stride_w),
                        ow1 = last_window(cw, p.stride_w, Q);
          for (int l = 0; l < B; ++l)
            dxp[(ih * p.w + iw) * B + l] = window_sum<T>(p.sum_order, buf, [&](auto&& f) {
              for (int64_t oh = oh0; oh <= oh1; ++oh)
                for (int64_t ow = ow0; ow <= ow1; ++ow) f(dyp[(oh * Q + ow) * B + l] / divisor[oh * Q + ow]);
            });
        }
      }
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
    avg_forward<Parallel, 1, T>(p, x.data<T>(), y.data<T>());
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
    avg_backward<Parallel, 1, T>(p, dy.data<T>(), dx.data<T>());
  });
}

}  // namespace pool2d_loops
}  // namespace driftlab
