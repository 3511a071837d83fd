#include "engine/train/predict_pieces.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "core/error.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/graph_layer.h"
#include "engine/layers/layout.h"
#include "engine/layers/residual_layer.h"
#include "engine/layers/visit.h"

namespace driftlab {

namespace {

// Whether each layer computes each input's outputs in an order independent of the batch, whatever
// the threads split (measured for these kinds by tests/test_batch_invariance.cpp and
// tests/test_predict_pieces.cpp), one answer per kind, so that a new kind must be given one.
// Collects, over the layers that are, the largest per-input activation and the weights (elements).
class BatchInvariance final : public LayerVisitor {
 public:
  int64_t act = 0, weights = 0;

  // How many of g's leading nodes are (their layers as take() says; add, sub, mul, concat and
  // reshape are: each input's elements alone), counting their activations and weights.
  std::size_t take_nodes(GraphLayer& g) {
    std::size_t i = 0;
    for (; i < g.num_nodes(); ++i) {
      GraphNode& node = g.node(i);
      if (node.op == GraphOp::multi) break;  // quant/'s int8 layers: not measured
      if (node.op == GraphOp::layer && !take(*node.layer)) break;
      act = std::max(act, shape_numel(g.value_shape(node.output)));
    }
    return i;
  }

  // Whether l is, counting its activation and weights when it is.
  bool take(Layer& l) {
    ok_ = true;
    l.accept(*this);
    if (!ok_) return false;
    act = std::max(act, shape_numel(l.output_shape()));
    for (Param* p : l.params()) weights += p->value.numel();
    for (Param* p : l.buffers()) weights += p->value.numel();
    return true;
  }

  void visit(Conv2dLayer& l) override { ok_ = l.op_backend() != KernelBackend::eigen; }  // Eigen: an im2col GEMM
  void visit(Pool2dLayer&) override {}
  void visit(DenseLayer&) override { ok_ = false; }  // the fast GEMMs block their sums by rows
  void visit(ActivationLayer&) override {}
  void visit(BatchNormLayer&) override {}
  void visit(DropoutLayer&) override {}
  void visit(FlattenLayer&) override {}
  void visit(GlobalAvgPoolLayer&) override {}
  void visit(EmbeddingLayer&) override { ok_ = false; }  // not measured
  void visit(RnnLayer&) override { ok_ = false; }        // its gate GEMMs
  void visit(GraphLayer&) override { ok_ = false; }      // split inside by take_nodes
  void visit(ExternalLayer&) override { ok_ = false; }   // quant/'s int8 layers: not measured
  void visit(ResidualLayer& r) override {  // its layers' weights are its own params(), counted by take()
    BatchInvariance inner;
    ok_ = inner.all(r.main()) && (!r.projection() || inner.all(*r.projection()));
    act = std::max(act, inner.act);
  }

 private:
  bool all(Sequential& s) {
    for (std::size_t i = 0; i < s.size(); ++i)
      if (!take(s.layer(i))) return false;
    return true;
  }
  bool ok_ = true;
};

}  // namespace

std::string PredictPieces::str() const {
  std::ostringstream os;
  if (split == 0 && graph_nodes == 0) {
    os << "the whole batch at once";
  } else {
    if (split > 0) os << "layers 0-" << split - 1;
    if (graph_nodes > 0) os << (split > 0 ? " and " : "") << "graph nodes 0-" << graph_nodes - 1;
    os << " in pieces of " << piece << " (largest activation " << activation_bytes
       << " bytes an input, weights " << weight_bytes << " bytes)";
  }
  return os.str();
}

PredictPieces predict_pieces(Sequential& net, int64_t n, DType dt) {
  PredictPieces r;
  BatchInvariance seen;
  seen.act = shape_numel(net.input_shape());
  std::size_t split = 0;
  while (split < net.size() && seen.take(net.layer(split))) ++split;
  std::size_t graph_nodes = 0;
  if (split < net.size())
    if (auto* g = layer_as<GraphLayer>(net.layer(split))) graph_nodes = seen.take_nodes(*g);
  const int64_t bytes = static_cast<int64_t>(dtype_size(dt));
  r.activation_bytes = seen.act * bytes;
  r.weight_bytes = seen.weights * bytes;
  if ((split == 0 && graph_nodes == 0) || n * r.activation_bytes <= kWholeBatchBytes ||
      r.weight_bytes > kReusedWeightBytes)
    return r;
  int64_t piece = kMinPiece;
  while (piece * 2 * r.activation_bytes <= kPieceBytes) piece *= 2;
  if (piece >= n) return r;
  r.split = split;
  r.graph_nodes = graph_nodes;
  r.piece = piece;
  return r;
}

namespace {
// part (plain, m rows) into rows [b, b + m) of *joined, which is made on the first call (n rows).
void join_rows(Tensor& joined, const Tensor& part, int64_t b, int64_t n) {
  const int64_t m = part.dim(0);
  if (!joined.defined()) {
    Shape js = part.shape();
    js[0] = n;
    joined = Tensor::empty(js, part.dtype());
  }
  const std::size_t row_bytes = part.nbytes() / static_cast<std::size_t>(std::max<int64_t>(m, 1));
  std::memcpy(static_cast<char*>(joined.raw()) + static_cast<std::size_t>(b) * row_bytes, part.raw(), part.nbytes());
}
}  // namespace

Tensor predict_in_pieces(RunContext& ctx, Sequential& net, const Tensor& x, const PredictPieces& rule) {
  check(!ctx.record, "predict_in_pieces: a prediction (nothing recorded)");
  if (rule.split == 0 && rule.graph_nodes == 0) return net.forward(ctx, x);
  GraphLayer* graph = rule.graph_nodes > 0 ? layer_as<GraphLayer>(net.layer(rule.split)) : nullptr;
  check(rule.graph_nodes == 0 || graph, "predict_in_pieces: layer ", rule.split, " is no graph");
  const int64_t n = x.dim(0), row = x.numel() / std::max<int64_t>(n, 1);
  const std::size_t esize = dtype_size(x.dtype());
  Tensor joined;                    // the layers' output (no graph)
  std::vector<Tensor> joined_vals;  // the graph's values that its later nodes read
  for (int64_t b = 0; b < n; b += rule.piece) {
    const int64_t m = std::min(rule.piece, n - b);
    Shape s = x.shape();
    s[0] = m;
    Tensor part = Tensor::empty(s, x.dtype());
    std::memcpy(part.raw(), static_cast<const char*>(x.raw()) + b * row * esize, static_cast<std::size_t>(m * row) * esize);
    Tensor h = part;
    if (rule.split > 0) h = rule.split < net.size() ? net.forward_prefix(ctx, part, rule.split) : net.forward(ctx, part);
    if (h.channel_block() != 0) h = to_plain(h);
    if (!graph) {
      join_rows(joined, h, b, n);
      continue;
    }
    const std::vector<Tensor> live = graph->forward_prefix(ctx, h, rule.graph_nodes);
    joined_vals.resize(live.size());
    for (std::size_t v = 0; v < live.size(); ++v)
      if (live[v].defined()) join_rows(joined_vals[v], live[v], b, n);
  }
  if (!graph) return rule.split < net.size() ? net.forward_from(ctx, joined, rule.split) : joined;
  const Tensor y = graph->forward_from(ctx, std::move(joined_vals), rule.graph_nodes);
  return rule.split + 1 < net.size() ? net.forward_from(ctx, y, rule.split + 1) : y;
}

}  // namespace driftlab
