// LSTM/GRU kernels at the benchmark shapes of tests/cases/rnn_cases.h (the zoo's LSTM/GRU
// classifiers: batch 128, 28 steps of 28 features, 128 units) for every cell of its kRnnCases (the
// presets' cells and the variants cuDNN splits on; lstm_torch and gru_torch are the torch preset's:
// sigmoid gates, two biases, reset-after GRU): the forward with its workspace (training), the
// backward (dh for every step; no dx, as for a first layer), inference (no workspace), for the fast
// kernel on the oneDNN GEMM at 1 and 2 threads and, once per cell, the reference kernel's forward.
// Each benchmark first checks the kernel's forward and backward against the reference on the first
// two sequences of the shape.
// Counter GFLOP/s = the multiply-adds of the gate products (forward: N*T*G*H*(F+H); backward
// twice that: dh_{t-1} and the weight gradients, plus dx's N*T*G*H*F when computed) x 2.
// Names: <cell>/<shape>/<forward|inference|backward>/<fast|reference>/threads:<t>.
//
// To add a cell or a shape: append a row to tests/cases/rnn_cases.h (the tests read it too).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/ops/rnn.h"
#include "engine/random.h"
#include "kernels/cpu/registry.h"
#include "tests/cases/rnn_cases.h"

namespace {

using namespace driftlab;

std::vector<float> random_vec(int64_t n, uint64_t seed, float scale) {
  std::vector<float> v(static_cast<std::size_t>(n));
  Rng rng(RngEngine::mt19937_u24, seed);
  for (float& x : v) x = scale * (2.0f * rng.uniform_f32() - 1.0f);
  return v;
}

// Inputs, weights, outputs and gradients of one kernel call; the absent bias and peepholes are
// passed as null, as the layers pass them.
struct RnnBuffers {
  RnnParams p;
  std::vector<float> x, w_ih, w_hh, b_ih, b_hh, w_peep, dh, h, ws, dw_ih, dw_hh, db_ih, db_hh, dw_peep;
  explicit RnnBuffers(const RnnParams& params) : p(params) {
    const int64_t G = rnn_gates(p.cell), N = p.batch, S = p.steps, F = p.input, H = p.hidden;
    x = random_vec(N * S * F, 1, 1.0f), w_ih = random_vec(G * H * F, 2, 0.09f), w_hh = random_vec(G * H * H, 3, 0.09f);
    b_ih = random_vec(G * H, 4, 0.09f), b_hh = random_vec(G * H, 5, 0.09f), dh = random_vec(N * S * H, 6, 0.01f);
    w_peep = random_vec(3 * H, 7, 0.09f);
    h.resize(static_cast<std::size_t>(N * S * H)), ws.resize(static_cast<std::size_t>(rnn_workspace_size(p)));
    dw_ih.resize(w_ih.size()), dw_hh.resize(w_hh.size()), db_ih.resize(b_ih.size()), db_hh.resize(b_hh.size());
    dw_peep.resize(w_peep.size());
  }
  RnnWeights<float> weights() const {
    return {w_ih.data(), w_hh.data(), b_ih.data(), p.two_biases ? b_hh.data() : nullptr,
            p.peepholes ? w_peep.data() : nullptr};
  }
  RnnGrads<float> grads() {
    return {dw_ih.data(), dw_hh.data(), db_ih.data(), p.two_biases ? db_hh.data() : nullptr,
            p.peepholes ? dw_peep.data() : nullptr};
  }
  void forward(const RnnKernel& k, const RnnExec& ex, bool keep_workspace) {
    k.forward_f32(p, ex, x.data(), nullptr, weights(), h.data(), keep_workspace ? ws.data() : nullptr);
  }
  void backward(const RnnKernel& k, const RnnExec& ex) {
    k.backward_f32(p, ex, x.data(), nullptr, weights(), h.data(), ws.data(), dh.data(), nullptr, grads());
  }
};

// max |a - r| / max |r| over h and every gradient of one forward and backward on the first two
// sequences of p's shape.
double check_against_reference(const RnnKernel& k, const RnnKernel& ref, RnnParams p) {
  p.batch = std::min<int64_t>(p.batch, 2);
  RnnBuffers a(p), r(p);
  a.forward(k, RnnExec{1}, true);
  a.backward(k, RnnExec{1});
  r.forward(ref, RnnExec{1}, true);
  r.backward(ref, RnnExec{1});
  const std::pair<const std::vector<float>*, const std::vector<float>*> outs[] = {
      {&a.h, &r.h}, {&a.dw_ih, &r.dw_ih}, {&a.dw_hh, &r.dw_hh}, {&a.db_ih, &r.db_ih}, {&a.db_hh, &r.db_hh},
      {&a.dw_peep, &r.dw_peep}};
  double worst = 0;
  for (const auto& [got, want] : outs) {
    double err = 0, mag = 0;
    for (std::size_t i = 0; i < want->size(); ++i) {
      err = std::max(err, std::fabs(static_cast<double>((*got)[i]) - static_cast<double>((*want)[i])));
      mag = std::max(mag, std::fabs(static_cast<double>((*want)[i])));
    }
    if (mag > 0) worst = std::max(worst, err / mag);
  }
  return worst;
}

enum class Pass { forward, inference, backward };
const char* pass_name(Pass p) {
  return p == Pass::forward ? "forward" : p == Pass::inference ? "inference" : "backward";
}

void bm_rnn(benchmark::State& state, RnnParams p, Pass pass, KernelBackend backend) {
  static const KernelRegistry reg = make_cpu_registry();
  const RnnKernel& k = reg.rnn.at(backend);
  // float32 with other summation orders and the fast kernel's polynomial exp/tanh, through 28
  // steps: measured at most 1e-6 of the largest output, every cell; 1e-4 only catches real bugs.
  const double err = check_against_reference(k, reg.rnn.at(KernelBackend::reference), p);
  if (!(err < 1e-4)) {
    state.SkipWithError(("differs from the reference: relative error " + std::to_string(err)).c_str());
    return;
  }
  const RnnExec ex{static_cast<int>(state.range(0))};
  RnnBuffers bu(p);
  bu.forward(k, ex, true);
  for (auto _ : state) {
    if (pass != Pass::backward)
      bu.forward(k, ex, pass == Pass::forward);
    else
      bu.backward(k, ex);
    benchmark::ClobberMemory();
  }
  const double G = static_cast<double>(rnn_gates(p.cell));
  const double flops = 2.0 * static_cast<double>(p.batch * p.steps) * G * static_cast<double>(p.hidden) *
                       static_cast<double>(p.input + p.hidden) * (pass == Pass::backward ? 2 : 1);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

bool register_benchmarks() {
  for (const RnnCase& c : cases_for(kRnnCases, kBench))
    for (const RnnShapeCase& s : cases_for(kRnnShapes, kBench)) {
      const RnnParams p = rnn_case_params(c, s.s);
      const std::string base = std::string(c.name) + "/" + s.name + "/";
      for (Pass pass : {Pass::forward, Pass::inference, Pass::backward})
        benchmark::RegisterBenchmark((base + pass_name(pass) + "/fast").c_str(), bm_rnn, p, pass, KernelBackend::fast)
            ->ArgName("threads")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark((base + "forward/reference").c_str(), bm_rnn, p, Pass::forward,
                                   KernelBackend::reference)
          ->ArgName("threads")->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);
    }
  return true;
}

const bool registered = register_benchmarks();

}  // namespace
