// Loss scaling in the CPU runner (Policy::loss_scale; core/ops/loss_scale.h).
//
// LossScale.ReplaysTheH200GradScalerRun: PyTorch 2.11's GradScaler on an NVIDIA H200 trained an
// MLP (32-64-10, ReLU) 40 SGD steps under autocast float16 with init_scale 2^20 and
// growth_interval 4 (bench/peers/reduced_precision_capture.py; its scales, overflow flags, losses
// and largest unscaled gradients are fixtures). The run's inputs and initial weights are rebuilt
// here by bench/peers/gradscaler_inputs.py (the capture's NumPy stream and torch.manual_seed,
// checked against the capture's own draws). driftlab trains the same MLP under
// torch,autocast=float16,loss_scale=dynamic with the same settings: every step's scale, whether
// it overflowed, and its loss must be the H200's. The decision "overflowed" is compared as a
// decision: an overflow happens when a float16 gradient rounds past 65504, which the H200's
// kernels and the emulation reach by different summation orders; a step taken by one and skipped
// by the other would have to be a tie at that boundary (the capture's largest unscaled gradient
// within float32 accumulation error of 65504 / scale), and none is: the test fails on any.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/device_net.h"
#include "engine/data/dataset.h"
#include "engine/io/npy.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/random.h"
#include "engine/train/cpu_runner.h"
#include "tests/ops/reduced_precision_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

Model mlp(const std::string& policy) {
  Model m;
  m.name = "mlp";
  m.policy = Policy::parse(policy);
  m.input_shape = {32};
  m.num_classes = 10;
  m.net = std::make_unique<Sequential>(m.input_shape);
  Rng rng(m.policy.rng_engine, 1);
  m.net->add(std::make_unique<DenseLayer>(64, m.net->current_shape(), m.policy, rng));
  m.net->add(std::make_unique<ActivationLayer>(ActKind::relu, m.net->current_shape(), m.policy));
  m.net->add(std::make_unique<DenseLayer>(10, m.net->current_shape(), m.policy, rng));
  auto params = m.net->named_params();  // 0.dense.weight, 0.dense.bias, 2.dense.weight, 2.dense.bias
  const char* files[] = {"gs_w0", "gs_b0", "gs_w2", "gs_b2"};
  for (int i = 0; i < 4; ++i) params[i].second->value = read_npy(rp_test::capture(files[i]));
  return m;
}

Tensor batch_rows(const Tensor& all, int64_t i) {
  const int64_t rows = all.dim(1), cols = all.rank() == 3 ? all.dim(2) : 1;
  Tensor b = all.rank() == 3 ? Tensor({rows, cols}, DType::f32) : Tensor({rows}, DType::f64);
  for (int64_t j = 0; j < b.numel(); ++j) {
    if (all.rank() == 3) b.data<float>()[j] = static_cast<float>(all.at(i * rows * cols + j));
    else b.data<double>()[j] = all.at(i * rows + j);
  }
  return b;
}

TEST(LossScale, ReplaysTheH200GradScalerRun) {
  Model m = mlp("torch,autocast=float16,loss_scale=dynamic,loss_scale_init=1048576,loss_scale_growth_interval=4");
  TrainConfig cfg;
  cfg.optim.lr = 0.01;
  cfg.batch = 16;
  CpuRunner runner(m, cfg);
  const Tensor x = read_npy(rp_test::capture("gs_x")), y = read_npy(rp_test::capture("gs_y"));
  const Tensor scale = read_npy(rp_test::capture("gs_scale")), inf = read_npy(rp_test::capture("gs_found_inf"));
  const Tensor loss = read_npy(rp_test::capture("gs_loss"));
  ASSERT_EQ(scale.numel(), 40);
  int64_t skipped = 0;
  double worst_loss = 0;
  for (int64_t i = 0; i < 40; ++i) {
    const Tensor yi = batch_rows(y, i);
    std::vector<int32_t> labels;
    for (int64_t j = 0; j < yi.numel(); ++j) labels.push_back(static_cast<int32_t>(yi.at(j)));
    EXPECT_EQ(runner.loss_scale(), scale.at(i)) << "step " << i << ": the scale before the step";
    const double l = runner.train_step(batch_rows(x, i), labels);
    EXPECT_EQ(runner.last_step_overflowed(), inf.at(i) != 0) << "step " << i << ": overflowed";
    skipped += runner.last_step_overflowed();
    // The loss: float32 cross-entropy of float16 logits, each logit a float16 rounding of a float32
    // sum in another order than the H200's: a logit may differ by one float16 step (2^-11 relative)
    // where its sum is near a tie, which moves the loss by at most that much of the largest logit.
    worst_loss = std::max(worst_loss, std::abs(l - loss.at(i)));
  }
  EXPECT_EQ(skipped, 10);  // the capture's count (docs/REDUCED_PRECISION.md)
  EXPECT_LT(worst_loss, 1e-2) << "largest loss difference from the H200's";
  std::cout << "40 steps: the H200's scales and overflows reproduced, " << skipped
            << " steps skipped; largest loss difference " << worst_loss << "\n";
}

// The scale and its count of finite steps are training state: a runner restored from the state
// after step 12 (train_state: what a checkpoint holds) continues the run bit for bit (scales,
// overflows, weights) where one without them would restart at the initial scale.
TEST(LossScale, RestoredStateContinuesTheRun) {
  const std::string policy = "torch,autocast=float16,loss_scale=dynamic,loss_scale_init=1048576,loss_scale_growth_interval=4";
  TrainConfig cfg;
  cfg.optim.lr = 0.01;
  cfg.batch = 16;
  const Tensor x = read_npy(rp_test::capture("gs_x")), y = read_npy(rp_test::capture("gs_y"));
  auto step = [&](Runner& r, int64_t i) {
    const Tensor yi = batch_rows(y, i);
    std::vector<int32_t> labels;
    for (int64_t j = 0; j < yi.numel(); ++j) labels.push_back(static_cast<int32_t>(yi.at(j)));
    r.train_step(batch_rows(x, i), labels);
  };
  Model a = mlp(policy);
  CpuRunner ra(a, cfg);
  for (int64_t i = 0; i < 12; ++i) step(ra, i);
  const TrainState st = ra.train_state();
  EXPECT_EQ(st.loss_scale, ra.loss_scale());
  Model b = mlp(policy);
  auto pa = a.net->named_params(), pb = b.net->named_params();
  for (std::size_t k = 0; k < pa.size(); ++k) pb[k].second->value = pa[k].second->value.clone();
  CpuRunner rb(b, cfg);
  rb.set_train_state(st);
  for (int64_t i = 12; i < 24; ++i) {
    step(ra, i);
    step(rb, i);
    EXPECT_EQ(ra.loss_scale(), rb.loss_scale()) << "step " << i;
    EXPECT_EQ(ra.last_step_overflowed(), rb.last_step_overflowed()) << "step " << i;
  }
  for (std::size_t k = 0; k < pa.size(); ++k) {
    const Tensor& u = pa[k].second->value;
    const Tensor& v = pb[k].second->value;
    for (int64_t j = 0; j < u.numel(); ++j) ASSERT_EQ(u.at(j), v.at(j)) << pa[k].first << "[" << j << "]";
  }
}

std::vector<int32_t> labels_of(const Tensor& y, int64_t i) {
  const Tensor yi = batch_rows(y, i);
  std::vector<int32_t> labels;
  for (int64_t j = 0; j < yi.numel(); ++j) labels.push_back(static_cast<int32_t>(yi.at(j)));
  return labels;
}

// A batch whose inputs are all FLT_MAX: the first layer's sums overflow, the loss is not finite,
// and under the dynamic rule the step is skipped however large or small the scale.
Tensor overflowing_batch() {
  Tensor x({16, 32}, DType::f32);
  for (int64_t j = 0; j < x.numel(); ++j) x.data<float>()[j] = std::numeric_limits<float>::max();
  return x;
}

std::vector<double> weights_of(Model& m) {
  std::vector<double> w;
  for (auto& np : m.net->named_params())
    for (int64_t j = 0; j < np.second->value.numel(); ++j) w.push_back(np.second->value.at(j));
  return w;
}

// The backoff's floor: Keras's rule is tf.maximum(scale / 2, 1)
// (keras/mixed_precision/loss_scale_optimizer.py _DynamicLossScaleState.update), GradScaler's
// scale * backoff_factor with none. Four overflowing steps from a scale of 4: 2, 1, 1, 1 under the
// tensorflow preset's loss_scale_min=1; 2, 1, 0.5, 0.25 under torch's.
TEST(LossScale, BackoffFloorIsKerasOne) {
  const Tensor y = read_npy(rp_test::capture("gs_y"));
  for (const auto& [preset, expected] : {std::pair<std::string, std::vector<double>>{"tensorflow", {2, 1, 1, 1}},
                                         {"torch", {2, 1, 0.5, 0.25}}}) {
    Model m = mlp(preset + ",loss_scale=dynamic,loss_scale_init=4");
    CpuRunner r(m);
    for (double want : expected) {
      r.train_step(overflowing_batch(), labels_of(y, 0));
      ASSERT_TRUE(r.last_step_overflowed()) << preset;
      EXPECT_EQ(r.loss_scale(), want) << preset;
    }
  }
}

// A skipped step under Keras's LossScaleOptimizer increments optimizer.iterations
// (do_not_apply_fn), so the next Adam step's bias correction uses t = 2; GradScaler does not call
// optimizer.step(), so PyTorch's next step is t = 1. The reference is a run without loss scaling
// that takes the same batch as its first step (t = 1) from the same weights: the moments start at
// zero in all three runs, so
//   idle:    the weights equal the reference's bit for bit (a power-of-two scale and its float32
//            reciprocal multiply the gradient exactly: no element underflows or overflows here);
//   counted: each weight's update is the reference's times lr_t(2) / lr_t(1), Keras's
//            lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t) (keras/optimizers.py@2.2.4 Adam) in
//            float32, to the float32 rounding of the update (a few ulps of it).
TEST(LossScale, SkippedStepCountsUnderKerasRule) {
  const Tensor x = read_npy(rp_test::capture("gs_x")), y = read_npy(rp_test::capture("gs_y"));
  TrainConfig cfg;
  cfg.optim.kind = OptimizerKind::adam;
  cfg.optim.lr = 1e-3;
  cfg.batch = 16;
  Model ref = mlp("tensorflow");
  const std::vector<double> w0 = weights_of(ref);
  CpuRunner rr(ref, cfg);
  rr.train_step(batch_rows(x, 1), labels_of(y, 1));
  const std::vector<double> w_ref = weights_of(ref);
  auto run = [&](const std::string& rule) {
    Model m = mlp("tensorflow,loss_scale=dynamic,loss_scale_skipped_step=" + rule);
    CpuRunner r(m, cfg);
    r.train_step(overflowing_batch(), labels_of(y, 0));
    EXPECT_TRUE(r.last_step_overflowed()) << rule;
    EXPECT_EQ(r.loss_scale(), 16384) << rule;  // 2^15 halved
    r.train_step(batch_rows(x, 1), labels_of(y, 1));
    EXPECT_FALSE(r.last_step_overflowed()) << rule;
    return weights_of(m);
  };
  const std::vector<double> idle = run("idle"), counted = run("counted");
  ASSERT_EQ(idle.size(), w_ref.size());
  // Keras 2.2.4's lr_t in its float32 graph arithmetic (K.pow on float32 tensors): 1 - beta2^t
  // cancels to 0.001-0.002, so the float32 rounding of beta2^t moves the ratio by ~1e-5 of itself;
  // the framework's own arithmetic, not exact betas, is the reference.
  auto lr_t = [](float t) {
    const float b1 = 0.9f, b2 = 0.999f, lr = 1e-3f;
    return lr * (std::sqrt(1.0f - std::pow(b2, t)) / (1.0f - std::pow(b1, t)));
  };
  const double ratio = static_cast<double>(lr_t(2.0f)) / static_cast<double>(lr_t(1.0f));
  int64_t moved = 0;
  for (std::size_t j = 0; j < w_ref.size(); ++j) {
    ASSERT_EQ(idle[j], w_ref[j]) << "idle: weight " << j;
    const double u_ref = w0[j] - w_ref[j], u = w0[j] - counted[j];
    // The update is formed in float32 (lr_t, m / (sqrt(v) + eps), the product) and applied to a
    // float32 weight: its difference read back carries the weight's rounding, half an ulp of w.
    const double w_max = std::max({std::abs(w0[j]), std::abs(w_ref[j]), std::abs(counted[j])});
    const double tol = 8 * std::ldexp(std::abs(u_ref * ratio), -24) + std::ldexp(w_max, -23);
    EXPECT_NEAR(u, u_ref * ratio, tol) << "counted: weight " << j;
    moved += u_ref != 0;
  }
  EXPECT_GT(moved, 1000);  // the step moved the weights (the comparison is not of zeros)
  EXPECT_GT(std::abs(ratio - 1), 0.1);  // and t = 2 differs from t = 1 by far more than the tolerance
}

// A static scale (Keras LossScaleOptimizer(dynamic=False), or a loss multiplied by hand): the
// scale never moves and no step is skipped; a power-of-two scale changes no weight of a float32
// step; an overflowing step is not skipped but reported as any non-finite step (--on-nonfinite).
TEST(LossScale, StaticScaleNeverSkips) {
  const Tensor x = read_npy(rp_test::capture("gs_x")), y = read_npy(rp_test::capture("gs_y"));
  TrainConfig cfg;
  cfg.optim.lr = 0.01;
  cfg.batch = 16;
  Model plain = mlp("torch"), scaled = mlp("torch,loss_scale=static,loss_scale_init=1024");
  CpuRunner rp(plain, cfg), rs(scaled, cfg);
  for (int64_t i = 0; i < 5; ++i) {
    rp.train_step(batch_rows(x, i), labels_of(y, i));
    rs.train_step(batch_rows(x, i), labels_of(y, i));
    EXPECT_EQ(rs.loss_scale(), 1024);
    EXPECT_FALSE(rs.last_step_overflowed());
  }
  EXPECT_EQ(weights_of(plain), weights_of(scaled));
  EXPECT_THAT(error_of([&] { rs.train_step(overflowing_batch(), labels_of(y, 0)); }),
              testing::HasSubstr("loss is"));
}

// The epoch's statistics count the steps the dynamic rule skipped and give the scale at its end
// (metrics.json, metrics.csv): the H200 replay as one epoch of 40 batches in order.
TEST(LossScale, EpochStatsCountOverflows) {
  Model m = mlp("torch,autocast=float16,loss_scale=dynamic,loss_scale_init=1048576,loss_scale_growth_interval=4,"
                "shuffle=none");
  TrainConfig cfg;
  cfg.optim.lr = 0.01;
  cfg.batch = 16;
  cfg.epochs = 1;
  const Tensor x = read_npy(rp_test::capture("gs_x")), y = read_npy(rp_test::capture("gs_y"));
  Dataset d;
  d.name = "gradscaler/capture";
  d.num_classes = 10;
  d.images = Tensor({640, 32}, DType::f32);
  for (int64_t j = 0; j < d.images.numel(); ++j) d.images.data<float>()[j] = static_cast<float>(x.at(j));
  for (int64_t j = 0; j < 640; ++j) d.labels.push_back(static_cast<int32_t>(y.at(j)));
  CpuRunner r(m, cfg);
  const EpochStats st = r.run_epoch(d, nullptr, nullptr);
  EXPECT_EQ(st.overflow_steps, 10);  // the capture's count, as in ReplaysTheH200GradScalerRun
  EXPECT_EQ(st.skipped_steps, 0);    // not --on-nonfinite skips
  const Tensor scale = read_npy(rp_test::capture("gs_scale")), inf = read_npy(rp_test::capture("gs_found_inf"));
  // The scale after step 40: the capture's overflow at step 36 restarted GradScaler's count, steps
  // 37-40 are finite, and the fourth of them doubles the scale (growth_interval 4).
  ASSERT_NE(inf.at(35), 0);
  for (int64_t i = 36; i < 40; ++i) ASSERT_EQ(inf.at(i), 0) << i;
  EXPECT_EQ(st.loss_scale, 2 * scale.at(39));
}

TEST(LossScale, RefusedWhereNotBuilt) {
  using testing::HasSubstr;
  EXPECT_THAT(error_of([] {
                Model m = mlp("torch,loss_scale=dynamic,loss_scale_growth_interval=2.5");
                CpuRunner r(m);
              }),
              HasSubstr("loss_scale_growth_interval=2.5 must be a whole number of steps >= 1"));
  EXPECT_THAT(error_of([] { resolve_cuda_exec(Policy::parse("torch,loss_scale=dynamic")); }),
              HasSubstr("cuda: loss_scale=dynamic is built in the CPU runner only"));
}

}  // namespace
}  // namespace driftlab
