// CUDA runtime pieces the engine, tests and benchmarks use from plain C++ (no CUDA header
// here, so g++ compiles every caller): a caching device allocator, a device tensor, the
// CUDA exec context (stream, library handles, the tf32/deterministic switches), and
// host<->device copies. Implemented in runtime.cu (nvcc) or runtime_stub.cpp (no nvcc:
// every entry point throws "driftlab was built without CUDA").
//
// Stream order: everything a CudaContext launches goes to its one stream, and the caching
// allocator hands a released block out again only to work on that same stream, so a block
// is never reused while a kernel still reads it. Copies to the host synchronise the stream.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace driftlab {
namespace cuda {

struct AllocatorStats {
  std::size_t in_use_bytes = 0;  // handed out, by bucket size
  std::size_t cached_bytes = 0;  // on the free lists
  std::size_t peak_bytes = 0;    // max of in_use + cached
  int64_t device_mallocs = 0;    // cudaMalloc calls
  int64_t cache_hits = 0;        // allocations served from a free list
};

// Plain cudaMalloc behind exact-size free lists (no managed memory). Requests are rounded
// up to a bucket: multiples of 512 B below 1 MiB, multiples of 2 MiB above, so tensors of
// the same shape always land in the same bucket and a training step reuses its blocks.
// Out of memory: the cache is emptied and cudaMalloc retried once; if that fails too, an
// Error names the requested and rounded size, the device's free/total memory, what this
// allocator holds in use and what it had cached.
class CachingAllocator {
 public:
  CachingAllocator() = default;
  ~CachingAllocator();  // frees the cached blocks (blocks still in use are a caller bug: reported by stats)
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(std::size_t bytes);  // nullptr for 0 bytes
  void release(void* ptr);            // back to its free list; nullptr is ignored
  void empty_cache();                 // cudaFree every cached block
  AllocatorStats stats() const;
  static std::size_t bucket_size(std::size_t bytes);

 private:
  mutable std::mutex mu_;
  std::map<std::size_t, std::vector<void*>> free_;  // bucket size -> cached blocks
  std::unordered_map<void*, std::size_t> live_;     // block -> bucket size
  AllocatorStats stats_;
};

// Which implementation runs an op on the GPU: driftlab's own kernels or the vendor library
// (cuBLAS for gemm, cuDNN for conv/pool/BatchNorm/softmax/LSTM/GRU).
enum class CudaBackend { own, vendor };
const char* cuda_backend_name(CudaBackend b);

// How cuDNN picks a convolution algorithm.
enum class CudnnAlgoSearch {
  heuristic,   // cudnnGet*Algorithm_v7, first that fits (PyTorch with cudnn.benchmark=False)
  exhaustive,  // cudnnFind*Algorithm: time them all, take the fastest (TF autotune, torch benchmark=True)
};

// The GPU switches a Policy resolves into (the kernels never see the Policy). Knobs to add
// to engine/policy.*: see docs/CUDA.md.
struct CudaExecParams {
  CudaBackend gemm_backend = CudaBackend::own;     // own tiled gemm | cuBLAS
  CudaBackend conv_backend = CudaBackend::own;     // own im2col+gemm | cuDNN
  CudaBackend pool_backend = CudaBackend::own;     // own | cuDNN pooling
  CudaBackend bn_backend = CudaBackend::own;       // own | cuDNN BatchNorm
  CudaBackend softmax_backend = CudaBackend::own;  // own | cuDNN softmax inside the loss
  CudaBackend rnn_backend = CudaBackend::own;      // own LSTM/GRU kernels | cuDNN RNN
  // TF32 tensor cores for float32 matmul (cuBLAS CUBLAS_TF32_TENSOR_OP_MATH vs
  // CUBLAS_DEFAULT_MATH) and for float32 convolutions (cuDNN CUDNN_DEFAULT_MATH, which allows
  // TF32, vs CUDNN_FMA_MATH). Two fields because PyTorch 1.13's defaults differ:
  // matmul off (torch.backends.cuda.matmul.allow_tf32=False), cuDNN on (cudnn.allow_tf32=True);
  // TensorFlow >= 2.4 enables both. driftlab's own kernels never use TF32.
  bool tf32_matmul = false;
  bool tf32_conv = false;
  // Deterministic cuDNN algorithms only (PyTorch cudnn.deterministic / TF_DETERMINISTIC_OPS),
  // CUDNN_POOLING_MAX_DETERMINISTIC, cuBLAS atomics disallowed. driftlab's own kernels use no
  // atomics and fixed reduction trees, so they are deterministic either way.
  bool deterministic = false;
  CudnnAlgoSearch algo_search = CudnnAlgoSearch::heuristic;
  // cuDNN's RNN algorithm: false = CUDNN_RNN_ALGO_STANDARD always; true = PyTorch's rule
  // (float32/float16 LSTM and GRU: PERSIST_STATIC_SMALL_H when hidden <= 192 in the forward and
  // <= 128 in the backward, rnn_cudnn.cpp).
  bool rnn_persist_small_h = false;
  std::size_t workspace_limit = std::size_t(1) << 30;  // bytes an algorithm may ask for
  std::string str() const;  // "gemm=own conv=cudnn ... tf32_matmul=0 ..." for reports
};

// One chosen cuDNN algorithm, recorded so that reports say what ran.
struct AlgoRecord {
  std::string op;         // "conv2d_forward", "conv2d_backward_data", "conv2d_backward_weight"
  std::string signature;  // Conv2dParams::str() + dtype
  int algo = -1;          // the cuDNN enum value
  std::string algo_name;  // e.g. "IMPLICIT_PRECOMP_GEMM"
  std::size_t workspace = 0;
  bool deterministic = false;
  std::string math;  // "FMA" or "DEFAULT(tf32 allowed)"
};

// The CUDA exec context: device, one stream, the allocator, lazily created cuBLAS/cuDNN
// handles, the switches and the cuDNN algorithm cache. Not copyable; one per thread.
class CudaContext {
 public:
  explicit CudaContext(const CudaExecParams& params = {}, int device = 0);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  const CudaExecParams& params() const { return params_; }
  void set_params(const CudaExecParams& p);  // algorithm cache is cleared when the search/determinism/tf32 change
  int device() const { return device_; }
  CachingAllocator& allocator() { return *alloc_; }
  const std::shared_ptr<CachingAllocator>& allocator_ptr() const { return alloc_; }
  void* stream() const { return stream_; }  // a cudaStream_t
  void* cublas();                           // a cublasHandle_t, created on first use
  void* cudnn();                            // a cudnnHandle_t, created on first use
  void synchronize() const;

  // A scratch block of at least `bytes` (grows, never shrinks; stream ordered).
  void* workspace(std::size_t bytes);

  // cuDNN algorithm cache, keyed by op + signature; every choice is also appended to algo_log().
  const AlgoRecord* find_algo(const std::string& op, const std::string& signature) const;
  void record_algo(const AlgoRecord& r);
  const std::vector<AlgoRecord>& algo_log() const { return algo_log_; }

 private:
  CudaExecParams params_;
  int device_ = 0;
  std::shared_ptr<CachingAllocator> alloc_;
  void* stream_ = nullptr;
  void* cublas_ = nullptr;
  void* cudnn_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
  std::map<std::string, AlgoRecord> algo_cache_;
  std::vector<AlgoRecord> algo_log_;
};

// A dense, contiguous, row-major float32/float64 array on the device with a shape. Owns its
// block (returned to the allocator on destruction); move-only, so every copy is explicit.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  // Uninitialised: for outputs a kernel overwrites ('='); zeros() for '+=' outputs.
  DeviceTensor(CudaContext& ctx, Shape shape, DType dtype);
  static DeviceTensor zeros(CudaContext& ctx, Shape shape, DType dtype);
  ~DeviceTensor();
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  DeviceTensor(DeviceTensor&& o) noexcept;
  DeviceTensor& operator=(DeviceTensor&& o) noexcept;

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  bool defined() const { return ptr_ != nullptr || numel_ == 0; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * dtype_size(dtype_); }
  void* raw() { return ptr_; }
  const void* raw() const { return ptr_; }
  template <typename T>
  T* data() {
    if (dtype_ != DTypeOf<T>::value)
      fail("device tensor: data<", dtype_name(DTypeOf<T>::value), "> on a ", dtype_name(dtype_), " tensor of shape ",
           shape_str(shape_));
    return static_cast<T*>(ptr_);
  }
  template <typename T>
  const T* data() const {
    return const_cast<DeviceTensor*>(this)->data<T>();
  }
  // Same block, another shape with the same numel (the view does not own: keep *this alive).
  DeviceTensor reshape_view(Shape shape) const;

 private:
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::f32;
  void* ptr_ = nullptr;
  std::shared_ptr<CachingAllocator> alloc_;  // null for views
};

void check_device_shape(const char* op, const char* name, const DeviceTensor& t, const Shape& expected);

// An untyped block from a context's allocator (index arrays, library buffers that are not
// float tensors), returned to the allocator on destruction; stream ordered like DeviceTensor.
class DeviceBytes {
 public:
  DeviceBytes() = default;
  DeviceBytes(CudaContext& ctx, std::size_t bytes)
      : alloc_(ctx.allocator_ptr()), ptr_(alloc_->allocate(bytes)), bytes_(bytes) {}
  ~DeviceBytes() {
    if (alloc_) alloc_->release(ptr_);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  DeviceBytes(DeviceBytes&& o) noexcept : alloc_(std::move(o.alloc_)), ptr_(o.ptr_), bytes_(o.bytes_) {
    o.ptr_ = nullptr, o.bytes_ = 0;
  }
  DeviceBytes& operator=(DeviceBytes&& o) noexcept {
    if (this != &o) {
      if (alloc_) alloc_->release(ptr_);
      alloc_ = std::move(o.alloc_), ptr_ = o.ptr_, bytes_ = o.bytes_;
      o.ptr_ = nullptr, o.bytes_ = 0;
    }
    return *this;
  }
  void* get() const { return ptr_; }
  std::size_t size() const { return bytes_; }

 private:
  std::shared_ptr<CachingAllocator> alloc_;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};
// A new device block holding `bytes` from the host (copied on ctx's stream; returns when the
// copy is done, as copy_to_device: the host buffer may then be freed or changed).
DeviceBytes bytes_to_device(CudaContext& ctx, const void* host, std::size_t bytes);

// Times work on a context's stream with CUDA events (benchmarks report it as manual time).
class EventTimer {
 public:
  explicit EventTimer(CudaContext& ctx);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start();           // records the start event on the stream
  double stop_seconds();  // records the end event, waits for it, returns the elapsed seconds

 private:
  CudaContext& ctx_;
  void* begin_ = nullptr;  // cudaEvent_t
  void* end_ = nullptr;
};

// Copies. to_device/to_host allocate; copy_* write an existing tensor of the same shape/dtype.
DeviceTensor to_device(CudaContext& ctx, const Tensor& host);
Tensor to_host(CudaContext& ctx, const DeviceTensor& dev);  // synchronises the stream
void copy_to_device(CudaContext& ctx, const Tensor& host, DeviceTensor& dev);
void copy_to_host(CudaContext& ctx, const DeviceTensor& dev, Tensor& host);  // synchronises
// The same from and into host memory the caller sizes (dev.nbytes() bytes): a batch inside a
// larger host tensor moves without a copy of its own.
void copy_to_device(CudaContext& ctx, const void* host, DeviceTensor& dev);
void copy_to_host(CudaContext& ctx, const DeviceTensor& dev, void* host);  // synchronises
void copy_device(CudaContext& ctx, const DeviceTensor& src, DeviceTensor& dst);
void fill_zero(CudaContext& ctx, DeviceTensor& t);

// Page-locked host memory (cudaHostAlloc) for copies that do not wait: a cudaMemcpyAsync from or
// into it returns at once (from pageable memory it cannot: copy_to_device synchronises), so a
// training step queues its uploads and its reads and waits once. acquire() first waits for the
// copies queued before the last mark_used() (an event on the context's stream), so the host never
// overwrites bytes a queued copy has yet to read, whatever happened in between (an exception
// after the copies were queued included).
class PinnedBuffer {
 public:
  explicit PinnedBuffer(CudaContext& ctx);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  // At least `bytes` of pinned memory, unused by any queued copy (contents kept only while the
  // size fits); valid until the next acquire.
  void* acquire(std::size_t bytes);
  // Marks the copies queued so far as the last users of the memory.
  void mark_used();

 private:
  CudaContext& ctx_;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  void* event_ = nullptr;  // cudaEvent_t
  bool pending_ = false;
};
// Queued copies that do not synchronise: `pinned` must be page-locked (a PinnedBuffer's) and
// stay unchanged until the stream has run the copy (PinnedBuffer::mark_used, then acquire).
void copy_to_device_async(CudaContext& ctx, const void* pinned, DeviceTensor& dev);
void copy_to_host_async(CudaContext& ctx, const DeviceTensor& dev, void* pinned);

}  // namespace cuda
}  // namespace driftlab
