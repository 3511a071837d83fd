// Small helpers shared by the own CUDA kernels (device side).
#pragma once
#include "kernels/cuda/check.h"

// for (i in [0,total)) spread over the grid, whatever the grid size.
#define DL_GRID_STRIDE(i, total)                                                               \
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < (total); \
       i += static_cast<long long>(gridDim.x) * blockDim.x)

namespace driftlab {
namespace cuda {

// Sum of terms[0..n) in the reference's SumOrder (0 ascending, 1 descending, 2 pairwise halves),
// the device twin of ordered_sum in core/ops/common.h.
template <typename T>
__device__ T ordered_sum_dev(const T* terms, long long n, int order) {
  if (order == 2) {
    // Recursive halves without recursion: an explicit stack of (start, len, partial) frames.
    // Depth is log2(n) + 1 <= 64.
    struct Frame { long long start, len; int state; T left; };
    Frame st[64];
    int top = 0;
    st[0] = {0, n, 0, T(0)};
    T ret = T(0);
    while (top >= 0) {
      Frame& f = st[top];
      if (f.len <= 2) {
        ret = f.len == 0 ? T(0) : (f.len == 1 ? terms[f.start] : terms[f.start] + terms[f.start + 1]);
        --top;
        continue;
      }
      const long long h = f.len / 2;
      if (f.state == 0) {
        f.state = 1;
        st[top + 1] = {f.start, h, 0, T(0)};
        ++top;
      } else if (f.state == 1) {
        f.left = ret;
        f.state = 2;
        st[top + 1] = {f.start + h, f.len - h, 0, T(0)};
        ++top;
      } else {
        ret = f.left + ret;
        --top;
      }
    }
    return ret;
  }
  T acc = T(0);
  if (order == 0)
    for (long long i = 0; i < n; ++i) acc += terms[i];
  else
    for (long long i = n - 1; i >= 0; --i) acc += terms[i];
  return acc;
}

}  // namespace cuda
}  // namespace driftlab
