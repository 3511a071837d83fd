#include "convert/tfjs_export.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/build_info.h"
#include "core/error.h"
#include "engine/layers/all.h"
#include "engine/layers/sequential.h"
#include "engine/layers/weight_layout.h"
#include "core/ops/conv2d.h"
#include "models/model_file.h"

namespace driftlab {
namespace convert {
namespace {

using json = nlohmann::json;

class Writer {
 public:
  json layers = json::array();
  json manifest = json::array();
  std::string bytes;
  std::string current;  // the layer whose output the next layer reads
  int counter = 0;

  std::string name(const std::string& kind) { return kind + "_" + std::to_string(++counter); }
  // A layer of the functional graph reading `inputs` (default: the current output); it becomes
  // the current output.
  void add(const std::string& cls, json config, std::vector<std::string> inputs = {}) {
    if (inputs.empty()) inputs.push_back(current);
    config["trainable"] = true;
    config["dtype"] = "float32";
    json inbound = json::array();
    for (const auto& i : inputs) inbound.push_back({i, 0, 0, json::object()});
    const std::string n = config["name"];
    layers.push_back({{"class_name", cls}, {"config", config}, {"name", n}, {"inbound_nodes", {inbound}}});
    current = n;
  }
  void weight(const std::string& layer, const std::string& w, const Tensor& t) {
    check(t.dtype() == DType::f32, "export tfjs: ", layer, "/", w, " is not float32");
    manifest.push_back({{"name", layer + "/" + w}, {"shape", t.shape()}, {"dtype", "float32"}});
    bytes.append(reinterpret_cast<const char*>(t.data<float>()), static_cast<std::size_t>(t.numel()) * 4);
  }
};

// (K,C,R,S) -> (R,S,C,K), rotated 180 degrees in each filter when `flip`.
Tensor hwio(const Tensor& w, bool flip) {
  const int64_t K = w.dim(0), C = w.dim(1), R = w.dim(2), S = w.dim(3);
  Tensor out({R, S, C, K}, DType::f32);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t s = 0; s < S; ++s) {
          const int64_t rr = flip ? R - 1 - r : r, ss = flip ? S - 1 - s : s;
          out.data<float>()[((r * S + s) * C + c) * K + k] = w.data<float>()[((k * C + c) * R + rr) * S + ss];
        }
  return out;
}

const char* act_name_tfjs(const ActivationParams& a, const std::string& where) {
  switch (a.kind) {
    case ActKind::relu: return "relu";
    case ActKind::tanh: return "tanh";
    case ActKind::sigmoid: return "sigmoid";
    case ActKind::hard_sigmoid:
      check(a.hs_slope == 0.2 && a.hs_offset == 0.5, "export tfjs: ", where, ": hard_sigmoid(", a.hs_slope, "x + ",
            a.hs_offset, "); TF.js's hardSigmoid is clip(0.2x + 0.5) only");
      return "hard_sigmoid";
    case ActKind::clip:
      check(a.clip_min == 0.0 && a.clip_max == 6.0, "export tfjs: ", where, ": clip(", a.clip_min, ", ", a.clip_max,
            "); TF.js's activations clip only as relu6");
      return "relu6";
  }
  fail("export tfjs: ", where, ": unknown activation");
}

// The layers of a net as TF.js layers, appended to the writer in order: one visit per kind.
class TfjsEmit : public LayerVisitor {
 public:
  TfjsEmit(Writer& w, TfjsExport& out) : w_(w), out_(out) {}

  // Every layer of net; prefix starts each layer's name in the report ("3.residual.main.").
  void emit(Sequential& net, const std::string& prefix) {
    for (std::size_t i = 0; i < net.size(); ++i) {
      Layer& layer = net.layer(i);
      where_ = prefix + std::to_string(i) + "." + layer.kind();
      layer.accept(*this);
    }
  }

  void visit(Conv2dLayer& c) override {
    const Conv2dParams& p = c.op_params();
    auto ps = c.params();
    std::string padding = "valid", how = "valid";
    if (p.pad_t || p.pad_b || p.pad_l || p.pad_r) {
      const AxisPad h = same_padding(p.h, p.r, p.stride_h, p.dil_h, true), v = same_padding(p.w, p.s, p.stride_w, p.dil_w, true);
      if (h.before == p.pad_t && h.after == p.pad_b && v.before == p.pad_l && v.after == p.pad_r) {
        padding = "same", how = "'same' (TF's split)";
      } else {
        const std::string zn = w_.name("zero_padding2d");
        w_.add("ZeroPadding2D", {{"name", zn}, {"padding", {{p.pad_t, p.pad_b}, {p.pad_l, p.pad_r}}},
                                 {"data_format", "channels_last"}});
        how = "ZeroPadding2D [[" + std::to_string(p.pad_t) + "," + std::to_string(p.pad_b) + "],[" +
              std::to_string(p.pad_l) + "," + std::to_string(p.pad_r) + "]] + 'valid'";
      }
    }
    if (p.groups > 1) {
      // a depthwise convolution (one input channel per group) as DepthwiseConv2D: output channel
      // c*m + j reads input channel c, Keras's depthwise_kernel (R,S,C,m); TF.js 4.22's Conv2D has
      // no groups
      check(p.groups == p.c, "export tfjs: ", where_, ": a grouped convolution of ", p.groups, " groups over ", p.c,
            " channels (TF.js has DepthwiseConv2D, one channel per group, and no grouped Conv2D)");
      const int64_t m = p.k / p.c;
      const Tensor k = hwio(ps[0]->value, p.flip);  // (R,S,1,K)
      Tensor dk({p.r, p.s, p.c, m}, DType::f32);
      for (int64_t i = 0; i < k.numel(); ++i) dk.data<float>()[i] = k.data<float>()[i];  // K = c*m + j: the same order
      const std::string n = w_.name("depthwise_conv2d");
      w_.add("DepthwiseConv2D", {{"name", n}, {"kernel_size", {p.r, p.s}}, {"strides", {p.stride_h, p.stride_w}},
                                 {"padding", padding}, {"depth_multiplier", m}, {"data_format", "channels_last"},
                                 {"dilation_rate", {p.dil_h, p.dil_w}}, {"activation", "linear"},
                                 {"use_bias", ps.size() > 1}});
      w_.weight(n, "depthwise_kernel", dk);
      if (ps.size() > 1) w_.weight(n, "bias", ps[1]->value);
      out_.layers.push_back(where_ + ": DepthwiseConv2D " + how + (p.flip ? ", kernel rotated 180 (filter flip)" : "") +
                            ", (R,S,C,multiplier)");
      return;
    }
    const std::string n = w_.name("conv2d");
    w_.add("Conv2D", {{"name", n}, {"filters", p.k}, {"kernel_size", {p.r, p.s}}, {"strides", {p.stride_h, p.stride_w}},
                      {"padding", padding}, {"data_format", "channels_last"}, {"dilation_rate", {p.dil_h, p.dil_w}},
                      {"activation", "linear"}, {"use_bias", ps.size() > 1}});
    w_.weight(n, "kernel", hwio(ps[0]->value, p.flip));
    if (ps.size() > 1) w_.weight(n, "bias", ps[1]->value);
    out_.layers.push_back(where_ + ": Conv2D " + how + (p.flip ? ", kernel rotated 180 (filter flip)" : "") + ", HWIO");
  }
  void visit(Pool2dLayer& pl) override {
    const Pool2dParams& p = pl.op_params();
    check(!(p.pad_t || p.pad_b || p.pad_l || p.pad_r), "export tfjs: ", where_, ": a padded pool is not written");
    const bool max = pl.pool_kind() == PoolKind::max;
    const std::string n = w_.name(max ? "max_pooling2d" : "average_pooling2d");
    w_.add(max ? "MaxPooling2D" : "AveragePooling2D", {{"name", n}, {"pool_size", {p.kh, p.kw}},
                                                       {"strides", {p.stride_h, p.stride_w}}, {"padding", "valid"},
                                                       {"data_format", "channels_last"}});
    out_.layers.push_back(where_ + (max ? ": MaxPooling2D" : ": AveragePooling2D"));
  }
  void visit(ActivationLayer& a) override {
    const std::string n = w_.name("activation");
    const char* act = act_name_tfjs(a.op_params(), where_);
    w_.add("Activation", {{"name", n}, {"activation", act}});
    out_.layers.push_back(where_ + ": Activation " + act);
  }
  void visit(BatchNormLayer& bn) override {
    const BatchNormParams& p = bn.op_params();
    auto ps = bn.params();
    auto st = bn.running_state();
    Tensor var = st[1]->value.clone();
    if (p.estimator == BnVarEstimator::inv_std)  // var = 1/s^2 - eps, in double
      for (int64_t k = 0; k < var.numel(); ++k) {
        const double s = var.data<float>()[k];
        var.data<float>()[k] = static_cast<float>(1.0 / (s * s) - p.eps);
      }
    const std::string n = w_.name("batch_normalization");
    w_.add("BatchNormalization", {{"name", n}, {"axis", -1}, {"momentum", 0.99}, {"epsilon", p.eps}, {"center", true},
                                  {"scale", true}});
    w_.weight(n, "gamma", ps[0]->value);
    w_.weight(n, "beta", ps[1]->value);
    w_.weight(n, "moving_mean", st[0]->value);
    w_.weight(n, "moving_variance", var);
    out_.layers.push_back(where_ + ": BatchNormalization epsilon " + std::to_string(p.eps) +
                          (p.estimator == BnVarEstimator::inv_std ? " (inverse-std statistics as 1/s^2 - eps)" : ""));
  }
  void visit(FlattenLayer& f) override {
    w_.add("Flatten", {{"name", w_.name("flatten")}});
    const bool chw = f.order() == FlattenOrder::chw && f.input_shape().size() == 3 && f.input_shape()[0] > 1;
    if (chw) pending_flatten_ = &f;
    out_.layers.push_back(where_ + (chw ? ": Flatten (TF.js's h,w,c order; the next Dense's rows permuted from c,h,w)"
                                        : ": Flatten"));
  }
  void visit(DenseLayer& d) override {
    auto ps = d.params();
    Tensor wt = ps[0]->value;  // (out, in)
    if (pending_flatten_) {  // TF.js flattens NHWC: the columns from (c,h,w) to (h,w,c) order
      wt = permute_columns(wt, pending_flatten_->input_shape(), FlattenOrder::chw, FlattenOrder::hwc);
      pending_flatten_ = nullptr;
    }
    const Tensor k = transpose2d(wt);  // Keras's (in, out)
    const std::string n = w_.name("dense");
    w_.add("Dense", {{"name", n}, {"units", k.dim(1)}, {"activation", "linear"}, {"use_bias", ps.size() > 1}});
    w_.weight(n, "kernel", k);
    if (ps.size() > 1) w_.weight(n, "bias", ps[1]->value);
    out_.layers.push_back(where_ + ": Dense");
  }
  void visit(RnnLayer& r) override {
    const RnnParams& p = r.op_params();
    const bool lstm = p.cell == RnnCell::lstm;
    check(r.mask_mode() == RnnMask::none, "export tfjs: ", where_, ": rnn_mask other than none is not written");
    check(lstm || !p.gru_reset_after, "export tfjs: ", where_,
          ": a reset-after GRU (PyTorch's, Keras's reset_after=True) cannot run in TF.js 4.22: tfjs-layers' GRUCell "
          "throws 'GRUCell does not support reset_after parameter set to true'");
    check(lstm || p.gru_z_keeps_old, "export tfjs: ", where_, ": a GRU whose z takes the new state");
    check(!p.peepholes, "export tfjs: ", where_, ": LSTM peepholes have no TF.js form");
    const char* rec = act_name_tfjs(p.gate_act, where_);
    const KerasRnnWeights kw = r.keras_weights();
    const std::string n = w_.name(lstm ? "lstm" : "gru");
    json cfg = {{"name", n}, {"units", p.hidden}, {"activation", "tanh"}, {"recurrent_activation", rec},
                {"use_bias", true}, {"return_sequences", r.return_sequences()}, {"return_state", false},
                {"go_backwards", false}, {"stateful", false}, {"unroll", false}};
    if (lstm) cfg["unit_forget_bias"] = false;
    w_.add(lstm ? "LSTM" : "GRU", cfg);
    w_.weight(n, "kernel", kw.kernel);
    w_.weight(n, "recurrent_kernel", kw.recurrent_kernel);
    Tensor b = kw.bias;
    if (b.rank() == 2) {  // two biases: their sum (exact in meaning for LSTM and a reset-before GRU)
      const int64_t G = b.dim(1);
      Tensor s({G}, DType::f32);
      for (int64_t k = 0; k < G; ++k) s.data<float>()[k] = b.data<float>()[k] + b.data<float>()[G + k];
      b = s;
    }
    w_.weight(n, "bias", b);
    out_.layers.push_back(where_ + ": " + (lstm ? "LSTM" : "GRU") + " (Keras column layout and gate order), recurrent " +
                          rec + (p.two_biases ? ", the two biases summed" : ""));
  }
  void visit(EmbeddingLayer& e) override {
    const Tensor& t = e.params()[0]->value;
    const std::string n = w_.name("embedding");
    w_.add("Embedding", {{"name", n}, {"input_dim", t.dim(0)}, {"output_dim", t.dim(1)}, {"mask_zero", false}});
    w_.weight(n, "embeddings", t);
    out_.layers.push_back(where_ + ": Embedding");
  }
  void visit(GlobalAvgPoolLayer&) override {
    w_.add("GlobalAveragePooling2D", {{"name", w_.name("global_average_pooling2d")}, {"data_format", "channels_last"}});
    out_.layers.push_back(where_ + ": GlobalAveragePooling2D");
  }
  void visit(DropoutLayer&) override { out_.layers.push_back(where_ + ": dropout, the identity at inference: no layer"); }
  // A graph model's nodes in order as a functional graph: each value the TF.js layer that outputs
  // it. Add and Multiply of two computed values (TF.js has no Subtract layer, and a layers model no
  // constants), Concatenate on the channels-last axis, a Reshape only where channels-first and
  // channels-last orders coincide (vectors and (C,1,1)); a channels-first Flatten must feed a Dense
  // directly (its rows take the permutation).
  void visit(GraphLayer& g) override {
    const std::string where = where_;
    std::vector<std::string> v(g.num_values());
    v[0] = w_.current;
    for (std::size_t j = 0; j < g.num_nodes(); ++j) {
      GraphNode& n = g.node(j);
      where_ = where + "." + n.name;
      for (int i : n.inputs)
        check(!g.is_constant(i), "export tfjs: ", where_, " reads the constant '", g.value_name(i),
              "': a TF.js layers model has no constants");
      check(!pending_flatten_ || (n.op == GraphOp::layer && layer_as<DenseLayer>(*n.layer) &&
                                  v[static_cast<std::size_t>(n.inputs[0])] == w_.current),
            "export tfjs: ", where_, ": a channels-first Flatten must feed a Dense directly (its rows take TF.js's "
            "(h,w,c) order)");
      auto val = [&](int i) { return v[static_cast<std::size_t>(i)]; };
      switch (n.op) {
        case GraphOp::layer:
          w_.current = val(n.inputs[0]);
          n.layer->accept(*this);
          break;
        case GraphOp::add:
        case GraphOp::mul: {
          check(g.value_shape(n.inputs[0]) == g.value_shape(n.inputs[1]), "export tfjs: ", where_,
                ": broadcasting ", shape_str(g.value_shape(n.inputs[0])), " against ",
                shape_str(g.value_shape(n.inputs[1])), " (TF.js's merge layers take equal shapes)");
          const bool add = n.op == GraphOp::add;
          w_.add(add ? "Add" : "Multiply", {{"name", w_.name(add ? "add" : "multiply")}}, {val(n.inputs[0]), val(n.inputs[1])});
          out_.layers.push_back(where_ + (add ? ": Add" : ": Multiply"));
          break;
        }
        case GraphOp::sub:
          fail("export tfjs: ", where_, ": sub has no TF.js layer (tfjs-layers 4.22 has no Subtract)");
        case GraphOp::concat: {
          const std::size_t rank = g.value_shape(n.output).size();
          const int axis = rank == 3 ? (n.axis == 1 ? 3 : n.axis - 1) : n.axis;  // (C,H,W) -> (H,W,C)
          std::vector<std::string> ins;
          for (int i : n.inputs) ins.push_back(val(i));
          w_.add("Concatenate", {{"name", w_.name("concatenate")}, {"axis", axis}}, ins);
          out_.layers.push_back(where_ + ": Concatenate axis " + std::to_string(axis) + " (channels-last)");
          break;
        }
        case GraphOp::reshape: {
          auto plain = [](const Shape& s) { return s.size() == 1 || (s.size() == 3 && s[1] * s[2] == 1); };
          const Shape& in = g.value_shape(n.inputs[0]);
          const Shape& out = g.value_shape(n.output);
          check(plain(in) && plain(out), "export tfjs: ", where_, ": reshape ", shape_str(in), " -> ", shape_str(out),
                " moves elements between channels-first and channels-last orders");
          json target = out.size() == 3 ? json::array({out[1], out[2], out[0]}) : json(out);
          w_.add("Reshape", {{"name", w_.name("reshape")}, {"target_shape", target}}, {val(n.inputs[0])});
          out_.layers.push_back(where_ + ": Reshape (its order the same channels-first and -last)");
          break;
        }
        case GraphOp::multi:
          fail("export tfjs: ", where_, " (", n.layer->kind(), ") has no TF.js layer");
      }
      v[static_cast<std::size_t>(n.output)] = w_.current;
    }
    check(!pending_flatten_, "export tfjs: ", where, ": a channels-first Flatten at the end of a graph");
    w_.current = v[static_cast<std::size_t>(g.output_value())];
    where_ = where;
  }
  void visit(ResidualLayer& r) override {
    const std::string where = where_;  // emit() below moves where_ through the block's layers
    const std::string x = w_.current;
    emit(r.main(), where + ".main.");
    const std::string main_out = w_.current;
    w_.current = x;
    std::string how = "identity shortcut";
    if (r.shortcut() == Shortcut::option_b) {
      emit(*r.projection(), where + ".projection.");
      how = "projection shortcut";
    } else if (r.shortcut() == Shortcut::option_a) {
      // x[:, ::s, ::s] as a 1x1 max pool of stride s, the zero channels as a fixed 1x1
      // convolution: channel c of the input to channel c + pad_before, every product an exact
      // x*1 or x*0
      const int64_t s = r.stride(), cin = r.input_shape()[0], cout = r.output_shape()[0];
      w_.add("MaxPooling2D", {{"name", w_.name("max_pooling2d")}, {"pool_size", {1, 1}}, {"strides", {s, s}},
                              {"padding", "valid"}, {"data_format", "channels_last"}});
      Tensor k({1, 1, cin, cout}, DType::f32);
      for (int64_t c = 0; c < cin; ++c) k.data<float>()[c * cout + c + r.pad_before()] = 1.f;
      const std::string n = w_.name("conv2d");
      w_.add("Conv2D", {{"name", n}, {"filters", cout}, {"kernel_size", {1, 1}}, {"strides", {1, 1}}, {"padding", "valid"},
                        {"data_format", "channels_last"}, {"dilation_rate", {1, 1}}, {"activation", "linear"},
                        {"use_bias", false}});
      w_.weight(n, "kernel", k);
      how = "option A: MaxPooling2D(1, stride " + std::to_string(s) + ") + a fixed 1x1 Conv2D placing the channels";
    }
    w_.add("Add", {{"name", w_.name("add")}}, {main_out, w_.current});
    out_.layers.push_back(where + ": Add of the block and its " + how);
  }
  void visit(ExternalLayer& l) override { fail("export tfjs: ", where_, " (", l.kind(), ") has no TF.js layers form"); }

  static Support support(Kind<Conv2dLayer>) {
    return Support::some("Conv2D HWIO, DepthwiseConv2D; other pad splits via ZeroPadding2D; no other grouped conv");
  }
  static Support support(Kind<Pool2dLayer>) { return Support::some("unpadded max and average pools only"); }
  static Support support(Kind<DenseLayer>) { return Support::all("Dense; rows permuted after a c,h,w flatten"); }
  static Support support(Kind<ActivationLayer>) { return Support::some("hard_sigmoid only as clip(0.2x + 0.5); clip only as relu6"); }
  static Support support(Kind<BatchNormLayer>) { return Support::all("BatchNormalization; inverse std as 1/s^2 - eps"); }
  static Support support(Kind<DropoutLayer>) { return Support::all("the identity, no layer"); }
  static Support support(Kind<FlattenLayer>) { return Support::all("Flatten (c,h,w order moved into the next Dense)"); }
  static Support support(Kind<GlobalAvgPoolLayer>) { return Support::all("GlobalAveragePooling2D"); }
  static Support support(Kind<EmbeddingLayer>) { return Support::all("Embedding"); }
  static Support support(Kind<RnnLayer>) {
    return Support::some("no mask or peepholes; GRU reset-before, z keeps old");
  }
  static Support support(Kind<ResidualLayer>) { return Support::all("Add; option A as 1x1 MaxPooling2D + fixed Conv2D"); }
  static Support support(Kind<GraphLayer>) {
    return Support::some("Add/Multiply of equal shapes, Concatenate, plain Reshape; no Subtract, no constants");
  }
  static Support support(Kind<ExternalLayer>) { return Support::none("int8 layers: a TF.js layers model is float"); }

 private:
  Writer& w_;
  TfjsExport& out_;
  std::string where_;                          // the layer being written, for the report and errors
  const FlattenLayer* pending_flatten_ = nullptr;  // a channels-first flatten whose Dense must permute rows
};

}  // namespace

TfjsExport export_tfjs(Model& model, const InputNorm& norm, const std::string& shard_name) {
  check(model.dtype() == DType::f32, "export tfjs: model '", model.name, "' is float64; TF.js runs float32");
  check(norm.identity(), "export tfjs: the model file standardises its inputs (mean ", norm.mean, ", std ", norm.std,
        "); TF.js 4.22's layers have no serializable standardisation: standardise the inputs before predict()");
  Writer w;
  TfjsExport out;
  const Shape& in = model.input_shape;
  json input_shape = json::array({nullptr});
  if (in.size() == 3)
    input_shape.insert(input_shape.end(), {in[1], in[2], in[0]});  // (H,W,C)
  else
    for (int64_t d : in) input_shape.push_back(d);
  w.layers.push_back({{"class_name", "InputLayer"},
                      {"config", {{"batch_input_shape", input_shape}, {"dtype", "float32"}, {"sparse", false},
                                  {"name", "input_1"}}},
                      {"name", "input_1"},
                      {"inbound_nodes", json::array()}});
  w.current = "input_1";
  TfjsEmit(w, out).emit(*model.net, "");
  const json model_json = {
      {"format", "layers-model"},
      {"generatedBy", std::string("driftlab ") + build_commit()},
      {"convertedBy", nullptr},
      {"modelTopology",
       {{"class_name", "Model"},
        {"config", {{"name", model.name}, {"layers", w.layers}, {"input_layers", {{"input_1", 0, 0}}},
                    {"output_layers", {{w.current, 0, 0}}}}},
        {"keras_version", "tfjs-layers 4.22.0"},
        {"backend", "tensor_flow.js"}}},
      {"weightsManifest", json::array({{{"paths", {shard_name}}, {"weights", w.manifest}}})},
      {"userDefinedMetadata", {{"driftlab_policy", model.policy.to_string()}, {"driftlab_model", model.name}}}};
  out.model_json = model_json.dump(1);
  out.weights = std::move(w.bytes);
  return out;
}

SupportColumn tfjs_export_support() { return support_of<TfjsEmit>(); }

void write_tfjs(const std::string& dir, const TfjsExport& e, const std::string& shard_name) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  check(!ec, "export tfjs: cannot create ", dir, ": ", ec.message());
  // the shard first: a model.json never names a missing shard; and when model.json cannot be
  // written, the shard goes again (a failed export leaves no half of itself behind)
  const std::string shard = dir + "/" + shard_name;
  write_file_atomic(shard, e.weights);
  try {
    write_file_atomic(dir + "/model.json", e.model_json);
  } catch (...) {
    std::filesystem::remove(shard, ec);
    throw;
  }
}

}  // namespace convert
}  // namespace driftlab
