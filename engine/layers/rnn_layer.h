// Recurrent layer (LSTM or GRU, one layer, one direction): input (N,T,F), zero initial state,
// output the last hidden state (N,u) or every step's (N,T,u) when return_sequences. The
// Policy is resolved in the constructor into RnnParams (gate activation, number of biases,
// GRU reset placement and update convention) and into the init draw and weight-export layout
// (rnn_weight_layout, gru_gate_order). Parameters are stored in the canonical layout of
// core/ops/rnn.h: weight_ih (G*u,F), weight_hh (G*u,u), bias_ih (G*u) [, bias_hh (G*u)],
// gate blocks LSTM i,f,g,o / GRU r,z,n. LstmLayer and GruLayer (lstm_layer.h, gru_layer.h)
// are this class with the cell fixed.
//
// Padding (rnn_mask): when the layer before published a StepMask in the RunContext (an
// embedding marks token id 0) and rnn_mask is not none, padded steps carry the state over
// (the kernels' mask); `zero` also writes 0 as the output of padded steps (return_sequences).
// The last-step output is the final state under both, as Keras's carried output and TF2's
// cuDNN last_output = h are. A layer that returns its last step consumes the mask; one that
// returns sequences passes it on (Keras RNN.compute_mask). rnn_mask=none ignores it.
//
// Weights in the frameworks' own layouts, whatever the Policy (for oracle tests and import):
//   torch: weight_ih_l0 (G*u,F), weight_hh_l0 (G*u,u), bias_ih_l0 (G*u), bias_hh_l0 (G*u);
//          gate row blocks LSTM i,f,g,o / GRU r,z,n.
//   Keras / TF.js: kernel (F,G*u), recurrent_kernel (u,G*u), bias (G*u), or (2,G*u) =
//          [input; recurrent] when the layer has two biases (GRU reset_after=True);
//          gate column blocks LSTM i,f,c,o / GRU z,r,h.
// Setting two framework biases on a one-bias layer stores their sum (exact for the LSTM and
// the reset-before GRU; refused for a reset-after GRU whose recurrent n bias is not zero);
// setting one bias on a two-bias layer sets bias_ih and zeroes bias_hh.
#pragma once
#include "engine/layers/layer.h"
#include "core/ops/rnn.h"
#include "engine/policy.h"

namespace driftlab {

struct RnnSpec {
  int64_t units = 128;
  bool return_sequences = false;  // Keras return_sequences / torch output[:, t] for all t
};

struct TorchRnnWeights {
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;  // bias_hh may be undefined on set (= zeros)
};
struct KerasRnnWeights {
  Tensor kernel, recurrent_kernel, bias;
};

// The RnnParams a Policy gives (batch and steps left 0); throws for a knob combination
// that no framework defines.
RnnParams resolve_rnn(const Policy& policy, RnnCell cell, int64_t input, int64_t hidden);

class RnnLayer : public Layer {
 public:
  DL_ACCEPT_VISITOR(rnn)
  RnnLayer(RnnCell cell, const RnnSpec& spec, const Shape& in, const Policy& policy, Rng& rng);
  std::string kind() const override { return rnn_cell_name(p_.cell); }
  std::string describe() const override;
  Shape output_shape() const override;
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  Tensor backward(RunContext& ctx, const Tensor& dy) override;
  // Under autocast the layer's output is float32 (its new states are float32 sums), whatever its
  // input's format (it rounds its operands itself).
  MathMode set_input_format(MathMode) override { return MathMode::float32; }
  std::vector<Param*> params() override;

  RnnCell cell() const { return p_.cell; }
  int64_t units() const { return p_.hidden; }
  int64_t steps() const { return steps_; }
  int64_t input_size() const { return p_.input; }
  bool return_sequences() const { return return_sequences_; }
  bool two_biases() const { return p_.two_biases; }
  RnnMask mask_mode() const { return mask_mode_; }
  const RnnParams& op_params() const { return p_; }  // batch and steps are 0 here

  TorchRnnWeights torch_weights() const;
  void set_torch_weights(const TorchRnnWeights& w);
  // LSTM peepholes (3, H) rows w_ci, w_cf, w_co: null when the layer has none. Setting null
  // zeroes them (the plain LSTM's function); setting weights into a layer without peepholes
  // is refused (they cannot be represented there).
  const Tensor* peephole_weights() const { return p_.peepholes ? &w_peep_.value : nullptr; }
  void set_peephole_weights(const Tensor* w);
  KerasRnnWeights keras_weights() const;
  void set_keras_weights(const KerasRnnWeights& w);

  // One parameter (from params()) in the layout the layer's Policy names (rnn_weight_layout,
  // gru_gate_order), and back: what `driftlab weights export/import` writes and reads.
  Tensor export_param(const Param& p) const;
  Tensor import_param(const Param& p, const Tensor& framework) const;

 private:
  // (N,T,H) with the rows of padded steps zeroed under rnn_mask=zero; seq itself otherwise.
  Tensor zero_masked_rows(const Tensor& seq, const std::vector<uint8_t>& mask) const;

  RnnParams p_;
  int64_t steps_;
  bool return_sequences_;
  RnnWeightLayout layout_;
  GruGateOrder gru_order_;
  KernelBackend backend_;
  RnnMask mask_mode_;
  template <typename T>
  RnnWeights<T> weights() const;

  Param w_ih_, w_hh_, b_ih_, b_hh_, w_peep_;  // w_peep_: LSTM peepholes (3, H), only with them
  Tensor x_, h_seq_, ws_;  // kept by a training forward for the backward
  std::vector<uint8_t> mask_;  // the mask that forward used (empty: none), for the backward
};

}  // namespace driftlab
