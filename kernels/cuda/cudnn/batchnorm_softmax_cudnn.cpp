// cuDNN BatchNorm (CUDNN_BATCHNORM_SPATIAL over (N, C, S, 1)) and cuDNN softmax for the loss.
// BatchNorm training asks cuDNN for no running averages (null pointers): the running update
// stays driftlab's batchnorm_update_running_cuda, which knows every framework's estimator.
// cuDNN returns the saved mean and inverse std; var = 1/invstd^2 - eps is recovered for the
// caller (it rounds differently from the directly computed variance: see the tests).
// Backward: dx written (=), dgamma/dbeta ADDED (betaParamDiff = 1).
#include <cudnn.h>

#include "kernels/cuda/cudnn/cudnn_util.h"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {
namespace {

void check_bn(const char* fn, const BatchNormParams& p, const DeviceTensor& x) {
  check(x.numel() == p.n * p.c * p.s && x.rank() >= 1 && x.dim(0) == p.n, fn, ": x has shape ",
        shape_str(x.shape()), ", expected N=", p.n, " C=", p.c, " S=", p.s);
}

}  // namespace

bool batchnorm_cudnn_supports_infer(const BatchNormParams& p) { return p.estimator != BnVarEstimator::inv_std; }

void batchnorm_forward_train_cudnn(CudaContext& ctx, const BatchNormParams& p, const DeviceTensor& x,
                                   const DeviceTensor& gamma, const DeviceTensor& beta, DeviceTensor& y,
                                   DeviceTensor& mean, DeviceTensor& var, DeviceTensor& invstd) {
  const char* fn = "batchnorm_forward_train_cudnn";
  check_bn(fn, p, x);
  check(p.n * p.s > 1, fn, ": batch statistics need more than one value per channel (N*S=", p.n * p.s, ")");
  check_device_shape(fn, "y", y, x.shape());
  cudnnHandle_t h = static_cast<cudnnHandle_t>(ctx.cudnn());
  TensorDesc xd(x.dtype(), p.n, p.c, p.s, 1), cd(x.dtype(), 1, p.c, 1, 1);
  CudnnScalars s(x.dtype(), 1.0, 0.0);
  DL_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, s.alpha(), s.beta(), xd.get(),
                                                        x.raw(), xd.get(), y.raw(), cd.get(), gamma.raw(),
                                                        beta.raw(), 0.0, nullptr, nullptr, p.eps, mean.raw(),
                                                        invstd.raw()));
  batchnorm_var_from_invstd(ctx, p.eps, invstd, var);
}

void batchnorm_forward_infer_cudnn(CudaContext& ctx, const BatchNormParams& p, const DeviceTensor& x,
                                   const DeviceTensor& gamma, const DeviceTensor& beta,
                                   const DeviceTensor& running_mean, const DeviceTensor& running_var,
                                   DeviceTensor& y) {
  const char* fn = "batchnorm_forward_infer_cudnn";
  check_bn(fn, p, x);
  check(batchnorm_cudnn_supports_infer(p), fn, ": cuDNN inference needs a running variance, not an inverse std");
  check_device_shape(fn, "y", y, x.shape());
  cudnnHandle_t h = static_cast<cudnnHandle_t>(ctx.cudnn());
  TensorDesc xd(x.dtype(), p.n, p.c, p.s, 1), cd(x.dtype(), 1, p.c, 1, 1);
  CudnnScalars s(x.dtype(), 1.0, 0.0);
  DL_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, s.alpha(), s.beta(), xd.get(),
                                                         x.raw(), xd.get(), y.raw(), cd.get(), gamma.raw(),
                                                         beta.raw(), running_mean.raw(), running_var.raw(), p.eps));
}

void batchnorm_backward_cudnn(CudaContext& ctx, const BatchNormParams& p, const DeviceTensor& x,
                              const DeviceTensor& dy, const DeviceTensor& gamma, const DeviceTensor& mean,
                              const DeviceTensor& invstd, DeviceTensor& dx, DeviceTensor& dgamma,
                              DeviceTensor& dbeta) {
  const char* fn = "batchnorm_backward_cudnn";
  check_bn(fn, p, x);
  check_device_shape(fn, "dy", dy, x.shape());
  check_device_shape(fn, "dx", dx, x.shape());
  cudnnHandle_t h = static_cast<cudnnHandle_t>(ctx.cudnn());
  TensorDesc xd(x.dtype(), p.n, p.c, p.s, 1), cd(x.dtype(), 1, p.c, 1, 1);
  CudnnScalars data(x.dtype(), 1.0, 0.0), param(x.dtype(), 1.0, 1.0);
  DL_CUDNN_CHECK(cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, data.alpha(), data.beta(),
                                                 param.alpha(), param.beta(), xd.get(), x.raw(), xd.get(), dy.raw(),
                                                 xd.get(), dx.raw(), cd.get(), gamma.raw(), dgamma.raw(),
                                                 dbeta.raw(), p.eps, mean.raw(), invstd.raw()));
}

void softmax_rows_cudnn(CudaContext& ctx, bool log, const DeviceTensor& z, DeviceTensor& out) {
  check(z.rank() == 2, "softmax_rows_cudnn: z must be (N,K), got ", shape_str(z.shape()));
  check_device_shape("softmax_rows_cudnn", "out", out, z.shape());
  if (z.numel() == 0) return;
  cudnnHandle_t h = static_cast<cudnnHandle_t>(ctx.cudnn());
  TensorDesc zd(z.dtype(), z.dim(0), z.dim(1), 1, 1);
  CudnnScalars s(z.dtype(), 1.0, 0.0);
  DL_CUDNN_CHECK(cudnnSoftmaxForward(h, log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE,
                                     s.alpha(), zd.get(), z.raw(), s.beta(), zd.get(), out.raw()));
}

double softmax_xent_forward_cudnn(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z,
                                  const std::vector<int32_t>& labels) {
  check(z.rank() == 2, "softmax_xent_forward_cudnn: logits must be (N,K), got ", shape_str(z.shape()));
  DeviceTensor given(ctx, z.shape(), z.dtype());
  softmax_rows_cudnn(ctx, p.form == CeFormulation::log_softmax, z, given);
  return softmax_xent_forward_given(ctx, p, given, labels);
}

void softmax_xent_backward_cudnn(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z,
                                 const std::vector<int32_t>& labels, DeviceTensor& dz) {
  check(z.rank() == 2, "softmax_xent_backward_cudnn: logits must be (N,K), got ", shape_str(z.shape()));
  DeviceTensor probs(ctx, z.shape(), z.dtype());
  softmax_rows_cudnn(ctx, false, z, probs);
  softmax_xent_backward_given(ctx, p, probs, labels, dz);
}

void softmax_xent_losses_cudnn(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z,
                               const DeviceTensor& labels, DeviceTensor& losses) {
  check(z.rank() == 2, "softmax_xent_losses_cudnn: logits must be (N,K), got ", shape_str(z.shape()));
  DeviceTensor given(ctx, z.shape(), z.dtype());
  softmax_rows_cudnn(ctx, p.form == CeFormulation::log_softmax, z, given);
  softmax_xent_losses_given(ctx, p, given, labels, losses);
}

void softmax_xent_backward_cudnn(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z,
                                 const DeviceTensor& labels, DeviceTensor& dz) {
  check(z.rank() == 2, "softmax_xent_backward_cudnn: logits must be (N,K), got ", shape_str(z.shape()));
  DeviceTensor probs(ctx, z.shape(), z.dtype());
  softmax_rows_cudnn(ctx, false, z, probs);
  softmax_xent_backward_given(ctx, p, probs, labels, dz);
}

}  // namespace cuda
}  // namespace driftlab
