// Checked CUDA, cuBLAS and cuDNN calls and kernel launches, for files compiled with the CUDA
// toolkit's headers (kernels/cuda/*.cu, kernels/cuda/cudnn/*.cpp, kernels/cuda/cublas/*.cpp).
// A failure throws driftlab::Error naming the call as written, the file, the line and the
// library's error string:
//   "cuda: cudaMemcpyAsync(...) failed at kernels/cuda/runtime.cu:120: invalid argument"
// Launches: DL_CUDA_LAUNCH_CHECK("gemm_tiled_kernel") after <<<...>>> reads cudaGetLastError,
// which reports bad launch configurations at once (asynchronous faults surface at the next
// checked synchronising call, as in every CUDA program).
#pragma once
#include <cuda_runtime.h>

#include "core/error.h"

namespace driftlab {
namespace cuda {

[[noreturn]] inline void throw_call_error(const char* lib, const char* call, const char* file, int line,
                                          const char* what) {
  fail(lib, ": ", call, " failed at ", file, ":", line, ": ", what);
}

}  // namespace cuda
}  // namespace driftlab

#define DL_CUDA_CHECK(call)                                                                            \
  do {                                                                                                 \
    cudaError_t dl_err_ = (call);                                                                      \
    if (dl_err_ != cudaSuccess) {                                                                      \
      cudaGetLastError(); /* clear a non-sticky error so the context stays usable */                   \
      ::driftlab::cuda::throw_call_error("cuda", #call, __FILE__, __LINE__, cudaGetErrorString(dl_err_)); \
    }                                                                                                  \
  } while (0)

#define DL_CUDA_LAUNCH_CHECK(kernel_name)                                                              \
  do {                                                                                                 \
    cudaError_t dl_err_ = cudaGetLastError();                                                          \
    if (dl_err_ != cudaSuccess)                                                                        \
      ::driftlab::cuda::throw_call_error("cuda", "launch of " kernel_name, __FILE__, __LINE__,         \
                                         cudaGetErrorString(dl_err_));                                 \
  } while (0)

// In files that include kernels/cuda/cublas/cublas_api.h (cuBLAS is opened on first use) /
// <cudnn.h> (the string functions come from them).
#define DL_CUBLAS_CHECK(call)                                                                          \
  do {                                                                                                 \
    cublasStatus_t dl_st_ = (call);                                                                    \
    if (dl_st_ != CUBLAS_STATUS_SUCCESS)                                                               \
      ::driftlab::cuda::throw_call_error("cublas", #call, __FILE__, __LINE__,                          \
                                         ::driftlab::cuda::cublas_api().status_string(dl_st_));        \
  } while (0)

#define DL_CUDNN_CHECK(call)                                                                           \
  do {                                                                                                 \
    cudnnStatus_t dl_st_ = (call);                                                                     \
    if (dl_st_ != CUDNN_STATUS_SUCCESS)                                                                \
      ::driftlab::cuda::throw_call_error("cudnn", #call, __FILE__, __LINE__, cudnnGetErrorString(dl_st_)); \
  } while (0)

// Grid size for n elements with `threads` per block (n > 0), capped at the y-less grid limit.
inline unsigned dl_blocks(long long n, int threads) {
  long long b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 2147483647LL ? b : 2147483647LL);
}
