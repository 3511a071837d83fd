// Attacks on the device, through the same model face as on the CPU. attacks/ takes any
// Runner; with a CudaRunner the input gradients and the judging forward passes run on the device
// and the attack's own arithmetic (sign, step, projection, clamp) stays on the host, the same code
// as on the CPU. Checked here against the same attack through the CpuRunner:
// The device runner keeps the iterate on the device (Runner::linf_steps: the step kernel is the host
// loop's formula, core/ops/linf_step.h, checked element by element below).
//   - float64 (LeNet-5 torch and tensorflow, ResNet-20 torch with BatchNorm statistics away from
//     (0, 1)): the device's dL/dx agrees with the CPU's to ~1e-12 of its largest element
//     (test_semantics_cuda.cpp bounds it by 1e-9), so a gradient sign could only differ where
//     |g| is that close to 0, and every step's x' = clamp(x + step * sign(g)) is then the same
//     correctly rounded value: FGSM, BIM and PGD end points, predictions, successes and the
//     Keras clip's zero-gradient samples equal bit for bit;
//   - float32 LeNet-5: the device's FGSM is exactly clamp(x + eps * sign(g_device)), and its
//     gradient signs differ from the CPU's only where |g| is within the runners' float32
//     agreement (3e-2 of the largest element, test_semantics_cuda.cpp) of zero;
//   - the decision-based attacks (Boundary, single-pixel) on the device's decisions: every
//     returned example adversarial on the device and inside the bounds, single-pixel changes one
//     pixel, the same seed gives the same result twice.
// Own kernels (the float64 LeNet-5 and float32 cases run under the CUDA emulation too: 30 s); cuDNN in
// the Vendor test (device only).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>

#include "attacks/boundary.h"
#include "attacks/gradient.h"
#include "attacks/single_pixel.h"
#include "core/ops/linf_step.h"
#include "engine/train/cpu_runner.h"
#include "engine/train/cuda_runner.h"
#include "kernels/cuda/ops.h"
#include "models/models.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/model_test_util.h"

namespace driftlab {
namespace {

using attacks::AttackKind;
using attacks::GradientAttackSpec;

std::vector<GradientAttackSpec> float64_specs(double lo, double hi) {
  GradientAttackSpec fgsm;
  fgsm.eps = 0.1, fgsm.batch = 3;  // batches of 3: a short last batch too
  GradientAttackSpec bim = fgsm;
  bim.kind = AttackKind::bim, bim.eps = 0.05, bim.step = 0.01, bim.steps = 4;
  GradientAttackSpec pgd = bim;
  pgd.kind = AttackKind::pgd, pgd.random_start = true, pgd.seed = 7, pgd.early_stop = true;
  std::vector<GradientAttackSpec> v{fgsm, bim, pgd};
  for (auto& s : v) s.lo = lo, s.hi = hi;
  return v;
}

void expect_same_attack(Runner& host, Runner& dev, const Tensor& x, const std::vector<int32_t>& y,
                        const GradientAttackSpec& spec) {
  SCOPED_TRACE(attacks::attack_kind_name(spec.kind));
  const attacks::AttackResult a = attacks::run_gradient_attack(host, x, y, spec);
  const attacks::AttackResult b = attacks::run_gradient_attack(dev, x, y, spec);  // the device-resident loop
  // The device loop is the one taken, and its judging forward (where the attack's adv_pred comes
  // from) gives the logits a separate forward of its result gives.
  LinfSteps ls;
  ls.eps = spec.eps, ls.lo = spec.lo, ls.hi = spec.hi, ls.judge = true;
  Tensor xa = Tensor::empty(x.shape(), x.dtype());
  LinfStepsResult probe;
  ASSERT_TRUE(dev.linf_steps(x.raw(), nullptr, xa.raw(), x.shape(), x.dtype(), y, ls, &probe))
      << "the device runner must keep the iterate there";
  EXPECT_TRUE(bitwise_equal(probe.last_logits, dev.logits(xa))) << "the judging forward";
  EXPECT_TRUE(bitwise_equal(b.x_adv, a.x_adv)) << "adversarial examples";
  EXPECT_EQ(b.clean_pred, a.clean_pred);
  EXPECT_EQ(b.adv_pred, a.adv_pred);
  EXPECT_EQ(b.success, a.success);
  EXPECT_EQ(b.zero_gradient, a.zero_gradient);
  EXPECT_EQ(b.gradient_calls, a.gradient_calls);
  int64_t moved = 0;
  for (double l : b.linf) moved += l > 0;
  EXPECT_GT(moved, 0) << "the attack moved no sample: the comparison says nothing";
}

TEST(CudaAttacks, GradientAttacksEqualTheCpuBitForBitInFloat64) {
  REQUIRE_CUDA_DEVICE();
  for (const char* policy : {"torch,dtype=float64", "tensorflow,dtype=float64"}) {
    SCOPED_TRACE(policy);
    const Policy p = Policy::parse(policy);
    Model cpu = build_model("lenet5", p, 3), gpu = build_model("lenet5", p, 3);
    const bool keras = std::string(policy).rfind("tensorflow", 0) == 0;
    if (keras) {
      // Make the model sure of some samples: the Keras loss clips probabilities at 1e-7, so their
      // dL/dx is exactly 0 on both sides (the zero-gradient finding must survive the device).
      for (Model* m : {&cpu, &gpu}) {
        auto params = m->net->named_params();
        for (int k = 0; k < 2; ++k) {
          Tensor& w = params[params.size() - 1 - k].second->value;
          for (int64_t i = 0; i < w.numel(); ++i) w.data<double>()[i] *= 400.0;
        }
      }
    }
    CpuRunner host(cpu);
    cuda::CudaContext ctx(one_backend(false));
    CudaRunner dev(gpu, ctx);
    const Tensor x = random_tensor({7, 1, 28, 28}, DType::f64, 21, 0.0, 1.0);
    const std::vector<int32_t> y = keras ? predictions(host.logits(x)) : cyclic_labels(7);
    for (const GradientAttackSpec& spec : float64_specs(0.0, 1.0)) expect_same_attack(host, dev, x, y, spec);
    if (keras) {
      const attacks::AttackResult r = attacks::run_gradient_attack(dev, x, y, float64_specs(0.0, 1.0)[0]);
      EXPECT_GT(attacks::summarize(r).zero_gradients, 0) << "the scaled model should be sure of some sample";
    }
  }
}

// The device's step kernel (Runner::linf_steps keeps the iterate there) against the shared formula
// on the host, element by element: signs of +-0, tiny and huge gradients, iterates at and past the
// eps-ball and the bounds, a frozen sample left as it is; and the zero-gradient rows.
TEST(CudaAttacks, LinfStepKernelIsTheHostFormulaAndFrozenSamplesStay) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx(one_backend(false));
  for (DType dt : {DType::f32, DType::f64})
    for (bool fgsm : {true, false}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (fgsm ? " fgsm" : " bim"));
      const Tensor x0 = random_tensor({4, 3, 5, 7}, dt, 31, 0.0, 1.0);
      Tensor xa = random_tensor({4, 3, 5, 7}, dt, 32, -0.2, 1.2);  // past the ball and the bounds too
      Tensor g = random_tensor({4, 3, 5, 7}, dt, 33, -1.0, 1.0);
      const double specials[] = {0.0, -0.0, 1e-30, -1e-30, 1e30, -1e30};
      for (int64_t i = 0; i < g.numel(); i += 7) {
        const double v = specials[(i / 7) % 6];
        if (dt == DType::f32) g.data<float>()[i] = static_cast<float>(v);
        else g.data<double>()[i] = v;
      }
      for (int64_t i = 3 * 105; i < 4 * 105; ++i) {  // sample 3: gradient zero everywhere
        if (dt == DType::f32) g.data<float>()[i] = 0.f;
        else g.data<double>()[i] = i % 2 ? 0.0 : -0.0;
      }
      Tensor frozen = Tensor::zeros({4}, DType::u8);
      frozen.data<uint8_t>()[1] = 1;
      const cuda::LinfStepParams p{fgsm, 0.07, 0.03, 0.0, 1.0};
      cuda::DeviceTensor d_x0 = cuda::to_device(ctx, x0), d_g = cuda::to_device(ctx, g),
                         d_f = cuda::to_device(ctx, frozen), d_xa = cuda::to_device(ctx, xa);
      cuda::linf_step_cuda(ctx, p, d_x0, d_g, d_f, d_xa);
      Tensor want = xa.clone();
      for (int64_t i = 0; i < x0.numel(); ++i) {
        if (i / 105 == 1) continue;
        if (dt == DType::f32)
          want.data<float>()[i] = linf_step<float>(fgsm, x0.data<float>()[i], xa.data<float>()[i], g.data<float>()[i],
                                                   0.07f, 0.03f, 0.f, 1.f);
        else
          want.data<double>()[i] = linf_step<double>(fgsm, x0.data<double>()[i], xa.data<double>()[i],
                                                     g.data<double>()[i], 0.07, 0.03, 0.0, 1.0);
      }
      EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, d_xa), want));
      cuda::DeviceTensor zero(ctx, {4}, DType::u8);
      cuda::rows_all_zero_cuda(ctx, d_g, zero);
      const Tensor zh = cuda::to_host(ctx, zero);
      EXPECT_EQ(std::vector<int>(zh.data<uint8_t>(), zh.data<uint8_t>() + 4), (std::vector<int>{0, 0, 0, 1}));
    }
}

// ResNet-20 (BatchNorm at inference semantics, option-A shortcuts): out of the emulation's filter
// by name (minutes of emulated float64 convolutions; its kernels are covered there by the
// model-step cases).
void resnet20_case(bool vendor) {
  const Policy p = Policy::parse("torch,dtype=float64");
  Model cpu = build_model("resnet20", p, 5), gpu = build_model("resnet20", p, 5);
  randomise_running_stats(cpu, 30);
  randomise_running_stats(gpu, 30);
  CpuRunner host(cpu);
  cuda::CudaContext ctx(one_backend(vendor));
  CudaRunner dev(gpu, ctx);
  const Tensor x = random_tensor({5, 3, 32, 32}, DType::f64, 22, -1.0, 1.0);
  for (const GradientAttackSpec& spec : float64_specs(-1.0, 1.0)) expect_same_attack(host, dev, x, cyclic_labels(5), spec);
}

TEST(CudaAttacksResnet20, GradientAttacksEqualTheCpuBitForBitInFloat64) {
  REQUIRE_CUDA_DEVICE();
  resnet20_case(false);
}

TEST(CudaAttacksVendor, Resnet20GradientAttacksOnCudnnEqualTheCpuBitForBitInFloat64) {
  REQUIRE_CUDA_DEVICE();
  resnet20_case(true);
}

TEST(CudaAttacks, Float32FgsmIsTheDeviceGradientsSignAndDiffersOnlyWhereTheGradientIsNearZero) {
  REQUIRE_CUDA_DEVICE();
  Model cpu = build_model("lenet5", Policy::torch(), 3), gpu = build_model("lenet5", Policy::torch(), 3);
  CpuRunner host(cpu);
  cuda::CudaContext ctx(one_backend(false));
  CudaRunner dev(gpu, ctx);
  const Tensor x = random_tensor({6, 1, 28, 28}, DType::f32, 23, 0.0, 1.0);
  const std::vector<int32_t> y = cyclic_labels(6);
  GradientAttackSpec spec;
  spec.eps = 0.1;
  const attacks::AttackResult r = attacks::run_gradient_attack(dev, x, y, spec);
  const InputGradient gd = dev.input_gradient(x, y, Semantics::inference);
  const InputGradient gh = host.input_gradient(x, y, Semantics::inference);
  const double gmax = max_abs(gh.dx);
  int64_t flips = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float xi = x.data<float>()[i], gi = gd.dx.data<float>()[i], hi = gh.dx.data<float>()[i];
    const float s = gi > 0 ? 1.f : gi < 0 ? -1.f : 0.f;
    ASSERT_EQ(r.x_adv.data<float>()[i], std::min(std::max(xi + 0.1f * s, 0.f), 1.f)) << i;
    if ((gi > 0) != (hi > 0) || (gi < 0) != (hi < 0)) {
      ++flips;
      EXPECT_LE(std::fabs(hi), 3e-2 * gmax) << i << ": a sign differs where the CPU's gradient is not near zero";
    }
  }
  std::cout << "[ tally    ] float32 LeNet-5 FGSM: " << flips << " of " << x.numel()
            << " gradient signs differ between the device and the CPU\n";
}

// Out of the emulation's filter by name (Boundary's start search and single-pixel's candidates are
// ~2,500 small forwards: 330 s emulated; the forward kernels are covered there by the model cases).
TEST(CudaAttacksDecision, OnTheDevicesDecisionsAdversarialInBoundsAndRepeat) {
  REQUIRE_CUDA_DEVICE();
  Model m = input_sensitive_lenet5();
  cuda::CudaContext ctx(one_backend(false));
  CudaRunner dev(m, ctx);
  const Tensor x = random_tensor({3, 1, 28, 28}, DType::f32, 14, 0.0, 1.0);
  const std::vector<int32_t> y = predictions(dev.logits(x));
  attacks::BoundarySpec bs;
  bs.steps = 20, bs.seed = 11;
  const attacks::BoundaryResult b = attacks::run_boundary(dev, x, y, bs);
  const attacks::BoundaryResult b2 = attacks::run_boundary(dev, x, y, bs);
  EXPECT_TRUE(bitwise_equal(b.x_adv, b2.x_adv)) << "Boundary: the same seed twice";
  EXPECT_EQ(b.trace, b2.trace);
  const std::vector<int32_t> judged = predictions(dev.logits(b.x_adv));
  int64_t found = 0;
  for (int64_t s = 0; s < 3; ++s) {
    if (!b.success[s]) continue;
    ++found;
    EXPECT_NE(judged[s], y[s]) << s << ": Boundary's example must be adversarial on the device";
    for (std::size_t k = 1; k < b.trace[s].size(); ++k) EXPECT_LT(b.trace[s][k], b.trace[s][k - 1]) << s;
  }
  EXPECT_GT(found, 0) << "Boundary found no start on an untrained LeNet-5";
  attacks::SinglePixelSpec sp;
  sp.max_pixels = 200, sp.seed = 5;
  const attacks::SinglePixelResult p = attacks::run_single_pixel(dev, x, y, sp);
  const attacks::SinglePixelResult p2 = attacks::run_single_pixel(dev, x, y, sp);
  EXPECT_TRUE(bitwise_equal(p.x_adv, p2.x_adv)) << "single-pixel: the same seed twice";
  const std::vector<int32_t> pj = predictions(dev.logits(p.x_adv));
  for (int64_t s = 0; s < 3; ++s) {
    int64_t changed = 0;
    for (int64_t e = 0; e < 784; ++e) {
      const float v = p.x_adv.data<float>()[s * 784 + e];
      const float w = b.x_adv.data<float>()[s * 784 + e];
      ASSERT_TRUE(v >= 0.f && v <= 1.f);
      ASSERT_TRUE(w >= 0.f && w <= 1.f);
      changed += v != x.data<float>()[s * 784 + e];
    }
    if (p.success[s]) {  // every sample starts classified as its label (y: the device's predictions)
      EXPECT_EQ(changed, 1) << s << ": a single-pixel success changes exactly one pixel";
      EXPECT_NE(pj[s], y[s]) << s << ": single-pixel's example must be adversarial on the device";
    } else {
      EXPECT_EQ(changed, 0) << s << ": a failure returns the input";
    }
  }
}

}  // namespace
}  // namespace driftlab
