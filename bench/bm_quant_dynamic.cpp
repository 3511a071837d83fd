// Dynamic-range (weights-only) int8 inference (quant/dynamic.h, kernels/cpu/fast/quant_dynamic_fast.cpp)
// against driftlab's own float32 forward, on the LSTM classifier (models/rnn.cpp: 28 steps of 28
// features, LSTM 128 units, dense 10).
//   LstmDynInt8: quantize_dynamic under torch_qnnpack (per-call affine_double input, per-tensor
//     weights, whole-sequence input projection), quant_backend fast or reference, 1,000 U(0,1)
//     sequences per iteration in batches of 256 (the last one 232) or one of 1,000, at 1 or 2
//     OpenMP threads.
//   LstmFp32: the same 1,000 sequences through the float32 model under the torch preset.
//   QDenseDynamic: the kernel alone at the LSTM's two product shapes: the recurrent step
//     (n=256, in=128, out=512) and the whole-sequence input projection (n=256*28, in=28, out=512),
//     torch_qnnpack's rules, fast vs reference.
// PyTorch 1.13's quantize_dynamic of the same classifier: bench/peers/rnn_dynamic_torch.py.
// Every benchmark checks once before timing: the int8 model's fast logits equal its reference
// logits bit for bit (on 20 sequences), the float32 output is finite, the kernel's fast output
// equals the reference's. Counters: seq/s, MAC/s for the kernel; an iteration of the model benchmarks
// is 1,000 sequences, so their Time column (ms) is ms per 1,000 sequences.
//
// Run e.g.: bm_quant_dynamic --benchmark_filter='Lstm' (the peer under the same OpenMP wait policy:
// OMP_WAIT_POLICY=passive slowed driftlab 20-50% on a 2-vCPU VM, its threads woken through the
// hypervisor between parallel regions: docs/BENCHMARKS.md, 2026-11-28)
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/random.h"
#include "kernels/cpu/registry.h"
#include "models/models.h"
#include "quant/dynamic.h"

namespace driftlab {
namespace {

constexpr int64_t kInputs = 1000;
const KernelBackend kBackends[] = {KernelBackend::fast, KernelBackend::reference};

Tensor sequences(int64_t n, uint64_t seed) {
  Tensor x({n, 28, 28}, DType::f32);
  Rng rng(RngEngine::mt19937_u24, seed);
  float* d = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) d[i] = rng.uniform_f32();
  return x;
}

Tensor rows(const Tensor& x, int64_t first, int64_t n) {
  Shape s = x.shape();
  s[0] = n;
  Tensor t(s, x.dtype());
  const int64_t per = x.numel() / x.dim(0);
  std::memcpy(t.data<float>(), x.data<float>() + first * per, static_cast<std::size_t>(n * per) * sizeof(float));
  return t;
}

std::vector<Tensor> split(const Tensor& x, int64_t batch) {
  std::vector<Tensor> out;
  for (int64_t i = 0; i < x.dim(0); i += batch) out.push_back(rows(x, i, std::min(batch, x.dim(0) - i)));
  return out;
}

struct Threads {  // sets OpenMP's thread count for one benchmark and restores it
  int saved;
  explicit Threads(int t) : saved(omp_get_max_threads()) { omp_set_num_threads(t); }
  ~Threads() { omp_set_num_threads(saved); }
};

void predict_all(const Model& m, RunContext& ctx, const std::vector<Tensor>& batches) {
  for (const Tensor& b : batches) benchmark::DoNotOptimize(m.forward(ctx, b));
}

void set_counters(benchmark::State& state) {
  state.counters["seq/s"] =
      benchmark::Counter(static_cast<double>(kInputs * state.iterations()), benchmark::Counter::kIsRate);
}

// args: backend index, batch, threads
void BM_LstmDynInt8(benchmark::State& state) {
  const KernelBackend backend = kBackends[state.range(0)];
  const int64_t batch = state.range(1);
  const Threads threads(static_cast<int>(state.range(2)));
  Model fp32 = build_model("lstm", Policy::torch(), 3);
  const std::string pol = "torch,quant_scheme=torch_qnnpack";
  Model q = quant::quantize_dynamic(fp32, Policy::parse(pol + ",quant_backend=" + backend_name(backend)));
  ExecContext exec;
  exec.threads = omp_get_max_threads();
  RunContext ctx = RunContext::inference(exec);
  {  // once: fast == reference, bit for bit
    Model r = quant::quantize_dynamic(fp32, Policy::parse(pol + ",quant_backend=reference"));
    const Tensor x = sequences(20, 9);
    const Tensor a = q.forward(ctx, x), b = r.forward(ctx, x);
    if (std::memcmp(a.raw(), b.raw(), a.nbytes()) != 0) {
      state.SkipWithError("int8 logits differ from the reference kernel's");
      return;
    }
  }
  const std::vector<Tensor> batches = split(sequences(kInputs, 3), batch);
  predict_all(q, ctx, batches);  // warm-up
  for (auto _ : state) predict_all(q, ctx, batches);
  set_counters(state);
  state.SetLabel(std::string("torch_qnnpack ") + backend_name(backend) + " threads=" + std::to_string(exec.threads));
}

// args: batch, threads
void BM_LstmFp32(benchmark::State& state) {
  const int64_t batch = state.range(0);
  const Threads threads(static_cast<int>(state.range(1)));
  Model m = build_model("lstm", Policy::torch(), 3);
  ExecContext exec;
  exec.threads = omp_get_max_threads();
  RunContext ctx = RunContext::inference(exec);
  const std::vector<Tensor> batches = split(sequences(kInputs, 3), batch);
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
  set_counters(state);
  state.SetLabel("torch preset threads=" + std::to_string(exec.threads));
}

// args: shape (0: recurrent step, 1: whole-sequence input projection), backend index, threads
void BM_QDenseDynamic(benchmark::State& state) {
  const KernelBackend backend = kBackends[state.range(1)];
  const Threads threads(static_cast<int>(state.range(2)));
  QDenseDynamicParams p = quant::dynamic_params(Policy::parse("torch,quant_scheme=torch_qnnpack"));
  p.n = state.range(0) == 0 ? 256 : 256 * 28, p.in = state.range(0) == 0 ? 128 : 28, p.out = 512;
  p.has_bias = true;
  const KernelRegistry reg = make_cpu_registry();
  const QDenseDynamicKernel& k = reg.qdense_dynamic.select(backend, p, DType::f32);
  Tensor x({p.n, p.in}, DType::f32), w({p.out, p.in}, DType::i8), ws({1}, DType::f32), b({p.out}, DType::f32);
  std::mt19937_64 gen(5);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(gen() % 20001) * 1e-4f - 1.0f;
  for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(gen() & 255);
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = static_cast<float>(gen() % 2001) * 1e-4f - 0.1f;
  ws.data<float>()[0] = 2.3e-3f;
  Tensor y({p.n, p.out}, DType::f32), yr({p.n, p.out}, DType::f32);
  k.forward(p, x, w, ws, &b, y);
  reg.qdense_dynamic.reference().forward(p, x, w, ws, &b, yr);
  if (std::memcmp(y.raw(), yr.raw(), y.nbytes()) != 0) {
    state.SkipWithError("differs from the reference");
    return;
  }
  for (auto _ : state) {
    k.forward(p, x, w, ws, &b, y);
    benchmark::ClobberMemory();
  }
  state.counters["MAC/s"] = benchmark::Counter(static_cast<double>(p.n * p.in * p.out * state.iterations()),
                                               benchmark::Counter::kIsRate);
  state.SetLabel(std::string(state.range(0) == 0 ? "lstm_step" : "lstm_input_proj") + " " + k.name);
}

void int8_args(benchmark::internal::Benchmark* b) {
  for (int64_t be = 0; be < 2; ++be)
    for (int64_t batch : {256, 1000})
      for (int t = 1; t <= std::min(2, omp_get_max_threads()); ++t) b->Args({be, batch, t});
}
void fp32_args(benchmark::internal::Benchmark* b) {
  for (int64_t batch : {256, 1000})
    for (int t = 1; t <= std::min(2, omp_get_max_threads()); ++t) b->Args({batch, t});
}
void kernel_args(benchmark::internal::Benchmark* b) {
  for (int64_t shape : {0, 1})
    for (int64_t be = 0; be < 2; ++be)
      for (int t = 1; t <= std::min(2, omp_get_max_threads()); ++t) b->Args({shape, be, t});
}

BENCHMARK(BM_LstmDynInt8)->Apply(int8_args)->ArgNames({"backend", "batch", "threads"})->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LstmFp32)->Apply(fp32_args)->ArgNames({"batch", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_QDenseDynamic)->Apply(kernel_args)->ArgNames({"shape", "backend", "threads"})->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace driftlab
