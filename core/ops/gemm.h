// gemm: C = alpha * op(A) * op(B) + beta * C, row-major, op = identity or transpose.
// Shapes: op(A) (M,K), op(B) (K,N), C (M,N). Leading dimensions are the row lengths of the
// stored matrices (A is (M,K) or, when trans_a, (K,M)). beta=0 overwrites C (never reads it).
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "core/ops/common.h"

namespace driftlab {

struct GemmParams {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  double alpha = 1.0, beta = 0.0;
  SumOrder sum_order = SumOrder::ascending;  // reference kernel only
};

// Raw-pointer kernels: one templated body per backend, instantiated for float and double.
template <typename T>
using GemmFn = void (*)(const GemmParams&, const T* a, const T* b, T* c);

struct GemmKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const GemmParams&, DType) = nullptr;
  GemmFn<float> f32 = nullptr;
  GemmFn<double> f64 = nullptr;  // null when the backend has no double path
};


}  // namespace driftlab
