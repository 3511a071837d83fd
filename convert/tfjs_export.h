// TensorFlow.js export (the web platform of Guo et al.'s study, docs/GLOSSARY.md): a saved fp32
// model written as a TF.js layers model (model.json + one binary weight shard; a functional
// Model: an InputLayer, then one layer per op, residual blocks as Add layers), the format
// tf.loadLayersModel reads in the browser and in node. TF.js computes Keras's semantics, so the Policy's are written out:
//   - input NHWC (TF.js convolutions are channels-last): an image batch is fed as (N,H,W,C);
//   - kernels HWIO (transposed from driftlab's OIHW), Theano's flip applied to the stored weights;
//   - explicit pads: none -> 'valid', TF's 'same' split -> 'same', any other split -> a
//     ZeroPadding2D layer before a 'valid' convolution;
//   - a channels-first flatten (PyTorch's, Theano's) as the next Dense kernel's rows permuted from
//     (c,h,w) to TF.js's (h,w,c) order;
//   - BatchNorm's epsilon (Lasagne's inverse-std statistics as the variance 1/s^2 - eps);
//   - LSTM/GRU kernels in Keras's column layout and gate order, the two PyTorch biases summed;
//   - the option-A shortcut as a 1x1 max pool of the block's stride and a fixed 1x1 convolution
//     placing the channels among zero ones (exact: every product is x*1 or x*0).
// What TF.js 4.22's layers cannot compute is refused by name: a reset-after GRU (tfjs-layers'
// GRUCell throws on reset_after), a hard sigmoid other than clip(0.2x + 0.5), input
// standardisation, float64 models.
#pragma once
#include <string>
#include <vector>

#include "engine/data/transform.h"
#include "engine/layers/visit.h"
#include "engine/model.h"

namespace driftlab {
namespace convert {

struct TfjsExport {
  std::string model_json;          // model.json
  std::string weights;             // the shard's bytes, float32 little-endian in manifest order
  std::vector<std::string> layers;  // one line per driftlab layer: what it became
};

// shard_name: the weight file model.json names (written beside it); norm: the model file's input
// standardisation (refused unless the identity).
TfjsExport export_tfjs(Model& model, const InputNorm& norm = {}, const std::string& shard_name = "group1-shard1of1.bin");

// Writes DIR/<shard>, then DIR/model.json, each atomically (write_file_atomic).
void write_tfjs(const std::string& dir, const TfjsExport& e, const std::string& shard_name = "group1-shard1of1.bin");

// What export_tfjs writes for each layer kind (the capability table, driftlab model kinds).
SupportColumn tfjs_export_support();

}  // namespace convert
}  // namespace driftlab
