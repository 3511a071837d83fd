#include "convert/onnx_import.h"

#include "convert/onnx_read.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "engine/layers/all.h"
#include "engine/layers/sequential.h"
#include "engine/layers/weight_layout.h"
#include "models/models.h"

namespace driftlab {
namespace convert {
namespace {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;
using namespace detail;

// ---------------------------------------------------------------------------------------------
// Reading the graph

struct GraphView {
  std::string file;
  std::map<std::string, const TensorProto*> consts;  // initializers and Constant outputs
  std::map<std::string, const NodeProto*> producer;
  std::map<std::string, std::vector<const NodeProto*>> consumers;
  std::set<std::string> data;  // values computed from the graph input

  const TensorProto* constant(const std::string& v) const {
    auto it = consts.find(v);
    return it == consts.end() ? nullptr : it->second;
  }
};

Tensor to_float(const GraphView& g, const TensorProto& t, const NodeProto&) { return tensor_to_float(g.file, t); }

// The float initializer (or Constant) feeding input `i` of node n; an error naming the node when
// it is computed instead.
Tensor weight_input(const GraphView& g, const NodeProto& n, int i) {
  check(i < n.input_size() && !n.input(i).empty(), "import onnx: ", g.file, ": ", node_str(n), " has no input ", i);
  const TensorProto* t = g.constant(n.input(i));
  check(t, "import onnx: ", g.file, ": ", node_str(n), ": input ", i, " ('", n.input(i),
        "') is computed in the graph; a weight must be an initializer or a Constant");
  return to_float(g, *t, n);
}
bool has_input(const NodeProto& n, int i) { return i < n.input_size() && !n.input(i).empty(); }

// A weighted node, in graph order.
struct WeightedOp {
  const NodeProto* node;
  const NodeProto* bias_add = nullptr;  // MatMul's bias Add
};

// Ops whose only job here is shape plumbing or that the mapping checks by count.
const std::set<std::string> kKnown = {"Conv",    "BatchNormalization", "Gemm",      "MatMul",   "Add",       "Relu",
                                      "Tanh",    "Sigmoid",            "HardSigmoid", "MaxPool", "AveragePool",
                                      "GlobalAveragePool", "Flatten",  "Reshape",   "Transpose", "Squeeze",  "Unsqueeze",
                                      "Gather",  "Shape",              "Constant",  "ConstantOfShape", "Concat", "Slice",
                                      "Pad",     "Cast",               "Identity",  "LSTM",     "GRU",       "Dropout",
                                      "ReduceMean"};

struct Parsed {
  GraphView g;
  Shape input;  // per sample
  std::vector<WeightedOp> weighted;
  std::vector<const NodeProto*> pools;
  int relus = 0, tanhs = 0, sigmoids = 0, residual_adds = 0, global_pools = 0;
  // A Transpose(0,2,3,1) into a Flatten: the feature map flattened in (h,w,c) order, as driftlab
  // writes a model whose flatten_order is hwc (Keras's Flatten); the model is then built with it.
  const NodeProto* channels_last_flatten = nullptr;
};

Parsed parse(const onnx::ModelProto& m, const std::string& file) {
  Parsed p;
  GraphView& g = p.g;
  g.file = file;
  const onnx::GraphProto& graph = m.graph();
  for (const auto& t : graph.initializer()) g.consts[t.name()] = &t;
  std::string x;
  for (const auto& in : graph.input())
    if (!g.consts.count(in.name())) {
      check(x.empty(), "import onnx: ", file, ": the graph has more than one input ('", x, "', '", in.name(), "')");
      x = in.name();
      const auto& dims = in.type().tensor_type().shape().dim();
      check(dims.size() >= 2, "import onnx: ", file, ": input '", x, "' has rank ", dims.size(),
            "; (batch, ...) wanted");
      for (int i = 1; i < dims.size(); ++i) {
        check(dims[i].has_dim_value(), "import onnx: ", file, ": input '", x, "' axis ", i,
              " has no fixed size (only the batch axis may be symbolic)");
        p.input.push_back(dims[i].dim_value());
      }
    }
  check(!x.empty(), "import onnx: ", file, ": the graph has no input besides its initializers");
  check(graph.output_size() == 1, "import onnx: ", file, ": the graph has ", graph.output_size(),
        " outputs; one (the logits) wanted");
  g.data.insert(x);
  for (const NodeProto& n : graph.node()) {
    check(kKnown.count(n.op_type()) && (n.domain().empty() || n.domain() == "ai.onnx"), "import onnx: ", file, ": ",
          node_str(n), (n.domain().empty() ? "" : " in domain '" + n.domain() + "'"),
          " cannot be mapped onto a driftlab layer");
    for (const auto& o : n.output()) g.producer[o] = &n;
    bool on_data = false;
    for (const auto& i : n.input()) {
      g.consumers[i].push_back(&n);
      on_data |= g.data.count(i) > 0;
    }
    if (n.op_type() == "Constant") {
      const AttributeProto* v = find_attr(n, "value");
      check(v && v->type() == AttributeProto::TENSOR, "import onnx: ", file, ": ", node_str(n),
            ": only a Constant with a tensor 'value' is read");
      g.consts[n.output(0)] = &v->t();
    }
    if (on_data && n.op_type() != "Shape")
      for (const auto& o : n.output()) g.data.insert(o);
  }
  // Classify the data nodes.
  std::set<const NodeProto*> bias_adds;
  for (const NodeProto& n : graph.node()) {
    bool on_data = false;
    for (const auto& i : n.input()) on_data |= g.data.count(i) > 0;
    if (!on_data) continue;
    const std::string& op = n.op_type();
    if (op == "Conv" || op == "BatchNormalization" || op == "Gemm" || op == "LSTM" || op == "GRU") {
      p.weighted.push_back({&n});
    } else if (op == "MatMul") {
      WeightedOp w{&n};
      const auto& cons = g.consumers[n.output(0)];
      if (cons.size() == 1 && cons[0]->op_type() == "Add") {
        const NodeProto& add = *cons[0];
        const std::string other = add.input(0) == n.output(0) ? add.input(1) : add.input(0);
        if (g.constant(other)) w.bias_add = &add, bias_adds.insert(&add);
      }
      p.weighted.push_back(w);
    } else if (op == "Gather") {
      const TensorProto* table = g.constant(n.input(0));
      if (table && table->data_type() == TensorProto::FLOAT && table->dims_size() == 2) p.weighted.push_back({&n});
    } else if (op == "Add") {
      if (!bias_adds.count(&n)) {
        check(g.data.count(n.input(0)) && g.data.count(n.input(1)), "import onnx: ", file, ": ", node_str(n),
              ": an Add of data and a constant that is not a MatMul's bias cannot be mapped");
        ++p.residual_adds;
      }
    } else if (op == "Relu") {
      ++p.relus;
    } else if (op == "Tanh") {
      ++p.tanhs;
    } else if (op == "Sigmoid") {
      ++p.sigmoids;
    } else if (op == "MaxPool" || op == "AveragePool") {
      p.pools.push_back(&n);
    } else if (op == "GlobalAveragePool") {
      ++p.global_pools;
    } else if (op == "ReduceMean") {
      // x.mean((2, 3)) of a (N,C,H,W) map: a global average pool (how PyTorch writes ResNet's)
      check(attr_ints(n, "axes", {}) == std::vector<int64_t>({2, 3}) && n.input_size() == 1, "import onnx: ", file, ": ",
            node_str(n), ": only a mean over axes (2,3), a global average pool, is mapped");
      ++p.global_pools;
    } else if (op == "Transpose") {
      const auto perm = attr_ints(n, "perm", {});
      // the time-major plumbing around LSTM/GRU, or a channels-last flatten: (N,C,H,W) ->
      // (N,H,W,C) read by nothing but one Flatten at axis 1. Any other permutation of data changes
      // the feature order in a way no driftlab layer has, and is not mapped silently.
      const auto& cons = g.consumers[n.output(0)];
      const bool into_flatten = perm == std::vector<int64_t>({0, 2, 3, 1}) && cons.size() == 1 &&
                                cons[0]->op_type() == "Flatten" && attr_i(*cons[0], "axis", 1) == 1;
      check(perm == std::vector<int64_t>({1, 0, 2}) || into_flatten, "import onnx: ", file, ": ", node_str(n),
            ": only the (1,0,2) transposes around a recurrent layer and a (0,2,3,1) transpose into a Flatten "
            "(a channels-last flatten) are mapped");
      if (into_flatten) {
        if (p.channels_last_flatten)
          fail("import onnx: ", file, ": ", node_str(n), ": a second channels-last flatten (after ",
               node_str(*p.channels_last_flatten), "); the zoo's models flatten once");
        p.channels_last_flatten = &n;
      }
    } else if (op == "HardSigmoid") {
      fail("import onnx: ", file, ": ", node_str(n), ": a HardSigmoid layer is not in any zoo model");
    }
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// Matching a zoo model

void flatten_layers(Sequential& net, std::vector<Layer*>& out) {
  for (std::size_t i = 0; i < net.size(); ++i) {
    Layer& l = net.layer(i);
    if (auto* r = layer_as<ResidualLayer>(l)) {
      out.push_back(&l);
      flatten_layers(r->main(), out);
      if (r->projection()) flatten_layers(*r->projection(), out);
    } else {
      out.push_back(&l);
    }
  }
}

struct Mismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};
template <typename... Args>
void need(bool ok, Args&&... args) {
  if (ok) return;
  std::ostringstream os;
  (os << ... << args);
  throw Mismatch(os.str());
}

// An initial state input: absent, a zero initializer, or ConstantOfShape of 0.
bool zero_state(const GraphView& g, const NodeProto& n, int i) {
  if (!has_input(n, i)) return true;
  if (const TensorProto* t = g.constant(n.input(i))) {
    const Tensor v = to_float(g, *t, n);
    for (int64_t k = 0; k < v.numel(); ++k)
      if (v.data<float>()[k] != 0.f) return false;
    return true;
  }
  auto it = g.producer.find(n.input(i));
  if (it == g.producer.end() || it->second->op_type() != "ConstantOfShape") return false;
  const AttributeProto* v = find_attr(*it->second, "value");
  if (!v) return true;  // default 0
  const TensorProto& t = v->t();
  if (t.data_type() != TensorProto::FLOAT) return false;
  const Tensor z = to_float(g, t, *it->second);
  return z.numel() == 1 && z.data<float>()[0] == 0.f;
}

void map_rnn(const GraphView& g, const NodeProto& n, RnnLayer& l, std::vector<std::string>& mapping, const std::string& lname) {
  const bool lstm = l.cell() == RnnCell::lstm;
  need(n.op_type() == (lstm ? "LSTM" : "GRU"), lname, " wants ", lstm ? "LSTM" : "GRU", ", the graph has ", node_str(n));
  const RnnParams& p = l.op_params();
  const int64_t G = lstm ? 4 : 3, H = p.hidden;
  need(attr_i(n, "hidden_size", -1) == H, node_str(n), ": hidden_size, ", lname, " has ", H);
  need(attr_s(n, "direction", "forward") == "forward", node_str(n), ": only direction 'forward' maps");
  need(attr_i(n, "layout", 0) == 0, node_str(n), ": only layout 0 (time-major) maps");
  const auto acts = find_attr(n, "activations");
  if (acts) {
    std::vector<std::string> want{"Sigmoid", "Tanh"};
    if (lstm) want.push_back("Tanh");
    std::vector<std::string> have(acts->strings().begin(), acts->strings().end());
    need(have == want, node_str(n), ": activations other than the default sigmoid/tanh");
  }
  need(!find_attr(n, "clip"), node_str(n), ": a cell clip has no driftlab form");
  if (lstm) need(attr_i(n, "input_forget", 0) == 0, node_str(n), ": input_forget=1 has no driftlab form");
  if (!lstm)
    need(attr_i(n, "linear_before_reset", 0) == (p.gru_reset_after ? 1 : 0), node_str(n), ": linear_before_reset, ", lname,
         " resets ", p.gru_reset_after ? "after" : "before", " the recurrent product");
  need(!has_input(n, 4), node_str(n), ": sequence_lens (padded sequences) is not mapped");
  need(zero_state(g, n, 5), node_str(n), ": a non-zero initial_h");
  if (lstm) {
    need(zero_state(g, n, 6), node_str(n), ": a non-zero initial_c");
    need(!has_input(n, 7), node_str(n), ": peepholes (input P) are not in the zoo's LSTM");
  }
  const Tensor W = weight_input(g, n, 1), R = weight_input(g, n, 2);
  need(W.shape() == Shape({1, G * H, p.input}) && R.shape() == Shape({1, G * H, H}), node_str(n), ": W ", shape_str(W.shape()),
       ", R ", shape_str(R.shape()), " for ", lname);
  // ONNX i,o,f,c -> i,f,g,o; z,r,h -> r,z,n
  const std::vector<int64_t> order = lstm ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{1, 0, 2};
  TorchRnnWeights w;
  w.weight_ih = permute_blocks(W.reshape({G * H, p.input}), order);
  w.weight_hh = permute_blocks(R.reshape({G * H, H}), order);
  if (has_input(n, 3)) {
    const Tensor B = weight_input(g, n, 3);
    need(B.shape() == Shape({1, 2 * G * H}), node_str(n), ": B ", shape_str(B.shape()));
    Tensor bi({G * H}, DType::f32), bh({G * H}, DType::f32);
    std::memcpy(bi.data<float>(), B.data<float>(), static_cast<std::size_t>(G * H) * 4);
    std::memcpy(bh.data<float>(), B.data<float>() + G * H, static_cast<std::size_t>(G * H) * 4);
    w.bias_ih = permute_blocks(bi, order);
    w.bias_hh = permute_blocks(bh, order);
  } else {
    w.bias_ih = Tensor({G * H}, DType::f32);
    w.bias_hh = Tensor({G * H}, DType::f32);
  }
  l.set_torch_weights(w);
  mapping.push_back("node '" + n.name() + "' (" + n.op_type() + ") -> " + lname + " (gates reordered to " +
                    (lstm ? "i,f,g,o" : "r,z,n") + ")");
}

// Assigns the parsed graph's nodes to a model's layers (in flatten_layers' order), one visit per
// kind: the weighted layers take the next weighted node and its weights; activations, pools,
// residual blocks and global pools are counted and checked against the graph's after the last
// layer (finish). Throws Mismatch.
class ImportMatch : public LayerVisitor {
 public:
  ImportMatch(const Parsed& p, const std::vector<Layer*>& layers) : p_(p), g_(p.g), layers_(layers) {}

  // layers_[li], named lname ("3.conv2d") in messages and the mapping.
  void match(std::size_t li, const std::string& lname) {
    li_ = li;
    lname_ = lname;
    layers_[li]->accept(*this);
  }

  void visit(Conv2dLayer& c) override {
    const NodeProto& n = *next().node;
    need(n.op_type() == "Conv", lname_, " wants Conv, the graph has ", node_str(n));
    const Conv2dParams& cp = c.op_params();
    auto ps = c.params();
    const Tensor w = weight_input(g_, n, 1);
    need(w.shape() == ps[0]->value.shape(), node_str(n), ": weight ", shape_str(w.shape()), ", ", lname_, " has ",
         shape_str(ps[0]->value.shape()));
    need(attr_s(n, "auto_pad", "NOTSET") == "NOTSET", node_str(n), ": auto_pad is not mapped (explicit pads only)");
    need(attr_ints(n, "strides", {1, 1}) == std::vector<int64_t>({cp.stride_h, cp.stride_w}), node_str(n), ": strides, ",
         lname_, " has ", cp.stride_h);
    need(attr_ints(n, "dilations", {1, 1}) == std::vector<int64_t>({cp.dil_h, cp.dil_w}), node_str(n), ": dilations");
    need(attr_ints(n, "pads", {0, 0, 0, 0}) == std::vector<int64_t>({cp.pad_t, cp.pad_l, cp.pad_b, cp.pad_r}),
         node_str(n), ": pads, ", lname_, " pads [", cp.pad_t, ",", cp.pad_l, ",", cp.pad_b, ",", cp.pad_r, "]");
    need(attr_i(n, "group", 1) == 1, node_str(n), ": grouped convolution");
    ps[0]->value = w;
    const bool onnx_bias = has_input(n, 2);
    if (ps.size() > 1) {
      need(onnx_bias, node_str(n), ": no bias, ", lname_, " has one");
      ps[1]->value = weight_input(g_, n, 2);
      mapping.push_back("node '" + n.name() + "' (Conv) -> " + lname_);
    } else if (onnx_bias) {
      // torch.onnx.export's eval-mode folding: the BatchNorm after this conv became its bias
      const bool bn_next = li_ + 1 < layers_.size() && layer_as<BatchNormLayer>(*layers_[li_ + 1]);
      const bool bn_in_graph = j_ < p_.weighted.size() && p_.weighted[j_].node->op_type() == "BatchNormalization";
      need(bn_next && !bn_in_graph, node_str(n), " has a bias; ", lname_, " has none and no folded BatchNorm follows");
      folded_bias_store_ = weight_input(g_, n, 2);
      folded_bias_ = &folded_bias_store_;
      mapping.push_back("node '" + n.name() + "' (Conv, BatchNorm folded in) -> " + lname_ + " and the BatchNorm after it");
    } else {
      mapping.push_back("node '" + n.name() + "' (Conv) -> " + lname_);
    }
  }
  void visit(BatchNormLayer& bn) override {
    auto ps = bn.params();
    auto st = bn.running_state();
    const int64_t C = ps[0]->value.numel();
    if (folded_bias_) {
      need(folded_bias_->numel() == C, "folded bias of ", folded_bias_->numel(), " for ", lname_, " of ", C);
      const float eps = static_cast<float>(bn.op_params().eps);
      // the variance v with 1/sqrt(v + eps) == 1 exactly in float, as the kernel computes it
      float v = 1.f - eps;
      for (int k = 0; k < 64; ++k) {
        const float inv = 1.f / std::sqrt(v + eps);
        if (inv == 1.f) break;
        v = std::nextafter(v, inv > 1.f ? 2.f : 0.f);  // inv > 1: v + eps below 1, step up
      }
      need(1.f / std::sqrt(v + eps) == 1.f, lname_, ": no float variance gives an exact identity");
      for (int64_t k = 0; k < C; ++k) {
        ps[0]->value.data<float>()[k] = 1.f;
        ps[1]->value.data<float>()[k] = folded_bias_->data<float>()[k];
        st[0]->value.data<float>()[k] = 0.f;
        st[1]->value.data<float>()[k] = v;
      }
      folded_bias_ = nullptr;
      return;
    }
    const NodeProto& n = *next().node;
    need(n.op_type() == "BatchNormalization", lname_, " wants BatchNormalization, the graph has ", node_str(n));
    need(static_cast<float>(attr_f(n, "epsilon", 1e-5f)) == static_cast<float>(bn.op_params().eps), node_str(n),
         ": epsilon, ", lname_, " has ", bn.op_params().eps, " (the torch preset's bn_eps)");
    need(n.output_size() == 1, node_str(n), ": a training-mode BatchNormalization (running outputs)");
    const Tensor vals[4] = {weight_input(g_, n, 1), weight_input(g_, n, 2), weight_input(g_, n, 3), weight_input(g_, n, 4)};
    for (const Tensor& t : vals) need(t.numel() == C, node_str(n), ": ", t.numel(), " channels, ", lname_, " has ", C);
    ps[0]->value = vals[0].reshape({C});
    ps[1]->value = vals[1].reshape({C});
    st[0]->value = vals[2].reshape({C});
    st[1]->value = vals[3].reshape({C});
    mapping.push_back("node '" + n.name() + "' (BatchNormalization) -> " + lname_);
  }
  void visit(DenseLayer& d) override {
    const WeightedOp& op = next();
    const NodeProto& n = *op.node;
    auto ps = d.params();
    const Shape want = ps[0]->value.shape();  // (out, in)
    Tensor w, b;
    if (n.op_type() == "Gemm") {
      need(attr_i(n, "transA", 0) == 0 && attr_f(n, "alpha", 1.f) == 1.f && attr_f(n, "beta", 1.f) == 1.f, node_str(n),
           ": only Gemm with transA 0, alpha 1, beta 1 maps");
      w = weight_input(g_, n, 1);
      if (attr_i(n, "transB", 0) == 0) w = transpose2d(w);
      if (has_input(n, 2)) b = weight_input(g_, n, 2);
    } else {
      need(n.op_type() == "MatMul", lname_, " wants Gemm or MatMul, the graph has ", node_str(n));
      w = transpose2d(weight_input(g_, n, 1));
      if (op.bias_add) b = weight_input(g_, *op.bias_add, op.bias_add->input(0) == n.output(0) ? 1 : 0);
    }
    need(w.shape() == want, node_str(n), ": weight ", shape_str(w.shape()), " as (out,in), ", lname_, " has ",
         shape_str(want));
    ps[0]->value = w;
    if (ps.size() > 1) {
      need(b.defined() && b.numel() == want[0], node_str(n), ": bias missing or of the wrong size for ", lname_);
      ps[1]->value = b.reshape({want[0]});
    }
    mapping.push_back("node '" + n.name() + "' (" + n.op_type() + ") -> " + lname_);
  }
  void visit(RnnLayer& r) override { map_rnn(g_, *next().node, r, mapping, lname_); }
  void visit(EmbeddingLayer& e) override {
    const NodeProto& n = *next().node;
    need(n.op_type() == "Gather", lname_, " wants Gather, the graph has ", node_str(n));
    const Tensor t = weight_input(g_, n, 0);
    need(t.shape() == e.params()[0]->value.shape(), node_str(n), ": table ", shape_str(t.shape()), ", ", lname_, " has ",
         shape_str(e.params()[0]->value.shape()));
    e.params()[0]->value = t;
    mapping.push_back("node '" + n.name() + "' (Gather) -> " + lname_);
  }
  void visit(ActivationLayer& a) override {
    const ActKind k = a.op_params().kind;
    need(k == ActKind::relu || k == ActKind::tanh || k == ActKind::sigmoid, lname_, ": ", act_name(k));
    (k == ActKind::relu ? relus_ : k == ActKind::tanh ? tanhs_ : sigmoids_) += 1;
  }
  void visit(Pool2dLayer& pl) override { pools_.push_back(&pl); }
  void visit(ResidualLayer&) override { ++residuals_; }
  void visit(GraphLayer&) override { need(false, lname_, ": a graph model is imported as a graph (import_onnx_graph), not matched"); }
  void visit(GlobalAvgPoolLayer&) override { ++global_pools_; }
  void visit(FlattenLayer& f) override {
    const bool hwc = p_.channels_last_flatten != nullptr;
    need(f.order() == (hwc ? FlattenOrder::hwc : FlattenOrder::chw), lname_, ": the model flattens ",
         f.order() == FlattenOrder::hwc ? "channels-last" : "channels-first", ", the graph ", hwc ? "channels-last" : "channels-first");
    if (hwc) {
      ++hwc_flattens_;
      mapping.push_back("node '" + p_.channels_last_flatten->name() + "' (Transpose 0,2,3,1) and the Flatten after it -> " +
                        lname_ + " (flatten_order=hwc)");
    }
  }
  void visit(DropoutLayer&) override {}
  void visit(ExternalLayer&) override { need(false, lname_, ": no ONNX mapping"); }

  // After the last layer: every weighted node used, the counted nodes as many as the model's
  // layers, each pool's window, stride and pads as the graph's.
  void finish(const Model& m) const {
    if (j_ < p_.weighted.size())
      need(false, "the graph has ", p_.weighted.size() - j_, " weighted nodes beyond ", m.name, "'s layers (from ",
           node_str(*p_.weighted[j_].node), ")");
    need(relus_ == p_.relus && tanhs_ == p_.tanhs && sigmoids_ == p_.sigmoids, "activations: the graph has ", p_.relus,
         " Relu, ", p_.tanhs, " Tanh, ", p_.sigmoids, " Sigmoid; ", m.name, " has ", relus_, ", ", tanhs_, ", ", sigmoids_);
    need(residuals_ == p_.residual_adds, "residual Adds: the graph has ", p_.residual_adds, ", ", m.name, " has ",
         residuals_);
    need(global_pools_ == p_.global_pools, "global average pools: the graph has ", p_.global_pools, ", ", m.name, " has ",
         global_pools_);
    need(!p_.channels_last_flatten || hwc_flattens_ == 1, "the graph's channels-last flatten (",
         p_.channels_last_flatten ? node_str(*p_.channels_last_flatten) : std::string(), ") has no flatten in ", m.name);
    need(pools_.size() == p_.pools.size(), "pools: the graph has ", p_.pools.size(), ", ", m.name, " has ", pools_.size());
    for (std::size_t k = 0; k < pools_.size(); ++k) {
      const NodeProto& n = *p_.pools[k];
      const Pool2dParams& pp = pools_[k]->op_params();
      const bool max = pools_[k]->pool_kind() == PoolKind::max;
      need(n.op_type() == (max ? "MaxPool" : "AveragePool"), "pool ", k, ": ", node_str(n), ", ", m.name, " has a ",
           max ? "max" : "average", " pool");
      need(attr_ints(n, "kernel_shape", {}) == std::vector<int64_t>({pp.kh, pp.kw}) &&
               attr_ints(n, "strides", {1, 1}) == std::vector<int64_t>({pp.stride_h, pp.stride_w}) &&
               attr_ints(n, "pads", {0, 0, 0, 0}) == std::vector<int64_t>({pp.pad_t, pp.pad_l, pp.pad_b, pp.pad_r}) &&
               attr_i(n, "ceil_mode", 0) == 0 && attr_ints(n, "dilations", {1, 1}) == std::vector<int64_t>({1, 1}),
           node_str(n), ": window, stride, pads or ceil_mode differ from ", m.name, "'s pool ", k);
      if (!max)
        need(attr_i(n, "count_include_pad", 0) == (pp.count_include_pad ? 1 : 0), node_str(n), ": count_include_pad");
    }
  }

  std::vector<std::string> mapping;  // one line per weighted node, in graph order

  static Support support(Kind<Conv2dLayer>) { return Support::all("Conv, explicit pads, group 1; or BatchNorm folded in"); }
  static Support support(Kind<Pool2dLayer>) { return Support::all("MaxPool / AveragePool, explicit pads, no ceil_mode"); }
  static Support support(Kind<DenseLayer>) { return Support::all("Gemm (transA 0, alpha/beta 1) or MatMul + Add"); }
  static Support support(Kind<ActivationLayer>) { return Support::some("Relu, Tanh, Sigmoid (counted); not hard_sigmoid"); }
  static Support support(Kind<BatchNormLayer>) { return Support::all("BatchNormalization, or folded into the Conv before"); }
  static Support support(Kind<DropoutLayer>) { return Support::all("no node"); }
  static Support support(Kind<FlattenLayer>) {
    return Support::all("Flatten (channels-first), or Transpose(0,2,3,1) + Flatten (flatten_order=hwc)");
  }
  static Support support(Kind<GlobalAvgPoolLayer>) { return Support::all("GlobalAveragePool or ReduceMean over (2,3)"); }
  static Support support(Kind<EmbeddingLayer>) { return Support::all("Gather of a float initializer table"); }
  static Support support(Kind<RnnLayer>) {
    return Support::some("LSTM/GRU: forward, sigmoid/tanh, zero state, no P/clip");
  }
  static Support support(Kind<ResidualLayer>) { return Support::all("an Add of two computed values (counted)"); }
  static Support support(Kind<GraphLayer>) { return Support::none("the zoo match; graphs import as graphs (import_onnx_graph)"); }
  static Support support(Kind<ExternalLayer>) { return Support::none("the zoo's fp32 models only"); }

 private:
  // The next weighted node of the graph, for the current layer.
  const WeightedOp& next() {
    need(j_ < p_.weighted.size(), lname_, " has no weighted node left in the graph (", p_.weighted.size(), " in all)");
    return p_.weighted[j_++];
  }

  const Parsed& p_;
  const GraphView& g_;
  const std::vector<Layer*>& layers_;
  std::size_t li_ = 0, j_ = 0;  // the current layer; the next weighted node
  std::string lname_;
  int relus_ = 0, tanhs_ = 0, sigmoids_ = 0, residuals_ = 0, global_pools_ = 0, hwc_flattens_ = 0;
  std::vector<Pool2dLayer*> pools_;
  const Tensor* folded_bias_ = nullptr;  // a folded Conv's bias, for the BatchNorm after it
  Tensor folded_bias_store_;
};

// Maps the parsed graph onto model m (the torch preset; flatten_order=hwc where the graph flattens
// channels-last) and sets its weights; throws Mismatch.
std::vector<std::string> map_onto(const Parsed& p, Model& m) {
  need(m.input_shape == p.input, "input ", shape_str(p.input), ", ", m.name, " takes ", shape_str(m.input_shape));
  std::vector<Layer*> layers;
  flatten_layers(*m.net, layers);
  ImportMatch match(p, layers);
  for (std::size_t li = 0; li < layers.size(); ++li) match.match(li, std::to_string(li) + "." + layers[li]->kind());
  match.finish(m);
  return std::move(match.mapping);
}

}  // namespace

OnnxImport import_onnx_bytes(const std::string& bytes, const std::string& file) {
  const onnx::ModelProto m = parse_checked_model(bytes, file);
  OnnxImport r;
  r.opset = default_opset(m);
  r.producer = m.producer_name() + " " + m.producer_version();
  const Parsed p = parse(m, file);
  const TensorProto* table = nullptr;
  for (const WeightedOp& w : p.weighted)
    if (w.node->op_type() == "Gather") table = p.g.constant(w.node->input(0));
  std::string tried;
  for (const ModelInfo& info : model_table()) {
    if (info.input_shape.size() != p.input.size()) continue;
    ModelArgs args;
    if (info.num_ids > 0) {
      if (!table) continue;
      // the table's rows and the sequence length size the model built below: both checked first
      // (the table's dims against the data it holds, in to_float)
      const NodeProto& gather = *std::find_if(p.weighted.begin(), p.weighted.end(), [](const WeightedOp& w) {
                                   return w.node->op_type() == "Gather";
                                 })->node;
      const Tensor t = to_float(p.g, *table, gather);
      check(t.rank() == 2 && t.dim(0) >= 1 && p.input[0] >= 1 && p.input[0] <= (1 << 20), "import onnx: ", file,
            ": an embedding table ", shape_str(t.shape()), " over sequences of ", p.input[0], " steps");
      args.num_ids = t.dim(0), args.steps = p.input[0];
    } else if (table) {
      continue;
    }
    // The torch preset (ONNX's layouts), flattening channels-last where the graph does.
    Policy pol = Policy::torch();
    if (p.channels_last_flatten) pol.set("flatten_order", "hwc");
    Model candidate = build_model(info.name, pol, 1, args);
    try {
      r.mapping = map_onto(p, candidate);
    } catch (const Mismatch& e) {
      tried += "\n  " + info.name + ": " + e.what();
      continue;
    }
    r.model = std::move(candidate);
    return r;
  }
  fail("import onnx: ", file, ": the graph (", p.weighted.size(), " weighted nodes, input ", shape_str(p.input),
       ") maps onto no driftlab model:", tried.empty() ? std::string(" no model takes this input shape") : tried);
}

SupportColumn onnx_import_support() { return support_of<ImportMatch>(); }

OnnxImport import_onnx(const std::string& path) {
  return import_onnx_bytes(detail::read_file_bytes(path, "import onnx"), path);
}

}  // namespace convert
}  // namespace driftlab
