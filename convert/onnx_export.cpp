#include "convert/onnx_export.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <limits>
#include <sstream>

#include "convert/onnx_graph.h"
#include "engine/build_info.h"
#include "core/error.h"
#include "engine/layers/all.h"
#include "engine/layers/sequential.h"
#include "engine/layers/weight_layout.h"
#include "models/model_file.h"

namespace driftlab {
namespace convert {
namespace {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;

using detail::attr_conv;
using detail::attr_float;
using detail::attr_floats;
using detail::attr_int;
using detail::attr_ints;
using detail::attr_strings;
using detail::Graph;
using detail::set_shape;

// The gate blocks of a (G*H, K) weight or a (G*H) bias in ONNX's order (engine's permute_blocks),
// the first block negated when `negate_first` (the Theano-style GRU's z).
Tensor onnx_gates(const Tensor& t, const std::vector<int64_t>& order, bool negate_first) {
  Tensor out = permute_blocks(t, order);
  if (negate_first) {
    float* z = out.data<float>();
    for (int64_t i = 0, n = out.numel() / static_cast<int64_t>(order.size()); i < n; ++i) z[i] = -z[i];
  }
  return out;
}

struct Ctx {
  Graph& g;
  const OnnxExportOptions& o;
  OnnxExport& report;
};

// in_rank: the rank of x, batch axis included
std::string emit_sequential(Ctx& c, Sequential& net, std::string x, const std::string& prefix, int64_t in_rank);
std::string emit_graph(Ctx& c, GraphLayer& g, const std::string& x, const std::string& name);

std::pair<std::vector<int64_t>, std::string> pads_of(const Ctx& c, int64_t t, int64_t l, int64_t b, int64_t r) {
  if (!c.o.symmetric_pads) return {{t, l, b, r}, ""};
  const int64_t h = (t + b + 1) / 2, w = (l + r + 1) / 2;
  return {{h, w, h, w}, " (pads made symmetric on purpose)"};
}

std::string emit_conv(Ctx& c, Conv2dLayer& l, const std::string& x, const std::string& name) {
  const Conv2dParams& p = l.op_params();
  auto ps = l.params();
  // ONNX's cross-correlation with the rotated weights computes Theano's convolution
  const Tensor w = p.flip ? rotate_180(ps[0]->value) : ps[0]->value;
  std::vector<std::string> in{x, c.g.floats(name + ".weight", w, w.shape())};
  if (ps.size() > 1) in.push_back(c.g.floats(name + ".bias", ps[1]->value, ps[1]->value.shape()));
  NodeProto* n;
  const std::string y = c.g.op("Conv", in, name, &n);
  const auto [pads, note] = pads_of(c, p.pad_t, p.pad_l, p.pad_b, p.pad_r);
  attr_conv(n, p, pads);
  std::ostringstream os;
  os << "Conv " << p.r << "x" << p.s << " stride " << p.stride_h << " pads [t,l,b,r] = [" << pads[0] << "," << pads[1]
     << "," << pads[2] << "," << pads[3] << "]" << note << (p.flip ? ", weights rotated 180 (filter flip)" : "");
  c.report.nodes.push_back(name + ": " + os.str());
  return y;
}

std::string emit_pool(Ctx& c, Pool2dLayer& l, const std::string& x, const std::string& name) {
  const Pool2dParams& p = l.op_params();
  const bool max = l.pool_kind() == PoolKind::max;
  NodeProto* n;
  const std::string y = c.g.op(max ? "MaxPool" : "AveragePool", {x}, name, &n);
  const auto [pads, note] = pads_of(c, p.pad_t, p.pad_l, p.pad_b, p.pad_r);
  attr_ints(n, "kernel_shape", {p.kh, p.kw});
  attr_ints(n, "strides", {p.stride_h, p.stride_w});
  attr_ints(n, "pads", pads);
  if (!max) attr_int(n, "count_include_pad", p.count_include_pad ? 1 : 0);
  std::ostringstream os;
  os << (max ? "MaxPool " : "AveragePool ") << p.kh << "x" << p.kw << " stride " << p.stride_h << " pads [" << pads[0]
     << "," << pads[1] << "," << pads[2] << "," << pads[3] << "]" << note
     << (max ? "" : p.count_include_pad ? ", count_include_pad 1" : ", count_include_pad 0");
  c.report.nodes.push_back(name + ": " + os.str());
  return y;
}

std::string emit_activation(Ctx& c, const ActivationParams& a, const std::string& x, const std::string& name) {
  NodeProto* n;
  switch (a.kind) {
    case ActKind::relu: c.report.nodes.push_back(name + ": Relu"); return c.g.op("Relu", {x}, name);
    case ActKind::tanh: c.report.nodes.push_back(name + ": Tanh"); return c.g.op("Tanh", {x}, name);
    case ActKind::sigmoid: c.report.nodes.push_back(name + ": Sigmoid"); return c.g.op("Sigmoid", {x}, name);
    case ActKind::hard_sigmoid: {
      const std::string y = c.g.op("HardSigmoid", {x}, name, &n);
      attr_float(n, "alpha", static_cast<float>(a.hs_slope));
      attr_float(n, "beta", static_cast<float>(a.hs_offset));
      c.report.nodes.push_back(name + ": HardSigmoid alpha " + std::to_string(a.hs_slope) + " beta " +
                               std::to_string(a.hs_offset) +
                               (a.hs_divide ? " (driftlab computes clip(x + 3, 0, 6) / 6 as PyTorch does; "
                                              "HardSigmoid is alpha*x + beta: last-bit differences)"
                                            : ""));
      return y;
    }
    case ActKind::clip: {  // opset 11+: the bounds are inputs
      const std::string lo = c.g.scalar(name + "_min", static_cast<float>(a.clip_min));
      const std::string hi = c.g.scalar(name + "_max", static_cast<float>(a.clip_max));
      c.report.nodes.push_back(name + ": Clip " + std::to_string(a.clip_min) + " " + std::to_string(a.clip_max));
      return c.g.op("Clip", {x, lo, hi}, name);
    }
  }
  fail("export onnx: ", name, ": unknown activation");
}

std::string emit_batchnorm(Ctx& c, BatchNormLayer& l, const std::string& x, const std::string& name, int64_t rank) {
  const BatchNormParams& p = l.op_params();
  auto ps = l.params();
  auto st = l.running_state();  // running_mean, running_var, ...
  const Tensor &gamma = ps[0]->value, &beta = ps[1]->value, &mean = st[0]->value, &var = st[1]->value;
  const int64_t C = gamma.numel();
  if (p.estimator != BnVarEstimator::inv_std) {
    NodeProto* n;
    const std::string y = c.g.op("BatchNormalization",
                                 {x, c.g.floats(name + ".gamma", gamma, {C}), c.g.floats(name + ".beta", beta, {C}),
                                  c.g.floats(name + ".running_mean", mean, {C}), c.g.floats(name + ".running_var", var, {C})},
                                 name, &n);
    attr_float(n, "epsilon", static_cast<float>(p.eps));
    c.report.nodes.push_back(name + ": BatchNormalization epsilon " + std::to_string(p.eps));
    return y;
  }
  // The running "variance" holds 1/sqrt(v + eps): y = (x - mean) * (gamma * s) + beta, the
  // product formed per channel in float as driftlab's kernel does (gamma * ((x - m) * s)
  // rounds differently by at most an ulp).
  Shape dims = rank == 4 ? Shape{C, 1, 1} : Shape{C};
  Tensor gs({C}, DType::f32);
  for (int64_t i = 0; i < C; ++i) gs.data<float>()[i] = gamma.data<float>()[i] * var.data<float>()[i];
  std::string y = c.g.op("Sub", {x, c.g.floats(name + ".running_mean", mean, dims)}, name + "_center");
  y = c.g.op("Mul", {y, c.g.floats(name + ".gamma_inv_std", gs, dims)}, name + "_scale");
  y = c.g.op("Add", {y, c.g.floats(name + ".beta", beta, dims)}, name);
  c.report.nodes.push_back(name + ": Sub/Mul/Add (running statistics as inverse std)");
  return y;
}

std::string emit_dense(Ctx& c, DenseLayer& l, const std::string& x, const std::string& name) {
  auto ps = l.params();
  const Tensor& w = ps[0]->value;
  std::vector<std::string> in{x, c.g.floats(name + ".weight", w, w.shape())};
  if (ps.size() > 1) in.push_back(c.g.floats(name + ".bias", ps[1]->value, ps[1]->value.shape()));
  NodeProto* n;
  const std::string y = c.g.op("Gemm", in, name, &n);
  attr_int(n, "transB", 1);
  c.report.nodes.push_back(name + ": Gemm transB=1 (" + std::to_string(w.dim(1)) + " -> " + std::to_string(w.dim(0)) + ")");
  return y;
}

std::string emit_rnn(Ctx& c, RnnLayer& l, const std::string& x, const std::string& name) {
  const RnnParams& p = l.op_params();
  check(l.mask_mode() == RnnMask::none, "export onnx: ", name, ": rnn_mask=", l.mask_mode() == RnnMask::carry ? "carry" : "zero",
        " (padded steps skipped) has no ONNX form here; export with rnn_mask=none");
  const bool lstm = p.cell == RnnCell::lstm;
  const int64_t G = lstm ? 4 : 3, H = p.hidden, F = p.input;
  const TorchRnnWeights w = l.torch_weights();  // gate row blocks LSTM i,f,g,o / GRU r,z,n
  // ONNX: LSTM i,o,f,c; GRU z,r,h. The Theano-style GRU update (z takes the new state) is
  // ONNX's with z negated: 1 - sigmoid(a) = sigmoid(-a), and the hard sigmoid is symmetric the
  // same way (1 - clip(s*a + 0.5) = clip(-s*a + 0.5)) for the offset 0.5 of every preset.
  std::vector<int64_t> order = lstm ? std::vector<int64_t>{0, 3, 1, 2} : std::vector<int64_t>{1, 0, 2};
  bool negate_z = false;
  if (!lstm && !p.gru_z_keeps_old) {
    check(p.gate_act.kind == ActKind::sigmoid || p.gate_act.hs_offset == 0.5, "export onnx: ", name,
          ": a GRU whose z takes the new state needs a gate activation symmetric about 0.5");
    negate_z = true;
  }
  if (c.o.rnn_gates_as_stored) order = lstm ? std::vector<int64_t>{0, 1, 2, 3} : std::vector<int64_t>{0, 1, 2}, negate_z = false;
  const Tensor W = onnx_gates(w.weight_ih, order, negate_z), R = onnx_gates(w.weight_hh, order, negate_z);
  Tensor B({2 * G * H}, DType::f32);
  const Tensor bi = onnx_gates(w.bias_ih, order, negate_z), bh = onnx_gates(w.bias_hh, order, negate_z);
  std::memcpy(B.data<float>(), bi.data<float>(), static_cast<std::size_t>(G * H) * 4);
  std::memcpy(B.data<float>() + G * H, bh.data<float>(), static_cast<std::size_t>(G * H) * 4);

  NodeProto* n;
  std::string xt = c.g.op("Transpose", {x}, name + "_time_major", &n);  // (N,T,F) -> (T,N,F)
  attr_ints(n, "perm", {1, 0, 2});
  std::vector<std::string> in{xt, c.g.floats(name + ".W", W, {1, G * H, F}), c.g.floats(name + ".R", R, {1, G * H, H}),
                              c.g.floats(name + ".B", B, {1, 2 * G * H})};
  if (lstm && p.peepholes) {
    const Tensor& pw = *l.peephole_weights();  // rows w_ci, w_cf, w_co; ONNX P: i, o, f
    Tensor P({3 * H}, DType::f32);
    const int rows[3] = {0, 2, 1};
    for (int k = 0; k < 3; ++k)
      std::memcpy(P.data<float>() + k * H, pw.data<float>() + rows[k] * H, static_cast<std::size_t>(H) * 4);
    in.insert(in.end(), {"", "", "", c.g.floats(name + ".P", P, {1, 3 * H})});
  }
  const std::string Y = c.g.fresh(name + "_Y"), Yh = c.g.fresh(name + "_Y_h");
  std::vector<std::string> outs{Y, Yh};
  if (lstm) outs.push_back(c.g.fresh(name + "_Y_c"));
  n = c.g.node(lstm ? "LSTM" : "GRU", in, outs, c.g.fresh(name));
  attr_int(n, "hidden_size", H);
  const bool hard = p.gate_act.kind == ActKind::hard_sigmoid;
  std::vector<std::string> acts{hard ? "HardSigmoid" : "Sigmoid", "Tanh"};
  if (lstm) acts.push_back("Tanh");
  attr_strings(n, "activations", acts);
  if (hard) {
    // alpha/beta are consumed in the order of the activations that take them: only HardSigmoid here
    attr_floats(n, "activation_alpha", {static_cast<float>(p.gate_act.hs_slope)});
    attr_floats(n, "activation_beta", {static_cast<float>(p.gate_act.hs_offset)});
  }
  if (!lstm) attr_int(n, "linear_before_reset", p.gru_reset_after ? 1 : 0);
  std::ostringstream os;
  os << (lstm ? "LSTM" : "GRU") << " hidden " << H << ", gates " << (c.o.rnn_gates_as_stored ? "as stored (on purpose)" : lstm ? "i,o,f,c" : "z,r,h")
     << ", gate activation " << acts[0];
  if (hard) os << " (" << p.gate_act.hs_slope << ", " << p.gate_act.hs_offset << ")";
  if (!lstm) os << ", linear_before_reset " << (p.gru_reset_after ? 1 : 0) << (negate_z ? ", z negated" : "");
  if (lstm && p.peepholes) os << ", peepholes";
  if (!p.two_biases) os << ", recurrent bias 0";

  std::string y;
  if (l.return_sequences()) {  // Y (T,1,N,H) -> (N,T,H)
    y = c.g.op("Squeeze", {Y, c.g.ints(c.g.fresh(name + "_axes"), {1})}, name + "_seq");
    y = c.g.op("Transpose", {y}, name + "_batch_major", &n);
    attr_ints(n, "perm", {1, 0, 2});
    os << ", every step";
  } else {  // Y_h (1,N,H) -> (N,H)
    y = c.g.op("Squeeze", {Yh, c.g.ints(c.g.fresh(name + "_axes"), {0})}, name + "_last");
    os << ", last step";
  }
  c.report.nodes.push_back(name + ": " + os.str());
  return y;
}

std::string emit_residual(Ctx& c, ResidualLayer& l, const std::string& x, const std::string& name) {
  const int64_t rank = static_cast<int64_t>(l.input_shape().size()) + 1;
  const std::string main = emit_sequential(c, l.main(), x, name + ".main", rank);
  std::string sc = x;
  if (l.shortcut() == Shortcut::option_b) {
    sc = emit_sequential(c, *l.projection(), x, name + ".projection", rank);
  } else if (l.shortcut() == Shortcut::option_a) {
    // x[:, :, ::s, ::s], then zero channels: pad_before in front, the rest behind
    const int64_t s = l.stride(), cin = l.input_shape()[0], cout = l.output_shape()[0];
    const int64_t big = std::numeric_limits<int64_t>::max();
    sc = c.g.op("Slice",
                {x, c.g.ints(c.g.fresh(name + "_starts"), {0, 0}), c.g.ints(c.g.fresh(name + "_ends"), {big, big}),
                 c.g.ints(c.g.fresh(name + "_axes"), {2, 3}), c.g.ints(c.g.fresh(name + "_steps"), {s, s})},
                name + "_subsample");
    const int64_t before = l.pad_before(), after = cout - cin - before;
    sc = c.g.op("Pad", {sc, c.g.ints(c.g.fresh(name + "_pads"), {0, before, 0, 0, 0, after, 0, 0})}, name + "_pad_channels");
    c.report.nodes.push_back(name + ": shortcut option A: Slice step " + std::to_string(s) + ", Pad channels " +
                             std::to_string(before) + " before, " + std::to_string(after) + " after");
  }
  c.report.nodes.push_back(name + ": Add (residual)");
  return c.g.op("Add", {main, sc}, name + "_add");
}

// One layer as ONNX nodes reading the value x, one visit per kind; y is the value it outputs.
class OnnxEmit : public LayerVisitor {
 public:
  OnnxEmit(Ctx& c, const std::string& x, const std::string& name, int64_t rank)
      : c_(c), x_(x), name_(name), rank_(rank) {}
  std::string y;

  void visit(Conv2dLayer& l) override { y = emit_conv(c_, l, x_, name_); }
  void visit(Pool2dLayer& l) override { y = emit_pool(c_, l, x_, name_); }
  void visit(ActivationLayer& l) override { y = emit_activation(c_, l.op_params(), x_, name_); }
  void visit(BatchNormLayer& l) override { y = emit_batchnorm(c_, l, x_, name_, rank_); }
  void visit(DenseLayer& l) override { y = emit_dense(c_, l, x_, name_); }
  void visit(RnnLayer& l) override { y = emit_rnn(c_, l, x_, name_); }
  void visit(ResidualLayer& l) override { y = emit_residual(c_, l, x_, name_); }
  void visit(GraphLayer& l) override { y = emit_graph(c_, l, x_, name_); }
  void visit(DropoutLayer&) override {
    c_.report.nodes.push_back(name_ + ": dropout: the identity at inference, no node");
    y = x_;
  }
  void visit(FlattenLayer& l) override {
    y = x_;
    NodeProto* n;
    if (l.order() == FlattenOrder::hwc && l.input_shape().size() == 3) {
      y = c_.g.op("Transpose", {x_}, name_ + "_channels_last", &n);
      attr_ints(n, "perm", {0, 2, 3, 1});
    }
    y = c_.g.op("Flatten", {y}, name_, &n);
    attr_int(n, "axis", 1);
    c_.report.nodes.push_back(name_ + (l.order() == FlattenOrder::hwc && l.input_shape().size() == 3
                                           ? ": Transpose(0,2,3,1) + Flatten (channels-last feature order)"
                                           : ": Flatten (channels-first feature order)"));
  }
  void visit(GlobalAvgPoolLayer&) override {
    NodeProto* n;
    y = c_.g.op("GlobalAveragePool", {x_}, name_);
    y = c_.g.op("Flatten", {y}, name_ + "_flatten", &n);
    attr_int(n, "axis", 1);
    c_.report.nodes.push_back(name_ + ": GlobalAveragePool + Flatten");
  }
  void visit(EmbeddingLayer& l) override {
    NodeProto* n;
    std::string ids = c_.g.op("Cast", {x_}, name_ + "_ids", &n);
    attr_int(n, "to", TensorProto::INT64);
    const Tensor& table = l.params()[0]->value;
    c_.report.nodes.push_back(name_ + ": Cast(int64) + Gather (" + std::to_string(table.dim(0)) + " x " +
                              std::to_string(table.dim(1)) + ")");
    y = c_.g.op("Gather", {c_.g.floats(name_ + ".table", table, table.shape()), ids}, name_, &n);
  }
  // int8 layers: an int8 model as a whole goes through emit_int8 (convert/onnx_quant_export.cpp)
  void visit(ExternalLayer& l) override { fail("export onnx: layer ", name_, " (", l.kind(), ") has no ONNX mapping"); }

  static Support support(Kind<Conv2dLayer>) { return Support::all("Conv (pads written out, flip in the weights)"); }
  static Support support(Kind<Pool2dLayer>) { return Support::all("MaxPool / AveragePool (pads written out)"); }
  static Support support(Kind<DenseLayer>) { return Support::all("Gemm transB=1"); }
  static Support support(Kind<ActivationLayer>) { return Support::all("Relu, Tanh, Sigmoid, HardSigmoid(alpha, beta), Clip(min, max)"); }
  static Support support(Kind<BatchNormLayer>) { return Support::all("BatchNormalization; inverse std as Sub/Mul/Add"); }
  static Support support(Kind<DropoutLayer>) { return Support::all("the identity, no node"); }
  static Support support(Kind<FlattenLayer>) { return Support::all("Flatten (Transpose first when channels-last)"); }
  static Support support(Kind<GlobalAvgPoolLayer>) { return Support::all("GlobalAveragePool + Flatten"); }
  static Support support(Kind<EmbeddingLayer>) { return Support::all("Cast(int64) + Gather"); }
  static Support support(Kind<RnnLayer>) {
    return Support::some("LSTM/GRU; rnn_mask=none, z-new GRU gates symmetric at 0.5");
  }
  static Support support(Kind<ResidualLayer>) { return Support::all("Add; option A shortcut as Slice + Pad"); }
  static Support support(Kind<GraphLayer>) {
    return Support::all("its nodes by their kinds; Add/Sub/Mul, Concat, Reshape; constants as initializers");
  }
  static Support support(Kind<ExternalLayer>) { return Support::none("int8 layers: in a whole int8 model only (QDQ/QOp)"); }

 private:
  Ctx& c_;
  const std::string& x_;
  const std::string& name_;
  const int64_t rank_;
};

std::string emit_layer(Ctx& c, Layer& layer, const std::string& x, const std::string& name, int64_t rank) {
  OnnxEmit e(c, x, name, rank);
  layer.accept(e);
  return e.y;
}

// A graph model's nodes in order, each value an ONNX value: a layer node through its kind's
// emission, add/sub/mul as the ONNX ops of the same broadcasting, concat on its axis, reshape to
// (batch copied, the per-sample shape); constants as initializers. Node names carry the graph's.
std::string emit_graph(Ctx& c, GraphLayer& g, const std::string& x, const std::string& name) {
  std::vector<std::string> v(g.num_values());
  v[0] = x;
  for (std::size_t i = 1; i < g.num_values(); ++i) {
    const int vi = static_cast<int>(i);
    if (!g.is_constant(vi)) continue;
    const Tensor t = g.constant(vi).to(DType::f32);
    v[i] = c.g.floats(c.g.fresh(name + ".constant." + g.value_name(vi)), t, t.shape());
  }
  for (std::size_t j = 0; j < g.num_nodes(); ++j) {
    GraphNode& n = g.node(j);
    const std::string nn = name + "." + n.name;
    std::string y;
    switch (n.op) {
      case GraphOp::layer: {
        const int64_t rank = static_cast<int64_t>(g.value_shape(n.inputs[0]).size()) + 1;
        y = emit_layer(c, *n.layer, v[static_cast<std::size_t>(n.inputs[0])], nn, rank);
        break;
      }
      case GraphOp::add:
      case GraphOp::sub:
      case GraphOp::mul: {
        const char* op = n.op == GraphOp::add ? "Add" : n.op == GraphOp::sub ? "Sub" : "Mul";
        y = c.g.op(op, {v[static_cast<std::size_t>(n.inputs[0])], v[static_cast<std::size_t>(n.inputs[1])]}, nn);
        c.report.nodes.push_back(nn + ": " + op + " (broadcasting)");
        break;
      }
      case GraphOp::concat: {
        std::vector<std::string> ins;
        for (int i : n.inputs) ins.push_back(v[static_cast<std::size_t>(i)]);
        NodeProto* node;
        y = c.g.op("Concat", ins, nn, &node);
        attr_int(node, "axis", n.axis);
        c.report.nodes.push_back(nn + ": Concat axis " + std::to_string(n.axis));
        break;
      }
      case GraphOp::reshape: {
        std::vector<int64_t> shape{0};  // 0: the batch axis copied
        for (int64_t d : g.value_shape(n.output)) shape.push_back(d);
        y = c.g.op("Reshape", {v[static_cast<std::size_t>(n.inputs[0])], c.g.ints(c.g.fresh(nn + "_shape"), shape)}, nn);
        c.report.nodes.push_back(nn + ": Reshape");
        break;
      }
      case GraphOp::multi:
        fail("export onnx: ", nn, " (", n.layer->kind(), ") has no float ONNX form (an int8 graph: not exported yet)");
    }
    v[static_cast<std::size_t>(n.output)] = y;
  }
  return v[static_cast<std::size_t>(g.output_value())];
}

std::string emit_sequential(Ctx& c, Sequential& net, std::string x, const std::string& prefix, int64_t in_rank) {
  for (std::size_t i = 0; i < net.size(); ++i) {
    Layer& l = net.layer(i);
    const std::string name = prefix + (prefix.empty() ? "" : ".") + std::to_string(i) + "." + l.kind();
    // the rank of this layer's input, batch included: BatchNorm's explicit form needs it
    const int64_t rank = i == 0 ? in_rank : static_cast<int64_t>(net.layer(i - 1).output_shape().size()) + 1;
    x = emit_layer(c, l, x, name, rank);
  }
  return x;
}

}  // namespace

OnnxExport export_onnx(Model& model, const OnnxExportOptions& o) {
  check(o.opset >= 13 && o.opset <= 17, "export onnx: --opset ", o.opset,
        " (13..17: Squeeze, Slice and Pad take their axes and pads as inputs from 13 on; 17 is the newest this "
        "ONNX checker knows)");
  const bool int8 = detail::is_int8_model(model);
  check(int8 || model.dtype() == DType::f32, "export onnx: model '", model.name,
        "' is float64 (dtype knob); ONNX Runtime's Conv, Gemm and LSTM kernels are float32: export a float32 model");
  OnnxExport r;
  onnx::ModelProto m;
  m.set_ir_version(o.opset <= 14 ? 7 : 8);
  m.set_producer_name("driftlab");
  m.set_producer_version(build_commit());
  m.set_model_version(1);
  m.set_doc_string(o.doc);
  auto* os = m.add_opset_import();
  os->set_domain("");
  os->set_version(o.opset);
  if (int8 && o.quant_form == OnnxExportOptions::QuantForm::qoperator) {  // QGemm, QLinearAdd, QLinearGlobalAveragePool
    auto* ms = m.add_opset_import();
    ms->set_domain("com.microsoft");
    ms->set_version(1);
  }
  auto add_meta = [&](const std::string& k, const std::string& v) {
    auto* p = m.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  };
  add_meta("driftlab.model", model.name);
  add_meta("driftlab.policy", model.policy.to_string());
  add_meta("driftlab.input_mean", std::to_string(o.norm.mean));
  add_meta("driftlab.input_std", std::to_string(o.norm.std));

  onnx::GraphProto* g = m.mutable_graph();
  g->set_name(model.name);
  Graph graph(g);
  Ctx c{graph, o, r};
  std::string x = "x";
  set_shape(g->add_input(), model.input_shape, TensorProto::FLOAT);
  g->mutable_input(0)->set_name("x");
  if (!o.norm.identity()) {
    // driftlab's apply_norm: (x - mean) * float(1/std), in float
    x = graph.op("Sub", {x, graph.scalar("input_mean", static_cast<float>(o.norm.mean))}, "standardise_center");
    x = graph.op("Mul", {x, graph.scalar("input_inv_std", static_cast<float>(1.0 / o.norm.std))}, "standardise_scale");
    r.nodes.push_back("input: Sub mean " + std::to_string(o.norm.mean) + ", Mul 1/std " + std::to_string(1.0 / o.norm.std));
  }
  const std::string y = int8 ? detail::emit_int8(graph, model, x, o, r)
                             : emit_sequential(c, *model.net, x, "", static_cast<int64_t>(model.input_shape.size()) + 1);
  // the graph output: an Identity named 'logits'
  graph.node("Identity", {y}, {"logits"}, "logits");
  graph.output("logits", TensorProto::FLOAT, {model.num_classes});
  r.num_nodes = g->node_size();
  r.num_initializers = g->initializer_size();
  check(m.SerializeToString(&r.bytes), "export onnx: protobuf serialization failed");
  const std::string why = check_onnx(r.bytes);
  check(why.empty(), "export onnx: ONNX's checker refused the graph driftlab wrote (a bug): ", why);
  return r;
}

std::string check_onnx(const std::string& bytes) {
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) return "not a serialized ONNX ModelProto";
  try {
    onnx::checker::check_model(m);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void write_onnx(const std::string& path, const std::string& bytes) { write_file_atomic(path, bytes); }

SupportColumn onnx_export_support() { return support_of<OnnxEmit>(); }

}  // namespace convert
}  // namespace driftlab
