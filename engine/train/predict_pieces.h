// A prediction of many inputs run in pieces: the layers whose kernels compute each input's outputs
// in an order that does not depend on the batch (convolutions, BatchNorm, pooling, activations,
// residual blocks, flatten) take the batch a piece at a time, so that a piece's activations stay
// in the caches between layers; the layers after them (the dense layers, whose fast GEMMs are not
// batch-invariant: tests/test_batch_invariance.cpp) take the pieces' outputs joined, as one batch.
// The logits are the same bits as the whole batch at once (tests/test_predict_pieces.cpp).
//
// When: a model whose batch-invariant layers hold few weights (re-read from the caches by every
// piece) and whose activations for the whole batch do not fit in them. ResNet-20 predicting 1,000
// CIFAR-shaped inputs: pieces of 64 (0.407 s against 0.442 s at once, docs/BENCHMARKS.md); VGG-16
// (59 MB of convolution weights, planes down to 2x2 that want a large batch): at once. A graph
// model's nodes likewise, up to its first batch-variant node (GraphLayer::forward_prefix).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "engine/layers/layer.h"
#include "engine/layers/sequential.h"

namespace driftlab {

struct PredictPieces {
  std::size_t split = 0;  // layers [0, split) run in pieces; 0: the whole batch at once
  // Where layer `split` is a graph (GraphLayer): its nodes [0, graph_nodes) run in pieces too (the
  // nodes before its first batch-variant one; an imported model is one graph); 0: none.
  std::size_t graph_nodes = 0;
  int64_t piece = 0;      // inputs a piece
  int64_t activation_bytes = 0;  // the largest per-input activation among those layers (input included)
  int64_t weight_bytes = 0;      // their parameters and buffers
  std::string str() const;
};

// The rule's constants: a piece's largest activation at most kPieceBytes (a power of two inputs,
// at least kMinPiece); pieces only when the whole batch's largest activation is above
// kWholeBatchBytes and the layers' weights at most kReusedWeightBytes.
inline constexpr int64_t kPieceBytes = int64_t{4} << 20;
inline constexpr int64_t kMinPiece = 16;
inline constexpr int64_t kWholeBatchBytes = int64_t{16} << 20;
inline constexpr int64_t kReusedWeightBytes = int64_t{8} << 20;

// How net predicts a batch of n inputs of dtype dt.
PredictPieces predict_pieces(Sequential& net, int64_t n, DType dt);

// net's prediction of x (inference semantics, nothing recorded) under the rule: the whole batch at
// once where it says so.
Tensor predict_in_pieces(RunContext& ctx, Sequential& net, const Tensor& x, const PredictPieces& rule);

}  // namespace driftlab
