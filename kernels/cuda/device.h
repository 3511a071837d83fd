// CUDA device query and device memory helpers. Compiled by nvcc when CUDA is found
// (kernels/cuda/device.cu) and by a stub otherwise (kernels/cuda/device_stub.cpp), so the
// rest of the engine and the tests call the same functions in every build.
// Any failure of the runtime at query time (no driver, "driver version is insufficient",
// no device) means "no CUDA device": cuda_device_count() returns 0 and says why.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace driftlab {
namespace cuda {

bool compiled_with_cuda();

struct DeviceInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  std::size_t total_memory = 0, free_memory = 0;
  int sm_count = 0;
  int driver_version = 0, runtime_version = 0;
};

// Number of usable devices; on any runtime error returns 0 and writes the reason.
int device_count(std::string* why_none = nullptr);
DeviceInfo device_info(int index);  // throws driftlab::Error naming the call on failure

// Owning device allocation (plain cudaMalloc). Out-of-memory is an Error that names the
// requested size and the free/total memory of the device.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;

  void* get() const { return ptr_; }
  std::size_t size() const { return bytes_; }
  void copy_from_host(const void* src, std::size_t bytes);
  void copy_to_host(void* dst, std::size_t bytes) const;

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace cuda
}  // namespace driftlab
