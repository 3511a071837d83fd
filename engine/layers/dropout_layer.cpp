#include "engine/layers/dropout_layer.h"

#include <sstream>

#include "engine/random.h"

namespace driftlab {

DropoutLayer::DropoutLayer(double rate, const Shape& in) : rate_(rate), shape_(in) {
  check(rate >= 0.0 && rate < 1.0, "dropout: rate=", rate, " must be in [0,1)");
}

std::string DropoutLayer::describe() const {
  std::ostringstream os;
  os << "dropout rate " << rate_;
  return os.str();
}

Tensor DropoutLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input("dropout", x, shape_);
  scale_ = Tensor();  // inference semantics (or rate 0): the identity, forward and backward
  recorded_ = ctx.record;
  if (ctx.semantics != Semantics::train || rate_ == 0.0) return x;
  check(ctx.rng != nullptr, "dropout: a forward under train semantics needs a random stream (RunContext.rng)");
  scale_ = Tensor(x.shape(), x.dtype());
  Tensor y(x.shape(), x.dtype());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T keep_scale = static_cast<T>(1.0 / (1.0 - rate_));
    T* s = scale_.data<T>();
    const T* xd = x.data<T>();
    T* yd = y.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      bool keep = ctx.rng->uniform<T>(T(0), T(1)) >= static_cast<T>(rate_);
      s[i] = keep ? keep_scale : T(0);
      yd[i] = xd[i] * s[i];
    }
  });
  return y;
}

Tensor DropoutLayer::backward(RunContext&, const Tensor& dy) {
  check(recorded_, "dropout: backward without a recorded forward");
  recorded_ = false;  // the backward takes the recording (engine/layers/layer.h)
  if (!scale_.defined()) return dy;  // the forward was the identity
  const Tensor scale = std::move(scale_);
  scale_ = Tensor();
  Tensor dx(dy.shape(), dy.dtype());
  dispatch_dtype(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* s = scale.data<T>();
    const T* g = dy.data<T>();
    T* d = dx.data<T>();
    for (int64_t i = 0; i < dy.numel(); ++i) d[i] = g[i] * s[i];
  });
  return dx;
}

}  // namespace driftlab
