// Max and average pooling, fast vs reference, forward and backward, at the benchmark rows of
// tests/cases/pool2d_cases.h: the LeNet-5 layers (2x2 stride 2 on 6x24x24 and 16x8x8 maps at
// batch 128) and a VGG-like 64x32x32 map at batch 32. Counter: input elements per second.
// The result is checked bit for bit against the reference once before timing (the tests'
// contract: tests/ops/test_pool2d.cpp).
// Names: BM_MaxPool2d/<row>/<fast|reference|fast_blocked16>/<forward|backward>, BM_AvgPool2d/...
// the same. fast_blocked16: the fast kernel on channel-blocked tensors (nChw16c, the layout
// oneDNN's AVX-512 convolutions leave a VGG's activations in; engine/layers/layout.h), rows whose
// channels fill blocks of 16.
//
// To add a shape: append a row to kPool2dCases in tests/cases/pool2d_cases.h (the tests read
// it too).
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>

#include "core/ops/pool2d.h"
#include "engine/layers/layout.h"
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

// blk: the channel block the fast kernel is handed (0: plain).
void bm_pool2d(benchmark::State& state, Pool kind, Pool2dParams p, bool fast, int blk, bool backward) {
  const Tensor x_plain = random_input(p.x_shape()), dy_plain = random_input(p.y_shape());
  const Tensor x = to_block(x_plain, blk), dy = to_block(dy_plain, blk);
  Tensor y = Tensor::empty(p.y_shape(), DType::f32).with_block(blk);
  Tensor dx = Tensor::empty(p.x_shape(), DType::f32).with_block(blk);
  Tensor y_ref(p.y_shape(), DType::f32), dx_ref(p.x_shape(), DType::f32);
  if (kind == Pool::max) {
    maxpool2d_forward_ref(p, x_plain, y_ref);
    maxpool2d_backward_ref(p, x_plain, dy_plain, dx_ref);
  } else {
    avgpool2d_forward_ref(p, x_plain, y_ref);
    avgpool2d_backward_ref(p, dy_plain, dx_ref);
  }
  const KernelRegistry reg = make_cpu_registry();
  const Pool2dKernel& k = (kind == Pool::max ? reg.maxpool2d : reg.avgpool2d)
                              .at(fast ? KernelBackend::fast : KernelBackend::reference);
  k.forward(p, x, y);
  k.backward(p, x, dy, dx);
  const Tensor y_out = to_plain(y), dx_out = to_plain(dx);
  if (std::memcmp(y_out.raw(), y_ref.raw(), y.nbytes()) || std::memcmp(dx_out.raw(), dx_ref.raw(), dx.nbytes())) {
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
      for (int variant : {0, 1, 2})  // reference, fast, fast on nChw16c
        for (bool backward : {false, true}) {
          if (variant == 2 && c.p.c % 16 != 0) continue;
          const char* variants[] = {"reference", "fast", "fast_blocked16"};
          const std::string name = std::string(kind == Pool::max ? "BM_MaxPool2d/" : "BM_AvgPool2d/") + c.name + "/" +
                                   variants[variant] + "/" + (backward ? "backward" : "forward");
          benchmark::RegisterBenchmark(name.c_str(), bm_pool2d, kind, c.p, variant > 0, variant == 2 ? 16 : 0,
                                       backward)
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
  return true;
}

const bool registered = register_benchmarks();

}  // namespace
