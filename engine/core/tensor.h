// Tensor: a dense, contiguous, row-major CPU array of float32 or float64 with a shape.
// Copies share storage (like a handle); clone() makes a deep copy. Layout meaning
// (NCHW, OIHW, ...) is a convention of the op that reads it, never stored here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/error.h"

namespace driftlab {

enum class DType { f32, f64 };

const char* dtype_name(DType t);
std::size_t dtype_size(DType t);

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::f64; };

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

  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const;  // negative i counts from the end
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  bool defined() const { return static_cast<bool>(storage_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * dtype_size(dtype_); }

  // Typed access; throws when T does not match the tensor's dtype.
  template <typename T> T* data();
  template <typename T> const T* data() const;
  void* raw() { return storage_.get(); }
  const void* raw() const { return storage_.get(); }

  Tensor clone() const;
  Tensor reshape(Shape shape) const;  // shares storage; numel must match
  Tensor to(DType dtype) const;       // converted copy (or a clone when equal)
  void fill(double v);
  void zero() { fill(0.0); }
  double at(int64_t flat_index) const;  // for tests and printing, any dtype

 private:
  void allocate(bool zero);
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::f32;
  std::shared_ptr<unsigned char> storage_;
};

// Throws "op: name has shape [..], expected [..]" when shapes differ.
void check_shape(const char* op, const char* name, const Tensor& t, const Shape& expected);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);

template <typename T>
T* Tensor::data() {
  // if/fail rather than check(): the message pieces are built only on failure (hot path).
  if (dtype_ != DTypeOf<T>::value)
    fail("tensor: data<", dtype_name(DTypeOf<T>::value), "> on a ", dtype_name(dtype_), " tensor of shape ",
         shape_str(shape_));
  return reinterpret_cast<T*>(storage_.get());
}
template <typename T>
const T* Tensor::data() const {
  return const_cast<Tensor*>(this)->data<T>();
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

// Calls f(T{}) with T = float or double according to dtype: one templated body, two types.
template <typename F>
decltype(auto) dispatch_dtype(DType dtype, F&& f) {
  if (dtype == DType::f64) return f(double{});
  return f(float{});
}

}  // namespace driftlab
