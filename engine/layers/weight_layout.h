// Weight re-layouts shared by the recurrent layer's framework layouts (rnn_layer.cpp) and the
// converters (models/reparam.h between Policies, convert/ into exchange formats): the 180-degree
// kernel rotation of Theano's flip, a Dense weight's input columns re-indexed between flatten
// orders, a matrix transpose, gate blocks re-ordered. Any float dtype.
#pragma once
#include <vector>

#include "core/tensor.h"
#include "engine/policy.h"

namespace driftlab {

// w[k,c,r,s] <- w[k,c,R-1-r,S-1-s]
Tensor rotate_180(const Tensor& w);

// Feature index of (c,h,w) under a flatten order.
int64_t flatten_feature(FlattenOrder o, const Shape& chw, int64_t c, int64_t h, int64_t w);

// Dense weight (out, in) whose columns follow `from` order, re-indexed to `to` order; chw is the
// flattened map's (C,H,W).
Tensor permute_columns(const Tensor& wt, const Shape& chw, FlattenOrder from, FlattenOrder to);

// (r, c) -> (c, r)
Tensor transpose2d(const Tensor& t);

// The rows of a (G*block, cols) or (G*block) tensor in G blocks, re-ordered so that out block b =
// in block perm[b] (inverse = false), or out block perm[b] = in block b (inverse = true).
Tensor permute_blocks(const Tensor& t, const std::vector<int64_t>& perm, bool inverse = false);

}  // namespace driftlab
