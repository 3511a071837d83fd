#include "quant/report.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "engine/layers/graph_layer.h"
#include "engine/layers/visit.h"
#include "quant/qlayers.h"

namespace driftlab {
namespace quant {

namespace {

double sqnr(const Tensor& ref, const Tensor& got) {
  check(ref.numel() == got.numel(), "sqnr: ", ref.numel(), " vs ", got.numel(), " values");
  double sig = 0, err = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double a = ref.at(i), d = a - got.at(i);
    sig += a * a;
    err += d * d;
  }
  if (err == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(sig / err);
}

}  // namespace

namespace {

// Runs the int8 network on x, appending each point's integer activation in the PTQ's point order:
// the quantized input, each qconv/qdense output, a residual's inner points then its own output, a
// global average pool's output where it has its own scale (ORT).
Tensor walk(Sequential& seq, Tensor x, RunContext& ctx, std::vector<Tensor>& acts, std::vector<Layer*>* by) {
  for (std::size_t i = 0; i < seq.size(); ++i) {
    Layer& l = seq.layer(i);
    if (auto* r = quant_layer_as<QResidualLayer>(l)) {
      x = r->forward_with(ctx, x, [&](Sequential& main, const Tensor& in) { return walk(main, in, ctx, acts, by); });
      acts.push_back(x);
      if (by) by->push_back(&l);
      continue;
    }
    if (auto* g = layer_as<GraphLayer>(l)) {  // an int8 graph: its points in node order
      const std::vector<Tensor> ys = g->node_outputs(ctx, x);
      for (std::size_t j = 0; j < g->num_nodes(); ++j) {
        Layer* nl = g->node(j).layer.get();
        if (!nl) continue;
        auto* gap = quant_layer_as<QGlobalAvgPoolLayer>(*nl);
        const std::string k = nl->kind();
        if (k == "qconv2d" || k == "qdense" || k == "qadd" || (gap && gap->own_qparams())) {
          acts.push_back(ys[j]);
          if (by) by->push_back(nl);
        }
        if (g->node(j).output == g->output_value()) x = ys[j];
      }
      continue;
    }
    x = l.forward(ctx, x);
    const std::string k = l.kind();
    auto* gap = quant_layer_as<QGlobalAvgPoolLayer>(l);
    if (k == "quantize" || k == "qconv2d" || k == "qdense" || (gap && gap->own_qparams())) {
      acts.push_back(x);
      if (by) by->push_back(&l);
    }
  }
  return x;
}

}  // namespace

std::vector<LayerSqnr> layer_sqnr(Model& fp32, PtqResult& q, const Tensor& x) {
  const std::vector<Tensor> ref = fp32_activations(fp32, q.model.policy, x);
  check(ref.size() == q.points.size(), "sqnr: ", ref.size(), " fp32 activations for ", q.points.size(), " points");
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  std::vector<Tensor> ints = int8_activations(q.model, x);
  check(ints.size() == ref.size(), "sqnr: ", ints.size(), " int8 activations for ", ref.size(), " points");
  std::vector<LayerSqnr> out;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const ActQParams qp = q.points[i].q;
    Tensor deq(ints[i].shape(), DType::f32);
    for (int64_t j = 0; j < ints[i].numel(); ++j)
      deq.data<float>()[j] = dequantize_one(static_cast<int32_t>(ints[i].at(j)), qp.zero_point, qp.scale);
    out.push_back({q.points[i].name, sqnr(ref[i], deq), ref[i].numel()});
  }
  return out;
}

std::vector<LayerSqnr> layer_sqnr_dynamic(Model& fp32, Model& q, const Tensor& x) {
  check(fp32.net->size() == q.net->size(), "sqnr: ", fp32.net->size(), " fp32 layers vs ", q.net->size(),
        " in the dynamic int8 model");
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  Tensor a = x, b = x;
  std::vector<LayerSqnr> out;
  for (std::size_t i = 0; i < fp32.net->size(); ++i) {
    a = fp32.net->layer(i).forward(ctx, a);
    b = q.net->layer(i).forward(ctx, b);
    out.push_back({std::to_string(i) + "." + fp32.net->layer(i).kind(), sqnr(a, b), a.numel()});
  }
  return out;
}

std::vector<Tensor> int8_activations(Model& q, const Tensor& x, std::vector<Layer*>* producers) {
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  std::vector<Tensor> acts;
  walk(*q.net, x, ctx, acts, producers);
  return acts;
}


}  // namespace quant
}  // namespace driftlab
