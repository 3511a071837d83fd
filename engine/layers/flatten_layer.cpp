#include "engine/layers/flatten_layer.h"

namespace driftlab {
namespace {

// (N,C,H,W) <-> (N,H,W,C) element copy; to_hwc chooses the direction.
Tensor move_channels(const Tensor& x, int64_t c, int64_t h, int64_t w, bool to_hwc) {
  const int64_t n = x.dim(0);
  Tensor y(x.shape(), x.dtype());
  dispatch_any_dtype(x.dtype(), [&](auto tag) {  // int8 too: a quantized model flattens its integers
    using T = decltype(tag);
    const T* s = x.data<T>();
    T* d = y.data<T>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ci = 0; ci < c; ++ci)
        for (int64_t i = 0; i < h * w; ++i) {
          int64_t chw = (b * c + ci) * h * w + i, hwc = (b * h * w + i) * c + ci;
          if (to_hwc)
            d[hwc] = s[chw];
          else
            d[chw] = s[hwc];
        }
  });
  return y;
}

}  // namespace

FlattenLayer::FlattenLayer(const Shape& in, const Policy& policy) : in_(in), order_(policy.flatten_order) {}

std::string FlattenLayer::describe() const {
  return std::string("flatten ") + (order_ == FlattenOrder::chw ? "chw" : "hwc");
}

Tensor FlattenLayer::forward(RunContext&, const Tensor& x) {
  check_input("flatten", x, in_);
  const int64_t n = x.dim(0), f = shape_numel(in_);
  if (order_ == FlattenOrder::chw || in_.size() != 3) return x.reshape({n, f});
  return move_channels(x, in_[0], in_[1], in_[2], true).reshape({n, f});
}

Tensor FlattenLayer::to_chw_order(const Tensor& y) const {
  if (order_ == FlattenOrder::chw || in_.size() != 3) return y;
  return move_channels(y, in_[0], in_[1], in_[2], false).reshape(y.shape());
}

Tensor FlattenLayer::backward(RunContext&, const Tensor& dy) {
  const int64_t n = dy.dim(0);
  Shape full{n};
  full.insert(full.end(), in_.begin(), in_.end());
  if (order_ == FlattenOrder::chw || in_.size() != 3) return dy.reshape(full);
  return move_channels(dy.reshape(full), in_[0], in_[1], in_[2], false);
}

}  // namespace driftlab
