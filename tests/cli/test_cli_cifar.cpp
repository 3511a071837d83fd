// `driftlab train --dataset cifar10 --data-dir DIR` on CIFAR-10 binary files the test writes
// (data_batch_1..5.bin, test_batch.bin: records of one label byte + 3,072 pixel bytes), then
// eval and predict of the trained model; and the synthetic CIFAR-shaped epoch with a progress
// bar and the time per epoch.
#include <gtest/gtest.h>

#include <fstream>
#include <vector>

#include "tests/cli/cli_util.h"

namespace {

using namespace driftlab::cli_test;
namespace fs = std::filesystem;

// n records, label i%10, pixels a pattern that differs by class so there is something to learn.
void write_batch(const fs::path& p, int n, int first) {
  std::vector<unsigned char> b;
  for (int i = 0; i < n; ++i) {
    const int label = (first + i) % 10;
    b.push_back(static_cast<unsigned char>(label));
    for (int j = 0; j < 3072; ++j) b.push_back(static_cast<unsigned char>((label * 25 + (j % 32) * 3 + i) % 256));
  }
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

TEST(CliCifar, TrainEvalPredictOnRealFormatFiles) {
  const fs::path dir = fresh_dir("cifar");
  for (int k = 1; k <= 5; ++k) write_batch(dir / ("data_batch_" + std::to_string(k) + ".bin"), 8, 8 * k);
  write_batch(dir / "test_batch.bin", 10, 0);
  const std::string data = " --dataset cifar10 --data-dir " + dir.string();
  const CliRun t = run_driftlab("train --model resnet20 --epochs 1 --batch 8 --lr 0.01 --no-progress --threads 1 --out " +
                                (dir / "run").string() + data);
  ASSERT_EQ(t.code, 0) << t.out;
  // All 40 training records were read: 5 batches of 8.
  EXPECT_NE(t.out.find("cifar10/train (40 images)"), std::string::npos) << t.out;
  EXPECT_TRUE(fs::exists(dir / "run" / "model.dlm"));
  EXPECT_TRUE(fs::exists(dir / "run" / "metrics.json"));
  const std::string w = " --weights " + (dir / "run" / "model.dlm").string();
  const CliRun e = run_driftlab("eval --threads 1" + w + data);
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("accuracy"), std::string::npos) << e.out;
  const CliRun p = run_driftlab("predict --threads 1 --sizes 10" + w + data);
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("10 inputs"), std::string::npos) << p.out;
  fs::remove_all(dir);
}

TEST(CliCifar, MissingBatchFileIsNamed) {
  const fs::path dir = fresh_dir("cifar_missing");
  for (int k = 1; k <= 4; ++k) write_batch(dir / ("data_batch_" + std::to_string(k) + ".bin"), 2, 0);
  const CliRun t = run_driftlab("train --model resnet20 --epochs 1 --batch 2 --no-progress --out " +
                                (dir / "run").string() + " --dataset cifar10 --data-dir " + dir.string());
  EXPECT_EQ(t.code, 1) << t.out;
  EXPECT_NE(t.out.find("data_batch_5.bin"), std::string::npos) << t.out;
  EXPECT_FALSE(fs::exists(dir / "run" / "model.dlm")) << "no model file after a failed run";
  fs::remove_all(dir);
}

TEST(CliCifar, SyntheticEpochShowsProgressAndTimePerEpoch) {
  const fs::path dir = fresh_dir("cifar_synth");
  const CliRun t = run_driftlab("train --model resnet20 --dataset synthetic-cifar10 --limit 64 --batch 32 --epochs 1 "
                                "--threads 1 --out " + (dir / "run").string());
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("synthetic"), std::string::npos) << "synthetic data is labelled as such: " << t.out;
  EXPECT_NE(t.out.find("2/2"), std::string::npos) << "progress bar reaches the last batch: " << t.out;
  EXPECT_NE(t.out.find(" s ("), std::string::npos) << "time per epoch: " << t.out;
  fs::remove_all(dir);
}

}  // namespace
