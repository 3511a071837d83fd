// CUDA emulation shim (tests/emu), found before kernels/cuda/common.cuh: device qualifiers
// vanish, a grid-stride loop is a plain loop over every index, device math is <cmath>'s. The
// real common.cuh is included for its device helpers (ordered_sum_dev), which are plain code.
#pragma once
#include <cmath>

#include "kernels/cuda/check.h"

using std::exp;
using std::isfinite;
using std::tanh;
#define __global__
#define __device__
#define __shared__
#include "../../../../../kernels/cuda/common.cuh"
#undef DL_GRID_STRIDE
#define DL_GRID_STRIDE(i, total) for (long long i = 0; i < (total); ++i)

// Only sum_squares_kernel uses threadIdx/__syncthreads; it compiles against these and is never
// called: launches_to_calls.cmake sends its launch to sum_squares_host, the same block run
// phase by phase (256 strided partial sums in double, then the halving tree).
struct DlThreadIdx {
  unsigned x = 0;
};
static DlThreadIdx threadIdx;
inline void __syncthreads() {}
template <typename T>
void sum_squares_host(long long n, const T* x, double* out) {
  double part[256];
  for (int t = 0; t < 256; ++t) {
    double acc = 0;
    for (long long i = t; i < n; i += 256) {
      const double v = static_cast<double>(x[i]);
      acc += v * v;
    }
    part[t] = acc;
  }
  for (int h = 128; h > 0; h /= 2)
    for (int t = 0; t < h; ++t) part[t] += part[t + h];
  out[0] = part[0];
}
