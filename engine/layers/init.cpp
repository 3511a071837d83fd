#include "engine/layers/init.h"

#include <cmath>

#include "engine/random.h"

namespace driftlab {
namespace {

// Generic axis permutation of a contiguous tensor: out[idx permuted] = in[idx].
Tensor permute(const Tensor& t, const std::vector<int>& perm) {
  const Shape& s = t.shape();
  Shape os(s.size());
  for (std::size_t i = 0; i < perm.size(); ++i) os[i] = s[perm[i]];
  Tensor out(os, t.dtype());
  std::vector<int64_t> in_stride(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) in_stride[i] = in_stride[i + 1] * s[i + 1];
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = t.data<T>();
    T* dst = out.data<T>();
    std::vector<int64_t> idx(os.size(), 0);
    for (int64_t o = 0; o < out.numel(); ++o) {
      int64_t off = 0;
      for (std::size_t i = 0; i < os.size(); ++i) off += idx[i] * in_stride[perm[i]];
      dst[o] = src[off];
      for (int i = static_cast<int>(os.size()) - 1; i >= 0; --i) {
        if (++idx[i] < os[i]) break;
        idx[i] = 0;
      }
    }
  });
  return out;
}

template <typename T>
void fill_uniform(Tensor& t, double bound, Rng& rng) {
  T* d = t.data<T>();
  const T lo = static_cast<T>(-bound), hi = static_cast<T>(bound);
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = rng.uniform<T>(lo, hi);
}

}  // namespace

Tensor to_framework_layout(const Tensor& w, WeightLayout layout) {
  if (layout == WeightLayout::oihw) return w.clone();
  if (w.rank() == 4) return permute(w, {2, 3, 1, 0});  // OIHW -> HWIO
  check(w.rank() == 2, "weight layout: expected a 2-D or 4-D weight, got ", shape_str(w.shape()));
  return permute(w, {1, 0});
}

Tensor from_framework_layout(const Tensor& w, WeightLayout layout) {
  if (layout == WeightLayout::oihw) return w.clone();
  if (w.rank() == 4) return permute(w, {3, 2, 0, 1});  // HWIO -> OIHW
  check(w.rank() == 2, "weight layout: expected a 2-D or 4-D weight, got ", shape_str(w.shape()));
  return permute(w, {1, 0});
}

void init_weight(Tensor& w, int64_t fan_in, int64_t fan_out, const Policy& policy, Rng& rng) {
  double bound = policy.init_weight == WeightInit::glorot_uniform
                     ? std::sqrt(6.0 / static_cast<double>(fan_in + fan_out))
                     : 1.0 / std::sqrt(static_cast<double>(fan_in));  // sqrt(3)*sqrt(2/(1+5))/sqrt(fan_in)
  Tensor drawn = to_framework_layout(w, policy.weight_layout);  // the shape the framework fills
  dispatch_dtype(w.dtype(), [&](auto tag) { fill_uniform<decltype(tag)>(drawn, bound, rng); });
  w = from_framework_layout(drawn, policy.weight_layout);
}

void init_bias(Tensor& b, int64_t fan_in, const Policy& policy, Rng& rng) {
  if (policy.init_bias == BiasInit::zeros) {
    b.zero();
    return;
  }
  double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  dispatch_dtype(b.dtype(), [&](auto tag) { fill_uniform<decltype(tag)>(b, bound, rng); });
}

}  // namespace driftlab
