// Keras / TF.js layers-model import as a graph model: the model.json that tf.loadLayersModel reads
// (and `driftlab export --format tfjs` writes: modelTopology + weightsManifest, one or more
// float32 shards), or a bare Keras model JSON (model.to_json(): the architecture alone, weights
// then drawn by the Policy's initialisers). Functional models ("Model", "Functional"; Keras 2's
// and Keras 3's inbound_nodes) and Sequential ones.
//
// What the file states becomes an op parameter; what Keras leaves abstract stays the Policy's
// (docs/GRAPH_MODELS.md has the table):
//   - padding='same' stays 'same': conv_same_pad splits it (TF: the odd pixel after; Theano:
//     before; torch: padding=(k-1)//2 on a strided axis, keras#19291);
//   - BatchNormalization's epsilon and momentum, where the config states them (Keras always
//     writes them; a hand-written layer that leaves them out gets bn_eps and bn_momentum);
//   - initialisers: never read (the file's weights replace them; without weights the Policy's
//     init_weight / init_bias draw them);
//   - the kernel flip: a file with weights holds TF's cross-correlation kernels (frozen: flip
//     false); an architecture alone leaves it to conv_kernel_flip;
//   - data_format: channels_last unless stated otherwise (Keras's default image_data_format);
//     the graph runs channels-first, the input is fed (C,H,W), kernels are transposed from HWIO
//     and Flatten keeps the file's (h,w,c) order (stated, or implied by weights) so that the
//     next Dense's rows mean what they meant; an architecture alone with no data_format leaves
//     the flatten order to flatten_order.
// Layers: InputLayer, Conv2D, DepthwiseConv2D, SeparableConv2D (a depthwise and a 1x1 node), Dense,
// BatchNormalization, Activation (relu, relu6, sigmoid, tanh, hard_sigmoid, swish/silu,
// hard_swish/hard_silu, linear; softmax as the last layer, left to the loss), ReLU, MaxPooling2D /
// AveragePooling2D ('same' only where it pads nothing), GlobalAveragePooling2D (keepdims too),
// Flatten, Reshape (where the two element orders coincide), Add, Subtract, Multiply, Concatenate,
// Dropout, ZeroPadding2D (folded into the 'valid' convolution that alone reads it), LSTM, GRU,
// Embedding.
// Any other layer, any config key not listed for its layer,
// regularisers, constraints, frozen layers and shared layers are refused naming the layer.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/layers/graph_layer.h"
#include "engine/model.h"

namespace driftlab {
namespace convert {

struct KerasGraph {
  std::string spec;                   // the graph spec (models/graph.h), JSON text
  std::unique_ptr<GraphLayer> graph;  // built under the Policy, the file's weights in (when it has any)
  std::string input, output;          // the input layer's and the output layer's names
  Shape input_shape, output_shape;    // per sample, channels-first
  std::string producer;               // keras_version / generatedBy, as the file says
  std::string data_format;            // channels_last | channels_first
  bool has_weights = false;           // the file carries weights (else the Policy initialised them)
  std::vector<std::string> layers;    // "layer 'conv2d_1' (Conv2D) -> conv2d", one per Keras layer
  std::vector<std::string> notes;     // what the import left out or decided (a final softmax, ...)
  // The graph's name of each parameter and buffer ("<node>.<kind>.<name>") and the manifest's.
  std::vector<std::pair<std::string, std::string>> sources;
};

// model_json: the file's text; weights: the manifest's shards concatenated in manifest order ("" when
// the file has no manifest). Errors name the file and the layer ("import keras: F: layer 'x'
// (Conv2D): why").
// The parameters a file may ask for are bounded: twice its weight bytes (TF's BatchNorm keeps two
// more statistics than the file); an architecture alone, `max_architecture_bytes`.
KerasGraph import_keras_bytes(const std::string& model_json, const std::string& weights, const std::string& file,
                              const std::string& policy = "tensorflow", uint64_t max_architecture_bytes = uint64_t{1} << 30);
// A model.json and the shards its manifest names (beside it).
KerasGraph import_keras(const std::string& path, const std::string& policy = "tensorflow");
// A graph whose output is (classes,) logits as a Model named "graph" (models/graph.h).
Model keras_graph_model(KerasGraph g, const std::string& policy);

// The Keras layer classes the importer maps, as its refusals list them.
const std::vector<std::string>& keras_layer_classes();

}  // namespace convert
}  // namespace driftlab
