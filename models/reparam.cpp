#include "models/reparam.h"

#include "engine/layers/all.h"
#include "engine/layers/weight_layout.h"
#include "models/models.h"

namespace driftlab {

namespace {

// Copies one source layer's parameters and statistics into the destination's layer at the same
// place, converted from the source's conventions to the destination's: one visit per kind.
class Reparam : public LayerVisitor {
 public:
  Reparam(const Model& src, const Model& dst, bool convert) : src_(src), dst_(dst), convert_(convert) {}

  void transfer(const std::string& path, Layer& ls, Layer& ld) {
    path_ = path;
    ld_ = &ld;
    check(ls.kind() == ld.kind(), "convert: layer ", path, " is ", ls.kind(), " in the source but ", ld.kind(),
          " in the destination");
    ls.accept(*this);
  }
  // The layers of a container, pairwise. A flatten's pending order change does not leave it.
  void transfer_seq(Sequential& src, Sequential& dst, const std::string& prefix) {
    check(src.size() == dst.size(), "convert: ", prefix, " holds ", src.size(), " layers in the source but ",
          dst.size(), " in the destination");
    const std::string outer = path_;
    Layer* outer_ld = ld_;
    const Shape* outer_flatten = pending_flatten_;
    pending_flatten_ = nullptr;
    for (std::size_t j = 0; j < src.size(); ++j) transfer(prefix + std::to_string(j), src.layer(j), dst.layer(j));
    path_ = outer;
    ld_ = outer_ld;
    pending_flatten_ = outer_flatten;
  }

  // Rotated where the two layers' flips differ: the Policy's conv_kernel_flip for the zoo, what the
  // file states for an imported graph (ONNX: never flipped, under every preset).
  void visit(Conv2dLayer& l) override {
    const bool flip = convert_ && l.op_params().flip != layer_as<Conv2dLayer>(*ld_)->op_params().flip;
    copy_params(l, flip ? Rewrite::rotate : Rewrite::none);
  }
  void visit(DenseLayer& l) override {
    copy_params(l, pending_flatten_ ? Rewrite::permute_columns : Rewrite::none);
    pending_flatten_ = nullptr;
  }
  // Running mean and variance carry over (buffers 0 and 1 of a BatchNorm); the zero-debias
  // state of TF-style averaging is training state and starts afresh in the destination.
  void visit(BatchNormLayer& l) override {
    copy_params(l, Rewrite::none);
    check(src_.policy.bn_running_var == dst_.policy.bn_running_var ||
              (src_.policy.bn_running_var != BnRunningVar::lasagne_inv_std &&
               dst_.policy.bn_running_var != BnRunningVar::lasagne_inv_std),
          "convert: running inverse-std (lasagne_inv_std) and running variance are not interchangeable yet");
    auto bs = l.buffers(), bd = ld_->buffers();
    for (std::size_t j = 0; j < 2; ++j) bd[j]->value = bs[j]->value.to(dst_.dtype());
  }
  // Recurrent layers: the canonical layout already absorbs gate order and packing, so raw and
  // converted transfers agree; only the bias count can differ (two summed into one, or the
  // second zeroed), which RnnLayer's torch-layout setter does, and the LSTM peepholes (zero
  // in a destination with them when the source has none; refused the other way).
  void visit(RnnLayer& l) override {
    auto* rd = layer_as<RnnLayer>(*ld_);
    rd->set_torch_weights(l.torch_weights());
    rd->set_peephole_weights(l.peephole_weights());
  }
  // A flatten whose order changes: the next dense layer's input columns absorb it. The two layers'
  // own orders: the Policy's flatten_order for the zoo, what the file states for an imported graph
  // (a Keras file's (h,w,c) under every preset).
  void visit(FlattenLayer& l) override {
    copy_params(l, Rewrite::none);
    const FlattenOrder to = layer_as<FlattenLayer>(*ld_)->order();
    if (convert_ && l.order() != to && l.input_shape().size() == 3) {
      pending_flatten_ = &l.input_shape();
      flatten_from_ = l.order();
      flatten_to_ = to;
    }
  }
  // A residual block: its main path and its shortcut's layers (option B's 1x1 conv and
  // BatchNorm), each converted by its own kind, at paths "<i>.main.<j>" / "<i>.shortcut.<j>".
  void visit(ResidualLayer& l) override {
    auto* rd = layer_as<ResidualLayer>(*ld_);
    check(rd != nullptr && (l.projection() != nullptr) == (rd->projection() != nullptr), "convert: layer ", path_,
          " (residual) has another shortcut in the destination");
    transfer_seq(l.main(), rd->main(), path_ + ".main.");
    if (l.projection()) transfer_seq(*l.projection(), *rd->projection(), path_ + ".shortcut.");
  }
  // A graph: node by node (the same graph spec built under both policies), its layers each by
  // their kind at paths "<i>.<node>", its constants as they are.
  void visit(GraphLayer& l) override {
    auto* gd = layer_as<GraphLayer>(*ld_);
    check(gd != nullptr && gd->num_nodes() == l.num_nodes(), "convert: layer ", path_,
          " (graph) has another number of nodes in the destination");
    const std::string outer = path_;
    Layer* outer_ld = ld_;
    for (std::size_t j = 0; j < l.num_nodes(); ++j) {
      GraphNode &ns = l.node(j), &nd = gd->node(j);
      check(ns.op == nd.op && (ns.layer != nullptr) == (nd.layer != nullptr), "convert: graph node '", ns.name,
            "' differs in the destination");
      if (ns.layer) transfer(outer + "." + ns.name, *ns.layer, *nd.layer);
    }
    path_ = outer;
    ld_ = outer_ld;
    // the constants (the layers' own buffers went with them above: BatchNorm's differ in number
    // between presets, TF's zero-debias state)
    auto constants = [](GraphLayer& g) {
      std::vector<Param*> out;
      for (Param* b : g.buffers())
        if (b->name == "value") out.push_back(b);
      return out;
    };
    const std::vector<Param*> cs = constants(l), cd = constants(*gd);
    check(cs.size() == cd.size(), "convert: layer ", path_, " (graph) has ", cs.size(), " constants in the source but ",
          cd.size(), " in the destination");
    for (std::size_t j = 0; j < cs.size(); ++j) cd[j]->value = cs[j]->value.to(dst_.dtype());
  }
  void visit(Pool2dLayer& l) override { copy_params(l, Rewrite::none); }
  void visit(ActivationLayer& l) override { copy_params(l, Rewrite::none); }
  void visit(DropoutLayer& l) override { copy_params(l, Rewrite::none); }
  void visit(GlobalAvgPoolLayer& l) override { copy_params(l, Rewrite::none); }
  void visit(EmbeddingLayer& l) override { copy_params(l, Rewrite::none); }
  void visit(ExternalLayer& l) override {
    fail("convert: layer ", path_, " (", l.kind(), ") is an int8 layer: re-parameterise the fp32 model, then quantize it");
  }

  static Support support(Kind<Conv2dLayer>) { return Support::all("kernels rotated 180 degrees between flipping and non-flipping presets"); }
  static Support support(Kind<DenseLayer>) { return Support::all("input columns permuted after a flatten whose order changes"); }
  static Support support(Kind<BatchNormLayer>) { return Support::some("parameters and running mean/variance; not between running variance and running inverse-std"); }
  static Support support(Kind<RnnLayer>) { return Support::all("one canonical gate layout; biases summed or split, peepholes zeroed"); }
  static Support support(Kind<FlattenLayer>) { return Support::all("its order change is absorbed by the next dense layer"); }
  static Support support(Kind<ResidualLayer>) { return Support::all("its layers, each by its kind"); }
  static Support support(Kind<GraphLayer>) { return Support::all("its nodes' layers, each by its kind; constants as they are"); }
  static Support support(Kind<Pool2dLayer>) { return Support::all("no parameters"); }
  static Support support(Kind<ActivationLayer>) { return Support::all("no parameters"); }
  static Support support(Kind<DropoutLayer>) { return Support::all("no parameters"); }
  static Support support(Kind<GlobalAvgPoolLayer>) { return Support::all("no parameters"); }
  static Support support(Kind<EmbeddingLayer>) { return Support::all("table copied as it is"); }
  static Support support(Kind<ExternalLayer>) { return Support::none("int8 layers: re-parameterise the fp32 model, then quantize"); }

 private:
  enum class Rewrite { none, rotate, permute_columns };
  // The layer's parameters, each weight (not bias) rewritten as asked.
  void copy_params(Layer& ls, Rewrite rewrite) {
    auto ps = ls.params(), pd = ld_->params();
    check(ps.size() == pd.size(), "convert: layer ", path_, " (", ls.kind(), ") has ", ps.size(),
          " parameters in the source but ", pd.size(), " in the destination");
    for (std::size_t j = 0; j < ps.size(); ++j) {
      Tensor v = ps[j]->value.to(dst_.dtype());
      if (rewrite == Rewrite::rotate && !ps[j]->is_bias) v = rotate_180(v);
      if (rewrite == Rewrite::permute_columns && !ps[j]->is_bias)
        v = permute_columns(v, *pending_flatten_, flatten_from_, flatten_to_);
      check_shape("convert", pd[j]->name.c_str(), v, pd[j]->value.shape());
      pd[j]->value = v;
    }
  }

  const Model& src_;
  const Model& dst_;
  const bool convert_;
  std::string path_;  // the layer in messages: its index, "<i>.main.<j>" inside a residual block
  Layer* ld_ = nullptr;
  const Shape* pending_flatten_ = nullptr;  // a flatten whose order change the next dense absorbs
  FlattenOrder flatten_from_ = FlattenOrder::chw, flatten_to_ = FlattenOrder::chw;
};

}  // namespace

void transfer_weights(const Model& src, Model& dst, bool convert) {
  check(src.name == dst.name && src.net->size() == dst.net->size(), "convert: cannot transfer weights of ", src.name,
        " into ", dst.name);
  Reparam r(src, dst, convert);
  for (std::size_t i = 0; i < src.net->size(); ++i) r.transfer(std::to_string(i), src.net->layer(i), dst.net->layer(i));
}

SupportColumn reparam_support() { return support_of<Reparam>(); }

Model rebuild_under(const Model& src, const Policy& policy, bool convert) {
  Model m = build_model(src.name, policy, 0, model_args(src));
  transfer_weights(src, m, convert);
  return m;
}

}  // namespace driftlab
