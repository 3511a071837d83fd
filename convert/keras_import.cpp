#include "convert/keras_import.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "convert/keras_config.h"
#include "convert/onnx_read.h"
#include "core/error.h"
#include "engine/layers/all.h"
#include "engine/random.h"
#include "models/graph.h"

namespace driftlab {
namespace convert {
namespace {

using nlohmann::json;
using detail::Cfg;
using detail::KLayer;
using detail::shown;


const std::vector<std::string> kClasses = {
    "InputLayer", "Conv2D", "DepthwiseConv2D", "SeparableConv2D", "Dense", "BatchNormalization", "Activation", "ReLU", "Softmax",
    "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D", "Flatten", "Add", "Subtract", "Multiply",
    "Concatenate", "Dropout", "ZeroPadding2D", "LSTM", "GRU", "Embedding", "Reshape"};


// A weight of the manifest: where its float32 values lie in the concatenated shards.
struct ManifestEntry {
  Shape shape;
  std::size_t offset = 0;
  bool used = false;
};

class Importer {
 public:
  Importer(std::string file, const std::string& weights, const Policy& policy, uint64_t max_param_bytes)
      : file_(std::move(file)), weights_(weights), policy_(policy), rng_(policy.rng_engine, 1), max_bytes_(max_param_bytes) {}

  KerasGraph run(const json& top) {
    check(top.is_object(), "import keras: ", file_, ": not a JSON object");
    const json* model = &top;
    if (top.contains("modelTopology")) {  // TF.js's model.json
      model = &top.at("modelTopology");
      check(model->is_object(), "import keras: ", file_, ": modelTopology is not an object");
      if (model->contains("model_config")) model = &model->at("model_config");  // the TF.js converter's form
      read_manifest(top);
      if (top.contains("generatedBy") && top.at("generatedBy").is_string()) r_.producer = top.at("generatedBy").get<std::string>();
    } else {
      check(weights_.empty(), "import keras: ", file_, ": weight bytes given but the file has no weightsManifest");
    }
    check(model->is_object() && model->contains("class_name") && model->contains("config"), "import keras: ", file_,
          ": no model (class_name and config, at the top or under modelTopology)");
    if (r_.producer.empty()) {
      for (const char* k : {"keras_version", "backend"})
        if (model->contains(k) && model->at(k).is_string())
          r_.producer += (r_.producer.empty() ? "" : " ") + model->at(k).get<std::string>();
      if (top.contains("keras_version") && top.at("keras_version").is_string() && r_.producer.empty())
        r_.producer = "keras " + top.at("keras_version").get<std::string>();
    }
    r_.has_weights = !manifest_.empty();
    const std::string cls = str(model->at("class_name"), "class_name");
    const json& cfg = model->at("config");
    std::vector<KLayer> layers;
    std::string input, output;
    if (cls == "Sequential") {
      sequential(cfg, layers, input, output);
    } else {
      check(cls == "Functional" || cls == "Model", "import keras: ", file_, ": model class '", cls,
            "' (known: Sequential, Functional, Model)");
      functional(cfg, layers, input, output);
    }
    decide_data_format(layers);
    build(layers, input, output);
    if (!manifest_.empty())
      for (const auto& [name, e] : manifest_)
        check(e.used, "import keras: ", file_, ": weight '", name, "' of the manifest belongs to no layer");
    r_.input = input;
    r_.output = output;
    r_.data_format = channels_last_ ? "channels_last" : "channels_first";
    r_.spec = b_->spec().dump();
    r_.output_shape = b_->graph().output_shape();
    r_.graph = b_->release();
    return std::move(r_);
  }

 private:
  // ---- reading the file ----
  std::string str(const json& j, const std::string& what) const {
    check(j.is_string(), "import keras: ", file_, ": ", what, " is ", shown(j), ", not a string");
    return j.get<std::string>();
  }

  void read_manifest(const json& top) {
    if (!top.contains("weightsManifest")) {
      check(weights_.empty(), "import keras: ", file_, ": weight bytes given but the file has no weightsManifest");
      return;
    }
    const json& groups = top.at("weightsManifest");
    check(groups.is_array(), "import keras: ", file_, ": weightsManifest is not a list");
    std::size_t offset = 0;
    for (const json& g : groups) {
      check(g.is_object() && g.contains("weights") && g.at("weights").is_array(), "import keras: ", file_,
            ": a weightsManifest group without a weights list");
      for (const json& w : g.at("weights")) {
        check(w.is_object() && w.contains("name") && w.contains("shape"), "import keras: ", file_,
              ": a manifest weight without name or shape: ", shown(w));
        std::string name = str(w.at("name"), "a manifest weight's name");
        const std::string where = "import keras: " + file_ + ": weight '" + name + "'";
        const std::string dtype = w.contains("dtype") ? str(w.at("dtype"), where + " dtype") : "float32";
        check(dtype == "float32", where, " has dtype ", dtype, "; float32 weights only");
        if (w.contains("quantization"))
          fail(where, " is quantized (", shown(w.at("quantization")), "); float32 weights only");
        check(!w.contains("group") || w.at("group").is_string(), where, ": group is not a string");
        const json& sj = w.at("shape");
        check(sj.is_array() && sj.size() <= 6, where, ": shape ", shown(sj), " is not a shape");
        Shape s;
        uint64_t n = 1;
        for (const json& d : sj) {
          check(d.is_number_integer() && d.get<int64_t>() >= 0 && d.get<int64_t>() <= (int64_t{1} << 31), where,
                ": shape ", shown(sj), " is not a shape");
          s.push_back(d.get<int64_t>());
          n *= static_cast<uint64_t>(d.get<int64_t>());
          check(n <= weights_.size(), where, ": shape ", shown(sj), " needs more than the ", weights_.size(),
                " bytes of the shards");
        }
        if (name.size() > 2 && name.compare(name.size() - 2, 2, ":0") == 0) name.resize(name.size() - 2);
        check(!manifest_.count(name), where, " is listed twice");
        manifest_[name] = {s, offset, false};
        offset += static_cast<std::size_t>(n) * 4;
        check(offset <= weights_.size(), where, " ends at byte ", offset, "; the shards hold ", weights_.size());
      }
    }
    check(offset == weights_.size(), "import keras: ", file_, ": the shards hold ", weights_.size(),
          " bytes; the manifest describes ", offset);
  }

  // The names a call of a layer reads: Keras 2's [[[name, node, tensor, kwargs], ...]] or Keras
  // 3's [{"args": [tensor | [tensors]], "kwargs": {}}].
  std::vector<std::string> inbound(const json& nodes, const std::string& where) const {
    std::vector<std::string> out;
    if (nodes.is_null()) return out;
    check(nodes.is_array(), where, ": inbound_nodes is ", shown(nodes), ", not a list");
    if (nodes.empty()) return out;
    check(nodes.size() == 1, where, " is called ", nodes.size(), " times (a shared layer): not implemented");
    const json& call = nodes[0];
    auto history = [&](const json& t) {
      if (t.is_array()) {  // Keras 2: [name, node_index, tensor_index, kwargs]
        check(t.size() >= 3 && t[0].is_string() && t[1].is_number_integer() && t[2].is_number_integer(), where,
              ": inbound ", shown(t), " is not [layer, node, tensor, ...]");
        check(t[1].get<int64_t>() == 0 && t[2].get<int64_t>() == 0, where, ": inbound ", shown(t),
              " reads another call or output of a layer: not implemented");
        check(t.size() < 4 || t[3].is_null() || (t[3].is_object() && t[3].empty()), where, ": inbound ", shown(t),
              " passes call arguments: not implemented");
        out.push_back(t[0].get<std::string>());
        return;
      }
      check(t.is_object() && t.contains("class_name") && t.at("class_name") == "__keras_tensor__" && t.contains("config") &&
                t.at("config").is_object() && t.at("config").contains("keras_history"),
            where, ": inbound ", shown(t), " is not a Keras tensor");
      const json& h = t.at("config").at("keras_history");
      check(h.is_array() && h.size() == 3 && h[0].is_string() && h[1].is_number_integer() && h[2].is_number_integer(),
            where, ": keras_history ", shown(h), " is not [layer, node, tensor]");
      check(h[1].get<int64_t>() == 0 && h[2].get<int64_t>() == 0, where, ": keras_history ", shown(h),
            " reads another call or output of a layer: not implemented");
      out.push_back(h[0].get<std::string>());
    };
    if (call.is_array()) {
      for (const json& t : call) history(t);
    } else {
      check(call.is_object() && call.contains("args") && call.at("args").is_array(), where, ": inbound node ",
            shown(call), " is neither Keras 2's list nor Keras 3's {args, kwargs}");
      if (call.contains("kwargs")) {
        const json& kw = call.at("kwargs");
        check(kw.is_object() && (kw.empty() || (kw.size() == 1 && kw.contains("training") && !kw.at("training").is_boolean())),
              where, ": call kwargs ", shown(kw), " are not implemented");
      }
      const json& args = call.at("args");
      check(args.size() == 1, where, ": ", args.size(), " call arguments; one (a tensor or a list) is read");
      if (args[0].is_array())
        for (const json& t : args[0]) history(t);
      else
        history(args[0]);
    }
    return out;
  }

  KLayer layer_of(const json& l, std::size_t i) const {
    const std::string where0 = "import keras: " + file_ + ": layers[" + std::to_string(i) + "]";
    check(l.is_object() && l.contains("class_name") && l.contains("config"), where0,
          " has no class_name and config");
    KLayer k;
    k.cls = str(l.at("class_name"), where0 + " class_name");
    k.cfg = l.at("config");
    check(k.cfg.is_object(), where0, " (", k.cls, "): config is not an object");
    if (l.contains("name"))
      k.name = str(l.at("name"), where0 + " name");
    else if (k.cfg.contains("name"))
      k.name = str(k.cfg.at("name"), where0 + " name");
    check(!k.name.empty(), where0, " (", k.cls, ") has no name");
    check_utf8_name(k.name, where0 + " name");
    for (auto it = l.begin(); it != l.end(); ++it) {
      static const std::set<std::string> kEntryKeys = {"class_name", "config",          "name",
                                                       "inbound_nodes", "module",       "registered_name",
                                                       "build_config", "compile_config"};
      check(kEntryKeys.count(it.key()), where(k), ": unknown entry key '", it.key(), "'");
    }
    if (l.contains("inbound_nodes")) k.inputs = inbound(l.at("inbound_nodes"), where(k));
    return k;
  }

  void functional(const json& cfg, std::vector<KLayer>& layers, std::string& input, std::string& output) {
    check(cfg.is_object() && cfg.contains("layers") && cfg.at("layers").is_array(), "import keras: ", file_,
          ": the model's config has no layers list");
    for (std::size_t i = 0; i < cfg.at("layers").size(); ++i) layers.push_back(layer_of(cfg.at("layers")[i], i));
    auto one = [&](const char* key) {
      check(cfg.contains(key), "import keras: ", file_, ": the model's config has no ", key);
      json j = cfg.at(key);
      if (j.is_array() && !j.empty() && j[0].is_string()) j = json::array({j});  // Keras 3: one triple
      check(j.is_array() && j.size() == 1 && j[0].is_array() && !j[0].empty() && j[0][0].is_string(), "import keras: ",
            file_, ": ", key, " is ", shown(cfg.at(key)), "; one [layer, 0, 0] is read (one input, one output)");
      check(j[0].size() < 2 || (j[0][1] == 0 && (j[0].size() < 3 || j[0][2] == 0)), "import keras: ", file_, ": ", key,
            " ", shown(j), " reads another call or output of a layer: not implemented");
      return j[0][0].get<std::string>();
    };
    input = one("input_layers");
    output = one("output_layers");
  }

  void sequential(const json& cfg, std::vector<KLayer>& layers, std::string& input, std::string& output) {
    const json* ls = &cfg;
    if (cfg.is_object()) {
      check(cfg.contains("layers") && cfg.at("layers").is_array(), "import keras: ", file_,
            ": the Sequential config has no layers list");
      ls = &cfg.at("layers");
    }
    check(ls->is_array() && !ls->empty(), "import keras: ", file_, ": a Sequential model without layers");
    std::string prev;
    for (std::size_t i = 0; i < ls->size(); ++i) {
      KLayer k = layer_of((*ls)[i], i);
      check(k.inputs.empty(), where(k), ": a Sequential layer with inbound_nodes");
      if (i == 0 && k.cls != "InputLayer") {
        // the first layer states the input: an InputLayer in front of it
        const char* key = k.cfg.contains("batch_input_shape") ? "batch_input_shape" : "batch_shape";
        check(k.cfg.contains(key), where(k), ": the Sequential model states no input shape (an InputLayer, or "
              "batch_input_shape on its first layer)");
        KLayer in;
        in.cls = "InputLayer";
        in.name = "input";
        in.cfg = {{"batch_input_shape", k.cfg.at(key)}, {"name", "input"}};
        if (k.cfg.contains("dtype")) in.cfg["dtype"] = k.cfg.at("dtype");
        k.cfg.erase(key);
        layers.push_back(in);
        prev = in.name;
      }
      if (!prev.empty()) k.inputs = {prev};
      prev = k.name;
      layers.push_back(k);
    }
    input = layers.front().name;
    output = layers.back().name;
  }

  // One data format for the model: what its layers state (all alike), else Keras's default.
  void decide_data_format(const std::vector<KLayer>& layers) {
    std::string stated, by;
    for (const KLayer& l : layers) {
      if (!l.cfg.contains("data_format") || l.cfg.at("data_format").is_null()) continue;
      const std::string f = str(l.cfg.at("data_format"), where(l) + " data_format");
      check(f == "channels_last" || f == "channels_first", where(l), ": data_format '", f,
            "' (channels_last or channels_first)");
      check(stated.empty() || stated == f, where(l), ": data_format ", f, " but layer '", by, "' states ", stated,
            "; one format per model is read");
      stated = f;
      by = l.name;
    }
    channels_last_ = stated.empty() || stated == "channels_last";
    flatten_stated_ = !stated.empty() || !manifest_.empty();
  }



  std::string where(const KLayer& l) const { return "import keras: " + file_ + ": layer '" + l.name + "' (" + l.cls + ")"; }

  // ---- weights ----
  // The manifest's "<layer>/<weight>" with the shape Keras gives it; none when the file has no
  // weights; refused when the file has weights but not this one.
  bool has_weight(const KLayer& l, const std::string& w) const {
    if (manifest_.empty()) return false;
    check(manifest_.count(l.name + "/" + w), where(l), ": the manifest has no weight '", l.name, "/", w, "'");
    return true;
  }
  Tensor weight(const KLayer& l, const std::string& w, const Shape& keras_shape) {
    ManifestEntry& e = manifest_.at(l.name + "/" + w);
    check(e.shape == keras_shape, where(l), ": weight '", l.name, "/", w, "' has shape ", shape_str(e.shape), "; ",
          shape_str(keras_shape), " wanted");
    check(!e.used, where(l), ": weight '", l.name, "/", w, "' read twice");
    e.used = true;
    Tensor t(keras_shape, DType::f32);
    std::memcpy(t.data<float>(), weights_.data() + e.offset, static_cast<std::size_t>(t.numel()) * 4);
    return t;
  }
  void source(int node, Param& p, const std::string& manifest_name) {
    Layer& layer = *b_->graph().node(static_cast<std::size_t>(node)).layer;
    r_.sources.emplace_back(std::to_string(node) + "." + layer.kind() + "." + p.name, manifest_name);
  }
  void set(int node, Param& p, const Tensor& t, const std::string& manifest_name) {
    check(p.value.shape() == t.shape(), "import keras: ", file_, ": ", manifest_name, " of shape ", shape_str(t.shape()),
          " for a parameter of ", shape_str(p.value.shape()));
    p.value = t.to(p.value.dtype());
    source(node, p, manifest_name);
  }

  // ---- building ----
  int value(const KLayer& l, const std::string& in) const {
    auto a = alias_.find(in);
    const std::string& name = a == alias_.end() ? in : a->second;
    const int v = b_->graph().find_value(name);
    check(v >= 0, where(l), " reads '", in, "', which no earlier layer writes (layers out of order, a cycle or a dangling name)");
    return v;
  }
  int one_input(const KLayer& l) const {
    check(l.inputs.size() == 1, where(l), " reads ", l.inputs.size(), " tensors; one wanted");
    check(!pending_pad_.count(l.inputs[0]), where(l), " reads ZeroPadding2D '", l.inputs[0],
          "': only a 'valid' Conv2D or DepthwiseConv2D reading it alone is implemented (the pad is folded into it)");
    return value(l, l.inputs[0]);
  }
  const Shape& shape(int v) const { return b_->graph().value_shape(v); }

  int add(json node, const std::string& name, const std::vector<int>& ins, const std::string& out) {
    node["name"] = name;
    json in = json::array();
    for (int v : ins) in.push_back(b_->graph().value_name(v));
    node["inputs"] = in;
    node["output"] = out;
    return b_->add_node(node);
  }
  int last_node() const { return static_cast<int>(b_->graph().num_nodes()) - 1; }
  Layer& node_layer(int n) { return *b_->graph().node(static_cast<std::size_t>(n)).layer; }

  // A Keras axis (counting the batch) of a value of per-sample rank `rank` as the graph's axis.
  int64_t axis_of(const KLayer& l, int64_t axis, std::size_t rank) const {
    const int64_t R = static_cast<int64_t>(rank) + 1;
    const int64_t a = axis < 0 ? axis + R : axis;
    check(a >= 1 && a < R, where(l), ": axis ", axis, " of a ", R, "-axis tensor (the batch axis 0 is not read)");
    if (rank == 3 && channels_last_) return a == 3 ? 1 : a + 1;  // (H,W,C) -> (C,H,W)
    return a;
  }

  // The activation a layer's config names, as a node after `v` (the layer's output value is
  // `out`); linear: none. A softmax ends the model: left to the loss.
  int activation(const KLayer& l, const std::string& act, int v, const std::string& out, bool last,
                 const std::string& node_name = "") {
    if (act == "linear") return rename(v, out);
    if (act == "softmax") {
      check(last, where(l), ": softmax inside the model: not implemented (a softmax is read only as the last "
            "layer, where the model returns logits and the loss applies it)");
      r_.notes.push_back("layer '" + l.name + "': the final softmax left to the loss (the model returns logits; "
                         "ce_formulation applies it)");
      return rename(v, out);
    }
    json n;
    if (act == "relu" || act == "sigmoid" || act == "tanh" || act == "hard_sigmoid") {
      n = {{"op", act}};
      if (act == "hard_sigmoid")
        r_.notes.push_back("layer '" + l.name + "': Keras's hard_sigmoid left to hard_sigmoid_kind (Keras 2: "
                           "clip(0.2x + 0.5); Keras 3: relu6(x + 3) / 6)");
    } else if (act == "relu6") {
      n = {{"op", "clip"}, {"min", 0.0}, {"max", 6.0}};
    } else if (act == "swish" || act == "silu" || act == "hard_swish" || act == "hard_silu") {
      // x * sigmoid(x); the hard form x * relu6(x + 3) / 6, its gate's slope and offset stated
      // (1/6, 0.5: Keras defines them, hard_sigmoid_kind does not apply): two nodes
      const bool hard = act == "hard_swish" || act == "hard_silu";
      json gate = hard ? json{{"op", "hard_sigmoid"}, {"alpha", 1.0 / 6.0}, {"beta", 0.5}} : json{{"op", "sigmoid"}};
      const std::string base = node_name.empty() ? l.name + "/" + act : node_name;
      const int g = add(gate, base + "/gate", {v}, base + "/gate");
      return add({{"op", "mul"}}, base, {v, g}, out);
    } else {
      fail(where(l), ": activation '", act,
           "' (known: linear, relu, relu6, sigmoid, tanh, hard_sigmoid, swish/silu, hard_swish/hard_silu, softmax last)");
    }
    return add(n, node_name.empty() ? l.name + "/" + act : node_name, {v}, out);
  }
  // The value `v` known under the name `out` as well (layers that compute nothing).
  int rename(int v, const std::string& out) {
    if (b_->graph().value_name(v) != out) alias_[out] = b_->graph().value_name(v);
    return v;
  }

  void build(const std::vector<KLayer>& layers, const std::string& input, const std::string& output) {
    // readers per layer (ZeroPadding2D folds only into a sole reader)
    std::map<std::string, int> readers;
    std::set<std::string> names;
    for (const KLayer& l : layers) {
      check(names.insert(l.name).second, where(l), ": a second layer of that name");
      for (const std::string& in : l.inputs) ++readers[in];
    }
    check(names.count(input), "import keras: ", file_, ": input layer '", input, "' is not among the layers");
    check(names.count(output), "import keras: ", file_, ": output layer '", output, "' is not among the layers");
    bool seen_input = false;
    for (const KLayer& l : layers) {
      const bool last = l.name == output;
      if (l.cls == "InputLayer") {
        check(l.name == input && !seen_input, where(l), ": an input layer other than the model's input '", input, "'");
        seen_input = true;
        input_layer(l);
        continue;
      }
      check(b_ != nullptr, where(l), " comes before the input layer '", input, "'");
      r_.layers.push_back("layer '" + l.name + "' (" + l.cls + ") -> " + convert_layer(l, last, readers));
    }
    check(seen_input, "import keras: ", file_, ": no InputLayer named '", input, "'");
    check(!pending_pad_.count(output), "import keras: ", file_, ": the output is ZeroPadding2D '", output, "'");
    const int o = value(layers.back(), output);
    check(!b_->graph().is_constant(o) && o != 0, "import keras: ", file_, ": the output '", output,
          "' is the input itself");
    b_->graph().set_output(o);
  }

  void input_layer(const KLayer& l) {
    Cfg c(l, where(l));
    c.common();
    const char* key = l.cfg.contains("batch_input_shape") ? "batch_input_shape" : "batch_shape";
    check(c.has(key), where(l), ": no batch_input_shape or batch_shape");
    const json& s = c.at(key);
    c.mark("batch_input_shape");
    c.mark("batch_shape");
    check(!c.boolean("sparse", false), where(l), ": a sparse input: not implemented");
    check(!c.boolean("ragged", false), where(l), ": a ragged input: not implemented");
    c.mark("input_shape");  // Keras 2 writes it beside batch_input_shape at times
    c.done();
    check(s.is_array() && s.size() >= 2 && s.size() <= 4 && s[0].is_null(), where(l), ": ", key, " ", shown(s),
          "; [null, H, W, C] (or channels-first), [null, steps, features] or [null, features] wanted");
    Shape d;
    for (std::size_t i = 1; i < s.size(); ++i) {
      check(s[i].is_number_integer() && s[i].get<int64_t>() >= 1 && s[i].get<int64_t>() <= (int64_t{1} << 24),
            where(l), ": ", key, " ", shown(s), ": every axis after the batch must be a fixed size");
      d.push_back(s[i].get<int64_t>());
    }
    Shape chw = d;
    if (d.size() == 3 && channels_last_) chw = {d[2], d[0], d[1]};
    r_.input_shape = chw;
    b_ = std::make_unique<GraphBuilder>(l.name, chw, policy_, rng_, max_bytes_);
    r_.layers.push_back("layer '" + l.name + "' (InputLayer) -> the input, " + shape_str(chw) +
                        (d.size() == 3 && channels_last_ ? " (fed channels-first; the file's " + shape_str(d) + " H,W,C)" : ""));
  }

  std::string padding(Cfg& c, const KLayer& l) {
    const std::string p = c.string("padding", "valid");
    check(p == "valid" || p == "same", where(l), ": padding '", p, "' (valid or same)");
    return p;
  }

  std::string convert_layer(const KLayer& l, bool last, const std::map<std::string, int>& readers) {
    Cfg c(l, where(l));
    c.common();
    const std::string& cls = l.cls;
    if (cls == "Conv2D" || cls == "DepthwiseConv2D" || cls == "SeparableConv2D") {
      // SeparableConv2D: its depthwise convolution (no bias), then a 1x1 convolution to `filters`
      // with the bias: two nodes
      const bool sep = cls == "SeparableConv2D";
      const bool dw = cls == "DepthwiseConv2D" || sep;
      check(l.inputs.size() == 1, where(l), " reads ", l.inputs.size(), " tensors; one wanted");
      // a ZeroPadding2D this conv alone reads: its pads become the conv's (stated: frozen)
      std::vector<int64_t> pads;
      int v;
      auto pp = pending_pad_.find(l.inputs[0]);
      if (pp != pending_pad_.end()) {
        check(readers.at(l.inputs[0]) == 1, where(l), " reads ZeroPadding2D '", l.inputs[0],
              "', which other layers read too: only a convolution reading it alone is implemented");
        pads = pp->second.second;
        v = pp->second.first;
      } else {
        v = value(l, l.inputs[0]);
      }
      const Shape& in = shape(v);
      check(in.size() == 3, where(l), ": input ", shape_str(in), "; an image (C,H,W) wanted");
      const auto k = c.pair("kernel_size", {});
      check(!k.empty(), where(l), ": no kernel_size");
      const auto st = c.pair("strides", {1, 1});
      const auto dil = c.pair("dilation_rate", {1, 1});
      const std::string pad = padding(c, l);
      check(pads.empty() || pad == "valid", where(l), ": padding '", pad, "' after ZeroPadding2D '", l.inputs[0],
            "': only 'valid' takes the folded pads");
      const int64_t C = in[0];
      int64_t out, groups, cin_g;
      if (dw) {
        const int64_t mult = c.integer("depth_multiplier", 1, 1, int64_t{1} << 12);
        out = C * mult;
        groups = C;
        cin_g = 1;
      } else {
        out = c.integer("filters", 0, 1, int64_t{1} << 20);
        groups = c.integer("groups", 1, 1, int64_t{1} << 20);
        check(C % groups == 0 && out % groups == 0, where(l), ": groups ", groups, " divide neither the input's ", C,
              " channels nor the ", out, " filters");
        cin_g = C / groups;
      }
      const int64_t filters = sep ? c.integer("filters", 0, 1, int64_t{1} << 20) : 0;
      const bool use_bias = c.boolean("use_bias", true);
      const bool bias = use_bias && !sep;  // the depthwise node's; a separable conv's is the pointwise one's
      const std::string act = c.string("activation", "linear");
      c.done();
      const char* kname = dw ? "depthwise_kernel" : "kernel";
      const Shape kshape = dw ? Shape{k[0], k[1], C, out / C} : Shape{k[0], k[1], cin_g, out};
      const bool weights = has_weight(l, kname);
      if (weights && sep) has_weight(l, "pointwise_kernel");
      if (weights && use_bias) has_weight(l, "bias");
      json n = {{"op", "conv2d"}, {"out_channels", out}, {"kernel", k}, {"stride", st}, {"dilation", dil},
                {"groups", groups}, {"bias", bias}};
      if (!pads.empty())
        n["pads"] = pads;
      else
        n["padding"] = pad;
      if (weights) n["flip"] = false;  // TF's kernels: cross-correlation
      const std::string lin = act == "linear" || (act == "softmax" && last) ? l.name : l.name + "/linear";
      int y = add(n, sep ? l.name + "/depthwise" : l.name, {v}, sep ? l.name + "/depthwise" : lin);
      const int node = last_node();
      if (weights) {
        Conv2dLayer& conv = *layer_as<Conv2dLayer>(node_layer(node));
        const Tensor K = weight(l, kname, kshape);
        const Shape ws = conv.params()[0]->value.shape();  // (out, cin/groups, kh, kw)
        Tensor W(ws, DType::f32);
        const int64_t mult = out / C;
        for (int64_t o = 0; o < out; ++o)
          for (int64_t i = 0; i < ws[1]; ++i)
            for (int64_t r = 0; r < k[0]; ++r)
              for (int64_t s = 0; s < k[1]; ++s) {
                // HWIO (depthwise: H,W,C,multiplier with output channel c*mult + m)
                const int64_t src = dw ? ((r * k[1] + s) * C + o / mult) * mult + o % mult
                                       : ((r * k[1] + s) * cin_g + i) * out + o;
                W.data<float>()[((o * ws[1] + i) * k[0] + r) * k[1] + s] = K.data<float>()[src];
              }
        set(node, *conv.params()[0], W, l.name + "/" + kname);
        if (bias) set(node, *conv.params()[1], weight(l, "bias", {out}), l.name + "/bias");
      }
      if (sep) {
        json pw = {{"op", "conv2d"}, {"out_channels", filters}, {"kernel", {1, 1}}, {"bias", use_bias}, {"padding", "valid"}};
        if (weights) pw["flip"] = false;
        y = add(pw, l.name, {y}, lin);
        const int pnode = last_node();
        if (weights) {
          Conv2dLayer& conv = *layer_as<Conv2dLayer>(node_layer(pnode));
          const Tensor K = weight(l, "pointwise_kernel", {1, 1, out, filters});  // (1,1,in,out)
          Tensor W({filters, out, 1, 1}, DType::f32);
          for (int64_t o = 0; o < filters; ++o)
            for (int64_t i = 0; i < out; ++i) W.data<float>()[o * out + i] = K.data<float>()[i * filters + o];
          set(pnode, *conv.params()[0], W, l.name + "/pointwise_kernel");
          if (use_bias) set(pnode, *conv.params()[1], weight(l, "bias", {filters}), l.name + "/bias");
        }
      }
      if (pads.empty() && pad == "same" && (st[0] > 1 || st[1] > 1))
        r_.notes.push_back("layer '" + l.name + "': padding 'same' with stride " + std::to_string(st[0]) + "x" +
                           std::to_string(st[1]) + ": conv_same_pad splits it");
      activation(l, act, y, l.name, last);
      return std::string(sep ? "conv2d (depthwise, groups " + std::to_string(groups) + ") + conv2d 1x1"
                         : dw ? "conv2d (depthwise, groups " + std::to_string(groups) + ")" : "conv2d") +
             (pads.empty() ? ", padding '" + pad + "'" : ", ZeroPadding2D's pads folded in") +
             (weights ? ", HWIO kernel transposed" : "") + (act != "linear" ? ", then " + act : "");
    }
    if (cls == "Dense") {
      const int v = one_input(l);
      check(shape(v).size() == 1, where(l), ": input ", shape_str(shape(v)),
            "; a vector wanted (Dense over the last axis of an image is not implemented)");
      const int64_t units = c.integer("units", 0, 1, int64_t{1} << 24);
      const bool bias = c.boolean("use_bias", true);
      const std::string act = c.string("activation", "linear");
      c.mark("lora_rank");  // Keras 3; null (a LoRA-adapted layer has extra weights, refused as unknown ones)
      c.done();
      const bool weights = has_weight(l, "kernel");
      if (weights && bias) has_weight(l, "bias");
      const std::string lin = act == "linear" || (act == "softmax" && last) ? l.name : l.name + "/linear";
      const int y = add({{"op", "dense"}, {"units", units}, {"bias", bias}}, l.name, {v}, lin);
      const int node = last_node();
      if (weights) {
        DenseLayer& d = *layer_as<DenseLayer>(node_layer(node));
        const int64_t in = shape(v)[0];
        const Tensor K = weight(l, "kernel", {in, units});
        Tensor W({units, in}, DType::f32);
        for (int64_t i = 0; i < in; ++i)
          for (int64_t o = 0; o < units; ++o) W.data<float>()[o * in + i] = K.data<float>()[i * units + o];
        set(node, *d.params()[0], W, l.name + "/kernel");
        if (bias) set(node, *d.params()[1], weight(l, "bias", {units}), l.name + "/bias");
      }
      activation(l, act, y, l.name, last);
      return std::string("dense") + (weights ? ", kernel transposed" : "") + (act != "linear" ? ", then " + act : "");
    }
    if (cls == "BatchNormalization") {
      const int v = one_input(l);
      const Shape in = shape(v);
      int64_t keras_axis = -1;
      if (c.has("axis") && c.at("axis").is_array()) {  // Keras 2 may write [3]
        const json& a = c.at("axis");
        check(a.size() == 1 && a[0].is_number_integer() && std::abs(a[0].get<int64_t>()) <= 8, where(l), ": axis ",
              shown(a), "; one axis wanted");
        keras_axis = a[0].get<int64_t>();
      } else {
        keras_axis = c.integer("axis", -1, -8, 8);
      }
      const int64_t axis = axis_of(l, keras_axis, in.size());
      check(axis == 1, where(l), ": normalises axis ", axis, " of the graph's (C,...) values; the channel axis only");
      check(c.boolean("center", true) && c.boolean("scale", true), where(l),
            ": center or scale false (no beta or gamma): not implemented");
      check(!c.boolean("renorm", false), where(l), ": batch renormalisation: not implemented");
      c.mark("renorm_clipping");
      c.mark("renorm_momentum");
      check(!c.has("virtual_batch_size"), where(l), ": virtual_batch_size: not implemented");
      check(!c.has("adjustment"), where(l), ": adjustment: not implemented");
      check(!c.boolean("synchronized", false), where(l), ": synchronized: not implemented");
      c.mark("fused");  // a kernel choice
      json n = {{"op", "batchnorm"}};
      if (c.has("epsilon")) n["eps"] = c.number("epsilon", 0);
      if (c.has("momentum")) n["momentum"] = c.number("momentum", 0);
      c.mark("epsilon");
      c.mark("momentum");
      c.done();
      const bool weights = has_weight(l, "gamma");
      if (weights)
        for (const char* w : {"beta", "moving_mean", "moving_variance"}) has_weight(l, w);
      add(n, l.name, {v}, l.name);
      const int node = last_node();
      if (weights) {
        BatchNormLayer& bn = *layer_as<BatchNormLayer>(node_layer(node));
        const Shape s{in[0]};
        set(node, *bn.params()[0], weight(l, "gamma", s), l.name + "/gamma");
        set(node, *bn.params()[1], weight(l, "beta", s), l.name + "/beta");
        set(node, *bn.running_state()[0], weight(l, "moving_mean", s), l.name + "/moving_mean");
        Tensor var = weight(l, "moving_variance", s);
        if (bn.op_params().estimator == BnVarEstimator::inv_std)  // Lasagne's state: 1/sqrt(var + eps)
          for (int64_t i = 0; i < var.numel(); ++i)
            var.data<float>()[i] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var.data<float>()[i]) + bn.op_params().eps));
        set(node, *bn.running_state()[1], var, l.name + "/moving_variance");
      }
      return "batchnorm" + std::string(n.contains("eps") ? ", epsilon stated" : ", epsilon the Policy's") +
             (n.contains("momentum") ? ", momentum stated" : ", momentum the Policy's");
    }
    if (cls == "Activation") {
      const int v = one_input(l);
      const std::string act = c.string("activation", "");
      c.done();
      activation(l, act, v, l.name, last, l.name);
      return act == "linear" ? "nothing (linear)" : act == "softmax" ? "nothing (the final softmax is the loss's)" : act;
    }
    if (cls == "ReLU") {
      const int v = one_input(l);
      const double mx = c.number("max_value", std::numeric_limits<double>::infinity());
      check(c.number("negative_slope", 0) == 0, where(l), ": negative_slope (a leaky ReLU): not implemented");
      check(c.number("threshold", 0) == 0, where(l), ": threshold other than 0: not implemented");
      c.done();
      check(mx > 0, where(l), ": max_value ", mx, " not above 0");
      if (std::isinf(mx)) {
        add({{"op", "relu"}}, l.name, {v}, l.name);
        return "relu";
      }
      add({{"op", "clip"}, {"min", 0.0}, {"max", mx}}, l.name, {v}, l.name);
      std::ostringstream os;
      os << "clip [0, " << mx << "]";
      return os.str();
    }
    if (cls == "Softmax") {
      const int v = one_input(l);
      c.integer("axis", -1, -1, -1);
      c.done();
      activation(l, "softmax", v, l.name, last);
      return "nothing (the final softmax is the loss's)";
    }
    if (cls == "MaxPooling2D" || cls == "MaxPool2D" || cls == "AveragePooling2D" || cls == "AvgPool2D") {
      const bool max = cls.rfind("Max", 0) == 0;
      const int v = one_input(l);
      const Shape& in = shape(v);
      check(in.size() == 3, where(l), ": input ", shape_str(in), "; an image (C,H,W) wanted");
      const auto k = c.pair("pool_size", {2, 2});
      const auto st = c.has("strides") ? c.pair("strides", k) : (c.mark("strides"), k);
      const std::string pad = padding(c, l);
      c.done();
      if (pad == "same") {
        // 'same' pooling pads nothing where the windows tile the input: then it is 'valid'
        for (int a = 0; a < 2; ++a) {
          const AxisPad p = same_padding(in[static_cast<std::size_t>(a + 1)], k[static_cast<std::size_t>(a)],
                                         st[static_cast<std::size_t>(a)], 1, true);
          check(p.before == 0 && p.after == 0, where(l), ": padding 'same' that pads (", p.before, ", ", p.after,
                ") on axis ", a == 0 ? "H" : "W", ": not implemented (a padded 'same' pool)");
        }
      }
      add({{"op", max ? "maxpool" : "avgpool"}, {"kernel", k}, {"stride", st}}, l.name, {v}, l.name);
      return max ? "maxpool" : "avgpool";
    }
    if (cls == "GlobalAveragePooling2D") {
      const int v = one_input(l);
      const bool keep = c.boolean("keepdims", false);
      c.done();
      check(shape(v).size() == 3, where(l), ": input ", shape_str(shape(v)), "; an image (C,H,W) wanted");
      if (!keep) {
        add({{"op", "global_avg_pool"}}, l.name, {v}, l.name);
        return "global_avg_pool";
      }
      const int pooled = add({{"op", "global_avg_pool"}}, l.name + "/pool", {v}, l.name + "/pool");
      add({{"op", "reshape"}, {"shape", {shape(v)[0], 1, 1}}}, l.name, {pooled}, l.name);
      return "global_avg_pool + reshape to (C,1,1) (keepdims)";
    }
    if (cls == "Flatten") {
      const int v = one_input(l);
      c.done();
      if (shape(v).size() == 1) {
        rename(v, l.name);
        return "nothing (already flat)";
      }
      json n = {{"op", "flatten"}};
      if (flatten_stated_) n["order"] = channels_last_ ? "hwc" : "chw";
      add(n, l.name, {v}, l.name);
      return flatten_stated_ ? std::string("flatten in the file's ") + (channels_last_ ? "(h,w,c)" : "(c,h,w)") + " order"
                             : "flatten, order the Policy's (no data_format stated, no weights)";
    }
    if (cls == "Add" || cls == "Subtract" || cls == "Multiply") {
      c.done();
      check(l.inputs.size() >= 2, where(l), " reads ", l.inputs.size(), " tensors; two or more wanted");
      check(cls != "Subtract" || l.inputs.size() == 2, where(l), " reads ", l.inputs.size(), " tensors; two wanted");
      const std::string op = cls == "Add" ? "add" : cls == "Subtract" ? "sub" : "mul";
      std::vector<int> vs;
      for (const std::string& in : l.inputs) {
        check(!pending_pad_.count(in), where(l), " reads ZeroPadding2D '", in, "': not implemented");
        vs.push_back(value(l, in));
      }
      int acc = vs[0];
      for (std::size_t i = 1; i < vs.size(); ++i)
        acc = add({{"op", op}}, i + 1 == vs.size() ? l.name : l.name + "/" + std::to_string(i), {acc, vs[i]},
                  i + 1 == vs.size() ? l.name : l.name + "/" + std::to_string(i));
      return op + (vs.size() > 2 ? " (" + std::to_string(vs.size() - 1) + " nodes)" : std::string());
    }
    if (cls == "Concatenate") {
      check(l.inputs.size() >= 2, where(l), " reads ", l.inputs.size(), " tensors; two or more wanted");
      std::vector<int> vs;
      for (const std::string& in : l.inputs) {
        check(!pending_pad_.count(in), where(l), " reads ZeroPadding2D '", in, "': not implemented");
        vs.push_back(value(l, in));
      }
      const int64_t axis = axis_of(l, c.integer("axis", -1, -8, 8), shape(vs[0]).size());
      c.done();
      add({{"op", "concat"}, {"axis", axis}}, l.name, vs, l.name);
      return "concat on axis " + std::to_string(axis) + " (counting the batch)";
    }
    if (cls == "Reshape") {
      // only where the file's and the graph's element orders coincide: vectors, and images of one
      // pixel (channels-last (1,1,C) is channels-first (C,1,1)); other reshapes would move elements
      const int v = one_input(l);
      check(c.has("target_shape"), where(l), ": no target_shape");
      const json& t = c.at("target_shape");
      c.done();
      check(t.is_array() && (t.size() == 1 || t.size() == 3), where(l), ": target_shape ", shown(t),
            "; (features,) or an image wanted");
      Shape target;
      for (const json& d : t) {
        check(d.is_number_integer() && d.get<int64_t>() >= 1 && d.get<int64_t>() <= (int64_t{1} << 24), where(l),
              ": target_shape ", shown(t), " (every axis a fixed size; -1 not implemented)");
        target.push_back(d.get<int64_t>());
      }
      if (target.size() == 3 && channels_last_) target = {target[2], target[0], target[1]};
      auto plain = [](const Shape& sh) { return sh.size() == 1 || (sh.size() == 3 && sh[1] * sh[2] == 1); };
      check(plain(shape(v)) && plain(target), where(l), ": reshape ", shape_str(shape(v)), " -> ", shape_str(target),
            " moves elements between channels-last and channels-first orders: not implemented");
      add({{"op", "reshape"}, {"shape", target}}, l.name, {v}, l.name);
      return "reshape to " + shape_str(target);
    }
    if (cls == "Dropout") {
      const int v = one_input(l);
      const double rate = c.number("rate", 0.5);
      check(!c.has("noise_shape"), where(l), ": noise_shape: not implemented");
      c.mark("noise_shape");
      c.mark("seed");  // the Policy's RNG draws the masks
      c.done();
      check(rate >= 0 && rate < 1, where(l), ": rate ", rate, " outside [0, 1)");
      add({{"op", "dropout"}, {"rate", rate}}, l.name, {v}, l.name);
      return "dropout (masks from the Policy's RNG)";
    }
    if (cls == "LSTM" || cls == "GRU") {
      const bool lstm = cls == "LSTM";
      const int v = one_input(l);
      const Shape in = shape(v);
      check(in.size() == 2, where(l), ": input ", shape_str(in), "; (steps, features) wanted");
      const int64_t units = c.integer("units", 0, 1, int64_t{1} << 16);
      const bool seq = c.boolean("return_sequences", false);
      check(!c.boolean("return_state", false), where(l), ": return_state: not implemented");
      check(!c.boolean("go_backwards", false), where(l), ": go_backwards: not implemented");
      check(!c.boolean("stateful", false), where(l), ": stateful: not implemented");
      check(!c.boolean("time_major", false), where(l), ": time_major: not implemented");
      check(c.string("activation", "tanh") == "tanh", where(l), ": activation other than tanh: not implemented");
      check(c.boolean("use_bias", true), where(l), ": use_bias false: not implemented");
      check(c.number("dropout", 0) == 0 && c.number("recurrent_dropout", 0) == 0, where(l),
            ": dropout inside the cell: not implemented");
      for (const char* k : {"unroll", "implementation", "unit_forget_bias", "seed", "use_cudnn"}) c.mark(k);  // no effect on the function
      json n = {{"op", lstm ? "lstm" : "gru"}, {"units", units}, {"return_sequences", seq}};
      if (c.has("recurrent_activation")) n["recurrent_activation"] = c.string("recurrent_activation", "");
      c.mark("recurrent_activation");
      bool reset_after = false;
      if (!lstm && c.has("reset_after")) n["reset_after"] = reset_after = c.boolean("reset_after", false);
      c.mark("reset_after");
      c.done();
      const bool weights = has_weight(l, "kernel");
      if (weights) {
        has_weight(l, "recurrent_kernel");
        has_weight(l, "bias");
      }
      add(n, l.name, {v}, l.name);
      const int node = last_node();
      if (weights) {
        RnnLayer& rl = *layer_as<RnnLayer>(node_layer(node));
        const int64_t G = (lstm ? 4 : 3) * units;
        KerasRnnWeights kw;
        kw.kernel = weight(l, "kernel", {in[1], G});
        kw.recurrent_kernel = weight(l, "recurrent_kernel", {units, G});
        const Shape bs = manifest_.at(l.name + "/bias").shape;
        check(bs == Shape{G} || (!lstm && reset_after && bs == Shape{2, G}), where(l), ": weight '", l.name,
              "/bias' has shape ", shape_str(bs), "; ", shape_str({G}), (lstm ? "" : " (or [2, 3u] after reset)"),
              " wanted");
        kw.bias = weight(l, "bias", bs);
        rl.set_keras_weights(kw);
        const std::vector<Param*> ps = rl.params();
        for (Param* p : ps) source(node, *p, l.name + " (kernel, recurrent_kernel, bias: Keras's column layout)");
      }
      return std::string(lstm ? "lstm" : "gru") + (weights ? ", Keras's gate columns reordered" : "") +
             (n.contains("recurrent_activation") ? ", recurrent_activation stated" : "") +
             (n.contains("reset_after") ? ", reset_after stated" : "");
    }
    if (cls == "Embedding") {
      const int v = one_input(l);
      check(shape(v).size() == 1, where(l), ": input ", shape_str(shape(v)), "; (steps,) of ids wanted");
      const int64_t V = c.integer("input_dim", 0, 1, int64_t{1} << 24), D = c.integer("output_dim", 0, 1, int64_t{1} << 16);
      check(!c.boolean("mask_zero", false), where(l), ": mask_zero true: not implemented (a graph carries no mask)");
      c.mark("input_length");
      c.mark("sparse");
      c.mark("lora_rank");
      c.done();
      const bool weights = has_weight(l, "embeddings");
      add({{"op", "embedding"}, {"input_dim", V}, {"output_dim", D}}, l.name, {v}, l.name);
      const int node = last_node();
      if (weights) {
        EmbeddingLayer& e = *layer_as<EmbeddingLayer>(node_layer(node));
        set(node, *e.params()[0], weight(l, "embeddings", {V, D}), l.name + "/embeddings");
      }
      return "embedding";
    }
    if (cls == "ZeroPadding2D") {
      const int v = one_input(l);
      check(shape(v).size() == 3, where(l), ": input ", shape_str(shape(v)), "; an image (C,H,W) wanted");
      std::vector<int64_t> pads;  // t, b, l, r
      const json& p = c.has("padding") ? c.at("padding") : json(1);
      c.mark("padding");
      c.done();
      auto ok = [](const json& e) { return e.is_number_integer() && e.get<int64_t>() >= 0 && e.get<int64_t>() <= 65536; };
      if (ok(p)) {
        pads.assign(4, p.get<int64_t>());
      } else if (p.is_array() && p.size() == 2 && ok(p[0]) && ok(p[1])) {
        pads = {p[0].get<int64_t>(), p[0].get<int64_t>(), p[1].get<int64_t>(), p[1].get<int64_t>()};
      } else {
        check(p.is_array() && p.size() == 2 && p[0].is_array() && p[1].is_array() && p[0].size() == 2 &&
                  p[1].size() == 2 && ok(p[0][0]) && ok(p[0][1]) && ok(p[1][0]) && ok(p[1][1]),
              where(l), ": padding ", shown(p), "; n, [h, w] or [[top, bottom], [left, right]] wanted");
        pads = {p[0][0].get<int64_t>(), p[0][1].get<int64_t>(), p[1][0].get<int64_t>(), p[1][1].get<int64_t>()};
      }
      pending_pad_[l.name] = {v, pads};
      return "folded into the convolution reading it";
    }
    fail(where(l), ": layer class not implemented (known: ", [] {
      std::string s;
      for (const auto& k : kClasses) s += (s.empty() ? "" : ", ") + k;
      return s;
    }(), ")");
  }

  std::string file_;
  const std::string& weights_;
  Policy policy_;
  Rng rng_;
  uint64_t max_bytes_;
  std::map<std::string, ManifestEntry> manifest_;
  std::unique_ptr<GraphBuilder> b_;
  std::map<std::string, std::string> alias_;                               // layer name -> the value it is
  std::map<std::string, std::pair<int, std::vector<int64_t>>> pending_pad_;  // ZeroPadding2D: input value, pads
  bool channels_last_ = true, flatten_stated_ = true;
  KerasGraph r_;
};

}  // namespace

namespace {
json parse_json(const std::string& text, const std::string& file) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    fail("import keras: ", file, ": not JSON at byte ", e.byte, " (", e.what(), ")");
  } catch (const json::exception& e) {  // a number too large for a double, ...
    fail("import keras: ", file, ": not JSON we can read (", e.what(), ")");
  }
}

KerasGraph import_parsed(const json& top, const std::string& weights, const std::string& file, const std::string& policy,
                         uint64_t max_architecture_bytes) {
  const Policy p = Policy::parse(policy);
  const uint64_t bound = weights.empty() ? max_architecture_bytes : 2 * static_cast<uint64_t>(weights.size()) + 4096;
  return Importer(file, weights, p, bound).run(top);
}
}  // namespace

KerasGraph import_keras_bytes(const std::string& model_json, const std::string& weights, const std::string& file,
                              const std::string& policy, uint64_t max_architecture_bytes) {
  return import_parsed(parse_json(model_json, file), weights, file, policy, max_architecture_bytes);
}

KerasGraph import_keras(const std::string& path, const std::string& policy) {
  const json top = parse_json(detail::read_file_bytes(path, "import keras"), path);
  std::string weights;
  if (top.is_object() && top.contains("weightsManifest") && top.at("weightsManifest").is_array()) {
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    for (const json& g : top.at("weightsManifest")) {
      if (!g.is_object() || !g.contains("paths")) continue;
      check(g.at("paths").is_array(), "import keras: ", path, ": a manifest group's paths is not a list");
      for (const json& p : g.at("paths")) {
        check(p.is_string(), "import keras: ", path, ": a shard path ", shown(p), " is not a string");
        const std::filesystem::path shard(p.get<std::string>());
        check(shard.is_relative() && shard.filename() == shard, "import keras: ", path, ": shard '", shard.string(),
              "' is not a file name beside model.json");
        weights += detail::read_file_bytes((dir / shard).string(), "import keras");
      }
    }
  }
  return import_parsed(top, weights, path, policy, uint64_t{1} << 30);
}

Model keras_graph_model(KerasGraph g, const std::string& policy) {
  return graph_model(std::move(g.graph), g.spec, policy, "import keras", g.output);
}

const std::vector<std::string>& keras_layer_classes() { return kClasses; }

}  // namespace convert
}  // namespace driftlab
