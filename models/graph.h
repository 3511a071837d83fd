// Graph models: a GraphLayer (engine/layers/graph_layer.h) built from a graph spec, the JSON an
// importer writes (convert/onnx_graph_import.h) and the model file keeps (header field "graph").
// The model's name is "graph"; build_model("graph", policy, seed, {.graph = spec}) builds it, so
// every path that rebuilds a model under another Policy (drift, attribute, convert) rebuilds it.
//
// Spec (docs/GRAPH_MODELS.md):
//   {"input": NAME, "input_shape": [C,H,W] | [F], "num_classes": K, "output": NAME,
//    "constants": [{"name": NAME, "shape": [...]}],   (values: the model file's tensors)
//    "nodes": [{"name": NODE, "op": OP, "inputs": [NAME...], "output": NAME, ...attributes}]}
// Ops and attributes (an attribute left out is the Policy's to decide):
//   conv2d      out_channels, kernel [r,s], stride [h,w], dilation [h,w], groups, bias,
//               pads [t,b,l,r] | padding "same"|"valid", flip (bool; the Policy's conv_kernel_flip)
//   batchnorm   eps, momentum (fraction kept; the Policy's bn_eps, bn_momentum)
//   relu, sigmoid, tanh; hard_sigmoid  alpha, beta (clip(alpha*x + beta, 0, 1); left out: the
//               Policy's hard_sigmoid_kind); clip  min, max
//   dropout     rate (the Policy's RNG draws the mask)
//   maxpool, avgpool  kernel [h,w], stride [h,w], pads [t,b,l,r], count_include_pad
//   global_avg_pool; flatten  order "chw"|"hwc" (the Policy's flatten_order)
//   dense       units, bias (weight (units, in), torch's Linear layout)
//   lstm, gru   units, return_sequences, recurrent_activation "sigmoid"|"hard_sigmoid"
//               (rnn_recurrent_activation), reset_after (gru; gru_reset_after); input (steps, features)
//   embedding   input_dim, output_dim; input (steps,) of ids
//   add, sub, mul (two inputs, broadcasting); concat  axis (counting the batch axis)
//   reshape     shape (per sample)
// Unknown ops and attributes, attributes of the wrong type, and names read before they are written
// are refused naming the node.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/layers/graph_layer.h"
#include "engine/model.h"

namespace driftlab {

class Rng;

constexpr const char* kGraphModelName = "graph";

// Builds a graph node by node from spec entries (build_graph's loop; importers use it to read each
// value's shape as they go). Every call checks what build_graph checks.
class GraphBuilder {
 public:
  GraphBuilder(const std::string& input, const Shape& input_shape, const Policy& policy, Rng& rng,
               uint64_t max_param_bytes = 0);
  ~GraphBuilder();
  int add_constant(const std::string& name, const Shape& shape);  // zero-filled; set it through graph()
  int add_node(const nlohmann::json& node);                       // the node's output value
  GraphLayer& graph() { return *graph_; }
  nlohmann::json spec() const;  // what was added, with the current output
  std::unique_ptr<GraphLayer> release();
  // Counts `elements` more parameter values against the bound before they are allocated.
  void spend(uint64_t elements, const std::string& where);

 private:
  const Policy& policy_;
  Rng& rng_;
  uint64_t max_bytes_, used_ = 0;
  std::unique_ptr<GraphLayer> graph_;
  nlohmann::json spec_;
};

// The graph of `spec` under `policy` (weights drawn from rng as the Policy initialises; an
// importer overwrites them). `max_param_bytes` bounds the parameters, buffers and constants the
// spec asks for, checked before each is allocated (a model file's data size; 0: no bound).
std::unique_ptr<GraphLayer> build_graph(const nlohmann::json& spec, const Policy& policy, Rng& rng,
                                        uint64_t max_param_bytes = 0);
// An importer's built graph as a Model named "graph" under `policy`, `spec` its graph spec text; the
// graph must return (classes,) logits (errors start with `who`, "import onnx" or "import keras", and
// name the file's `output`).
Model graph_model(std::unique_ptr<GraphLayer> g, const std::string& spec, const std::string& policy,
                  const std::string& who, const std::string& output);
// Names a graph spec holds (JSON): valid UTF-8, else an error "<what> is not valid UTF-8 (byte i)".
void check_utf8_name(const std::string& s, const std::string& what);
// m.graph (the spec's text) built into m: input_shape, num_classes and net (one GraphLayer).
void build_graph_model(Model& m, Rng& rng, uint64_t max_param_bytes = 0);

}  // namespace driftlab
