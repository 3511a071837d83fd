// Shared test helpers: the one tensor comparison (all_close), bitwise equality, and
// deterministic random tensors. Any test comparing tensors uses these, so every failure
// reads the same way: max abs/rel error and the first mismatches with their index.
//
// To add a helper: 1) keep it header-only and inline; 2) make it work for float32 and
// float64 tensors alike (Tensor::at reads either); 3) report failures with values and indices.
#pragma once
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/tensor.h"

namespace driftlab {

// Flat row-major index -> "[i,j,k]" for the shape, so a failure names the element.
inline std::string index_str(const Shape& shape, int64_t flat) {
  Shape idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    const int64_t extent = shape[d] > 0 ? shape[d] : 1;
    idx[d] = flat % extent;
    flat /= extent;
  }
  return shape_str(idx);
}

// Passes when shapes are equal and every element satisfies |a - ref| <= atol + rtol*|ref|
// (NaN matches only NaN; an infinity only the same infinity). dtypes may differ (a float32
// result against a float64 reference). On failure: the mismatch count, max abs and max rel
// error with their indices, and the first few mismatches.
inline ::testing::AssertionResult all_close(const Tensor& a, const Tensor& ref, double atol, double rtol) {
  if (a.shape() != ref.shape())
    return ::testing::AssertionFailure() << "shape " << shape_str(a.shape()) << " vs reference "
                                         << shape_str(ref.shape());
  constexpr int kShown = 5;
  int64_t bad = 0, max_abs_i = -1, max_rel_i = -1;
  double max_abs = 0, max_rel = 0;
  std::ostringstream first;
  first.precision(a.dtype() == DType::f32 && ref.dtype() == DType::f32 ? 9 : 17);  // round-trip digits
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.at(i), r = ref.at(i);
    bool ok;
    double err;
    if (std::isnan(x) || std::isnan(r) || std::isinf(x) || std::isinf(r)) {
      ok = (std::isnan(x) && std::isnan(r)) || x == r;
      err = ok ? 0.0 : std::numeric_limits<double>::infinity();
    } else {
      err = std::fabs(x - r);
      ok = err <= atol + rtol * std::fabs(r);
    }
    const double rel = std::isfinite(err) && r != 0 ? err / std::fabs(r)
                       : err == 0                      ? 0.0
                                                       : std::numeric_limits<double>::infinity();
    if (err > max_abs) {
      max_abs = err;
      max_abs_i = i;
    }
    if (rel > max_rel) {
      max_rel = rel;
      max_rel_i = i;
    }
    if (!ok) {
      if (bad < kShown)
        first << "\n  at " << index_str(a.shape(), i) << ": " << x << " vs " << r << " (|diff| " << err << ")";
      ++bad;
    }
  }
  std::ostringstream summary;
  summary.precision(3);
  summary << "max abs err " << max_abs;
  if (max_abs_i >= 0) summary << " at " << index_str(a.shape(), max_abs_i);
  summary << ", max rel err " << max_rel;
  if (max_rel_i >= 0) summary << " at " << index_str(a.shape(), max_rel_i);
  if (bad == 0) return ::testing::AssertionSuccess() << summary.str();
  std::ostringstream head;
  head.precision(3);
  head << bad << " of " << a.numel() << " elements of " << shape_str(a.shape()) << " (" << dtype_name(a.dtype())
       << " vs " << dtype_name(ref.dtype()) << ") differ by more than atol " << atol << " + rtol " << rtol
       << " * |ref|; ";
  return ::testing::AssertionFailure() << head.str() << summary.str() << "; first mismatches:" << first.str();
}

// Normwise: max|a - r| <= tol * max|r| (all_close with atol = tol * max|r|, rtol 0): for results
// whose elements carry the rounding of the whole tensor's sums, not their own.
inline ::testing::AssertionResult near_normwise(const Tensor& a, const Tensor& r, double tol) {
  double m = 0;
  for (int64_t i = 0; i < r.numel(); ++i) m = std::max(m, std::fabs(r.at(i)));
  return all_close(a, r, tol * m, 0.0);
}

// Same shape, same dtype, same bytes: the check for "reproducible for a fixed thread count".
inline ::testing::AssertionResult bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype())
    return ::testing::AssertionFailure() << shape_str(a.shape()) << " " << dtype_name(a.dtype()) << " vs "
                                         << shape_str(b.shape()) << " " << dtype_name(b.dtype());
  if (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0) return ::testing::AssertionSuccess();
  const std::size_t sz = dtype_size(a.dtype());
  const auto* pa = static_cast<const unsigned char*>(a.raw());
  const auto* pb = static_cast<const unsigned char*>(b.raw());
  int64_t i = 0;
  while (std::memcmp(pa + i * sz, pb + i * sz, sz) == 0) ++i;
  return ::testing::AssertionFailure() << "first differing element at " << index_str(a.shape(), i) << ": "
                                       << a.at(i) << " vs " << b.at(i);
}

// Uniform values in [lo, hi), reproducible from the seed (mt19937_64, 53-bit fractions).
inline Tensor random_tensor(Shape shape, DType dtype, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Tensor t(std::move(shape), dtype);
  std::mt19937_64 gen(seed);
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* d = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double u = static_cast<double>(gen() >> 11) * 0x1.0p-53;
      d[i] = static_cast<T>(lo + (hi - lo) * u);
    }
  });
  return t;
}

// The message of the driftlab::Error that f throws, or a test failure (and "") when it throws
// nothing.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a driftlab::Error";
  return "";
}

// Machine epsilon of a dtype, for tolerances written as multiples of it.
inline double dtype_eps(DType dtype) {
  return dtype == DType::f32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
}

// Sets the OpenMP thread count for one test and restores the previous one afterwards.
class ThreadCountGuard {
 public:
  explicit ThreadCountGuard(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ThreadCountGuard() { omp_set_num_threads(saved_); }
  ThreadCountGuard(const ThreadCountGuard&) = delete;
  ThreadCountGuard& operator=(const ThreadCountGuard&) = delete;

 private:
  int saved_;
};

}  // namespace driftlab
