// Model: a named network built under one Policy. The Policy travels with the model (into
// its file and every report), so every number says how it was made.
#pragma once
#include <memory>
#include <string>

#include "engine/layers/sequential.h"
#include "engine/policy.h"

namespace driftlab {

struct Model {
  std::string name;
  Policy policy;
  Shape input_shape;  // per sample: (C,H,W), (steps, features), or (steps,) token ids
  int64_t num_classes = 10;
  int64_t num_ids = 0;  // embedding rows of a token model (vocabulary + padding + OOV); 0: none
  std::string graph;    // a graph model's spec (JSON text, models/graph.h); empty for the zoo
  std::unique_ptr<Sequential> net;

  DType dtype() const { return policy.dtype == FloatType::float64 ? DType::f64 : DType::f32; }
  int64_t num_params() const;
  // x in the model's dtype (x itself when it is).
  Tensor in_dtype(const Tensor& x) const { return x.dtype() == dtype() ? x : x.to(dtype()); }
  // Logits for a batch; converts x to the model's dtype when needed.
  Tensor forward(RunContext& ctx, const Tensor& x) const;
};

}  // namespace driftlab
