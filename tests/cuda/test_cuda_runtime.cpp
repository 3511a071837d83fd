// CUDA runtime: caching allocator (buckets, reuse, OOM message), device tensors, copies,
// exec params. Skips with "no CUDA device: ..." where no device is usable.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "tests/cuda/cuda_test_util.h"

namespace driftlab {
namespace {

using cuda::CachingAllocator;
using cuda::CudaContext;
using cuda::DeviceTensor;

TEST(CudaRuntime, BucketSizes) {
  if (!cuda::compiled_with_cuda()) GTEST_SKIP() << "no CUDA device: driftlab was built without CUDA";
  EXPECT_EQ(CachingAllocator::bucket_size(1), 512u);
  EXPECT_EQ(CachingAllocator::bucket_size(512), 512u);
  EXPECT_EQ(CachingAllocator::bucket_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::bucket_size((1u << 20) + 1), 2u << 20);
  EXPECT_EQ(CachingAllocator::bucket_size(5u << 20), 6u << 20);
}

TEST(CudaRuntime, AllocatorReusesReleasedBlocks) {
  REQUIRE_CUDA_DEVICE();
  CachingAllocator a;
  void* p = a.allocate(1000);
  a.release(p);
  void* q = a.allocate(900);  // same 1024-byte bucket
  EXPECT_EQ(p, q);
  cuda::AllocatorStats s = a.stats();
  EXPECT_EQ(s.device_mallocs, 1);
  EXPECT_EQ(s.cache_hits, 1);
  EXPECT_EQ(s.in_use_bytes, 1024u);
  a.release(q);
  a.empty_cache();
  EXPECT_EQ(a.stats().cached_bytes, 0u);
}

TEST(CudaRuntime, DeviceTensorRoundTripBitExact) {
  REQUIRE_CUDA_DEVICE();
  CudaContext ctx;
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor h = random_tensor({3, 5, 7}, dt, 11);
    DeviceTensor d = cuda::to_device(ctx, h);
    EXPECT_EQ(d.shape(), h.shape());
    DeviceTensor e(ctx, h.shape(), dt);
    cuda::copy_device(ctx, d, e);
    EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, e), h));
  }
  DeviceTensor z = DeviceTensor::zeros(ctx, {4, 4}, DType::f32);
  Tensor hz = cuda::to_host(ctx, z);
  for (int64_t i = 0; i < hz.numel(); ++i) EXPECT_EQ(hz.at(i), 0.0);
}

TEST(CudaRuntime, CopyShapeMismatchIsAnError) {
  REQUIRE_CUDA_DEVICE();
  CudaContext ctx;
  DeviceTensor d(ctx, {2, 3}, DType::f32);
  Tensor h({3, 2}, DType::f32);
  EXPECT_THROW(cuda::copy_to_device(ctx, h, d), Error);
  EXPECT_THROW(d.data<double>(), Error);
}

TEST(CudaRuntime, OutOfMemoryNamesTheSizes) {
  REQUIRE_CUDA_DEVICE();
  cuda::DeviceInfo info = cuda::device_info(0);
  CudaContext ctx;
  { DeviceTensor cached(ctx, {1 << 20}, DType::f32); }  // leaves 4 MiB cached
  try {
    DeviceTensor huge(ctx, {static_cast<int64_t>(info.total_memory)}, DType::f32);  // 4x the device
    FAIL() << "allocating 4x the device memory should fail";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("out of device memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("MiB free of"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cached"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(info.total_memory * 4)), std::string::npos) << msg;
  }
  DeviceTensor ok(ctx, {256}, DType::f32);  // the device still works
  EXPECT_EQ(ok.numel(), 256);
}

TEST(CudaRuntime, CheckedCallNamesCallFileAndLine) {
  REQUIRE_CUDA_DEVICE();
  try {
    cuda::device_info(1 << 20);  // no such device ordinal
    FAIL() << "device_info(1<<20) should throw";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("cudaGetDeviceProperties"), std::string::npos) << msg;
    EXPECT_NE(msg.find("device.cu:"), std::string::npos) << msg;
  }
}

TEST(CudaRuntime, ExecParamsPrint) {
  cuda::CudaExecParams p;
  if (!cuda::compiled_with_cuda()) GTEST_SKIP() << "no CUDA device: driftlab was built without CUDA";
  p.conv_backend = cuda::CudaBackend::vendor;
  p.deterministic = true;
  std::string s = p.str();
  EXPECT_NE(s.find("conv=cudnn"), std::string::npos) << s;
  EXPECT_NE(s.find("deterministic=1"), std::string::npos) << s;
}

TEST(CudaRuntime, BuildWithoutCudaRefusesContext) {
  if (cuda::compiled_with_cuda()) GTEST_SKIP() << "this build has CUDA";
  EXPECT_THROW(cuda::CudaContext ctx, Error);
}

}  // namespace
}  // namespace driftlab
