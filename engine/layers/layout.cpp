#include "engine/layers/layout.h"

#include "core/parallel.h"

namespace driftlab {

namespace {

// plain (N,C,S) <-> blocked (N,C/B,S,B); one (image, channel block) per task: each element is
// written once, so the result does not depend on the thread count. Plane `base` starts at the
// same offset in both layouts: channel l of it is the plain row base + l*s, lane l of the blocked.
template <typename T>
void convert(const T* src, T* dst, int64_t n, int64_t c, int64_t s, int b, bool to_blocked) {
  const int64_t cb = c / b;
#pragma omp parallel for collapse(2) schedule(static) if (n * c * s > kParallelMinElements)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < cb; ++j) {
      const int64_t base = (i * cb + j) * s * b;
      for (int64_t l = 0; l < b; ++l)
        for (int64_t k = 0; k < s; ++k) {
          const int64_t plain = base + l * s + k, blocked = base + k * b + l;
          dst[to_blocked ? blocked : plain] = src[to_blocked ? plain : blocked];
        }
    }
}

}  // namespace

Tensor to_block(const Tensor& x, int b) {
  const int from = x.channel_block();
  if (from == b) return x;
  if (from != 0 && b != 0) return to_block(to_block(x, 0), b);
  const int blk = from != 0 ? from : b;
  if (x.rank() != 4 || x.dim(1) % blk != 0)
    fail("layout: channel block ", blk, " for shape ", shape_str(x.shape()), ": needs (N,C,H,W) with C a multiple of it");
  Tensor y = Tensor::empty(x.shape(), x.dtype()).with_block(b);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    convert(x.blocked_data<T>(), y.blocked_data<T>(), x.dim(0), x.dim(1), x.dim(2) * x.dim(3), blk, b != 0);
  });
  return y;
}

}  // namespace driftlab
