// BatchNorm kernels at the benchmark rows of tests/cases/batchnorm_cases.h (ResNet-20's three
// stages at B-128: 16x32x32, 32x16x16, 64x8x8; and the first at batch 32): training forward
// (batch statistics), backward, inference forward. Two kernels: the reference (OpenMP over
// channels, one-chain sums in acc_order: the result does not depend on the thread count) and
// the fast float32 kernels (vectorised channel sums, used by every fast conv backend), so the
// suite measures both against the memory system: counter bytes/s = the tensors each pass must
// read and write (training forward: x read twice -- mean, then variance and y -- and y
// written; backward: x and dy read twice, dx written; inference: x read, y written), at 1 and
// 2 threads. Each benchmark first checks its pass against a float64 reference on the same row.
// Names: <fast|reference>/<pass>/<row>/threads:<t>.
//
// To add a shape: append a row to kBatchNormCases in tests/cases/batchnorm_cases.h (the tests
// read it too).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/ops/batchnorm.h"
#include "engine/random.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "tests/cases/batchnorm_cases.h"

namespace {

using namespace driftlab;

// Uniform values in [lo,hi) from a fixed stream: timing does not depend on them.
Tensor random_tensor(const Shape& shape, DType, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Tensor t(shape, DType::f32);
  Rng rng(RngEngine::mt19937_u24, seed);
  float* d = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = static_cast<float>(lo + (hi - lo) * rng.uniform_f32());
  return t;
}

enum class Pass { train_forward, backward, infer_forward };

// max |a - r| / max |r| over the pairs, r a float64 reference.
double normwise_error(const std::vector<std::pair<const Tensor*, const Tensor*>>& pairs) {
  double worst = 0;
  for (const auto& [a, r] : pairs) {
    double err = 0, mag = 0;
    for (int64_t i = 0; i < r->numel(); ++i) {
      err = std::max(err, std::fabs(a->at(i) - r->at(i)));
      mag = std::max(mag, std::fabs(r->at(i)));
    }
    worst = std::max(worst, err / std::max(mag, 1e-300));
  }
  return worst;
}

void bm_batchnorm(benchmark::State& state, Pass pass, BatchNormCase c, bool fast) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(static_cast<int>(state.range(0)));
  const BatchNormParams p = batchnorm_case_params(c);
  const Shape shape{c.n, c.c, c.s};
  const Tensor x = random_tensor(shape, DType::f32, 1, c.lo, c.hi), dy = random_tensor(shape, DType::f32, 2);
  const Tensor gamma = random_tensor({c.c}, DType::f32, 3, 0.5, 1.5), beta = random_tensor({c.c}, DType::f32, 4);
  Tensor y(shape, DType::f32), dx(shape, DType::f32), mean({c.c}, DType::f32), var({c.c}, DType::f32),
      invstd({c.c}, DType::f32), dgamma({c.c}, DType::f32), dbeta({c.c}, DType::f32);
  const Tensor rmean = random_tensor({c.c}, DType::f32, 5), rvar = random_tensor({c.c}, DType::f32, 6, 0.5, 2.0);
  batchnorm_forward_train_ref(p, x, gamma, beta, y, mean, var, invstd);
  const KernelRegistry reg = make_cpu_registry();
  const BatchNormKernel& k = reg.batchnorm.at(fast ? KernelBackend::fast : KernelBackend::reference);
  {  // Check once: the pass against the float64 reference of the same float32 inputs.
    const Tensor x64 = x.to(DType::f64), dy64 = dy.to(DType::f64), g64 = gamma.to(DType::f64),
                 b64 = beta.to(DType::f64);
    Tensor ry(shape, DType::f64), rm({c.c}, DType::f64), rv({c.c}, DType::f64), ri({c.c}, DType::f64),
        rdx(shape, DType::f64), rdg({c.c}, DType::f64), rdb({c.c}, DType::f64);
    Tensor cy(shape, DType::f32), cm({c.c}, DType::f32), cv({c.c}, DType::f32), ci({c.c}, DType::f32),
        cdx(shape, DType::f32), cdg({c.c}, DType::f32), cdb({c.c}, DType::f32);
    double err = 0;
    if (pass == Pass::infer_forward) {
      batchnorm_forward_infer_ref(p, x64, g64, b64, rmean.to(DType::f64), rvar.to(DType::f64), ry);
      k.forward_infer(p, x, gamma, beta, rmean, rvar, cy);
      err = normwise_error({{&cy, &ry}});
    } else {
      batchnorm_forward_train_ref(p, x64, g64, b64, ry, rm, rv, ri);
      k.forward_train(p, x, gamma, beta, cy, cm, cv, ci);
      if (pass == Pass::train_forward) {
        err = normwise_error({{&cy, &ry}, {&cm, &rm}, {&cv, &rv}, {&ci, &ri}});
      } else {
        batchnorm_backward_ref(p, x64, dy64, g64, b64, rm, ri, rdx, rdg, rdb);
        k.backward_train(p, x, dy, gamma, beta, cm, ci, cdx, cdg, cdb);
        err = normwise_error({{&cdx, &rdx}, {&cdg, &rdg}, {&cdb, &rdb}});
      }
    }
    // float32 sums of up to 131,072 terms a channel: the float32 reference's one chain is
    // 2.8e-5 off the float64 one at resnet20_s1_b128 (the fast kernel's lane sums are closer;
    // tests/ops/test_batchnorm.cpp's 2e-5 holds up to 32,768 terms). 1e-4 leaves a margin and
    // still catches indexing and formula bugs, which move outputs by percents.
    if (!(err <= 1e-4)) {
      state.SkipWithError(("differs from the float64 reference: normwise error " + std::to_string(err)).c_str());
      omp_set_num_threads(saved);
      return;
    }
  }
  double bytes_per_pass = 0;
  const double t = 4.0 * static_cast<double>(x.numel());
  for (auto _ : state) {
    switch (pass) {
      case Pass::train_forward:
        k.forward_train(p, x, gamma, beta, y, mean, var, invstd);
        bytes_per_pass = 3 * t;
        break;
      case Pass::backward:
        k.backward_train(p, x, dy, gamma, beta, mean, invstd, dx, dgamma, dbeta);
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
  for (const BatchNormCase& c : cases_for(kBatchNormCases, kBench))
    for (const auto& [pass, name] : passes)
      for (const bool fast : {false, true}) {
        if (fast && pass == Pass::infer_forward) continue;  // one inference kernel
        const std::string n = std::string(fast ? "fast/" : "reference/") + name + "/" + c.name;
        auto* b = benchmark::RegisterBenchmark(n.c_str(), bm_batchnorm, pass, c, fast);
        b->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
      }
  return true;
}

const bool registered = register_benchmarks();

}  // namespace
