// ONNX import as a graph model: any graph of the supported ops (docs/GRAPH_MODELS.md) becomes a
// GraphLayer whose nodes keep what the file states (explicit pads, strides, dilations, groups,
// BatchNorm epsilon and momentum, clip bounds, cross-correlation, channels-first flatten) as op
// parameters, and leave the rest to the Policy (kernel backends, summation order, the gradients
// at ReLU's kink and max-pool ties, BatchNorm's running-variance formula, the optimiser, ...).
//
// Supported (opsets 9-17, the default domain): Conv (2-D), BatchNormalization (inference form),
// Relu, Sigmoid, Tanh, Clip, HardSigmoid (alpha, beta kept), HardSwish, MaxPool, AveragePool (2-D,
// ceil_mode 0), GlobalAveragePool, Flatten,
// Reshape (constant shape), Gemm, MatMul (a constant right operand, on vectors), Add, Sub, Mul,
// Concat, Identity, Dropout (inference), Pad (zeros on H and W, folded into the one Conv or
// AveragePool reading it). Everything else is refused naming the node and its op;
// an attribute with a value not implemented (ceil_mode 1, a dilated pool, a batch-axis concat)
// is refused naming the node and the attribute.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/layers/graph_layer.h"
#include "engine/model.h"

namespace driftlab {
namespace convert {

struct OnnxGraphOptions {
  std::string policy = "torch";
  // The graph inputs after the data input, in the graph's order, bound to serialized TensorProto
  // files (ONNX's node tests feed every input: the graph takes its first as the data and these as
  // constants, read as its initializers are).
  std::vector<std::string> bind_files;
  // The data input's name; "" = the first graph input that is neither an initializer nor bound.
  std::string input;
};

struct OnnxGraph {
  std::string spec;                       // the graph spec (models/graph.h), JSON text
  std::unique_ptr<GraphLayer> graph;      // built under the options' Policy, the file's weights in
  std::string input, output;              // the data input's and the output's names
  Shape input_shape, output_shape;        // per sample
  int64_t opset = 0;
  std::string producer;
  std::vector<std::string> nodes;         // "node 'Conv_0' (Conv) -> conv2d", one per ONNX node
  // Where each parameter and buffer came from: the graph's name for it ("<node>.<kind>.<name>",
  // as GraphLayer::collect names it under an empty prefix, without the leading dot) and the
  // initializer's name in the file (torch.onnx.export without folding: the module's parameter).
  std::vector<std::pair<std::string, std::string>> sources;
};

// Errors name the file and the node ("import onnx: F: node 'X' (Op; attrs): why").
OnnxGraph import_onnx_graph_bytes(const std::string& bytes, const std::string& file, const OnnxGraphOptions& o = {});
OnnxGraph import_onnx_graph(const std::string& path, const OnnxGraphOptions& o = {});
// A graph whose output is (classes,) logits as a Model named "graph" (models/graph.h).
Model onnx_graph_model(OnnxGraph g, const std::string& policy);

// The file with each of `values` that a node of the file writes (names the imported graph computes,
// float tensors) also returned as a graph output through an Identity node named "dl_probe_<i>";
// probed[i] says whether value i was (values the importer made up, such as the second half of a
// node it maps onto two, are not). What a per-node comparison with ONNX Runtime runs
// (driftlab/convert.h localise_against_ort).
std::string onnx_with_probes(const std::string& bytes, const std::string& file, const std::vector<std::string>& values,
                             std::vector<bool>& probed);

// The op types the importer maps (the default domain), as its refusals list them.
const std::vector<std::string>& onnx_graph_op_types();

// The op types of a file's nodes, in order (the node-test harness's scope check).
std::vector<std::string> onnx_op_types(const std::string& path);

// A float32 tensor from a serialized TensorProto (the node tests' input_N.pb / output_N.pb);
// errors name the file.
Tensor read_tensor_pb(const std::string& path);

}  // namespace convert
}  // namespace driftlab
