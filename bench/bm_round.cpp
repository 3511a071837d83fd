// The math modes' rounding loops (kernels/cpu/fast/round_fast.h): one float32 array of 1M
// elements (4 MB: past L2, in L3 on the machines of this project) rounded in place to TF32,
// bfloat16 and float16 by each path this CPU runs. Counter: bytes read and written per second (8
// per element), against BM_CopyFloats, memcpy of the same 4 MB to another array (the same
// traffic: the limit of a pass that reads and writes every element once). The result is checked
// bit for bit against the scalar functions once before timing (the tests' contract:
// tests/ops/test_round_fast.cpp).
// Names: BM_RoundFloats/<scalar|avx2|avx512>/<tf32|bf16|fp16>, BM_CopyFloats.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/fast/round_fast.h"

namespace {

using namespace driftlab;

constexpr int64_t kN = 1 << 20;

std::vector<float> input() {
  std::vector<float> v(kN);
  for (int64_t i = 0; i < kN; ++i) v[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i)) * 100.0);
  return v;
}

void BM_RoundFloats(benchmark::State& state, RoundPath p, RoundFormat f) {
  if (!round_path_available(p)) {
    state.SkipWithError("this CPU has no such path");
    return;
  }
  const std::vector<float> src = input();
  std::vector<float> d = src, ref = src;
  round_floats_on(p, d.data(), kN, f, Rounding::nearest_even);
  round_floats_reference(ref.data(), kN, f, Rounding::nearest_even);
  if (std::memcmp(d.data(), ref.data(), sizeof(float) * kN) != 0) {
    state.SkipWithError("differs from the scalar functions");
    return;
  }
  // Rounding a rounded array is the same work (the vector paths have no branch on the value, and
  // these values are normal numbers for the scalar one), so the array is rounded again each time.
  for (auto _ : state) {
    round_floats_on(p, d.data(), kN, f, Rounding::nearest_even);
    benchmark::DoNotOptimize(d.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

void BM_CopyFloats(benchmark::State& state) {
  const std::vector<float> src = input();
  std::vector<float> d(src.size());
  for (auto _ : state) {
    std::memcpy(d.data(), src.data(), sizeof(float) * kN);
    benchmark::DoNotOptimize(d.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kN * 8);
}
BENCHMARK(BM_CopyFloats)->Unit(benchmark::kMicrosecond);

const int kRegistered = [] {
  for (RoundPath p : {RoundPath::scalar, RoundPath::avx2, RoundPath::avx512})
    for (RoundFormat f : {RoundFormat::tf32, RoundFormat::bf16, RoundFormat::fp16}) {
      const char* fn = f == RoundFormat::tf32 ? "tf32" : f == RoundFormat::bf16 ? "bf16" : "fp16";
      benchmark::RegisterBenchmark((std::string("BM_RoundFloats/") + round_path_name(p) + "/" + fn).c_str(),
                                   BM_RoundFloats, p, f)
          ->Unit(benchmark::kMicrosecond);
    }
  return 0;
}();

}  // namespace
