// CUDA runtime pieces (see runtime.h): caching allocator, exec context, device tensors,
// copies. Every runtime/library call is checked (kernels/cuda/check.h).
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <sstream>

#include "kernels/cuda/check.h"
#include "kernels/cuda/cublas/cublas_api.h"
#include "kernels/cuda/runtime.h"

namespace driftlab {
namespace cuda {

namespace {
constexpr std::size_t kSmallLimit = std::size_t(1) << 20;  // 1 MiB
constexpr std::size_t kSmallRound = 512;
constexpr std::size_t kLargeRound = std::size_t(2) << 20;  // 2 MiB
double mib(std::size_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); }
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
}  // namespace

// ---- allocator ----

std::size_t CachingAllocator::bucket_size(std::size_t bytes) {
  const std::size_t r = bytes < kSmallLimit ? kSmallRound : kLargeRound;
  return (bytes + r - 1) / r * r;
}

CachingAllocator::~CachingAllocator() {
  // No throwing from a destructor: free what is cached, ignore errors (the context may be gone).
  for (auto& kv : free_)
    for (void* p : kv.second) cudaFree(p);
}

void* CachingAllocator::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const std::size_t size = bucket_size(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = free_.find(size);
  if (it != free_.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    stats_.cached_bytes -= size;
    stats_.in_use_bytes += size;
    ++stats_.cache_hits;
    live_[p] = size;
    return p;
  }
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, size);
  std::size_t cached_before = stats_.cached_bytes;
  if (err == cudaErrorMemoryAllocation && stats_.cached_bytes > 0) {
    // Give the cached blocks back to the driver and try once more.
    cudaGetLastError();
    for (auto& kv : free_)
      for (void* q : kv.second) cudaFree(q);
    free_.clear();
    stats_.cached_bytes = 0;
    err = cudaMalloc(&p, size);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    std::size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    std::ostringstream os;
    os.precision(4);
    os << "cuda: out of device memory: cudaMalloc(" << size << " bytes = " << mib(size) << " MiB, for a request of "
       << bytes << " bytes) failed (" << cudaGetErrorString(err) << "); device has " << mib(free_b) << " MiB free of "
       << mib(total_b) << " MiB; this allocator holds " << mib(stats_.in_use_bytes) << " MiB in use and had "
       << mib(cached_before) << " MiB cached (released before the retry)";
    fail(os.str());
  }
  ++stats_.device_mallocs;
  stats_.in_use_bytes += size;
  if (stats_.in_use_bytes + stats_.cached_bytes > stats_.peak_bytes)
    stats_.peak_bytes = stats_.in_use_bytes + stats_.cached_bytes;
  live_[p] = size;
  return p;
}

void CachingAllocator::release(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(ptr);
  check(it != live_.end(), "cuda allocator: release of a pointer it did not allocate");
  const std::size_t size = it->second;
  live_.erase(it);
  free_[size].push_back(ptr);
  stats_.in_use_bytes -= size;
  stats_.cached_bytes += size;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& kv : free_)
    for (void* p : kv.second) DL_CUDA_CHECK(cudaFree(p));
  free_.clear();
  stats_.cached_bytes = 0;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

// ---- exec params ----

// cuda_backend_name and CudaExecParams::str: kernels/cuda/exec_params.cpp (plain C++, every build).

// ---- context ----

CudaContext::CudaContext(const CudaExecParams& params, int device)
    : params_(params), device_(device), alloc_(std::make_shared<CachingAllocator>()) {
  DL_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t s = nullptr;
  DL_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
}

CudaContext::~CudaContext() {
  if (stream_) cudaStreamSynchronize(as_stream(stream_));
  if (workspace_) alloc_->release(workspace_);
  if (cublas_) cublas_api().destroy(static_cast<cublasHandle_t>(cublas_));
  if (cudnn_) cudnnDestroy(static_cast<cudnnHandle_t>(cudnn_));
  if (stream_) cudaStreamDestroy(as_stream(stream_));
}

void CudaContext::set_params(const CudaExecParams& p) {
  if (p.algo_search != params_.algo_search || p.deterministic != params_.deterministic ||
      p.tf32_conv != params_.tf32_conv || p.workspace_limit != params_.workspace_limit)
    algo_cache_.clear();
  params_ = p;
}

void* CudaContext::cublas() {
  if (!cublas_) {
    cublasHandle_t h = nullptr;
    DL_CUBLAS_CHECK(cublas_api().create(&h));
    cublas_ = h;
    DL_CUBLAS_CHECK(cublas_api().set_stream(h, as_stream(stream_)));
  }
  return cublas_;
}

void* CudaContext::cudnn() {
  if (!cudnn_) {
    cudnnHandle_t h = nullptr;
    DL_CUDNN_CHECK(cudnnCreate(&h));
    cudnn_ = h;
    DL_CUDNN_CHECK(cudnnSetStream(h, as_stream(stream_)));
  }
  return cudnn_;
}

void CudaContext::synchronize() const { DL_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream_))); }

void* CudaContext::workspace(std::size_t bytes) {
  if (bytes <= workspace_bytes_) return workspace_;
  // Stream ordered: the old block goes back to the cache and is only reused by later work.
  if (workspace_) alloc_->release(workspace_);
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  workspace_ = alloc_->allocate(bytes);
  workspace_bytes_ = bytes;
  return workspace_;
}

const AlgoRecord* CudaContext::find_algo(const std::string& op, const std::string& signature) const {
  auto it = algo_cache_.find(op + "|" + signature);
  return it == algo_cache_.end() ? nullptr : &it->second;
}

void CudaContext::record_algo(const AlgoRecord& r) {
  algo_cache_[r.op + "|" + r.signature] = r;
  algo_log_.push_back(r);
}

// ---- device tensor ----

DeviceTensor::DeviceTensor(CudaContext& ctx, Shape shape, DType dtype)
    : shape_(std::move(shape)), numel_(shape_numel(shape_)), dtype_(dtype), alloc_(ctx.allocator_ptr()) {
  ptr_ = alloc_->allocate(nbytes());
}

DeviceTensor DeviceTensor::zeros(CudaContext& ctx, Shape shape, DType dtype) {
  DeviceTensor t(ctx, std::move(shape), dtype);
  fill_zero(ctx, t);
  return t;
}

DeviceTensor::~DeviceTensor() {
  if (alloc_ && ptr_) alloc_->release(ptr_);
}

DeviceTensor::DeviceTensor(DeviceTensor&& o) noexcept
    : shape_(std::move(o.shape_)), numel_(o.numel_), dtype_(o.dtype_), ptr_(o.ptr_), alloc_(std::move(o.alloc_)) {
  o.ptr_ = nullptr;
  o.numel_ = 0;
}

DeviceTensor& DeviceTensor::operator=(DeviceTensor&& o) noexcept {
  if (this != &o) {
    if (alloc_ && ptr_) alloc_->release(ptr_);
    shape_ = std::move(o.shape_);
    numel_ = o.numel_;
    dtype_ = o.dtype_;
    ptr_ = o.ptr_;
    alloc_ = std::move(o.alloc_);
    o.ptr_ = nullptr;
    o.numel_ = 0;
  }
  return *this;
}

int64_t DeviceTensor::dim(int i) const {
  const int r = rank();
  const int j = i < 0 ? i + r : i;
  check(j >= 0 && j < r, "device tensor: dim(", i, ") of a rank-", r, " tensor ", shape_str(shape_));
  return shape_[static_cast<std::size_t>(j)];
}

DeviceTensor DeviceTensor::reshape_view(Shape shape) const {
  check(shape_numel(shape) == numel_, "device tensor: reshape ", shape_str(shape_), " -> ", shape_str(shape),
        " changes the element count");
  DeviceTensor v;
  v.shape_ = std::move(shape);
  v.numel_ = numel_;
  v.dtype_ = dtype_;
  v.ptr_ = ptr_;
  return v;
}

void check_device_shape(const char* op, const char* name, const DeviceTensor& t, const Shape& expected) {
  if (t.shape() != expected)
    fail(op, ": ", name, " has shape ", shape_str(t.shape()), ", expected ", shape_str(expected));
}

// ---- event timer ----

EventTimer::EventTimer(CudaContext& ctx) : ctx_(ctx) {
  cudaEvent_t b = nullptr, e = nullptr;
  DL_CUDA_CHECK(cudaEventCreate(&b));
  begin_ = b;
  DL_CUDA_CHECK(cudaEventCreate(&e));
  end_ = e;
}

EventTimer::~EventTimer() {
  if (begin_) cudaEventDestroy(static_cast<cudaEvent_t>(begin_));
  if (end_) cudaEventDestroy(static_cast<cudaEvent_t>(end_));
}

void EventTimer::start() { DL_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(begin_), as_stream(ctx_.stream()))); }

double EventTimer::stop_seconds() {
  DL_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(end_), as_stream(ctx_.stream())));
  DL_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(end_)));
  float ms = 0;
  DL_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(begin_), static_cast<cudaEvent_t>(end_)));
  return static_cast<double>(ms) / 1000.0;
}

// ---- copies ----

namespace {
void check_pair(const char* fn, const Shape& a, DType da, const Shape& b, DType db) {
  if (a != b || da != db)
    fail("cuda: ", fn, ": ", shape_str(a), " ", dtype_name(da), " vs ", shape_str(b), " ", dtype_name(db));
}
}  // namespace

DeviceTensor to_device(CudaContext& ctx, const Tensor& host) {
  DeviceTensor d(ctx, host.shape(), host.dtype());
  copy_to_device(ctx, host, d);
  return d;
}

Tensor to_host(CudaContext& ctx, const DeviceTensor& dev) {
  Tensor h = Tensor::empty(dev.shape(), dev.dtype());
  copy_to_host(ctx, dev, h);
  return h;
}

void copy_to_device(CudaContext& ctx, const void* host, DeviceTensor& dev) {
  if (dev.nbytes() == 0) return;
  DL_CUDA_CHECK(cudaMemcpyAsync(dev.raw(), host, dev.nbytes(), cudaMemcpyHostToDevice, as_stream(ctx.stream())));
  // Pageable host memory: the copy has read the source when cudaMemcpyAsync returns only for
  // small sizes, so synchronise before the caller may free or change `host`.
  ctx.synchronize();
}

void copy_to_host(CudaContext& ctx, const DeviceTensor& dev, void* host) {
  if (dev.nbytes() == 0) return;
  DL_CUDA_CHECK(cudaMemcpyAsync(host, dev.raw(), dev.nbytes(), cudaMemcpyDeviceToHost, as_stream(ctx.stream())));
  ctx.synchronize();
}

void copy_to_device(CudaContext& ctx, const Tensor& host, DeviceTensor& dev) {
  check_pair("copy_to_device", host.shape(), host.dtype(), dev.shape(), dev.dtype());
  copy_to_device(ctx, host.raw(), dev);
}

void copy_to_host(CudaContext& ctx, const DeviceTensor& dev, Tensor& host) {
  check_pair("copy_to_host", dev.shape(), dev.dtype(), host.shape(), host.dtype());
  copy_to_host(ctx, dev, host.raw());
}

void copy_device(CudaContext& ctx, const DeviceTensor& src, DeviceTensor& dst) {
  check_pair("copy_device", src.shape(), src.dtype(), dst.shape(), dst.dtype());
  if (src.nbytes() == 0) return;
  DL_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToDevice, as_stream(ctx.stream())));
}

DeviceBytes bytes_to_device(CudaContext& ctx, const void* host, std::size_t bytes) {
  DeviceBytes d(ctx, bytes);
  if (bytes == 0) return d;
  DL_CUDA_CHECK(cudaMemcpyAsync(d.get(), host, bytes, cudaMemcpyHostToDevice, as_stream(ctx.stream())));
  ctx.synchronize();  // pageable source: see copy_to_device
  return d;
}

void copy_to_device_async(CudaContext& ctx, const void* pinned, DeviceTensor& dev) {
  if (dev.nbytes() == 0) return;
  DL_CUDA_CHECK(cudaMemcpyAsync(dev.raw(), pinned, dev.nbytes(), cudaMemcpyHostToDevice, as_stream(ctx.stream())));
}

void copy_to_host_async(CudaContext& ctx, const DeviceTensor& dev, void* pinned) {
  if (dev.nbytes() == 0) return;
  DL_CUDA_CHECK(cudaMemcpyAsync(pinned, dev.raw(), dev.nbytes(), cudaMemcpyDeviceToHost, as_stream(ctx.stream())));
}

// ---- pinned staging ----

PinnedBuffer::PinnedBuffer(CudaContext& ctx) : ctx_(ctx) {
  cudaEvent_t e = nullptr;
  DL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  event_ = e;
}

PinnedBuffer::~PinnedBuffer() {
  if (pending_) cudaEventSynchronize(static_cast<cudaEvent_t>(event_));
  if (ptr_) cudaFreeHost(ptr_);
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

void* PinnedBuffer::acquire(std::size_t bytes) {
  if (pending_) {
    DL_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
    pending_ = false;
  }
  if (bytes > bytes_) {
    const std::size_t want = std::max(bytes, bytes_ * 2);
    if (ptr_) DL_CUDA_CHECK(cudaFreeHost(ptr_));
    ptr_ = nullptr;
    bytes_ = 0;
    cudaError_t err = cudaHostAlloc(&ptr_, want, cudaHostAllocDefault);
    if (err != cudaSuccess) {
      cudaGetLastError();
      ptr_ = nullptr;
      fail("cuda: out of page-locked host memory: cudaHostAlloc(", want, " bytes) failed (", cudaGetErrorString(err),
           ")");
    }
    bytes_ = want;
  }
  return ptr_;
}

void PinnedBuffer::mark_used() {
  DL_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_), as_stream(ctx_.stream())));
  pending_ = true;
}

void fill_zero(CudaContext& ctx, DeviceTensor& t) {
  if (t.nbytes() == 0) return;
  DL_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.nbytes(), as_stream(ctx.stream())));
}

}  // namespace cuda
}  // namespace driftlab
