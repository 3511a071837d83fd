// The reference kernels: single-threaded where an order matters (sums in the params'
// SumOrder), float and double, every params field honoured. They are the oracle for every fast
// CPU, oneDNN, Eigen, CUDA and cuDNN kernel, and the registry's fallback. Layers reach them
// through the registry (core/ops/registry.h); tests, benchmarks and `driftlab explain` call
// them directly. Output contracts are those of each op header (core/ops/<op>.h).
#pragma once
#include <cstdint>
#include <vector>

#include "core/ops/activation.h"
#include "core/ops/batchnorm.h"
#include "core/ops/binary.h"
#include "core/ops/conv2d.h"
#include "core/ops/conv_block.h"
#include "core/ops/gemm.h"
#include "core/ops/pool2d.h"
#include "core/ops/qadd.h"
#include "core/ops/qconv2d.h"
#include "core/ops/qdense.h"
#include "core/ops/qpool.h"
#include "core/ops/quantize.h"
#include "core/ops/rnn.h"
#include "core/ops/sgd.h"
#include "core/ops/softmax_xent.h"

namespace driftlab {

// conv2d (conv2d_ref.cpp): x (N,C,H,W), w (K,C,R,S), b (K) | null -> y (N,K,P,Q)
void conv2d_forward_ref(const Conv2dParams&, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y);
void conv2d_forward_fused_ref(const Conv2dParams&, const Tensor& x, const Tensor& w, const Tensor* b,
                              const ConvChannelOp* pre, const ConvChannelOp* post, Tensor& y);
// While one lives, the reference conv2d runs its generic loops for every case (its depthwise
// case's other loops off): the test that the two give the same bits.
struct Conv2dRefGenericLoops {
  Conv2dRefGenericLoops();
  ~Conv2dRefGenericLoops();
  Conv2dRefGenericLoops(const Conv2dRefGenericLoops&) = delete;
  Conv2dRefGenericLoops& operator=(const Conv2dRefGenericLoops&) = delete;
};
void conv2d_backward_data_ref(const Conv2dParams&, const Tensor& dy, const Tensor& w, Tensor& dx);
void conv2d_backward_weight_ref(const Conv2dParams&, const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db);

// conv_block (conv_block_ref.cpp): the three references above and below composed
void conv_block_forward_ref(const ConvBlockParams&, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,
                            Tensor* z);
void conv_block_backward_ref(const ConvBlockParams&, const Tensor& x, const Tensor& w, const Tensor& z,
                             const Tensor& dy, Tensor* dx, Tensor* dw, Tensor* db);

// gemm (gemm_ref.cpp): C = alpha*op(A)*op(B) + beta*C
template <typename T>
void gemm_ref(const GemmParams& p, const T* a, const T* b, T* c);

// pooling (pool2d_ref.cpp): x (N,C,H,W) -> y (N,C,P,Q)
void maxpool2d_forward_ref(const Pool2dParams&, const Tensor& x, Tensor& y);
void maxpool2d_backward_ref(const Pool2dParams&, const Tensor& x, const Tensor& dy, Tensor& dx);
void avgpool2d_forward_ref(const Pool2dParams&, const Tensor& x, Tensor& y);
void avgpool2d_backward_ref(const Pool2dParams&, const Tensor& dy, Tensor& dx);

// add, sub, mul under broadcasting and concat (binary_ref.cpp, core/ops/binary.h). The backward
// takes the operands' shapes, and the operands themselves only for mul (a, b may be null for add
// and sub); da/db may be null (not wanted).
void binary_forward_ref(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y);
void binary_backward_ref(BinaryOp op, const Shape& a_shape, const Shape& b_shape, const Tensor* a, const Tensor* b,
                         const Tensor& dy, Tensor* da, Tensor* db);
void concat_forward_ref(int axis, const std::vector<const Tensor*>& xs, Tensor& y);
void concat_backward_ref(int axis, const Tensor& dy, const std::vector<Tensor*>& dxs);

// activations (activation_ref.cpp), elementwise
void activation_forward_ref(const ActivationParams&, const Tensor& x, Tensor& y);
void activation_backward_ref(const ActivationParams&, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx);

// BatchNorm (batchnorm_ref.cpp): x (N,C,S); per-channel tensors (C)
void batchnorm_forward_train_ref(const BatchNormParams&, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 Tensor& y, Tensor& mean, Tensor& var, Tensor& invstd);
void batchnorm_backward_ref(const BatchNormParams&, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                            const Tensor& beta, const Tensor& mean, const Tensor& invstd, Tensor& dx, Tensor& dgamma,
                            Tensor& dbeta);
void batchnorm_forward_infer_ref(const BatchNormParams&, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 const Tensor& running_mean, const Tensor& running_var, Tensor& y);
void batchnorm_forward_infer_add_ref(const BatchNormParams&, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& running_mean, const Tensor& running_var, const Tensor& residual,
                                     Tensor& y);
void batchnorm_backward_infer_ref(const BatchNormParams&, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                  const Tensor& beta, const Tensor& running_mean, const Tensor& running_var, Tensor& dx,
                                  Tensor& dgamma, Tensor& dbeta);
void batchnorm_update_running(const BatchNormParams&, const Tensor& mean, const Tensor& var, Tensor& running_mean,
                              Tensor& running_var, Tensor& biased_mean, Tensor& biased_var, Tensor& steps);

// softmax cross-entropy (softmax_xent_ref.cpp): z (N,K)
double softmax_xent_forward_ref(const SoftmaxXentParams&, const Tensor& z, const std::vector<int32_t>& labels);
void softmax_xent_backward_ref(const SoftmaxXentParams&, const Tensor& z, const std::vector<int32_t>& labels,
                               Tensor& dz);

// LSTM / GRU (rnn_ref.cpp), raw pointers in the canonical layout of core/ops/rnn.h
template <typename T>
void rnn_forward_ref(const RnnParams&, const RnnExec&, const T* x, const uint8_t* mask, const RnnWeights<T>& w,
                     T* h_seq, T* ws);
template <typename T>
void rnn_backward_ref(const RnnParams&, const RnnExec&, const T* x, const uint8_t* mask, const RnnWeights<T>& w,
                      const T* h_seq, const T* ws, const T* dh_seq, T* dx, const RnnGrads<T>& g);
// Their autocast rounding points (rnn_ref_autocast.cpp; RnnParams::autocast), float32 only: the
// reference kernel's entry points call these when params.autocast is a 16-bit format.
void rnn_forward_autocast(const RnnParams&, const float* x, const uint8_t* mask, const RnnWeights<float>& w,
                          float* h_seq, float* ws);
void rnn_backward_autocast(const RnnParams&, const float* x, const uint8_t* mask, const RnnWeights<float>& w,
                           const float* h_seq, const float* ws, const float* dh_seq, float* dx,
                           const RnnGrads<float>& g);

// SGD step (sgd_ref.cpp): p, grad, state of one parameter tensor
void sgd_step_ref(const SgdStepParams&, Tensor& p, const Tensor& grad, Tensor& state);

// int8 (quant_ref.cpp): x (N,C,H,W) int8|uint8, w (K,C,R,S) int8, bias (K) int32 | null -> y (N,K,P,Q);
// dense x (N,in), w (out,in); quantize float32 -> int, dequantize int -> float32
void qconv2d_forward_ref(const QConv2dParams&, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y);
void qdense_forward_ref(const QDenseParams&, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y);
void qmaxpool2d_forward_ref(const QPool2dParams&, const Tensor& x, Tensor& y);
void qadd_forward_ref(const QAddParams&, const Tensor& a, const Tensor& b, Tensor& y);
void qglobal_avg_pool_forward_ref(const QGlobalAvgPoolParams&, const Tensor& x, Tensor& y);  // (N,C,H,W) -> (N,C)
void quantize_forward_ref(const QuantizeParams&, const Tensor& x, Tensor& q);
void dequantize_forward_ref(const QuantizeParams&, const Tensor& q, Tensor& x);

}  // namespace driftlab
