// conv2d kernels per backend (reference, eigen, onednn), float32, for the model layers of
// tests/cases/conv2d_cases.h (the rows the tests read too: LeNet-1/LeNet-5, ResNet-20's three
// stages, two VGG-16 layers), at batch 32/64/128 and 1 or 2 OpenMP threads.
// Each benchmark first checks its kernel against the reference on the same layer at batch 2,
// then times forward, backward_data or backward_weight. Counters: FLOP/s (2 flops per
// multiply-add of the direct convolution, padding taps included) and images/s.
//
// Run e.g.: bm_conv2d --benchmark_filter='forward/onednn/lenet5_conv1/batch:128/threads:2'
// To add a layer: append a row to kConv2dCases in tests/cases/conv2d_cases.h (every consumer
// reads it; the tests at the row's own batch).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/ops/conv2d.h"
#include "kernels/cpu/registry.h"
#include "tests/cases/conv2d_cases.h"

namespace driftlab {
namespace {

enum class Pass { forward, backward_data, backward_weight };
const char* pass_name(Pass p) {
  return p == Pass::forward ? "forward" : p == Pass::backward_data ? "backward_data" : "backward_weight";
}

struct Buffers {
  Tensor x, w, b, y, dy, dx, dw, db;
  explicit Buffers(const Conv2dParams& p) {
    x = Tensor(p.x_shape(), DType::f32), w = Tensor(p.w_shape(), DType::f32), b = Tensor({p.k}, DType::f32);
    y = Tensor(p.y_shape(), DType::f32), dy = Tensor(p.y_shape(), DType::f32), dx = Tensor(p.x_shape(), DType::f32);
    dw = Tensor(p.w_shape(), DType::f32), db = Tensor({p.k}, DType::f32);
    // Deterministic values in [-1, 1] without an RNG dependency.
    for (Tensor* t : {&x, &w, &b, &dy}) {
      float* d = t->data<float>();
      for (int64_t i = 0; i < t->numel(); ++i) d[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i) + 0.3));
    }
  }
};

void run_pass(const Conv2dKernel& k, Pass pass, const Conv2dParams& p, Buffers& bu) {
  if (pass == Pass::forward) k.forward(p, bu.x, bu.w, &bu.b, bu.y);
  if (pass == Pass::backward_data) k.backward_data(p, bu.dy, bu.w, bu.dx);
  if (pass == Pass::backward_weight) k.backward_weight(p, bu.x, bu.dy, bu.dw, &bu.db);
}

// Max |fast - ref| over the pass's outputs relative to the largest |ref|, on batch 2.
double check_against_reference(const Conv2dKernel& k, Pass pass, Conv2dParams p) {
  p.n = 2;
  const KernelRegistry reg = make_cpu_registry();
  const Conv2dKernel& ref = reg.conv2d.at(KernelBackend::reference);
  Buffers fast(p), slow(p);
  run_pass(k, pass, p, fast);
  run_pass(ref, pass, p, slow);
  std::vector<std::pair<const Tensor*, const Tensor*>> outs;
  if (pass == Pass::forward) outs = {{&fast.y, &slow.y}};
  if (pass == Pass::backward_data) outs = {{&fast.dx, &slow.dx}};
  if (pass == Pass::backward_weight) outs = {{&fast.dw, &slow.dw}, {&fast.db, &slow.db}};
  double max_err = 0, max_ref = 0;
  for (auto [a, r] : outs)
    for (int64_t i = 0; i < a->numel(); ++i) {
      max_err = std::max(max_err, std::fabs(a->at(i) - r->at(i)));
      max_ref = std::max(max_ref, std::fabs(r->at(i)));
    }
  return max_err / std::max(max_ref, 1.0);
}

void bm_conv2d(benchmark::State& state, KernelBackend backend, Pass pass, Conv2dParams p) {
  p.n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(threads);
  const KernelRegistry reg = make_cpu_registry();
  const Conv2dKernel& k = reg.conv2d.at(backend);
  // float32 sums of at most a few thousand products in [-1,1]: a correct kernel differs from
  // the reference by ~1e-6 of the largest output; 1e-4 only catches real bugs.
  const double err = check_against_reference(k, pass, p);
  if (!(err < 1e-4)) {
    state.SkipWithError(("differs from the reference: relative error " + std::to_string(err)).c_str());
    omp_set_num_threads(saved_threads);
    return;
  }
  Buffers bu(p);
  run_pass(k, pass, p, bu);  // warm-up: oneDNN builds its primitive here
  for (auto _ : state) {
    run_pass(k, pass, p, bu);
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * p.n * p.k * p.c * p.r * p.s * p.out_h() * p.out_w();
  state.counters["FLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
  state.counters["img/s"] = benchmark::Counter(static_cast<double>(p.n * state.iterations()),
                                               benchmark::Counter::kIsRate);
  omp_set_num_threads(saved_threads);
}

bool register_benchmarks() {
  const int max_threads = std::min(2, omp_get_max_threads());
  for (Pass pass : {Pass::forward, Pass::backward_data, Pass::backward_weight})
    for (KernelBackend be : {KernelBackend::eigen, KernelBackend::onednn, KernelBackend::reference})
      for (const Conv2dCase& l : cases_for(kConv2dCases, kBench)) {
        const std::string name = std::string(pass_name(pass)) + "/" + backend_name(be) + "/" + l.name;
        auto* b = benchmark::RegisterBenchmark(name.c_str(), bm_conv2d, be, pass, l.p);
        b->ArgNames({"batch", "threads"})->Unit(benchmark::kMicrosecond)->UseRealTime();
        // The reference is single-threaded and slow: one batch size is enough for a baseline.
        const std::vector<int64_t> batches = be == KernelBackend::reference ? std::vector<int64_t>{32}
                                                                            : std::vector<int64_t>{32, 64, 128};
        for (int64_t n : batches)
          for (int t = 1; t <= max_threads; ++t)
            if (be != KernelBackend::reference || t == 1) b->Args({n, t});
      }
  return true;
}

const bool registered = register_benchmarks();

}  // namespace
}  // namespace driftlab
