#include "engine/layers/graph_layer.h"

#include <sstream>

#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/layout.h"
#include "engine/layers/visit.h"
#include "engine/layers/math_mode.h"
#include "kernels/cpu/ref/ref.h"

namespace driftlab {

const char* graph_op_name(GraphOp op) {
  switch (op) {
    case GraphOp::layer: return "layer";
    case GraphOp::add: return "add";
    case GraphOp::sub: return "sub";
    case GraphOp::mul: return "mul";
    case GraphOp::concat: return "concat";
    case GraphOp::reshape: return "reshape";
    case GraphOp::multi: return "multi";
  }
  fail("graph_op_name: unknown op ", static_cast<int>(op));
}

GraphLayer::GraphLayer(std::string input_name, Shape in, DType dtype) : dtype_(dtype) {
  Value v;
  v.name = std::move(input_name);
  v.shape = std::move(in);
  values_.push_back(std::move(v));
  last_use_.push_back(0);
}

int GraphLayer::find_value(const std::string& name) const {
  for (std::size_t i = 0; i < values_.size(); ++i)
    if (values_[i].name == name) return static_cast<int>(i);
  return -1;
}

int GraphLayer::new_value(const std::string& node, const std::string& name, Shape shape) {
  check(find_value(name) < 0, "graph: node '", node, "': value '", name, "' is written twice");
  for (int64_t d : shape) check(d >= 1, "graph: node '", node, "': value '", name, "' has shape ", shape_str(shape));
  Value v;
  v.name = name;
  v.shape = std::move(shape);
  values_.push_back(std::move(v));
  last_use_.push_back(0);
  output_ = static_cast<int>(values_.size()) - 1;
  return output_;
}

void GraphLayer::check_input_value(const std::string& node, int v) const {
  check(v >= 0 && v < static_cast<int>(values_.size()), "graph: node '", node, "' reads value ", v, ", which no node wrote");
}

int GraphLayer::add_constant(const std::string& value_name, const Tensor& value) {
  check(find_value(value_name) < 0, "graph: constant '", value_name, "' is written twice");
  check(value.dtype() == dtype_, "graph: constant '", value_name, "' is ", dtype_name(value.dtype()), ", the graph ",
        dtype_name(dtype_));
  Value v;
  v.name = value_name;
  v.shape = value.shape();
  v.is_constant = true;
  v.param = {"value", value.clone(), Tensor(), false};
  values_.push_back(std::move(v));
  last_use_.push_back(0);
  return static_cast<int>(values_.size()) - 1;
}

int GraphLayer::add_layer(const std::string& node, std::unique_ptr<Layer> layer, int input, const std::string& out) {
  check_input_value(node, input);
  check(!is_constant(input), "graph: node '", node, "' (", layer->kind(), ") reads constant '", value_name(input),
        "' as its data input; a layer takes a computed value");
  GraphNode n;
  n.name = node;
  n.op = GraphOp::layer;
  n.inputs = {input};
  Shape y = layer->output_shape();
  n.layer = std::move(layer);
  n.output = new_value(node, out, y);
  last_use_[static_cast<std::size_t>(input)] = static_cast<int>(nodes_.size());
  nodes_.push_back(std::move(n));
  return output_;
}

Shape GraphLayer::binary_shape(const std::string& node, int a, int b) const {
  const bool ca = is_constant(a), cb = is_constant(b);
  check(!(ca && cb), "graph: node '", node, "': both inputs are constants ('", value_name(a), "', '", value_name(b),
        "'); fold them before building");
  const std::string who = "graph: node '" + node + "'";
  if (!ca && !cb) {
    check(value_shape(a).size() == value_shape(b).size(), who, ": data values '", value_name(a), "' ",
          shape_str(value_shape(a)), " and '", value_name(b), "' ", shape_str(value_shape(b)),
          " differ in rank (broadcasting would align the batch with another axis)");
    return broadcast_shape(value_shape(a), value_shape(b), who);
  }
  const int d = ca ? b : a, c = ca ? a : b;
  Shape batched = value_shape(d);
  batched.insert(batched.begin(), 1);
  check(value_shape(c).size() <= batched.size(), who, ": constant '", value_name(c), "' ", shape_str(value_shape(c)),
        " has more axes than the batched value '", value_name(d), "' [N", shape_str(value_shape(d)).substr(1));
  Shape y = broadcast_shape(batched, value_shape(c), who);
  y.erase(y.begin());
  return y;
}

int GraphLayer::add_binary(const std::string& node, BinaryOp op, int a, int b, const std::string& out) {
  check_input_value(node, a);
  check_input_value(node, b);
  GraphNode n;
  n.name = node;
  n.op = op == BinaryOp::add ? GraphOp::add : op == BinaryOp::sub ? GraphOp::sub : GraphOp::mul;  // binary_of's inverse
  n.inputs = {a, b};
  n.output = new_value(node, out, binary_shape(node, a, b));
  for (int v : n.inputs) last_use_[static_cast<std::size_t>(v)] = static_cast<int>(nodes_.size());
  nodes_.push_back(std::move(n));
  return output_;
}

int GraphLayer::add_concat(const std::string& node, const std::vector<int>& inputs, int axis, const std::string& out) {
  check(!inputs.empty(), "graph: node '", node, "' concatenates nothing");
  std::vector<Shape> shapes;
  bool computed = false;
  for (int v : inputs) {
    check_input_value(node, v);
    // a constant's leading axis meets the batch (checked at run time)
    Shape s = value_shape(v);
    if (is_constant(v)) {
      check(!s.empty(), "graph: node '", node, "' concatenates the scalar constant '", value_name(v), "'");
      s.erase(s.begin());
    }
    computed = computed || !is_constant(v);
    shapes.push_back(s);
  }
  check(computed, "graph: node '", node, "' concatenates constants only (fold them before building)");
  check(axis >= 1, "graph: node '", node, "' concatenates along axis ", axis, " (the batch; not supported)");
  GraphNode n;
  n.name = node;
  n.op = GraphOp::concat;
  n.inputs = inputs;
  n.axis = axis;
  n.output = new_value(node, out, concat_shape(shapes, axis - 1, "graph: node '" + node + "'", axis));
  for (int v : n.inputs) last_use_[static_cast<std::size_t>(v)] = static_cast<int>(nodes_.size());
  nodes_.push_back(std::move(n));
  return output_;
}

int GraphLayer::add_reshape(const std::string& node, int input, const Shape& per_sample, const std::string& out) {
  check_input_value(node, input);
  check(!is_constant(input), "graph: node '", node, "' reshapes constant '", value_name(input), "' (fold it before building)");
  check(shape_numel(per_sample) == shape_numel(value_shape(input)), "graph: node '", node, "' reshapes ",
        shape_str(value_shape(input)), " to ", shape_str(per_sample), " (another number of elements)");
  GraphNode n;
  n.name = node;
  n.op = GraphOp::reshape;
  n.inputs = {input};
  n.output = new_value(node, out, per_sample);
  last_use_[static_cast<std::size_t>(input)] = static_cast<int>(nodes_.size());
  nodes_.push_back(std::move(n));
  return output_;
}

int GraphLayer::add_multi_node(const std::string& node, std::unique_ptr<Layer> layer, MultiInputLayer* m,
                               const std::vector<int>& inputs, const std::string& out) {
  std::vector<Shape> shapes;
  for (int v : inputs) {
    check_input_value(node, v);
    check(!is_constant(v), "graph: node '", node, "' (", layer->kind(), ") reads constant '", value_name(v),
          "'; it takes computed values");
    shapes.push_back(value_shape(v));
  }
  GraphNode n;
  n.name = node;
  n.op = GraphOp::multi;
  n.inputs = inputs;
  Shape y = m->output_shape_for(shapes, "graph: node '" + node + "' (" + layer->kind() + ")");
  n.multi = m;
  n.layer = std::move(layer);
  n.output = new_value(node, out, y);
  for (int v : n.inputs) last_use_[static_cast<std::size_t>(v)] = static_cast<int>(nodes_.size());
  nodes_.push_back(std::move(n));
  return output_;
}

void GraphLayer::set_output(int value) {
  check(value >= 0 && value < static_cast<int>(values_.size()) && !is_constant(value), "graph: output value ", value,
        " is not a computed value (or the input)");
  output_ = value;
}

Shape GraphLayer::output_shape() const { return value_shape(output_); }

std::string GraphLayer::describe() const {
  std::ostringstream os;
  os << "graph of " << nodes_.size() << " nodes:";
  for (const GraphNode& n : nodes_) {
    os << "\n    " << n.name << ": " << (n.layer ? n.layer->describe() : graph_op_name(n.op)) << " (";
    for (std::size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << value_name(n.inputs[i]);
    os << ") -> " << value_name(n.output) << " " << shape_str(value_shape(n.output));
  }
  return os.str();
}

const Tensor& GraphLayer::value_at(const std::vector<Tensor>& vals, int v) const {
  if (is_constant(v)) return constant(v);
  const Tensor& t = vals[static_cast<std::size_t>(v)];
  check(t.defined(), "graph: value '", value_name(v), "' read after it was dropped");
  return t;
}

namespace {
BinaryOp binary_of(GraphOp op) {
  switch (op) {
    case GraphOp::add: return BinaryOp::add;
    case GraphOp::sub: return BinaryOp::sub;
    case GraphOp::mul: return BinaryOp::mul;
    default: break;
  }
  fail("graph: ", graph_op_name(op), " is no binary op");
}

// a op b (shape `shape`) by the registry's binary kernel for `backend` (act_backend's): in the
// operands' channel block where both have it and the kernel takes blocks, else plain.
Tensor binary_forward(RunContext& ctx, KernelBackend backend, BinaryOp op, Tensor a, Tensor b, const Shape& shape) {
  const BinaryParams p{op, a.shape(), b.shape()};
  const BinaryKernel& k = ctx.exec.pick(ctx.exec.kernels.binary, backend, p, a.dtype());
  if ((a.channel_block() || b.channel_block()) && !(a.channel_block() == b.channel_block() && k.any_block)) {
    a = to_plain(a);
    b = to_plain(b);
  }
  Tensor y = Tensor::empty(shape, a.dtype()).with_block(a.channel_block());
  k.forward(p, a, b, y);
  return y;
}
}  // namespace

std::vector<int> GraphLayer::value_blocks(const ExecContext& exec, DType dt, int outer) const {
  std::vector<int> want(values_.size(), 0);
  std::vector<char> asked(values_.size(), 0);
  // A reader's vote: the block it takes v in. A reader that takes only plain tensors does not vote
  // (it converts what it reads, one conversion wherever it happens); readers that want two
  // different blocks leave v plain. A reader taking v as produced (kAsProduced) leaves v in the
  // block its node computes in, unless another reader asks for one.
  auto vote = [&](int v, int b) {
    const auto i = static_cast<std::size_t>(v);
    if (b == kAsProduced && !asked[i]) want[i] = kAsProduced;
    if (b <= 0) return;
    if (!asked[i]) want[i] = b, asked[i] = 1;
    else if (want[i] != b) want[i] = 0;
  };
  vote(output_, outer);
  for (std::size_t i = nodes_.size(); i-- > 0;) {  // a value's readers come after its node: final here
    const GraphNode& node = nodes_[i];
    const int out = want[static_cast<std::size_t>(node.output)];
    switch (node.op) {
      case GraphOp::layer: {
        const int t = node.layer->input_block(exec, dt);
        vote(node.inputs[0], t == kAnyBlock ? out : t);
        break;
      }
      case GraphOp::add:
      case GraphOp::sub:
      case GraphOp::mul: {
        const int a = node.inputs[0], b = node.inputs[1];
        bool blocked = !is_constant(a) && !is_constant(b) && value_shape(a) == value_shape(b);
        if (blocked) {
          Shape s = value_shape(a);
          s.insert(s.begin(), 1);
          blocked = exec.kernels.binary.select(binary_backend_, BinaryParams{binary_of(node.op), s, s}, dt).any_block;
        }
        for (int v : node.inputs) vote(v, blocked ? out : 0);
        break;
      }
      default:
        for (int v : node.inputs) vote(v, 0);
    }
  }
  return want;
}

MathMode GraphLayer::set_input_format(MathMode in) {
  in_format_ = in;
  formats_.assign(values_.size(), MathMode::float32);
  formats_[0] = in;
  for (GraphNode& node : nodes_) {
    MathMode f = MathMode::float32;
    switch (node.op) {
      case GraphOp::layer: f = node.layer->set_input_format(formats_[static_cast<std::size_t>(node.inputs[0])]); break;
      case GraphOp::reshape: f = formats_[static_cast<std::size_t>(node.inputs[0])]; break;
      case GraphOp::multi: f = MathMode::float32; break;  // int8 layers: their own integer formats
      case GraphOp::add:
      case GraphOp::sub:
      case GraphOp::mul:
      case GraphOp::concat: {
        if (cast_every_input_) {  // Keras: every operand cast to the data operands' 16-bit format
          for (int v : node.inputs)
            if (!is_constant(v) && reduced_format(formats_[static_cast<std::size_t>(v)]))
              f = formats_[static_cast<std::size_t>(v)];
          break;
        }
        // A 16-bit result only when every data operand is held in the same 16-bit format and no
        // float32 constant with axes joins them (a 0-dim one does not promote).
        bool first = true;
        for (int v : node.inputs) {
          if (is_constant(v)) {
            if (!constant(v).shape().empty()) f = MathMode::float32, first = false;
            continue;
          }
          const MathMode g = formats_[static_cast<std::size_t>(v)];
          if (first) f = g, first = false;
          else if (g != f) f = MathMode::float32;
        }
        if (!reduced_format(f)) f = MathMode::float32;
        break;
      }
    }
    formats_[static_cast<std::size_t>(node.output)] = f;
  }
  return formats_[static_cast<std::size_t>(output_)];
}

MathMode GraphLayer::value_format(int v) {
  if (formats_.size() != values_.size()) set_input_format(in_format_);
  return formats_.at(static_cast<std::size_t>(v));
}

Tensor GraphLayer::forward(RunContext& ctx, const Tensor& x) { return run(ctx, x, nullptr); }

Tensor GraphLayer::cast_operand(const std::vector<Tensor>& vals, int v, MathMode format) const {
  const Tensor& t = value_at(vals, v);
  return cast_every_input_ && is_constant(v) ? rounded_to(t, format) : t;
}

std::vector<Tensor> GraphLayer::node_outputs(RunContext& ctx, const Tensor& x) {
  std::vector<Tensor> all;
  run(ctx, x, &all);
  return all;
}

GraphLayer::FusedRun GraphLayer::fused_span(const ExecContext& exec, std::size_t i, DType dt,
                                            const std::vector<int>& readers, int in_block) const {
  FusedRun run;
  auto layer_at = [&](std::size_t j) -> Layer* {
    return j < nodes_.size() && nodes_[j].op == GraphOp::layer ? nodes_[j].layer.get() : nullptr;
  };
  // v is read once (by the next node of the run) and is not the graph's output
  auto passed_on = [&](int v) { return readers[static_cast<std::size_t>(v)] == 1 && v != output_; };
  // node j is an activation of `kind` reading only value v, which nothing else reads
  auto act_of = [&](std::size_t j, int v, ActKind kind) {
    Layer* l = layer_at(j);
    if (!l || nodes_[j].inputs[0] != v || !passed_on(v)) return false;
    const auto* act = layer_as<ActivationLayer>(*l);
    return act && act->op_params().kind == kind;
  };
  auto relu_of = [&](std::size_t j, int v) { return act_of(j, v, ActKind::relu); };
  auto f32 = [&](int v) { return formats_.size() == values_.size() && formats_[static_cast<std::size_t>(v)] == MathMode::float32; };
  // a batchnorm at node j reading v that a convolution can run as a ConvChannelOp, with the ReLU
  // or clip after it: how many nodes (1 or 2; 0: none)
  auto channel_op_at = [&](std::size_t j, int v) -> std::size_t {
    Layer* l = layer_at(j);
    auto* bn = l ? layer_as<BatchNormLayer>(*l) : nullptr;
    if (!bn || nodes_[j].inputs[0] != v || !f32(nodes_[j].output) || !bn->has_channel_op(exec, dt)) return 0;
    const int z = nodes_[j].output;
    return (relu_of(j + 1, z) || act_of(j + 1, z, ActKind::clip)) && f32(nodes_[j + 1].output) ? 2 : 1;
  };
  // the convolution at node j reading v, taking ConvChannelOps on an input in block in_block
  auto fusing_conv = [&](std::size_t j, int v) {
    Layer* l = layer_at(j);
    auto* conv = l ? layer_as<Conv2dLayer>(*l) : nullptr;
    return conv && nodes_[j].inputs[0] == v && f32(nodes_[j].output) && conv->takes_channel_ops(exec, dt, in_block);
  };
  Layer* first = layer_at(i);
  if (!first || !f32(nodes_[i].inputs[0])) return run;
  // [batchnorm [-> ReLU | clip] ->] convolution [-> batchnorm [-> ReLU | clip]], the convolution
  // taking the ops before and after it (at least one of them)
  if (exec.fuse_conv_channel_ops) {
    const std::size_t pre = channel_op_at(i, nodes_[i].inputs[0]);
    const int u = pre ? nodes_[i + pre - 1].output : nodes_[i].inputs[0];  // what the convolution reads
    const std::size_t j = i + pre;
    if ((pre == 0 || passed_on(u)) && fusing_conv(j, u)) {
      const int c = nodes_[j].output;
      const std::size_t post = passed_on(c) ? channel_op_at(j + 1, c) : 0;
      if (pre + post > 0) {
        run.span = pre + 1 + post, run.conv = pre, run.post = post;
        return run;
      }
    }
  }
  auto* bn = layer_as<BatchNormLayer>(*first);
  const int z = nodes_[i].output;
  if (!bn || !f32(z)) return run;
  if ((relu_of(i + 1, z) || act_of(i + 1, z, ActKind::clip)) && f32(nodes_[i + 1].output)) {
    run.span = 2;
    return run;
  }
  // batchnorm -> add(z, r) [-> ReLU]: z first, as BatchNormKernel::forward_infer_add adds (z + r)
  if (i + 1 >= nodes_.size()) return run;
  const GraphNode& add = nodes_[i + 1];
  if (add.op != GraphOp::add || add.inputs[0] != z || !passed_on(z)) return run;
  const int r = add.inputs[1];
  if (r == z || is_constant(r) || value_shape(r) != value_shape(z) || !f32(r) || !f32(add.output)) return run;
  if (!bn->has_infer_add(exec, dt)) return run;
  run.span = relu_of(i + 2, add.output) && f32(nodes_[i + 2].output) ? 3 : 2;
  return run;
}

Tensor GraphLayer::run(RunContext& ctx, const Tensor& x, std::vector<Tensor>* all) {
  check_input("graph", x, value_shape(0));
  check(x.channel_block() == 0, "graph: input in channel block ", x.channel_block(), " (the graph takes plain tensors)");
  std::vector<Tensor> vals(values_.size());
  vals[0] = x;
  kept_.assign(nodes_.size(), {});
  last_blocks_.assign(values_.size(), 0);
  run_nodes(ctx, vals, x.dim(0), 0, nodes_.size(), all);
  const Tensor& out = vals[static_cast<std::size_t>(output_)];
  return out.channel_block() != 0 && !takes_block(ctx.out_block, out.channel_block()) ? to_plain(out) : out;
}

std::vector<Tensor> GraphLayer::forward_prefix(RunContext& ctx, const Tensor& x, std::size_t upto) {
  check(!ctx.record, "graph: forward_prefix keeps nothing for a backward (a prediction only)");
  check(upto <= nodes_.size(), "graph: a prefix of ", upto, " of ", nodes_.size(), " nodes");
  check_input("graph", x, value_shape(0));
  check(x.channel_block() == 0, "graph: input in channel block ", x.channel_block(), " (the graph takes plain tensors)");
  std::vector<Tensor> vals(values_.size());
  vals[0] = x;
  kept_.assign(nodes_.size(), {});
  last_blocks_.assign(values_.size(), 0);
  run_nodes(ctx, vals, x.dim(0), 0, upto, nullptr);
  std::vector<Tensor> live(values_.size());
  for (std::size_t v = 0; v < values_.size(); ++v)
    if (!values_[v].is_constant && vals[v].defined() &&
        (last_use_[v] >= static_cast<int>(upto) || static_cast<int>(v) == output_))
      live[v] = to_plain(vals[v]);
  return live;
}

Tensor GraphLayer::forward_from(RunContext& ctx, std::vector<Tensor> vals, std::size_t from) {
  check(!ctx.record, "graph: forward_from keeps nothing for a backward (a prediction only)");
  check(from <= nodes_.size() && vals.size() == values_.size(), "graph: forward_from node ", from, " with ", vals.size(),
        " values (", nodes_.size(), " nodes, ", values_.size(), " values)");
  int64_t n = -1;
  for (const Tensor& t : vals)
    if (t.defined()) {
      n = t.dim(0);
      break;
    }
  check(n >= 0, "graph: forward_from without any value");
  kept_.assign(nodes_.size(), {});
  last_blocks_.resize(values_.size(), 0);
  run_nodes(ctx, vals, n, from, nodes_.size(), nullptr);
  const Tensor& out = value_at(vals, output_);
  return out.channel_block() != 0 && !takes_block(ctx.out_block, out.channel_block()) ? to_plain(out) : out;
}

void GraphLayer::run_nodes(RunContext& ctx, std::vector<Tensor>& vals, int64_t n, std::size_t from, std::size_t upto,
                           std::vector<Tensor>* all) {
  DType dt = dtype_;  // the values' dtype (the kernels' choice), as the first one held says
  for (const Tensor& t : vals)
    if (t.defined()) {
      dt = t.dtype();
      break;
    }
  const int out_block = ctx.out_block;
  const bool hooked = all || ctx.exec.layer_inputs || ctx.exec.replace_layer_input;
  const bool predicting = !ctx.record && !hooked;
  const bool blocks = !hooked && ctx.exec.channel_blocks;  // a prediction or a recorded (training) forward
  const std::vector<int> held = blocks ? value_blocks(ctx.exec, dt, out_block) : std::vector<int>(values_.size(), 0);
  // a prediction runs a batchnorm and the ReLU after it, or a batchnorm, an add and a ReLU, as one
  // op where nothing else reads what is between them (fused_span)
  std::vector<int> readers(values_.size(), 0);
  for (const GraphNode& node : nodes_)
    for (int v : node.inputs) ++readers[static_cast<std::size_t>(v)];
  const bool fuse = predicting && ctx.exec.fuse_bn_relu && ctx.semantics == Semantics::inference;
  // value v as a node that takes only plain tensors reads it
  auto plain_at = [&](int v) { return to_plain(value_at(vals, v)); };
  for (std::size_t i = from; i < upto;) {
    GraphNode& node = nodes_[i];
    Tensor y;
    const int in_block = node.op == GraphOp::layer && !is_constant(node.inputs[0])
                             ? value_at(vals, node.inputs[0]).channel_block()
                             : 0;
    FusedRun run = fuse ? fused_span(ctx.exec, i, dt, readers, in_block) : FusedRun{};
    if (i + run.span > upto) run = FusedRun{};  // a prefix ends inside the run
    const std::size_t span = run.span;
    const int out_v = nodes_[i + span - 1].output;  // the value the node (or the fused run) writes
    ctx.out_block = node.op == GraphOp::layer ? held[static_cast<std::size_t>(out_v)] : 0;
    switch (node.op) {
      case GraphOp::layer: {
        Tensor in = value_at(vals, node.inputs[0]);
        if (in.channel_block()) {
          const int t = node.layer->input_block(ctx.exec, in.dtype());
          if (!takes_block(t, in.channel_block())) in = to_plain(in);
        }
        if (ctx.exec.replace_layer_input)  // by node index; for this layer alone (earlier nodes keep theirs)
          if (Tensor r = ctx.exec.replace_layer_input(i, in); r.defined()) in = r;
        if (ctx.exec.layer_inputs) ctx.exec.layer_inputs(i, in);
        if (span == 1) {
          y = node.layer->forward(ctx, in);
          break;
        }
        if (run.conv >= 0) {  // [batchnorm [-> act] ->] convolution [-> batchnorm [-> act]]
          // the ConvChannelOp of the batchnorm at node j and the activation after it (n nodes)
          auto channel_op = [&](std::size_t j, std::size_t n) {
            ConvChannelOp e;
            check(layer_as<BatchNormLayer>(*nodes_[j].layer)->infer_channel_op(ctx.exec, in.dtype(), e),
                  "graph: node '", nodes_[j].name, "': no per-channel op");
            if (n == 2) {
              const ActivationParams& act = layer_as<ActivationLayer>(*nodes_[j + 1].layer)->op_params();
              e.act = act.kind == ActKind::clip ? ConvChannelOp::Act::clip : ConvChannelOp::Act::relu;
              e.clip_min = act.clip_min, e.clip_max = act.clip_max;
            }
            return e;
          };
          const std::size_t at = i + static_cast<std::size_t>(run.conv), pre = static_cast<std::size_t>(run.conv);
          const ConvChannelOp before = pre ? channel_op(i, pre) : ConvChannelOp{};
          const ConvChannelOp after = run.post ? channel_op(at + 1, run.post) : ConvChannelOp{};
          y = layer_as<Conv2dLayer>(*nodes_[at].layer)->forward_fused(ctx, in, pre ? &before : nullptr,
                                                                       run.post ? &after : nullptr);
          break;
        }
        auto* bn = layer_as<BatchNormLayer>(*node.layer);
        Tensor residual;  // batchnorm -> add: the add's other operand, in the batchnorm input's layout
        if (nodes_[i + 1].op == GraphOp::add) {
          residual = value_at(vals, nodes_[i + 1].inputs[1]);
          if (residual.channel_block() != in.channel_block()) residual = to_block(residual, in.channel_block());
        }
        const GraphNode& last = nodes_[i + span - 1];
        if (last.op == GraphOp::add) {
          y = bn->forward_infer_add(ctx, in, residual);
          break;
        }
        const ActivationParams& act = layer_as<ActivationLayer>(*last.layer)->op_params();
        if (residual.defined()) y = bn->forward_infer_add_relu(ctx, in, residual, act);
        else if (act.kind == ActKind::clip) y = bn->forward_infer_clip(ctx, in, act);
        else y = bn->forward_relu(ctx, in, act);
        break;
      }
      case GraphOp::add:
      case GraphOp::sub:
      case GraphOp::mul: {
        const BinaryOp op = binary_of(node.op);
        const Tensor a = cast_operand(vals, node.inputs[0], value_format(node.output));
        const Tensor b = cast_operand(vals, node.inputs[1], value_format(node.output));
        Shape want = value_shape(node.output);  // the shape; the layout as the operands allow
        want.insert(want.begin(), n);
        const Shape got = broadcast_shape(a.shape(), b.shape(), "graph: node '" + node.name + "'");
        check(got == want, "graph: node '", node.name, "': inputs ", shape_str(a.shape()), " and ", shape_str(b.shape()),
              " give ", shape_str(got), ", expected ", shape_str(want), " (a constant's leading axis meets the batch)");
        y = binary_forward(ctx, binary_backend_, op, a, b, want);
        if (ctx.record && op == BinaryOp::mul) kept_[i] = {a, b};
        break;
      }
      case GraphOp::concat: {
        std::vector<Tensor> cast;  // the operands as the op takes them (a constant cast under Keras's rule), plain
        for (int v : node.inputs) cast.push_back(to_plain(cast_operand(vals, v, value_format(node.output))));
        std::vector<const Tensor*> xs;
        for (std::size_t j = 0; j < node.inputs.size(); ++j) {
          const int v = node.inputs[j];
          xs.push_back(&cast[j]);
          check(!is_constant(v) || xs.back()->dim(0) == n, "graph: node '", node.name, "': constant '", value_name(v),
                "' has ", xs.back()->dim(0), " rows for a batch of ", n);
        }
        Shape want = value_shape(node.output);
        want.insert(want.begin(), n);
        y = Tensor::empty(want, dt);
        concat_forward_ref(node.axis, xs, y);
        break;
      }
      case GraphOp::reshape: {
        Shape want = value_shape(node.output);
        want.insert(want.begin(), n);
        y = plain_at(node.inputs[0]).reshape(want);
        break;
      }
      case GraphOp::multi: {
        std::vector<Tensor> plain;
        for (int v : node.inputs) plain.push_back(plain_at(v));
        std::vector<const Tensor*> xs;
        for (const Tensor& t : plain) xs.push_back(&t);
        y = node.multi->forward_all(ctx, xs);
        break;
      }
    }
    // autocast: a value held in a 16-bit format (nothing when off; a convolution's or dense
    // layer's result is rounded already, a reshape's input was)
    if (node.op != GraphOp::reshape) round_to_format(y, value_format(node.output));
    vals[static_cast<std::size_t>(out_v)] = y;
    last_blocks_[static_cast<std::size_t>(out_v)] = y.channel_block();
    if (all) all->push_back(y);
    for (std::size_t j = i; j < i + span; ++j)
      for (int v : nodes_[j].inputs)  // drop what no later node reads (the output is kept)
        if (last_use_[static_cast<std::size_t>(v)] == static_cast<int>(j) && v != output_)
          vals[static_cast<std::size_t>(v)] = Tensor();
    i += span;
  }
  ctx.out_block = out_block;
}

namespace {
// g += d, as a new tensor (a layer's dx may share storage with its dy), rounded to the format of
// the value whose gradient it is (autocast: autograd sums a 16-bit tensor's gradients in its dtype).
void accumulate(RunContext& ctx, KernelBackend backend, Tensor& g, const Tensor& d, MathMode format) {
  if (!d.defined()) return;
  if (!g.defined()) {
    g = d;
    return;
  }
  check(g.shape() == d.shape(), "graph backward: gradients ", shape_str(g.shape()), " and ", shape_str(d.shape()),
        " of one value");
  Tensor sum = binary_forward(ctx, backend, BinaryOp::add, g, d, g.shape());
  round_to_format(sum, format);
  g = sum;
}
}  // namespace

// Backward in the forward's layouts: each value's gradient is summed in the layout the forward held
// the value in (last_blocks_), each layer handed its output's gradient in its output's layout (as
// Sequential does); an add of two values of one shape passes the gradient on as it is (both
// operands' gradient is dy: the reference's copy, no arithmetic); sub, mul, concat and reshape
// work on plain tensors.
Tensor GraphLayer::backward(RunContext& ctx, const Tensor& dy) {
  check(kept_.size() == nodes_.size(), "graph: backward without a recorded forward");
  std::vector<Tensor> grads(values_.size());
  grads[static_cast<std::size_t>(output_)] = to_block(dy, last_block(output_));
  const bool input_grad = ctx.input_grad;
  for (std::size_t i = nodes_.size(); i-- > 0;) {
    GraphNode& node = nodes_[i];
    Tensor g = grads[static_cast<std::size_t>(node.output)];
    grads[static_cast<std::size_t>(node.output)] = Tensor();
    if (!g.defined()) continue;  // nothing downstream reaches the output
    g = rounded_to(g, value_format(node.output));  // autocast: the gradient of a 16-bit value
    // A value needs a gradient when it is computed (not a constant) and is not the input, or is
    // the input and the caller asked for dL/dx.
    auto wanted = [&](int v) { return !is_constant(v) && (v != 0 || input_grad); };
    // d (any layout) added into value v's gradient, in the layout v is held in
    auto add_to = [&](int v, const Tensor& d) {
      accumulate(ctx, binary_backend_, grads[static_cast<std::size_t>(v)], to_block(d, last_block(v)), value_format(v));
    };
    switch (node.op) {
      case GraphOp::layer: {
        ctx.need_dx = wanted(node.inputs[0]);
        Tensor dx = node.layer->backward(ctx, to_block(g, last_block(node.output)));
        if (ctx.need_dx) add_to(node.inputs[0], dx);
        break;
      }
      case GraphOp::add:
      case GraphOp::sub:
      case GraphOp::mul: {
        const BinaryOp op = binary_of(node.op);
        const int a = node.inputs[0], b = node.inputs[1];
        const int64_t n = g.dim(0);
        auto shape_of = [&](int v) {  // batched, as the forward read it (a constant as it is)
          if (is_constant(v)) return value_shape(v);
          Shape s = value_shape(v);
          s.insert(s.begin(), n);
          return s;
        };
        const Shape sa = shape_of(a), sb = shape_of(b);
        if (op == BinaryOp::add && sa == g.shape() && sb == g.shape()) {  // no broadcast: dA = dB = dy
          if (wanted(a)) add_to(a, g);
          if (wanted(b)) add_to(b, g);
          break;
        }
        const bool mul = op == BinaryOp::mul;  // the operands kept by the forward (add and sub need none)
        const Tensor gp = to_plain(g);
        const Tensor ka = mul ? to_plain(kept_[i].at(0)) : Tensor(), kb = mul ? to_plain(kept_[i].at(1)) : Tensor();
        Tensor da, db;
        if (wanted(a)) da = Tensor::empty(sa, g.dtype());
        if (wanted(b)) db = Tensor::empty(sb, g.dtype());
        binary_backward_ref(op, sa, sb, mul ? &ka : nullptr, mul ? &kb : nullptr, gp, da.defined() ? &da : nullptr,
                            db.defined() ? &db : nullptr);
        if (da.defined()) add_to(a, da);
        if (db.defined()) add_to(b, db);
        break;
      }
      case GraphOp::concat: {
        const Tensor gp = to_plain(g);
        std::vector<Tensor> dxs;
        std::vector<Tensor*> ptrs;
        dxs.reserve(node.inputs.size());
        for (int v : node.inputs) {
          Shape s = value_shape(v);
          if (!is_constant(v)) s.insert(s.begin(), g.dim(0));
          dxs.push_back(Tensor::empty(s, g.dtype()));
          ptrs.push_back(&dxs.back());
        }
        concat_backward_ref(node.axis, gp, ptrs);
        for (std::size_t j = 0; j < node.inputs.size(); ++j)
          if (wanted(node.inputs[j])) add_to(node.inputs[j], dxs[j]);
        break;
      }
      case GraphOp::multi:
        fail("graph: node '", node.name, "' (", node.layer->kind(), ") has no gradient");
      case GraphOp::reshape:
        if (wanted(node.inputs[0])) {
          Shape s = value_shape(node.inputs[0]);
          s.insert(s.begin(), g.dim(0));
          add_to(node.inputs[0], to_plain(g).reshape(s));
        }
        break;
    }
  }
  ctx.need_dx = true;
  kept_.clear();
  return input_grad ? to_plain(grads[0]) : Tensor();
}

std::vector<Param*> GraphLayer::params() {
  std::vector<Param*> out;
  for (GraphNode& n : nodes_)
    if (n.layer)
      for (Param* p : n.layer->params()) out.push_back(p);
  return out;
}

std::vector<Param*> GraphLayer::buffers() {
  std::vector<Param*> out;
  for (GraphNode& n : nodes_)
    if (n.layer)
      for (Param* p : n.layer->buffers()) out.push_back(p);
  for (Value& v : values_)
    if (v.is_constant) out.push_back(&v.param);
  return out;
}

void GraphLayer::collect(const std::string& prefix, bool want_buffers, std::vector<std::pair<std::string, Param*>>& out) {
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].layer) nodes_[i].layer->collect(prefix + "." + std::to_string(i), want_buffers, out);
  if (!want_buffers) return;
  for (std::size_t v = 0; v < values_.size(); ++v)
    if (values_[v].is_constant) out.emplace_back(prefix + ".c" + std::to_string(v) + ".constant.value", &values_[v].param);
}

}  // namespace driftlab
