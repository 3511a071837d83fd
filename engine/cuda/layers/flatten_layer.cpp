// The device counterpart of FlattenLayer: a view (chw) or a channels-last copy (hwc).
#include "engine/cuda/device_layer.h"
#include "engine/layers/flatten_layer.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

using cuda::CudaContext;
using cuda::DeviceTensor;

namespace {

// chw: a view of NCHW; hwc: channels-last copy first, as FlattenLayer.
class DeviceFlatten : public DeviceLayer {
 public:
  explicit DeviceFlatten(FlattenLayer& l)
      : in_(l.input_shape()), hwc_(l.order() == FlattenOrder::hwc && l.input_shape().size() == 3) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("flatten", *x, in_);
    const int64_t n = x->dim(0), f = shape_numel(in_);
    if (!hwc_) return view_of(x, {n, f});
    DeviceValue y = make_value(run.ctx, {n, f}, x->dtype());
    cuda::permute_channels_cuda(run.ctx, *x, *y, in_[0], in_[1], in_[2], true);
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    Shape full{dy->dim(0)};
    full.insert(full.end(), in_.begin(), in_.end());
    if (!run.need_dx) return nullptr;
    if (!hwc_) return view_of(dy, full);
    DeviceValue dx = make_value(run.ctx, full, dy->dtype());
    cuda::permute_channels_cuda(run.ctx, *dy, *dx, in_[0], in_[1], in_[2], false);
    return dx;
  }

 private:
  Shape in_;
  bool hwc_;
};

}  // namespace

std::unique_ptr<DeviceLayer> make_device_flatten(FlattenLayer& l) { return std::make_unique<DeviceFlatten>(l); }

}  // namespace driftlab
