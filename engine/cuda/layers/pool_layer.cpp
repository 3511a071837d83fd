// The device counterpart of Pool2dLayer (max and average): cuda::{max,avg}pool2d_*_cuda.
#include "engine/cuda/device_layer.h"
#include "engine/layers/pool_layer.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

using cuda::CudaContext;
using cuda::DeviceTensor;

namespace {

class DevicePool2d : public DeviceLayer {
 public:
  explicit DevicePool2d(Pool2dLayer& l) : max_(l.pool_kind() == PoolKind::max), p_(l.op_params()) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input(max_ ? "maxpool2d" : "avgpool2d", *x, {p_.c, p_.h, p_.w});
    p_.n = x->dim(0);
    DeviceValue y = make_value(run.ctx, p_.y_shape(), x->dtype());
    if (max_)
      cuda::maxpool2d_forward_cuda(run.ctx, p_, *x, *y);
    else
      cuda::avgpool2d_forward_cuda(run.ctx, p_, *x, *y);
    x_ = run.record ? x : nullptr;
    y_ = run.record ? y : nullptr;
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    check(x_ != nullptr, max_ ? "maxpool2d" : "avgpool2d", ": backward without a recorded forward");
    p_.n = x_->dim(0);
    DeviceValue dx = make_value(run.ctx, p_.x_shape(), dy->dtype());
    if (max_)
      cuda::maxpool2d_backward_cuda(run.ctx, p_, *x_, *y_, *dy, *dx);
    else
      cuda::avgpool2d_backward_cuda(run.ctx, p_, *x_, *y_, *dy, *dx);
    x_.reset(), y_.reset();
    return dx;
  }

 private:
  bool max_;
  Pool2dParams p_;
  DeviceValue x_, y_;
};

}  // namespace

std::unique_ptr<DeviceLayer> make_device_pool2d(Pool2dLayer& l) { return std::make_unique<DevicePool2d>(l); }

}  // namespace driftlab
