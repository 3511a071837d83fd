#include "convert/onnx_graph_import.h"

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <set>
#include <sstream>

#include "convert/onnx_read.h"
#include "core/ops/conv2d.h"
#include "engine/layers/all.h"
#include "engine/random.h"
#include "models/graph.h"

namespace driftlab {
namespace convert {
namespace {

using nlohmann::json;
using onnx::NodeProto;
using onnx::TensorProto;
using namespace detail;

// int64 (or int32) tensor values: Reshape's shape, Clip's bounds never are (float).
std::vector<int64_t> to_ints(const std::string& file, const TensorProto& t, const NodeProto& n) {
  std::vector<int64_t> out;
  if (t.data_type() == TensorProto::INT64) {
    if (!t.raw_data().empty()) {
      check(t.raw_data().size() % 8 == 0, "import onnx: ", file, ": ", node_str(n), ": tensor '", t.name(), "' has ",
            t.raw_data().size(), " raw bytes (not int64s)");
      out.resize(t.raw_data().size() / 8);
      std::memcpy(out.data(), t.raw_data().data(), t.raw_data().size());
    } else {
      out.assign(t.int64_data().begin(), t.int64_data().end());
    }
  } else if (t.data_type() == TensorProto::INT32 && t.raw_data().empty()) {
    out.assign(t.int32_data().begin(), t.int32_data().end());
  } else {
    fail("import onnx: ", file, ": ", node_str(n), ": tensor '", t.name(), "' is ",
         TensorProto::DataType_Name(static_cast<TensorProto::DataType>(t.data_type())), ", int64 wanted");
  }
  int64_t claimed = 1;
  for (int64_t d : t.dims()) claimed *= d;
  check(claimed == static_cast<int64_t>(out.size()), "import onnx: ", file, ": ", node_str(n), ": tensor '", t.name(),
        "' holds ", out.size(), " values for dims of ", claimed);
  return out;
}

class Importer {
 public:
  Importer(const onnx::ModelProto& m, const std::string& file, const OnnxGraphOptions& o, int64_t opset)
      : m_(m), file_(file), o_(o), policy_(Policy::parse(o.policy)), rng_(policy_.rng_engine, 1), opset_(opset) {}

  OnnxGraph run() {
    const onnx::GraphProto& g = m_.graph();
    for (const TensorProto& t : g.initializer()) consts_[t.name()] = &t;
    std::string input = o_.input;
    std::size_t next_bound = 0;
    bound_.reserve(o_.bind_files.size());
    for (const auto& vi : g.input()) {
      if (consts_.count(vi.name())) continue;
      if (input.empty()) input = vi.name();
      if (vi.name() == input) continue;
      check(next_bound < o_.bind_files.size(), "import onnx: ", file_, ": graph input '", vi.name(),
            "' is neither the data input ('", input, "'), an initializer nor bound to a value");
      const std::string& f = o_.bind_files[next_bound++];
      bound_.emplace_back();
      check(bound_.back().ParseFromString(read_file_bytes(f, "import onnx")), "import onnx: ", f,
            ": not a serialized TensorProto (bound to graph input '", vi.name(), "')");
      consts_[vi.name()] = &bound_.back();
    }
    check(!input.empty(), "import onnx: ", file_, ": no graph input left for the data");
    check(next_bound == o_.bind_files.size(), "import onnx: ", file_, ": ", o_.bind_files.size(),
          " values bound, the graph has ", next_bound, " inputs besides the data");
    Shape in;
    bool found = false;
    for (const auto& vi : g.input())
      if (vi.name() == input) in = input_shape(vi), found = true;
    check(found, "import onnx: ", file_, ": data input '", input, "' not among the graph's inputs");
    check_name(input, "the data input's name");
    b_ = std::make_unique<GraphBuilder>(input, in, policy_, rng_);
    for (const NodeProto& n : g.node())
      for (const std::string& i : n.input()) ++readers_[i];
    for (const auto& o : g.output()) ++readers_[o.name()];
    for (const NodeProto& n : g.node()) node(n);
    for (const auto& [value, pad] : pending_pads_)
      fail("import onnx: ", file_, ": the Pad writing '", value,
           "' is read by no Conv or AveragePool (a Pad is supported only folded into the one that reads it)");
    check(g.output_size() >= 1, "import onnx: ", file_, ": the graph has no output");
    check(g.output_size() == 1, "import onnx: ", file_, ": the graph has ", g.output_size(),
          " outputs; one (the logits) is read");
    const std::string out = resolve(g.output(0).name());
    const int ov = b_->graph().find_value(out);
    check(ov >= 0 && !b_->graph().is_constant(ov), "import onnx: ", file_, ": the output '", g.output(0).name(),
          "' is not computed from the input");
    b_->graph().set_output(ov);
    OnnxGraph r;
    r.spec = b_->spec().dump();
    r.input = input;
    r.output = g.output(0).name();
    r.input_shape = in;
    r.output_shape = b_->graph().output_shape();
    r.nodes = std::move(log_);
    // the file's weights into the built layers
    GraphLayer& gl = b_->graph();
    for (std::size_t w = 0; w < weights_.size(); ++w) {
      const auto& [node_index, ws] = weights_[w];
      Layer& layer = *gl.node(node_index).layer;
      std::vector<Param*> ps = layer.params();
      std::vector<Param*> bs = layer.buffers();
      ps.insert(ps.end(), bs.begin(), bs.end());
      for (std::size_t j = 0; j < ws.size() && j < ps.size() && j < weight_names_[w].size(); ++j)
        r.sources.emplace_back(std::to_string(node_index) + "." + layer.kind() + "." + ps[j]->name, weight_names_[w][j]);
      for (std::size_t j = 0; j < ws.size(); ++j) {
        check(j < ps.size() && ps[j]->value.shape() == ws[j].shape(), "import onnx: ", file_, ": node '",
              gl.node(node_index).name, "': weight ", j, " of shape ", shape_str(ws[j].shape()), " for the layer's ",
              j < ps.size() ? shape_str(ps[j]->value.shape()) : std::string("(none)"));
        ps[j]->value = ws[j].to(ps[j]->value.dtype());
      }
    }
    for (const auto& [v, t] : constants_) {
      Tensor& dst = const_cast<Tensor&>(gl.constant(v));
      dst = t.to(dst.dtype());
    }
    r.graph = b_->release();
    return r;
  }

 private:
  Shape input_shape(const onnx::ValueInfoProto& vi) const {
    check(vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() == TensorProto::FLOAT, "import onnx: ",
          file_, ": data input '", vi.name(), "' is not a float32 tensor");
    const auto& dims = vi.type().tensor_type().shape().dim();
    check(dims.size() >= 1, "import onnx: ", file_, ": data input '", vi.name(), "' is a scalar; (N, ...) wanted");
    Shape s;
    for (int i = 1; i < dims.size(); ++i) {
      check(dims[i].has_dim_value() && dims[i].dim_value() >= 1, "import onnx: ", file_, ": data input '", vi.name(),
            "' axis ", i, " is not a fixed size (only the batch axis may vary)");
      s.push_back(dims[i].dim_value());
    }
    return s;
  }

  std::string resolve(const std::string& v) const {
    auto it = alias_.find(v);
    return it == alias_.end() ? v : it->second;
  }
  const TensorProto* constant(const std::string& v) const {
    auto it = consts_.find(v);
    return it == consts_.end() ? nullptr : it->second;
  }
  bool is_const(const std::string& v) const { return constant(v) != nullptr; }
  Tensor const_float(const NodeProto& n, int i) const {
    check(i < n.input_size() && !n.input(i).empty(), "import onnx: ", file_, ": ", node_str(n), " has no input ", i);
    const TensorProto* t = constant(n.input(i));
    check(t, "import onnx: ", file_, ": ", node_str(n), ": input ", i, " ('", n.input(i),
          "') is computed; an initializer or Constant is wanted here");
    try {
      return tensor_to_float(file_, *t);
    } catch (const Error& e) {
      fail("import onnx: ", file_, ": ", node_str(n), ": ", e.what());
    }
  }
  // A computed value's index (aliases followed); an error naming the node when it is unknown.
  int data(const NodeProto& n, int i) const {
    check(i < n.input_size() && !n.input(i).empty(), "import onnx: ", file_, ": ", node_str(n), " has no input ", i);
    check(!pending_pads_.count(n.input(i)), "import onnx: ", file_, ": ", node_str(n), " reads '", n.input(i),
          "', a Pad's output: only a Conv or AveragePool reading it alone is supported (the pad is folded into it)");
    const int v = b_->graph().find_value(resolve(n.input(i)));
    check(v >= 0, "import onnx: ", file_, ": ", node_str(n), " reads '", n.input(i),
          "', which no earlier node writes (a cycle, a dangling name or nodes out of order)");
    return v;
  }
  const Shape& shape(int v) const { return b_->graph().value_shape(v); }
  void need(bool ok, const NodeProto& n, const std::string& why) const {
    check(ok, "import onnx: ", file_, ": ", node_str(n), ": ", why);
  }
  // Attributes the importer reads of each op; any other is refused by name.
  void only_attrs(const NodeProto& n, const std::set<std::string>& known) const {
    for (const auto& a : n.attribute())
      need(known.count(a.name()) > 0, n, "attribute '" + a.name() + "' is not supported");
  }
  // A name the graph spec (JSON) can hold: valid UTF-8.
  void check_name(const std::string& s, const std::string& what) const {
    check_utf8_name(s, "import onnx: " + file_ + ": " + what);
  }
  // A spec node for n's first output; logs it.
  int add(const NodeProto& n, json j, const std::vector<std::string>& inputs) {
    need(n.output_size() >= 1 && !n.output(0).empty(), n, "no output");

    j["name"] = n.name().empty() ? n.op_type() + "_" + std::to_string(log_.size()) : n.name();
    j["inputs"] = inputs;
    j["output"] = n.output(0);
    const int v = b_->add_node(j);
    log_.push_back(node_str(n) + " -> " + j["op"].get<std::string>());
    return v;
  }
  std::string name_of(int v) const { return b_->graph().value_name(v); }
  // A constant operand of an element-wise op as a graph constant (once per name).
  int const_value(const NodeProto& n, int i) {
    const std::string name = n.input(i);
    check_name(name, "node '" + n.name() + "''s input name");
    const int have = b_->graph().find_value(name);
    if (have >= 0) return have;
    Tensor t = const_float(n, i);
    Shape s = t.shape();
    if (s.empty()) s = {1};
    const int v = b_->add_constant(name, s);
    constants_.emplace_back(v, t.reshape(s));
    return v;
  }

  // Input 0 of a Conv or pool: a computed value, or a zero Pad's input whose pads (t, b, l, r) are
  // returned in `folded` (the Pad itself becomes no node: its zeros are the op's padding).
  int data_or_pad(const NodeProto& n, std::vector<int64_t>& folded) {
    folded.assign(4, 0);
    if (n.input_size() > 0) {
      auto it = pending_pads_.find(n.input(0));
      if (it != pending_pads_.end()) {
        folded = it->second.second;
        const int v = it->second.first;
        pending_pads_.erase(it);
        return v;
      }
    }
    return data(n, 0);
  }
  static std::vector<int64_t> add_pads(std::vector<int64_t> a, const std::vector<int64_t>& b) {
    for (std::size_t i = 0; i < 4; ++i) a[i] += b[i];
    return a;
  }

  std::vector<int64_t> pads_of(const NodeProto& n, const Shape& in, const std::vector<int64_t>& k,
                               const std::vector<int64_t>& st, const std::vector<int64_t>& dil) {
    const std::string auto_pad = attr_s(n, "auto_pad", "NOTSET");
    if (auto_pad == "NOTSET") {
      const auto p = attr_ints(n, "pads", {0, 0, 0, 0});
      need(p.size() == 4, n, "pads of " + std::to_string(p.size()) + " values (2-D: 4)");
      return {p[0], p[2], p[1], p[3]};  // ONNX: [t, l, b, r]; ours t, b, l, r
    }
    if (auto_pad == "VALID") return {0, 0, 0, 0};
    need(auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER", n, "auto_pad '" + auto_pad + "'");
    // SAME_UPPER: the odd pixel at the end (ONNX Conv's definition); SAME_LOWER: at the start
    const bool upper = auto_pad == "SAME_UPPER";
    std::vector<int64_t> out(4);
    for (int a = 0; a < 2; ++a) {
      const int64_t size = in[static_cast<std::size_t>(1 + a)];
      const int64_t outn = (size + st[static_cast<std::size_t>(a)] - 1) / st[static_cast<std::size_t>(a)];
      int64_t total = (outn - 1) * st[static_cast<std::size_t>(a)] + (k[static_cast<std::size_t>(a)] - 1) * dil[static_cast<std::size_t>(a)] + 1 - size;
      if (total < 0) total = 0;
      out[static_cast<std::size_t>(2 * a)] = upper ? total / 2 : total - total / 2;
      out[static_cast<std::size_t>(2 * a + 1)] = total - out[static_cast<std::size_t>(2 * a)];
    }
    return out;
  }

  void node(const NodeProto& n) {
    const std::string& op = n.op_type();
    check_name(n.name(), "the name of node " + std::to_string(log_.size()));
    for (const std::string& o : n.output()) check_name(o, "an output name of node '" + n.name() + "'");
    need(n.domain().empty() || n.domain() == "ai.onnx", n, "domain '" + n.domain() + "' is not supported");
    // The importer implements each op as opsets 9 to 17 define it: a file of an older opset is read
    // where its version of the op is one of those (GlobalAveragePool-1 is still opset 17's).
    if (opset_ < 9) {
      const onnx::OpSchema* at_file = onnx::OpSchemaRegistry::Schema(op, static_cast<int>(opset_));
      const onnx::OpSchema* at9 = onnx::OpSchemaRegistry::Schema(op, 9);
      need(at_file && at9 && at_file->SinceVersion() == at9->SinceVersion(), n,
           "opset " + std::to_string(opset_) + "'s " + op + (at_file ? "-" + std::to_string(at_file->SinceVersion()) : "") +
               " predates opset 9's (opsets 9 to 17 are supported)");
    }
    if (op == "Constant") {
      only_attrs(n, {"value"});
      const auto* a = find_attr(n, "value");
      need(a && a->type() == onnx::AttributeProto::TENSOR, n, "only a 'value' tensor Constant is supported");
      consts_[n.output(0)] = &a->t();
      return;
    }
    if (op == "Identity" || op == "Dropout") {
      only_attrs(n, {"ratio", "seed", "is_test"});
      // Dropout is the identity at inference; its training mode (opset 12's third input true, or
      // opset 6's is_test 0) draws a mask: refused, not run as the identity
      if (op == "Dropout" && n.input_size() > 2 && !n.input(2).empty()) {
        const TensorProto* t = constant(n.input(2));
        need(t != nullptr, n, "a computed training_mode");
        need(t->data_type() == TensorProto::BOOL && (t->raw_data().empty() ? t->int32_data_size() == 1 : t->raw_data().size() == 1), n,
             "training_mode is not one bool");
        const bool on = t->raw_data().empty() ? t->int32_data(0) != 0 : t->raw_data()[0] != 0;
        need(!on, n, "training-mode dropout (a random mask) is not supported");
      }
      need(op != "Dropout" || attr_i(n, "is_test", 1) != 0, n, "training-mode dropout (is_test 0) is not supported");
      need(n.output_size() == 1 || (op == "Dropout" && n.output_size() == 2 && n.output(1).empty()), n,
           "a mask output is not supported");
      if (is_const(n.input(0))) {
        consts_[n.output(0)] = constant(n.input(0));
      } else {
        alias_[n.output(0)] = name_of(data(n, 0));
      }
      log_.push_back(node_str(n) + " -> (identity)");
      return;
    }
    need(n.output_size() == 1 || op == "BatchNormalization", n, "several outputs");
    if (op == "Pad") {
      // zeros around H and W, folded into the one Conv or AveragePool that reads the result
      only_attrs(n, {"mode", "pads", "value"});
      need(attr_s(n, "mode", "constant") == "constant", n, "mode '" + attr_s(n, "mode", "constant") + "' (constant only)");
      const int x = data(n, 0);
      need(shape(x).size() == 3, n, "a Pad of (N,C,H,W) is supported");
      std::vector<int64_t> p;
      if (opset_ >= 11) {
        need(n.input_size() > 1 && is_const(n.input(1)), n, "pads computed, not a constant");
        p = to_ints(file_, *constant(n.input(1)), n);
        if (n.input_size() > 2 && !n.input(2).empty()) need(const_float(n, 2).at(0) == 0.0, n, "a constant value other than 0");
      } else {
        p = attr_ints(n, "pads", {});
        need(attr_decimal(n, "value", 0.0) == 0.0, n, "a value other than 0");
      }
      need(p.size() == 8 && p[0] == 0 && p[1] == 0 && p[4] == 0 && p[5] == 0, n,
           "pads other than on H and W (8 values, batch and channel pads 0)");
      for (int64_t v : p) need(v >= 0 && v <= (int64_t{1} << 16), n, "negative or huge pads (a crop) are not supported");
      need(readers_[n.output(0)] == 1, n, "its output is read " + std::to_string(readers_[n.output(0)]) +
                                              " times; a Pad is folded into the one Conv or AveragePool reading it");
      pending_pads_[n.output(0)] = {x, {p[2], p[6], p[3], p[7]}};
      log_.push_back(node_str(n) + " -> (folded into the node reading it)");
      return;
    }
    if (op == "Conv") {
      only_attrs(n, {"kernel_shape", "strides", "dilations", "pads", "group", "auto_pad"});
      std::vector<int64_t> folded;
      const int x = data_or_pad(n, folded);
      need(folded == std::vector<int64_t>(4, 0) || attr_s(n, "auto_pad", "NOTSET") == "NOTSET", n,
           "auto_pad after a Pad is not supported");
      const Tensor w = const_float(n, 1);
      need(shape(x).size() == 3 && w.rank() == 4, n, "a 2-D convolution of (N,C,H,W) is supported (input " +
                                                          shape_str(shape(x)) + ", weight " + shape_str(w.shape()) + ")");
      const std::vector<int64_t> k = attr_ints(n, "kernel_shape", {w.dim(2), w.dim(3)});
      need(k.size() == 2 && k[0] == w.dim(2) && k[1] == w.dim(3), n, "kernel_shape disagrees with the weight");
      const auto st = attr_ints(n, "strides", {1, 1}), dil = attr_ints(n, "dilations", {1, 1});
      need(st.size() == 2 && dil.size() == 2, n, "strides/dilations of 2-D");
      const int64_t group = attr_i(n, "group", 1);
      need(group >= 1 && shape(x)[0] == w.dim(1) * group, n, "input channels " + std::to_string(shape(x)[0]) +
                                                                 " != weight's " + std::to_string(w.dim(1)) + " x group " +
                                                                 std::to_string(group));
      std::vector<Tensor> ws = {w};
      const bool bias = n.input_size() > 2 && !n.input(2).empty();
      if (bias) ws.push_back(const_float(n, 2));
      if (bias) need(ws[1].numel() == w.dim(0), n, "bias of " + std::to_string(ws[1].numel()) + " values");
      if (bias) ws[1] = ws[1].reshape({w.dim(0)});
      json j = {{"op", "conv2d"}, {"out_channels", w.dim(0)}, {"kernel", k}, {"stride", st}, {"dilation", dil},
                {"groups", group}, {"bias", bias}, {"pads", add_pads(pads_of(n, shape(x), k, st, dil), folded)},
                {"flip", false}};
      add(n, j, {name_of(x)});
      weights_.emplace_back(b_->graph().num_nodes() - 1, ws);
      weight_names_.push_back({n.input(1)});
      if (bias) weight_names_.back().push_back(n.input(2));
      return;
    }
    if (op == "BatchNormalization") {
      only_attrs(n, {"epsilon", "momentum", "training_mode", "spatial"});
      need(attr_i(n, "training_mode", 0) == 0 && attr_i(n, "spatial", 1) == 1, n, "only the inference form");
      need(n.output_size() == 1, n, "running-statistics outputs (the training form) are not supported");
      const int x = data(n, 0);
      std::vector<Tensor> ws;
      for (int i = 1; i <= 4; ++i) ws.push_back(const_float(n, i).reshape({shape(x).at(0)}));
      // gamma, beta; then the buffers running_mean, running_var (the layer's own order)
      json j = {{"op", "batchnorm"}, {"eps", attr_decimal(n, "epsilon", 1e-5)}, {"momentum", attr_decimal(n, "momentum", 0.9)}};
      add(n, j, {name_of(x)});
      weights_.emplace_back(b_->graph().num_nodes() - 1, ws);
      weight_names_.push_back({n.input(1), n.input(2), n.input(3), n.input(4)});
      return;
    }
    if (op == "Relu" || op == "Sigmoid" || op == "Tanh") {
      only_attrs(n, {});
      add(n, {{"op", op == "Relu" ? "relu" : op == "Sigmoid" ? "sigmoid" : "tanh"}}, {name_of(data(n, 0))});
      return;
    }
    if (op == "HardSigmoid" || op == "HardSwish") {
      // HardSigmoid: clip(alpha*x + beta, 0, 1), alpha and beta stated (defaults 0.2, 0.5);
      // HardSwish: x * HardSigmoid(x) with alpha 1/6, beta 0.5 (ONNX's definition), two nodes
      const bool swish = op == "HardSwish";
      only_attrs(n, swish ? std::set<std::string>{} : std::set<std::string>{"alpha", "beta"});
      const int x = data(n, 0);
      const double alpha = swish ? float_as_decimal(1.0f / 6.0f) : attr_decimal(n, "alpha", 0.2);
      const double beta = swish ? 0.5 : attr_decimal(n, "beta", 0.5);
      need(alpha > 0, n, "alpha " + std::to_string(alpha) + " (a positive slope is supported)");
      json j = {{"op", "hard_sigmoid"}, {"alpha", alpha}, {"beta", beta}};
      if (!swish) {
        add(n, j, {name_of(x)});
        return;
      }
      const std::string base = n.name().empty() ? "HardSwish_" + std::to_string(log_.size()) : n.name();
      j["name"] = base + ".hard_sigmoid";
      j["inputs"] = {name_of(x)};
      j["output"] = n.output(0) + ".gate";
      const int gate = b_->add_node(j);
      add(n, {{"op", "mul"}}, {name_of(x), name_of(gate)});
      return;
    }
    if (op == "Clip") {
      only_attrs(n, {"min", "max"});
      double lo = attr_decimal(n, "min", -std::numeric_limits<double>::infinity());
      double hi = attr_decimal(n, "max", std::numeric_limits<double>::infinity());
      if (n.input_size() > 1 && !n.input(1).empty()) lo = float_as_decimal(static_cast<float>(const_float(n, 1).at(0)));
      if (n.input_size() > 2 && !n.input(2).empty()) hi = float_as_decimal(static_cast<float>(const_float(n, 2).at(0)));
      json j = {{"op", "clip"}};
      if (std::isfinite(lo)) j["min"] = lo;
      if (std::isfinite(hi)) j["max"] = hi;
      add(n, j, {name_of(data(n, 0))});
      return;
    }
    if (op == "MaxPool" || op == "AveragePool") {
      only_attrs(n, {"kernel_shape", "strides", "pads", "auto_pad", "ceil_mode", "dilations", "storage_order",
                     "count_include_pad"});
      std::vector<int64_t> folded;
      const int x = data_or_pad(n, folded);
      const bool padded = folded != std::vector<int64_t>(4, 0);
      need(!padded || op == "AveragePool", n, "a Pad's zeros before a MaxPool (which pads with -inf) are not supported");
      need(!padded || attr_s(n, "auto_pad", "NOTSET") == "NOTSET", n, "auto_pad after a Pad is not supported");
      need(shape(x).size() == 3, n, "a 2-D pool of (N,C,H,W) is supported");
      need(attr_i(n, "ceil_mode", 0) == 0, n, "ceil_mode 1 is not supported");
      need(attr_ints(n, "dilations", {1, 1}) == std::vector<int64_t>({1, 1}), n, "dilated pooling is not supported");
      need(attr_i(n, "storage_order", 0) == 0, n, "storage_order 1 is not supported");
      const auto k = attr_ints(n, "kernel_shape", {});
      need(k.size() == 2, n, "kernel_shape of 2-D");
      const auto st = attr_ints(n, "strides", {1, 1});  // ONNX: strides default to 1, not the window
      need(st.size() == 2, n, "strides of 2-D");
      const std::vector<int64_t> own = pads_of(n, shape(x), k, st, {1, 1});
      json j = {{"op", op == "MaxPool" ? "maxpool" : "avgpool"}, {"kernel", k}, {"stride", st},
                {"pads", add_pads(own, folded)}};
      if (op == "AveragePool") {
        const bool include = attr_i(n, "count_include_pad", 0) != 0;
        // the Pad's zeros are inside the window: counted, as count_include_pad counts the node's own
        need(!padded || include || own == std::vector<int64_t>(4, 0), n,
             "a Pad before an AveragePool with its own pads not counted (count_include_pad 0) is not supported");
        j["count_include_pad"] = include || padded;
      }
      add(n, j, {name_of(x)});
      return;
    }
    if (op == "GlobalAveragePool") {
      only_attrs(n, {});
      const int x = data(n, 0);
      need(shape(x).size() == 3, n, "(N,C,H,W) input");
      // ONNX keeps (N,C,1,1); driftlab's layer gives (N,C): a reshape restores the file's shape
      json gap = {{"op", "global_avg_pool"}, {"name", (n.name().empty() ? "GlobalAveragePool" : n.name()) + ".pool"},
                  {"inputs", {name_of(x)}}, {"output", n.output(0) + ".pooled"}};
      b_->add_node(gap);
      add(n, {{"op", "reshape"}, {"shape", {shape(x)[0], 1, 1}}}, {n.output(0) + ".pooled"});
      return;
    }
    if (op == "Flatten") {
      only_attrs(n, {"axis"});
      const int x = data(n, 0);
      int64_t axis = attr_i(n, "axis", 1);
      if (axis < 0) axis += static_cast<int64_t>(shape(x).size()) + 1;
      need(axis == 1, n, "axis " + std::to_string(attr_i(n, "axis", 1)) + " (only 1: keep the batch)");
      if (shape(x).size() == 3) {
        add(n, {{"op", "flatten"}, {"order", "chw"}}, {name_of(x)});
      } else {
        add(n, {{"op", "reshape"}, {"shape", {shape_numel(shape(x))}}}, {name_of(x)});
      }
      return;
    }
    if (op == "Reshape") {
      only_attrs(n, {"allowzero"});
      const int x = data(n, 0);
      const TensorProto* t = constant(n.input(1));
      need(t != nullptr, n, "the shape must be a constant");
      std::vector<int64_t> target = to_ints(file_, *t, n);
      need(!target.empty(), n, "an empty target shape");
      need(attr_i(n, "allowzero", 0) == 0 || std::find(target.begin(), target.end(), 0) == target.end(), n,
           "allowzero 1 with a 0 in the shape");
      const Shape& s = shape(x);
      // The target's first dimension is taken as the batch axis, kept (0, -1, or the batch size the
      // file was exported with); the rest must hold the sample's elements. 0 copies the input's
      // axis, one -1 takes what is left.
      Shape out;
      int64_t known = 1, infer = -1;
      for (std::size_t i = 1; i < target.size(); ++i) {
        int64_t d = target[i];
        if (d == 0) {
          need(i - 1 < s.size(), n, "a 0 beyond the input's axes");
          d = s[i - 1];
        }
        if (d == -1) {
          need(infer < 0, n, "two -1 in the shape");
          infer = static_cast<int64_t>(out.size());
          out.push_back(1);
          continue;
        }
        need(d >= 1, n, "dimension " + std::to_string(d));
        known *= d;
        out.push_back(d);
      }
      const int64_t numel = shape_numel(s);
      if (infer >= 0) {
        need(target[0] != -1, n, "-1 in both the batch axis and another");
        need(known > 0 && numel % known == 0, n, "the shape does not divide the input's elements");
        out[static_cast<std::size_t>(infer)] = numel / known;
      } else {
        need(known == numel, n, "the target " + shape_str(Shape(target.begin(), target.end())) +
                                    " moves elements across the batch axis (per sample " + shape_str(s) + ")");
      }
      need(target[0] == 0 || target[0] == -1 || shape_numel(out) == numel, n, "the batch axis would change");
      if (out.empty()) out = {1};
      add(n, {{"op", "reshape"}, {"shape", out}}, {name_of(x)});
      return;
    }
    if (op == "Gemm" || op == "MatMul") {
      if (op == "Gemm") only_attrs(n, {"alpha", "beta", "transA", "transB"});
      else only_attrs(n, {});
      const int x = data(n, 0);
      need(shape(x).size() == 1, n, "the data operand must be (N, features), got per sample " + shape_str(shape(x)));
      need(attr_f(n, "alpha", 1.f) == 1.f && attr_f(n, "beta", 1.f) == 1.f && attr_i(n, "transA", 0) == 0, n,
           "alpha, beta 1 and transA 0 only");
      Tensor b = const_float(n, 1);
      need(b.rank() == 2, n, "a 2-D weight");
      const bool trans = op == "Gemm" && attr_i(n, "transB", 0) == 1;
      Tensor w = trans ? b.clone() : Tensor({b.dim(1), b.dim(0)}, DType::f32);  // (out, in)
      if (!trans)
        for (int64_t i = 0; i < b.dim(0); ++i)
          for (int64_t j = 0; j < b.dim(1); ++j) w.data<float>()[j * b.dim(0) + i] = b.data<float>()[i * b.dim(1) + j];
      need(w.dim(1) == shape(x)[0], n, "weight " + shape_str(w.shape()) + " (out,in) for " +
                                          std::to_string(shape(x)[0]) + " features");
      std::vector<Tensor> ws = {w};
      const bool bias = op == "Gemm" && n.input_size() > 2 && !n.input(2).empty();
      if (bias) {
        Tensor c = const_float(n, 2);
        if (c.numel() == 1 && w.dim(0) != 1) {  // a scalar C broadcasts over every output
          Tensor row({w.dim(0)}, DType::f32);
          row.fill(c.at(0));
          c = row;
        }
        need(c.numel() == w.dim(0) && (c.rank() <= 1 || (c.rank() == 2 && c.dim(0) == 1)), n,
             "bias C of shape " + shape_str(c.shape()) + " (one value or a row of " + std::to_string(w.dim(0)) + ")");
        ws.push_back(c.reshape({w.dim(0)}));
      }
      add(n, {{"op", "dense"}, {"units", w.dim(0)}, {"bias", bias}}, {name_of(x)});
      weights_.emplace_back(b_->graph().num_nodes() - 1, ws);
      weight_names_.push_back({n.input(1)});
      if (bias) weight_names_.back().push_back(n.input(2));
      return;
    }
    if (op == "Add" || op == "Sub" || op == "Mul") {
      only_attrs(n, {});
      need(n.input_size() == 2, n, "two inputs");
      const bool c0 = is_const(n.input(0)), c1 = is_const(n.input(1));
      need(!(c0 && c1), n, "both inputs are constants (not folded here)");
      const int a = c0 ? const_value(n, 0) : data(n, 0);
      const int b = c1 ? const_value(n, 1) : data(n, 1);
      add(n, {{"op", op == "Add" ? "add" : op == "Sub" ? "sub" : "mul"}}, {name_of(a), name_of(b)});
      return;
    }
    if (op == "Concat") {
      only_attrs(n, {"axis"});
      std::vector<std::string> ins;
      int64_t rank = 0;
      for (int i = 0; i < n.input_size(); ++i) {
        const int v = is_const(n.input(i)) ? const_value(n, i) : data(n, i);
        ins.push_back(name_of(v));
        rank = static_cast<int64_t>(shape(v).size()) + (b_->graph().is_constant(v) ? 0 : 1);
      }
      need(!ins.empty(), n, "no inputs");
      int64_t axis = attr_i(n, "axis", 1);
      if (axis < 0) axis += rank;
      need(axis >= 1 && axis < rank, n, "axis " + std::to_string(attr_i(n, "axis", 1)) + " (the batch axis, 0, is not supported)");
      add(n, {{"op", "concat"}, {"axis", axis}}, ins);
      return;
    }
    std::string known;
    for (const std::string& t : onnx_graph_op_types()) known += (known.empty() ? "" : ", ") + t;
    fail("import onnx: ", file_, ": ", node_str(n), ": op ", op, " is not supported (supported: ", known, ")");
  }

  const onnx::ModelProto& m_;
  std::string file_;
  const OnnxGraphOptions& o_;
  Policy policy_;
  Rng rng_;
  std::unique_ptr<GraphBuilder> b_;
  std::map<std::string, const TensorProto*> consts_;
  std::vector<TensorProto> bound_;  // reserved up front: consts_ points into it
  std::map<std::string, std::string> alias_;
  std::map<std::string, int> readers_;  // per value name: the nodes (and graph outputs) reading it
  std::map<std::string, std::pair<int, std::vector<int64_t>>> pending_pads_;  // a Pad's output: its input, pads t,b,l,r
  std::vector<std::pair<std::size_t, std::vector<Tensor>>> weights_;  // node index, its tensors in layer order
  std::vector<std::vector<std::string>> weight_names_;                 // the same tensors' names in the file
  std::vector<std::pair<int, Tensor>> constants_;
  std::vector<std::string> log_;
  int64_t opset_;
};

}  // namespace

std::string onnx_with_probes(const std::string& bytes, const std::string& file, const std::vector<std::string>& values,
                             std::vector<bool>& probed) {
  onnx::ModelProto m = parse_checked_model(bytes, file);
  onnx::GraphProto* g = m.mutable_graph();
  std::set<std::string> written;
  for (const NodeProto& n : g->node())
    for (const std::string& o : n.output()) written.insert(o);
  probed.assign(values.size(), false);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!written.count(values[i])) continue;
    probed[i] = true;
    const std::string probe = "dl_probe_" + std::to_string(i);
    NodeProto* n = g->add_node();
    n->set_op_type("Identity");
    n->set_name(probe);
    n->add_input(values[i]);
    n->add_output(probe);
    onnx::ValueInfoProto* v = g->add_output();
    v->set_name(probe);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::FLOAT);
  }
  std::string out;
  check(m.SerializeToString(&out), "localise: ", file, ": the probed model does not serialize");
  return out;
}

OnnxGraph import_onnx_graph_bytes(const std::string& bytes, const std::string& file, const OnnxGraphOptions& o) {
  const onnx::ModelProto m = parse_checked_model(bytes, file);
  const int64_t opset = default_opset(m);
  check(opset >= 1 && opset <= 17, "import onnx: ", file, ": opset ", opset, " (opsets 9 to 17 are supported)");
  OnnxGraph r;
  try {
    r = Importer(m, file, o, opset).run();
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind("import onnx: ", 0) == 0) throw;
    fail("import onnx: ", file, ": ", what);
  }
  r.opset = opset;
  r.producer = m.producer_name() + " " + m.producer_version();
  return r;
}

OnnxGraph import_onnx_graph(const std::string& path, const OnnxGraphOptions& o) {
  return import_onnx_graph_bytes(read_file_bytes(path, "import onnx"), path, o);
}

Model onnx_graph_model(OnnxGraph g, const std::string& policy) {
  return graph_model(std::move(g.graph), g.spec, policy, "import onnx", g.output);
}

const std::vector<std::string>& onnx_graph_op_types() {
  // one per branch of Importer::node()
  static const std::vector<std::string> ops = {"Conv",     "BatchNormalization", "Relu",    "Sigmoid", "Tanh",
                                               "Clip",     "MaxPool",            "AveragePool", "GlobalAveragePool",
                                               "Flatten",  "Reshape",            "Gemm",    "MatMul",  "Add",
                                               "Sub",      "Mul",                "Concat",  "Identity", "Dropout",
                                               "Constant", "Pad", "HardSigmoid", "HardSwish"};
  return ops;
}

std::vector<std::string> onnx_op_types(const std::string& path) {
  onnx::ModelProto m;
  const std::string bytes = read_file_bytes(path, "import onnx");
  check(m.ParseFromString(bytes), "import onnx: ", path, ": not an ONNX model (", bytes.size(), " bytes)");
  std::vector<std::string> out;
  for (const NodeProto& n : m.graph().node()) out.push_back(n.op_type());
  return out;
}

Tensor read_tensor_pb(const std::string& path) {
  TensorProto t;
  const std::string bytes = read_file_bytes(path, "tensor");
  check(t.ParseFromString(bytes), "tensor: ", path, ": not a serialized ONNX TensorProto (", bytes.size(), " bytes)");
  return detail::tensor_to_float(path, t);
}

}  // namespace convert
}  // namespace driftlab
