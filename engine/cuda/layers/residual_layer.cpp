// The device counterpart of ResidualLayer: main path plus identity / option A / option B.
#include "engine/cuda/device_layer.h"
#include "engine/layers/residual_layer.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

using cuda::CudaContext;
using cuda::DeviceTensor;

namespace {

// y = main(x) + shortcut(x), as ResidualLayer.
class DeviceResidual : public DeviceLayer {
 public:
  DeviceResidual(ResidualLayer& l, std::unique_ptr<DeviceSequential> main, std::unique_ptr<DeviceSequential> proj)
      : main_(std::move(main)), proj_(std::move(proj)), shortcut_(l.shortcut()), in_(l.input_shape()),
        out_(l.output_shape()), stride_(l.stride()), pad_before_(l.pad_before()) {}
  bool container() const override { return true; }
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("residual", *x, in_);
    n_ = x->dim(0);
    DeviceValue y = writable(run.ctx, main_->forward(run, x));
    if (shortcut_ == Shortcut::option_b) {
      DeviceValue s = proj_->forward(run, x);
      cuda::add_inplace_cuda(run.ctx, *y, *s);
    } else if (shortcut_ == Shortcut::identity) {
      cuda::add_inplace_cuda(run.ctx, *y, *x);
    } else {
      cuda::channel_pad_subsample_add_cuda(run.ctx, pad_params(), *x, *y);
    }
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    // The inner paths need their input gradient exactly when this block's dx is needed.
    const bool saved = run.input_grad;
    run.input_grad = run.need_dx;
    DeviceValue dx = main_->backward(run, dy);
    DeviceValue ds = shortcut_ == Shortcut::option_b ? proj_->backward(run, dy) : nullptr;
    run.input_grad = saved;
    if (!dx) return dx;  // nobody needs dx (the block is the network's first layer)
    dx = writable(run.ctx, dx);
    if (shortcut_ == Shortcut::option_b)
      cuda::add_inplace_cuda(run.ctx, *dx, *ds);
    else if (shortcut_ == Shortcut::identity)
      cuda::add_inplace_cuda(run.ctx, *dx, *dy);
    else
      cuda::channel_pad_subsample_add_backward_cuda(run.ctx, pad_params(), *dy, *dx);
    return dx;
  }

 private:
  cuda::ChannelPadSubsampleParams pad_params() const {
    cuda::ChannelPadSubsampleParams p;
    p.n = n_, p.c = in_[0], p.h = in_[1], p.w = in_[2], p.oc = out_[0], p.oh = out_[1], p.ow = out_[2];
    p.stride = stride_, p.pad_before = pad_before_;
    return p;
  }
  std::unique_ptr<DeviceSequential> main_, proj_;
  Shortcut shortcut_;
  Shape in_, out_;
  int64_t stride_, pad_before_, n_ = 0;
};

}  // namespace

std::unique_ptr<DeviceLayer> make_device_residual(ResidualLayer& l, std::unique_ptr<DeviceSequential> main,
                                                  std::unique_ptr<DeviceSequential> proj) {
  return std::make_unique<DeviceResidual>(l, std::move(main), std::move(proj));
}

}  // namespace driftlab
