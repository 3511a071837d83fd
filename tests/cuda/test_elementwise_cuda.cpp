// CUDA activations and SGD step against the CPU: relu (every grad-at-zero), hard sigmoid
// (both slopes and edge rules, inputs on the edges; tests/cases/activation_cases.h's rows,
// shared with the CPU test) and every SGD form x decay placement x Nesterov bit for bit (pure
// + - * / with the same roundings: kernels built with -fmad=false); tanh and sigmoid within a
// few ulps (CUDA's tanh/exp against glibc's).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/layers/layer.h"
#include "core/ops/activation.h"
#include "engine/train/optimizer.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cuda/ops.h"
#include "tests/cases/activation_cases.h"
#include "tests/cuda/cuda_test_util.h"

namespace driftlab {
namespace {

// Values with exact zeros and hard-sigmoid edge points (x = +-2.5 for slope 0.2, +-3 for 1/6).
Tensor act_input(DType dt) {
  Tensor x = random_tensor({7, 131}, dt, 50, -4.0, 4.0);
  const double edges[] = {0.0, 2.5, -2.5, 3.0, -3.0, 2.50000024, -0.0};
  for (int i = 0; i < 7; ++i)
    dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      x.data<T>()[i * 17] = static_cast<T>(edges[i]);
    });
  return x;
}

TEST(CudaActivation, MatchesReference) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor x = act_input(dt), dy = random_tensor(x.shape(), dt, 51);
    for (const ActivationCase& c : cases_for(kActivationCases, kCudaTest)) {
      const ActivationParams& p = c.p;
      Tensor ry(x.shape(), dt), rdx(x.shape(), dt);
      activation_forward_ref(p, x, ry);
      activation_backward_ref(p, x, ry, dy, rdx);
      cuda::DeviceTensor gx = cuda::to_device(ctx, x), gdy = cuda::to_device(ctx, dy);
      cuda::DeviceTensor gy(ctx, x.shape(), dt), gdx(ctx, x.shape(), dt);
      cuda::activation_forward_cuda(ctx, p, gx, gy);
      // backward from the reference's y, so that only the backward formula is compared
      cuda::DeviceTensor gry = cuda::to_device(ctx, ry);
      cuda::activation_backward_cuda(ctx, p, gx, gry, gdy, gdx);
      const std::string what = std::string(c.name) + " " + dtype_name(dt);
      if (p.kind == ActKind::tanh || p.kind == ActKind::sigmoid) {
        // CUDA tanh/exp are within 2 ulp, glibc's within 1; sigmoid adds one add and one
        // divide: 4 ulp of the result, plus 4 eps absolute near 0 where ulps shrink.
        EXPECT_TRUE(all_close(cuda::to_host(ctx, gy), ry, 4 * dtype_eps(dt), 4 * dtype_eps(dt))) << what;
        EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, gdx), rdx)) << what << " backward (from y: exact ops only)";
      } else {
        EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, gy), ry)) << what;
        EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, gdx), rdx)) << what;
      }
    }
  }
}

// The CPU optimiser on one parameter vs sgd_step_cuda, three steps.
TEST(CudaSgd, EveryFormBitwiseAsCpu) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  const SgdForm forms[] = {SgdForm::torch_buffer, SgdForm::keras_velocity, SgdForm::lasagne_difference};
  const WeightDecayMode decays[] = {WeightDecayMode::grad_add, WeightDecayMode::l2_loss, WeightDecayMode::decoupled};
  for (DType dt : {DType::f32, DType::f64})
    for (const auto& f : forms)
      for (const auto& d : decays)
        for (double mu : {0.0, 0.9})
          for (bool nesterov : {false, true}) {
            if (nesterov && mu == 0.0) continue;
            OptimConfig cfg;
            cfg.lr = 0.05, cfg.momentum = mu, cfg.nesterov = nesterov, cfg.weight_decay = 1e-3;
            const OptimRule rule{f, d, true, KernelBackend::fast};
            Optimizer cpu(cfg, rule);
            const ExecContext exec;
            Param prm;
            prm.value = random_tensor({5, 37}, dt, 60);
            prm.grad = Tensor(prm.value.shape(), dt);
            std::vector<std::pair<std::string, Param*>> params = {{"w", &prm}};
            cuda::DeviceTensor gp = cuda::to_device(ctx, prm.value);
            cuda::DeviceTensor gs = cuda::DeviceTensor::zeros(ctx, prm.value.shape(), dt);
            for (int step = 0; step < 3; ++step) {
              Tensor g = random_tensor(prm.value.shape(), dt, 70 + step);
              prm.grad = g.clone();
              cuda::DeviceTensor gg = cuda::to_device(ctx, g);
              const SgdStepParams sp = sgd_step_params(cfg, rule, false, step == 0);
              cpu.step(exec, params);
              cuda::sgd_step_cuda(ctx, sp, gp, gg, gs);
            }
            EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, gp), prm.value))
                << "form " << static_cast<int>(f) << " decay " << static_cast<int>(d) << " mu " << mu
                << " nesterov " << nesterov << " " << dtype_name(dt);
          }
}

// The CPU optimiser on one parameter vs adam_step_cuda / rmsprop_step_cuda, three steps, every
// form with weight decay (the per-step parameters formed by the same OptimSchedule).
TEST(CudaAdaptive, AdamAndRmspropBitwiseAsCpu) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  const char* policies[] = {"torch", "tensorflow", "torch,adam_form=corrected_quotient,optim_moment_update=increment",
                            "torch,rmsprop_form=eps_inside_root,rmsprop_ms_init=ones,weight_decay_mode=decoupled_scale"};
  for (DType dt : {DType::f32, DType::f64})
    for (const char* pol : policies)
      for (OptimizerKind kind : {OptimizerKind::adam, OptimizerKind::rmsprop}) {
        OptimConfig cfg;
        cfg.kind = kind, cfg.lr = 1e-2, cfg.weight_decay = 1e-3, cfg.momentum = kind == OptimizerKind::rmsprop ? 0.9 : 0.0;
        const OptimRule rule = resolve_optim(Policy::parse(pol));
        Optimizer cpu(cfg, rule);
        OptimSchedule sched(cfg, rule);
        const ExecContext exec;
        Param prm;
        prm.value = random_tensor({5, 37}, dt, 60);
        prm.grad = Tensor(prm.value.shape(), dt);
        std::vector<std::pair<std::string, Param*>> params = {{"w", &prm}};
        cuda::DeviceTensor gp = cuda::to_device(ctx, prm.value);
        Tensor s0(prm.value.shape(), dt);
        s0.fill(sched.slot0_init());
        cuda::DeviceTensor ga = cuda::to_device(ctx, s0), gb = cuda::DeviceTensor::zeros(ctx, prm.value.shape(), dt);
        for (int step = 0; step < 3; ++step) {
          Tensor g = random_tensor(prm.value.shape(), dt, 70 + step);
          prm.grad = g.clone();
          cuda::DeviceTensor gg = cuda::to_device(ctx, g);
          OptimStep st = sched.next(cfg.lr);
          st.for_tensor(false);
          cpu.step(exec, params);
          if (kind == OptimizerKind::adam) cuda::adam_step_cuda(ctx, st.adam, gp, gg, ga, gb);
          else cuda::rmsprop_step_cuda(ctx, st.rmsprop, gp, gg, ga, gb);
        }
        EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, gp), prm.value))
            << pol << " " << optimizer_name(kind) << " " << dtype_name(dt);
      }
}

// The training step's gradient check in one launch (engine/train/cuda_runner.cpp): every
// tensor's flag against the host's own look at the same values, with the bad value at the
// first, the last and a middle element, in tensors shorter than a block and longer than the
// grid (the kernel strides), an empty one, and a table rebound when one tensor is replaced.
TEST(CudaTensorOps, FlagNonFiniteManyFlagsExactlyTheBadTensors) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  for (DType dt : {DType::f32, DType::f64}) {
    const std::vector<int64_t> sizes = {1, 300, 0, 40000, 17, 5};
    std::vector<Tensor> host;
    for (std::size_t i = 0; i < sizes.size(); ++i) host.push_back(random_tensor({sizes[i]}, dt, 60 + i, -1.0, 1.0));
    auto put = [&](std::size_t t, int64_t at, double v) {
      dispatch_dtype(dt, [&](auto tag) { host[t].data<decltype(tag)>()[at] = static_cast<decltype(tag)>(v); });
    };
    const double inf = std::numeric_limits<double>::infinity();
    put(1, 0, std::nan(""));  // first element
    put(3, 39999, -inf);      // last element, past the first 64 blocks' stride
    put(4, 8, inf);           // a middle one
    std::vector<cuda::DeviceTensor> dev;
    for (const Tensor& h : host) dev.push_back(cuda::to_device(ctx, h));
    auto expected = [&] {
      std::vector<float> e;
      for (const Tensor& h : host) {
        bool bad = false;
        for (int64_t k = 0; k < h.numel(); ++k) bad = bad || !std::isfinite(h.at(k));
        e.push_back(bad ? 1.0f : 0.0f);
      }
      return e;
    };
    cuda::TensorTable table;
    auto flags_now = [&] {
      std::vector<const cuda::DeviceTensor*> ptrs;
      for (const cuda::DeviceTensor& d : dev) ptrs.push_back(&d);
      table.bind(ctx, ptrs);
      cuda::DeviceTensor flags = cuda::DeviceTensor::zeros(ctx, {static_cast<int64_t>(dev.size())}, DType::f32);
      cuda::flag_nonfinite_many_cuda(ctx, table, flags);
      const Tensor f = cuda::to_host(ctx, flags);
      return std::vector<float>(f.data<float>(), f.data<float>() + f.numel());
    };
    const std::vector<float> first = flags_now();
    EXPECT_EQ(first, expected()) << dtype_name(dt);
    EXPECT_EQ(first, (std::vector<float>{0, 1, 0, 1, 1, 0})) << dtype_name(dt);
    // Tensor 5 replaced by a new one holding a NaN, tensor 1 repaired in place: the table
    // follows the new address, the flags the new values.
    put(5, 4, std::nan(""));
    dev[5] = cuda::to_device(ctx, host[5]);
    put(1, 0, 0.5);
    cuda::copy_to_device(ctx, host[1], dev[1]);
    EXPECT_EQ(flags_now(), expected()) << dtype_name(dt);
    EXPECT_EQ(flags_now(), (std::vector<float>{0, 0, 0, 1, 1, 1})) << dtype_name(dt);
  }
}

}  // namespace
}  // namespace driftlab
