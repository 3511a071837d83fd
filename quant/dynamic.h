// Dynamic-range ("weights-only") quantization: PyTorch's quantize_dynamic, ONNX Runtime's
// quantize_dynamic and TFLite's dynamic range quantization. The dense layers and the LSTM/GRU
// layers keep float32 inputs, outputs and gate math; their weights are stored as int8 with a scale
// (per tensor: each of W_ih, W_hh and the dense W, or per output row), their biases as float32; at
// every call each product quantizes its own input from that input's values (the quant_dyn_* knobs,
// core/ops/quant_dynamic.h) and runs in int32. No calibration data.
//
// An LSTM step (gate order i,f,g,o) computes a = dyn(h W_hh^T + b_hh) + a_in with a_in =
// dyn(x W_ih^T + b_ih), either for the whole (T*N, F) input at once (quant_dyn_input_proj=
// whole_sequence: PyTorch on CPU, aten/src/ATen/native/RNN.cpp FullLayer) or step by step; then the
// fp32 layer's own cell math (core/ops/rnn.h). A GRU with reset after (PyTorch) quantizes h once per
// step for all three blocks; with reset before (Keras's default) the n block's product takes r*h,
// quantized on its own. The products never see another sample's values under symmetric_per_row;
// under the affine rules one scale covers the whole call, so a sample's result depends on its batch
// (as in PyTorch and ONNX Runtime).
//
// Layers supported: dense (+ relu: kept as the fp32 layer after it), lstm, gru (no peepholes, no
// padding mask), flatten, relu. Anything else is refused by name.
#pragma once
#include "engine/model.h"
#include "core/ops/quant_dynamic.h"
#include "quant/qlayers.h"

namespace driftlab {
namespace quant {

// The dynamic-product params (sizes left 1) that the quant_dyn_* knobs of `policy` give.
QDenseDynamicParams dynamic_params(const Policy& policy);

// y = dyn(x W^T + b): x (N, in) float32 -> (N, out) float32.
class QDynDenseLayer : public QuantLayerBase {
 public:
  DL_ACCEPT_QUANT_VISITOR(qdyn_dense)
  QDynDenseLayer(const QDenseDynamicParams& p, QuantizedWeight w, Tensor bias,
                 KernelBackend backend = KernelBackend::reference);
  std::string kind() const override { return "qdense_dynamic"; }
  std::string describe() const override;
  Shape output_shape() const override { return {p_.out}; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  void refresh() override;

 private:
  QDenseDynamicParams p_;
  KernelBackend backend_;
};

// An LSTM or GRU layer (one direction, zero initial state) with dynamically quantized products.
class QDynRnnLayer : public QuantLayerBase {
 public:
  DL_ACCEPT_QUANT_VISITOR(qdyn_rnn)
  // `cell` is the fp32 layer's resolved params (gate activation, biases, GRU rules); steps, return_sequences
  // as in the fp32 layer.
  QDynRnnLayer(const RnnParams& cell, int64_t steps, bool return_sequences, const QDenseDynamicParams& dyn,
               bool whole_sequence, QuantizedWeight w_ih, QuantizedWeight w_hh, Tensor b_ih, Tensor b_hh,
               KernelBackend backend = KernelBackend::reference);
  std::string kind() const override { return p_.cell == RnnCell::lstm ? "lstm_dynamic" : "gru_dynamic"; }
  std::string describe() const override;
  Shape output_shape() const override;
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  void refresh() override;

 private:
  // dyn(x W^T + b) for the weight rows [row0, row0 + rows) of buffer `w` (scale buffer `w + "_scale"`).
  Tensor product(RunContext& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale, const Tensor* bias) const;
  RnnParams p_;
  int64_t steps_;
  bool return_sequences_, whole_sequence_;
  QDenseDynamicParams dyn_;
  KernelBackend backend_;
  // resolved by refresh(): the weights split the way the cell uses them
  Tensor w_ih_, s_ih_, b_ih_, w_hh_, s_hh_, b_hh_;          // LSTM, reset-after GRU: all rows
  Tensor w_hh_rz_, b_hh_rz_, w_hh_n_, b_hh_n_;              // reset-before GRU: r,z rows and n rows
};

// The dynamically quantized model of `fp32` (left unchanged) under the quant_dyn_* knobs (and the
// weight knobs quant_weight_range, quant_weight_scale_op, quant_round, quant_scale_floor) of `policy`.
Model quantize_dynamic(Model& fp32, const Policy& policy);
// What dynamic quantization makes of each fp32 layer kind (the capability table, driftlab model kinds).
SupportColumn dynamic_support();

// Whether `m` has a layer that only dynamic quantization handles (LSTM/GRU).
bool needs_dynamic(Model& m);

}  // namespace quant
}  // namespace driftlab
