// Built instead of the kernels/cuda/*.cu ops when nvcc is not found: every CUDA op throws
// "driftlab was built without CUDA", so callers and tests link in every build.
#include "core/error.h"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {

namespace {
[[noreturn]] void no_cuda(const char* op) {
  fail("cuda: ", op, ": driftlab was built without CUDA (nvcc not found at configure time)");
}
}  // namespace

#define DL_NO_CUDA(ret, name, ...) \
  ret name(__VA_ARGS__) { no_cuda(#name); }

DL_NO_CUDA(void, gemm_own, CudaContext&, const GemmParams&, const DeviceTensor&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, gemm_cuda, CudaContext&, const GemmParams&, const DeviceTensor&, const DeviceTensor&, DeviceTensor&)
template <typename T>
void gemm_own_raw(CudaContext&, const GemmParams&, const T*, const T*, T*) {
  no_cuda("gemm_own_raw");
}
template void gemm_own_raw<float>(CudaContext&, const GemmParams&, const float*, const float*, float*);
template void gemm_own_raw<double>(CudaContext&, const GemmParams&, const double*, const double*, double*);

DL_NO_CUDA(void, conv2d_forward_own, CudaContext&, const Conv2dParams&, const DeviceTensor&, const DeviceTensor&,
           const DeviceTensor*, DeviceTensor&)
DL_NO_CUDA(void, conv2d_backward_data_own, CudaContext&, const Conv2dParams&, const DeviceTensor&, const DeviceTensor&,
           DeviceTensor&)
DL_NO_CUDA(void, conv2d_backward_weight_own, CudaContext&, const Conv2dParams&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&, DeviceTensor*)
DL_NO_CUDA(void, conv2d_forward_cuda, CudaContext&, const Conv2dParams&, const DeviceTensor&, const DeviceTensor&,
           const DeviceTensor*, DeviceTensor&)
DL_NO_CUDA(void, conv2d_backward_data_cuda, CudaContext&, const Conv2dParams&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, conv2d_backward_weight_cuda, CudaContext&, const Conv2dParams&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&, DeviceTensor*)

DL_NO_CUDA(void, maxpool2d_forward_own, CudaContext&, const Pool2dParams&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, maxpool2d_backward_own, CudaContext&, const Pool2dParams&, const DeviceTensor&, const DeviceTensor&,
           DeviceTensor&)
DL_NO_CUDA(void, avgpool2d_forward_own, CudaContext&, const Pool2dParams&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, avgpool2d_backward_own, CudaContext&, const Pool2dParams&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, maxpool2d_forward_cuda, CudaContext&, const Pool2dParams&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, maxpool2d_backward_cuda, CudaContext&, const Pool2dParams&, const DeviceTensor&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, avgpool2d_forward_cuda, CudaContext&, const Pool2dParams&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, avgpool2d_backward_cuda, CudaContext&, const Pool2dParams&, const DeviceTensor&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&)

DL_NO_CUDA(void, activation_forward_cuda, CudaContext&, const ActivationParams&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, activation_backward_cuda, CudaContext&, const ActivationParams&, const DeviceTensor&,
           const DeviceTensor&, const DeviceTensor&, DeviceTensor&)

DL_NO_CUDA(void, batchnorm_forward_train_own, CudaContext&, const BatchNormParams&, const DeviceTensor&,
           const DeviceTensor&, const DeviceTensor&, DeviceTensor&, DeviceTensor&, DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, batchnorm_forward_infer_own, CudaContext&, const BatchNormParams&, const DeviceTensor&,
           const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, batchnorm_backward_own, CudaContext&, const BatchNormParams&, const DeviceTensor&,
           const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, DeviceTensor&,
           DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, batchnorm_backward_infer_own, CudaContext&, const BatchNormParams&, const DeviceTensor&,
           const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, DeviceTensor&,
           DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, batchnorm_backward_infer_cuda, CudaContext&, const BatchNormParams&, const DeviceTensor&,
           const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, DeviceTensor&,
           DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, batchnorm_update_running_cuda, CudaContext&, const BatchNormParams&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&, DeviceTensor&, DeviceTensor&, DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, batchnorm_forward_train_cuda, CudaContext&, const BatchNormParams&, const DeviceTensor&,
           const DeviceTensor&, const DeviceTensor&, DeviceTensor&, DeviceTensor&, DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, batchnorm_forward_infer_cuda, CudaContext&, const BatchNormParams&, const DeviceTensor&,
           const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, batchnorm_backward_cuda, CudaContext&, const BatchNormParams&, const DeviceTensor&,
           const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, DeviceTensor&,
           DeviceTensor&, DeviceTensor&)

DL_NO_CUDA(double, softmax_xent_forward_own, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const std::vector<int32_t>&)
DL_NO_CUDA(void, softmax_xent_backward_own, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const std::vector<int32_t>&, DeviceTensor&)
DL_NO_CUDA(double, softmax_xent_forward_cuda, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const std::vector<int32_t>&)
DL_NO_CUDA(void, softmax_xent_backward_cuda, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const std::vector<int32_t>&, DeviceTensor&)
DL_NO_CUDA(void, softmax_xent_losses_own, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, softmax_xent_backward_own, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, softmax_xent_losses_cuda, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, softmax_xent_backward_cuda, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, check_xent_labels, const char*, int64_t, int64_t, const std::vector<int32_t>&)
DL_NO_CUDA(double, softmax_xent_total, const SoftmaxXentParams&, const Tensor&)

DL_NO_CUDA(void, sgd_step_cuda, CudaContext&, const SgdStepParams&, DeviceTensor&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, linf_step_cuda, CudaContext&, const LinfStepParams&, const DeviceTensor&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, rows_all_zero_cuda, CudaContext&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, adam_step_cuda, CudaContext&, const AdamStepParams&, DeviceTensor&, const DeviceTensor&, DeviceTensor&,
           DeviceTensor&)
DL_NO_CUDA(void, rmsprop_step_cuda, CudaContext&, const RmspropStepParams&, DeviceTensor&, const DeviceTensor&,
           DeviceTensor&, DeviceTensor&)

DL_NO_CUDA(void, gemm_cublas, CudaContext&, const GemmParams&, const DeviceTensor&, const DeviceTensor&, DeviceTensor&)
bool conv2d_cudnn_supports(const Conv2dParams&, DType) { return false; }
DL_NO_CUDA(void, conv2d_forward_cudnn, CudaContext&, const Conv2dParams&, const DeviceTensor&, const DeviceTensor&,
           const DeviceTensor*, DeviceTensor&)
DL_NO_CUDA(void, conv2d_backward_data_cudnn, CudaContext&, const Conv2dParams&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, conv2d_backward_weight_cudnn, CudaContext&, const Conv2dParams&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&, DeviceTensor*)
bool pool2d_cudnn_supports(const Pool2dParams&, bool) { return false; }
DL_NO_CUDA(void, pool2d_forward_cudnn, CudaContext&, const Pool2dParams&, bool, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, pool2d_backward_cudnn, CudaContext&, const Pool2dParams&, bool, const DeviceTensor&,
           const DeviceTensor&, const DeviceTensor&, DeviceTensor&)
bool batchnorm_cudnn_supports_infer(const BatchNormParams&) { return false; }
DL_NO_CUDA(void, batchnorm_forward_train_cudnn, CudaContext&, const BatchNormParams&, const DeviceTensor&,
           const DeviceTensor&, const DeviceTensor&, DeviceTensor&, DeviceTensor&, DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, batchnorm_forward_infer_cudnn, CudaContext&, const BatchNormParams&, const DeviceTensor&,
           const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, batchnorm_backward_cudnn, CudaContext&, const BatchNormParams&, const DeviceTensor&,
           const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, const DeviceTensor&, DeviceTensor&,
           DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, softmax_rows_cudnn, CudaContext&, bool, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(double, softmax_xent_forward_cudnn, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const std::vector<int32_t>&)
DL_NO_CUDA(void, softmax_xent_backward_cudnn, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const std::vector<int32_t>&, DeviceTensor&)
DL_NO_CUDA(void, batchnorm_var_from_invstd, CudaContext&, double, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(double, softmax_xent_forward_given, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const std::vector<int32_t>&)
DL_NO_CUDA(void, softmax_xent_backward_given, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const std::vector<int32_t>&, DeviceTensor&)
DL_NO_CUDA(void, softmax_xent_losses_given, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, softmax_xent_backward_given, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, softmax_xent_losses_cudnn, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, softmax_xent_backward_cudnn, CudaContext&, const SoftmaxXentParams&, const DeviceTensor&,
           const DeviceTensor&, DeviceTensor&)

DL_NO_CUDA(void, add_inplace_cuda, CudaContext&, DeviceTensor&, const DeviceTensor&)
DL_NO_CUDA(void, multiply_cuda, CudaContext&, const DeviceTensor&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, add_row_bias_cuda, CudaContext&, DeviceTensor&, const DeviceTensor&)
DL_NO_CUDA(void, add_column_sums_cuda, CudaContext&, const DeviceTensor&, DeviceTensor&)
template <typename T>
void add_column_sums_raw(CudaContext&, int64_t, int64_t, const T*, T*) {
  no_cuda("add_column_sums_raw");
}
template void add_column_sums_raw<float>(CudaContext&, int64_t, int64_t, const float*, float*);
template void add_column_sums_raw<double>(CudaContext&, int64_t, int64_t, const double*, double*);
DL_NO_CUDA(void, spatial_mean_forward_cuda, CudaContext&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, spatial_mean_backward_cuda, CudaContext&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, permute_channels_cuda, CudaContext&, const DeviceTensor&, DeviceTensor&, int64_t, int64_t, int64_t,
           bool)
DL_NO_CUDA(void, channel_pad_subsample_add_cuda, CudaContext&, const ChannelPadSubsampleParams&, const DeviceTensor&,
           DeviceTensor&)
DL_NO_CUDA(void, channel_pad_subsample_add_backward_cuda, CudaContext&, const ChannelPadSubsampleParams&,
           const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(double, sum_squares_cuda, CudaContext&, const DeviceTensor&)
DL_NO_CUDA(void, flag_nonfinite_cuda, CudaContext&, const DeviceTensor&, DeviceTensor&, int64_t)
void TensorTable::bind(CudaContext&, const std::vector<const DeviceTensor*>&) { no_cuda("TensorTable::bind"); }
DL_NO_CUDA(void, flag_nonfinite_many_cuda, CudaContext&, const TensorTable&, DeviceTensor&)

DL_NO_CUDA(void, check_rnn_weights, const char*, const RnnParams&, const RnnDeviceWeights&, DType)
DL_NO_CUDA(void, check_rnn_grads, const char*, const RnnParams&, const RnnDeviceGrads&, DType)
DL_NO_CUDA(void, check_rnn_backward_io, const char*, const RnnParams&, const DeviceTensor&, const DeviceTensor*, DType)
DL_NO_CUDA(void, rnn_forward_own, CudaContext&, const RnnParams&, const DeviceTensor&, const DeviceTensor*,
           const RnnDeviceWeights&, DeviceTensor&, RnnDeviceState*)
DL_NO_CUDA(void, rnn_backward_own, CudaContext&, const RnnParams&, const RnnDeviceWeights&, const RnnDeviceState&,
           const DeviceTensor&, DeviceTensor*, const RnnDeviceGrads&)
DL_NO_CUDA(void, rnn_forward_cudnn, CudaContext&, const RnnParams&, const DeviceTensor&, const RnnDeviceWeights&,
           DeviceTensor&, RnnDeviceState*)
DL_NO_CUDA(void, rnn_backward_cudnn, CudaContext&, const RnnParams&, const RnnDeviceWeights&, const RnnDeviceState&,
           const DeviceTensor&, DeviceTensor*, const RnnDeviceGrads&)
DL_NO_CUDA(void, rnn_forward_cuda, CudaContext&, const RnnParams&, const DeviceTensor&, const DeviceTensor*,
           const RnnDeviceWeights&, DeviceTensor&, RnnDeviceState*)
DL_NO_CUDA(void, rnn_backward_cuda, CudaContext&, const RnnParams&, const RnnDeviceWeights&, const RnnDeviceState&,
           const DeviceTensor&, DeviceTensor*, const RnnDeviceGrads&)
DL_NO_CUDA(void, rnn_last_step_cuda, CudaContext&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, rnn_zero_masked_rows_cuda, CudaContext&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, swap_batch_time_cuda, CudaContext&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, add_block_cuda, CudaContext&, DType, const void*, void*, int64_t)
DL_NO_CUDA(void, embedding_forward_cuda, CudaContext&, const DeviceTensor&, const std::vector<int64_t>&,
           DeviceTensor&)
DL_NO_CUDA(void, embedding_backward_cuda, CudaContext&, const std::vector<int64_t>&, const DeviceTensor&,
           DeviceTensor&)

DL_NO_CUDA(void, qconv2d_forward_own, CudaContext&, const QConv2dParams&, const DeviceTensor&, const DeviceTensor&,
           const DeviceTensor*, DeviceTensor&)
DL_NO_CUDA(void, qdense_forward_own, CudaContext&, const QDenseParams&, const DeviceTensor&, const DeviceTensor&,
           const DeviceTensor*, DeviceTensor&)
DL_NO_CUDA(void, qmaxpool2d_forward_own, CudaContext&, const QPool2dParams&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, quantize_own, CudaContext&, const QuantizeParams&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, dequantize_own, CudaContext&, const QuantizeParams&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, qadd_own, CudaContext&, const QAddParams&, const DeviceTensor&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, qglobal_avg_pool_own, CudaContext&, const QGlobalAvgPoolParams&, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, qrelu_own, CudaContext&, DType, int32_t, const DeviceTensor&, DeviceTensor&)
DL_NO_CUDA(void, qshortcut_option_a_own, CudaContext&, DType, int32_t, int64_t, int64_t, const DeviceTensor&,
           DeviceTensor&)

}  // namespace cuda
}  // namespace driftlab
