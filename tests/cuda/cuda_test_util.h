// Helpers shared by the CUDA tests (tests/cuda/*): skip without a device, one context per
// test, and upload/download around the CPU reference kernels. Always compiled; on a machine
// without a usable device every test skips with "no CUDA device: <reason>".
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/tensor.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/runtime.h"
#include "tests/test_util.h"

namespace driftlab {

// Skips the calling test unless a CUDA device is usable (the reason comes from the runtime:
// "cudaGetDeviceCount: ..." or "driftlab was built without CUDA ...").
#define REQUIRE_CUDA_DEVICE()                                                     \
  do {                                                                            \
    std::string dl_why_;                                                          \
    if (::driftlab::cuda::device_count(&dl_why_) == 0)                            \
      GTEST_SKIP() << "no CUDA device: " << dl_why_;                              \
  } while (0)

// Exec params with every op family on one backend (own kernels or cuBLAS/cuDNN); TF32 off, so
// that comparisons are with float32 products.
inline cuda::CudaExecParams one_backend(cuda::CudaBackend b, bool deterministic = false) {
  cuda::CudaExecParams e;
  e.gemm_backend = e.conv_backend = e.pool_backend = e.bn_backend = e.softmax_backend = e.rnn_backend = b;
  e.deterministic = deterministic;
  return e;
}
inline cuda::CudaExecParams one_backend(bool vendor, bool deterministic = false) {
  return one_backend(vendor ? cuda::CudaBackend::vendor : cuda::CudaBackend::own, deterministic);
}

// Round trip through the device: the result of a device op, back on the host.
inline Tensor host_of(cuda::CudaContext& ctx, const cuda::DeviceTensor& d) { return cuda::to_host(ctx, d); }

}  // namespace driftlab

namespace driftlab {

// |t| as float64 (for error bounds: a kernel run on |inputs| gives sum |a||b| per element).
inline Tensor abs64(const Tensor& t) {
  Tensor r(t.shape(), DType::f64);
  double* d = r.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = t.at(i) < 0 ? -t.at(i) : t.at(i);
  return r;
}

// gamma_n = n*u/(1-n*u), u the unit roundoff of dtype: |computed - exact| <= gamma_n * sum|terms|
// for a sum of n products in ANY order, with or without FMA (Higham, Accuracy and Stability,
// 3.1). Used as the tolerance of GPU sums against a float64 reference: rigorous, so a pass is
// not luck, and an indexing bug (errors of the size of the values) still fails by far.
inline double gamma_n(int64_t n, DType dtype) {
  const double u = dtype == DType::f32 ? 0x1.0p-24 : 0x1.0p-53;
  return static_cast<double>(n) * u / (1.0 - static_cast<double>(n) * u);
}

inline double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, t.at(i) < 0 ? -t.at(i) : t.at(i));
  return m;
}

}  // namespace driftlab
