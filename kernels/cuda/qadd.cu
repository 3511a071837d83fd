// qadd_own (kernels/cuda/ops.h): a, b, y int8|uint8 of one shape, one element per thread, every
// output written (=). Each element is qadd_one() of core/ops/qadd.h (every QAddRule), as in the
// reference (kernels/cpu/ref/qadd_ref.cpp): its bytes.
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

// The quantized add, one element per thread: qadd_one of core/ops/qadd.h, as the reference.
template <typename T>
__global__ void qadd_kernel(QAddParams p, long long numel, long long body, const T* __restrict__ a,
                            const T* __restrict__ b, T* __restrict__ y) {
  const int32_t tmin = type_lowest<T>(), tmax = tmin == 0 ? 255 : 127;
  DL_GRID_STRIDE(i, numel) {
    y[i] = static_cast<T>(qadd_one(p, a[i], b[i], qadd_memory_pos(p, i), body, tmin, tmax));
  }
}

}  // namespace

void qadd_own(CudaContext& ctx, const QAddParams& p0, const DeviceTensor& a, const DeviceTensor& b, DeviceTensor& y) {
  QAddParams p = p0;
  p.resolve();
  check_dev("qadd_own", "a", a, a.shape(), p.dtype);
  check_dev("qadd_own", "b", b, a.shape(), p.dtype);
  check_dev("qadd_own", "output", y, a.shape(), p.dtype);
  const long long numel = a.numel();
  if (p.n > 0) check(p.n * p.c * p.h * p.w == numel, "qadd_own: layout (", p.n, ",", p.c, ",", p.h, ",", p.w, ") for ",
                     numel, " elements");
  if (numel == 0) return;
  const long long body = numel - numel % 64;  // the reference's vectorised body (float_fma_tail64)
  dispatch_q_xy(p.dtype, p.dtype, "qadd_own", [&](auto tag, auto) {
    using T = decltype(tag);
    qadd_kernel<T><<<dl_blocks(numel, 256), 256, 0, stream_of(ctx)>>>(p, numel, body, a.data<T>(), b.data<T>(),
                                                                      y.data<T>());
    DL_CUDA_LAUNCH_CHECK("qadd_kernel");
  });
}

}  // namespace cuda
}  // namespace driftlab
