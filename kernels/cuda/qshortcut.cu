// qshortcut_option_a_own (kernels/cuda/ops.h): ResNet's option-A shortcut on int8|uint8 tensors,
// x (N,C,H,W) -> s (N,OC,OH,OW): x subsampled by `stride`, zero-point channels before and after,
// one output per thread, every output written (=).
#include "kernels/cuda/quant_common.cuh"

namespace driftlab {
namespace cuda {
namespace {

using quant_common::check_dev;
using quant_common::dispatch_q_xy;
using quant_common::stream_of;

// The option-A shortcut: s[n][pad + c][oh][ow] = x[n][c][oh*stride][ow*stride] where that lies in
// x, the zero point everywhere else (the channels before and after x's, rows and columns past it).
struct QShortcutDims {
  long long n, c, h, w, oc, oh, ow, stride, pad_before;
};
template <typename T>
__global__ void qshortcut_kernel(QShortcutDims d, T z, const T* __restrict__ x, T* __restrict__ s) {
  DL_GRID_STRIDE(i, d.n * d.oc * d.oh * d.ow) {
    const long long ow = i % d.ow, oh = (i / d.ow) % d.oh, oc = (i / (d.ow * d.oh)) % d.oc, n = i / (d.ow * d.oh * d.oc);
    const long long c = oc - d.pad_before, ih = oh * d.stride, iw = ow * d.stride;
    s[i] = (c >= 0 && c < d.c && ih < d.h && iw < d.w) ? x[((n * d.c + c) * d.h + ih) * d.w + iw] : z;
  }
}

}  // namespace

void qshortcut_option_a_own(CudaContext& ctx, DType dtype, int32_t zero_point, int64_t stride, int64_t pad_before,
                            const DeviceTensor& x, DeviceTensor& s) {
  check(x.shape().size() == 4 && s.shape().size() == 4 && x.dim(0) == s.dim(0) && stride >= 1 && pad_before >= 0 &&
            pad_before + x.dim(1) <= s.dim(1),
        "qshortcut_option_a_own: ", shape_str(x.shape()), " -> ", shape_str(s.shape()), " with stride ", stride,
        ", ", pad_before, " channels before: not an option-A shortcut");
  check_dev("qshortcut_option_a_own", "input", x, x.shape(), dtype);
  check_dev("qshortcut_option_a_own", "output", s, s.shape(), dtype);
  if (s.numel() == 0) return;
  const QShortcutDims d{x.dim(0), x.dim(1), x.dim(2), x.dim(3), s.dim(1), s.dim(2), s.dim(3), stride, pad_before};
  dispatch_q_xy(dtype, dtype, "qshortcut_option_a_own", [&](auto tag, auto) {
    using T = decltype(tag);
    qshortcut_kernel<T><<<dl_blocks(s.numel(), 256), 256, 0, stream_of(ctx)>>>(d, static_cast<T>(zero_point),
                                                                              x.data<T>(), s.data<T>());
    DL_CUDA_LAUNCH_CHECK("qshortcut_kernel");
  });
}

}  // namespace cuda
}  // namespace driftlab
