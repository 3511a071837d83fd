#include "engine/train/predict_pieces.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/layout.h"
#include "engine/layers/residual_layer.h"

namespace driftlab {

namespace {

int64_t per_input(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Whether layer l computes each input's outputs in an order independent of the batch, whatever
// the threads split (measured for these kinds by tests/test_batch_invariance.cpp and
// tests/test_predict_pieces.cpp; a convolution under the Eigen backend, an im2col GEMM, is not
// claimed). Accumulates the largest per-input activation (elements) and the weights (elements).
bool batch_invariant(Layer& l, int64_t& act, int64_t& weights);

bool all_invariant(Sequential& s, int64_t& act, int64_t& weights) {
  for (std::size_t i = 0; i < s.size(); ++i)
    if (!batch_invariant(s.layer(i), act, weights)) return false;
  return true;
}

bool batch_invariant(Layer& l, int64_t& act, int64_t& weights) {
  const std::string k = l.kind();
  bool ok = k == "batchnorm" || k == "maxpool2d" || k == "avgpool2d" || k == "global_avg_pool" || k == "flatten" ||
            k == "dropout" || dynamic_cast<ActivationLayer*>(&l) != nullptr;
  if (auto* c = dynamic_cast<Conv2dLayer*>(&l)) ok = c->op_backend() != KernelBackend::eigen;
  if (auto* r = dynamic_cast<ResidualLayer*>(&l)) {  // its layers' weights are its own params() below
    int64_t inner = 0;
    ok = all_invariant(r->main(), act, inner) && (!r->projection() || all_invariant(*r->projection(), act, inner));
  }
  if (!ok) return false;
  act = std::max(act, per_input(l.output_shape()));
  for (Param* p : l.params()) weights += p->value.numel();
  for (Param* p : l.buffers()) weights += p->value.numel();
  return true;
}

}  // namespace

std::string PredictPieces::str() const {
  std::ostringstream os;
  if (split == 0) {
    os << "the whole batch at once";
  } else {
    os << "layers 0-" << split - 1 << " in pieces of " << piece << " (largest activation " << activation_bytes
       << " bytes an input, weights " << weight_bytes << " bytes)";
  }
  return os.str();
}

PredictPieces predict_pieces(Sequential& net, int64_t n, DType dt) {
  PredictPieces r;
  int64_t act = per_input(net.input_shape()), weights = 0;
  std::size_t split = 0;
  while (split < net.size() && batch_invariant(net.layer(split), act, weights)) ++split;
  const int64_t bytes = static_cast<int64_t>(dtype_size(dt));
  r.activation_bytes = act * bytes;
  r.weight_bytes = weights * bytes;
  if (split == 0 || n * r.activation_bytes <= kWholeBatchBytes || r.weight_bytes > kReusedWeightBytes) return r;
  int64_t piece = kMinPiece;
  while (piece * 2 * r.activation_bytes <= kPieceBytes) piece *= 2;
  if (piece >= n) return r;
  r.split = split;
  r.piece = piece;
  return r;
}

Tensor predict_in_pieces(RunContext& ctx, Sequential& net, const Tensor& x, const PredictPieces& rule) {
  check(!ctx.record, "predict_in_pieces: a prediction (nothing recorded)");
  if (rule.split == 0) return net.forward(ctx, x);
  const int64_t n = x.dim(0), row = x.numel() / std::max<int64_t>(n, 1);
  const std::size_t esize = dtype_size(x.dtype());
  Tensor joined;
  int64_t out_row = 0;
  for (int64_t b = 0; b < n; b += rule.piece) {
    const int64_t m = std::min(rule.piece, n - b);
    Shape s = x.shape();
    s[0] = m;
    Tensor part = Tensor::empty(s, x.dtype());
    std::memcpy(part.raw(), static_cast<const char*>(x.raw()) + b * row * esize, static_cast<std::size_t>(m * row) * esize);
    Tensor h = rule.split < net.size() ? net.forward_prefix(ctx, part, rule.split) : net.forward(ctx, part);
    if (h.channel_block() != 0) h = to_plain(h);
    if (!joined.defined()) {
      Shape js = h.shape();
      js[0] = n;
      joined = Tensor::empty(js, h.dtype());
      out_row = h.numel() / m;
    }
    std::memcpy(static_cast<char*>(joined.raw()) + b * out_row * esize, h.raw(), h.nbytes());
  }
  return rule.split < net.size() ? net.forward_from(ctx, joined, rule.split) : joined;
}

}  // namespace driftlab
