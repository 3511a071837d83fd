#include "models/graph.h"

#include <set>

#include "engine/layers/all.h"
#include "engine/random.h"

namespace driftlab {
namespace {

using nlohmann::json;

// A JSON value in a message: invalid UTF-8 in its strings replaced, never an exception (the
// messages' arguments are built before check() looks at its condition).
std::string shown(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// One node's attributes, read with their types checked; every attribute must be read (an
// attribute nobody reads is refused by name: a typo or an op's option not implemented).
class Attrs {
 public:
  Attrs(const json& node, std::string where) : n_(node), where_(std::move(where)) {
    check(n_.is_object(), where_, " is not an object");
  }
  bool has(const char* k) const { return n_.contains(k); }
  void mark(const char* k) { read_.insert(k); }  // read elsewhere
  int64_t integer(const char* k, int64_t def, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) {
    read_.insert(k);
    if (!n_.contains(k)) return def;
    const json& v = n_.at(k);
    check(v.is_number_integer(), where_, ": ", k, " is ", shown(v), ", not an integer");
    const int64_t x = v.get<int64_t>();
    check(x >= lo && x <= hi, where_, ": ", k, " = ", x, " outside [", lo, ", ", hi, "]");
    return x;
  }
  double number(const char* k, double def) {
    read_.insert(k);
    if (!n_.contains(k)) return def;
    const json& v = n_.at(k);
    check(v.is_number(), where_, ": ", k, " is ", shown(v), ", not a number");
    return v.get<double>();
  }
  bool boolean(const char* k, bool def) {
    read_.insert(k);
    if (!n_.contains(k)) return def;
    const json& v = n_.at(k);
    check(v.is_boolean(), where_, ": ", k, " is ", shown(v), ", not true or false");
    return v.get<bool>();
  }
  std::string string(const char* k, const std::string& def) {
    read_.insert(k);
    if (!n_.contains(k)) return def;
    const json& v = n_.at(k);
    check(v.is_string(), where_, ": ", k, " is ", shown(v), ", not a string");
    return v.get<std::string>();
  }
  std::vector<int64_t> ints(const char* k, std::vector<int64_t> def, std::size_t count, int64_t lo) {
    read_.insert(k);
    if (!n_.contains(k)) return def;
    const json& v = n_.at(k);
    check(v.is_array() && v.size() == count, where_, ": ", k, " is ", shown(v), ", not ", count, " integers");
    std::vector<int64_t> out;
    for (const json& e : v) {
      check(e.is_number_integer() && e.get<int64_t>() >= lo && e.get<int64_t>() <= (int64_t{1} << 24), where_, ": ",
            k, " is ", shown(v), ", not ", count, " integers in [", lo, ", 2^24]");
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
  std::vector<std::string> names(const char* k) {
    read_.insert(k);
    check(n_.contains(k) && n_.at(k).is_array(), where_, ": ", k, " missing or not a list of names");
    std::vector<std::string> out;
    for (const json& e : n_.at(k)) {
      check(e.is_string(), where_, ": ", k, " holds ", shown(e), ", not a name");
      out.push_back(e.get<std::string>());
    }
    return out;
  }
  void done() const {
    for (auto it = n_.begin(); it != n_.end(); ++it)
      check(read_.count(it.key()), where_, ": unknown attribute '", it.key(), "' (", shown(it.value()), ")");
  }

 private:
  const json& n_;
  std::string where_;
  std::set<std::string> read_;
};

// A shape of 0 to 6 axes ([] is a scalar per sample).
Shape shape_of(const json& j, const std::string& where) {
  check(j.is_array() && j.size() <= 6, where, " is ", shown(j), ", not a shape");
  Shape s;
  for (const json& d : j) {
    check(d.is_number_integer() && d.get<int64_t>() >= 1 && d.get<int64_t>() <= (int64_t{1} << 24), where, " is ",
          shown(j), ", not a shape of dimensions in [1, 2^24]");
    s.push_back(d.get<int64_t>());
  }
  return s;
}

// The layer of one node (the ops that are layers).
struct Builder {
  const Policy& policy_;
  Rng& rng_;
  GraphBuilder& gb_;
  void spend(uint64_t elements, const std::string& where) { gb_.spend(elements, where); }

  std::unique_ptr<Layer> layer(const std::string& op, Attrs& a, const Shape& in, const std::string& where) {
    Policy p = policy_;  // what the spec states freezes the knob for this node
    if (op == "conv2d") {
      check(in.size() == 3, where, ": conv2d input ", shape_str(in), ", (C,H,W) wanted");
      Conv2dSpec s;
      s.out_channels = a.integer("out_channels", 0, 1, int64_t{1} << 20);
      const auto k = a.ints("kernel", {}, 2, 1);
      check(k.size() == 2, where, ": conv2d without kernel");
      s.kernel_h = k[0];
      s.kernel_w = k[1];
      const auto st = a.ints("stride", {1, 1}, 2, 1);
      s.stride = st[0];
      s.stride_w = st[1];
      const auto d = a.ints("dilation", {1, 1}, 2, 1);
      s.dilation = d[0];
      s.dilation_w = d[1];
      s.groups = a.integer("groups", 1, 1, int64_t{1} << 20);
      s.bias = a.boolean("bias", true);
      const std::string padding = a.string("padding", a.has("pads") ? "explicit" : "valid");
      if (a.has("pads")) {
        check(padding == "explicit", where, ": both pads and padding '", padding, "'");
        const auto pads = a.ints("pads", {}, 4, 0);
        s.pad = PadMode::explicit4;
        for (int i = 0; i < 4; ++i) s.pads4[i] = pads[static_cast<std::size_t>(i)];
      } else {
        check(padding == "same" || padding == "valid", where, ": padding '", padding, "' (same or valid)");
        s.pad = padding == "same" ? PadMode::same : PadMode::valid;
      }
      if (a.has("flip")) p.conv_kernel_flip = a.boolean("flip", false);
      check(in[0] % s.groups == 0 && s.out_channels % s.groups == 0, where, ": groups ", s.groups,
            " divide neither the input channels ", in[0], " nor the output channels ", s.out_channels);
      // exactly what the file holds for it (a bound must not refuse a valid file)
      spend(static_cast<uint64_t>(s.out_channels) * static_cast<uint64_t>(in[0] / s.groups) *
                    static_cast<uint64_t>(s.kernel_h * s.kernel_w) +
                (s.bias ? static_cast<uint64_t>(s.out_channels) : 0),
            where);
      return std::make_unique<Conv2dLayer>(s, in, p, rng_);
    }
    if (op == "batchnorm") {
      if (a.has("eps")) p.bn_eps = a.number("eps", 0);
      if (a.has("momentum")) p.bn_momentum = a.number("momentum", 0);
      check(p.bn_eps > 0 && p.bn_momentum >= 0 && p.bn_momentum <= 1, where, ": eps ", p.bn_eps, ", momentum ",
            p.bn_momentum);
      check(!in.empty(), where, ": batchnorm of a scalar");
      // gamma, beta, running mean and variance (and TF's zero-debias state: two more and a count)
      spend((p.bn_zero_debias ? 6 : 4) * static_cast<uint64_t>(in[0]) + (p.bn_zero_debias ? 1 : 0), where);
      return std::make_unique<BatchNormLayer>(in, p);
    }
    if (op == "hard_sigmoid" && (a.has("alpha") || a.has("beta"))) {  // stated: frozen
      const double alpha = a.number("alpha", 0.2), beta = a.number("beta", 0.5);
      check(alpha > 0 && std::isfinite(alpha) && std::isfinite(beta), where, ": hard_sigmoid alpha ", alpha, ", beta ",
            beta);
      return ActivationLayer::hard_sigmoid(alpha, beta, in, p);
    }
    if (op == "relu" || op == "sigmoid" || op == "tanh" || op == "hard_sigmoid")
      return std::make_unique<ActivationLayer>(op == "relu"      ? ActKind::relu
                                               : op == "sigmoid" ? ActKind::sigmoid
                                               : op == "tanh"    ? ActKind::tanh
                                                                 : ActKind::hard_sigmoid,  // hard_sigmoid_kind's formula
                                               in, p);
    if (op == "dropout") {
      const double rate = a.number("rate", -1);
      check(rate >= 0 && rate < 1, where, ": dropout rate ", rate, " outside [0, 1)");
      return std::make_unique<DropoutLayer>(rate, in);
    }
    if (op == "clip") {
      const double lo = a.number("min", -std::numeric_limits<double>::infinity());
      const double hi = a.number("max", std::numeric_limits<double>::infinity());
      check(lo <= hi, where, ": clip min ", lo, " above max ", hi);
      return ActivationLayer::clip(lo, hi, in, p);
    }
    if (op == "maxpool" || op == "avgpool") {
      check(in.size() == 3, where, ": ", op, " input ", shape_str(in), ", (C,H,W) wanted");
      Pool2dSpec s;
      s.kind = op == "maxpool" ? PoolKind::max : PoolKind::avg;
      const auto k = a.ints("kernel", {}, 2, 1);
      check(k.size() == 2, where, ": ", op, " without kernel");
      s.window = k[0];
      s.window_w = k[1];
      const auto st = a.ints("stride", k, 2, 1);
      s.stride = st[0];
      s.stride_w = st[1];
      const auto pads = a.ints("pads", {0, 0, 0, 0}, 4, 0);
      for (int i = 0; i < 4; ++i) s.pads4[i] = pads[static_cast<std::size_t>(i)];
      s.count_include_pad = a.boolean("count_include_pad", true);
      return std::make_unique<Pool2dLayer>(s, in, p);
    }
    if (op == "global_avg_pool") return std::make_unique<GlobalAvgPoolLayer>(in, p);
    if (op == "flatten") {
      if (a.has("order")) {
        const std::string o = a.string("order", "chw");
        check(o == "chw" || o == "hwc", where, ": flatten order '", o, "' (chw or hwc)");
        p.flatten_order = o == "chw" ? FlattenOrder::chw : FlattenOrder::hwc;
      }
      return std::make_unique<FlattenLayer>(in, p);
    }
    if (op == "dense") {
      check(in.size() == 1, where, ": dense input ", shape_str(in), ", (features,) wanted");
      const int64_t units = a.integer("units", 0, 1, int64_t{1} << 24);
      const bool bias = a.boolean("bias", true);
      spend(static_cast<uint64_t>(units) * static_cast<uint64_t>(in[0] + (bias ? 1 : 0)), where);
      return std::make_unique<DenseLayer>(units, in, p, rng_, bias);
    }
    if (op == "lstm" || op == "gru") {
      check(in.size() == 2, where, ": ", op, " input ", shape_str(in), ", (steps, features) wanted");
      RnnSpec s;
      s.units = a.integer("units", 0, 1, int64_t{1} << 16);
      s.return_sequences = a.boolean("return_sequences", false);
      if (a.has("recurrent_activation")) {
        const std::string ra = a.string("recurrent_activation", "");
        check(ra == "sigmoid" || ra == "hard_sigmoid", where, ": recurrent_activation '", ra,
              "' (sigmoid or hard_sigmoid)");
        p.rnn_recurrent_activation = ra == "sigmoid" ? RnnGateAct::sigmoid : RnnGateAct::hard_sigmoid;
      }
      if (a.has("reset_after")) {
        check(op == "gru", where, ": reset_after on an lstm");
        p.gru_reset_after = a.boolean("reset_after", false) ? GruReset::after : GruReset::before;
      }
      p.rnn_mask = RnnMask::none;  // a graph carries no padding mask between its nodes
      const RnnCell cell = op == "lstm" ? RnnCell::lstm : RnnCell::gru;
      const uint64_t G = op == "lstm" ? 4 : 3, u = static_cast<uint64_t>(s.units);
      spend(G * u * (static_cast<uint64_t>(in[1]) + u + 2), where);
      return std::make_unique<RnnLayer>(cell, s, in, p, rng_);
    }
    if (op == "embedding") {
      check(in.size() == 1, where, ": embedding input ", shape_str(in), ", (steps,) of ids wanted");
      EmbeddingArgs e;
      e.num_ids = a.integer("input_dim", 0, 1, int64_t{1} << 24);
      e.dim = a.integer("output_dim", 0, 1, int64_t{1} << 16);
      spend(static_cast<uint64_t>(e.num_ids) * static_cast<uint64_t>(e.dim), where);
      return std::make_unique<EmbeddingLayer>(e, in, p, rng_);
    }
    fail(where, ": unknown op '", op,
         "' (known: conv2d, batchnorm, relu, sigmoid, tanh, hard_sigmoid, clip, dropout, maxpool, avgpool, "
         "global_avg_pool, flatten, dense, lstm, gru, embedding, add, sub, mul, concat, reshape)");
  }

};

}  // namespace

GraphBuilder::GraphBuilder(const std::string& input, const Shape& input_shape, const Policy& policy, Rng& rng,
                           uint64_t max_param_bytes)
    : policy_(policy), rng_(rng), max_bytes_(max_param_bytes) {
  check(!input.empty(), "graph spec: no input name");
  graph_ = std::make_unique<GraphLayer>(input, input_shape, policy.dtype == FloatType::float64 ? DType::f64 : DType::f32);
  graph_->set_binary_backend(policy.act_backend);
  spec_ = {{"input", input}, {"input_shape", input_shape}, {"constants", json::array()}, {"nodes", json::array()}};
}

GraphBuilder::~GraphBuilder() = default;

void GraphBuilder::spend(uint64_t elements, const std::string& where) {
  const uint64_t bytes = elements * (policy_.dtype == FloatType::float64 ? 8 : 4);
  used_ += bytes;
  check(max_bytes_ == 0 || used_ <= max_bytes_, where, ": the graph's parameters need more than the ", max_bytes_,
        " bytes its file holds");
}

int GraphBuilder::add_constant(const std::string& name, const Shape& shape) {
  const std::string where = "graph spec: constant '" + name + "'";
  check(!name.empty(), "graph spec: a constant without a name");
  spend(static_cast<uint64_t>(shape_numel(shape)), where);
  const int v = graph_->add_constant(name, Tensor(shape, graph_->constant_dtype()));
  spec_["constants"].push_back({{"name", name}, {"shape", shape}});
  return v;
}

int GraphBuilder::add_node(const json& nj) {
  check(nj.is_object(), "graph spec: nodes[", spec_["nodes"].size(), "] is not an object");
  const std::string name = nj.contains("name") && nj.at("name").is_string()
                               ? nj.at("name").get<std::string>()
                               : "nodes[" + std::to_string(spec_["nodes"].size()) + "]";
  const std::string where = "graph spec: node '" + name + "'";
  Attrs at(nj, where);
  at.string("name", "");
  const std::string op = at.string("op", "");
  const std::vector<std::string> ins = at.names("inputs");
  const std::string out = at.string("output", "");
  check(!out.empty(), where, ": no output name");
  std::vector<int> vs;
  for (const std::string& v : ins) {
    const int id = graph_->find_value(v);
    check(id >= 0, where, " reads '", v, "', which no earlier node writes (nodes must come in order; a cycle or a dangling name)");
    vs.push_back(id);
  }
  GraphLayer& g = *graph_;
  int y;
  if (op == "add" || op == "sub" || op == "mul") {
    check(vs.size() == 2, where, ": ", op, " takes 2 inputs, got ", vs.size());
    y = g.add_binary(name, op == "add" ? BinaryOp::add : op == "sub" ? BinaryOp::sub : BinaryOp::mul, vs[0], vs[1], out);
  } else if (op == "reshape") {
    check(vs.size() == 1, where, ": reshape takes 1 input, got ", vs.size());
    check(nj.contains("shape"), where, ": reshape without shape");
    at.mark("shape");
    y = g.add_reshape(name, vs[0], shape_of(nj.at("shape"), where + ": shape"), out);
  } else if (op == "concat") {
    const int64_t axis = at.integer("axis", 1, 1, 8);
    y = g.add_concat(name, vs, static_cast<int>(axis), out);
  } else {
    check(vs.size() == 1, where, ": ", op, " takes 1 input, got ", vs.size());
    check(!g.is_constant(vs[0]), where, ": ", op, " reads constant '", ins[0], "'");
    Builder b{policy_, rng_, *this};
    std::unique_ptr<Layer> l = b.layer(op, at, g.value_shape(vs[0]), where);
    y = g.add_layer(name, std::move(l), vs[0], out);
  }
  at.done();
  spec_["nodes"].push_back(nj);
  return y;
}

json GraphBuilder::spec() const {
  json s = spec_;
  s["output"] = graph_->value_name(graph_->output_value());
  const Shape out = graph_->output_shape();
  if (out.size() == 1) s["num_classes"] = out[0];
  return s;
}

std::unique_ptr<GraphLayer> GraphBuilder::release() { return std::move(graph_); }

std::unique_ptr<GraphLayer> build_graph(const json& spec, const Policy& policy, Rng& rng, uint64_t max_param_bytes) {
  check(spec.is_object(), "graph spec: not a JSON object");
  Attrs top(spec, "graph spec");
  const std::string input = top.string("input", "");
  check(spec.contains("input_shape"), "graph spec: no input_shape");
  top.mark("input_shape");
  top.mark("nodes");  // read below, node by node
  top.mark("constants");
  check(spec.contains("nodes") && spec.at("nodes").is_array(), "graph spec: nodes missing or not a list");
  const Shape in = shape_of(spec.at("input_shape"), "graph spec: input_shape");
  top.integer("num_classes", 0, 1, int64_t{1} << 24);
  const std::string output = top.string("output", "");
  top.done();
  GraphBuilder b(input, in, policy, rng, max_param_bytes);
  if (spec.contains("constants")) {
    const json& cs = spec.at("constants");
    check(cs.is_array(), "graph spec: constants is not a list");
    for (std::size_t i = 0; i < cs.size(); ++i) {
      const std::string where = "graph spec: constants[" + std::to_string(i) + "]";
      Attrs a(cs[i], where);
      const std::string name = a.string("name", "");
      check(cs[i].contains("shape"), where, ": no shape");
      a.mark("shape");
      a.done();
      b.add_constant(name, shape_of(cs[i].at("shape"), where + ": shape"));
    }
  }
  for (const json& nj : spec.at("nodes")) b.add_node(nj);
  if (!output.empty()) {
    const int o = b.graph().find_value(output);
    check(o >= 0, "graph spec: output '", output, "' is written by no node");
    b.graph().set_output(o);
  }
  return b.release();
}

Model graph_model(std::unique_ptr<GraphLayer> g, const std::string& spec, const std::string& policy,
                  const std::string& who, const std::string& output) {
  const Shape out = g->output_shape();
  check(out.size() == 1, who, ": the output '", output, "' has per-sample shape ",
        shape_str(out), "; a model returns (classes,) logits");
  Model m;
  m.name = kGraphModelName;
  m.policy = Policy::parse(policy);
  m.graph = spec;
  m.input_shape = g->value_shape(0);
  m.num_classes = out[0];
  m.net = std::make_unique<Sequential>(m.input_shape);
  m.net->add(std::move(g));
  m.net->apply_input_cast(m.policy);
  return m;
}

void check_utf8_name(const std::string& s, const std::string& what) {
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = len > 0 && i + static_cast<std::size_t>(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]) >> 6) == 0x2;
    check(ok, what, " is not valid UTF-8 (byte ", i, ")");
    i += static_cast<std::size_t>(len);
  }
}

void build_graph_model(Model& m, Rng& rng, uint64_t max_param_bytes) {
  json spec;
  try {
    spec = json::parse(m.graph);
  } catch (const json::exception& e) {
    fail("graph spec: not JSON (", e.what(), ")");
  }
  auto g = build_graph(spec, m.policy, rng, max_param_bytes);
  m.input_shape = g->value_shape(0);
  const Shape out = g->output_shape();
  check(out.size() == 1, "graph spec: the output '", g->value_name(g->output_value()), "' has per-sample shape ",
        shape_str(out), "; a model returns (classes,) logits");
  m.num_classes = spec.value("num_classes", out[0]);
  check(m.num_classes == out[0], "graph spec: num_classes ", m.num_classes, " but the output has ", out[0]);
  m.net = std::make_unique<Sequential>(m.input_shape);
  m.net->add(std::move(g));
  m.net->apply_input_cast(m.policy);
}

}  // namespace driftlab
