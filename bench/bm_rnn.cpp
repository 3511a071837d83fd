// LSTM/GRU kernels at the benchmark shape of issue 6 (batch 128, 28 steps of 28 features, 128
// units; the torch preset's cells: sigmoid gates, two biases, reset-after GRU): the forward
// with its workspace (training), the backward (dh for every step; no dx, as for a first
// layer), inference (no workspace), for the fast kernel on the oneDNN GEMM and, once per cell, the reference kernel.
// Counter GFLOP/s = the multiply-adds of the gate products (forward: N*T*G*H*(F+H); backward
// twice that: dh_{t-1} and the weight gradients, plus dx's N*T*G*H*F when computed) x 2.
#include <benchmark/benchmark.h>

#include <vector>

#include "kernels/cpu/registry.h"
#include "engine/ops/rnn.h"
#include "engine/random.h"

namespace {

using namespace driftlab;

std::vector<float> random_vec(int64_t n, uint64_t seed, float scale) {
  std::vector<float> v(static_cast<std::size_t>(n));
  Rng rng(RngEngine::mt19937_u24, seed);
  for (float& x : v) x = scale * (2.0f * rng.uniform_f32() - 1.0f);
  return v;
}

enum class Pass { forward, inference, backward };

void bm_rnn(benchmark::State& state, RnnCell cell, Pass pass, KernelBackend backend) {
  RnnParams p;
  p.cell = cell;
  p.batch = state.range(1);
  p.steps = 28;
  p.input = 28;
  p.hidden = 128;
  const int64_t G = rnn_gates(cell), N = p.batch, S = p.steps, F = p.input, H = p.hidden;
  static const KernelRegistry reg = make_cpu_registry();
  const RnnKernel& k = reg.rnn.at(backend);
  RnnExec ex{static_cast<int>(state.range(0))};
  const std::vector<float> x = random_vec(N * S * F, 1, 1.0f), w_ih = random_vec(G * H * F, 2, 0.09f),
                           w_hh = random_vec(G * H * H, 3, 0.09f), b_ih = random_vec(G * H, 4, 0.09f),
                           b_hh = random_vec(G * H, 5, 0.09f), dh = random_vec(N * S * H, 6, 0.01f);
  std::vector<float> h(static_cast<std::size_t>(N * S * H)), ws(static_cast<std::size_t>(rnn_workspace_size(p)));
  std::vector<float> dw_ih(w_ih.size()), dw_hh(w_hh.size()), db_ih(b_ih.size()), db_hh(b_hh.size());
  const RnnWeights<float> w{w_ih.data(), w_hh.data(), b_ih.data(), b_hh.data(), nullptr};
  const RnnGrads<float> g{dw_ih.data(), dw_hh.data(), db_ih.data(), db_hh.data(), nullptr};
  k.forward_f32(p, ex, x.data(), nullptr, w, h.data(), ws.data());
  for (auto _ : state) {
    if (pass != Pass::backward)
      k.forward_f32(p, ex, x.data(), nullptr, w, h.data(), pass == Pass::forward ? ws.data() : nullptr);
    else
      k.backward_f32(p, ex, x.data(), nullptr, w, h.data(), ws.data(), dh.data(), nullptr, g);
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * static_cast<double>(N * S * G * H * (F + H)) * (pass == Pass::backward ? 2 : 1);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void thread_args(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2}) b->Args({t, 128});
  b->ArgNames({"threads", "batch"})->UseRealTime()->Unit(benchmark::kMillisecond);
}

#define DL_RNN_BM(name, cell, pass, backend) \
  BENCHMARK_CAPTURE(bm_rnn, name, RnnCell::cell, Pass::pass, KernelBackend::backend)->Apply(thread_args)

DL_RNN_BM(lstm_forward_fast, lstm, forward, fast);
DL_RNN_BM(lstm_inference_fast, lstm, inference, fast);
DL_RNN_BM(lstm_backward_fast, lstm, backward, fast);
DL_RNN_BM(gru_forward_fast, gru, forward, fast);
DL_RNN_BM(gru_inference_fast, gru, inference, fast);
DL_RNN_BM(gru_backward_fast, gru, backward, fast);
BENCHMARK_CAPTURE(bm_rnn, lstm_forward_ref, RnnCell::lstm, Pass::forward, KernelBackend::reference)
    ->Args({1, 128})->ArgNames({"threads", "batch"})->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
