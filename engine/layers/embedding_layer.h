// Embedding: token ids (N,T), stored as float (exact integers), -> rows of a table (V,D):
// y[n,t,:] = table[id[n,t],:], output (N,T,D). Backward ADDS dy[n,t,:] into table.grad[id,:]
// (in ascending (n,t) order, so repeated ids sum in a fixed order) and returns a zero dx when
// the container asks for one: the output is piecewise constant in the id values, and neither
// framework differentiates through ids (Keras casts them to int32, torch takes a LongTensor).
// Row 0 (the padding id of engine/data/imdb.h) is an ordinary trained row, as in Keras
// (mask_zero=False) and torch (padding_idx=None), the defaults of both.
//
// Every forward publishes which steps hold id 0 as ctx.step_mask (layer.h), what Keras's
// Embedding(mask_zero=True).compute_mask returns; whether a recurrent layer after it uses the
// mask is the Policy's rnn_mask (none: the padding is computed like data). Under carry/zero the
// padded steps' outputs never reach the loss, so row 0 gets no gradient, as in Keras.
//
// An id that is not an integer in 0..V-1 is an error naming the layer, the id and where it
// is; nothing is clamped. (Keras on TF gathers on CPU with a range check too; torch raises
// "index out of range in self".)
//
// The initialiser is a constructor argument, not a Policy knob: it is resolved from the
// preset name by embedding_init_for() when the caller does not choose one.
#pragma once
#include <optional>

#include "engine/layers/layer.h"
#include "engine/policy.h"

namespace driftlab {

const char* embedding_init_name(EmbeddingInit init);
// The Policy's embedding_init knob (torch: normal_1; tensorflow and theano: uniform_0p05).
EmbeddingInit embedding_init_for(const Policy& policy);

struct EmbeddingArgs {
  int64_t num_ids = 0;                  // V: rows of the table; ids must be 0..V-1
  int64_t dim = 0;                      // D: features per id
  std::optional<EmbeddingInit> init;    // unset: embedding_init_for(policy)
};

// Fills a (V,D) table as the framework does. normal_1 follows PyTorch's CPU normal_ for
// contiguous tensors of >= 16 elements: every element first gets U[0,1) from the stream,
// then each block of 16 becomes 8 Box-Muller pairs (u1 = 1 - d[j], u2 = d[j+8]: d[j] =
// sqrt(-2 ln u1) cos(2 pi u2), d[j+8] = ... sin), and a last partial block is redrawn as the
// final 16 elements. With the torch preset's stream this reproduces torch.manual_seed(S);
// nn.Embedding(V,D) up to the last bits of PyTorch's vectorised log/sin/cos. Tables of
// fewer than 16 elements use the same pairs on one block-less pass (not PyTorch's sequence).
void init_embedding(Tensor& table, EmbeddingInit init, Rng& rng);

class EmbeddingLayer : public Layer {
 public:
  DL_ACCEPT_VISITOR(embedding)
  // in: the per-sample input shape, (T,).
  EmbeddingLayer(const EmbeddingArgs& args, const Shape& in, const Policy& policy, Rng& rng);
  std::string kind() const override { return "embedding"; }
  std::string describe() const override;
  Shape output_shape() const override { return {steps_, dim_}; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  Tensor backward(RunContext& ctx, const Tensor& dy) override;
  std::vector<Param*> params() override { return {&table_}; }
  EmbeddingInit init() const { return init_; }
  int64_t dim() const { return dim_; }
  int64_t steps() const { return steps_; }
  // The ids of x (N,T), each checked to be an integer in 0..V-1 (the error names the id, its
  // position and x's shape); shared with the device layer.
  std::vector<int64_t> read_ids(const Tensor& x) const;
  // Which of the (N,T) ids are data (not the padding id 0): what forward publishes.
  static StepMask padding_mask(const std::vector<int64_t>& ids, int64_t batch, int64_t steps);

 private:
  int64_t num_ids_, dim_, steps_;
  EmbeddingInit init_;
  Param table_;
  std::vector<int64_t> ids_;  // the last training forward's ids, for backward
  int64_t batch_ = -1;
};

}  // namespace driftlab
