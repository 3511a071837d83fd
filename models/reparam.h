// Weight conversion between framework conventions: what a careful converter (Keras's
// convert_kernel / convert_dense_weights_data_format) does so that weights trained under one
// Policy compute the same function under another. Only knobs that are re-parameterisations
// need it: conv_kernel_flip (rotate kernels 180 degrees) and flatten_order (permute the
// input columns of the first dense layer after a flatten). LSTM/GRU weights are held in one
// canonical gate layout, so only a change of rnn_num_bias needs work (two biases summed into
// one, or the second zeroed). Everything else is semantics.
#pragma once
#include "engine/layers/visit.h"
#include "engine/model.h"

namespace driftlab {

// Copies src's parameters into dst (same architecture, possibly another Policy), converting
// them from src.policy's conventions to dst.policy's when `convert` is set, and as raw
// tensors otherwise (what loading a file naively into another framework does).
void transfer_weights(const Model& src, Model& dst, bool convert);

// A model of the same architecture under `policy`, with src's weights transferred.
Model rebuild_under(const Model& src, const Policy& policy, bool convert);

// What transfer_weights does with each layer kind (the capability table, driftlab model kinds).
SupportColumn reparam_support();

}  // namespace driftlab
