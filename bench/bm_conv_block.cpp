// LeNet's conv blocks (conv 5x5 + bias -> relu -> 2x2 max pool) at batch 128, a training step's
// share: forward (keeping what the backward needs), then the backward with the weight and bias
// gradients and, for the second blocks, the input gradient (the first block's dx is not needed
// in training). Two paths:
//   fused:  the conv_block fast kernel (kernels/cpu/fast/conv_block_fast.cpp), one op per image;
//   layers: what conv_block_backend=reference runs under the torch preset: oneDNN's convolution
//           (forward, backward data, backward weight), the fast relu and the fast max pooling.
// Counter: FLOP/s of the convolution work (2 x MACs x (2 or 3 passes)); images/s.
// Names: BM_ConvBlock/<row>/<fused|layers>.
#include <benchmark/benchmark.h>

#include <string>

#include "core/ops/conv_block.h"
#include "engine/policy.h"
#include "engine/random.h"
#include "kernels/cpu/registry.h"

namespace {

using namespace driftlab;

struct Row {
  const char* name;
  int64_t c, h, k;
  bool dx;  // the input gradient is part of a training step's backward
};
const Row kRows[] = {{"lenet5_conv1", 1, 28, 6, false},
                     {"lenet5_conv2", 6, 12, 16, true},
                     {"lenet1_conv1", 1, 28, 4, false},
                     {"lenet1_conv2", 4, 12, 12, true}};
constexpr int64_t kBatch = 128;

Tensor random_input(const Shape& shape, uint64_t seed) {
  Tensor x(shape, DType::f32);
  Rng rng(RngEngine::mt19937_u24, seed);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = rng.uniform<float>(-1.f, 1.f);
  return x;
}

ConvBlockParams params_of(const Row& r) {
  ConvBlockParams p;
  p.conv.n = kBatch, p.conv.c = r.c, p.conv.h = p.conv.w = r.h, p.conv.k = r.k, p.conv.r = p.conv.s = 5;
  p.pool.n = kBatch, p.pool.c = r.k, p.pool.h = p.pool.w = p.conv.out_h();
  p.validate();
  return p;
}

void bm_conv_block(benchmark::State& state, Row row, bool fused) {
  const ConvBlockParams p = params_of(row);
  const KernelRegistry reg = make_cpu_registry();
  const Tensor x = random_input(p.x_shape(), 1), w = random_input(p.conv.w_shape(), 2);
  const Tensor b = random_input({row.k}, 3), dy = random_input(p.y_shape(), 4);
  Tensor y(p.y_shape(), DType::f32), z(p.z_shape(), DType::f32), a(p.z_shape(), DType::f32);
  Tensor da(p.z_shape(), DType::f32), dz(p.z_shape(), DType::f32), dx(p.x_shape(), DType::f32);
  Tensor dw(p.conv.w_shape(), DType::f32), db({row.k}, DType::f32);
  const ConvBlockKernel& block = reg.conv_block.at(KernelBackend::fast);
  if (fused && !(block.name && block.supports(p, DType::f32))) {
    state.SkipWithError("no fast conv_block for this row in this build");
    return;
  }
  const Conv2dKernel& conv = reg.conv2d.select(KernelBackend::onednn, p.conv, DType::f32);
  const ActivationKernel& act = reg.activation.select(KernelBackend::fast, p.act, DType::f32);
  const Pool2dKernel& pool = reg.maxpool2d.select(KernelBackend::fast, p.pool, DType::f32);
  for (auto _ : state) {
    if (fused) {
      block.forward(p, x, w, &b, y, &z);
      block.backward(p, x, w, z, dy, row.dx ? &dx : nullptr, &dw, &db);
    } else {
      conv.forward(p.conv, x, w, &b, z);
      act.forward(p.act, z, a);
      pool.forward(p.pool, a, y);
      pool.backward(p.pool, a, dy, da);
      act.backward(p.act, z, a, da, dz);
      if (row.dx) conv.backward_data(p.conv, dz, w, dx);
      conv.backward_weight(p.conv, x, dz, dw, &db);
    }
    benchmark::DoNotOptimize(dw.raw());
  }
  const double macs = static_cast<double>(kBatch * row.k * p.conv.out_h() * p.conv.out_w() * row.c * 25);
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * macs * (row.dx ? 3 : 2) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["images/s"] =
      benchmark::Counter(static_cast<double>(kBatch * state.iterations()), benchmark::Counter::kIsRate);
}

int register_all() {
  for (const Row& r : kRows)
    for (bool fused : {true, false})
      benchmark::RegisterBenchmark((std::string("BM_ConvBlock/") + r.name + (fused ? "/fused" : "/layers")).c_str(),
                                   bm_conv_block, r, fused)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  return 0;
}
const int kRegistered = register_all();

}  // namespace
