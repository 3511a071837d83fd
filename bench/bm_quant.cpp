// int8 inference (quant/, kernels/cpu/quant_fast.cpp) against driftlab's own float32 forward.
//   Lenet5Int8: LeNet-5 quantized by the PTQ driver (calibrated on 64 synthetic images) under
//     torch_qnnpack or torch_onednn, quant_backend fast or reference, 1,000 inputs per iteration
//     as one batch of 1,000 or ten batches of 100, at 1 or 2 OpenMP threads.
//   Lenet5Fp32: the same 1,000 inputs through the float32 LeNet-5 under the torch preset (its
//     default kernels), the baseline of issue 16's "int8 at least 2x fp32".
//   QConv2d: LeNet-5's two convolutions alone (uint8, per-tensor float requantization, as
//     torch_qnnpack resolves them), fast vs reference, 100 images per call.
// Every benchmark checks once before timing: the int8 model's fast logits equal its reference
// logits bit for bit, the float32 model's output is finite, each fast conv equals the reference.
// Counters: img/s (and MAC/s for the convolutions). ResNet-20 int8 is not here: the PTQ driver
// cannot convert BatchNorm yet (issue 16's next step).
//
// Run e.g.: bm_quant --benchmark_filter='Lenet5' (OMP_WAIT_POLICY=passive on a shared machine)
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <string>

#include "engine/random.h"
#include "kernels/cpu/registry.h"
#include "models/models.h"
#include "quant/ptq.h"

namespace driftlab {
namespace {

constexpr int64_t kInputs = 1000;
const char* kSchemes[] = {"torch_qnnpack", "torch_onednn"};
const KernelBackend kBackends[] = {KernelBackend::fast, KernelBackend::reference};

Tensor synthetic_images(int64_t n, uint64_t seed) {
  Tensor x({n, 1, 28, 28}, DType::f32);
  Rng rng(RngEngine::mt19937_u24, seed);
  float* d = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) d[i] = rng.uniform_f32();
  return x;
}

// The first `n` rows of x.
Tensor rows(const Tensor& x, int64_t first, int64_t n) {
  Shape s = x.shape();
  s[0] = n;
  Tensor t(s, x.dtype());
  const int64_t per = x.numel() / x.dim(0);
  std::memcpy(t.data<float>(), x.data<float>() + first * per, static_cast<std::size_t>(n * per) * sizeof(float));
  return t;
}

struct Threads {  // sets OpenMP's thread count for one benchmark and restores it
  int saved;
  explicit Threads(int t) : saved(omp_get_max_threads()) { omp_set_num_threads(t); }
  ~Threads() { omp_set_num_threads(saved); }
};

// 1,000 inputs in batches of `batch` through m.
void predict_all(const Model& m, RunContext& ctx, const std::vector<Tensor>& batches) {
  for (const Tensor& b : batches) benchmark::DoNotOptimize(m.forward(ctx, b));
}

std::vector<Tensor> split(const Tensor& x, int64_t batch) {
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.dim(0); i += batch) out.push_back(rows(x, i, std::min(batch, x.dim(0) - i)));
  return out;
}

// args: scheme index, backend index, batch, threads
void BM_Lenet5Int8(benchmark::State& state) {
  const std::string scheme = kSchemes[state.range(0)];
  const KernelBackend backend = kBackends[state.range(1)];
  const int64_t batch = state.range(2);
  const Threads threads(static_cast<int>(state.range(3)));
  Model fp32 = build_model("lenet5", Policy::torch(), 1);
  const std::string pol = "torch,quant_scheme=" + scheme + ",quant_backend=" + backend_name(backend);
  quant::PtqResult q = quant::quantize_model(fp32, Policy::parse(pol), synthetic_images(64, 7));
  ExecContext exec;
  exec.threads = omp_get_max_threads();
  RunContext ctx = RunContext::inference(exec);
  {  // once: fast == reference, bit for bit, on 50 images
    quant::PtqResult r = quant::quantize_model(fp32, Policy::parse("torch,quant_scheme=" + scheme +
                                                                   ",quant_backend=reference"),
                                               synthetic_images(64, 7));
    const Tensor x = synthetic_images(50, 9);
    const Tensor a = q.model.forward(ctx, x), b = r.model.forward(ctx, x);
    if (std::memcmp(a.raw(), b.raw(), a.nbytes()) != 0) {
      state.SkipWithError("int8 logits differ from the reference kernels'");
      return;
    }
  }
  const std::vector<Tensor> batches = split(synthetic_images(kInputs, 3), batch);
  predict_all(q.model, ctx, batches);  // warm-up
  for (auto _ : state) predict_all(q.model, ctx, batches);
  state.counters["img/s"] = benchmark::Counter(static_cast<double>(kInputs * state.iterations()),
                                               benchmark::Counter::kIsRate);
  state.SetLabel(scheme + " " + backend_name(backend) + " threads=" + std::to_string(exec.threads));
}

// args: batch, threads
void BM_Lenet5Fp32(benchmark::State& state) {
  const int64_t batch = state.range(0);
  const Threads threads(static_cast<int>(state.range(1)));
  Model m = build_model("lenet5", Policy::torch(), 1);
  ExecContext exec;
  exec.threads = omp_get_max_threads();
  RunContext ctx = RunContext::inference(exec);
  const std::vector<Tensor> batches = split(synthetic_images(kInputs, 3), batch);
  {
    const Tensor y = m.forward(ctx, batches[0]);
    for (int64_t i = 0; i < y.numel(); ++i)
      if (!std::isfinite(y.at(i))) {
        state.SkipWithError("non-finite fp32 logits");
        return;
      }
  }
  predict_all(m, ctx, batches);  // warm-up (oneDNN builds its primitives here)
  for (auto _ : state) predict_all(m, ctx, batches);
  state.counters["img/s"] = benchmark::Counter(static_cast<double>(kInputs * state.iterations()),
                                               benchmark::Counter::kIsRate);
  state.SetLabel("torch preset threads=" + std::to_string(exec.threads));
}

// LeNet-5's convolutions as torch_qnnpack resolves them: uint8 in and out, per-tensor float
// requantization with round-half-even, ReLU fused, int32 bias.
QConv2dParams lenet5_conv(int layer, int64_t n) {
  QConv2dParams p;
  p.g.n = n;
  p.g.c = layer == 1 ? 1 : 6, p.g.h = p.g.w = layer == 1 ? 28 : 12, p.g.k = layer == 1 ? 6 : 16, p.g.r = p.g.s = 5;
  p.x_dtype = p.y_dtype = DType::u8;
  p.x_zero_point = layer == 1 ? 0 : 0;  // after a fused ReLU (and the [0,1] input) the zero point is 0
  p.has_bias = true;
  p.rq.rule = RequantRule::float_multiply;
  p.rq.round = RoundRule::half_even;
  p.rq.zero_point = 0, p.rq.lo = 0, p.rq.hi = 255;
  RequantChannel ch;
  ch.scale = layer == 1 ? 1.3e-4f : 2.1e-4f;
  p.rq.channels = {ch};
  return p;
}

struct ConvData {
  Tensor x, w, b, y;
  explicit ConvData(const QConv2dParams& p) {
    Rng rng(RngEngine::mt19937_u24, 5);
    x = Tensor(p.g.x_shape(), DType::u8), w = Tensor(p.g.w_shape(), DType::i8), b = Tensor({p.g.k}, DType::i32);
    y = Tensor(p.g.y_shape(), DType::u8);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<uint8_t>()[i] = static_cast<uint8_t>(rng.next_u32() & 255);
    for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(rng.next_u32() & 255);
    for (int64_t i = 0; i < b.numel(); ++i) b.data<int32_t>()[i] = static_cast<int32_t>(rng.next_u32() % 20001) - 10000;
  }
};

// args: layer (1, 2), backend index, threads
void BM_QConv2d(benchmark::State& state) {
  const int layer = static_cast<int>(state.range(0));
  const KernelBackend backend = kBackends[state.range(1)];
  const Threads threads(static_cast<int>(state.range(2)));
  const QConv2dParams p = lenet5_conv(layer, 100);
  const KernelRegistry reg = make_cpu_registry();
  const QConv2dKernel& k = reg.qconv2d.select(backend, p, DType::u8);
  ConvData d(p);
  {
    ConvData r(p);
    k.forward(p, d.x, d.w, &d.b, d.y);
    reg.qconv2d.reference().forward(p, r.x, r.w, &r.b, r.y);
    if (std::memcmp(d.y.raw(), r.y.raw(), d.y.nbytes()) != 0) {
      state.SkipWithError("differs from the reference");
      return;
    }
  }
  for (auto _ : state) {
    k.forward(p, d.x, d.w, &d.b, d.y);
    benchmark::ClobberMemory();
  }
  const double macs = double(p.g.n * p.g.k * p.g.c * p.g.r * p.g.s * p.g.out_h() * p.g.out_w());
  state.counters["MAC/s"] = benchmark::Counter(macs * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
  state.counters["img/s"] = benchmark::Counter(static_cast<double>(p.g.n * state.iterations()),
                                               benchmark::Counter::kIsRate);
  state.SetLabel(std::string("lenet5_conv") + std::to_string(layer) + " " + k.name);
}

void int8_args(benchmark::internal::Benchmark* b) {
  const int max_threads = std::min(2, omp_get_max_threads());
  for (int s = 0; s < 2; ++s)
    for (int be = 0; be < 2; ++be)
      for (int64_t batch : {1000, 100})
        for (int t = 1; t <= max_threads; ++t)
          if (be == 0 || (batch == 1000 && t == 1)) b->Args({s, be, batch, t});  // reference: one baseline
}
void fp32_args(benchmark::internal::Benchmark* b) {
  for (int64_t batch : {1000, 100})
    for (int t = 1; t <= std::min(2, omp_get_max_threads()); ++t) b->Args({batch, t});
}
void conv_args(benchmark::internal::Benchmark* b) {
  for (int layer : {1, 2})
    for (int be = 0; be < 2; ++be)
      for (int t = 1; t <= std::min(2, omp_get_max_threads()); ++t)
        if (be == 0 || t == 1) b->Args({layer, be, t});
}

BENCHMARK(BM_Lenet5Int8)->Apply(int8_args)->ArgNames({"scheme", "backend", "batch", "threads"})->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Lenet5Fp32)->Apply(fp32_args)->ArgNames({"batch", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_QConv2d)->Apply(conv_args)->ArgNames({"layer", "backend", "threads"})->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace driftlab
