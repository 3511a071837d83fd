// Own CUDA max/average pooling, float and double, NCHW, explicit pads. The same results as
// the reference bit for bit at sum_order ascending (built with -fmad=false; a max and a sum of
// dy/count in window order involve the same roundings); the average sums are always ascending
// (acc_order, a knob of the CPU reference and CPU average-pooling kernels, is not read here):
//   forward: one thread per output, the window scanned row-major with max_scan_takes
//   (core/ops/pool2d.h): the first max, or the last NaN.
//   backward: one thread per input element (a gather, no atomics), adding the contribution
//   of every window that covers it in (oh, ow) order, which is the order the reference's
//   ascending gather adds them. dx is written (=).
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {
namespace {

struct PoolDims {
  long long n, c, h, w, kh, kw, sh, sw, pt, pl, p, q;
  bool ties_all, include_pad;
};

PoolDims dims_of(const Pool2dParams& p) {
  return {p.n,        p.c,     p.h,     p.w,         p.kh,        p.kw, p.stride_h, p.stride_w,
          p.pad_t,    p.pad_l, p.out_h(), p.out_w(), p.ties == PoolTies::all, p.count_include_pad};
}

// Index (within the plane) of the winner of window (oh,ow): the first max, or the last NaN.
template <typename T>
__device__ long long argmax_first(const PoolDims& d, const T* xp, long long oh, long long ow) {
  long long best = -1;
  for (long long r = 0; r < d.kh; ++r) {
    const long long ih = oh * d.sh - d.pt + r;
    if (ih < 0 || ih >= d.h) continue;
    for (long long s = 0; s < d.kw; ++s) {
      const long long iw = ow * d.sw - d.pl + s;
      if (iw < 0 || iw >= d.w) continue;
      const long long i = ih * d.w + iw;
      if (best < 0 || max_scan_takes(xp[i], xp[best])) best = i;
    }
  }
  return best;
}

__device__ long long window_count(const PoolDims& d, long long oh, long long ow) {
  if (d.include_pad) return d.kh * d.kw;
  const long long h0 = oh * d.sh - d.pt, w0 = ow * d.sw - d.pl;
  const long long h_lo = h0 < 0 ? 0 : h0, h_hi = h0 + d.kh < d.h ? h0 + d.kh : d.h;
  const long long w_lo = w0 < 0 ? 0 : w0, w_hi = w0 + d.kw < d.w ? w0 + d.kw : d.w;
  return (h_hi - h_lo) * (w_hi - w_lo);
}

template <typename T>
__global__ void maxpool_forward_kernel(PoolDims d, const T* __restrict__ x, T* __restrict__ y) {
  DL_GRID_STRIDE(i, d.n * d.c * d.p * d.q) {
    const long long ow = i % d.q, oh = (i / d.q) % d.p, nc = i / (d.q * d.p);
    const T* xp = x + nc * d.h * d.w;
    y[i] = xp[argmax_first(d, xp, oh, ow)];
  }
}

template <typename T>
__global__ void avgpool_forward_kernel(PoolDims d, const T* __restrict__ x, T* __restrict__ y) {
  DL_GRID_STRIDE(i, d.n * d.c * d.p * d.q) {
    const long long ow = i % d.q, oh = (i / d.q) % d.p, nc = i / (d.q * d.p);
    const T* xp = x + nc * d.h * d.w;
    T acc = T(0);
    for (long long r = 0; r < d.kh; ++r) {
      const long long ih = oh * d.sh - d.pt + r;
      if (ih < 0 || ih >= d.h) continue;
      for (long long s = 0; s < d.kw; ++s) {
        const long long iw = ow * d.sw - d.pl + s;
        if (iw >= 0 && iw < d.w) acc += xp[ih * d.w + iw];
      }
    }
    y[i] = acc / static_cast<T>(window_count(d, oh, ow));
  }
}

// The output rows/cols whose window covers input row ih: oh*sh - pt <= ih < oh*sh - pt + kh.
__device__ void covering(long long i, long long pad, long long k, long long stride, long long out, long long* lo,
                         long long* hi) {
  const long long a = i + pad - k + 1;  // oh*stride >= a
  long long l = a <= 0 ? 0 : (a + stride - 1) / stride;
  long long h = (i + pad) / stride;  // oh*stride <= i + pad
  if (h > out - 1) h = out - 1;
  *lo = l;
  *hi = h;
}

// With max: dy of each covering window whose chosen element is this one (ties first) or whose
// max equals this value (ties all). With avg (x null): dy/count of each covering window.
template <typename T, bool kMax>
__global__ void pool_backward_kernel(PoolDims d, const T* __restrict__ x, const T* __restrict__ dy,
                                     T* __restrict__ dx) {
  DL_GRID_STRIDE(i, d.n * d.c * d.h * d.w) {
    const long long iw = i % d.w, ih = (i / d.w) % d.h, nc = i / (d.w * d.h);
    const long long local = ih * d.w + iw;
    long long oh_lo, oh_hi, ow_lo, ow_hi;
    covering(ih, d.pt, d.kh, d.sh, d.p, &oh_lo, &oh_hi);
    covering(iw, d.pl, d.kw, d.sw, d.q, &ow_lo, &ow_hi);
    const T* xp = kMax ? x + nc * d.h * d.w : nullptr;
    const T* dyp = dy + nc * d.p * d.q;
    T acc = T(0);
    for (long long oh = oh_lo; oh <= oh_hi; ++oh)
      for (long long ow = ow_lo; ow <= ow_hi; ++ow) {
        const T g = dyp[oh * d.q + ow];
        if (kMax) {
          const long long first = argmax_first(d, xp, oh, ow);
          const bool take = d.ties_all ? xp[local] == xp[first] : local == first;
          if (take) acc += g;
        } else {
          acc += g / static_cast<T>(window_count(d, oh, ow));
        }
      }
    dx[i] = acc;
  }
}

void check_io(const char* fn, const Pool2dParams& p, const DeviceTensor& a, const char* an, const Shape& as,
              const DeviceTensor& b, const char* bn, const Shape& bs) {
  p.validate();
  check_device_shape(fn, an, a, as);
  check_device_shape(fn, bn, b, bs);
  check(a.dtype() == b.dtype(), fn, ": mixed dtypes");
}

cudaStream_t stream_of(CudaContext& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

}  // namespace

void maxpool2d_forward_own(CudaContext& ctx, const Pool2dParams& p, const DeviceTensor& x, DeviceTensor& y) {
  check_io("maxpool2d_forward_own", p, x, "x", p.x_shape(), y, "y", p.y_shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    maxpool_forward_kernel<T><<<dl_blocks(y.numel(), 256), 256, 0, stream_of(ctx)>>>(dims_of(p), x.data<T>(),
                                                                                     y.data<T>());
    DL_CUDA_LAUNCH_CHECK("maxpool_forward_kernel");
  });
}

void maxpool2d_backward_own(CudaContext& ctx, const Pool2dParams& p, const DeviceTensor& x, const DeviceTensor& dy,
                            DeviceTensor& dx) {
  check_io("maxpool2d_backward_own", p, x, "x", p.x_shape(), dy, "dy", p.y_shape());
  check_device_shape("maxpool2d_backward_own", "dx", dx, p.x_shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    pool_backward_kernel<T, true><<<dl_blocks(dx.numel(), 256), 256, 0, stream_of(ctx)>>>(
        dims_of(p), x.data<T>(), dy.data<T>(), dx.data<T>());
    DL_CUDA_LAUNCH_CHECK("pool_backward_kernel<max>");
  });
}

void avgpool2d_forward_own(CudaContext& ctx, const Pool2dParams& p, const DeviceTensor& x, DeviceTensor& y) {
  check_io("avgpool2d_forward_own", p, x, "x", p.x_shape(), y, "y", p.y_shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    avgpool_forward_kernel<T><<<dl_blocks(y.numel(), 256), 256, 0, stream_of(ctx)>>>(dims_of(p), x.data<T>(),
                                                                                     y.data<T>());
    DL_CUDA_LAUNCH_CHECK("avgpool_forward_kernel");
  });
}

void avgpool2d_backward_own(CudaContext& ctx, const Pool2dParams& p, const DeviceTensor& dy, DeviceTensor& dx) {
  check_io("avgpool2d_backward_own", p, dx, "dx", p.x_shape(), dy, "dy", p.y_shape());
  dispatch_dtype(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    pool_backward_kernel<T, false><<<dl_blocks(dx.numel(), 256), 256, 0, stream_of(ctx)>>>(
        dims_of(p), nullptr, dy.data<T>(), dx.data<T>());
    DL_CUDA_LAUNCH_CHECK("pool_backward_kernel<avg>");
  });
}

}  // namespace cuda
}  // namespace driftlab
