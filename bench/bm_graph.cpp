// A graph model's prediction of 1,000 inputs (an imported model: `driftlab import X.onnx --as graph
// --out X.dlm`, named by the environment variable DRIFTLAB_BM_GRAPH), with each of the prediction's
// mechanisms added in turn, so that what each one buys is measured on the machine at hand:
//   BM_GraphPredict/0/0   every value plain, every node apart, the whole batch at once
//   BM_GraphPredict/1/0   values channel-blocked between the nodes that take blocks
//   BM_GraphPredict/2/0   and batchnorm + ReLU (+ add) run as one op, and a depthwise convolution
//                         with the batchnorm + ReLU / clip before and after it (forward_fused)
//   BM_GraphPredict/4/0   mode 2 without the depthwise convolutions' fused batchnorms
//                         (fuse_conv_channel_ops off)
//   BM_GraphPredict/2/P   and the nodes before the first dense one in pieces of P inputs
//   BM_GraphPredict/3/0   what `driftlab predict` runs: mode 2 in pieces where the rule says so
// Every variant's logits are checked once against mode 0's, bit for bit, before timing.
// Example (bench/compare's graph part exports the ONNX files):
//   DRIFTLAB_BM_GRAPH=/tmp/mobilenet_v2.dlm build/bm_graph --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "core/error.h"
#include "engine/layers/graph_layer.h"
#include "engine/layers/visit.h"
#include "engine/random.h"
#include "engine/train/predict_pieces.h"
#include "models/model_file.h"

namespace {

using namespace driftlab;

constexpr int64_t kInputs = 1000;

struct Loaded {
  std::unique_ptr<LoadedModel> m;
  Tensor x, reference;  // the inputs; mode 0's logits
  std::string error;
};

Tensor predict(Sequential& net, const Tensor& x, int mode, int64_t piece) {
  ExecContext exec;
  exec.channel_blocks = mode >= 1;
  exec.fuse_bn_relu = mode >= 2;
  exec.fuse_conv_channel_ops = mode != 4;
  RunContext ctx = RunContext::inference(exec);
  if (mode == 3) return predict_in_pieces(ctx, net, x, predict_pieces(net, x.dim(0), x.dtype()));
  if (piece == 0) return net.forward(ctx, x);
  PredictPieces rule;  // the graph's nodes before its first dense one, in pieces of `piece`
  auto* g = layer_as<GraphLayer>(net.layer(0));
  check(g, "bm_graph: the model is no graph model");
  while (rule.graph_nodes < g->num_nodes() &&
         (g->node(rule.graph_nodes).op != GraphOp::layer || g->node(rule.graph_nodes).layer->kind() != "dense"))
    ++rule.graph_nodes;
  rule.piece = piece;
  return predict_in_pieces(ctx, net, x, rule);
}

Loaded& loaded() {
  static Loaded l = [] {
    Loaded r;
    const char* path = std::getenv("DRIFTLAB_BM_GRAPH");
    if (!path) {
      r.error = "set DRIFTLAB_BM_GRAPH to a graph model's .dlm file";
      return r;
    }
    r.m = std::make_unique<LoadedModel>(load_model(path));
    Shape s{kInputs};
    for (int64_t d : r.m->model.input_shape) s.push_back(d);
    r.x = Tensor(s, DType::f32);
    Rng rng(RngEngine::mt19937_u24, 1);
    float* d = r.x.data<float>();
    for (int64_t i = 0; i < r.x.numel(); ++i) d[i] = rng.uniform_f32();
    r.reference = predict(*r.m->model.net, r.x, 0, 0);
    return r;
  }();
  return l;
}

void BM_GraphPredict(benchmark::State& state) {
  Loaded& l = loaded();
  if (!l.error.empty()) {
    state.SkipWithError(l.error.c_str());
    return;
  }
  const int mode = static_cast<int>(state.range(0));
  const int64_t piece = state.range(1);
  const Tensor y = predict(*l.m->model.net, l.x, mode, piece);
  if (y.nbytes() != l.reference.nbytes() || std::memcmp(y.raw(), l.reference.raw(), y.nbytes()) != 0) {
    state.SkipWithError("logits differ from mode 0's");
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(predict(*l.m->model.net, l.x, mode, piece));
  state.counters["images/s"] = benchmark::Counter(static_cast<double>(kInputs), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GraphPredict)
    ->Args({0, 0})
    ->Args({1, 0})
    ->Args({2, 0})
    ->Args({2, 32})
    ->Args({2, 64})
    ->Args({2, 128})
    ->Args({2, 256})
    ->Args({3, 0})
    ->Args({4, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
