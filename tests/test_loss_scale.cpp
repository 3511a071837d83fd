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

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/device_net.h"
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
