// BatchNorm kernels at the shapes of ResNet-20's three stages (B-128: 16x32x32, 32x16x16,
// 64x8x8): training forward (batch statistics), backward, inference forward. Two kernels:
// the reference (OpenMP over channels, one-chain sums in acc_order: the result does not
// depend on the thread count) and the fast float32 kernels (vectorised channel sums, used by
// every fast conv backend), so the suite measures both against the memory system: counter
// bytes/s = the tensors each pass must read and write (training forward: x read twice -- mean,
// then variance and y -- and y written; backward: x and dy read twice, dx written; inference:
// x read, y written), at 1 and 2 threads.
#include <benchmark/benchmark.h>
#include <omp.h>

#include "engine/ops/batchnorm.h"
#include "engine/random.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace {

using namespace driftlab;

struct Shape4 {
  int64_t n, c, h, w;
};
const Shape4 kShapes[] = {{128, 16, 32, 32}, {128, 32, 16, 16}, {128, 64, 8, 8}};

BatchNormParams params(const Shape4& s) {
  BatchNormParams p;
  p.n = s.n, p.c = s.c, p.s = s.h * s.w;
  return p;
}

// Uniform values in [lo,hi) from a fixed stream: timing does not depend on them.
Tensor random_tensor(const Shape& shape, DType, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Tensor t(shape, DType::f32);
  Rng rng(RngEngine::mt19937_u24, seed);
  float* d = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = static_cast<float>(lo + (hi - lo) * rng.uniform_f32());
  return t;
}

enum class Pass { train_forward, backward, infer_forward };

void bm_batchnorm(benchmark::State& state, Pass pass, Shape4 s, bool fast) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(static_cast<int>(state.range(0)));
  const BatchNormParams p = params(s);
  const Shape shape{s.n, s.c, s.h, s.w};
  const Tensor x = random_tensor(shape, DType::f32, 1, -1.0, 3.0), dy = random_tensor(shape, DType::f32, 2);
  const Tensor gamma = random_tensor({s.c}, DType::f32, 3, 0.5, 1.5), beta = random_tensor({s.c}, DType::f32, 4);
  Tensor y(shape, DType::f32), dx(shape, DType::f32), mean({s.c}, DType::f32), var({s.c}, DType::f32),
      invstd({s.c}, DType::f32), dgamma({s.c}, DType::f32), dbeta({s.c}, DType::f32);
  const Tensor rmean = random_tensor({s.c}, DType::f32, 5), rvar = random_tensor({s.c}, DType::f32, 6, 0.5, 2.0);
  batchnorm_forward_train_ref(p, x, gamma, beta, y, mean, var, invstd);
  const KernelRegistry reg = make_cpu_registry();
  const BatchNormKernel& k = reg.batchnorm.at(fast ? KernelBackend::fast : KernelBackend::reference);
  double bytes_per_pass = 0;
  const double t = 4.0 * static_cast<double>(x.numel());
  for (auto _ : state) {
    switch (pass) {
      case Pass::train_forward:
        k.forward_train(p, x, gamma, beta, y, mean, var, invstd);
        bytes_per_pass = 3 * t;
        break;
      case Pass::backward:
        k.backward_train(p, x, dy, gamma, mean, invstd, dx, dgamma, dbeta);
        bytes_per_pass = 5 * t;
        break;
      case Pass::infer_forward:
        k.forward_infer(p, x, gamma, beta, rmean, rvar, y);
        bytes_per_pass = 2 * t;
        break;
    }
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] =
      benchmark::Counter(bytes_per_pass * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  omp_set_num_threads(saved);
}

bool register_benchmarks() {
  const std::pair<Pass, const char*> passes[] = {
      {Pass::train_forward, "train_forward"}, {Pass::backward, "backward"}, {Pass::infer_forward, "infer_forward"}};
  for (const Shape4& s : kShapes)
    for (const auto& [pass, name] : passes)
      for (const bool fast : {false, true}) {
        if (fast && pass == Pass::infer_forward) continue;  // one inference kernel
        const std::string n = std::string(fast ? "fast/" : "reference/") + name + "/" + std::to_string(s.n) + "x" +
                              std::to_string(s.c) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w);
        auto* b = benchmark::RegisterBenchmark(n.c_str(), bm_batchnorm, pass, s, fast);
        b->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
      }
  return true;
}

const bool registered = register_benchmarks();

}  // namespace
