// `driftlab train --on-nonfinite stop|skip-batch` end to end on a run made to diverge (lr 1e30:
// the first step throws the weights to ~1e30 and the next forward overflows). stop: a one-line
// error naming the epoch, step, the failing tensor and the first layer whose output went
// non-finite, an exit code in 1..127 (an error, not a crash), and no model file or report left in
// --out. skip-batch: the run finishes (exit 0), writes its files, and metrics.json counts the
// skipped steps.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"
#include "tests/require_util.h"

namespace driftlab {
namespace {

namespace fs = std::filesystem;
using cli_test::CliRun;
using cli_test::fresh_dir;
using cli_test::run_driftlab;

bool have_fashion_mnist() { return fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"); }

const char* kDiverge = "train --model lenet1 --limit 256 --batch 32 --lr 1e30 --no-progress --threads 1 ";

TEST(CliNonFinite, StopNamesStepLayerTensorAndLeavesNoModelFile) {
  if (!have_fashion_mnist()) DRIFTLAB_SKIP_OR_REQUIRE("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)");
  const fs::path d = fresh_dir("nonfinite_stop");
  const CliRun r = run_driftlab(std::string(kDiverge) + "--out " + (d / "run").string());
  EXPECT_GE(r.code, 1) << r.out;
  EXPECT_LT(r.code, 128) << "killed by a signal: " << r.out;
  EXPECT_NE(r.out.find("non-finite step at epoch 1 step "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first non-finite tensor in the forward: layer "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" output["), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "run" / "model.dlm")) << "a model file was written";
  EXPECT_FALSE(fs::exists(d / "run" / "metrics.json"));
  fs::remove_all(d);
}

TEST(CliNonFinite, SkipBatchTrainsOnAndCountsTheSkippedSteps) {
  if (!have_fashion_mnist()) DRIFTLAB_SKIP_OR_REQUIRE("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)");
  const fs::path d = fresh_dir("nonfinite_skip");
  const CliRun r = run_driftlab(std::string(kDiverge) + "--on-nonfinite skip-batch --out " + d.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("non-finite step(s); first: "), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(d / "model.dlm"));
  std::ifstream f(d / "metrics.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  const int64_t skipped = j.at("nonfinite").at("skipped_steps").get<int64_t>();
  // 256 samples in batches of 32: 8 steps; the first is finite (it is what diverges the weights).
  EXPECT_GE(skipped, 1);
  EXPECT_LE(skipped, 7);
  EXPECT_EQ(j.at("epochs").at(0).at("skipped_steps").get<int64_t>(), skipped);
  EXPECT_EQ(j.at("nonfinite").at("on_nonfinite"), "skip-batch");
  fs::remove_all(d);
}

TEST(CliNonFinite, UnknownModeIsRefused) {
  const CliRun r = run_driftlab("train --on-nonfinite ignore --no-progress");
  EXPECT_EQ(r.code, 2) << "a usage error, refused while parsing the options: " << r.out;
  EXPECT_NE(r.out.find("--on-nonfinite: ignore not in {stop,skip-batch}"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace driftlab
