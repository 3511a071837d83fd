// cuDNN pooling, float and double, NCHW, symmetric pads. Forward writes y (=), backward dx (=).
// Max: CUDNN_POOLING_MAX, or CUDNN_POOLING_MAX_DETERMINISTIC when deterministic is asked.
// Average: COUNT_INCLUDE_PADDING / COUNT_EXCLUDE_PADDING from count_include_pad.
#include <cudnn.h>

#include "kernels/cuda/cudnn/cudnn_util.h"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {
namespace {

class PoolDesc {
 public:
  PoolDesc(const Pool2dParams& p, bool is_max, bool deterministic) {
    const cudnnPoolingMode_t mode =
        is_max ? (deterministic ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_MAX)
               : (p.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                      : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING);
    DL_CUDNN_CHECK(cudnnSetPooling2dDescriptor(d_.get(), mode, CUDNN_PROPAGATE_NAN, static_cast<int>(p.kh),
                                               static_cast<int>(p.kw), static_cast<int>(p.pad_t),
                                               static_cast<int>(p.pad_l), static_cast<int>(p.stride_h),
                                               static_cast<int>(p.stride_w)));
  }
  cudnnPoolingDescriptor_t get() const { return d_.get(); }

 private:
  CudnnDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor> d_;
};

void check_supported(const char* fn, const Pool2dParams& p, bool is_max) {
  p.validate();
  if (!pool2d_cudnn_supports(p, is_max))
    fail(fn, ": cuDNN pooling needs symmetric pads", is_max ? " and ties=first" : "", " (", p.str(), ")");
}

}  // namespace

bool pool2d_cudnn_supports(const Pool2dParams& p, bool is_max) {
  return p.pad_t == p.pad_b && p.pad_l == p.pad_r && (!is_max || p.ties == PoolTies::first);
}

void pool2d_forward_cudnn(CudaContext& ctx, const Pool2dParams& p, bool is_max, const DeviceTensor& x,
                          DeviceTensor& y) {
  const char* fn = "pool2d_forward_cudnn";
  check_supported(fn, p, is_max);
  check_device_shape(fn, "x", x, p.x_shape());
  check_device_shape(fn, "y", y, p.y_shape());
  cudnnHandle_t h = static_cast<cudnnHandle_t>(ctx.cudnn());
  PoolDesc pd(p, is_max, ctx.params().deterministic);
  TensorDesc xd(x.dtype(), p.n, p.c, p.h, p.w), yd(x.dtype(), p.n, p.c, p.out_h(), p.out_w());
  CudnnScalars s(x.dtype(), 1.0, 0.0);
  DL_CUDNN_CHECK(cudnnPoolingForward(h, pd.get(), s.alpha(), xd.get(), x.raw(), s.beta(), yd.get(), y.raw()));
}

void pool2d_backward_cudnn(CudaContext& ctx, const Pool2dParams& p, bool is_max, const DeviceTensor& x,
                           const DeviceTensor& y, const DeviceTensor& dy, DeviceTensor& dx) {
  const char* fn = "pool2d_backward_cudnn";
  check_supported(fn, p, is_max);
  check_device_shape(fn, "x", x, p.x_shape());
  check_device_shape(fn, "y", y, p.y_shape());
  check_device_shape(fn, "dy", dy, p.y_shape());
  check_device_shape(fn, "dx", dx, p.x_shape());
  cudnnHandle_t h = static_cast<cudnnHandle_t>(ctx.cudnn());
  PoolDesc pd(p, is_max, ctx.params().deterministic);
  TensorDesc xd(x.dtype(), p.n, p.c, p.h, p.w), yd(x.dtype(), p.n, p.c, p.out_h(), p.out_w());
  CudnnScalars s(x.dtype(), 1.0, 0.0);
  DL_CUDNN_CHECK(cudnnPoolingBackward(h, pd.get(), s.alpha(), yd.get(), y.raw(), yd.get(), dy.raw(), xd.get(),
                                      x.raw(), s.beta(), xd.get(), dx.raw()));
}

}  // namespace cuda
}  // namespace driftlab
