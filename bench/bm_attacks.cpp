// Attack speed: adversarial examples per second of FGSM and BIM (10 steps) through the
// model face (attacks/gradient.h: Runner::input_gradient at inference semantics), and model
// queries per second of the decision-based attacks (the Boundary attack's step: 25 candidates
// judged in one logits() call; the whole Boundary attack under Foolbox 2's and Foolbox 3's rules). LeNet-5 on 1x28x28 U(0,1) images and ResNet-20 on 3x32x32 U(-1,1)
// images, torch preset (random weights, ResNet-20 with random BatchNorm statistics). The same work
// in PyTorch, in the same shell command: bench/peers/attacks_torch.py.
//
// Counters: ex/s (adversarial examples per second) or queries/s.
// Run e.g.: bm_attacks --benchmark_filter='Fgsm' (the peer under the same OpenMP wait policy:
// OMP_WAIT_POLICY=passive slowed driftlab 20-50% on a 2-vCPU VM, its threads woken through the
// hypervisor between parallel regions: docs/BENCHMARKS.md, 2026-11-28)
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstring>

#include "attacks/boundary.h"
#include "attacks/gradient.h"
#include "engine/random.h"
#include "engine/train/cpu_runner.h"
#include "models/models.h"

namespace driftlab {
namespace {

const char* kArchs[] = {"lenet5", "resnet20"};

Tensor inputs(const std::string& arch, int64_t n, uint64_t seed) {
  const bool lenet = arch == "lenet5";
  Tensor x = lenet ? Tensor({n, 1, 28, 28}, DType::f32) : Tensor({n, 3, 32, 32}, DType::f32);
  Rng rng(RngEngine::mt19937_u24, seed);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = lenet ? rng.uniform_f32() : 2.f * rng.uniform_f32() - 1.f;
  return x;
}

Tensor rows_of(const Tensor& x, int64_t m) {
  Shape s = x.shape();
  s[0] = m;
  Tensor r(s, x.dtype());
  std::memcpy(r.raw(), x.raw(), r.nbytes());
  return r;
}

Model model_for(const std::string& arch) {
  Model m = build_model(arch, Policy::torch(), 7);
  Rng rng(RngEngine::mt19937_u24, 11);
  for (auto& nb : m.net->named_buffers()) {  // BatchNorm statistics away from (0, 1)
    float* d = nb.second->value.data<float>();
    const bool var = nb.first.find("running_var") != std::string::npos;
    for (int64_t i = 0; i < nb.second->value.numel(); ++i) d[i] = var ? 0.5f + 1.5f * rng.uniform_f32() : rng.uniform_f32() - 0.5f;
  }
  return m;
}

std::vector<int32_t> cyclic_labels(int64_t n) {
  std::vector<int32_t> y(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<int32_t>(i % 10);
  return y;
}

// eps 0.03, BIM step 0.01 x 10 steps, the images' range (the peer's settings)
attacks::GradientAttackSpec bench_spec(const std::string& arch, bool bim, int64_t batch) {
  attacks::GradientAttackSpec spec;
  spec.kind = bim ? attacks::AttackKind::bim : attacks::AttackKind::fgsm;
  spec.eps = 0.03, spec.step = 0.01, spec.steps = 10, spec.batch = batch;
  spec.lo = arch == "lenet5" ? 0.0 : -1.0, spec.hi = 1.0;
  return spec;
}

struct Threads {
  int saved;
  explicit Threads(int t) : saved(omp_get_max_threads()) { omp_set_num_threads(t); }
  ~Threads() { omp_set_num_threads(saved); }
};

// args: arch index, attack (0 fgsm, 1 bim-10), batch, threads
void BM_GradientAttack(benchmark::State& state) {
  const std::string arch = kArchs[state.range(0)];
  const bool bim = state.range(1) == 1;
  const int64_t batch = state.range(2);
  const Threads threads(static_cast<int>(state.range(3)));
  Model m = model_for(arch);
  CpuRunner runner(m);
  const int64_t n = arch == "lenet5" ? 1024 : 128;
  const Tensor x = inputs(arch, n, 3);
  const std::vector<int32_t> y = cyclic_labels(n);
  const attacks::GradientAttackSpec spec = bench_spec(arch, bim, batch);
  // One untimed call first, as the PyTorch peer (bench/peers/attacks_torch.py) warms up before its
  // best of --reps: ResNet-20's 1-thread rows run one timed iteration, which otherwise carried the
  // first call's oneDNN primitive creation and fresh memory (503 ms against 279 ms per iteration
  // after it, 2026-11-27).
  attacks::run_gradient_attack(runner, x, y, spec);
  for (auto _ : state) benchmark::DoNotOptimize(attacks::run_gradient_attack(runner, x, y, spec).x_adv);
  state.counters["ex/s"] = benchmark::Counter(static_cast<double>(n * state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(arch + (bim ? " bim-10" : " fgsm") + " batch " + std::to_string(batch));
}

// The Boundary attack's queries: 25 candidates per logits() call. args: arch index, threads
void BM_DecisionQueries(benchmark::State& state) {
  const std::string arch = kArchs[state.range(0)];
  const Threads threads(static_cast<int>(state.range(1)));
  Model m = model_for(arch);
  CpuRunner runner(m);
  const Tensor x = inputs(arch, 25, 4);
  runner.logits(x);  // untimed, as the peer's warm-up
  for (auto _ : state) benchmark::DoNotOptimize(runner.logits(x));
  state.counters["queries/s"] = benchmark::Counter(25.0 * static_cast<double>(state.iterations()),
                                                   benchmark::Counter::kIsRate);
  state.SetLabel(arch + " 25 candidates per call");
}

// The whole Boundary attack (attacks/boundary.h: the start, the proposals, the judging, the step
// statistics), queries per second as the attack counts them. Foolbox 2's rules: 4 inputs one at a
// time, 25 candidates per step; Foolbox 3's: 128 inputs stepping together, one candidate each per
// step. The labels are the model's own predictions (every input is attacked). Peer: PyTorch forward
// passes of the same batch sizes (attacks_torch.py 'queries' rows): a lower bound on any PyTorch
// attack's time. args: arch index, rules (0 foolbox2, 1 foolbox3), threads
void BM_BoundaryAttack(benchmark::State& state) {
  const std::string arch = kArchs[state.range(0)];
  const bool fb3 = state.range(1) == 1;
  const Threads threads(static_cast<int>(state.range(2)));
  Model m = model_for(arch);
  CpuRunner runner(m);
  const int64_t n = fb3 ? 128 : 4;
  const Tensor x = inputs(arch, n, 5);  // inside the attack's bounds [-1, 1] (LeNet-5's in [0, 1))
  const std::vector<int32_t> y = predictions(runner.logits(x));
  attacks::BoundarySpec spec = attacks::boundary_defaults(fb3 ? attacks::BoundaryRules::foolbox3
                                                              : attacks::BoundaryRules::foolbox2);
  spec.steps = fb3 ? 200 : 20;
  spec.lo = -1, spec.hi = 1;
  int64_t queries = 0;
  for (auto _ : state) {
    const attacks::BoundaryResult r = attacks::run_boundary(runner, x, y, spec);
    for (int64_t q : r.queries) queries += q;
  }
  state.counters["queries/s"] = benchmark::Counter(static_cast<double>(queries), benchmark::Counter::kIsRate);
  state.SetLabel(arch + (fb3 ? " foolbox3, 128 inputs, 200 steps" : " foolbox2, 4 inputs, 20 steps x 25"));
}

// The attack's own host work, with a model that costs nothing: a Runner answering every call with
// one precomputed gradient and logits (shared storage, no copy). What is left is attacks/gradient.cpp
// itself: the bounds check, the copies, sign/step/projection/clamp per element, the predictions and
// the per-sample norms. On a device (bm_cuda's BM_CudaAttack) this is the floor under every call.
// args: arch index, attack (0 fgsm, 1 bim-10), inputs, batch, threads
class CachedRunner : public Runner {
 public:
  CachedRunner(Model& m, InputGradient g) : Runner(m, TrainConfig{}), g_(std::move(g)) {}
  Device device() const override { return Device::cpu; }
  std::string describe() const override { return "cached"; }
  Tensor logits(const Tensor& x, int64_t) override { return x.dim(0) == g_.logits.dim(0) ? g_.logits : Tensor({x.dim(0), 10}, DType::f32); }
  InputGradient input_gradient(const Tensor&, const std::vector<int32_t>&, Semantics) override { return g_; }
  double train_step(const Tensor&, const std::vector<int32_t>&, int64_t*) override { return 0; }
  PredictTime time_prediction(const Tensor&, int64_t) override { return {}; }
  OptimState optimizer_state() override { return {}; }
  void set_optimizer_state(const OptimState&) override {}

 private:
  InputGradient g_;
};

void BM_AttackHostWork(benchmark::State& state) {
  const std::string arch = kArchs[state.range(0)];
  const bool bim = state.range(1) == 1;
  const int64_t n = state.range(2), batch = state.range(3);
  const Threads threads(static_cast<int>(state.range(4)));
  Model m = model_for(arch);
  const Tensor x = inputs(arch, n, 3);
  const std::vector<int32_t> y = cyclic_labels(n);
  InputGradient g;
  {
    CpuRunner real(m);
    g = real.input_gradient(rows_of(x, batch), std::vector<int32_t>(y.begin(), y.begin() + batch), Semantics::inference);
  }
  CachedRunner runner(m, g);
  const attacks::GradientAttackSpec spec = bench_spec(arch, bim, batch);
  attacks::run_gradient_attack(runner, x, y, spec);
  for (auto _ : state) benchmark::DoNotOptimize(attacks::run_gradient_attack(runner, x, y, spec).x_adv);
  state.counters["ex/s"] = benchmark::Counter(static_cast<double>(n * state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(arch + (bim ? " bim-10" : " fgsm") + " host work only");
}

void gradient_args(benchmark::internal::Benchmark* b) {
  for (int a = 0; a < 2; ++a)
    for (int k = 0; k < 2; ++k)
      for (int t : {1, 2}) b->Args({a, k, a == 0 ? 128 : 32, t});
}

BENCHMARK(BM_GradientAttack)->Apply(gradient_args)->ArgNames({"arch", "bim", "batch", "threads"})->UseRealTime()
    ->Unit(benchmark::kMillisecond);
// bm_cuda's BM_CudaAttack sizes
BENCHMARK(BM_AttackHostWork)->Args({0, 0, 10000, 1000, 1})->Args({0, 1, 10000, 1000, 1})->Args({1, 0, 1024, 256, 1})
    ->Args({1, 1, 1024, 256, 1})->Args({0, 0, 10000, 1000, 2})->Args({0, 1, 10000, 1000, 2})
    ->ArgNames({"arch", "bim", "n", "batch", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecisionQueries)->ArgsProduct({{0, 1}, {1, 2}})->ArgNames({"arch", "threads"})->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BoundaryAttack)->ArgsProduct({{0, 1}, {0, 1}, {1, 2}})->ArgNames({"arch", "fb3", "threads"})
    ->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace driftlab
