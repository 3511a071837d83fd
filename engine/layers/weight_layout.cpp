#include "engine/layers/weight_layout.h"

#include "core/error.h"

namespace driftlab {

// w[k,c,r,s] <- w[k,c,R-1-r,S-1-s]
Tensor rotate_180(const Tensor& w) {
  Tensor out(w.shape(), w.dtype());
  const int64_t kc = w.dim(0) * w.dim(1), r = w.dim(2), s = w.dim(3);
  dispatch_dtype(w.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* a = w.data<T>();
    T* b = out.data<T>();
    for (int64_t i = 0; i < kc; ++i)
      for (int64_t y = 0; y < r; ++y)
        for (int64_t x = 0; x < s; ++x) b[(i * r + y) * s + x] = a[(i * r + (r - 1 - y)) * s + (s - 1 - x)];
  });
  return out;
}

// Feature index of (c,h,w) under a flatten order.
int64_t flatten_feature(FlattenOrder o, const Shape& chw, int64_t c, int64_t h, int64_t w) {
  return o == FlattenOrder::chw ? (c * chw[1] + h) * chw[2] + w : (h * chw[2] + w) * chw[0] + c;
}

// Dense weight (out, in) whose columns follow `from` order, re-indexed to `to` order.
Tensor permute_columns(const Tensor& wt, const Shape& chw, FlattenOrder from, FlattenOrder to) {
  Tensor out(wt.shape(), wt.dtype());
  const int64_t rows = wt.dim(0), cols = wt.dim(1);
  dispatch_dtype(wt.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* a = wt.data<T>();
    T* b = out.data<T>();
    for (int64_t c = 0; c < chw[0]; ++c)
      for (int64_t h = 0; h < chw[1]; ++h)
        for (int64_t w = 0; w < chw[2]; ++w) {
          int64_t fi = flatten_feature(from, chw, c, h, w), ti = flatten_feature(to, chw, c, h, w);
          for (int64_t o = 0; o < rows; ++o) b[o * cols + ti] = a[o * cols + fi];
        }
  });
  return out;
}

Tensor transpose2d(const Tensor& t) {
  check(t.rank() == 2, "transpose2d: a tensor of rank ", t.rank());
  const int64_t r = t.dim(0), c = t.dim(1);
  Tensor out({c, r}, t.dtype());
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* a = t.data<T>();
    T* b = out.data<T>();
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) b[j * r + i] = a[i * c + j];
  });
  return out;
}

Tensor permute_blocks(const Tensor& t, const std::vector<int64_t>& perm, bool inverse) {
  const int64_t g = static_cast<int64_t>(perm.size());
  check(g >= 1 && t.numel() % g == 0, "permute_blocks: ", t.numel(), " elements in ", g, " blocks");
  const int64_t block = t.numel() / g;  // elements per block
  Tensor out(t.shape(), t.dtype());
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* a = t.data<T>();
    T* o = out.data<T>();
    for (int64_t b = 0; b < g; ++b) {
      const int64_t src = inverse ? b : perm[b], dst = inverse ? perm[b] : b;
      for (int64_t i = 0; i < block; ++i) o[dst * block + i] = a[src * block + i];
    }
  });
  return out;
}

}  // namespace driftlab
