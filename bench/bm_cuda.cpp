// GPU benchmarks (Google Benchmark, CUDA events, manual time): the machine's measured peaks
// (a large sgemm with cuBLAS in FP32 and TF32 math, device-to-device copy bandwidth) and
// driftlab's CUDA kernels against them (own tiled gemm, conv2d forward/backward own vs cuDNN
// on the LeNet-1/LeNet-5, ResNet-20 and VGG-16 layers of tests/cases/conv2d_cases.h at batch
// 128). Each kernel is checked once against the CPU reference on a small problem before it is
// timed.
// Counters: FLOP/s (gemm: 2*M*N*K; conv: 2*N*K*P*Q*C*R*S per pass), bytes/s (copy: read+write).
// Whole models (torch preset, float32, TF32 off): one training step (BM_CudaTrainStep: the
// batch copied from the host, forward, loss, backward, SGD on the device, the loss and logits
// back, as in `driftlab train --device cuda`) and inference (BM_CudaPredict: forward on input
// already on the device) for LeNet-1/LeNet-5 (batch 32/64/128; 1,000/10,000 inputs) and
// ResNet-20/VGG-16 (batch 128; 1,000 inputs) and the LSTM/GRU classifiers (batch 128; 128 and
// 1,000 sequences), own kernels and cuBLAS/cuDNN. Checked once against the CPU model's logits
// first. Counter images/s (sequences/s for the recurrent models). int8 models:
// BM_CudaPredict/<lenet1|lenet5>-int8-<tflite|torch_qnnpack>/<1000|10000>/own and
// resnet20-int8-<torch_qnnpack|ort> (residual adds of two rules), the PTQ model on driftlab's dp4a
// kernels, checked bit for bit against the CPU's int8 logits first.
// Attacks on the device: BM_CudaAttack/<lenet5|resnet20>/<fgsm|bim10>/n<inputs>/b<batch>/vendor,
// attacks/gradient.h through a CudaRunner on cuDNN/cuBLAS (eps 0.03, BIM step 0.01, 10 steps, as
// bench/bm_attacks.cpp; the gradients and judging forwards on the device, sign/projection on the
// host), the CPU benchmark's sizes (LeNet-5 1,024 inputs in batches of 128, ResNet-20 128 in 32) and
// a GPU-sized one (10,000 in 1,000; 1,024 in 256); counter ex/s. BM_CudaAttackQueries/<arch>/vendor:
// the Boundary attack's 25 candidates per logits() call, queries/s. Peer: cuda_torch.py --parts attacks.
// Without a device it prints "no CUDA device: <reason>; GPU benchmarks skipped" and exits 0.
//
// To add a conv shape: append a model-layer row to kConv2dCases in tests/cases/conv2d_cases.h (the
// tests read it too), and to CONV_SHAPES in bench/peers/cuda_torch.py. To add a gemm: register
// it in register_all().
// To add a model case: append to model_cases() (and to MODEL_CASES in bench/peers/cuda_torch.py).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "attacks/gradient.h"
#include "engine/cuda/device_net.h"
#include "core/ops/conv2d.h"
#include "core/ops/gemm.h"
#include "engine/random.h"
#include "engine/train/cuda_runner.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/runtime.h"
#include "models/models.h"
#include "quant/ptq.h"
#include "tests/cases/conv2d_cases.h"

namespace driftlab {
namespace {

using cuda::CudaBackend;
using cuda::CudaContext;
using cuda::DeviceTensor;

// The torch preset's exec params (its cuDNN RNN algorithm rule among them), then the backends
// and TF32 as the case asks.
cuda::CudaExecParams exec(CudaBackend gemm, CudaBackend conv, bool tf32) {
  cuda::CudaExecParams e = resolve_cuda_exec(Policy::torch());
  e.gemm_backend = gemm, e.conv_backend = conv, e.tf32_matmul = e.tf32_conv = tf32;
  return e;
}

Tensor sin_tensor(Shape s, double phase) {
  Tensor t(std::move(s), DType::f32);
  float* d = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + phase));
  return t;
}

// Max |gpu - ref| / max |ref| of a small gemm shaped like p (transposes and scaling kept).
double check_gemm(CudaContext& ctx, GemmParams p) {
  p.m = std::min<int64_t>(p.m, 67), p.n = std::min<int64_t>(p.n, 45), p.k = std::min<int64_t>(p.k, 131);
  Tensor a = sin_tensor({p.m, p.k}, 0.1), b = sin_tensor({p.k, p.n}, 0.2), c = sin_tensor({p.m, p.n}, 0.3);
  Tensor ref = c.clone();
  gemm_ref<float>(p, a.data<float>(), b.data<float>(), ref.data<float>());
  DeviceTensor da = cuda::to_device(ctx, a), db = cuda::to_device(ctx, b), dc = cuda::to_device(ctx, c);
  cuda::gemm_cuda(ctx, p, da, db, dc);
  Tensor got = cuda::to_host(ctx, dc);
  double err = 0, mag = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    err = std::max(err, std::fabs(got.at(i) - ref.at(i)));
    mag = std::max(mag, std::fabs(ref.at(i)));
  }
  return err / mag;
}

void bm_gemm(benchmark::State& state, int64_t m, int64_t n, int64_t k, CudaBackend backend, bool tf32) {
  CudaContext ctx(exec(backend, CudaBackend::own, tf32));
  GemmParams p;
  p.m = m, p.n = n, p.k = k;
  // FP32: float rounding of ~131 terms; TF32: 10-bit inputs (2^-11 relative per product).
  const double rel = check_gemm(ctx, p);
  if (rel > (tf32 ? 1e-2 : 1e-5)) {
    state.SkipWithError(("check against the reference failed: relative error " + std::to_string(rel)).c_str());
    return;
  }
  DeviceTensor a = cuda::to_device(ctx, sin_tensor({m, k}, 0.1)), b = cuda::to_device(ctx, sin_tensor({k, n}, 0.2));
  DeviceTensor c(ctx, {m, n}, DType::f32);
  cuda::EventTimer timer(ctx);
  cuda::gemm_cuda(ctx, p, a, b, c);  // warm-up (cuBLAS handle, kernel load)
  for (auto _ : state) {
    timer.start();
    cuda::gemm_cuda(ctx, p, a, b, c);
    state.SetIterationTime(timer.stop_seconds());
  }
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(m * n * k), benchmark::Counter::kIsIterationInvariantRate);
}

void bm_d2d_copy(benchmark::State& state, int64_t bytes) {
  CudaContext ctx;
  DeviceTensor src = DeviceTensor::zeros(ctx, {bytes / 4}, DType::f32), dst(ctx, {bytes / 4}, DType::f32);
  cuda::EventTimer timer(ctx);
  cuda::copy_device(ctx, src, dst);
  for (auto _ : state) {
    timer.start();
    cuda::copy_device(ctx, src, dst);
    state.SetIterationTime(timer.stop_seconds());
  }
  // read + write
  state.counters["bytes/s"] =
      benchmark::Counter(2.0 * static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate);
}

// The conv shapes are the model-layer rows of tests/cases/conv2d_cases.h (those with kBench),
// at batch 128: BM_CudaConv2d/<row>_b128/<pass>/<own|cudnn>.
constexpr int64_t kConvBatch = 128;

// pass: 0 forward, 1 backward_data, 2 backward_weight
void bm_conv(benchmark::State& state, const Conv2dParams& p, int pass, CudaBackend backend, bool tf32) {
  CudaContext ctx(exec(CudaBackend::own, backend, tf32));
  {  // check once on a small batch: |gpu - ref| relative to max |ref|
    Conv2dParams q = p;
    q.n = 2;
    Tensor x = sin_tensor(q.x_shape(), 0.1), w = sin_tensor(q.w_shape(), 0.2), ref(q.y_shape(), DType::f32);
    conv2d_forward_ref(q, x, w, nullptr, ref);
    DeviceTensor gx = cuda::to_device(ctx, x), gw = cuda::to_device(ctx, w), gy(ctx, q.y_shape(), DType::f32);
    cuda::conv2d_forward_cuda(ctx, q, gx, gw, nullptr, gy);
    Tensor got = cuda::to_host(ctx, gy);
    double err = 0, mag = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      err = std::max(err, std::fabs(got.at(i) - ref.at(i)));
      mag = std::max(mag, std::fabs(ref.at(i)));
    }
    // float sums of C*R*S <= 4608 terms: 1e-4 relative; TF32 inputs: 1e-2
    if (err / mag > (tf32 ? 1e-2 : 1e-4)) {
      state.SkipWithError(("conv check failed: relative error " + std::to_string(err / mag)).c_str());
      return;
    }
  }
  DeviceTensor x = cuda::to_device(ctx, sin_tensor(p.x_shape(), 0.1)), w = cuda::to_device(ctx, sin_tensor(p.w_shape(), 0.2));
  DeviceTensor y(ctx, p.y_shape(), DType::f32), dy = cuda::to_device(ctx, sin_tensor(p.y_shape(), 0.3));
  DeviceTensor dx(ctx, p.x_shape(), DType::f32), dw = DeviceTensor::zeros(ctx, p.w_shape(), DType::f32);
  auto run = [&] {
    if (pass == 0) cuda::conv2d_forward_cuda(ctx, p, x, w, nullptr, y);
    if (pass == 1) cuda::conv2d_backward_data_cuda(ctx, p, dy, w, dx);
    if (pass == 2) cuda::conv2d_backward_weight_cuda(ctx, p, x, dy, dw, nullptr);
  };
  run();  // warm-up; picks and records the cuDNN algorithm
  cuda::EventTimer timer(ctx);
  for (auto _ : state) {
    timer.start();
    run();
    state.SetIterationTime(timer.stop_seconds());
  }
  const double flops = 2.0 * static_cast<double>(p.n * p.k * p.out_h() * p.out_w() * p.c * p.r * p.s);
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  if (!ctx.algo_log().empty()) state.SetLabel("algo " + ctx.algo_log().back().algo_name);
}

// ---- whole models ----

struct ModelCase {
  const char* model;
  std::vector<int64_t> train_batches, predict_sizes;
};

const std::vector<ModelCase>& model_cases() {
  static const std::vector<ModelCase> c = {
      {"lenet1", {32, 64, 128}, {1000, 10000}},
      {"lenet5", {32, 64, 128}, {1000, 10000}},
      {"resnet20", {128}, {1000}},
      {"vgg16", {128}, {1000}},
      {"lstm", {128}, {128, 1000}},  // the zoo's LSTM/GRU classifiers: 28 steps of 28 features, 128 units
      {"gru", {128}, {128, 1000}},
  };
  return c;
}

Tensor model_images(const Model& m, int64_t n, uint64_t seed) {
  Shape s{n};
  s.insert(s.end(), m.input_shape.begin(), m.input_shape.end());
  Tensor x(s, DType::f32);
  Rng rng(RngEngine::mt19937_u24, seed);
  float* d = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) d[i] = rng.uniform_f32();
  return x;
}

std::vector<int32_t> model_labels(int64_t n) {
  std::vector<int32_t> y(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<int32_t>(i % 10);
  return y;
}

// Max |gpu - cpu| / max |cpu| of the logits of 4 inputs (same weights, inference).
double check_model(CudaContext& ctx, Model& m) {
  Tensor x = model_images(m, 4, 3);
  ExecContext exec;
  RunContext rc = RunContext::inference(exec);
  Tensor cpu = m.forward(rc, x);
  DeviceNet net(ctx, m);
  Tensor gpu = net.predict(x);
  double err = 0, mag = 0;
  for (int64_t i = 0; i < cpu.numel(); ++i) {
    err = std::max(err, std::fabs(gpu.at(i) - cpu.at(i)));
    mag = std::max(mag, std::fabs(cpu.at(i)));
  }
  return err / mag;
}

// float32 through up to 16 layers with other summation orders: 1e-4 of the largest logit
// (tests/cuda/test_model_cuda.cpp derives the bound); an indexing bug is O(1).
constexpr double kModelCheck = 1e-4;

// The forward of n inputs already on the device, after a warm-up, per iteration (CUDA events).
void time_forward(benchmark::State& state, CudaContext& ctx, Model& m, int64_t n) {
  DeviceNet net(ctx, m);
  DeviceValue x = std::make_shared<DeviceTensor>(cuda::to_device(ctx, model_images(m, n, 9)));
  DeviceRunContext run = DeviceRunContext::inference(ctx);
  net.forward_device(run, x);  // warm-up
  cuda::EventTimer timer(ctx);
  for (auto _ : state) {
    timer.start();
    DeviceValue y = net.forward_device(run, x);
    state.SetIterationTime(timer.stop_seconds());
  }
  state.counters["images/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

void bm_train_step(benchmark::State& state, const std::string& model, int64_t batch, CudaBackend backend) {
  cuda::CudaExecParams e = exec(backend, backend, false);
  e.pool_backend = e.bn_backend = e.softmax_backend = e.rnn_backend = backend;
  CudaContext ctx(e);
  Model m = build_model(model, Policy::parse("torch"), 1);
  const double rel = check_model(ctx, m);
  if (!(rel <= kModelCheck)) {
    state.SkipWithError(("check against the CPU model failed: relative error " + std::to_string(rel)).c_str());
    return;
  }
  TrainConfig cfg;
  cfg.batch = batch;
  cfg.optim = {0.01, 0.9, false, 0.0};
  CudaRunner trainer(m, ctx, cfg);
  Tensor x = model_images(m, batch, 7);
  auto y = model_labels(batch);
  trainer.train_step(x, y);  // warm-up: kernels load, cuDNN algorithms chosen, allocator blocks cached
  cuda::EventTimer timer(ctx);
  for (auto _ : state) {
    timer.start();
    benchmark::DoNotOptimize(trainer.train_step(x, y));  // returns after the loss is on the host
    state.SetIterationTime(timer.stop_seconds());
  }
  state.counters["images/s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
}

void bm_predict(benchmark::State& state, const std::string& model, int64_t n, CudaBackend backend) {
  cuda::CudaExecParams e = exec(backend, backend, false);
  e.pool_backend = e.bn_backend = e.softmax_backend = e.rnn_backend = backend;
  CudaContext ctx(e);
  Model m = build_model(model, Policy::parse("torch"), 1);
  const double rel = check_model(ctx, m);
  if (!(rel <= kModelCheck)) {
    state.SkipWithError(("check against the CPU model failed: relative error " + std::to_string(rel)).c_str());
    return;
  }
  time_forward(state, ctx, m, n);
}

// An int8 model (post-training quantization of the torch-preset fp32 model, calibrated
// on 256 uniform images) on the device: driftlab's own dp4a kernels (quant/device_qlayers.cpp),
// forward on device-resident input, as bm_predict. Checked first: the device's logits equal the
// CPU's bit for bit (every integer sum is exact: tests/cuda/test_quant_model_cuda.cpp).
void bm_predict_int8(benchmark::State& state, const std::string& model, const std::string& scheme, int64_t n) {
  CudaContext ctx;
  Model fp32 = build_model(model, Policy::parse("torch"), 1);
  quant::PtqResult q = quant::quantize_model(fp32, Policy::parse("torch,quant_scheme=" + scheme), model_images(fp32, 256, 5));
  Model& m = q.model;
  {
    const Tensor x = model_images(m, 16, 3);
    ExecContext exec;
    RunContext rc = RunContext::inference(exec);
    const Tensor cpu = m.forward(rc, x);
    const Tensor gpu = DeviceNet(ctx, m).predict(x);
    int64_t differ = 0;
    for (int64_t i = 0; i < cpu.numel(); ++i) differ += cpu.at(i) != gpu.at(i);
    if (differ != 0) {
      state.SkipWithError(("int8 logits differ from the CPU's in " + std::to_string(differ) + " places").c_str());
      return;
    }
  }
  time_forward(state, ctx, m, n);
}

// The attack through the model face on the device (what `driftlab attack --device cuda` runs):
// random weights (torch preset, ResNet-20's BatchNorm statistics away from (0, 1)), U(lo, 1) inputs.
// Wall time per call: each gradient call ends with dL/dx copied to the host.
Model attack_model(const std::string& arch) {
  Model m = build_model(arch, Policy::torch(), 7);
  Rng rng(RngEngine::mt19937_u24, 11);
  for (auto& nb : m.net->named_buffers()) {
    float* d = nb.second->value.data<float>();
    const bool var = nb.first.find("running_var") != std::string::npos;
    for (int64_t i = 0; i < nb.second->value.numel(); ++i) d[i] = var ? 0.5f + 1.5f * rng.uniform_f32() : rng.uniform_f32() - 0.5f;
  }
  return m;
}

void bm_attack(benchmark::State& state, const std::string& arch, bool bim, int64_t n, int64_t batch) {
  CudaContext ctx(exec(CudaBackend::vendor, CudaBackend::vendor, false));
  Model m = attack_model(arch);
  const double rel = check_model(ctx, m);
  if (!(rel <= kModelCheck)) {
    state.SkipWithError(("check against the CPU model failed: relative error " + std::to_string(rel)).c_str());
    return;
  }
  CudaRunner runner(m, ctx);
  const double lo = arch == "lenet5" ? 0.0 : -1.0;
  Tensor x = model_images(m, n, 3);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(lo + (1.0 - lo) * x.data<float>()[i]);
  const std::vector<int32_t> y = model_labels(n);
  attacks::GradientAttackSpec spec;
  spec.kind = bim ? attacks::AttackKind::bim : attacks::AttackKind::fgsm;
  spec.eps = 0.03, spec.step = 0.01, spec.steps = 10, spec.batch = batch, spec.lo = lo, spec.hi = 1.0;
  attacks::run_gradient_attack(runner, x, y, spec);  // warm-up: algorithms chosen, blocks cached
  for (auto _ : state) benchmark::DoNotOptimize(attacks::run_gradient_attack(runner, x, y, spec).x_adv);
  state.counters["ex/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

void bm_attack_queries(benchmark::State& state, const std::string& arch) {
  CudaContext ctx(exec(CudaBackend::vendor, CudaBackend::vendor, false));
  Model m = attack_model(arch);
  CudaRunner runner(m, ctx);
  const Tensor x = model_images(m, 25, 4);
  runner.logits(x);
  for (auto _ : state) benchmark::DoNotOptimize(runner.logits(x));
  state.counters["queries/s"] = benchmark::Counter(25.0, benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  const char* names[] = {"own", "vendor"};
  for (bool tf32 : {false, true})
    benchmark::RegisterBenchmark((std::string("BM_CudaSgemmPeak/cublas/8192") + (tf32 ? "/tf32" : "/fp32")).c_str(),
                                 [tf32](benchmark::State& s) { bm_gemm(s, 8192, 8192, 8192, CudaBackend::vendor, tf32); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_CudaGemm/own/4096",
                               [](benchmark::State& s) { bm_gemm(s, 4096, 4096, 4096, CudaBackend::own, false); })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_CudaCopyD2D/1GiB", [](benchmark::State& s) { bm_d2d_copy(s, int64_t(1) << 30); })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  const char* passes[] = {"forward", "backward_data", "backward_weight"};
  for (const Conv2dCase& cs : cases_for(kConv2dCases, kBench))
    for (int pass = 0; pass < 3; ++pass)
      for (int b = 0; b < 2; ++b) {
        const std::string name = std::string("BM_CudaConv2d/") + cs.name + "_b" + std::to_string(kConvBatch) + "/" +
                                 passes[pass] + "/" + (b ? "cudnn" : names[0]);
        Conv2dParams p = cs.p;
        p.n = kConvBatch;
        const CudaBackend be = b ? CudaBackend::vendor : CudaBackend::own;
        benchmark::RegisterBenchmark(name.c_str(), [p, pass, be](benchmark::State& s) { bm_conv(s, p, pass, be, false); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
  for (const ModelCase& mc : model_cases())
    for (int b = 0; b < 2; ++b) {
      const std::string model = mc.model;
      const CudaBackend be = b ? CudaBackend::vendor : CudaBackend::own;
      const std::string impl = b ? "vendor" : "own";
      for (int64_t batch : mc.train_batches)
        benchmark::RegisterBenchmark(("BM_CudaTrainStep/" + model + "/b" + std::to_string(batch) + "/" + impl).c_str(),
                                     [model, batch, be](benchmark::State& s) { bm_train_step(s, model, batch, be); })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      for (int64_t n : mc.predict_sizes)
        benchmark::RegisterBenchmark(("BM_CudaPredict/" + model + "/" + std::to_string(n) + "/" + impl).c_str(),
                                     [model, n, be](benchmark::State& s) { bm_predict(s, model, n, be); })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
    }
  for (const char* arch : {"lenet5", "resnet20"}) {
    const std::string a = arch;
    const bool lenet = a == "lenet5";
    for (const auto& nb : {std::make_pair<int64_t, int64_t>(lenet ? 1024 : 128, lenet ? 128 : 32),
                           std::make_pair<int64_t, int64_t>(lenet ? 10000 : 1024, lenet ? 1000 : 256)})
      for (bool bim : {false, true}) {
        const int64_t n = nb.first, batch = nb.second;
        benchmark::RegisterBenchmark(("BM_CudaAttack/" + a + (bim ? "/bim10" : "/fgsm") + "/n" + std::to_string(n) +
                                      "/b" + std::to_string(batch) + "/vendor").c_str(),
                                     [a, bim, n, batch](benchmark::State& s) { bm_attack(s, a, bim, n, batch); })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    benchmark::RegisterBenchmark(("BM_CudaAttackQueries/" + a + "/vendor").c_str(),
                                 [a](benchmark::State& s) { bm_attack_queries(s, a); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }
  const std::pair<const char*, const char*> int8_cases[] = {{"lenet1", "tflite"}, {"lenet1", "torch_qnnpack"},
                                                             {"lenet5", "tflite"}, {"lenet5", "torch_qnnpack"},
                                                             {"resnet20", "torch_qnnpack"}, {"resnet20", "ort"}};
  for (const auto& mc : int8_cases)
      for (int64_t n : {1000, 10000}) {
        const std::string mo = mc.first, sc = mc.second;
        benchmark::RegisterBenchmark(
            ("BM_CudaPredict/" + mo + "-int8-" + sc + "/" + std::to_string(n) + "/own").c_str(),
            [mo, sc, n](benchmark::State& s) { bm_predict_int8(s, mo, sc, n); })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
}

}  // namespace
}  // namespace driftlab

int main(int argc, char** argv) {
  std::string why;
  if (driftlab::cuda::device_count(&why) == 0) {
    std::printf("no CUDA device: %s; GPU benchmarks skipped\n", why.c_str());
    return 0;
  }
  driftlab::cuda::DeviceInfo d = driftlab::cuda::device_info(0);
  benchmark::AddCustomContext("gpu", d.name);
  benchmark::AddCustomContext("gpu_driver", std::to_string(d.driver_version));
  benchmark::AddCustomContext("cuda_runtime", std::to_string(d.runtime_version));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  driftlab::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
