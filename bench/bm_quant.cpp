// int8 inference (quant/, kernels/cpu/fast/quant_fast.cpp) against driftlab's own float32 forward.
//   Lenet5Int8: LeNet-5 quantized by the PTQ driver (calibrated on 64 synthetic images) under
//     torch_qnnpack or torch_onednn, quant_backend fast or reference, 1,000 inputs per iteration
//     as one batch of 1,000 or ten batches of 100, at 1 or 2 OpenMP threads.
//   Lenet5Fp32: the same 1,000 inputs through the float32 LeNet-5 under the torch preset (its
//     default kernels), the baseline of the speed target "int8 at least 2x fp32" (docs/QUANT.md,
//     "Speed").
//   QConv2d: LeNet-5's two convolutions alone (uint8, per-tensor float requantization, as
//     torch_qnnpack resolves them), fast vs reference, 100 images per call.
//   Resnet20Int8 / Resnet20Fp32: the same for ResNet-20 (BatchNorm folded, residual adds, global
//     average pooling) on 1,000 CIFAR-shaped 3x32x32 U(-1,1) inputs (a normalised batch's range),
//     calibrated on 64 of them, BatchNorm state drawn at random (so folding is not the identity);
//     fast kernels only (the reference is the check, at ~1 image/s).
//   Resnet20Int8Layers / Resnet20Fp32Layers: where the time goes, one pass of 1,000 inputs in
//     batches of 100 layer by layer, each top-level layer's time a counter (ms per 1,000 images;
//     a residual block split into its main path and the add with its shortcut).
// Every benchmark checks once before timing: the int8 model's fast logits equal its reference
// logits bit for bit, the float32 model's output is finite, each fast conv equals the reference.
// Counters: img/s (and MAC/s for the convolutions).
//
// Run e.g.: bm_quant --benchmark_filter='Lenet5' (the peer under the same OpenMP wait policy:
// OMP_WAIT_POLICY=passive slowed driftlab 20-50% on a 2-vCPU VM, its threads woken through the
// hypervisor between parallel regions: docs/BENCHMARKS.md, 2026-11-28)
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "engine/random.h"
#include "kernels/cpu/registry.h"
#include "models/models.h"
#include "quant/ptq.h"
#include "quant/qlayers.h"

namespace driftlab {
namespace {

constexpr int64_t kInputs = 1000;
// The third: torch_onednn as PyTorch's onednn engine runs on x86 without VNNI (VPMADDUBSW's
// saturating int16 pairs: quant_u8s8_dot, docs/QUANT.md), the same-semantics comparison on AVX2.
const char* kSchemes[] = {"torch_qnnpack", "torch_onednn", "torch_onednn,quant_u8s8_dot=int16_pairs_channels"};
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

// Random bytes for x (p's input type, int8 or uint8) and w, random int32 biases; y of p's output type.
struct ConvData {
  Tensor x, w, b, y;
  explicit ConvData(const QConv2dParams& p) {
    Rng rng(RngEngine::mt19937_u24, 5);
    x = Tensor(p.g.x_shape(), p.x_dtype), w = Tensor(p.g.w_shape(), DType::i8), b = Tensor({p.g.k}, DType::i32);
    y = Tensor(p.g.y_shape(), p.y_dtype);
    uint8_t* xb = static_cast<uint8_t*>(x.raw());
    for (int64_t i = 0; i < x.numel(); ++i) xb[i] = static_cast<uint8_t>(rng.next_u32() & 255);
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

// VGG-16's (CIFAR) 3x3 convolutions as the `ort` scheme runs them: int8 in and out (zero point
// -128 after a ReLU), per-tensor float requantization with round-half-even, int32 bias; batch
// 1,000, what `driftlab predict --sizes 1000` gives each layer. args: layer (the index into the
// table: C, K, H = W), threads.
const int64_t kVggConvs[][3] = {{64, 64, 32},   {64, 128, 16},  {128, 128, 16}, {128, 256, 8},
                                {256, 256, 8}, {256, 512, 4}, {512, 512, 4},  {512, 512, 2}};
QConv2dParams vgg16_conv(int layer, int64_t n) {
  QConv2dParams p;
  p.g.n = n;
  p.g.c = kVggConvs[layer][0], p.g.k = kVggConvs[layer][1], p.g.h = p.g.w = kVggConvs[layer][2];
  p.g.r = p.g.s = 3, p.g.pad_t = p.g.pad_b = p.g.pad_l = p.g.pad_r = 1;
  p.x_dtype = p.y_dtype = DType::i8;
  p.x_zero_point = -128;
  p.has_bias = true;
  p.rq.rule = RequantRule::float_multiply;
  p.rq.round = RoundRule::half_even;
  p.rq.zero_point = -128, p.rq.lo = -128, p.rq.hi = 127;
  RequantChannel ch;
  ch.scale = 2.0e-5f;
  p.rq.channels = {ch};
  return p;
}

void BM_Vgg16QConv(benchmark::State& state) {
  const int layer = static_cast<int>(state.range(0));
  const Threads threads(static_cast<int>(state.range(1)));
  const KernelRegistry reg = make_cpu_registry();
  {  // the fast kernel's bytes are the reference's on a few images of the shape
    const QConv2dParams p = vgg16_conv(layer, 5);
    ConvData d(p), r(p);
    reg.qconv2d.select(KernelBackend::fast, p, DType::i8).forward(p, d.x, d.w, &d.b, d.y);
    reg.qconv2d.reference().forward(p, r.x, r.w, &r.b, r.y);
    if (std::memcmp(d.y.raw(), r.y.raw(), d.y.nbytes()) != 0) {
      state.SkipWithError("differs from the reference");
      return;
    }
  }
  const QConv2dParams p = vgg16_conv(layer, 1000);
  const QConv2dKernel& k = reg.qconv2d.select(KernelBackend::fast, p, DType::i8);
  ConvData d(p);
  k.forward(p, d.x, d.w, &d.b, d.y);
  for (auto _ : state) {
    k.forward(p, d.x, d.w, &d.b, d.y);
    benchmark::ClobberMemory();
  }
  const double macs = double(p.g.n * p.g.k * p.g.c * 9 * p.g.out_h() * p.g.out_w());
  state.counters["MAC/s"] = benchmark::Counter(macs * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
  state.SetLabel(p.g.str());
}

// ---------------------------------------------------------------------------------------------
// ResNet-20

Tensor cifar_images(int64_t n, uint64_t seed) {
  Tensor x({n, 3, 32, 32}, DType::f32);
  Rng rng(RngEngine::mt19937_u24, seed);
  float* d = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) d[i] = 2.0f * rng.uniform_f32() - 1.0f;
  return x;
}

// ResNet-20 under the torch preset with BatchNorm statistics and affine parameters drawn (gamma
// U(0.5,1.5), beta and running mean U(-0.5,0.5), running variance U(0.5,2)), as the oracle tests'.
Model resnet20_fp32() {
  Model m = build_model("resnet20", Policy::torch(), 7);
  Rng rng(RngEngine::mt19937_u24, 11);
  auto draw = [&](Param& p, float lo, float hi) {
    float* d = p.value.data<float>();
    for (int64_t i = 0; i < p.value.numel(); ++i) d[i] = lo + (hi - lo) * rng.uniform_f32();
  };
  auto ends = [](const std::string& s, const std::string& t) {
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  for (auto& np : m.net->named_params()) {
    if (ends(np.first, ".gamma")) draw(*np.second, 0.5f, 1.5f);
    if (ends(np.first, ".beta")) draw(*np.second, -0.5f, 0.5f);
  }
  for (auto& nb : m.net->named_buffers()) {
    if (ends(nb.first, ".running_mean")) draw(*nb.second, -0.5f, 0.5f);
    if (ends(nb.first, ".running_var")) draw(*nb.second, 0.5f, 2.0f);
  }
  return m;
}

quant::PtqResult resnet20_int8(Model& fp32, const std::string& scheme, KernelBackend backend) {
  const std::string pol = "torch,quant_scheme=" + scheme + ",quant_backend=" + backend_name(backend);
  return quant::quantize_model(fp32, Policy::parse(pol), cifar_images(64, 7));
}

// args: scheme index, batch, threads
void BM_Resnet20Int8(benchmark::State& state) {
  const std::string scheme = kSchemes[state.range(0)];
  const int64_t batch = state.range(1);
  const Threads threads(static_cast<int>(state.range(2)));
  Model fp32 = resnet20_fp32();
  quant::PtqResult q = resnet20_int8(fp32, scheme, KernelBackend::fast);
  ExecContext exec;
  exec.threads = omp_get_max_threads();
  RunContext ctx = RunContext::inference(exec);
  {  // once: fast == reference, bit for bit, on 3 images
    quant::PtqResult r = resnet20_int8(fp32, scheme, KernelBackend::reference);
    const Tensor x = cifar_images(3, 9);
    const Tensor a = q.model.forward(ctx, x), b = r.model.forward(ctx, x);
    if (std::memcmp(a.raw(), b.raw(), a.nbytes()) != 0) {
      state.SkipWithError("int8 logits differ from the reference kernels'");
      return;
    }
  }
  const std::vector<Tensor> batches = split(cifar_images(kInputs, 3), batch);
  predict_all(q.model, ctx, batches);  // warm-up
  for (auto _ : state) predict_all(q.model, ctx, batches);
  state.counters["img/s"] = benchmark::Counter(static_cast<double>(kInputs * state.iterations()),
                                               benchmark::Counter::kIsRate);
  state.SetLabel(scheme + " fast threads=" + std::to_string(exec.threads));
}

// args: batch, threads
void BM_Resnet20Fp32(benchmark::State& state) {
  const int64_t batch = state.range(0);
  const Threads threads(static_cast<int>(state.range(1)));
  Model m = resnet20_fp32();
  ExecContext exec;
  exec.threads = omp_get_max_threads();
  RunContext ctx = RunContext::inference(exec);
  const std::vector<Tensor> batches = split(cifar_images(kInputs, 3), batch);
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

// Seconds per top-level layer (a residual block: its main path, and its add with the shortcut)
// for the batches through net, accumulated into t under "<index>_<kind>" names.
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void time_layers(Sequential& net, RunContext& ctx, const std::vector<Tensor>& batches,
                 std::map<std::string, double>& t) {
  for (const Tensor& b : batches) {
    Tensor x = b;
    for (std::size_t i = 0; i < net.size(); ++i) {
      Layer& l = net.layer(i);
      char idx[24];
      std::snprintf(idx, sizeof idx, "%02zu_", i);
      const std::string name = idx + l.kind();
      if (auto* r = quant::quant_layer_as<quant::QResidualLayer>(l)) {
        double main_s = 0;
        const auto t0 = Clock::now();
        x = r->forward_with(ctx, x, [&](Sequential& main, const Tensor& in) {
          const auto m0 = Clock::now();
          Tensor y = main.forward(ctx, in);
          main_s = since(m0);
          return y;
        });
        t[name + "_main"] += main_s;
        t[name + "_add"] += since(t0) - main_s;
        continue;
      }
      const auto t0 = Clock::now();
      x = l.forward(ctx, x);
      t[name] += since(t0);
    }
  }
}

void report_layers(benchmark::State& state, const std::map<std::string, double>& t) {
  double total = 0;
  for (const auto& kv : t) total += kv.second;
  for (const auto& kv : t)  // ms per 1,000 images per pass
    state.counters[kv.first] = kv.second * 1e3 / static_cast<double>(state.iterations());
  state.counters["total_ms"] = total * 1e3 / static_cast<double>(state.iterations());
}

// args: scheme index, threads
void BM_Resnet20Int8Layers(benchmark::State& state) {
  const std::string scheme = kSchemes[state.range(0)];
  const Threads threads(static_cast<int>(state.range(1)));
  Model fp32 = resnet20_fp32();
  quant::PtqResult q = resnet20_int8(fp32, scheme, KernelBackend::fast);
  ExecContext exec;
  exec.threads = omp_get_max_threads();
  RunContext ctx = RunContext::inference(exec);
  const std::vector<Tensor> batches = split(cifar_images(kInputs, 3), 100);
  {  // the layer walk computes what forward does
    const Tensor a = q.model.forward(ctx, batches[0]);
    Tensor b = batches[0];
    for (std::size_t i = 0; i < q.model.net->size(); ++i) b = q.model.net->layer(i).forward(ctx, b);
    if (std::memcmp(a.raw(), b.raw(), a.nbytes()) != 0) {
      state.SkipWithError("layer walk differs from forward");
      return;
    }
  }
  predict_all(q.model, ctx, batches);  // warm-up
  std::map<std::string, double> t;
  for (auto _ : state) time_layers(*q.model.net, ctx, batches, t);
  report_layers(state, t);
  state.SetLabel(scheme + " fast threads=" + std::to_string(exec.threads) + " batch=100");
}

// args: threads
void BM_Resnet20Fp32Layers(benchmark::State& state) {
  const Threads threads(static_cast<int>(state.range(0)));
  Model m = resnet20_fp32();
  ExecContext exec;
  exec.threads = omp_get_max_threads();
  RunContext ctx = RunContext::inference(exec);
  const std::vector<Tensor> batches = split(cifar_images(kInputs, 3), 100);
  predict_all(m, ctx, batches);  // warm-up
  std::map<std::string, double> t;
  for (auto _ : state) time_layers(*m.net, ctx, batches, t);
  report_layers(state, t);
  state.SetLabel("torch preset threads=" + std::to_string(exec.threads) + " batch=100");
}

void int8_args(benchmark::internal::Benchmark* b) {
  const int max_threads = std::min(2, omp_get_max_threads());
  for (int s = 0; s < 3; ++s)
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
void resnet_int8_args(benchmark::internal::Benchmark* b) {
  for (int s = 0; s < 3; ++s)
    for (int64_t batch : {1000, 100})
      for (int t = 1; t <= std::min(2, omp_get_max_threads()); ++t) b->Args({s, batch, t});
}
void layer_int8_args(benchmark::internal::Benchmark* b) {
  for (int s = 0; s < 2; ++s)
    for (int t = 1; t <= std::min(2, omp_get_max_threads()); ++t) b->Args({s, t});
}
void layer_fp32_args(benchmark::internal::Benchmark* b) {
  for (int t = 1; t <= std::min(2, omp_get_max_threads()); ++t) b->Args({t});
}

BENCHMARK(BM_Resnet20Int8)->Apply(resnet_int8_args)->ArgNames({"scheme", "batch", "threads"})->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Resnet20Fp32)->Apply(fp32_args)->ArgNames({"batch", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Resnet20Int8Layers)->Apply(layer_int8_args)->ArgNames({"scheme", "threads"})->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Resnet20Fp32Layers)->Apply(layer_fp32_args)->ArgNames({"threads"})->UseRealTime()
    ->Unit(benchmark::kMillisecond);
void vgg_conv_args(benchmark::internal::Benchmark* b) {
  for (int layer = 0; layer < 8; ++layer) b->Args({layer, std::min(2, omp_get_max_threads())});
}
BENCHMARK(BM_Vgg16QConv)->Apply(vgg_conv_args)->ArgNames({"layer", "threads"})->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_QConv2d)->Apply(conv_args)->ArgNames({"layer", "backend", "threads"})->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace driftlab
