// The CUDA emulation's host runtime (tests/emu): the pieces of kernels/cuda/runtime.h and
// device_count on host memory, so that every own CUDA kernel file (rewritten by
// launches_to_calls.cmake, run by emu_launch.cpp) and the dispatchers run on a machine without
// a GPU, under the CUDA tests themselves (tests/cuda/*).
//
// What this checks: the kernels' arithmetic, indexing and block cooperation (shared memory,
// __syncthreads), the host code around them (gemm shapes and split-K, im2col, time-major
// bookkeeping, workspaces, dispatch, the device layers and trainer), against the CPU
// reference. What it cannot: cuDNN and cuBLAS (the vendor paths are not emulated: a call into
// them fails), races between threads that a GPU runs at once (the fibers of a block run in
// turn), CUDA's math library (<cmath> stands in for expf/tanhf), launch limits and the
// device's memory limits. Linked with --allow-multiple-definition and placed before the
// libraries, these definitions win over the real (or stub) runtime in libdriftlab_cuda.
//
// Uninitialised device memory is filled with 0xFF bytes (NaN in float32 and float64), so a
// kernel that reads what nobody wrote shows up as NaN in the comparisons.
#include <cstdlib>
#include <cstring>

#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {

std::size_t CachingAllocator::bucket_size(std::size_t bytes) { return bytes; }
CachingAllocator::~CachingAllocator() = default;
void* CachingAllocator::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* p = std::malloc(bytes);
  check(p != nullptr, "emulation: out of host memory for ", bytes, " bytes");
  std::memset(p, 0xFF, bytes);
  return p;
}
void CachingAllocator::release(void* ptr) { std::free(ptr); }
void CachingAllocator::empty_cache() {}
AllocatorStats CachingAllocator::stats() const { return stats_; }

CudaContext::CudaContext(const CudaExecParams& params, int device)
    : params_(params), device_(device), alloc_(std::make_shared<CachingAllocator>()) {}
CudaContext::~CudaContext() = default;
void CudaContext::set_params(const CudaExecParams& p) { params_ = p; }
void* CudaContext::cublas() { fail("emulation: cuBLAS is not emulated"); }
void* CudaContext::cudnn() { fail("emulation: cuDNN is not emulated"); }
void CudaContext::synchronize() const {}
void* CudaContext::workspace(std::size_t) { fail("emulation: no workspace (gemm.cu's split-K is not emulated)"); }
const AlgoRecord* CudaContext::find_algo(const std::string& op, const std::string& sig) const {
  auto it = algo_cache_.find(op + "|" + sig);
  return it == algo_cache_.end() ? nullptr : &it->second;
}
void CudaContext::record_algo(const AlgoRecord& r) {
  algo_cache_[r.op + "|" + r.signature] = r;
  algo_log_.push_back(r);
}

DeviceTensor::DeviceTensor(CudaContext& ctx, Shape shape, DType dtype)
    : shape_(std::move(shape)), numel_(shape_numel(shape_)), dtype_(dtype), alloc_(ctx.allocator_ptr()) {
  ptr_ = alloc_->allocate(nbytes());
}
DeviceTensor DeviceTensor::zeros(CudaContext& ctx, Shape shape, DType dtype) {
  DeviceTensor t(ctx, std::move(shape), dtype);
  if (t.nbytes()) std::memset(t.ptr_, 0, t.nbytes());
  return t;
}
DeviceTensor::~DeviceTensor() {
  if (alloc_) alloc_->release(ptr_);
}
DeviceTensor::DeviceTensor(DeviceTensor&& o) noexcept
    : shape_(std::move(o.shape_)), numel_(o.numel_), dtype_(o.dtype_), ptr_(o.ptr_), alloc_(std::move(o.alloc_)) {
  o.ptr_ = nullptr, o.numel_ = 0;
}
DeviceTensor& DeviceTensor::operator=(DeviceTensor&& o) noexcept {
  if (this != &o) {
    if (alloc_) alloc_->release(ptr_);
    shape_ = std::move(o.shape_), numel_ = o.numel_, dtype_ = o.dtype_, ptr_ = o.ptr_, alloc_ = std::move(o.alloc_);
    o.ptr_ = nullptr, o.numel_ = 0;
  }
  return *this;
}
int64_t DeviceTensor::dim(int i) const { return shape_.at(static_cast<std::size_t>(i < 0 ? i + rank() : i)); }
DeviceTensor DeviceTensor::reshape_view(Shape shape) const {
  check(shape_numel(shape) == numel_, "emulation: reshape_view to ", shape_str(shape), " of ", shape_str(shape_));
  DeviceTensor v;
  v.shape_ = std::move(shape), v.numel_ = numel_, v.dtype_ = dtype_, v.ptr_ = ptr_;
  return v;
}
void check_device_shape(const char* op, const char* name, const DeviceTensor& t, const Shape& expected) {
  if (t.shape() != expected)
    fail(op, ": ", name, " has shape ", shape_str(t.shape()), ", expected ", shape_str(expected));
}

DeviceTensor to_device(CudaContext& ctx, const Tensor& host) {
  DeviceTensor d(ctx, host.shape(), host.dtype());
  if (host.nbytes()) std::memcpy(d.raw(), host.raw(), host.nbytes());
  return d;
}
Tensor to_host(CudaContext&, const DeviceTensor& dev) {
  Tensor h = Tensor::empty(dev.shape(), dev.dtype());
  if (h.nbytes()) std::memcpy(h.raw(), dev.raw(), h.nbytes());
  return h;
}
void copy_to_device(CudaContext&, const void* host, DeviceTensor& dev) {
  if (dev.nbytes()) std::memcpy(dev.raw(), host, dev.nbytes());
}
void copy_to_host(CudaContext&, const DeviceTensor& dev, void* host) {
  if (dev.nbytes()) std::memcpy(host, dev.raw(), dev.nbytes());
}
void copy_to_device(CudaContext& ctx, const Tensor& host, DeviceTensor& dev) {
  check(host.nbytes() == dev.nbytes(), "emulation: copy_to_device of ", host.nbytes(), " into ", dev.nbytes(), " bytes");
  copy_to_device(ctx, host.raw(), dev);
}
void copy_to_host(CudaContext& ctx, const DeviceTensor& dev, Tensor& host) {
  check(host.nbytes() == dev.nbytes(), "emulation: copy_to_host of ", dev.nbytes(), " into ", host.nbytes(), " bytes");
  copy_to_host(ctx, dev, host.raw());
}
void copy_device(CudaContext&, const DeviceTensor& src, DeviceTensor& dst) {
  check(src.nbytes() == dst.nbytes(), "emulation: copy_device of ", src.nbytes(), " into ", dst.nbytes(), " bytes");
  if (src.nbytes()) std::memcpy(dst.raw(), src.raw(), src.nbytes());
}
void fill_zero(CudaContext&, DeviceTensor& t) {
  if (t.nbytes()) std::memset(t.raw(), 0, t.nbytes());
}
void copy_to_device_async(CudaContext& ctx, const void* pinned, DeviceTensor& dev) { copy_to_device(ctx, pinned, dev); }
void copy_to_host_async(CudaContext& ctx, const DeviceTensor& dev, void* pinned) { copy_to_host(ctx, dev, pinned); }
// Host memory stands in for page-locked memory; copies are immediate, so nothing is pending.
PinnedBuffer::PinnedBuffer(CudaContext& ctx) : ctx_(ctx) {}
PinnedBuffer::~PinnedBuffer() { std::free(ptr_); }
void* PinnedBuffer::acquire(std::size_t bytes) {
  if (bytes > bytes_) {
    std::free(ptr_);
    ptr_ = std::malloc(bytes);
    check(ptr_ != nullptr, "emulation: out of host memory for ", bytes, " pinned bytes");
    std::memset(ptr_, 0xFF, bytes);
    bytes_ = bytes;
  }
  return ptr_;
}
void PinnedBuffer::mark_used() { pending_ = true; }
DeviceBytes bytes_to_device(CudaContext& ctx, const void* host, std::size_t bytes) {
  DeviceBytes d(ctx, bytes);
  if (bytes) std::memcpy(d.get(), host, bytes);
  return d;
}

int device_count(std::string* why_none) {
  if (why_none) why_none->clear();
  return 1;
}

}  // namespace cuda
}  // namespace driftlab
