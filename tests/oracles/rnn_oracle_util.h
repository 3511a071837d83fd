// Shared by the recurrent oracle tests (test_rnn_oracle_torch.cpp, test_rnn_oracle_tfjs.cpp): the
// RNN classifier both train, and small tensor helpers for the frameworks' RNN layouts. The case
// folder, the script run and the error table are the harness of every oracle suite
// (tests/oracles/oracle_util.h).
//
// To add an RNN oracle case: 1) write its inputs with CaseDir::input and describe it with
// CaseDir::add_case in the group's fill function; 2) give the framework script a kind for it if
// none fits; 3) compare with ErrorTable::check at a tolerance whose comment says why.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/layers/dense_layer.h"
#include "engine/layers/embedding_layer.h"
#include "engine/layers/layer.h"
#include "engine/layers/rnn_layer.h"
#include "engine/model.h"
#include "engine/policy.h"
#include "engine/random.h"
#include "tests/oracles/oracle_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace rnn_oracle {

using json = nlohmann::json;

using oracle::CaseDir;
using oracle::ErrorTable;
using oracle::labels_tensor;
using oracle::max_abs;
using oracle::one_hot;
using oracle::random_labels;
using oracle::slice0;

// Token ids 0..num_ids-1 as float32 (how engine/data/imdb.h stores them).
inline Tensor random_ids(Shape shape, int64_t num_ids, uint64_t seed) {
  Tensor t(std::move(shape), DType::f32);
  std::mt19937 g(static_cast<uint32_t>(seed));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(g() % static_cast<uint32_t>(num_ids));
  return t;
}

inline Tensor transpose2d(const Tensor& t) {
  const int64_t r = t.dim(0), c = t.dim(1);
  Tensor out({c, r}, t.dtype());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) {
      const double v = t.at(i * c + j);
      if (t.dtype() == DType::f32)
        out.data<float>()[j * r + i] = static_cast<float>(v);
      else
        out.data<double>()[j * r + i] = v;
    }
  return out;
}

// Swaps gate blocks 0 and 1 of a packed weight or bias: the r/z exchange between PyTorch's GRU
// (r,z,n) and Keras's (z,r,h). rows: blocks are row blocks (torch (G*u,K), or a (G*u) bias);
// else column blocks (Keras (K,G*u)).
inline Tensor swap_gate_blocks01(const Tensor& t, int64_t gates, bool rows) {
  Tensor out = t.clone();
  const int64_t R = t.rank() == 2 ? t.dim(0) : 1, C = t.rank() == 2 ? t.dim(1) : t.dim(0);
  const bool along_rows = rows && t.rank() == 2;
  const int64_t block = (along_rows ? R : C) / gates;
  auto at = [&](int64_t i, int64_t j) { return i * C + j; };
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      const int64_t pos = along_rows ? i : j;
      if (pos >= 2 * block) continue;
      const int64_t other = pos < block ? pos + block : pos - block;
      const int64_t src = along_rows ? at(other, j) : at(i, other);
      if (t.dtype() == DType::f32)
        out.data<float>()[at(i, j)] = t.data<float>()[src];
      else
        out.data<double>()[at(i, j)] = t.data<double>()[src];
    }
  return out;
}

// The training groups of both oracles: kSteps SGD steps (lr kLr, momentum kMomentum) of an
// [embedding ->] LSTM/GRU (last step) -> dense classifier.
struct TrainCase {
  const char* name;
  RnnCell cell;
  int64_t num_ids;  // > 0: an embedding of this many ids in front (inputs are ids), else features
  int64_t features, steps, units, classes, batch;
  // TF.js group only -- "pre" / "post": row i padded with id 0 for (3i mod (steps+1)) steps on
  // that side (a row with no padding, one that is all padding, ...), Embedding(maskZero: true)
  // in TF.js and rnn_mask=carry here; nullptr: no padding, no mask.
  const char* padding = nullptr;
};
constexpr int kSteps = 20;
constexpr double kLr = 0.1, kMomentum = 0.9;

// The case's classifier under p, its initial weights drawn from `seed`.
inline Model make_classifier(const TrainCase& c, const Policy& p, uint64_t seed) {
  Model m;
  m.name = c.name;
  m.policy = p;
  m.num_classes = c.classes;
  m.input_shape = c.num_ids > 0 ? Shape{c.steps} : Shape{c.steps, c.features};
  m.net = std::make_unique<Sequential>(m.input_shape);
  Rng rng(p.rng_engine, seed);
  if (c.num_ids > 0)
    m.net->add(std::make_unique<EmbeddingLayer>(EmbeddingArgs{c.num_ids, c.features, {}}, m.net->current_shape(), p,
                                                rng));
  m.net->add(std::make_unique<RnnLayer>(c.cell, RnnSpec{c.units, false}, m.net->current_shape(), p, rng));
  m.net->add(std::make_unique<DenseLayer>(c.classes, m.net->current_shape(), p, rng));
  return m;
}

struct LayerRun {
  Tensor y, dx;
  std::vector<Tensor> grads;  // in params() order, the layer's canonical layout
};

// forward (training), then backward of loss = sum(y * r).
inline LayerRun run_layer(Layer& layer, const Tensor& x, const Tensor& r) {
  ExecContext exec;
  RunContext ctx = RunContext::training(exec, nullptr);
  for (Param* p : layer.params()) p->grad.zero();
  LayerRun res;
  res.y = layer.forward(ctx, x);
  res.dx = layer.backward(ctx, r);
  for (Param* p : layer.params()) res.grads.push_back(p->grad.clone());
  return res;
}

// A gradient in the layout the layer's Policy exports (rnn_weight_layout, gru_gate_order).
inline Tensor exported_grad(const RnnLayer& layer, const Param& p, const Tensor& grad) {
  Param g{p.name, grad, Tensor(), p.is_bias};
  return layer.export_param(g);
}

}  // namespace rnn_oracle
}  // namespace driftlab
