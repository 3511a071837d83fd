#include "engine/layers/global_avg_pool_layer.h"

namespace driftlab {

GlobalAvgPoolLayer::GlobalAvgPoolLayer(const Shape& in) : in_(in) {
  check(in.size() == 3, "global_avg_pool: input must be (C,H,W), got ", shape_str(in));
}

Tensor GlobalAvgPoolLayer::forward(RunContext&, const Tensor& x) {
  check_input("global_avg_pool", x, in_);
  n_ = x.dim(0);
  const int64_t c = in_[0], s = in_[1] * in_[2];
  Tensor y = Tensor::empty({n_, c}, x.dtype());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    for (int64_t i = 0; i < n_ * c; ++i) {
      T acc = 0;
      for (int64_t k = 0; k < s; ++k) acc += xd[i * s + k];
      yd[i] = acc / static_cast<T>(s);
    }
  });
  return y;
}

Tensor GlobalAvgPoolLayer::backward(RunContext&, const Tensor& dy) {
  const int64_t c = in_[0], s = in_[1] * in_[2];
  check_shape("global_avg_pool backward", "dy", dy, {n_, c});
  Shape full{n_};
  full.insert(full.end(), in_.begin(), in_.end());
  Tensor dx = Tensor::empty(full, dy.dtype());
  dispatch_dtype(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g = dy.data<T>();
    T* d = dx.data<T>();
    for (int64_t i = 0; i < n_ * c; ++i) {
      const T v = g[i] / static_cast<T>(s);
      for (int64_t k = 0; k < s; ++k) d[i * s + k] = v;
    }
  });
  return dx;
}

}  // namespace driftlab
