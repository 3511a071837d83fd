// cuda_step: the work of one BM_CudaTrainStep or BM_CudaPredict case (bench/bm_cuda.cpp: the torch
// preset, float32, TF32 off), run STEPS times between cudaProfilerStart() and cudaProfilerStop()
// after two warm-up runs, for a profiler's window (bench/kprof/kprof.cpp; PyTorch's side of the
// same work: bench/peers/cuda_torch.py --profile).
//
//   cuda_step MODEL BATCH train|predict STEPS [own|vendor]
//
// Prints the wall time per step (host clock, the device synchronized at both ends).
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/cuda/device_net.h"
#include "engine/random.h"
#include "engine/train/cuda_runner.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/runtime.h"
#include "models/models.h"

namespace driftlab {
namespace {

int run(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: cuda_step MODEL BATCH train|predict STEPS [own|vendor]\n");
    return 2;
  }
  const std::string model = argv[1], mode = argv[3];
  const int64_t batch = std::atoll(argv[2]);
  const int steps = std::atoi(argv[4]);
  const std::string impl = argc > 5 ? argv[5] : "vendor";
  if (batch <= 0 || steps <= 0 || (mode != "train" && mode != "predict") || (impl != "own" && impl != "vendor")) {
    std::fprintf(stderr, "cuda_step: bad arguments (BATCH and STEPS > 0, train|predict, own|vendor)\n");
    return 2;
  }
  std::string why;
  if (cuda::device_count(&why) == 0) {
    std::fprintf(stderr, "no CUDA device: %s\n", why.c_str());
    return 1;
  }
  const cuda::CudaBackend be = impl == "own" ? cuda::CudaBackend::own : cuda::CudaBackend::vendor;
  cuda::CudaExecParams e = resolve_cuda_exec(Policy::torch());  // the torch preset's, then:
  e.gemm_backend = e.conv_backend = e.pool_backend = e.bn_backend = e.softmax_backend = e.rnn_backend = be;
  e.tf32_matmul = e.tf32_conv = false;
  cuda::CudaContext ctx(e);
  Model m = build_model(model, Policy::parse("torch"), 1);
  Shape s{batch};
  s.insert(s.end(), m.input_shape.begin(), m.input_shape.end());
  Tensor x(s, DType::f32);
  Rng rng(RngEngine::mt19937_u24, 7);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = rng.uniform_f32();
  std::vector<int32_t> y(static_cast<std::size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) y[i] = static_cast<int32_t>(i % 10);

  double seconds = 0;
  auto timed = [&](auto&& step) {
    step(), step();  // warm-up: kernels load, algorithms chosen, allocator blocks cached
    cudaDeviceSynchronize();
    cudaProfilerStart();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) step();
    cudaDeviceSynchronize();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cudaProfilerStop();
  };
  if (mode == "train") {
    TrainConfig cfg;
    cfg.batch = batch;
    cfg.optim = {0.01, 0.9, false, 0.0};
    CudaRunner trainer(m, ctx, cfg);
    timed([&] { trainer.train_step(x, y); });
  } else {
    DeviceNet net(ctx, m);
    DeviceValue xd = std::make_shared<cuda::DeviceTensor>(cuda::to_device(ctx, x));
    DeviceRunContext rc = DeviceRunContext::inference(ctx);
    timed([&] { net.forward_device(rc, xd); });
  }
  std::printf("cuda_step %s b%lld %s %s: %d steps, %.1f us per step (host clock)\n", model.c_str(),
              static_cast<long long>(batch), mode.c_str(), impl.c_str(), steps, 1e6 * seconds / steps);
  return 0;
}

}  // namespace
}  // namespace driftlab

int main(int argc, char** argv) { return driftlab::run(argc, argv); }
