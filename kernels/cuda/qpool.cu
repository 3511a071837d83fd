// Own CUDA int8 pooling, int8|uint8 in and out, every output written (=): qmaxpool2d_forward_own
// x (N,C,H,W) -> y (N,C,P,Q), one output per thread (the integer max of its window: padding never
// wins), and qglobal_avg_pool_own x (N,C,H,W) -> y (N,C), one plane per thread (its exact integer
// sum, then qgap_one() of core/ops/qpool.h). The reference's bytes (kernels/cpu/ref/qpool_ref.cpp).
// Built with -fmad=false, as every own int8 kernel file (CMakeLists.txt): no multiply-add fusion,
// so each float operation rounds as on the CPU (built with -ffp-contract=off).
#include "kernels/cuda/quant_common.cuh"

namespace driftlab {
namespace cuda {
namespace {

using quant_common::check_dev;
using quant_common::dispatch_q_xy;
using quant_common::stream_of;
using quant_common::type_lowest;

struct QPoolDims {
  long long n, c, h, w, kh, kw, sh, sw, pt, pl, p, q;
};

template <typename T>
__global__ void qmaxpool_kernel(QPoolDims d, const T* __restrict__ x, T* __restrict__ y) {
  DL_GRID_STRIDE(i, d.n * d.c * d.p * d.q) {
    const long long ow = i % d.q, oh = (i / d.q) % d.p, nc = i / (d.q * d.p);
    const T* xp = x + nc * d.h * d.w;
    T m = type_lowest<T>();  // a window wholly in the padding gives the type's minimum, as the reference
    for (long long r = 0; r < d.kh; ++r) {
      const long long ih = oh * d.sh - d.pt + r;
      if (ih < 0 || ih >= d.h) continue;
      for (long long s = 0; s < d.kw; ++s) {
        const long long iw = ow * d.sw - d.pl + s;
        if (iw >= 0 && iw < d.w && xp[ih * d.w + iw] > m) m = xp[ih * d.w + iw];
      }
    }
    y[i] = m;
  }
}

// Global average pooling, one (n, c) plane per thread (ResNet's planes are 8x8: a thread sums 64
// bytes; the int64 sum is exact in any order), then qgap_one (every rule) as the reference.
template <typename T>
__global__ void qgap_kernel(long long planes, QGlobalAvgPoolParams::Resolved r, const T* __restrict__ x,
                            T* __restrict__ y) {
  const int32_t tmin = type_lowest<T>(), tmax = tmin == 0 ? 255 : 127;
  DL_GRID_STRIDE(nc, planes) {
    long long sum = 0;
    for (long long i = 0; i < r.count; ++i) sum += x[nc * r.count + i];
    y[nc] = static_cast<T>(qgap_one(r, sum, tmin, tmax));
  }
}

}  // namespace

void qmaxpool2d_forward_own(CudaContext& ctx, const QPool2dParams& p, const DeviceTensor& x, DeviceTensor& y) {
  p.g.validate();
  check_dev("qmaxpool2d_forward_own", "input", x, p.g.x_shape(), p.dtype);
  check_dev("qmaxpool2d_forward_own", "output", y, p.g.y_shape(), p.dtype);
  if (y.numel() == 0) return;
  const QPoolDims d{p.g.n,       p.g.c,     p.g.h,     p.g.w,       p.g.kh,      p.g.kw,
                    p.g.stride_h, p.g.stride_w, p.g.pad_t, p.g.pad_l, p.g.out_h(), p.g.out_w()};
  dispatch_q_xy(p.dtype, p.dtype, "qmaxpool2d_forward_own", [&](auto tag, auto) {
    using T = decltype(tag);
    qmaxpool_kernel<T><<<dl_blocks(y.numel(), 256), 256, 0, stream_of(ctx)>>>(d, x.data<T>(), y.data<T>());
    DL_CUDA_LAUNCH_CHECK("qmaxpool_kernel");
  });
}

void qglobal_avg_pool_own(CudaContext& ctx, const QGlobalAvgPoolParams& p, const DeviceTensor& x, DeviceTensor& y) {
  check_dev("qglobal_avg_pool_own", "input", x, {p.n, p.c, p.h, p.w}, p.dtype);
  check_dev("qglobal_avg_pool_own", "output", y, {p.n, p.c}, p.dtype);
  const QGlobalAvgPoolParams::Resolved r = p.resolve();  // checks the scales and the count, as the reference
  if (y.numel() == 0) return;
  dispatch_q_xy(p.dtype, p.dtype, "qglobal_avg_pool_own", [&](auto tag, auto) {
    using T = decltype(tag);
    qgap_kernel<T><<<dl_blocks(y.numel(), 128), 128, 0, stream_of(ctx)>>>(y.numel(), r, x.data<T>(), y.data<T>());
    DL_CUDA_LAUNCH_CHECK("qgap_kernel");
  });
}

}  // namespace cuda
}  // namespace driftlab
