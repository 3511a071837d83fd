#include "quant/report.h"

#include <cmath>
#include <limits>

#include "engine/core/error.h"
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

std::vector<LayerSqnr> layer_sqnr(Model& fp32, const PtqResult& q, const Tensor& x) {
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  // fp32 activations at the observed points
  std::vector<Tensor> ref{x};
  Tensor a = x;
  for (std::size_t i = 0; i < fp32.net->size(); ++i) {
    a = fp32.net->layer(i).forward(ctx, a);
    const std::string name = std::to_string(i) + "." + fp32.net->layer(i).kind();
    for (const ObservedPoint& p : q.points)
      if (p.name == name) ref.push_back(a);
  }
  check(ref.size() == q.points.size(), "sqnr: ", ref.size(), " fp32 activations for ", q.points.size(), " points");
  // int8 activations: the quantized input, then each qconv/qdense output, dequantized
  std::vector<Tensor> got;
  Tensor b = x;
  for (std::size_t i = 0; i < q.model.net->size(); ++i) {
    Layer& l = q.model.net->layer(i);
    b = l.forward(ctx, b);
    const std::string k = l.kind();
    if (k != "quantize" && k != "qconv2d" && k != "qdense") continue;
    const std::size_t point = got.size();
    const ActQParams qp = q.points.at(point).q;
    Tensor deq(b.shape(), DType::f32);
    for (int64_t j = 0; j < b.numel(); ++j)
      deq.data<float>()[j] = dequantize_one(static_cast<int32_t>(b.at(j)), qp.zero_point, qp.scale);
    got.push_back(deq);
  }
  check(got.size() == ref.size(), "sqnr: ", got.size(), " int8 activations for ", ref.size(), " points");
  std::vector<LayerSqnr> out;
  for (std::size_t i = 0; i < ref.size(); ++i) out.push_back({q.points[i].name, sqnr(ref[i], got[i]), ref[i].numel()});
  return out;
}

std::vector<int32_t> predictions(const Tensor& logits) {
  const int64_t n = logits.dim(0), k = logits.dim(1);
  std::vector<int32_t> p(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j)
      if (logits.at(i * k + j) > logits.at(i * k + best)) best = j;
    p[static_cast<std::size_t>(i)] = static_cast<int32_t>(best);
  }
  return p;
}

}  // namespace quant
}  // namespace driftlab
