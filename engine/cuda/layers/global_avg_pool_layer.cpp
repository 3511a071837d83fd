// The device counterpart of GlobalAvgPoolLayer: the spatial mean of each map.
#include "engine/cuda/device_layer.h"
#include "engine/layers/global_avg_pool_layer.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

using cuda::CudaContext;
using cuda::DeviceTensor;

namespace {

class DeviceGlobalAvgPool : public DeviceLayer {
 public:
  explicit DeviceGlobalAvgPool(GlobalAvgPoolLayer& l) : in_(l.input_shape()) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("global_avg_pool", *x, in_);
    n_ = x->dim(0);
    DeviceValue y = make_value(run.ctx, {n_, in_[0]}, x->dtype());
    cuda::spatial_mean_forward_cuda(run.ctx, *x, *y);
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    cuda::check_device_shape("global_avg_pool backward", "dy", *dy, {n_, in_[0]});
    DeviceValue dx = make_value(run.ctx, {n_, in_[0], in_[1], in_[2]}, dy->dtype());
    cuda::spatial_mean_backward_cuda(run.ctx, *dy, *dx);
    return dx;
  }

 private:
  Shape in_;
  int64_t n_ = 0;
};

}  // namespace

std::unique_ptr<DeviceLayer> make_device_global_avg_pool(GlobalAvgPoolLayer& l) {
  return std::make_unique<DeviceGlobalAvgPool>(l);
}

}  // namespace driftlab
