// CUDA runtime wrappers: every call checked, errors carry the call, file and line.
#include <cuda_runtime.h>

#include <sstream>

#include "core/error.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/device.h"

namespace driftlab {
namespace cuda {

bool compiled_with_cuda() { return true; }

int device_count(std::string* why_none) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why_none) *why_none = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error so later queries start clean
    return 0;
  }
  if (n == 0 && why_none) *why_none = "cudaGetDeviceCount returned 0 devices";
  return n;
}

DeviceInfo device_info(int index) {
  DeviceInfo d;
  cudaDeviceProp prop{};
  DL_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  d.index = index;
  d.name = prop.name;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.sm_count = prop.multiProcessorCount;
  DL_CUDA_CHECK(cudaSetDevice(index));
  DL_CUDA_CHECK(cudaMemGetInfo(&d.free_memory, &d.total_memory));
  DL_CUDA_CHECK(cudaDriverGetVersion(&d.driver_version));
  DL_CUDA_CHECK(cudaRuntimeGetVersion(&d.runtime_version));
  return d;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  cudaError_t err = cudaMalloc(&ptr_, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    std::size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    ptr_ = nullptr;
    fail("cuda: out of device memory: cudaMalloc(", bytes, " bytes = ", bytes / (1024.0 * 1024.0), " MiB) failed (",
         cudaGetErrorString(err), "); device has ", free_b / (1024.0 * 1024.0), " MiB free of ",
         total_b / (1024.0 * 1024.0), " MiB");
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::copy_from_host(const void* src, std::size_t bytes) {
  check(bytes <= bytes_, "cuda: copy_from_host of ", bytes, " bytes into a buffer of ", bytes_);
  DL_CUDA_CHECK(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice));
}

void DeviceBuffer::copy_to_host(void* dst, std::size_t bytes) const {
  check(bytes <= bytes_, "cuda: copy_to_host of ", bytes, " bytes from a buffer of ", bytes_);
  DL_CUDA_CHECK(cudaMemcpy(dst, ptr_, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace cuda
}  // namespace driftlab
