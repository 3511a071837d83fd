// The machine's float32 arithmetic limit: what bench/compare divides by.
//
//   fma_peak/threads:T   every thread runs independent chains of vector FMAs on registers only
//                        (no loads or stores in the loop): FMA units x lanes x 2 FLOPs x clock,
//                        as the core actually clocks under this load. The chains: 10 accumulators,
//                        enough to cover an FMA latency of 4-5 cycles on 2 ports, and few enough
//                        for AVX2's 16 registers with the two operands (AVX-512: 16 of 32).
//   fma_peak_ymm/...     (AVX-512 builds) the same chains on 256-bit registers: on Intel, AVX-512
//                        code runs under a lower frequency licence, so a kernel of AVX2 FMAs may
//                        clock higher; the limit is the larger of the two.
//   l1_gemm/threads:T    oneDNN sgemm 48x48x48 per thread on operands that stay in L1 (27 KB),
//                        repeated: the limit a real multiply reaches with loads, stores and its
//                        packing, without memory traffic.
//
// The vector width is the build's (-march=native): 16 lanes with AVX-512F, 8 with AVX2+FMA.
// A benchmark that reports more than fma_peak is wrong in its FLOP count, not faster than the
// machine.
#include <benchmark/benchmark.h>
#include <dnnl.hpp>
#include <immintrin.h>
#include <omp.h>

#include <cstdint>
#include <vector>

namespace {

constexpr int kChains = 10;
constexpr int64_t kSteps = 1 << 20;  // FMAs per chain per call

// The chains on 256-bit registers (AVX2 FMAs): the limit of an AVX2 build, and in an AVX-512 build
// a second measurement (fma_peak_ymm): an Intel core may clock higher under them (its AVX-512
// frequency licence does not apply), so the machine's limit is the larger of lanes x clock under
// either width. On AMD (one clock for both) they give half.
#if defined(__AVX2__) && defined(__FMA__)
float fma_chains_256(float seed) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(seed + static_cast<float>(i));
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t s = 0; s < kSteps; ++s)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], b, c);
  __m256 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm256_add_ps(sum, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, sum);
  float r = 0;
  for (float v : out) r += v;
  return r;
}
#endif

#if defined(__AVX512F__)
constexpr int kLanes = 16;
float fma_chains(float seed) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(seed + static_cast<float>(i));
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t s = 0; s < kSteps; ++s)
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], b, c);
  __m512 sum = acc[0];
  for (int i = 1; i < kChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  return _mm512_reduce_add_ps(sum);
}
#elif defined(__AVX2__) && defined(__FMA__)
constexpr int kLanes = 8;
float fma_chains(float seed) { return fma_chains_256(seed); }
#else
#error "bm_peak needs AVX2 with FMA or AVX-512F (build with -march=native)"
#endif

template <float (*Chains)(float), int Lanes>
void fma_peak_of(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<float> sink(static_cast<std::size_t>(threads));
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    sink[static_cast<std::size_t>(omp_get_thread_num())] = Chains(static_cast<float>(omp_get_thread_num()));
    benchmark::DoNotOptimize(sink.data());
  }
  const double flops = 2.0 * Lanes * kChains * static_cast<double>(kSteps) * threads;
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["lanes"] = Lanes;
}

void fma_peak(benchmark::State& state) { fma_peak_of<fma_chains, kLanes>(state); }
#if defined(__AVX512F__)
void fma_peak_ymm(benchmark::State& state) { fma_peak_of<fma_chains_256, 8>(state); }
#endif

void l1_gemm(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  constexpr int64_t n = 48, reps = 2000;
  std::vector<std::vector<float>> a(threads, std::vector<float>(n * n, 0.5f)), b = a, c = a;
  // oneDNN generates its kernel on the first call of a shape: outside the timing. Each thread
  // asks for one thread in its nested regions: a team of one is not "in parallel" for OpenMP,
  // and oneDNN would otherwise open a region of all cores around every 48^3 call.
#pragma omp parallel num_threads(threads)
  {
    omp_set_num_threads(1);
    const int t = omp_get_thread_num();
    dnnl_sgemm('N', 'N', n, n, n, 1.f, a[t].data(), n, b[t].data(), n, 0.f, c[t].data(), n);
  }
  for (auto _ : state) {
#pragma omp parallel num_threads(threads)
    {
      omp_set_num_threads(1);
      const int t = omp_get_thread_num();
      for (int64_t r = 0; r < reps; ++r)
        dnnl_sgemm('N', 'N', n, n, n, 1.f, a[t].data(), n, b[t].data(), n, 0.f, c[t].data(), n);
    }
    benchmark::DoNotOptimize(c.data());
  }
  const double flops = 2.0 * n * n * n * reps * threads;
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

void threads_args(benchmark::internal::Benchmark* b) {
  for (int t = 1; t <= omp_get_max_threads(); ++t) b->Arg(t);
  b->ArgName("threads")->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(fma_peak)->Apply(threads_args);
#if defined(__AVX512F__)
BENCHMARK(fma_peak_ymm)->Apply(threads_args);
#endif
BENCHMARK(l1_gemm)->Apply(threads_args);

}  // namespace
