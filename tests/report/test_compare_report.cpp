// driftlab compare's JSON (report/compare.h): each run states the CPU kernels its policy selects, so
// that a policy's seconds per epoch is read as the time of those kernels (the tensorflow preset's
// Eigen convolution against the torch preset's oneDNN), not as its framework's speed.
#include <gtest/gtest.h>

#include <string>

#include "report/compare.h"

namespace driftlab {
namespace {

TEST(CompareReport, EachRunStatesTheKernelsItsPolicyRan) {
  CompareResult r;
  r.model = "lenet1";
  for (const char* p : {"torch", "tensorflow", "tensorflow,conv_backend=onednn"}) {
    CompareRow row;
    row.policy = p;
    r.rows.push_back(row);
  }
  const nlohmann::json j = report::compare_json(r);
  ASSERT_EQ(j.size(), 3u);
  // The presets' choices (engine/policy_presets.cpp): PyTorch's oneDNN convolution and fused LeNet
  // blocks; TensorFlow's Eigen contractions, unfused.
  EXPECT_EQ(j[0]["kernels"]["conv_backend"], "onednn");
  EXPECT_EQ(j[0]["kernels"]["conv_block_backend"], "fast");
  EXPECT_EQ(j[1]["kernels"]["conv_backend"], "eigen");
  EXPECT_EQ(j[1]["kernels"]["gemm_backend"], "eigen");
  EXPECT_EQ(j[1]["kernels"]["conv_block_backend"], "reference");
  EXPECT_EQ(j[2]["kernels"]["conv_backend"], "onednn") << "a knob given in the policy string is the run's";
  // Only backend knobs are listed.
  for (const auto& [k, v] : j[1]["kernels"].items()) EXPECT_NE(k.find("_backend"), std::string::npos) << k;
}

}  // namespace
}  // namespace driftlab
