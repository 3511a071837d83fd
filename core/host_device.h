// DL_HOST_DEVICE marks a small function that both the CPU code and the CUDA kernels call, so
// that the two share one definition of a formula (nvcc compiles it for both; g++ sees a plain
// inline function).
#pragma once
#if defined(__CUDACC__)
#define DL_HOST_DEVICE __host__ __device__
#else
#define DL_HOST_DEVICE
#endif
