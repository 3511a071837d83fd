// Built instead of runtime.cu when nvcc is not found: the same classes, every entry point
// that would touch a device throwing "driftlab was built without CUDA".
#include "core/error.h"
#include "kernels/cuda/runtime.h"

namespace driftlab {
namespace cuda {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  fail("cuda: ", what, ": driftlab was built without CUDA (nvcc not found at configure time)");
}
}  // namespace

std::size_t CachingAllocator::bucket_size(std::size_t bytes) { return bytes; }
CachingAllocator::~CachingAllocator() = default;
void* CachingAllocator::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  no_cuda("CachingAllocator::allocate");
}
void CachingAllocator::release(void* ptr) {
  if (ptr) no_cuda("CachingAllocator::release");
}
void CachingAllocator::empty_cache() {}
AllocatorStats CachingAllocator::stats() const { return stats_; }


CudaContext::CudaContext(const CudaExecParams& params, int device) : params_(params), device_(device) {
  no_cuda("CudaContext");
}
CudaContext::~CudaContext() = default;
void CudaContext::set_params(const CudaExecParams& p) { params_ = p; }
void* CudaContext::cublas() { no_cuda("cuBLAS handle"); }
void* CudaContext::cudnn() { no_cuda("cuDNN handle"); }
void CudaContext::synchronize() const { no_cuda("synchronize"); }
void* CudaContext::workspace(std::size_t) { no_cuda("workspace"); }
const AlgoRecord* CudaContext::find_algo(const std::string&, const std::string&) const { return nullptr; }
void CudaContext::record_algo(const AlgoRecord& r) { algo_log_.push_back(r); }

DeviceTensor::DeviceTensor(CudaContext&, Shape, DType) { no_cuda("DeviceTensor"); }
DeviceTensor DeviceTensor::zeros(CudaContext&, Shape, DType) { no_cuda("DeviceTensor::zeros"); }
DeviceTensor::~DeviceTensor() = default;
DeviceTensor::DeviceTensor(DeviceTensor&& o) noexcept
    : shape_(std::move(o.shape_)), numel_(o.numel_), dtype_(o.dtype_), ptr_(o.ptr_), alloc_(std::move(o.alloc_)) {}
DeviceTensor& DeviceTensor::operator=(DeviceTensor&& o) noexcept {
  shape_ = std::move(o.shape_);
  numel_ = o.numel_;
  dtype_ = o.dtype_;
  ptr_ = o.ptr_;
  alloc_ = std::move(o.alloc_);
  return *this;
}
int64_t DeviceTensor::dim(int i) const { return shape_.at(static_cast<std::size_t>(i < 0 ? i + rank() : i)); }
DeviceTensor DeviceTensor::reshape_view(Shape) const { no_cuda("reshape_view"); }
void check_device_shape(const char* op, const char* name, const DeviceTensor& t, const Shape& expected) {
  if (t.shape() != expected)
    fail(op, ": ", name, " has shape ", shape_str(t.shape()), ", expected ", shape_str(expected));
}

DeviceBytes bytes_to_device(CudaContext&, const void*, std::size_t) { no_cuda("bytes_to_device"); }

EventTimer::EventTimer(CudaContext& ctx) : ctx_(ctx) { no_cuda("EventTimer"); }
EventTimer::~EventTimer() = default;
void EventTimer::start() { no_cuda("EventTimer::start"); }
double EventTimer::stop_seconds() { no_cuda("EventTimer::stop_seconds"); }

DeviceTensor to_device(CudaContext&, const Tensor&) { no_cuda("to_device"); }
Tensor to_host(CudaContext&, const DeviceTensor&) { no_cuda("to_host"); }
void copy_to_device(CudaContext&, const Tensor&, DeviceTensor&) { no_cuda("copy_to_device"); }
void copy_to_host(CudaContext&, const DeviceTensor&, Tensor&) { no_cuda("copy_to_host"); }
void copy_to_device(CudaContext&, const void*, DeviceTensor&) { no_cuda("copy_to_device"); }
void copy_to_host(CudaContext&, const DeviceTensor&, void*) { no_cuda("copy_to_host"); }
void copy_device(CudaContext&, const DeviceTensor&, DeviceTensor&) { no_cuda("copy_device"); }
void fill_zero(CudaContext&, DeviceTensor&) { no_cuda("fill_zero"); }
void copy_to_device_async(CudaContext&, const void*, DeviceTensor&) { no_cuda("copy_to_device_async"); }
void copy_to_host_async(CudaContext&, const DeviceTensor&, void*) { no_cuda("copy_to_host_async"); }
PinnedBuffer::PinnedBuffer(CudaContext& ctx) : ctx_(ctx) { no_cuda("PinnedBuffer"); }
PinnedBuffer::~PinnedBuffer() = default;
void* PinnedBuffer::acquire(std::size_t) { no_cuda("PinnedBuffer::acquire"); }
void PinnedBuffer::mark_used() { no_cuda("PinnedBuffer::mark_used"); }

}  // namespace cuda
}  // namespace driftlab
