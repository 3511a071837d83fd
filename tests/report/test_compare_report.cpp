// driftlab compare's JSON (report/compare.h): each run states the CPU kernels its policy selects, so
// that a policy's seconds per epoch is read as the time of those kernels (e.g. Eigen's convolution
// against oneDNN's), not as its framework's speed.
#include <gtest/gtest.h>

#include <string>

#include "report/compare.h"

namespace driftlab {
namespace {

TEST(CompareReport, EachRunStatesTheKernelsItsPolicyRan) {
  CompareResult r;
  r.model = "lenet1";
  for (const char* p : {"torch", "tensorflow,conv_backend=eigen,gemm_backend=eigen,conv_block_backend=reference",
                        "tensorflow"}) {
    CompareRow row;
    row.policy = p;
    r.rows.push_back(row);
  }
  const nlohmann::json j = report::compare_json(r);
  ASSERT_EQ(j.size(), 3u);
  // The presets' choices (engine/policy_presets.cpp): every preset runs oneDNN's convolution and
  // the fused LeNet blocks; knobs given in the policy string are the run's.
  for (std::size_t i : {0u, 2u}) {
    EXPECT_EQ(j[i]["kernels"]["conv_backend"], "onednn") << r.rows[i].policy;
    EXPECT_EQ(j[i]["kernels"]["gemm_backend"], "onednn") << r.rows[i].policy;
    EXPECT_EQ(j[i]["kernels"]["conv_block_backend"], "fast") << r.rows[i].policy;
  }
  EXPECT_EQ(j[1]["kernels"]["conv_backend"], "eigen");
  EXPECT_EQ(j[1]["kernels"]["gemm_backend"], "eigen");
  EXPECT_EQ(j[1]["kernels"]["conv_block_backend"], "reference");
  // Only backend knobs are listed.
  for (const auto& [k, v] : j[1]["kernels"].items()) EXPECT_NE(k.find("_backend"), std::string::npos) << k;
}

}  // namespace
}  // namespace driftlab
