// gemm kernels per backend (eigen float32/float64, onednn float32, reference float32 as a
// baseline on the small shapes) for the benchmark rows of tests/cases/gemm_cases.h: square
// 512/1024/2048 and the three products of the dense layers of LeNet-1/LeNet-5 at batch
// 32/64/128, at 1 or 2 OpenMP threads. Names: <backend>/<dtype>/<row>/threads:<t>.
// Each benchmark first checks its kernel against the reference on a small problem with the
// same transposes and scaling, then times C = alpha*op(A)*op(B) + beta*C.
// Counters: FLOP/s (2*M*N*K per call).
//
// To add a shape: append a row to kGemmCases in tests/cases/gemm_cases.h (the tests read it too).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/ops/gemm.h"
#include "kernels/cpu/registry.h"
#include "kernels/cpu/ref/ref.h"
#include "tests/cases/gemm_cases.h"

namespace driftlab {
namespace {

template <typename T>
std::vector<T> values(int64_t n, double phase) {
  std::vector<T> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] = static_cast<T>(std::sin(0.37 * static_cast<double>(i) + phase));
  return v;
}

// Max |fast - ref| relative to the largest |ref| on a small problem shaped like p.
template <typename T>
double check_against_reference(const GemmKernel& k, GemmParams p) {
  p.m = std::min<int64_t>(p.m, 37), p.n = std::min<int64_t>(p.n, 29), p.k = std::min<int64_t>(p.k, 53);
  const std::vector<T> a = values<T>(p.m * p.k, 0.1), b = values<T>(p.k * p.n, 0.2);
  std::vector<T> c = values<T>(p.m * p.n, 0.3), c_ref = c;
  run_gemm<T>(k, p, a.data(), b.data(), c.data());
  gemm_ref<T>(p, a.data(), b.data(), c_ref.data());
  double max_err = 0, max_ref = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    max_err = std::max(max_err, std::fabs(static_cast<double>(c[i]) - static_cast<double>(c_ref[i])));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(c_ref[i])));
  }
  return max_err / std::max(max_ref, 1.0);
}

template <typename T>
void bm_gemm(benchmark::State& state, KernelBackend backend, GemmParams p) {
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(static_cast<int>(state.range(0)));
  const KernelRegistry reg = make_cpu_registry();
  const GemmKernel& k = reg.gemm.at(backend);
  // At most 53 products of values in [-1,1]: a correct kernel is within ~1e-6 (float) of the
  // reference relative to the largest entry; 1e-4 only catches real bugs.
  const double err = check_against_reference<T>(k, p);
  if (!(err < 1e-4)) {
    state.SkipWithError(("differs from the reference: relative error " + std::to_string(err)).c_str());
    omp_set_num_threads(saved_threads);
    return;
  }
  const std::vector<T> a = values<T>(p.m * p.k, 0.1), b = values<T>(p.k * p.n, 0.2);
  std::vector<T> c = values<T>(p.m * p.n, 0.3);
  run_gemm<T>(k, p, a.data(), b.data(), c.data());  // warm-up
  for (auto _ : state) {
    run_gemm<T>(k, p, a.data(), b.data(), c.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * p.m * p.n * p.k * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
  omp_set_num_threads(saved_threads);
}

void add(const std::string& shape, KernelBackend be, DType dt, const GemmParams& p) {
  const std::string name = std::string(backend_name(be)) + "/" + dtype_name(dt) + "/" + shape;
  benchmark::internal::Benchmark* b = dt == DType::f32
                                           ? benchmark::RegisterBenchmark(name.c_str(), bm_gemm<float>, be, p)
                                           : benchmark::RegisterBenchmark(name.c_str(), bm_gemm<double>, be, p);
  b->ArgName("threads")->Unit(benchmark::kMicrosecond)->UseRealTime();
  const int max_threads = be == KernelBackend::reference ? 1 : std::min(2, omp_get_max_threads());
  for (int t = 1; t <= max_threads; ++t) b->Arg(t);
}

// The reference (single loops) is a float32 baseline only up to this many multiply-adds a
// product (every dense-layer row): at square_512 one call takes about 0.05 s, at 2048 seconds.
constexpr int64_t kReferenceMaxMacs = int64_t(1) << 22;

bool register_benchmarks() {
  struct Backend {
    KernelBackend be;
    DType dt;
  };
  const std::vector<Backend> backends = {{KernelBackend::eigen, DType::f32},
                                         {KernelBackend::onednn, DType::f32},
                                         {KernelBackend::eigen, DType::f64},
                                         {KernelBackend::reference, DType::f32}};
  for (const GemmCase& c : cases_for(kGemmCases, kBench))
    for (const Backend& b : backends)
      if (b.be != KernelBackend::reference || c.p.m * c.p.n * c.p.k <= kReferenceMaxMacs) add(c.name, b.be, b.dt, c.p);
  return true;
}

const bool registered = register_benchmarks();

}  // namespace
}  // namespace driftlab
