// The trainer's non-finite guard (TrainConfig::on_nonfinite, `driftlab train --on-nonfinite`):
// stop names the epoch, step, failing tensor and the first layer whose output went non-finite;
// skip-batch takes no SGD step for that batch (weights and BatchNorm statistics untouched),
// counts it, and keeps the epoch's averages over the batches stepped on. The CLI side (exit code,
// no model file, the report's count) is tests/cli/test_cli_nonfinite.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "engine/train/runner.h"
#include "models/models.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

// 64 random 28x28 images in [0,1), labels i%10; `nan_sample` (if >= 0) holds a NaN pixel.
Dataset images(int64_t nan_sample) {
  Dataset d;
  d.images = random_tensor({64, 1, 28, 28}, DType::f32, 5, 0.0, 1.0);
  if (nan_sample >= 0) d.images.data<float>()[nan_sample * 784 + 300] = std::numeric_limits<float>::quiet_NaN();
  for (int i = 0; i < 64; ++i) d.labels.push_back(i % 10);
  d.num_classes = 10;
  d.name = "random/train";
  return d;
}

TrainConfig config(OnNonFinite m) {
  TrainConfig c;
  c.batch = 16;
  c.optim.lr = 0.01;
  c.on_nonfinite = m;
  return c;
}

TEST(NonFinite, StopNamesTheStepAndTheInputBatch) {
  Model m = build_model("lenet1", Policy::torch(), 1);
  std::unique_ptr<Runner> r = open_runner(m, Device::cpu, config(OnNonFinite::stop));
  try {
    r->run_epoch(images(37), nullptr, nullptr);
    FAIL() << "a NaN pixel trained on";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("non-finite step at epoch 1 step "), std::string::npos) << msg;
    EXPECT_NE(msg.find("loss is nan"), std::string::npos) << msg;
    EXPECT_NE(msg.find("first non-finite tensor in the forward: input batch["), std::string::npos) << msg;
  }
}

// A NaN weight: the error names the layer whose output first went NaN and that weight.
TEST(NonFinite, StopNamesTheLayerAndItsBadWeight) {
  Model m = build_model("lenet1", Policy::torch(), 1);
  auto params = m.net->named_params();
  Param* w = nullptr;
  for (auto& np : params)
    if (np.first == "3.conv2d.weight") w = np.second;  // lenet1: 0 conv, 1 relu, 2 maxpool, 3 conv
  ASSERT_NE(w, nullptr) << "lenet1's second conv is no longer layer 3";
  w->value.data<float>()[7] = std::numeric_limits<float>::quiet_NaN();
  std::unique_ptr<Runner> r = open_runner(m, Device::cpu, config(OnNonFinite::stop));
  try {
    r->run_epoch(images(-1), nullptr, nullptr);
    FAIL() << "a NaN weight trained on";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("epoch 1 step 1 "), std::string::npos) << msg;
    EXPECT_NE(msg.find("layer 3 (conv2d"), std::string::npos) << msg;
    EXPECT_NE(msg.find("its weight 3.conv2d.weight[7] is not finite"), std::string::npos) << msg;
  }
}

TEST(NonFinite, SkipBatchTakesNoStepCountsItAndTrainsOn) {
  Model m = build_model("lenet1", Policy::torch(), 1);
  std::unique_ptr<Runner> r = open_runner(m, Device::cpu, config(OnNonFinite::skip_batch));
  const EpochStats st = r->run_epoch(images(37), nullptr, nullptr);
  EXPECT_EQ(st.skipped_steps, 1);  // the one batch of 16 holding sample 37
  EXPECT_NE(st.first_skip.find("input batch["), std::string::npos) << st.first_skip;
  EXPECT_TRUE(std::isfinite(st.train_loss)) << st.train_loss;
  for (auto& np : m.net->named_params()) {
    const Tensor& v = np.second->value;
    for (int64_t i = 0; i < v.numel(); ++i) ASSERT_TRUE(std::isfinite(v.at(i))) << np.first << "[" << i << "]";
  }
  // The other three batches were stepped on.
  Model m2 = build_model("lenet1", Policy::torch(), 1);
  EXPECT_FALSE(bitwise_equal(m.net->named_params()[0].second->value, m2.net->named_params()[0].second->value))
      << "no step was taken at all";
}

// skip-batch leaves BatchNorm's running statistics as they were before the skipped batch.
TEST(NonFinite, SkippedBatchLeavesBatchNormStatistics) {
  Model m = build_model("resnet20", Policy::torch(), 1);
  Dataset d;
  d.images = random_tensor({4, 3, 32, 32}, DType::f32, 9, 0.0, 1.0);
  d.images.data<float>()[100] = std::numeric_limits<float>::quiet_NaN();
  d.labels = {0, 1, 2, 3};
  d.num_classes = 10;
  d.name = "random/train";
  std::vector<Tensor> before;
  for (auto& b : m.net->named_buffers()) before.push_back(b.second->value.clone());
  ASSERT_FALSE(before.empty());
  TrainConfig c = config(OnNonFinite::skip_batch);
  c.batch = 4;
  const EpochStats st = open_runner(m, Device::cpu, c)->run_epoch(d, nullptr, nullptr);
  EXPECT_EQ(st.skipped_steps, 1);
  std::size_t i = 0;
  for (auto& b : m.net->named_buffers()) EXPECT_TRUE(bitwise_equal(b.second->value, before[i++])) << b.first;
}

}  // namespace
}  // namespace driftlab
