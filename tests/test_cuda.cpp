// CUDA device helpers. Always compiled; on a machine without a usable device (CI, the dev
// machines: "driver version is insufficient") every device test skips with the reason.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "kernels/cuda/device.h"

namespace {

using namespace driftlab;

// Skips the calling test unless a CUDA device is usable.
#define REQUIRE_CUDA_DEVICE()                                               \
  do {                                                                      \
    std::string why;                                                        \
    if (cuda::device_count(&why) == 0) GTEST_SKIP() << "no CUDA device: " << why; \
  } while (0)

TEST(Cuda, DeviceCountNeverThrows) {
  std::string why;
  int n = -1;
  EXPECT_NO_THROW(n = cuda::device_count(&why));
  EXPECT_GE(n, 0);
  if (n == 0) {
    EXPECT_FALSE(why.empty()) << "a machine without devices must say why";
  }
}

TEST(Cuda, DeviceInfoAndRoundTrip) {
  REQUIRE_CUDA_DEVICE();
  cuda::DeviceInfo d = cuda::device_info(0);
  EXPECT_FALSE(d.name.empty());
  EXPECT_GT(d.total_memory, 0u);
  EXPECT_GT(d.sm_count, 0);
  std::vector<float> host(1000), back(1000, 0.f);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.5f;
  cuda::DeviceBuffer buf(host.size() * sizeof(float));
  buf.copy_from_host(host.data(), host.size() * sizeof(float));
  buf.copy_to_host(back.data(), back.size() * sizeof(float));
  EXPECT_EQ(host, back);
}

TEST(Cuda, OutOfMemoryIsAClearError) {
  REQUIRE_CUDA_DEVICE();
  cuda::DeviceInfo d = cuda::device_info(0);
  std::size_t too_much = d.total_memory * 4;  // more than the device has, never satisfiable
  try {
    cuda::DeviceBuffer buf(too_much);
    FAIL() << "allocating " << too_much << " bytes should fail";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("out of device memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("MiB free of"), std::string::npos) << msg;
  }
  // The device still works after the failed allocation.
  cuda::DeviceBuffer ok(1024);
  EXPECT_EQ(ok.size(), 1024u);
}

TEST(Cuda, BuildWithoutCudaRefusesAllocation) {
  if (cuda::compiled_with_cuda()) GTEST_SKIP() << "this build has CUDA";
  EXPECT_THROW(cuda::DeviceBuffer(16), Error);
}

}  // namespace
