// Built instead of device.cu when nvcc is not found: the same functions, reporting that
// this build has no CUDA backend.
#include "core/error.h"
#include "kernels/cuda/device.h"

namespace driftlab {
namespace cuda {

bool compiled_with_cuda() { return false; }

int device_count(std::string* why_none) {
  if (why_none) *why_none = "driftlab was built without CUDA (nvcc not found at configure time)";
  return 0;
}

DeviceInfo device_info(int index) { fail("cuda: device_info(", index, "): driftlab was built without CUDA"); }

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  fail("cuda: cannot allocate ", bytes, " bytes: driftlab was built without CUDA");
}
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept { return *this; }
void DeviceBuffer::copy_from_host(const void*, std::size_t) { fail("cuda: built without CUDA"); }
void DeviceBuffer::copy_to_host(void*, std::size_t) const { fail("cuda: built without CUDA"); }

}  // namespace cuda
}  // namespace driftlab
