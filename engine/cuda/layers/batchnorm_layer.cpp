// The device counterpart of BatchNormLayer: train and inference semantics, forward and backward.
#include "engine/cuda/device_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

using cuda::CudaContext;
using cuda::DeviceTensor;

namespace {

class DeviceBatchNorm : public DeviceLayer {
 public:
  DeviceBatchNorm(BatchNormLayer& l, DeviceParam* gamma, DeviceParam* beta, std::vector<DeviceParam*> state)
      : shape_(l.output_shape()), p_(l.op_params()), gamma_(gamma), beta_(beta), state_(std::move(state)) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("batchnorm", *x, shape_);
    p_.n = x->dim(0);
    DeviceValue y = make_value(run.ctx, x->shape(), x->dtype());
    x_ = run.record ? x : nullptr;
    recorded_ = run.semantics;
    if (run.semantics == Semantics::inference) {
      cuda::batchnorm_forward_infer_cuda(run.ctx, p_, *x, gamma_->value, beta_->value, state_[0]->value,
                                         state_[1]->value, *y);
      return y;
    }
    mean_ = DeviceTensor(run.ctx, {p_.c}, x->dtype());
    var_ = DeviceTensor(run.ctx, {p_.c}, x->dtype());
    invstd_ = DeviceTensor(run.ctx, {p_.c}, x->dtype());
    cuda::batchnorm_forward_train_cuda(run.ctx, p_, *x, gamma_->value, beta_->value, *y, mean_, var_, invstd_);
    DeviceTensor unused;  // the zero-debias tensors when zero_debias is off (never touched)
    auto st = [&](std::size_t i) -> DeviceTensor& { return state_[i] ? state_[i]->value : unused; };
    cuda::batchnorm_update_running_cuda(run.ctx, p_, mean_, var_, st(0), st(1), st(2), st(3), st(4));
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    check(x_ != nullptr, "batchnorm: backward without a recorded forward");
    DeviceValue dx = make_value(run.ctx, x_->shape(), x_->dtype());
    if (recorded_ == Semantics::inference)
      cuda::batchnorm_backward_infer_cuda(run.ctx, p_, *x_, *dy, gamma_->value, state_[0]->value, state_[1]->value,
                                          *dx, gamma_->grad, beta_->grad);
    else
      cuda::batchnorm_backward_cuda(run.ctx, p_, *x_, *dy, gamma_->value, mean_, invstd_, *dx, gamma_->grad,
                                    beta_->grad);
    x_.reset();
    return dx;
  }

 private:
  Shape shape_;
  BatchNormParams p_;
  DeviceParam *gamma_, *beta_;
  std::vector<DeviceParam*> state_;
  DeviceValue x_;
  DeviceTensor mean_, var_, invstd_;
  Semantics recorded_ = Semantics::train;  // the semantics of the recorded forward
};

}  // namespace

std::unique_ptr<DeviceLayer> make_device_batchnorm(BatchNormLayer& l, DeviceParam* gamma, DeviceParam* beta,
                                                   std::vector<DeviceParam*> state) {
  return std::make_unique<DeviceBatchNorm>(l, gamma, beta, std::move(state));
}

}  // namespace driftlab
