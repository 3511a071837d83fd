// The device counterpart of DropoutLayer: the mask drawn on the host from the run's Rng.
#include "engine/cuda/device_layer.h"
#include "engine/layers/dropout_layer.h"
#include "engine/random.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

using cuda::CudaContext;
using cuda::DeviceTensor;

namespace {

// Inverted dropout. The mask comes from the run's Rng on the host, draw for draw as
// DropoutLayer takes it, so the CPU and the device drop the same units.
class DeviceDropout : public DeviceLayer {
 public:
  explicit DeviceDropout(DropoutLayer& l) : rate_(l.rate()), shape_(l.output_shape()) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("dropout", *x, shape_);
    scale_.reset();  // inference semantics (or rate 0): the identity, forward and backward
    if (run.semantics != Semantics::train || rate_ == 0.0) return x;
    check(run.rng != nullptr, "dropout: a forward under train semantics needs a random stream (DeviceRunContext.rng)");
    Tensor scale(x->shape(), x->dtype());
    dispatch_dtype(x->dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T keep_scale = static_cast<T>(1.0 / (1.0 - rate_));
      T* s = scale.data<T>();
      for (int64_t i = 0; i < scale.numel(); ++i)
        s[i] = run.rng->uniform<T>(T(0), T(1)) >= static_cast<T>(rate_) ? keep_scale : T(0);
    });
    scale_ = std::make_shared<DeviceTensor>(cuda::to_device(run.ctx, scale));
    DeviceValue y = make_value(run.ctx, x->shape(), x->dtype());
    cuda::multiply_cuda(run.ctx, *x, *scale_, *y);
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    if (!scale_) return dy;  // the forward was the identity
    DeviceValue dx = make_value(run.ctx, dy->shape(), dy->dtype());
    cuda::multiply_cuda(run.ctx, *dy, *scale_, *dx);
    scale_.reset();
    return dx;
  }

 private:
  double rate_;
  Shape shape_;
  DeviceValue scale_;
};

}  // namespace

std::unique_ptr<DeviceLayer> make_device_dropout(DropoutLayer& l) { return std::make_unique<DeviceDropout>(l); }

}  // namespace driftlab
