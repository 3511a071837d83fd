// The device counterpart of Conv2dLayer: the op params it resolved, cuda::conv2d_*_cuda.
#include "engine/cuda/device_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

using cuda::CudaContext;
using cuda::DeviceTensor;

namespace {

class DeviceConv2d : public DeviceLayer {
 public:
  DeviceConv2d(Conv2dLayer& l, DeviceParam* w, DeviceParam* b) : p_(l.op_params()), w_(w), b_(b) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("conv2d", *x, {p_.c, p_.h, p_.w});
    p_.n = x->dim(0);
    DeviceValue y = make_value(run.ctx, p_.y_shape(), x->dtype());
    cuda::conv2d_forward_cuda(run.ctx, p_, *x, w_->value, b_ ? &b_->value : nullptr, *y);
    x_ = run.record ? x : nullptr;
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    check(x_ != nullptr, "conv2d: backward without a recorded forward");
    p_.n = x_->dim(0);
    DeviceValue dx;
    if (run.need_dx) {
      dx = make_value(run.ctx, p_.x_shape(), dy->dtype());
      cuda::conv2d_backward_data_cuda(run.ctx, p_, *dy, w_->value, *dx);
    }
    if (run.param_grads) cuda::conv2d_backward_weight_cuda(run.ctx, p_, *x_, *dy, w_->grad, b_ ? &b_->grad : nullptr);
    x_.reset();
    return dx;
  }

 private:
  Conv2dParams p_;
  DeviceParam *w_, *b_;
  DeviceValue x_;
};

}  // namespace

std::unique_ptr<DeviceLayer> make_device_conv2d(Conv2dLayer& l, DeviceParam* w, DeviceParam* b) {
  return std::make_unique<DeviceConv2d>(l, w, b);
}

}  // namespace driftlab
