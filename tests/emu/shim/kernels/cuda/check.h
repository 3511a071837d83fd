// CUDA emulation shim (tests/emu), found before kernels/cuda/check.h: launch checks are no-ops
// on the host, the few runtime calls the emulated kernel files make are host memcpy/memset, the
// device qualifiers vanish, and the execution model comes from emu_launch.h.
#pragma once
#include <cstddef>
#include <cstring>

#include "core/error.h"
#include "kernels/cuda/emu_launch.h"

// Device code as host code: the qualifiers vanish and `__shared__` becomes `static` (one copy
// per kernel; blocks run one after another).
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

typedef void* cudaStream_t;
enum { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
inline int cudaMemcpyAsync(void* d, const void* s, std::size_t n, int, cudaStream_t) {
  std::memcpy(d, s, n);
  return 0;
}
inline int cudaMemsetAsync(void* d, int v, std::size_t n, cudaStream_t) {
  std::memset(d, v, n);
  return 0;
}
#define DL_CUDA_CHECK(call) (void)(call)
#define DL_CUDA_LAUNCH_CHECK(kernel_name) \
  do {                                    \
  } while (0)
inline unsigned dl_blocks(long long n, int threads) {
  const long long b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 2147483647LL ? b : 2147483647LL);
}
