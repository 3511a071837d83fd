// `driftlab train --optimizer adam|rmsprop --schedule ... --step-loss` end to end on a small IDX
// data set: the report records the optimiser, the schedule and each epoch's rate, the rate moves
// as the schedule says, and every step's loss is in metrics.json and steps.csv (--init and
// --shuffle: tests/cli/test_cli_resume.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

namespace {

using namespace driftlab::cli_test;
namespace fs = std::filesystem;
using nlohmann::json;

fs::path data_dir(const std::string& name) {
  const fs::path d = fresh_dir(name);
  write_idx(d, "train", 96);
  write_idx(d, "t10k", 32);
  return d;
}

json read_json(const fs::path& p) {
  std::ifstream f(p);
  return json::parse(f);
}

TEST(CliOptim, AdamWithAStepScheduleRecordsRatesAndStepLosses) {
  const fs::path d = data_dir("cli_optim_adam");
  const CliRun r = run_driftlab("train --model lenet1 --data-dir " + d.string() +
                                " --optimizer adam --lr 0.004 --schedule step:step=1,gamma=0.5 --epochs 3 --batch 32"
                                " --step-loss --no-progress --threads 1 --out " + (d / "run").string());
  ASSERT_EQ(r.code, 0) << r.out;
  const json m = read_json(d / "run" / "metrics.json");
  EXPECT_EQ(m["meta"]["optimizer"], "adam");
  EXPECT_EQ(m["meta"]["schedule"], "step:step=1,gamma=0.5");
  ASSERT_EQ(m["epochs"].size(), 3u);
  // StepLR(1, 0.5) per epoch: the rate of each epoch's steps halves after every epoch.
  EXPECT_EQ(m["epochs"][0]["lr"].get<double>(), 0.004);
  EXPECT_EQ(m["epochs"][1]["lr"].get<double>(), 0.002);
  EXPECT_EQ(m["epochs"][2]["lr"].get<double>(), 0.001);
  // 96 images in batches of 32: 3 steps an epoch, 9 losses, each the loss of a step taken.
  ASSERT_EQ(m["step_losses"].size(), 9u);
  for (const auto& l : m["step_losses"]) EXPECT_TRUE(l.is_number() && std::isfinite(l.get<double>()));
  std::ifstream steps(d / "run" / "steps.csv");
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(steps, line)) lines.push_back(line);
  ASSERT_EQ(lines.size(), 10u);
  EXPECT_EQ(lines[0], "epoch,step,loss");
  EXPECT_EQ(lines[9].substr(0, 4), "3,9,");
}

TEST(CliOptim, KerasDecayIsPerBatchAndRmspropTakesMomentum) {
  const fs::path d = data_dir("cli_optim_rmsprop");
  const CliRun r = run_driftlab("train --model lenet1 --policy tensorflow --data-dir " + d.string() +
                                " --optimizer rmsprop --lr 0.001 --momentum 0.5 --schedule inverse_time:decay=0.5"
                                " --epochs 2 --batch 32 --no-progress --threads 1 --out " + (d / "run").string());
  ASSERT_EQ(r.code, 0) << r.out;
  const json m = read_json(d / "run" / "metrics.json");
  EXPECT_EQ(m["meta"]["optimizer"], "rmsprop");
  EXPECT_EQ(m["meta"]["momentum"].get<double>(), 0.5);
  // Keras's decay: lr/(1 + decay*iterations) in float32 every batch; the last step of epoch 2 is
  // the 6th (5 before it).
  EXPECT_EQ(m["epochs"][1]["lr"].get<double>(), static_cast<double>(0.001f * (1.0f / (1.0f + 0.5f * 5.0f))));
  // RMSprop's momentum defaults to 0 (SGD's to 0.9): not given, none.
  const CliRun r0 = run_driftlab("train --model lenet1 --data-dir " + d.string() +
                                 " --optimizer rmsprop --lr 0.001 --epochs 1 --no-progress --out " + (d / "run0").string());
  ASSERT_EQ(r0.code, 0) << r0.out;
  EXPECT_EQ(read_json(d / "run0" / "metrics.json")["meta"]["momentum"].get<double>(), 0.0);
}

}  // namespace
