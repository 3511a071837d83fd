// Max pooling, fast vs reference, at the LeNet layer shapes (2x2 stride 2 on 6x24x24 and
// 16x8x8 maps) and a VGG-like 64x32x32 map. Counter: input elements per second.
// The fast result is checked bit for bit against the reference once before timing.
#include <benchmark/benchmark.h>

#include <cstring>

#include "engine/ops/pool2d.h"
#include "engine/random.h"
#include "engine/policy.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace {

using namespace driftlab;

struct Shape4 {
  int64_t n, c, h, w;
};
const Shape4 kShapes[] = {{128, 6, 24, 24}, {128, 16, 8, 8}, {32, 64, 32, 32}};

Pool2dParams make(const Shape4& s) {
  Pool2dParams p;
  p.n = s.n;
  p.c = s.c;
  p.h = s.h;
  p.w = s.w;
  return p;
}

Tensor random_input(const Shape& shape) {
  Tensor x(shape, DType::f32);
  Rng rng(RngEngine::mt19937_u24, 3);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = rng.uniform<float>(-1.f, 1.f);
  return x;
}

// args: shape index, 0 = reference / 1 = fast, 0 = forward / 1 = backward
void BM_MaxPool2d(benchmark::State& state) {
  Pool2dParams p = make(kShapes[state.range(0)]);
  const bool fast = state.range(1) == 1, backward = state.range(2) == 1;
  Tensor x = random_input(p.x_shape()), dy = random_input(p.y_shape());
  Tensor y(p.y_shape(), DType::f32), dx(p.x_shape(), DType::f32);
  Tensor y_ref(p.y_shape(), DType::f32), dx_ref(p.x_shape(), DType::f32);
  maxpool2d_forward_ref(p, x, y_ref);
  maxpool2d_backward_ref(p, x, dy, dx_ref);
  const KernelRegistry reg = make_cpu_registry();
  const Pool2dKernel& k = reg.maxpool2d.at(fast ? KernelBackend::fast : KernelBackend::reference);
  k.forward(p, x, y);
  k.backward(p, x, dy, dx);
  if (std::memcmp(y.raw(), y_ref.raw(), y.nbytes()) || std::memcmp(dx.raw(), dx_ref.raw(), dx.nbytes()))
    state.SkipWithError("max pool kernel differs from the reference");
  for (auto _ : state) {
    if (backward)
      k.backward(p, x, dy, dx);
    else
      k.forward(p, x, y);
  }
  state.counters["elements/s"] = benchmark::Counter(static_cast<double>(x.numel()), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

BENCHMARK(BM_MaxPool2d)
    ->ArgsProduct({{0, 1, 2}, {0, 1}, {0, 1}})
    ->ArgNames({"shape", "fast", "backward"})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
