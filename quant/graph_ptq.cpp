#include "quant/graph_ptq.h"

#include <algorithm>

#include "core/error.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/dropout_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/global_avg_pool_layer.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/visit.h"
#include "kernels/cpu/ref/ref.h"
#include "quant/qlayers.h"

namespace driftlab {
namespace quant {

enum class GUnitKind { conv, dense, maxpool, gap, flatten, reshape, relu, add, identity };

// A piece of the fp32 graph that becomes one int8 node (or none: identity).
struct GUnit {
  GUnitKind kind = GUnitKind::identity;
  std::size_t node = 0;                  // the fp32 node it starts at
  std::size_t last = 0;                  // the last fp32 node it covers (a folded BatchNorm, a fused ReLU)
  std::vector<int> inputs;               // fp32 values it reads
  int output = -1;                       // the fp32 value it writes (the last covered node's)
  int relu_node = -1;                    // a fused ReLU's node
  std::unique_ptr<Conv2dLayer> folded;   // conv + BatchNorm folded (fp32)
  int observer = -1;
  std::string name;
};

struct GraphPlan {
  std::vector<GUnit> units;
};

namespace {

bool is_relu_layer(Layer& l) {
  auto* a = layer_as<ActivationLayer>(l);
  return a && a->op_params().kind == ActKind::relu;
}

class Planner {
 public:
  Planner(GraphLayer& g, bool relu_fused, const Policy& policy, const std::string& prefix)
      : g_(g), relu_fused_(relu_fused), policy_(policy), prefix_(prefix), readers_(g.num_values()),
        covered_(g.num_nodes(), false) {
    for (std::size_t i = 0; i < g.num_nodes(); ++i)
      for (int v : g.node(i).inputs) readers_[static_cast<std::size_t>(v)].push_back(i);
    readers_[static_cast<std::size_t>(g.output_value())].push_back(g.num_nodes());  // the graph's output reads it
  }

  std::shared_ptr<GraphPlan> plan() {
    auto p = std::make_shared<GraphPlan>();
    for (std::size_t i = 0; i < g_.num_nodes(); ++i) {
      if (covered_[i]) continue;
      GraphNode& n = g_.node(i);
      where_ = "quantize: graph node '" + n.name + "' (" + (n.layer ? n.layer->kind() : graph_op_name(n.op)) + ")";
      GUnit u;
      u.node = u.last = i;
      u.inputs = n.inputs;
      u.output = n.output;
      switch (n.op) {
        case GraphOp::layer: layer_unit(n, u); break;
        case GraphOp::add:
          for (int v : n.inputs)
            check(!g_.is_constant(v), where_, " adds the constant '", g_.value_name(v),
                  "': an int8 add of a constant has no form yet");
          check(g_.value_shape(n.inputs[0]) == g_.value_shape(n.inputs[1]), where_, " broadcasts ",
                shape_str(g_.value_shape(n.inputs[0])), " against ", shape_str(g_.value_shape(n.inputs[1])),
                " (the int8 add takes equal shapes)");
          u.kind = GUnitKind::add;
          take_relu(u);
          break;
        case GraphOp::reshape: u.kind = GUnitKind::reshape; break;
        case GraphOp::sub:
        case GraphOp::mul:
        case GraphOp::concat:
        case GraphOp::multi: refuse(); break;
      }
      u.name = prefix_ + g_.node(u.last).name;
      p->units.push_back(std::move(u));
    }
    return p;
  }

 private:
  void layer_unit(GraphNode& n, GUnit& u) {
    Layer& l = *n.layer;
    if (auto* c = layer_as<Conv2dLayer>(l)) {
      u.kind = GUnitKind::conv;
      const std::size_t j = only_reader(u.output);
      if (j < g_.num_nodes() && g_.node(j).op == GraphOp::layer)
        if (auto* bn = layer_as<BatchNormLayer>(*g_.node(j).layer)) {
          u.folded = fold_conv_bn(*c, *bn, g_.value_shape(n.inputs[0]), policy_, where_);
          cover(u, j);
        }
      take_relu(u);
    } else if (layer_as<DenseLayer>(l)) {
      u.kind = GUnitKind::dense;
      take_relu(u);
    } else if (auto* p = layer_as<Pool2dLayer>(l)) {
      check(p->pool_kind() == PoolKind::max, where_, ": average pooling with a window has no int8 form yet");
      u.kind = GUnitKind::maxpool;
    } else if (layer_as<GlobalAvgPoolLayer>(l)) {
      u.kind = GUnitKind::gap;
    } else if (layer_as<FlattenLayer>(l)) {
      u.kind = GUnitKind::flatten;
    } else if (layer_as<DropoutLayer>(l)) {
      u.kind = GUnitKind::identity;  // inference: no mask
    } else if (is_relu_layer(l)) {
      u.kind = GUnitKind::relu;
    } else if (auto* a = layer_as<ActivationLayer>(l); a && a->op_params().kind == ActKind::clip) {
      fail(where_, ": clip (ReLU6) has no int8 form yet; PyTorch's quantizable torchvision models replace ReLU6 "
                   "by ReLU before fusing (torchvision/models/quantization/utils.py _replace_relu): export that model");
    } else if (layer_as<BatchNormLayer>(l)) {
      fail(where_, ": a BatchNorm not alone reading a convolution's output cannot be folded");
    } else {
      refuse();
    }
  }

  // The one node reading value v, or num_nodes() when none or several (or the graph's output) do.
  std::size_t only_reader(int v) const {
    const auto& r = readers_[static_cast<std::size_t>(v)];
    return r.size() == 1 ? r[0] : g_.num_nodes();
  }
  void cover(GUnit& u, std::size_t j) {
    covered_[j] = true;
    u.last = j;
    u.output = g_.node(j).output;
  }
  void take_relu(GUnit& u) {
    if (!relu_fused_) return;
    const std::size_t j = only_reader(u.output);
    if (j < g_.num_nodes() && g_.node(j).op == GraphOp::layer && is_relu_layer(*g_.node(j).layer)) {
      u.relu_node = static_cast<int>(j);
      cover(u, j);
    }
  }
  [[noreturn]] void refuse() const {
    fail(where_, " has no int8 form yet (supported in graphs: conv2d, grouped too (+ the batchnorm alone reading "
                 "it), dense, relu, max pooling, global average pooling, flatten, reshape, dropout, add of two "
                 "values of one shape)");
  }

  GraphLayer& g_;
  const bool relu_fused_;
  const Policy& policy_;
  const std::string prefix_;
  std::vector<std::vector<std::size_t>> readers_;
  std::vector<bool> covered_;
  std::string where_;
};

}  // namespace

std::shared_ptr<GraphPlan> plan_graph(GraphLayer& g, bool relu_fused, const Policy& fp32_policy,
                                      const std::string& prefix) {
  return Planner(g, relu_fused, fp32_policy, prefix).plan();
}

void number_graph_points(GraphPlan& plan, std::vector<std::string>& names, bool gap_point) {
  for (GUnit& u : plan.units)
    if (u.kind == GUnitKind::conv || u.kind == GUnitKind::dense || u.kind == GUnitKind::add ||
        (u.kind == GUnitKind::gap && gap_point)) {
      u.observer = static_cast<int>(names.size());
      names.push_back(u.name);
    }
}

Tensor run_graph_fp32(GraphPlan& plan, GraphLayer& g, const Tensor& x, RunContext& ctx,
                      std::vector<std::unique_ptr<Observer>>& obs) {
  std::vector<Tensor> vals(g.num_values());
  vals[0] = x;
  auto in = [&](const GUnit& u, std::size_t k) -> const Tensor& {
    const Tensor& t = vals[static_cast<std::size_t>(u.inputs.at(k))];
    check(t.defined(), "quantize: graph value '", g.value_name(u.inputs.at(k)), "' read before it is computed");
    return t;
  };
  for (GUnit& u : plan.units) {
    GraphNode& n = g.node(u.node);
    Tensor y;
    switch (u.kind) {
      case GUnitKind::add: {
        const Tensor &a = in(u, 0), &b = in(u, 1);
        y = Tensor::empty(a.shape(), a.dtype());
        binary_forward_ref(BinaryOp::add, a, b, y);  // the fp32 graph's add (one rounding per element)
        break;
      }
      case GUnitKind::reshape: {
        Shape s = g.value_shape(u.output);
        s.insert(s.begin(), in(u, 0).dim(0));
        y = in(u, 0).reshape(s);
        break;
      }
      case GUnitKind::conv:
        y = u.folded ? u.folded->forward(ctx, in(u, 0)) : n.layer->forward(ctx, in(u, 0));
        break;
      default:
        y = n.layer->forward(ctx, in(u, 0));
        break;
    }
    if (u.relu_node >= 0) y = g.node(static_cast<std::size_t>(u.relu_node)).layer->forward(ctx, y);
    if (u.observer >= 0) obs[static_cast<std::size_t>(u.observer)]->observe(y);
    vals[static_cast<std::size_t>(u.output)] = y;
  }
  const Tensor& out = vals[static_cast<std::size_t>(g.output_value())];
  check(out.defined(), "quantize: the graph's output '", g.value_name(g.output_value()), "' is never computed");
  return out;
}

std::unique_ptr<GraphLayer> convert_graph(GraphPlan& plan, GraphLayer& g, const QuantScheme& s, const Policy& policy,
                                          const std::vector<ActQParams>& q, ActQParams& cur) {
  auto g8 = std::make_unique<GraphLayer>(g.value_name(0), g.value_shape(0), DType::f32);
  std::vector<int> v8(g.num_values(), -1);  // fp32 value -> int8 graph value
  std::vector<ActQParams> qp(g.num_values());
  v8[0] = 0;
  qp[0] = cur;
  for (GUnit& u : plan.units) {
    GraphNode& n = g.node(u.node);
    const std::string where = "quantize: " + u.name;
    const int x = u.inputs.empty() ? -1 : u.inputs[0];
    const int x8 = x < 0 ? -1 : v8[static_cast<std::size_t>(x)];
    const std::string& out_name = g.value_name(u.output);
    const std::string& node_name = g.node(u.last).name;
    const Shape in_shape = x < 0 ? Shape{} : g.value_shape(x);
    ActQParams out = x < 0 ? ActQParams{} : qp[static_cast<std::size_t>(x)];
    int y8 = -1;
    switch (u.kind) {
      case GUnitKind::conv:
      case GUnitKind::dense: {
        QLinearSpec spec;
        spec.in = out;
        spec.out = q.at(static_cast<std::size_t>(u.observer));
        spec.relu = u.relu_node >= 0;
        Layer& src = u.folded ? static_cast<Layer&>(*u.folded) : *n.layer;
        Tensor w = param_named(src, "weight")->value;
        Param* b = param_named(src, "bias");
        std::unique_ptr<Layer> l;
        if (u.kind == GUnitKind::conv) {
          Conv2dParams geo = layer_as<Conv2dLayer>(src)->op_params();
          if (geo.flip) {
            w = unflip(w);
            geo.flip = false;
          }
          spec.weight = quantize_weight(s, w, s.conv_per_channel, where);
          spec.bias = quantize_bias(s, spec.in.scale, spec.weight, b ? b->value : Tensor(), where);
          l = std::make_unique<QConv2dLayer>(geo, s, spec, policy.quant_backend);
        } else {
          spec.weight = quantize_weight(s, w, s.dense_per_channel, where);
          spec.bias = quantize_bias(s, spec.in.scale, spec.weight, b ? b->value : Tensor(), where);
          l = std::make_unique<QDenseLayer>(w.dim(1), w.dim(0), s, spec, policy.quant_backend);
        }
        y8 = g8->add_layer(node_name, std::move(l), x8, out_name);
        out = spec.out;
        break;
      }
      case GUnitKind::maxpool:
        y8 = g8->add_layer(node_name,
                           std::make_unique<QMaxPool2dLayer>(layer_as<Pool2dLayer>(*n.layer)->op_params(), s.act_dtype,
                                                             policy.quant_backend),
                           x8, out_name);
        break;
      case GUnitKind::gap:
        if (s.avg_pool_own_qparams()) {
          const ActQParams o = q.at(static_cast<std::size_t>(u.observer));
          y8 = g8->add_layer(node_name,
                             std::make_unique<QGlobalAvgPoolLayer>(in_shape, s.act_dtype, out, o, s.avg_pool_rule,
                                                                   policy.quant_backend),
                             x8, out_name);
          out = o;
        } else {
          y8 = g8->add_layer(node_name,
                             std::make_unique<QGlobalAvgPoolLayer>(in_shape, s.act_dtype, out.zero_point, policy.quant_backend),
                             x8, out_name);
        }
        break;
      case GUnitKind::flatten: {
        Policy fp = policy;
        fp.flatten_order = layer_as<FlattenLayer>(*n.layer)->order();  // the node's own order (a file states it)
        y8 = g8->add_layer(node_name, std::make_unique<FlattenLayer>(in_shape, fp), x8, out_name);
        break;
      }
      case GUnitKind::reshape:
        y8 = g8->add_reshape(node_name, x8, g.value_shape(u.output), out_name);
        break;
      case GUnitKind::relu:  // quant_relu=separate: max(q, zp), the input's scale and zero point kept
        y8 = g8->add_layer(node_name, std::make_unique<QReluLayer>(in_shape, s.act_dtype, out.zero_point), x8, out_name);
        break;
      case GUnitKind::identity:
        y8 = x8;
        break;
      case GUnitKind::add: {
        QAddSpec as;
        as.a = qp[static_cast<std::size_t>(u.inputs[0])];
        as.b = qp[static_cast<std::size_t>(u.inputs[1])];
        as.out = q.at(static_cast<std::size_t>(u.observer));
        as.relu = u.relu_node >= 0;
        y8 = g8->add_multi(node_name, std::make_unique<QAddLayer>(in_shape, s, as, policy.quant_backend),
                           {x8, v8[static_cast<std::size_t>(u.inputs[1])]}, out_name);
        out = as.out;
        break;
      }
    }
    v8[static_cast<std::size_t>(u.output)] = y8;
    qp[static_cast<std::size_t>(u.output)] = out;
  }
  const int o8 = v8[static_cast<std::size_t>(g.output_value())];
  check(o8 > 0, "quantize: the graph's output '", g.value_name(g.output_value()), "' is its input or never computed");
  g8->set_output(o8);
  cur = qp[static_cast<std::size_t>(g.output_value())];
  return g8;
}

}  // namespace quant
}  // namespace driftlab
