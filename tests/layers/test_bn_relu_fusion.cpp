// BatchNorm followed by a ReLU as one op (BatchNormParams::relu; Sequential fuses the pair where
// ExecContext::fuse_bn_relu allows it). The fused op must give the two ops' results bit for bit:
//   * kernel level: each BatchNorm kernel (reference float32 and float64, fast plain and in channel
//     blocks of 8 and 16) with the fused ReLU against the same kernel without it followed by the
//     reference ReLU kernels, forward and backward, train and inference semantics, under every
//     ReLU gradient rule (grad at zero 0, 0.5, 1; at NaN dy or NaN), on inputs that reach the
//     rules' edges: a channel whose gamma and beta are 0 (z exactly 0), a channel holding a NaN;
//   * model level: ResNet-20 and ResNet-20b under the three presets, a recorded forward and
//     backward at both semantics, fused against unfused: logits, the input gradient, every
//     parameter gradient and running statistic, bit for bit; the ReLU kernel runs 10 times fewer
//     in ResNet-20 (its stem and the first convolution of each of its 9 blocks).
// And in predictions, a residual block's last BatchNorm, its add and the ReLU after it as one op
// (BatchNormKernel::forward_infer_add): each kernel and layout against the three ops one after the
// other, with and without the ReLU, on the same edge inputs plus a NaN and exact opposites in the
// residual; ResNet-20 (option A shortcuts) and ResNet-20b (option B) predicting, bit for bit, with
// no ReLU kernel left to run (19 in ResNet-20 apart). And in predictions, a BatchNorm and a clip
// (ReLU6) after it as one op (BatchNormParams::clip, a graph's fusion): each kernel and layout
// against the BatchNorm followed by the reference clip kernel, bounds that clip from both sides,
// the NaN kept; every other entry refuses the fused clip by name.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>
#include <string>
#include <vector>

#include "core/ops/activation.h"
#include "core/ops/batchnorm.h"
#include "engine/layers/layout.h"
#include "engine/random.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "models/models.h"
#include "tests/test_util.h"

namespace {

using namespace driftlab;

constexpr int64_t kN = 4, kC = 16, kS = 9;

struct Outs {
  Tensor y, dx, dg, db;
};

// x, dy, gamma, beta with channel 3's gamma and beta 0 (z = +-0 * xhat + 0: exactly 0) and one NaN in
// channel 5 (its statistics, then its every z, NaN).
struct Inputs {
  Tensor x, dy, g, b, rm, rv;
  explicit Inputs(DType dt) {
    x = random_tensor({kN, kC, kS}, DType::f32, 41, -2.0, 3.0);
    dy = random_tensor({kN, kC, kS}, DType::f32, 42);
    g = random_tensor({kC}, DType::f32, 43, 0.5, 1.5);
    b = random_tensor({kC}, DType::f32, 44);
    rm = random_tensor({kC}, DType::f32, 45, -0.5, 0.5);
    rv = random_tensor({kC}, DType::f32, 46, 0.5, 2.0);
    g.data<float>()[3] = 0.0f;
    b.data<float>()[3] = 0.0f;
    x.data<float>()[(1 * kC + 5) * kS + 4] = std::numeric_limits<float>::quiet_NaN();
    if (dt == DType::f64) x = x.to(dt), dy = dy.to(dt), g = g.to(dt), b = b.to(dt), rm = rm.to(dt), rv = rv.to(dt);
  }
};

Tensor in_block(const Tensor& t, int blk) { return blk ? to_block(t.reshape({kN, kC, kS, 1}), blk) : t; }
Tensor out_tensor(DType dt, int blk) {
  return blk ? Tensor::empty({kN, kC, kS, 1}, dt).with_block(blk) : Tensor({kN, kC, kS}, dt);
}
Tensor back(const Tensor& t, int blk) { return blk ? to_plain(t).reshape({kN, kC, kS}) : t; }

// The BatchNorm kernel k with the fused ReLU (fused) or followed by the reference ReLU kernels.
Outs run(const BatchNormKernel& k, BatchNormParams p, const ActivationParams& relu, bool fused, Semantics sem, DType dt,
         int blk) {
  const Inputs in(dt);
  p.n = kN, p.c = kC, p.s = kS;
  p.relu = fused;
  p.relu_grad_at_zero = relu.relu_grad_at_zero;
  p.relu_nan_grad = relu.relu_nan_grad;
  const Tensor x = in_block(in.x, blk);
  Outs o{out_tensor(dt, blk), out_tensor(dt, blk), Tensor({kC}, dt), Tensor({kC}, dt)};
  Tensor mean({kC}, dt), var({kC}, dt), invstd({kC}, dt);
  if (sem == Semantics::train)
    k.forward_train(p, x, in.g, in.b, o.y, mean, var, invstd);
  else
    k.forward_infer(p, x, in.g, in.b, in.rm, in.rv, o.y);
  Tensor dy = in.dy;
  Tensor z = back(o.y, blk);
  if (!fused) {  // ReLU after the plain op: y = relu(z); the gradient through it at z
    Tensor y({kN, kC, kS}, dt), dz({kN, kC, kS}, dt);
    activation_forward_ref(relu, z, y);
    activation_backward_ref(relu, z, y, in.dy, dz);
    o.y = y, dy = dz;
  } else {
    o.y = z;
  }
  if (sem == Semantics::train)
    k.backward_train(p, x, in_block(dy, blk), in.g, in.b, mean, invstd, o.dx, o.dg, o.db);
  else
    k.backward_infer(p, x, in_block(dy, blk), in.g, in.b, in.rm, in.rv, o.dx, o.dg, o.db);
  o.dx = back(o.dx, blk);
  return o;
}

std::vector<ActivationParams> relu_rules() {
  std::vector<ActivationParams> out;
  for (double g0 : {0.0, 0.5, 1.0})
    for (ReluNanGrad nan : {ReluNanGrad::dy, ReluNanGrad::nan}) {
      ActivationParams a;
      a.kind = ActKind::relu;
      a.relu_grad_at_zero = g0;
      a.relu_nan_grad = nan;
      out.push_back(a);
    }
  return out;
}

TEST(BnReluFusion, EveryKernelGivesTheTwoOpsBitsUnderEveryReluRule) {
  const KernelRegistry reg = make_cpu_registry();
  struct Variant {
    const char* name;
    KernelBackend backend;
    DType dt;
    int blk;
  };
  const Variant variants[] = {{"reference float32", KernelBackend::reference, DType::f32, 0},
                              {"reference float64", KernelBackend::reference, DType::f64, 0},
                              {"fast plain", KernelBackend::fast, DType::f32, 0},
                              {"fast block 8", KernelBackend::fast, DType::f32, 8},
                              {"fast block 16", KernelBackend::fast, DType::f32, 16}};
  BatchNormParams p;
  p.eps = 1e-3;
  int64_t zeros_seen = 0, nans_seen = 0;
  for (const Variant& v : variants)
    for (const ActivationParams& relu : relu_rules())
      for (Semantics sem : {Semantics::train, Semantics::inference}) {
        SCOPED_TRACE(std::string(v.name) + ", grad at zero " + std::to_string(relu.relu_grad_at_zero) +
                     (relu.relu_nan_grad == ReluNanGrad::nan ? ", NaN at NaN" : ", dy at NaN") + ", " +
                     semantics_name(sem));
        const BatchNormKernel& k = reg.batchnorm.at(v.backend);
        const Outs fused = run(k, p, relu, true, sem, v.dt, v.blk), apart = run(k, p, relu, false, sem, v.dt, v.blk);
        EXPECT_TRUE(bitwise_equal(fused.y, apart.y)) << "y";
        EXPECT_TRUE(bitwise_equal(fused.dx, apart.dx)) << "dx";
        EXPECT_TRUE(bitwise_equal(fused.dg, apart.dg)) << "dgamma";
        EXPECT_TRUE(bitwise_equal(fused.db, apart.db)) << "dbeta";
        for (int64_t i = 0; i < kN; ++i)  // the edges were reached: channel 3's y is 0, channel 5's NaN
          for (int64_t s = 0; s < kS; ++s) {
            zeros_seen += fused.y.at((i * kC + 3) * kS + s) == 0.0;
            nans_seen += std::isnan(fused.y.at((i * kC + 5) * kS + s));
          }
      }
  EXPECT_EQ(zeros_seen, 5 * 6 * 2 * kN * kS);
  // train semantics: the NaN reaches its channel's statistics, so every z; inference: its own z
  EXPECT_EQ(nans_seen, 5 * 6 * (kN * kS + 1));
}

// The inference forward with a residual: {k.forward_infer_add's y, the same from k.forward_infer
// without the ReLU, then the add, then the reference ReLU kernel}.
std::pair<Tensor, Tensor> run_add(const BatchNormKernel& k, bool relu, DType dt, int blk) {
  const Inputs in(dt);
  BatchNormParams p;
  p.eps = 1e-3, p.n = kN, p.c = kC, p.s = kS;
  Tensor r = random_tensor({kN, kC, kS}, DType::f32, 47);
  r.data<float>()[(2 * kC + 7) * kS + 1] = std::numeric_limits<float>::quiet_NaN();
  if (dt == DType::f64) r = r.to(dt);
  Tensor z = out_tensor(dt, blk);
  k.forward_infer(p, in_block(in.x, blk), in.g, in.b, in.rm, in.rv, z);
  Tensor zp = back(z, blk).clone();
  // channel 9: the residual the negation of the batchnorm's output (z + r exactly 0, +0)
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t s = 0; s < kS; ++s) {
      const int64_t e = (i * kC + 9) * kS + s;
      if (dt == DType::f64)
        r.data<double>()[e] = -zp.data<double>()[e];
      else
        r.data<float>()[e] = -zp.data<float>()[e];
    }
  Tensor sum({kN, kC, kS}, dt);
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t e = 0; e < sum.numel(); ++e) sum.data<T>()[e] = zp.data<T>()[e] + r.data<T>()[e];
  });
  Tensor apart({kN, kC, kS}, dt);
  ActivationParams a;
  if (relu)
    activation_forward_ref(a, sum, apart);
  else
    apart = sum;
  p.relu = relu;
  Tensor fused = out_tensor(dt, blk);
  k.forward_infer_add(p, in_block(in.x, blk), in.g, in.b, in.rm, in.rv, in_block(r, blk), fused);
  return {back(fused, blk), apart};
}

TEST(BnReluFusion, TheResidualAddFusesBitForBitInEveryKernel) {
  const KernelRegistry reg = make_cpu_registry();
  const std::pair<KernelBackend, DType> kernels[] = {
      {KernelBackend::reference, DType::f32}, {KernelBackend::reference, DType::f64}, {KernelBackend::fast, DType::f32}};
  int64_t zeros = 0, nans = 0;
  for (const auto& [backend, dt] : kernels)
    for (int blk : {0, 8, 16})
      for (bool relu : {false, true}) {
        if (backend == KernelBackend::reference && blk != 0) continue;  // the reference takes plain tensors
        SCOPED_TRACE(std::string(backend_name(backend)) + " " + dtype_name(dt) + " block " + std::to_string(blk) +
                     (relu ? " relu" : ""));
        const BatchNormKernel& k = reg.batchnorm.at(backend);
        ASSERT_NE(k.forward_infer_add, nullptr);
        const auto [fused, apart] = run_add(k, relu, dt, blk);
        EXPECT_TRUE(bitwise_equal(fused, apart));
        for (int64_t e = 0; e < fused.numel(); ++e) {
          zeros += fused.at(e) == 0.0 && (e / kS) % kC == 9;
          nans += std::isnan(fused.at(e));
        }
      }
  // five kernel and layout variants, with and without the ReLU
  EXPECT_EQ(zeros, 5 * 2 * kN * kS) << "channel 9's sums, exactly 0, reached";
  EXPECT_EQ(nans, 5 * 2 * 2) << "the NaN of x and the NaN of the residual reached";
}

TEST(BnReluFusion, AClipFusesIntoThePredictionBitForBitInEveryKernel) {
  const KernelRegistry reg = make_cpu_registry();
  const std::pair<KernelBackend, DType> kernels[] = {
      {KernelBackend::reference, DType::f32}, {KernelBackend::reference, DType::f64}, {KernelBackend::fast, DType::f32}};
  ActivationParams clip;
  clip.kind = ActKind::clip;
  clip.clip_min = -0.25, clip.clip_max = 0.75;  // inside z's range: both bounds bite
  int64_t lows = 0, highs = 0, nans = 0;
  for (const auto& [backend, dt] : kernels)
    for (int blk : {0, 8, 16}) {
      if (backend == KernelBackend::reference && blk != 0) continue;  // the reference takes plain tensors
      SCOPED_TRACE(std::string(backend_name(backend)) + " " + dtype_name(dt) + " block " + std::to_string(blk));
      const BatchNormKernel& k = reg.batchnorm.at(backend);
      const Inputs in(dt);
      BatchNormParams p;
      p.n = kN, p.c = kC, p.s = kS;
      const Tensor x = in_block(in.x, blk);
      Tensor z = out_tensor(dt, blk), fused = out_tensor(dt, blk);
      k.forward_infer(p, x, in.g, in.b, in.rm, in.rv, z);
      Tensor apart({kN, kC, kS}, dt);
      activation_forward_ref(clip, back(z, blk), apart);
      BatchNormParams q = p;
      q.clip = true, q.clip_min = clip.clip_min, q.clip_max = clip.clip_max;
      k.forward_infer(q, x, in.g, in.b, in.rm, in.rv, fused);
      const Tensor f = back(fused, blk);
      EXPECT_TRUE(bitwise_equal(f, apart));
      for (int64_t e = 0; e < f.numel(); ++e) {
        lows += f.at(e) == -0.25;
        highs += f.at(e) == 0.75;
        nans += std::isnan(f.at(e));
      }
      // the fused clip is the inference forward's only
      Tensor mean({kC}, dt), var({kC}, dt), invstd({kC}, dt);
      EXPECT_NE(error_of([&] { k.forward_train(q, x, in.g, in.b, fused, mean, var, invstd); }).find("fused clip"),
                std::string::npos);
      EXPECT_NE(error_of([&] { k.forward_infer_add(q, x, in.g, in.b, in.rm, in.rv, x, fused); }).find("fused clip"),
                std::string::npos);
      q.relu = true;
      EXPECT_NE(error_of([&] { k.forward_infer(q, x, in.g, in.b, in.rm, in.rv, fused); }).find("fused ReLU and a fused clip"),
                std::string::npos);
    }
  EXPECT_GT(lows, 0) << "the lower bound reached";
  EXPECT_GT(highs, 0) << "the upper bound reached";
  EXPECT_EQ(nans, 5) << "the NaN of x kept in each of the five kernel and layout variants";
}

// The fast kernel's 1x1-plane loops (a BatchNorm after a convolution of pooled features: its lanes
// run over channels) with the fused clip, the fused ReLU and neither, against the BatchNorm then
// the reference activation.
TEST(BnReluFusion, OneByOnePlanesFuseBitForBit) {
  const KernelRegistry reg = make_cpu_registry();
  const BatchNormKernel& k = reg.batchnorm.at(KernelBackend::fast);
  const int64_t n = 7, c = 40;
  Tensor x = random_tensor({n, c, 1}, DType::f32, 51, -2.0, 3.0);
  x.data<float>()[17] = std::numeric_limits<float>::quiet_NaN();
  const Tensor g = random_tensor({c}, DType::f32, 52, 0.5, 1.5), b = random_tensor({c}, DType::f32, 53);
  const Tensor rm = random_tensor({c}, DType::f32, 54, -0.5, 0.5), rv = random_tensor({c}, DType::f32, 55, 0.5, 2.0);
  BatchNormParams p;
  p.n = n, p.c = c, p.s = 1;
  Tensor z({n, c, 1}, DType::f32);
  reg.batchnorm.reference().forward_infer(p, x, g, b, rm, rv, z);
  for (const ActKind kind : {ActKind::clip, ActKind::relu}) {
    ActivationParams a;
    a.kind = kind;
    a.clip_min = -0.25, a.clip_max = 0.75;
    Tensor apart({n, c, 1}, DType::f32), fused({n, c, 1}, DType::f32), plain({n, c, 1}, DType::f32);
    activation_forward_ref(a, z, apart);
    BatchNormParams q = p;
    if (kind == ActKind::clip) q.clip = true, q.clip_min = a.clip_min, q.clip_max = a.clip_max;
    else q.relu = true;
    k.forward_infer(q, x, g, b, rm, rv, fused);
    EXPECT_TRUE(bitwise_equal(fused, apart)) << act_name(kind);
    k.forward_infer(p, x, g, b, rm, rv, plain);
    EXPECT_TRUE(bitwise_equal(plain, z));
  }
}

struct Pass {
  Tensor out, dx;
  std::vector<Tensor> grads, buffers;
  int64_t relu_kernels = 0;
};

Pass run_model(const char* model, const char* preset, Semantics sem, bool fuse) {
  Model m = build_model(model, Policy::parse(preset), 11);
  ExecContext exec;
  exec.fuse_bn_relu = fuse;
  std::vector<KernelChoice> trace;
  exec.trace = &trace;
  Rng drop(m.policy.rng_engine, 1);
  RunContext ctx = RunContext::recorded(exec, sem, &drop);
  const Tensor x = random_tensor({4, 3, 32, 32}, DType::f32, 12, 0.0, 1.0);
  Pass r;
  r.out = m.net->forward(ctx, x);
  r.dx = m.net->backward(ctx, random_tensor(r.out.shape(), DType::f32, 13));
  for (auto& np : m.net->named_params()) r.grads.push_back(np.second->grad.clone());
  for (auto& nb : m.net->named_buffers()) r.buffers.push_back(nb.second->value.clone());
  for (const KernelChoice& c : trace) r.relu_kernels += std::string(c.op) == "activation";
  return r;
}

class BnReluFusionModel : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(BnReluFusionModel, FusedGivesTheUnfusedBitsAtBothSemantics) {
  ThreadCountGuard threads(2);
  const auto [model, preset] = GetParam();
  for (Semantics sem : {Semantics::train, Semantics::inference}) {
    SCOPED_TRACE(semantics_name(sem));
    const Pass fused = run_model(model, preset, sem, true), apart = run_model(model, preset, sem, false);
    EXPECT_TRUE(bitwise_equal(fused.out, apart.out)) << "logits";
    EXPECT_TRUE(bitwise_equal(fused.dx, apart.dx)) << "input gradient";
    ASSERT_EQ(fused.grads.size(), apart.grads.size());
    for (std::size_t i = 0; i < apart.grads.size(); ++i)
      EXPECT_TRUE(bitwise_equal(fused.grads[i], apart.grads[i])) << "gradient " << i;
    for (std::size_t i = 0; i < apart.buffers.size(); ++i)
      EXPECT_TRUE(bitwise_equal(fused.buffers[i], apart.buffers[i])) << "running statistic " << i;
    if (std::string(model) == "resnet20") {  // stem + the first conv of 9 blocks, forward and backward
      EXPECT_EQ(apart.relu_kernels - fused.relu_kernels, 2 * 10);
    }
  }
}

// Predictions: nothing recorded, so the residual tails fuse too.
TEST_P(BnReluFusionModel, PredictionsFusedGiveTheUnfusedBits) {
  ThreadCountGuard threads(2);
  const auto [model, preset] = GetParam();
  Tensor out[2];
  int64_t relu_kernels[2] = {0, 0};
  for (int fuse : {0, 1}) {
    Model m = build_model(model, Policy::parse(preset), 11);
    ExecContext exec;
    exec.fuse_bn_relu = fuse != 0;
    std::vector<KernelChoice> trace;
    exec.trace = &trace;
    RunContext ctx = RunContext::inference(exec);
    out[fuse] = m.net->forward(ctx, random_tensor({4, 3, 32, 32}, DType::f32, 12, 0.0, 1.0));
    for (const KernelChoice& c : trace) relu_kernels[fuse] += c.op == "activation";
  }
  EXPECT_TRUE(bitwise_equal(out[1], out[0]));
  EXPECT_EQ(relu_kernels[1], 0) << "every ReLU inside a batchnorm op";
  if (std::string(model) == "resnet20") EXPECT_EQ(relu_kernels[0], 19);  // 10 after a batchnorm, 9 after an add
}

INSTANTIATE_TEST_SUITE_P(Models, BnReluFusionModel,
                         ::testing::Combine(::testing::Values("resnet20", "resnet20b"),
                                            ::testing::Values("torch", "tensorflow", "theano")),
                         [](const ::testing::TestParamInfo<std::tuple<const char*, const char*>>& i) {
                           return std::string(std::get<0>(i.param)) + "_" + std::get<1>(i.param);
                         });

}  // namespace
