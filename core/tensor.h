// Tensor: a dense, contiguous, row-major CPU array with a shape and an element type: float32 or
// float64 for every floating-point op, and the integer types int8, uint8, int32, int64 that
// quantized tensors and indices are stored in (no float op accepts them: dispatch_dtype refuses).
// Copies share storage (like a handle); clone() makes a deep copy. Layout meaning
// (NCHW, OIHW, ...) is a convention of the op that reads it, never stored here, with one
// exception: a 4-D activation may be channel-blocked (engine/layers/layout.h: nChw16c, the layout
// oneDNN's convolutions compute in), and that is stored, so that nothing layout-unaware can read
// it as NCHW: data<T>(), reshape, to and at refuse a blocked tensor by name.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"

namespace driftlab {

// To add a dtype: 1) an enumerator here; 2) its DTypeOf; 3) its name and size in tensor.cpp
// (dtype_name, dtype_size, dtype_from_name); 4) a case in dispatch_any_dtype below (and in
// dispatch_dtype only if float ops may run on it). Every switch over DType is exhaustive: an
// unknown dtype is an error naming it, never the float path.
enum class DType { f32, f64, i8, u8, i32, i64 };

const char* dtype_name(DType t);      // "float32", "float64", "int8", "uint8", "int32", "int64"
std::size_t dtype_size(DType t);
DType dtype_from_name(const std::string& name);  // throws listing the known names
bool is_float(DType t);

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::f64; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::i8; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::i32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::i64; };

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  Tensor(Shape shape, DType dtype);  // zero-filled
  static Tensor zeros(Shape shape, DType dtype) { return Tensor(std::move(shape), dtype); }
  // Storage left uninitialised: only for outputs a kernel overwrites completely ('=').
  static Tensor empty(Shape shape, DType dtype);
  template <typename T>
  static Tensor from(Shape shape, const std::vector<T>& values);
  // A tensor over memory another owner holds (a NumPy array's: the Python module), released by
  // `storage`'s deleter. Kernels load 64 bytes at a time and may read up to the 64-byte round-up
  // of an allocation: the memory must be 64-byte aligned and hold nbytes() rounded up to 64
  // (`capacity`), else this throws (the caller copies instead).
  static Tensor wrap(Shape shape, DType dtype, std::shared_ptr<unsigned char> storage, std::size_t capacity);

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;  // negative i counts from the end
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  bool defined() const { return static_cast<bool>(storage_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * dtype_size(dtype_); }

  // Typed access; throws when T does not match the tensor's dtype, or when the tensor is
  // channel-blocked (a layout-unaware reader).
  template <typename T> T* data();
  template <typename T> const T* data() const;
  // 0: plain row-major; B: channel-blocked (N, C/B, H, W, B), shape() still (N,C,H,W).
  int channel_block() const { return block_; }
  // Typed access in any layout: for the layout-aware kernels (engine/layers/layout.h) only.
  template <typename T> T* blocked_data();
  template <typename T> const T* blocked_data() const;
  // The same storage labelled with channel block b: for layout conversions and layout-aware
  // allocation (Tensor::empty(...).with_block(b)); checks that the shape can carry it.
  Tensor with_block(int b) const;
  void* raw() { return storage_.get(); }
  const void* raw() const { return storage_.get(); }

  Tensor clone() const;
  Tensor reshape(Shape shape) const;  // shares storage; numel must match
  Tensor to(DType dtype) const;       // converted copy (or a clone when equal); float <-> float only
  void fill(double v);                // any dtype (integers: v must be an exact value of the type)
  void zero() { fill(0.0); }
  double at(int64_t flat_index) const;  // for tests and printing, any dtype

 private:
  void allocate(bool zero);
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::f32;
  int block_ = 0;
  std::shared_ptr<unsigned char> storage_;
  [[noreturn]] void fail_access(DType want) const;
};

// Throws "op: name has shape [..], expected [..]" when shapes differ.
void check_shape(const char* op, const char* name, const Tensor& t, const Shape& expected);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);

template <typename T>
T* Tensor::data() {
  // if/fail rather than check(): the message pieces are built only on failure (hot path).
  if (dtype_ != DTypeOf<T>::value || block_ != 0) fail_access(DTypeOf<T>::value);
  return reinterpret_cast<T*>(storage_.get());
}
template <typename T>
const T* Tensor::data() const {
  return const_cast<Tensor*>(this)->data<T>();
}
template <typename T>
T* Tensor::blocked_data() {
  if (dtype_ != DTypeOf<T>::value) fail_access(DTypeOf<T>::value);
  return reinterpret_cast<T*>(storage_.get());
}
template <typename T>
const T* Tensor::blocked_data() const {
  return const_cast<Tensor*>(this)->blocked_data<T>();
}
template <typename T>
Tensor Tensor::from(Shape shape, const std::vector<T>& values) {
  Tensor t(std::move(shape), DTypeOf<T>::value);
  check(static_cast<int64_t>(values.size()) == t.numel(), "tensor: ", values.size(),
        " values for shape ", shape_str(t.shape()));
  T* d = t.data<T>();
  for (std::size_t i = 0; i < values.size(); ++i) d[i] = values[i];
  return t;
}

[[noreturn]] void fail_dtype(const char* what, DType dtype);

// Calls f(T{}) with T = float or double according to dtype: one templated body, two types.
// Any other dtype is refused by name ("dispatch_dtype: int8 tensor where a floating-point type
// is needed"): a float kernel never reads integer bytes as floats.
template <typename F>
decltype(auto) dispatch_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::i8:
    case DType::u8:
    case DType::i32:
    case DType::i64: break;
  }
  fail_dtype("dispatch_dtype", dtype);
}

// Calls f(T{}) for every dtype: for code that moves or prints elements of any type (file
// formats, fill, at).
template <typename F>
decltype(auto) dispatch_any_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::i8: return f(int8_t{});
    case DType::u8: return f(uint8_t{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
  }
  fail_dtype("dispatch_any_dtype", dtype);
}

}  // namespace driftlab
