#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <sstream>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/host_memory.h"

namespace driftlab {

namespace {
// Name and size of every dtype, in enumerator order.
struct DTypeRow {
  DType dtype;
  const char* name;
  std::size_t size;
};
constexpr DTypeRow kDTypes[] = {{DType::f32, "float32", 4}, {DType::f64, "float64", 8}, {DType::i8, "int8", 1},
                                {DType::u8, "uint8", 1},    {DType::i32, "int32", 4},   {DType::i64, "int64", 8}};

const DTypeRow& dtype_row(DType t) {
  for (const DTypeRow& r : kDTypes)
    if (r.dtype == t) return r;
  fail("tensor: unknown dtype ", static_cast<int>(t));
}
}  // namespace

const char* dtype_name(DType t) { return dtype_row(t).name; }
std::size_t dtype_size(DType t) { return dtype_row(t).size; }
bool is_float(DType t) { return t == DType::f32 || t == DType::f64; }

DType dtype_from_name(const std::string& name) {
  std::string known;
  for (const DTypeRow& r : kDTypes) {
    if (name == r.name) return r.dtype;
    known += (known.empty() ? "" : ", ") + std::string(r.name);
  }
  fail("tensor: unknown dtype '", name, "' (known: ", known, ")");
}

void fail_dtype(const char* what, DType dtype) {
  const int code = static_cast<int>(dtype);
  for (const DTypeRow& r : kDTypes)
    if (r.dtype == dtype) fail(what, ": ", r.name, " tensor where a floating-point type (float32, float64) is needed");
  fail(what, ": unknown dtype ", code);
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << ']';
  return os.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : s) {
    if (d < 0) fail("tensor: negative dimension in shape ", shape_str(s));
    // Keep scanning after an overflow: a later 0 makes the product 0, and a later negative is
    // the better message.
    if (!overflow) overflow = __builtin_mul_overflow(n, d, &n);
  }
  for (int64_t d : s)
    if (d == 0) return 0;
  if (overflow) fail("tensor: shape ", shape_str(s), " has more than 2^63-1 elements");
  return n;
}

Tensor Tensor::empty(Shape shape, DType dtype) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.dtype_ = dtype;
  t.allocate(false);
  return t;
}

Tensor::Tensor(Shape shape, DType dtype)
    : shape_(std::move(shape)), numel_(shape_numel(shape_)), dtype_(dtype) {
  allocate(true);
}

namespace {
// glibc serves a block above M_MMAP_THRESHOLD (128 KiB at first, raised as such blocks are freed)
// with a fresh mmap, and returns the heap's free top to the system beyond M_TRIM_THRESHOLD: then
// every pass's buffers cost page faults and the kernel's page clearing (9% of a ResNet-20 FGSM's
// samples in perf, 3% after this, start-up included; 2026-11-27). Tensor storage of 64 KiB and
// more now comes from host_memory's cache; this keeps the other mallocs (kernels' std::vector
// scratch, oneDNN's buffers) of up to 32 MiB (glibc's largest threshold on 64-bit) on the heap,
// and freed memory there for the next pass. Once, at the first tensor.
void keep_freed_blocks() {
#if defined(__GLIBC__)
  static const bool done = [] {
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 1024 * 1024 * 1024);
    return true;
  }();
  (void)done;
#endif
}
}  // namespace

void Tensor::allocate(bool zero) {
  keep_freed_blocks();
  // 64-byte alignment suits AVX-512 loads in Eigen and oneDNN (host_memory aligns every block).
  std::size_t bytes = (nbytes() + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  void* p = host_memory::allocate(bytes);
  check(p != nullptr, "tensor: out of memory allocating ", bytes, " bytes for shape ",
        shape_str(shape_));
  if (zero) std::memset(p, 0, bytes);
  storage_.reset(static_cast<unsigned char*>(p), [bytes](unsigned char* q) { host_memory::release(q, bytes); });
}

Tensor Tensor::wrap(Shape shape, DType dtype, std::shared_ptr<unsigned char> storage, std::size_t capacity) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.numel_ = shape_numel(t.shape_);
  const std::size_t need = (t.nbytes() + 63) / 64 * 64;
  check(storage != nullptr && reinterpret_cast<std::uintptr_t>(storage.get()) % 64 == 0 && capacity >= need,
        "tensor: wrap: memory at ", static_cast<const void*>(storage.get()), " of ", capacity,
        " bytes is not 64-byte aligned with ", need, " bytes (", shape_str(t.shape_), " ", dtype_name(dtype), ")");
  t.storage_ = std::move(storage);
  return t;
}

int64_t Tensor::dim(int i) const {
  int r = rank();
  int j = i < 0 ? i + r : i;
  // if/fail rather than check(): check's arguments, the shape string among them, would be built on
  // every call (3% of a LeNet training step went to formatting shapes nobody printed)
  if (j < 0 || j >= r) fail("tensor: dim(", i, ") of a rank-", r, " tensor ", shape_str(shape_));
  return shape_[j];
}

Tensor Tensor::clone() const {
  Tensor t(shape_, dtype_);
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  t.block_ = block_;
  return t;
}

void Tensor::fail_access(DType want) const {
  if (dtype_ != want)
    fail("tensor: data<", dtype_name(want), "> on a ", dtype_name(dtype_), " tensor of shape ", shape_str(shape_));
  fail("tensor: a layout-unaware read of a channel-blocked (nChw", block_, "c) tensor of shape ", shape_str(shape_),
       ": convert it with to_plain (engine/layers/layout.h) first");
}

Tensor Tensor::with_block(int b) const {
  if (b != 0 && !(b > 0 && rank() == 4 && shape_[1] % b == 0))
    fail("tensor: channel block ", b, " for shape ", shape_str(shape_), ": needs (N,C,H,W) with C a multiple of it");
  Tensor t = *this;
  t.block_ = b;
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  if (block_ != 0)
    fail("tensor: reshape of a channel-blocked (nChw", block_, "c) tensor of shape ", shape_str(shape_),
         ": convert it with to_plain first");
  if (shape_numel(shape) != numel_) fail("tensor: cannot reshape ", shape_str(shape_), " to ", shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return clone();
  if (block_ != 0) fail_access(dtype_);
  // Conversions between integer and float types carry a scale and a zero point (quantization),
  // which a plain cast would silently drop: only float <-> float converts here.
  check(is_float(dtype) && is_float(dtype_), "tensor: to(", dtype_name(dtype), ") of a ", dtype_name(dtype_),
        " tensor ", shape_str(shape_), ": only float32 <-> float64 converts");
  Tensor t(shape_, dtype);
  dispatch_dtype(dtype_, [&](auto from) {
    using S = decltype(from);
    dispatch_dtype(dtype, [&](auto to) {
      using D = decltype(to);
      const S* s = data<S>();
      D* d = t.data<D>();
      for (int64_t i = 0; i < numel_; ++i) d[i] = static_cast<D>(s[i]);
    });
  });
  return t;
}

void Tensor::fill(double v) {
  dispatch_any_dtype(dtype_, [&](auto tag) {
    using T = decltype(tag);
    const T tv = static_cast<T>(v);
    if (!is_float(dtype_))
      check(static_cast<double>(tv) == v, "tensor: fill(", v, ") is not a value of ", dtype_name(dtype_));
    T* d = blocked_data<T>();  // any layout: every element gets v
    for (int64_t i = 0; i < numel_; ++i) d[i] = tv;
  });
}

double Tensor::at(int64_t i) const {
  // if/fail, not check(): check's arguments (a shape string here) are built on every call, and at()
  // runs per element in predictions, bounds checks and tests
  if (i < 0 || i >= numel_) fail("tensor: index ", i, " out of range for shape ", shape_str(shape_));
  return dispatch_any_dtype(dtype_, [&](auto tag) { return static_cast<double>(data<decltype(tag)>()[i]); });
}

void check_shape(const char* op, const char* name, const Tensor& t, const Shape& expected) {
  if (t.shape() != expected)
    fail(op, ": ", name, " has shape ", shape_str(t.shape()), ", expected ", shape_str(expected));
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype()) fail(op, ": dtype mismatch ", dtype_name(a.dtype()), " vs ", dtype_name(b.dtype()));
}

}  // namespace driftlab
