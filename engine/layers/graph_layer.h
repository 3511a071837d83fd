// Graph layer: a DAG of nodes over named values, the body of a general graph model (an imported
// ONNX graph, a Keras layers model). Value 0 is the graph's input; each node reads values and
// writes one. A node is one of the engine's layers (one input: conv2d, batchnorm, activations,
// pools, flatten, dense, ...) or an op over several values: add, sub, mul (NumPy broadcasting,
// core/ops/binary.h) and concat; or a reshape of one value (the same elements, another
// per-sample shape); or a layer over several values of another library (GraphOp::multi, a
// MultiInputLayer: quant/'s requantising add in an int8 graph). Values may be constants (a file's initializers, saved with the
// model as buffers, not trained).
//
// Shapes: a data value has a per-sample shape (the batch axis left off, as every layer's); a
// constant has its full shape as the file gives it, broadcast against the batched data value
// (its leading axis, where it has as many axes as the batched value, meets the batch: 1 repeats,
// anything else must equal the batch at run time).
//
// Forward runs the nodes in order (they are topologically sorted when built: a node reads only
// the input, constants and earlier nodes' values) and drops each value after its last reader.
// Backward runs them in reverse, summing the gradients of values read by several nodes in node
// order. The graph takes a plain input and gives a plain output (or the block its caller allows,
// RunContext::out_block). Inside, a prediction or a recorded (training) forward (no layer-input
// hooks, with ExecContext::channel_blocks) keeps a value channel-blocked (engine/layers/layout.h)
// where a node reading it takes that block: a layer that takes it or any block (Layer::input_block;
// one that takes any passes on what its own readers take), an add, sub or mul of two values of one
// shape whose kernel takes blocks (BinaryKernel::any_block). A reader that takes only plain tensors
// converts what it reads. Backward sums each value's gradient in the layout the forward held the
// value in and hands each layer its output's gradient in its output's layout (as Sequential does);
// the input gradient comes back plain. node_outputs and the hooks see plain tensors throughout.
// The layouts move elements, never change one: the same bits either way, except a training
// step's batchnorms, whose blocked kernel sums in another order (tests/layers/test_graph.cpp). A
// prediction (with ExecContext::fuse_bn_relu) also runs a batchnorm and the ReLU, clip or add after
// it, or a batchnorm, an add and a ReLU, as one op where nothing else reads the values between them
// (fused_span; the unfused nodes' bits), and a depthwise convolution on a blocked input with the
// batchnorm (and its ReLU or clip) before it, after it or both (Conv2dLayer::forward_fused).
//
// Autocast (engine/layers/math_mode.h) flows through the graph as through a Sequential: each
// value is held in a format (set_input_format), a layer node's from its input's as the layer says
// (convolutions and dense layers give autocast's format, every other layer its input's); add,
// sub, mul and concat promote as PyTorch's type promotion does (the result is in a 16-bit format
// only when every data operand is in that one and no constant with axes is float32: a 0-dim
// constant, a Python scalar in the traced module, does not promote); a reshape keeps its input's.
// Forward rounds each value held in a 16-bit format; backward rounds its gradient, and a gradient
// summed over several readers after each addition (autograd accumulates in the tensor's dtype).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/ops/binary.h"
#include "engine/layers/layer.h"

namespace driftlab {

enum class GraphOp { layer, add, sub, mul, concat, reshape, multi };
const char* graph_op_name(GraphOp op);

// A layer reading several values (GraphOp::multi). The class derives from Layer too (kind,
// buffers, visitors, the model file see an ordinary layer); its one-input forward is never called
// by the graph. Forward only: the graph's backward refuses it naming the node.
class MultiInputLayer {
 public:
  virtual ~MultiInputLayer() = default;
  // The per-sample output shape for these per-sample input shapes; throws starting with `who`.
  virtual Shape output_shape_for(const std::vector<Shape>& inputs, const std::string& who) const = 0;
  virtual Tensor forward_all(RunContext& ctx, const std::vector<const Tensor*>& xs) = 0;
};

struct GraphNode {
  std::string name;  // as the file names it (messages, localisation)
  GraphOp op = GraphOp::layer;
  std::unique_ptr<Layer> layer;  // GraphOp::layer, GraphOp::multi
  MultiInputLayer* multi = nullptr;  // GraphOp::multi: `layer` as a MultiInputLayer
  std::vector<int> inputs;       // value indices
  int output = -1;
  int axis = 1;  // concat: the axis of the batched values (0 is the batch, refused)
};

class GraphLayer : public Layer {
 public:
  DL_ACCEPT_VISITOR(graph)
  // An empty graph over one input value named `input_name` with per-sample shape `in`.
  GraphLayer(std::string input_name, Shape in, DType dtype);
  std::string kind() const override { return "graph"; }
  std::string describe() const override;
  Shape output_shape() const override;
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  // Every node's output of one forward, in node order (nothing dropped): what drift's
  // localisation compares node by node.
  std::vector<Tensor> node_outputs(RunContext& ctx, const Tensor& x);
  // A prediction in two parts (engine/train/predict_pieces.h runs the first a piece of the batch
  // at a time): forward_prefix runs nodes [0, upto) and returns, by value index, the values that
  // later nodes read or the graph returns (plain; the others undefined); forward_from runs the
  // nodes from `from` on over such values (those of every piece joined) and returns the output.
  // Nothing is recorded; the same bits as forward where the nodes before the cut compute each
  // input's outputs independently of the batch.
  std::vector<Tensor> forward_prefix(RunContext& ctx, const Tensor& x, std::size_t upto);
  Tensor forward_from(RunContext& ctx, std::vector<Tensor> vals, std::size_t from);
  Tensor backward(RunContext& ctx, const Tensor& dy) override;
  // Autocast: the format of the graph's input; sets every value's format, returns the output's.
  MathMode set_input_format(MathMode in) override;
  // The format value v is held in (float32 where autocast is off).
  MathMode value_format(int v);
  std::vector<Param*> params() override;
  std::vector<Param*> buffers() override;
  // "<prefix>.<node index>.<kind>.<name>" for the layers' parameters; constants are buffers
  // "<prefix>.c<value index>.constant.value".
  void collect(const std::string& prefix, bool buffers, std::vector<std::pair<std::string, Param*>>& out) override;

  // Building (importers, the model file's graph spec). Each call checks its inputs exist and
  // their shapes and returns the new value's index; errors name the node.
  int add_constant(const std::string& value_name, const Tensor& value);
  int add_layer(const std::string& node, std::unique_ptr<Layer> layer, int input, const std::string& output_name);
  int add_binary(const std::string& node, BinaryOp op, int a, int b, const std::string& output_name);
  int add_concat(const std::string& node, const std::vector<int>& inputs, int axis, const std::string& output_name);
  int add_reshape(const std::string& node, int input, const Shape& per_sample, const std::string& output_name);
  // A layer over several values: L derives from Layer and from MultiInputLayer.
  template <class L>
  int add_multi(const std::string& node, std::unique_ptr<L> layer, const std::vector<int>& inputs,
                const std::string& output_name) {
    MultiInputLayer* multi = layer.get();
    return add_multi_node(node, std::unique_ptr<Layer>(std::move(layer)), multi, inputs, output_name);
  }
  // The value the graph returns (default: the last node's).
  void set_output(int value);

  int find_value(const std::string& name) const;  // -1 when none
  const std::string& value_name(int v) const { return values_.at(static_cast<std::size_t>(v)).name; }
  // The per-sample shape of a data value; a constant's full shape.
  const Shape& value_shape(int v) const { return values_.at(static_cast<std::size_t>(v)).shape; }
  bool is_constant(int v) const { return values_.at(static_cast<std::size_t>(v)).is_constant; }
  // Keras's rule for the multi-input ops under autocast (autocast_input_cast=every_layer; see
  // cast_every_input_); sets the formats again.
  void cast_every_input(bool on) {
    cast_every_input_ = on;
    set_input_format(in_format_);
  }
  const Tensor& constant(int v) const { return values_.at(static_cast<std::size_t>(v)).param.value; }
  std::size_t num_nodes() const { return nodes_.size(); }
  std::size_t num_values() const { return values_.size(); }
  GraphNode& node(std::size_t i) { return nodes_.at(i); }
  int output_value() const { return output_; }
  DType constant_dtype() const { return dtype_; }

  // The channel block value v was held in by the last forward (0: plain, or not computed).
  int last_block(int v) const {
    return static_cast<std::size_t>(v) < last_blocks_.size() ? last_blocks_[static_cast<std::size_t>(v)] : 0;
  }

  // The backend of the graph's add, sub and mul (and of its gradients' sums): act_backend's.
  void set_binary_backend(KernelBackend b) { binary_backend_ = b; }

 private:
  struct Value {
    std::string name;
    Shape shape;               // per sample (data), full (constant)
    bool is_constant = false;
    Param param;               // a constant: its value, saved as a buffer
  };
  int new_value(const std::string& node, const std::string& name, Shape shape);
  int add_multi_node(const std::string& node, std::unique_ptr<Layer> layer, MultiInputLayer* multi,
                     const std::vector<int>& inputs, const std::string& output_name);
  void check_input_value(const std::string& node, int v) const;
  // The batched tensor of a value during a pass (constants as they are).
  // Operand v of a multi-input op whose result is held in `format`: the value itself, or a constant
  // rounded to the format under Keras's rule (cast_every_input_).
  Tensor cast_operand(const std::vector<Tensor>& vals, int v, MathMode format) const;
  const Tensor& value_at(const std::vector<Tensor>& vals, int v) const;
  // The per-sample shape of a binary op's output; errors name the node.
  Shape binary_shape(const std::string& node, int a, int b) const;
  Tensor run(RunContext& ctx, const Tensor& x, std::vector<Tensor>* all);
  // Runs nodes [from, upto) over vals (indexed by value; what they read must be there), batch n;
  // all: every node's output appended (a recorded or hooked pass: no layouts, no fusion).
  void run_nodes(RunContext& ctx, std::vector<Tensor>& vals, int64_t n, std::size_t from, std::size_t upto,
                 std::vector<Tensor>* all);
  // The channel block each value may be held in during a prediction (see the file comment), the
  // output's `outer` (what the caller allows).
  std::vector<int> value_blocks(const ExecContext& exec, DType dt, int outer) const;
  // A run of nodes that a prediction executes as one op, from node i (fused_span): `span` nodes
  // (1: the node alone); where the run is a convolution's (Conv2dLayer::forward_fused), the
  // convolution's offset in it (the nodes before it: 0, or a batchnorm and its ReLU or clip, 1 or
  // 2) and the nodes after it (0, 1 or 2 likewise); conv -1 otherwise.
  struct FusedRun {
    std::size_t span = 1;
    int conv = -1;
    std::size_t post = 0;
  };
  // The run from node i: a convolution that takes per-channel ops on an input in block in_block
  // with the batchnorm (and its ReLU or clip) before it, after it or both (Conv2dLayer::forward_fused,
  // BatchNormLayer::infer_channel_op); else 2 for a batchnorm and the ReLU or clip after it
  // (BatchNormLayer::forward_relu, forward_infer_clip) or the add of its output and another value
  // (forward_infer_add: MobileNetV2's block ends), 3 for a batchnorm, such an add and a ReLU
  // (forward_infer_add_relu: ResNet's block tail); always where nothing else reads the values
  // between them and every value is float32. `readers`: how many node inputs name each value.
  FusedRun fused_span(const ExecContext& exec, std::size_t i, DType dt, const std::vector<int>& readers,
                      int in_block) const;

  std::vector<Value> values_;
  std::vector<GraphNode> nodes_;
  std::vector<int> last_use_;  // per value: the last node reading it (nodes_.size() for the output)
  int output_ = 0;
  DType dtype_;
  KernelBackend binary_backend_ = KernelBackend::fast;  // add, sub, mul: the Policy's act_backend
  // What the backward needs, kept by a recorded forward: mul's operands, per node.
  std::vector<std::vector<Tensor>> kept_;
  // Autocast: the input's format and each value's (recomputed when nodes were added since).
  MathMode in_format_ = MathMode::float32;
  // autocast_input_cast=every_layer (Keras): a multi-input op casts every operand, constants
  // included, to the format of its data operands (a Keras Add / Multiply / Concatenate layer, or a
  // Rescaling's cast of its scale), instead of PyTorch's type promotion. Set by cast_every_input.
  bool cast_every_input_ = false;
  std::vector<MathMode> formats_;
  std::vector<int> last_blocks_;  // per value, the last forward's layout (last_block)
};

}  // namespace driftlab
