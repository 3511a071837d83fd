// Parameters shared by every op: the summation order of the reference kernels, and the
// helper that sums a list of terms in that order. No Policy here: layers resolve it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace driftlab {

// Which implementation family runs an op (core/ops/registry.h): the reference (single-threaded
// loops, every field honoured, sums in SumOrder), driftlab's own optimised CPU kernel (fast:
// OpenMP, SIMD), or a library (Eigen, oneDNN). Each op's table says what each one supports; the
// dispatcher falls back to the reference.
enum class KernelBackend { reference, fast, eigen, onednn };
constexpr int kNumKernelBackends = 4;
const char* backend_name(KernelBackend b);
KernelBackend backend_from_name(const std::string& name);  // throws listing the names

// Order in which a reference kernel adds the terms of one output element.
enum class SumOrder { ascending, descending, pairwise };

// Sums terms[0..n) in the given order with an accumulator of type T.
// ascending: ((t0+t1)+t2)+...; descending: from the last term down; pairwise: recursive halves.
template <typename T>
T ordered_sum(const T* terms, int64_t n, SumOrder order) {
  if (order == SumOrder::pairwise) {
    if (n <= 2) return n == 0 ? T(0) : (n == 1 ? terms[0] : terms[0] + terms[1]);
    int64_t h = n / 2;
    return ordered_sum(terms, h, order) + ordered_sum(terms + h, n - h, order);
  }
  T acc = 0;
  if (order == SumOrder::ascending)
    for (int64_t i = 0; i < n; ++i) acc += terms[i];
  else
    for (int64_t i = n - 1; i >= 0; --i) acc += terms[i];
  return acc;
}

}  // namespace driftlab
