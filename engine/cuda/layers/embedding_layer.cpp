// The device counterpart of EmbeddingLayer: ids checked on the host, gather and scatter-add on the device.
#include "engine/cuda/device_layer.h"
#include "engine/layers/embedding_layer.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

using cuda::CudaContext;
using cuda::DeviceTensor;

namespace {

// Token ids (N,T) -> table rows (N,T,D), as EmbeddingLayer: the ids come back to the host to be
// checked and to make the padding mask (the CPU layer's own code), the gather runs on the device.
class DeviceEmbedding : public DeviceLayer {
 public:
  DeviceEmbedding(EmbeddingLayer& l, DeviceParam* table) : layer_(l), table_(table) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("embedding", *x, {layer_.steps()});
    const int64_t n = x->dim(0), steps = layer_.steps();
    std::vector<int64_t> ids = layer_.read_ids(cuda::to_host(run.ctx, *x));
    DeviceValue y = make_value(run.ctx, {n, steps, layer_.dim()}, table_->value.dtype());
    cuda::embedding_forward_cuda(run.ctx, table_->value, ids, *y);
    run.step_mask = EmbeddingLayer::padding_mask(ids, n, steps);
    if (run.record) {
      ids_ = std::move(ids), batch_ = n;
    } else {
      ids_.clear(), batch_ = -1;
    }
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    check(batch_ >= 0, "embedding: backward without a recorded forward");
    cuda::check_device_shape("embedding backward", "dy", *dy, {batch_, layer_.steps(), layer_.dim()});
    cuda::embedding_backward_cuda(run.ctx, ids_, *dy, table_->grad);
    DeviceValue dx;
    if (run.need_dx) {  // zero: ids are not differentiable
      dx = std::make_shared<DeviceTensor>(DeviceTensor::zeros(run.ctx, {batch_, layer_.steps()}, dy->dtype()));
    }
    batch_ = -1;
    return dx;
  }

 private:
  EmbeddingLayer& layer_;
  DeviceParam* table_;
  std::vector<int64_t> ids_;
  int64_t batch_ = -1;
};

}  // namespace

std::unique_ptr<DeviceLayer> make_device_embedding(EmbeddingLayer& l, DeviceParam* table) {
  return std::make_unique<DeviceEmbedding>(l, table);
}

}  // namespace driftlab
