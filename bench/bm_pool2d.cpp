// Max and average pooling, fast vs reference, forward and backward, at the benchmark rows of
// tests/cases/pool2d_cases.h: the LeNet-5 layers (2x2 stride 2 on 6x24x24 and 16x8x8 maps at
// batch 128) and a VGG-like 64x32x32 map at batch 32. Counter: input elements per second.
// The result is checked bit for bit against the reference once before timing (the tests'
// contract: tests/ops/test_pool2d.cpp).
// Names: BM_MaxPool2d/<row>/<fast|reference>/<forward|backward>, BM_AvgPool2d/... the same.
//
// To add a shape: append a row to kPool2dCases in tests/cases/pool2d_cases.h (the tests read
// it too).
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>

#include "core/ops/pool2d.h"
#include "engine/random.h"
#include "engine/policy.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "tests/cases/pool2d_cases.h"

namespace {

using namespace driftlab;

Tensor random_input(const Shape& shape) {
  Tensor x(shape, DType::f32);
  Rng rng(RngEngine::mt19937_u24, 3);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = rng.uniform<float>(-1.f, 1.f);
  return x;
}

enum class Pool { max, avg };

void bm_pool2d(benchmark::State& state, Pool kind, Pool2dParams p, bool fast, bool backward) {
  Tensor x = random_input(p.x_shape()), dy = random_input(p.y_shape());
  Tensor y(p.y_shape(), DType::f32), dx(p.x_shape(), DType::f32);
  Tensor y_ref(p.y_shape(), DType::f32), dx_ref(p.x_shape(), DType::f32);
  if (kind == Pool::max) {
    maxpool2d_forward_ref(p, x, y_ref);
    maxpool2d_backward_ref(p, x, dy, dx_ref);
  } else {
    avgpool2d_forward_ref(p, x, y_ref);
    avgpool2d_backward_ref(p, dy, dx_ref);
  }
  const KernelRegistry reg = make_cpu_registry();
  const Pool2dKernel& k = (kind == Pool::max ? reg.maxpool2d : reg.avgpool2d)
                              .at(fast ? KernelBackend::fast : KernelBackend::reference);
  k.forward(p, x, y);
  k.backward(p, x, dy, dx);
  if (std::memcmp(y.raw(), y_ref.raw(), y.nbytes()) || std::memcmp(dx.raw(), dx_ref.raw(), dx.nbytes())) {
    state.SkipWithError("pool kernel differs from the reference");
    return;
  }
  for (auto _ : state) {
    if (backward)
      k.backward(p, x, dy, dx);
    else
      k.forward(p, x, y);
  }
  state.counters["elements/s"] =
      benchmark::Counter(static_cast<double>(x.numel()), benchmark::Counter::kIsIterationInvariantRate);
}

bool register_benchmarks() {
  for (Pool kind : {Pool::max, Pool::avg})
    for (const Pool2dCase& c : cases_for(kPool2dCases, kBench))
      for (bool fast : {false, true})
        for (bool backward : {false, true}) {
          const std::string name = std::string(kind == Pool::max ? "BM_MaxPool2d/" : "BM_AvgPool2d/") + c.name + "/" +
                                   (fast ? "fast" : "reference") + "/" + (backward ? "backward" : "forward");
          benchmark::RegisterBenchmark(name.c_str(), bm_pool2d, kind, c.p, fast, backward)
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
  return true;
}

const bool registered = register_benchmarks();

}  // namespace
