// qrelu_own (kernels/cuda/ops.h): the quantized ReLU y = max(x, zp) of int8|uint8 x (any shape; y
// x's shape and dtype), one element per thread, every output written (=).
#include "kernels/cuda/quant_common.cuh"

namespace driftlab {
namespace cuda {
namespace {

using quant_common::check_dev;
using quant_common::dispatch_q_xy;
using quant_common::stream_of;

template <typename T>
__global__ void qrelu_kernel(long long numel, T z, const T* __restrict__ x, T* __restrict__ y) {
  DL_GRID_STRIDE(i, numel) { y[i] = x[i] < z ? z : x[i]; }
}

}  // namespace

void qrelu_own(CudaContext& ctx, DType dtype, int32_t zero_point, const DeviceTensor& x, DeviceTensor& y) {
  check_dev("qrelu_own", "input", x, x.shape(), dtype);
  check_dev("qrelu_own", "output", y, x.shape(), dtype);
  if (x.numel() == 0) return;
  dispatch_q_xy(dtype, dtype, "qrelu_own", [&](auto tag, auto) {
    using T = decltype(tag);
    qrelu_kernel<T><<<dl_blocks(x.numel(), 256), 256, 0, stream_of(ctx)>>>(x.numel(), static_cast<T>(zero_point),
                                                                          x.data<T>(), y.data<T>());
    DL_CUDA_LAUNCH_CHECK("qrelu_kernel");
  });
}

}  // namespace cuda
}  // namespace driftlab
