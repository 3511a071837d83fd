// gemm kernels per backend (eigen float32/float64, onednn float32, reference float32 as a
// baseline on the small shapes) for square 512/1024/2048 and the dense-layer shapes of
// LeNet-1/LeNet-5 at batch 32/64/128, at 1 or 2 OpenMP threads.
// Each benchmark first checks its kernel against the reference on a small problem with the
// same transposes and scaling, then times C = alpha*op(A)*op(B) + beta*C.
// Counters: FLOP/s (2*M*N*K per call).
//
// Dense layer y(B,out) = x(B,in) * W(out,in)^T + b needs three products per step:
//   forward          m=B,   n=out, k=in,  trans_b
//   backward_data    m=B,   n=in,  k=out             dx = dy * W
//   backward_weight  m=out, n=in,  k=B,   trans_a, beta=1 (accumulates)   dW += dy^T * x
// To add a shape: append a row to dense_layers() or square_sizes().
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/ops/gemm.h"
#include "kernels/cpu/registry.h"
#include "kernels/cpu/ref/ref.h"

namespace driftlab {
namespace {

struct DenseLayer {
  const char* name;
  int64_t in, out;
};

const std::vector<DenseLayer>& dense_layers() {
  static const std::vector<DenseLayer> layers = {
      {"lenet5_fc1", 256, 120},  // 16*4*4 -> 120
      {"lenet5_fc2", 120, 84},
      {"lenet5_fc3", 84, 10},
      {"lenet1_fc", 192, 10},  // 12*4*4 -> 10
  };
  return layers;
}

const std::vector<int64_t>& square_sizes() {
  static const std::vector<int64_t> sizes = {512, 1024, 2048};
  return sizes;
}

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

GemmParams gemm(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, double beta) {
  GemmParams p;
  p.m = m, p.n = n, p.k = k, p.trans_a = trans_a, p.trans_b = trans_b, p.beta = beta;
  return p;
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

bool register_benchmarks() {
  struct Backend {
    KernelBackend be;
    DType dt;
  };
  const std::vector<Backend> fast = {{KernelBackend::eigen, DType::f32},
                                     {KernelBackend::onednn, DType::f32},
                                     {KernelBackend::eigen, DType::f64}};
  for (int64_t n : square_sizes())
    for (const Backend& b : fast) add("square_" + std::to_string(n), b.be, b.dt, gemm(n, n, n, false, false, 0.0));
  std::vector<Backend> dense = fast;
  dense.push_back({KernelBackend::reference, DType::f32});
  for (const DenseLayer& l : dense_layers())
    for (int64_t batch : {32, 64, 128}) {
      const std::string s = std::string(l.name) + "_b" + std::to_string(batch);
      for (const Backend& b : dense) {
        add(s + "/forward", b.be, b.dt, gemm(batch, l.out, l.in, false, true, 0.0));
        add(s + "/backward_data", b.be, b.dt, gemm(batch, l.in, l.out, false, false, 0.0));
        add(s + "/backward_weight", b.be, b.dt, gemm(l.out, l.in, batch, true, false, 1.0));
      }
    }
  return true;
}

const bool registered = register_benchmarks();

}  // namespace
}  // namespace driftlab
