// The device counterpart of ActivationLayer: the CPU's formulas, elementwise on the device.
#include "engine/cuda/device_layer.h"
#include "engine/layers/activation_layer.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

using cuda::CudaContext;
using cuda::DeviceTensor;

namespace {

class DeviceActivation : public DeviceLayer {
 public:
  DeviceActivation(ActivationLayer& l) : p_(l.op_params()), shape_(l.output_shape()) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input(act_name(p_.kind), *x, shape_);
    DeviceValue y = make_value(run.ctx, x->shape(), x->dtype());
    cuda::activation_forward_cuda(run.ctx, p_, *x, *y);
    x_ = run.record ? x : nullptr;
    y_ = run.record ? y : nullptr;
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    check(x_ != nullptr, act_name(p_.kind), ": backward without a recorded forward");
    DeviceValue dx = make_value(run.ctx, x_->shape(), x_->dtype());
    cuda::activation_backward_cuda(run.ctx, p_, *x_, *y_, *dy, *dx);
    x_.reset(), y_.reset();
    return dx;
  }

 private:
  ActivationParams p_;
  Shape shape_;
  DeviceValue x_, y_;
};

}  // namespace

std::unique_ptr<DeviceLayer> make_device_activation(ActivationLayer& l) {
  return std::make_unique<DeviceActivation>(l);
}

}  // namespace driftlab
