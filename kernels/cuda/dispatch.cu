// The *_cuda dispatchers: the vendor path when CudaExecParams asks for it and it supports the
// params, else driftlab's own kernel. A vendor request that falls back (e.g. cuDNN with
// asymmetric TF 'SAME' pads) is recorded in ctx.algo_log() as algo_name "own (fallback)", so a
// report shows what actually ran.
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {
namespace {

bool vendor(CudaBackend b) { return b == CudaBackend::vendor; }

void note_fallback(CudaContext& ctx, const char* op, const std::string& sig) {
  if (ctx.find_algo(op, sig)) return;  // log each fallback once
  AlgoRecord r;
  r.op = op;
  r.signature = sig;
  r.algo_name = "own (fallback)";
  r.deterministic = true;
  ctx.record_algo(r);
}

// BatchNormParams::relu (the CPU's batchnorm + relu as one op) has no device kernel: the device
// layers run the two layers apart, from a layer's own params, which never set it.
void refuse_fused_relu(const BatchNormParams& p, const char* fn) {
  if (p.relu) fail("cuda: ", fn, ": a fused ReLU (BatchNormParams::relu) is a CPU op; run batchnorm and relu apart");
}

}  // namespace

void gemm_cuda(CudaContext& ctx, const GemmParams& p, const DeviceTensor& a, const DeviceTensor& b, DeviceTensor& c) {
  if (vendor(ctx.params().gemm_backend))
    gemm_cublas(ctx, p, a, b, c);
  else
    gemm_own(ctx, p, a, b, c);
}

void conv2d_forward_cuda(CudaContext& ctx, const Conv2dParams& p, const DeviceTensor& x, const DeviceTensor& w,
                         const DeviceTensor* b, DeviceTensor& y) {
  check(p.groups == 1, "conv2d_forward: grouped convolution has no CUDA kernel yet (", p.str(), ")");
  if (vendor(ctx.params().conv_backend)) {
    if (conv2d_cudnn_supports(p, x.dtype())) return conv2d_forward_cudnn(ctx, p, x, w, b, y);
    note_fallback(ctx, "conv2d_forward", p.str());
  }
  conv2d_forward_own(ctx, p, x, w, b, y);
}

void conv2d_backward_data_cuda(CudaContext& ctx, const Conv2dParams& p, const DeviceTensor& dy,
                               const DeviceTensor& w, DeviceTensor& dx) {
  check(p.groups == 1, "conv2d_backward_data: grouped convolution has no CUDA kernel yet (", p.str(), ")");
  if (vendor(ctx.params().conv_backend)) {
    if (conv2d_cudnn_supports(p, dy.dtype())) return conv2d_backward_data_cudnn(ctx, p, dy, w, dx);
    note_fallback(ctx, "conv2d_backward_data", p.str());
  }
  conv2d_backward_data_own(ctx, p, dy, w, dx);
}

void conv2d_backward_weight_cuda(CudaContext& ctx, const Conv2dParams& p, const DeviceTensor& x,
                                 const DeviceTensor& dy, DeviceTensor& dw, DeviceTensor* db) {
  check(p.groups == 1, "conv2d_backward_weight: grouped convolution has no CUDA kernel yet (", p.str(), ")");
  if (vendor(ctx.params().conv_backend)) {
    if (conv2d_cudnn_supports(p, x.dtype())) return conv2d_backward_weight_cudnn(ctx, p, x, dy, dw, db);
    note_fallback(ctx, "conv2d_backward_weight", p.str());
  }
  conv2d_backward_weight_own(ctx, p, x, dy, dw, db);
}

void maxpool2d_forward_cuda(CudaContext& ctx, const Pool2dParams& p, const DeviceTensor& x, DeviceTensor& y) {
  if (vendor(ctx.params().pool_backend)) {
    if (pool2d_cudnn_supports(p, true)) return pool2d_forward_cudnn(ctx, p, true, x, y);
    note_fallback(ctx, "maxpool2d", p.str());
  }
  maxpool2d_forward_own(ctx, p, x, y);
}

void maxpool2d_backward_cuda(CudaContext& ctx, const Pool2dParams& p, const DeviceTensor& x, const DeviceTensor& y,
                             const DeviceTensor& dy, DeviceTensor& dx) {
  if (vendor(ctx.params().pool_backend) && pool2d_cudnn_supports(p, true))
    return pool2d_backward_cudnn(ctx, p, true, x, y, dy, dx);
  maxpool2d_backward_own(ctx, p, x, dy, dx);
}

void avgpool2d_forward_cuda(CudaContext& ctx, const Pool2dParams& p, const DeviceTensor& x, DeviceTensor& y) {
  if (vendor(ctx.params().pool_backend)) {
    if (pool2d_cudnn_supports(p, false)) return pool2d_forward_cudnn(ctx, p, false, x, y);
    note_fallback(ctx, "avgpool2d", p.str());
  }
  avgpool2d_forward_own(ctx, p, x, y);
}

void avgpool2d_backward_cuda(CudaContext& ctx, const Pool2dParams& p, const DeviceTensor& x, const DeviceTensor& y,
                             const DeviceTensor& dy, DeviceTensor& dx) {
  if (vendor(ctx.params().pool_backend) && pool2d_cudnn_supports(p, false))
    return pool2d_backward_cudnn(ctx, p, false, x, y, dy, dx);
  avgpool2d_backward_own(ctx, p, dy, dx);
}

void batchnorm_forward_train_cuda(CudaContext& ctx, const BatchNormParams& p, const DeviceTensor& x,
                                  const DeviceTensor& gamma, const DeviceTensor& beta, DeviceTensor& y,
                                  DeviceTensor& mean, DeviceTensor& var, DeviceTensor& invstd) {
  refuse_fused_relu(p, "batchnorm_forward_train_cuda");
  if (vendor(ctx.params().bn_backend))
    batchnorm_forward_train_cudnn(ctx, p, x, gamma, beta, y, mean, var, invstd);
  else
    batchnorm_forward_train_own(ctx, p, x, gamma, beta, y, mean, var, invstd);
}

void batchnorm_forward_infer_cuda(CudaContext& ctx, const BatchNormParams& p, const DeviceTensor& x,
                                  const DeviceTensor& gamma, const DeviceTensor& beta,
                                  const DeviceTensor& running_mean, const DeviceTensor& running_var,
                                  DeviceTensor& y) {
  refuse_fused_relu(p, "batchnorm_forward_infer_cuda");
  if (vendor(ctx.params().bn_backend)) {
    if (batchnorm_cudnn_supports_infer(p))
      return batchnorm_forward_infer_cudnn(ctx, p, x, gamma, beta, running_mean, running_var, y);
    note_fallback(ctx, "batchnorm_forward_infer", "estimator inv_std");
  }
  batchnorm_forward_infer_own(ctx, p, x, gamma, beta, running_mean, running_var, y);
}

void batchnorm_backward_cuda(CudaContext& ctx, const BatchNormParams& p, const DeviceTensor& x,
                             const DeviceTensor& dy, const DeviceTensor& gamma, const DeviceTensor& mean,
                             const DeviceTensor& invstd, DeviceTensor& dx, DeviceTensor& dgamma,
                             DeviceTensor& dbeta) {
  refuse_fused_relu(p, "batchnorm_backward_cuda");
  if (vendor(ctx.params().bn_backend))
    batchnorm_backward_cudnn(ctx, p, x, dy, gamma, mean, invstd, dx, dgamma, dbeta);
  else
    batchnorm_backward_own(ctx, p, x, dy, gamma, mean, invstd, dx, dgamma, dbeta);
}

void batchnorm_backward_infer_cuda(CudaContext& ctx, const BatchNormParams& p, const DeviceTensor& x,
                                   const DeviceTensor& dy, const DeviceTensor& gamma,
                                   const DeviceTensor& running_mean, const DeviceTensor& running_var,
                                   DeviceTensor& dx, DeviceTensor& dgamma, DeviceTensor& dbeta) {
  refuse_fused_relu(p, "batchnorm_backward_infer_cuda");
  // cuDNN has no inference-mode backward: a vendor request runs the own kernel, logged.
  if (vendor(ctx.params().bn_backend)) note_fallback(ctx, "batchnorm_backward_infer", "no cuDNN equivalent");
  batchnorm_backward_infer_own(ctx, p, x, dy, gamma, running_mean, running_var, dx, dgamma, dbeta);
}

double softmax_xent_forward_cuda(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z,
                                 const std::vector<int32_t>& labels) {
  if (vendor(ctx.params().softmax_backend)) return softmax_xent_forward_cudnn(ctx, p, z, labels);
  return softmax_xent_forward_own(ctx, p, z, labels);
}

void softmax_xent_backward_cuda(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z,
                                const std::vector<int32_t>& labels, DeviceTensor& dz) {
  if (vendor(ctx.params().softmax_backend)) return softmax_xent_backward_cudnn(ctx, p, z, labels, dz);
  softmax_xent_backward_own(ctx, p, z, labels, dz);
}

void softmax_xent_losses_cuda(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z,
                              const DeviceTensor& labels, DeviceTensor& losses) {
  if (vendor(ctx.params().softmax_backend)) return softmax_xent_losses_cudnn(ctx, p, z, labels, losses);
  softmax_xent_losses_own(ctx, p, z, labels, losses);
}

void softmax_xent_backward_cuda(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z,
                                const DeviceTensor& labels, DeviceTensor& dz) {
  if (vendor(ctx.params().softmax_backend)) return softmax_xent_backward_cudnn(ctx, p, z, labels, dz);
  softmax_xent_backward_own(ctx, p, z, labels, dz);
}

void rnn_forward_cuda(CudaContext& ctx, const RnnParams& p, const DeviceTensor& x, const DeviceTensor* mask,
                      const RnnDeviceWeights& w, DeviceTensor& h_seq, RnnDeviceState* state) {
  if (vendor(ctx.params().rnn_backend)) {
    // cuDNN documents no determinism guarantee for its RNN: a deterministic run takes the own
    // kernels (fixed order, no atomics), logged like any other fallback.
    if (rnn_cudnn_supports(p, mask != nullptr) && !ctx.params().deterministic)
      return rnn_forward_cudnn(ctx, p, x, w, h_seq, state);
    note_fallback(ctx, "rnn_forward", std::string(rnn_cell_name(p.cell)) + (mask ? " masked" : "") +
                                          (ctx.params().deterministic ? " deterministic" : "") + " gate=" +
                                          act_name(p.gate_act.kind) + " reset_after=" +
                                          std::to_string(p.gru_reset_after) + " peepholes=" +
                                          std::to_string(p.peepholes));
  }
  rnn_forward_own(ctx, p, x, mask, w, h_seq, state);
}

void rnn_backward_cuda(CudaContext& ctx, const RnnParams& p, const RnnDeviceWeights& w, const RnnDeviceState& state,
                       const DeviceTensor& dh, DeviceTensor* dx, const RnnDeviceGrads& g) {
  if (state.vendor) return rnn_backward_cudnn(ctx, p, w, state, dh, dx, g);
  rnn_backward_own(ctx, p, w, state, dh, dx, g);
}

}  // namespace cuda
}  // namespace driftlab
