// Weights exchanged with Python as .npy files: each trainable parameter of a model as
// DIR/<name>.npy, named as Sequential::named_params names it ("0.conv2d.weight",
// "1.lstm.weight_ih"), so a script can load them into the framework the Policy copies.
//
// NpyLayout::framework writes what that framework holds: conv kernels HWIO and dense weights
// (in,out) under weight_layout=hwio (Keras), OIHW / (out,in) under oihw (PyTorch); LSTM/GRU
// weights in the framework's packed gate layout and gate order (rnn_weight_layout,
// gru_gate_order; RnnLayer::export_param / import_param convert them); biases as they are.
// NpyLayout::driftlab writes the tensors as driftlab holds them (OIHW, (out,in), the canonical
// gate layout of core/ops/rnn.h).
//
// Buffers (BatchNorm's running statistics) are not exchanged: an imported model keeps the
// buffers it was built with.
#pragma once
#include <string>
#include <vector>

#include "engine/model.h"

namespace driftlab {

enum class NpyLayout {
  framework,  // the Policy's framework's layout (weight_layout, rnn_weight_layout, gru_gate_order)
  driftlab,   // driftlab's own: OIHW, (out,in), canonical gates
};

struct NpyFile {
  std::string path;  // DIR/<name>.npy
  Shape shape;       // as written, in the file's layout
};

// Writes every trainable parameter of m as dir/<name>.npy (creating dir), in m.dtype();
// returns the files in parameter order. Throws naming the path when a file cannot be written.
std::vector<NpyFile> export_weights_npy(const Model& m, const std::string& dir, NpyLayout layout);

// Sets every trainable parameter of m (built for the architecture and Policy the files were
// written for) from dir/<name>.npy in `layout`, converted to m.dtype(). A missing or unreadable
// file throws naming its path; a file whose shape is not the one export_weights_npy would
// write throws naming the path, the parameter and both shapes. On any error m is unchanged.
void import_weights_npy(Model& m, const std::string& dir, NpyLayout layout);

}  // namespace driftlab
