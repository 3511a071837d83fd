// gemm: C = alpha * op(A) * op(B) + beta * C, row-major, op = identity or transpose.
// Shapes: op(A) (M,K), op(B) (K,N), C (M,N). Leading dimensions are the row lengths of the
// stored matrices (A is (M,K) or, when trans_a, (K,M)). beta=0 overwrites C (never reads it).
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "core/ops/common.h"
#include "core/ops/reduced_precision.h"

namespace driftlab {

// How the K products of each C element are summed. The reference kernel runs every rule; the
// other CPU kernels take float32 only (the registry falls back to the reference for the others).
enum class GemmSum {
  // In T, in the kernel's own order (the reference's: sum_order); then alpha times the sum, plus
  // beta * C.
  float32,
  // In T in exactly sum_order (the order is part of the result, so only the reference runs it);
  // then as float32.
  in_order,
  // In the arithmetic of term_format (bfloat16 or float16), float only, alpha 1, beta 0 or 1: the
  // element starts at beta * C rounded, and for l ascending each product is rounded to the format
  // and the running sum rounded after it is added, c = R(c + R(a_l * b_l)).
  rounded,
};

struct GemmParams {
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  double alpha = 1.0, beta = 0.0;
  SumOrder sum_order = SumOrder::ascending;  // reference kernel only
  GemmSum sum = GemmSum::float32;            // in_order, rounded: reference kernel only
  MathMode term_format = MathMode::bfloat16;  // GemmSum::rounded's format
};

const char* gemm_sum_name(GemmSum s);

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
