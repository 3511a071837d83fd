// Whole-model benchmarks: one SGD training step and inference under each preset on its own
// backends -- LeNet-1 / LeNet-5 at batch 32/64/128 (inference 1,000 / 10,000), ResNet-20 and
// VGG-16 at batch 128 (inference 1,000), the LSTM and GRU classifiers at batch 128 (inference
// 128 / 1,000) -- on synthetic input of the model's shape (uniform
// pixels, fixed labels: timing does not depend on the values). Counter images/s.
// The result is checked once before timing: the loss is finite and the model's prediction
// under the chosen backends matches the reference backends to float32 tolerance.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cmath>

#include "core/error.h"
#include "engine/random.h"
#include "engine/train/cpu_runner.h"
#include "models/models.h"

namespace {

using namespace driftlab;

Shape input_shape(const std::string& model, int64_t n) {
  for (const ModelInfo& mi : model_table())
    if (mi.name == model) {
      Shape s{n};
      s.insert(s.end(), mi.input_shape.begin(), mi.input_shape.end());
      return s;
    }
  fail("bm_train: unknown model ", model);
}

Tensor synthetic_images(const std::string& model, int64_t n, uint64_t seed) {
  Tensor x(input_shape(model, n), DType::f32);
  Rng rng(RngEngine::mt19937_u24, seed);
  float* d = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) d[i] = rng.uniform_f32();
  return x;
}

std::vector<int32_t> synthetic_labels(int64_t n) {
  std::vector<int32_t> y(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<int32_t>(i % 10);
  return y;
}

const char* kPolicies[] = {"torch", "tensorflow", "theano"};
const char* kModels[] = {"lenet1", "lenet5", "resnet20", "vgg16", "lstm", "gru"};
constexpr int kNumModels = 6;

void train_steps(benchmark::State& state, const std::string& model, const std::string& policy, int64_t batch,
                 bool channel_blocks, bool fuse_bn_relu = true) {
  Model m = build_model(model, Policy::parse(policy), 1);
  ExecContext exec;
  exec.threads = omp_get_max_threads();  // OMP_NUM_THREADS, as the label says
  exec.channel_blocks = channel_blocks;
  exec.fuse_bn_relu = fuse_bn_relu;
  TrainConfig cfg;
  cfg.batch = batch;
  cfg.optim = {0.01, 0.9, false, 0.0};
  CpuRunner trainer(m, cfg, exec);
  Tensor x = synthetic_images(model, batch, 7);
  auto y = synthetic_labels(batch);
  double loss = trainer.train_step(x, y);
  if (!std::isfinite(loss)) state.SkipWithError("non-finite loss");
  for (auto _ : state) benchmark::DoNotOptimize(trainer.train_step(x, y));
  state.counters["images/s"] = benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(model + " " + policy + " threads=" + std::to_string(omp_get_max_threads()) +
                (channel_blocks ? "" : " plain activations") + (fuse_bn_relu ? "" : " batchnorm and relu apart"));
}

// args: model index, policy index, batch
void BM_TrainStep(benchmark::State& state) {
  train_steps(state, kModels[state.range(0)], kPolicies[state.range(1)], state.range(2), true);
}

// ResNet-20 and VGG-16 training steps (torch, batch 128) with the activations kept channel-blocked
// between the layers that take them (blocks:1, the default) and plain around every layer (blocks:0,
// ExecContext::channel_blocks off): what the blocked layout saves, in one run.
void BM_TrainStepLayout(benchmark::State& state) {
  train_steps(state, kModels[state.range(0)], "torch", 128, state.range(1) != 0);
}

// ResNet-20 training steps (torch, batch 128; VGG-16 has no BatchNorm) with each batchnorm -> ReLU pair run as one
// op (fused:1, the default) and as two layers (fused:0, ExecContext::fuse_bn_relu off): the same
// bits, one pass fewer each way.
void BM_TrainStepBnRelu(benchmark::State& state) {
  train_steps(state, kModels[state.range(0)], "torch", 128, true, state.range(1) != 0);
}

void predict(benchmark::State& state, const std::string& model, const std::string& policy, int64_t batch,
             bool fuse_bn_relu) {
  Model m = build_model(model, Policy::parse(policy), 1);
  Model ref = build_model(model, Policy::parse(policy + ",conv_backend=reference,gemm_backend=reference"), 1);
  ExecContext exec;
  exec.threads = omp_get_max_threads();
  exec.fuse_bn_relu = fuse_bn_relu;
  RunContext ctx = RunContext::inference(exec);
  Tensor x = synthetic_images(model, batch, 9);
  {  // check once on a small slice: fast backends agree with the reference kernels
    Tensor xs = synthetic_images(model, 8, 9);
    Tensor a = m.forward(ctx, xs), b = ref.forward(ctx, xs);
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      worst = std::max(worst, std::abs(a.at(i) - b.at(i)));
      scale = std::max(scale, std::abs(b.at(i)));
    }
    // float32 sums of <=4,608 products in another order: far below 1e-4 of the logit scale
    if (worst > 1e-4 * std::max(scale, 1.0)) state.SkipWithError("fast kernels disagree with the reference");
  }
  for (auto _ : state) benchmark::DoNotOptimize(m.forward(ctx, x));
  state.counters["images/s"] = benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(model + " " + policy + " threads=" + std::to_string(exec.threads) +
                 (fuse_bn_relu ? "" : " batchnorm, add and relu apart"));
}

void BM_Predict(benchmark::State& state) {
  predict(state, kModels[state.range(0)], kPolicies[state.range(1)], state.range(2), true);
}

// ResNet-20's prediction of 1,000 (torch) with each batchnorm -> ReLU and each residual block's
// batchnorm -> add -> ReLU as one op (fused:1, the default) and apart (fused:0): the same bits.
void BM_PredictBnRelu(benchmark::State& state) { predict(state, "resnet20", "torch", 1000, state.range(0) != 0); }

void train_args(benchmark::internal::Benchmark* b) {
  for (int m = 0; m < kNumModels; ++m)
    for (int p = 0; p < 3; ++p)
      for (int batch : {32, 64, 128})
        if (m < 2 || batch == 128) b->Args({m, p, batch});
}
void predict_args(benchmark::internal::Benchmark* b) {
  for (int m = 0; m < kNumModels; ++m)
    for (int p = 0; p < 3; ++p)
      for (int batch : {128, 1000, 10000})
        if ((m < 2 && batch != 128) || batch == 1000 || (m >= 4 && batch == 128)) b->Args({m, p, batch});
}

}  // namespace

BENCHMARK(BM_TrainStep)->Apply(train_args)->ArgNames({"model", "policy", "batch"})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainStepLayout)->ArgsProduct({{2, 3}, {0, 1}})->ArgNames({"model", "blocks"})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainStepBnRelu)->ArgsProduct({{2}, {0, 1}})->ArgNames({"model", "fused"})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PredictBnRelu)->Arg(0)->Arg(1)->ArgName("fused")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Predict)->Apply(predict_args)->ArgNames({"model", "policy", "batch"})->UseRealTime()->Unit(benchmark::kMillisecond);
