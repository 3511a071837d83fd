// The device counterpart of DenseLayer: two gemms and a bias, as on the CPU.
#include "engine/cuda/device_layer.h"
#include "engine/layers/dense_layer.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

using cuda::CudaContext;
using cuda::DeviceTensor;

namespace {

// y = x W^T + b with W (out,in), as DenseLayer.
class DeviceDense : public DeviceLayer {
 public:
  DeviceDense(DeviceParam* w, DeviceParam* b) : in_(w->value.dim(1)), out_(w->value.dim(0)), w_(w), b_(b) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("dense", *x, {in_});
    const int64_t n = x->dim(0);
    DeviceValue y = make_value(run.ctx, {n, out_}, x->dtype());
    GemmParams p;
    p.m = n, p.n = out_, p.k = in_, p.trans_b = true;
    cuda::gemm_cuda(run.ctx, p, *x, w_->value, *y);
    if (b_) cuda::add_row_bias_cuda(run.ctx, *y, b_->value);
    x_ = run.record ? x : nullptr;
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    check(x_ != nullptr, "dense: backward without a recorded forward");
    const int64_t n = x_->dim(0);
    cuda::check_device_shape("dense backward", "dy", *dy, {n, out_});
    DeviceValue dx;
    if (run.need_dx) {
      dx = make_value(run.ctx, {n, in_}, dy->dtype());
      GemmParams pd;  // dx = dy W
      pd.m = n, pd.n = in_, pd.k = out_;
      cuda::gemm_cuda(run.ctx, pd, *dy, w_->value, *dx);
    }
    if (run.param_grads) {
      GemmParams pw;  // dW += dy^T x
      pw.m = out_, pw.n = in_, pw.k = n, pw.trans_a = true, pw.beta = 1.0;
      cuda::gemm_cuda(run.ctx, pw, *dy, *x_, w_->grad);
      if (b_) cuda::add_column_sums_cuda(run.ctx, *dy, b_->grad);
    }
    x_.reset();
    return dx;
  }

 private:
  int64_t in_, out_;
  DeviceParam *w_, *b_;
  DeviceValue x_;
};

}  // namespace

std::unique_ptr<DeviceLayer> make_device_dense(DeviceParam* w, DeviceParam* b) {
  return std::make_unique<DeviceDense>(w, b);
}

}  // namespace driftlab
