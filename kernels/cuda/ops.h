// The CUDA ops: the same explicit parameters as the CPU kernels (core/ops/*.h), device
// tensors in and out. Each op has its own-kernel entry (`*_own`, kernels/cuda/<op>.cu), a
// vendor entry where one exists (`*_cudnn`, `*_cublas`: kernels/cuda/cudnn/, kernels/cuda/cublas/),
// and a dispatcher (`*_cuda`) that follows CudaContext::params(): the vendor path when chosen
// and supported, else the own kernel. Output contracts are the CPU ones: forward and
// backward_data write (=); conv backward_weight and BatchNorm dgamma/dbeta ADD (+=).
// Without nvcc every entry throws "driftlab was built without CUDA" (ops_stub.cpp).
//
// To add an op: 1) declare <op>_own / <op>_cuda here with the CPU params struct;
// 2) write kernels/cuda/<op>.cu; 3) add the throwing stub to ops_stub.cpp;
// 4) add tests/cuda/test_<op>_cuda.cpp comparing with the CPU reference kernel.
#pragma once
#include <cstdint>
#include <vector>

#include "core/ops/activation.h"
#include "core/ops/batchnorm.h"
#include "core/ops/conv2d.h"
#include "core/ops/gemm.h"
#include "core/ops/pool2d.h"
#include "core/ops/qadd.h"
#include "core/ops/qconv2d.h"
#include "core/ops/qdense.h"
#include "core/ops/qpool.h"
#include "core/ops/quantize.h"
#include "core/ops/rnn.h"
#include "core/ops/adaptive.h"
#include "core/ops/sgd.h"
#include "core/ops/softmax_xent.h"
#include "kernels/cuda/runtime.h"

namespace driftlab {
namespace cuda {

// ---- gemm: C = alpha*op(A)*op(B) + beta*C, row-major (core/ops/gemm.h) ----
// a: op(A) (M,K) stored (M,K) or (K,M); b: op(B) (K,N) stored (K,N) or (N,K); c: (M,N).
// Tensors may have any shape with the right element count. sum_order is a reference-only field.
void gemm_own(CudaContext&, const GemmParams&, const DeviceTensor& a, const DeviceTensor& b, DeviceTensor& c);
void gemm_cuda(CudaContext&, const GemmParams&, const DeviceTensor& a, const DeviceTensor& b, DeviceTensor& c);
// Raw device pointers on ctx's stream (used inside conv2d). Tiled shared-memory kernel; when
// M*N gives too few tiles for the GPU it splits K and adds the partial products in a fixed
// order (no atomics), so results are the same on every run.
template <typename T>
void gemm_own_raw(CudaContext&, const GemmParams&, const T* a, const T* b, T* c);

// ---- conv2d (core/ops/conv2d.h): x (N,C,H,W), w (K,C,R,S), b (K), y (N,K,P,Q) ----
// Own: im2col over the whole batch into col (C*R*S, N*P*Q) (flip folded into the gather),
// one gemm, a permute to NCHW with the bias; backward_data: gemm then a col2im gather (no
// atomics); backward_weight: dw += dy' col^T (split-K, fixed order), db += row sums.
void conv2d_forward_own(CudaContext&, const Conv2dParams&, const DeviceTensor& x, const DeviceTensor& w,
                        const DeviceTensor* b, DeviceTensor& y);
void conv2d_backward_data_own(CudaContext&, const Conv2dParams&, const DeviceTensor& dy, const DeviceTensor& w,
                              DeviceTensor& dx);
void conv2d_backward_weight_own(CudaContext&, const Conv2dParams&, const DeviceTensor& x, const DeviceTensor& dy,
                                DeviceTensor& dw, DeviceTensor* db);
void conv2d_forward_cuda(CudaContext&, const Conv2dParams&, const DeviceTensor& x, const DeviceTensor& w,
                         const DeviceTensor* b, DeviceTensor& y);
void conv2d_backward_data_cuda(CudaContext&, const Conv2dParams&, const DeviceTensor& dy, const DeviceTensor& w,
                               DeviceTensor& dx);
void conv2d_backward_weight_cuda(CudaContext&, const Conv2dParams&, const DeviceTensor& x, const DeviceTensor& dy,
                                 DeviceTensor& dw, DeviceTensor* db);

// ---- pool2d (core/ops/pool2d.h): x (N,C,H,W) -> y (N,C,P,Q) ----
// Own kernels give the reference's bits: forward scans each window in the same order (first
// max, NaN wins); backward gathers, for each input, the windows covering it in (oh,ow) order,
// which is the order the reference adds them in.
void maxpool2d_forward_own(CudaContext&, const Pool2dParams&, const DeviceTensor& x, DeviceTensor& y);
void maxpool2d_backward_own(CudaContext&, const Pool2dParams&, const DeviceTensor& x, const DeviceTensor& dy,
                            DeviceTensor& dx);
void avgpool2d_forward_own(CudaContext&, const Pool2dParams&, const DeviceTensor& x, DeviceTensor& y);
void avgpool2d_backward_own(CudaContext&, const Pool2dParams&, const DeviceTensor& dy, DeviceTensor& dx);
// y is the forward output (cuDNN's backward wants it; the own kernel recomputes it).
void maxpool2d_forward_cuda(CudaContext&, const Pool2dParams&, const DeviceTensor& x, DeviceTensor& y);
void maxpool2d_backward_cuda(CudaContext&, const Pool2dParams&, const DeviceTensor& x, const DeviceTensor& y,
                             const DeviceTensor& dy, DeviceTensor& dx);
void avgpool2d_forward_cuda(CudaContext&, const Pool2dParams&, const DeviceTensor& x, DeviceTensor& y);
void avgpool2d_backward_cuda(CudaContext&, const Pool2dParams&, const DeviceTensor& x, const DeviceTensor& y,
                             const DeviceTensor& dy, DeviceTensor& dx);

// ---- activations (core/ops/activation.h), elementwise, own kernels only: each element by the
// CPU's own formulas (activation_value / activation_grad, DL_HOST_DEVICE) ----
void activation_forward_cuda(CudaContext&, const ActivationParams&, const DeviceTensor& x, DeviceTensor& y);
void activation_backward_cuda(CudaContext&, const ActivationParams&, const DeviceTensor& x, const DeviceTensor& y,
                              const DeviceTensor& dy, DeviceTensor& dx);

// ---- BatchNorm (core/ops/batchnorm.h): x (N,C,S...), per-channel gamma/beta/mean/var (C) ----
// Own: one block per channel, sums in double with a fixed tree (no atomics). sum_order is a
// CPU-only field. The inference backward (gradients at inference semantics, for attacks) is own
// kernels only: cuDNN has none, and a vendor request falls back (logged).
void batchnorm_forward_train_own(CudaContext&, const BatchNormParams&, const DeviceTensor& x,
                                 const DeviceTensor& gamma, const DeviceTensor& beta, DeviceTensor& y,
                                 DeviceTensor& mean, DeviceTensor& var, DeviceTensor& invstd);
void batchnorm_forward_infer_own(CudaContext&, const BatchNormParams&, const DeviceTensor& x,
                                 const DeviceTensor& gamma, const DeviceTensor& beta,
                                 const DeviceTensor& running_mean, const DeviceTensor& running_var, DeviceTensor& y);
void batchnorm_backward_own(CudaContext&, const BatchNormParams&, const DeviceTensor& x, const DeviceTensor& dy,
                            const DeviceTensor& gamma, const DeviceTensor& mean, const DeviceTensor& invstd,
                            DeviceTensor& dx, DeviceTensor& dgamma, DeviceTensor& dbeta);
// dx = dy*(gamma*s), dgamma += sum(dy*(x - running_mean)*s), dbeta += sum(dy); s as in the forward.
void batchnorm_backward_infer_own(CudaContext&, const BatchNormParams&, const DeviceTensor& x, const DeviceTensor& dy,
                                  const DeviceTensor& gamma, const DeviceTensor& running_mean,
                                  const DeviceTensor& running_var, DeviceTensor& dx, DeviceTensor& dgamma,
                                  DeviceTensor& dbeta);
void batchnorm_backward_infer_cuda(CudaContext&, const BatchNormParams&, const DeviceTensor& x,
                                   const DeviceTensor& dy, const DeviceTensor& gamma,
                                   const DeviceTensor& running_mean, const DeviceTensor& running_var,
                                   DeviceTensor& dx, DeviceTensor& dgamma, DeviceTensor& dbeta);
// Every BnVarEstimator and zero_debias; steps is a 1-element tensor as on the CPU.
void batchnorm_update_running_cuda(CudaContext&, const BatchNormParams&, const DeviceTensor& mean,
                                   const DeviceTensor& var, DeviceTensor& running_mean, DeviceTensor& running_var,
                                   DeviceTensor& biased_mean, DeviceTensor& biased_var, DeviceTensor& steps);
void batchnorm_forward_train_cuda(CudaContext&, const BatchNormParams&, const DeviceTensor& x,
                                  const DeviceTensor& gamma, const DeviceTensor& beta, DeviceTensor& y,
                                  DeviceTensor& mean, DeviceTensor& var, DeviceTensor& invstd);
void batchnorm_forward_infer_cuda(CudaContext&, const BatchNormParams&, const DeviceTensor& x,
                                  const DeviceTensor& gamma, const DeviceTensor& beta,
                                  const DeviceTensor& running_mean, const DeviceTensor& running_var, DeviceTensor& y);
void batchnorm_backward_cuda(CudaContext&, const BatchNormParams&, const DeviceTensor& x, const DeviceTensor& dy,
                             const DeviceTensor& gamma, const DeviceTensor& mean, const DeviceTensor& invstd,
                             DeviceTensor& dx, DeviceTensor& dgamma, DeviceTensor& dbeta);

// ---- softmax cross-entropy (core/ops/softmax_xent.h): z (N,K), labels on the host ----
// Per-sample losses on the device (one thread per row, class sums in params.sum_order), the
// batch sum on the host in params.sum_order, as the reference. Labels are checked on the host.
double softmax_xent_forward_own(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& z,
                                const std::vector<int32_t>& labels);
void softmax_xent_backward_own(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& z,
                               const std::vector<int32_t>& labels, DeviceTensor& dz);
double softmax_xent_forward_cuda(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& z,
                                 const std::vector<int32_t>& labels);
void softmax_xent_backward_cuda(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& z,
                                const std::vector<int32_t>& labels, DeviceTensor& dz);
// The same with the labels already on the device (int32 (N), checked with check_xent_labels
// before they went up) and the per-sample losses left there (losses (N), z's dtype): nothing
// waits for the device, so a training step can read its loss with everything else at once.
// softmax_xent_total sums them on the host as softmax_xent_forward_cuda does.
void softmax_xent_losses_own(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& z,
                             const DeviceTensor& labels, DeviceTensor& losses);
void softmax_xent_backward_own(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& z,
                               const DeviceTensor& labels, DeviceTensor& dz);
void softmax_xent_losses_cuda(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& z,
                              const DeviceTensor& labels, DeviceTensor& losses);
void softmax_xent_backward_cuda(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& z,
                                const DeviceTensor& labels, DeviceTensor& dz);
// "fn: label L of sample i is outside 0..K-1" (and the count against n rows).
void check_xent_labels(const char* fn, int64_t n, int64_t k, const std::vector<int32_t>& labels);
// The batch loss from per-sample losses on the host: their sum in params.sum_order, divided by
// N when params.mean (the reference's reduction).
double softmax_xent_total(const SoftmaxXentParams&, const Tensor& losses);

// ---- rnn (core/ops/rnn.h): one LSTM / GRU layer over a sequence, forward and BPTT ----
// x (N,T,F) and h_seq (N,T,H) batch-major as on the CPU; weights in the canonical layout
// (w_ih (G*H,F), w_hh (G*H,H), gate row blocks LSTM i,f,g,o / GRU r,z,n). mask: null, or
// (N,T) of 1 = data / 0 = padding (float, in x's dtype), with the CPU kernels' semantics.
// Own kernels (kernels/cuda/rnn.cu): every RnnParams field; time-major internals; per step the
// gemms x_t W_ih^T and h_{t-1} W_hh^T (the reset-before GRU a third) and one elementwise kernel
// per cell (thread per sample and unit), with the reference's association of sums and the gate
// math rounded as on the CPU (-fmad=false); the weight gradients and dx are one gemm each over
// all N*T rows (the own gemm takes up to 4,194,240 rows: N*T beyond that is refused by it).
// No atomics: the same bits on every run.
// cuDNN (kernels/cuda/cudnn/rnn_cudnn.cpp): cudnnRNNForward / BackwardData_v8 /
// BackwardWeights_v8 where cuDNN has the cell (rnn_cudnn_supports); weights copied into cuDNN's
// weight space per call (linear layer ids = the canonical gate blocks, as PyTorch lays them out).
// Forward writes h_seq (=); backward writes dx (=, when non-null) and ADDS into the gradients.
struct RnnDeviceWeights {
  const DeviceTensor *w_ih = nullptr, *w_hh = nullptr, *b_ih = nullptr;
  const DeviceTensor *b_hh = nullptr;    // null unless p.two_biases
  const DeviceTensor *w_peep = nullptr;  // (3*H): null unless p.peepholes
};
struct RnnDeviceGrads {
  DeviceTensor *dw_ih = nullptr, *dw_hh = nullptr, *db_ih = nullptr, *db_hh = nullptr, *dw_peep = nullptr;
};
// What a training forward keeps for its backward; which fields are set depends on the
// implementation that ran (`vendor`). Own: x_tm (T,N,F); h_tm (T+1,N,H) with h_{-1} = 0 first;
// c_tm (T+1,N,H) LSTM cell states; pre/act (T,N,G*H) gate pre-activations and activations;
// aux (T,N,H) the GRU's recurrent n part (as core/ops/rnn.h's aux); rh (T,N,H) the
// reset-before GRU's r*h_{t-1}; mask_tm (T,N). cuDNN: x_tm, y_tm (T,N,H), its reserve space,
// and the weight space it ran with.
struct RnnDeviceState {
  bool vendor = false;
  DeviceTensor x_tm, h_tm, c_tm, pre, act, aux, rh, mask_tm;
  DeviceTensor y_tm;
  DeviceBytes reserve, weight_space;
};
// Throw naming the function and tensor when weights or gradients do not fit p and dtype (shape,
// presence of b_hh / w_peep, dtype); used by both implementations.
void check_rnn_weights(const char* fn, const RnnParams& p, const RnnDeviceWeights& w, DType dtype);
void check_rnn_grads(const char* fn, const RnnParams& p, const RnnDeviceGrads& g, DType dtype);
// dh ((N,T,H), or (N,H) with p.dh_last_step) and dx ((N,T,F) or null) of a backward.
void check_rnn_backward_io(const char* fn, const RnnParams& p, const DeviceTensor& dh, const DeviceTensor* dx,
                           DType dtype);
// p.batch and p.steps are the call's. state null: inference (nothing kept); else it is reset
// and filled.
void rnn_forward_own(CudaContext&, const RnnParams& p, const DeviceTensor& x, const DeviceTensor* mask,
                     const RnnDeviceWeights& w, DeviceTensor& h_seq, RnnDeviceState* state);
// dh: (N,T,H), or (N,H) h_T's gradient when p.dh_last_step. dx: (N,T,F) or null.
void rnn_backward_own(CudaContext&, const RnnParams& p, const RnnDeviceWeights& w, const RnnDeviceState& state,
                      const DeviceTensor& dh, DeviceTensor* dx, const RnnDeviceGrads& g);
// cuDNN has: sigmoid gates, no peepholes, no padding mask; LSTM with one or two biases; GRU
// only reset-after with z keeping the old state (h' = (1-z)*n + z*h: cuDNN's, PyTorch's).
// (Inline: a pure query that every build, with or without nvcc, can answer and test.)
inline bool rnn_cudnn_supports(const RnnParams& p, bool masked) {
  if (masked || p.peepholes || p.gate_act.kind != ActKind::sigmoid) return false;
  return p.cell == RnnCell::lstm || (p.gru_reset_after && p.gru_z_keeps_old);
}
void rnn_forward_cudnn(CudaContext&, const RnnParams& p, const DeviceTensor& x, const RnnDeviceWeights& w,
                       DeviceTensor& h_seq, RnnDeviceState* state);
void rnn_backward_cudnn(CudaContext&, const RnnParams& p, const RnnDeviceWeights& w, const RnnDeviceState& state,
                        const DeviceTensor& dh, DeviceTensor* dx, const RnnDeviceGrads& g);
// Dispatch on CudaExecParams::rnn_backend: cuDNN when chosen and supported, else own (a
// fallback is logged in algo_log() as "own (fallback)"). The backward follows the forward's.
void rnn_forward_cuda(CudaContext&, const RnnParams& p, const DeviceTensor& x, const DeviceTensor* mask,
                      const RnnDeviceWeights& w, DeviceTensor& h_seq, RnnDeviceState* state);
void rnn_backward_cuda(CudaContext&, const RnnParams& p, const RnnDeviceWeights& w, const RnnDeviceState& state,
                       const DeviceTensor& dh, DeviceTensor* dx, const RnnDeviceGrads& g);
// The recurrent layer's glue: y (N,H) = h_seq[:, T-1, :]; and rows (n,t) of seq (N,T,H) with
// mask 0 set to 0 in place (rnn_mask=zero).
void rnn_last_step_cuda(CudaContext&, const DeviceTensor& h_seq, DeviceTensor& y);
void rnn_zero_masked_rows_cuda(CudaContext&, const DeviceTensor& mask, DeviceTensor& seq);
// Helper of the cuDNN path (kernel in rnn.cu): out (B,A,C) = in (A,B,C) (batch-major <->
// time-major).
void swap_batch_time_cuda(CudaContext&, const DeviceTensor& in, DeviceTensor& out);

// ---- embedding (engine/layers/embedding_layer.h) ----
// y (N*T rows of D) = table rows of `ids` (checked by the caller: 0 <= id < V).
void embedding_forward_cuda(CudaContext&, const DeviceTensor& table, const std::vector<int64_t>& ids,
                            DeviceTensor& y);
// dtable[id] += dy rows with that id, added in ascending position order (the CPU layer's
// order: the same bits); one thread per (distinct id, feature), no atomics.
void embedding_backward_cuda(CudaContext&, const std::vector<int64_t>& ids, const DeviceTensor& dy,
                             DeviceTensor& dtable);

// ---- SGD step (core/ops/sgd.h), one parameter tensor, elementwise ----
// Each element by the CPU's own formula, sgd_update (DL_HOST_DEVICE): the CPU's bits.
// p, grad, state: same shape; p and state updated in place.
void sgd_step_cuda(CudaContext&, const SgdStepParams&, DeviceTensor& p, const DeviceTensor& grad,
                   DeviceTensor& state);
// Adam (state m, v) and RMSprop (state mean square, momentum) steps by the CPU's formulas
// (core/ops/adaptive.h): the CPU's bits.
void adam_step_cuda(CudaContext&, const AdamStepParams&, DeviceTensor& p, const DeviceTensor& grad, DeviceTensor& m,
                    DeviceTensor& v);
void rmsprop_step_cuda(CudaContext&, const RmspropStepParams&, DeviceTensor& p, const DeviceTensor& grad,
                       DeviceTensor& v, DeviceTensor& b);

// ---- L-inf attack step (core/ops/linf_step.h), elementwise ----
// The attack's step in its own formula (DL_HOST_DEVICE): the host loop's bits. x0, g, xa: the same
// shape (N, ...); frozen: N uint8 flags (a flagged sample is left as it is); xa updated in place.
// eps, step, lo, hi rounded to the dtype as the host rounds them.
struct LinfStepParams {
  bool fgsm = true;
  double eps = 0, step = 0, lo = 0, hi = 1;
};
void linf_step_cuda(CudaContext&, const LinfStepParams&, const DeviceTensor& x0, const DeviceTensor& g,
                    const DeviceTensor& frozen, DeviceTensor& xa);
// out (N, uint8) = 1 where row n of g (N, ...) is exactly zero everywhere, else 0.
void rows_all_zero_cuda(CudaContext&, const DeviceTensor& g, DeviceTensor& out);

// ---- tensor helpers for the device layers (kernels/cuda/tensor_ops.cu), own kernels only ----
// Elementwise or one thread per output, each sum in a fixed order: the same bits on every run.
// y += x (same numel).
void add_inplace_cuda(CudaContext&, DeviceTensor& y, const DeviceTensor& x);
// y = a * b elementwise (same numel).
void multiply_cuda(CudaContext&, const DeviceTensor& a, const DeviceTensor& b, DeviceTensor& y);
// y (rows, cols) += b (cols) on every row.
void add_row_bias_cuda(CudaContext&, DeviceTensor& y, const DeviceTensor& b);
// db (cols) += column sums of dy (rows, cols), rows added in ascending order.
void add_column_sums_cuda(CudaContext&, const DeviceTensor& dy, DeviceTensor& db);
// The same on raw device pointers (row-major, contiguous): for sums into part of a tensor.
template <typename T>
void add_column_sums_raw(CudaContext&, int64_t rows, int64_t cols, const T* dy, T* db);
// dst[i] += src[i] for i < count on raw blocks of dtype (add_inplace_cuda's kernel; cuDNN's
// weight space holds the RNN's gradients this way).
void add_block_cuda(CudaContext&, DType dtype, const void* src, void* dst, int64_t count);
// Spatial mean: x (N,C,H,W) -> y (N,C), each sum ascending over H*W then divided (the CPU's order).
void spatial_mean_forward_cuda(CudaContext&, const DeviceTensor& x, DeviceTensor& y);
// dx (N,C,H,W) = dy (N,C) / (H*W) broadcast over each map.
void spatial_mean_backward_cuda(CudaContext&, const DeviceTensor& dy, DeviceTensor& dx);
// (N,C,H,W) <-> (N,H,W,C) element copy; `to_channels_last` chooses the direction. x and y
// hold N*C*H*W elements; c, h, w name the per-sample axes of the NCHW side.
void permute_channels_cuda(CudaContext&, const DeviceTensor& x, DeviceTensor& y, int64_t c, int64_t h, int64_t w,
                           bool to_channels_last);
// Strided subsample with zero channels around it, added into y:
//   y[n, ci + pad_before, i, j] += x[n, ci, i*stride, j*stride]   x (N,C,H,W), y (N,OC,OH,OW).
// backward: dx[n, ci, i*stride, j*stride] += dy[n, ci + pad_before, i, j] (every dx element gets
// at most one term, so there is nothing to order).
struct ChannelPadSubsampleParams {
  int64_t n = 0, c = 0, h = 0, w = 0;  // input
  int64_t oc = 0, oh = 0, ow = 0;      // output
  int64_t stride = 1, pad_before = 0;
};
void channel_pad_subsample_add_cuda(CudaContext&, const ChannelPadSubsampleParams&, const DeviceTensor& x,
                                    DeviceTensor& y);
void channel_pad_subsample_add_backward_cuda(CudaContext&, const ChannelPadSubsampleParams&, const DeviceTensor& dy,
                                             DeviceTensor& dx);
// sum of t[i]^2 in double (one block, fixed tree): synchronises and returns it to the host.
double sum_squares_cuda(CudaContext&, const DeviceTensor& t);
// flags[slot] = 1 when t holds a NaN or an infinity (flags is float32; nothing is written
// otherwise, so zero the flags first). Many launches, one copy of flags back to the host.
void flag_nonfinite_cuda(CudaContext&, const DeviceTensor& t, DeviceTensor& flags, int64_t slot);
// The addresses and sizes of many tensors of one dtype, on the device, for kernels that cover
// them all in one launch. bind() uploads (and waits) only when the tensors differ from the last
// bind: a training step's gradients, allocated once, go up once.
class TensorTable {
 public:
  void bind(CudaContext&, const std::vector<const DeviceTensor*>& tensors);
  int64_t size() const { return size_; }
  int64_t max_numel() const { return max_numel_; }
  DType dtype() const { return dtype_; }
  const void* device() const { return table_.get(); }

 private:
  DeviceBytes table_;
  std::vector<char> host_;  // what table_ holds
  int64_t size_ = 0, max_numel_ = 0;
  DType dtype_ = DType::f32;
};
// flags[i] = 1 when tensor i of the table holds a NaN or an infinity (nothing written otherwise:
// zero the flags first); one launch for all of them.
void flag_nonfinite_many_cuda(CudaContext&, const TensorTable& table, DeviceTensor& flags);

// ---- int8 (core/ops/quant.h), own kernels only (kernels/cuda/quant.cu): the reference kernels'
// contracts and bytes (kernels/cpu/ref/quant_ref.cpp), device tensors of int8/uint8/int32/float32 ----
// qconv2d: x (N,C,H,W) int8|uint8, w (K,C,R,S) int8, bias (K) int32 | null -> y (N,K,P,Q) int8|uint8.
// qdense: x (N,in), w (out,in), bias (out) -> y (N,out). One implicit-GEMM body: the int32 dot
// products by __dp4a on activation bytes shifted to int8, a weight-sum correction for the zero
// point, then requantize_one per element (every RequantRule, per tensor or per channel).
void qconv2d_forward_own(CudaContext&, const QConv2dParams&, const DeviceTensor& x, const DeviceTensor& w,
                         const DeviceTensor* bias, DeviceTensor& y);
void qdense_forward_own(CudaContext&, const QDenseParams&, const DeviceTensor& x, const DeviceTensor& w,
                        const DeviceTensor* bias, DeviceTensor& y);
// x (N,C,H,W) -> y (N,C,P,Q), int8|uint8: the integer max of each window (padding never wins).
void qmaxpool2d_forward_own(CudaContext&, const QPool2dParams&, const DeviceTensor& x, DeviceTensor& y);
// float32 x -> q (int8, uint8 or int32) and back, per tensor or per channel of p.axis.
void quantize_own(CudaContext&, const QuantizeParams&, const DeviceTensor& x, DeviceTensor& q);
void dequantize_own(CudaContext&, const QuantizeParams&, const DeviceTensor& q, DeviceTensor& x);
// The residual block's pieces: qadd (a, b, y of one shape; every QAddRule, qadd_one per element),
// the global average (x (N,C,H,W) -> y (N,C), qgap_one per plane), the quantized ReLU max(q, zp),
// and the option-A shortcut (x subsampled by `stride`, zero-point channels before and after).
void qadd_own(CudaContext&, const QAddParams&, const DeviceTensor& a, const DeviceTensor& b, DeviceTensor& y);
void qglobal_avg_pool_own(CudaContext&, const QGlobalAvgPoolParams&, const DeviceTensor& x, DeviceTensor& y);
void qrelu_own(CudaContext&, DType, int32_t zero_point, const DeviceTensor& x, DeviceTensor& y);
void qshortcut_option_a_own(CudaContext&, DType, int32_t zero_point, int64_t stride, int64_t pad_before,
                            const DeviceTensor& x, DeviceTensor& s);

// ---- vendor paths (kernels/cuda/cublas/, kernels/cuda/cudnn/), chosen by CudaExecParams ----
// cuBLAS gemm (float: cublasSgemm with the tf32_matmul math mode; double: cublasDgemm).
void gemm_cublas(CudaContext&, const GemmParams&, const DeviceTensor& a, const DeviceTensor& b, DeviceTensor& c);
// cuDNN convolution: symmetric pads only (cuDNN has one pad per axis); flip = CUDNN_CONVOLUTION,
// else CUDNN_CROSS_CORRELATION. The algorithm is chosen per CudaExecParams (heuristic or
// exhaustive, deterministic only when asked, workspace limit) and recorded in ctx.algo_log().
bool conv2d_cudnn_supports(const Conv2dParams&, DType);
void conv2d_forward_cudnn(CudaContext&, const Conv2dParams&, const DeviceTensor& x, const DeviceTensor& w,
                          const DeviceTensor* b, DeviceTensor& y);
void conv2d_backward_data_cudnn(CudaContext&, const Conv2dParams&, const DeviceTensor& dy, const DeviceTensor& w,
                                DeviceTensor& dx);
void conv2d_backward_weight_cudnn(CudaContext&, const Conv2dParams&, const DeviceTensor& x, const DeviceTensor& dy,
                                  DeviceTensor& dw, DeviceTensor* db);
// cuDNN pooling: symmetric pads; max pooling only with ties=first (cuDNN documents no tie
// rule: tests use distinct values); CUDNN_POOLING_MAX_DETERMINISTIC when deterministic.
bool pool2d_cudnn_supports(const Pool2dParams&, bool is_max);
void pool2d_forward_cudnn(CudaContext&, const Pool2dParams&, bool is_max, const DeviceTensor& x, DeviceTensor& y);
void pool2d_backward_cudnn(CudaContext&, const Pool2dParams&, bool is_max, const DeviceTensor& x,
                           const DeviceTensor& y, const DeviceTensor& dy, DeviceTensor& dx);
// cuDNN BatchNorm (CUDNN_BATCHNORM_SPATIAL). Training returns cuDNN's saved mean and inverse
// std; var is recovered as 1/invstd^2 - eps (the running update stays driftlab's, since cuDNN
// knows only the unbiased estimator). Inference: not for the inv_std estimator.
bool batchnorm_cudnn_supports_infer(const BatchNormParams&);
void batchnorm_forward_train_cudnn(CudaContext&, const BatchNormParams&, const DeviceTensor& x,
                                   const DeviceTensor& gamma, const DeviceTensor& beta, DeviceTensor& y,
                                   DeviceTensor& mean, DeviceTensor& var, DeviceTensor& invstd);
void batchnorm_forward_infer_cudnn(CudaContext&, const BatchNormParams&, const DeviceTensor& x,
                                   const DeviceTensor& gamma, const DeviceTensor& beta,
                                   const DeviceTensor& running_mean, const DeviceTensor& running_var,
                                   DeviceTensor& y);
void batchnorm_backward_cudnn(CudaContext&, const BatchNormParams&, const DeviceTensor& x, const DeviceTensor& dy,
                              const DeviceTensor& gamma, const DeviceTensor& mean, const DeviceTensor& invstd,
                              DeviceTensor& dx, DeviceTensor& dgamma, DeviceTensor& dbeta);
// cuDNN softmax over the rows of z (N,K): probabilities (CUDNN_SOFTMAX_ACCURATE) or log-probabilities
// (CUDNN_SOFTMAX_LOG). The loss then takes them instead of recomputing the softmax.
void softmax_rows_cudnn(CudaContext&, bool log, const DeviceTensor& z, DeviceTensor& out);
double softmax_xent_forward_cudnn(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& z,
                                  const std::vector<int32_t>& labels);
void softmax_xent_backward_cudnn(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& z,
                                 const std::vector<int32_t>& labels, DeviceTensor& dz);
void softmax_xent_losses_cudnn(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& z,
                               const DeviceTensor& labels, DeviceTensor& losses);
void softmax_xent_backward_cudnn(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& z,
                                 const DeviceTensor& labels, DeviceTensor& dz);

// Internal helpers of the vendor paths (kernels in *.cu, called from the .cpp vendor files).
// var[c] = 1/invstd[c]^2 - eps
void batchnorm_var_from_invstd(CudaContext&, double eps, const DeviceTensor& invstd, DeviceTensor& var);
// Loss/gradient from softmax rows given by cuDNN: `given` holds log-probabilities for
// log_softmax and probabilities for the other two formulations.
double softmax_xent_forward_given(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& given,
                                  const std::vector<int32_t>& labels);
void softmax_xent_backward_given(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& given,
                                 const std::vector<int32_t>& labels, DeviceTensor& dz);
void softmax_xent_losses_given(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& given,
                               const DeviceTensor& labels, DeviceTensor& losses);
void softmax_xent_backward_given(CudaContext&, const SoftmaxXentParams&, const DeviceTensor& given,
                                 const DeviceTensor& labels, DeviceTensor& dz);

}  // namespace cuda
}  // namespace driftlab
