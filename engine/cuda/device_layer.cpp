#include "engine/cuda/device_layer.h"

#include "core/stop.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

using cuda::CudaContext;
using cuda::DeviceTensor;

DeviceValue make_value(CudaContext& ctx, Shape shape, DType dtype) {
  return std::make_shared<DeviceTensor>(ctx, std::move(shape), dtype);
}

DeviceValue view_of(const DeviceValue& base, Shape shape) {
  DeviceValue keep = base;
  return DeviceValue(new DeviceTensor(base->reshape_view(std::move(shape))), [keep](DeviceTensor* v) { delete v; });
}

void check_device_input(const char* layer, const DeviceTensor& x, const Shape& per_sample) {
  Shape want{x.rank() > 0 ? x.dim(0) : 0};
  want.insert(want.end(), per_sample.begin(), per_sample.end());
  if (!(x.rank() == static_cast<int>(per_sample.size()) + 1 && x.shape() == want))
    fail(layer, ": input has shape ", shape_str(x.shape()), ", expected [N,", shape_str(per_sample).substr(1));
}

DeviceValue writable(CudaContext& ctx, const DeviceValue& y) {
  if (y.use_count() == 1) return y;
  DeviceValue c = make_value(ctx, y->shape(), y->dtype());
  cuda::copy_device(ctx, *y, *c);
  return c;
}

// ---------------------------------------------------------------- DeviceSequential

DeviceValue DeviceSequential::forward(DeviceRunContext& run, const DeviceValue& x) {
  DeviceValue h = x;
  for (Entry& e : layers_) {
    poll_stop("cuda forward");  // a host check: the layers' kernels are queued, not waited for
    if (e.layer->container()) {
      h = e.layer->forward(run, h);
      continue;
    }
    const int64_t n = h->rank() > 0 ? h->dim(0) : 0;
    try {
      h = e.layer->forward(run, h);
    } catch (const Error& err) {
      fail("cuda: forward of layer ", e.path, " (", e.kind, "), batch ", n, ": ", err.what());
    }
  }
  return h;
}

DeviceValue DeviceSequential::backward(DeviceRunContext& run, const DeviceValue& dy) {
  DeviceValue g = dy;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    Entry& e = layers_[i];
    poll_stop("cuda backward");
    run.need_dx = i > 0 || run.input_grad;
    if (e.layer->container()) {
      g = e.layer->backward(run, g);
      continue;
    }
    const int64_t n = g->rank() > 0 ? g->dim(0) : 0;
    try {
      g = e.layer->backward(run, g);
    } catch (const Error& err) {
      fail("cuda: backward of layer ", e.path, " (", e.kind, "), batch ", n, ": ", err.what());
    }
  }
  run.need_dx = true;
  return g;
}

}  // namespace driftlab
