// Reference gemm: C = alpha*op(A)*op(B) + beta*C, row-major, float and double, the K products of
// each C element summed by params.sum (core/ops/gemm.h): in T in params.sum_order, or in a 16-bit
// format's own arithmetic. Oracle for fast gemms.
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "core/ops/gemm.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

const char* gemm_sum_name(GemmSum s) {
  switch (s) {
    case GemmSum::float32: return "float32";
    case GemmSum::in_order: return "in_order";
    case GemmSum::rounded: return "rounded";
  }
  return "?";
}

namespace {
// GemmSum::rounded: every product and every partial sum rounded to the format.
void gemm_rounded(const GemmParams& p, const float* a, const float* b, float* c) {
  check(p.term_format == MathMode::bfloat16 || p.term_format == MathMode::float16, "gemm: sum=rounded needs a "
        "16-bit term format (bfloat16, float16)");
  check(p.alpha == 1.0 && (p.beta == 0.0 || p.beta == 1.0), "gemm: sum=rounded takes alpha 1 and beta 0 or 1, got "
        "alpha ", p.alpha, ", beta ", p.beta);
  const MathMode f = p.term_format;
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      float& out = c[i * p.n + j];
      float acc = p.beta == 0.0 ? 0.0f : round_result(out, f);
      for (int64_t l = 0; l < p.k; ++l) {
        const float av = p.trans_a ? a[l * p.m + i] : a[i * p.k + l];
        const float bv = p.trans_b ? b[j * p.k + l] : b[l * p.n + j];
        acc = round_result(acc + round_result(av * bv, f), f);
      }
      out = acc;
    }
}
}  // namespace

template <typename T>
void gemm_ref(const GemmParams& p, const T* a, const T* b, T* c) {
  if (p.sum == GemmSum::rounded) {
    if constexpr (std::is_same_v<T, float>) {
      gemm_rounded(p, a, b, c);
      return;
    }
    check(false, "gemm: sum=rounded rounds float32 terms to a 16-bit format: float32 operands are needed");
  }
  std::vector<T> terms(static_cast<std::size_t>(p.k));
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      for (int64_t l = 0; l < p.k; ++l) {
        T av = p.trans_a ? a[l * p.m + i] : a[i * p.k + l];
        T bv = p.trans_b ? b[j * p.k + l] : b[l * p.n + j];
        terms[static_cast<std::size_t>(l)] = av * bv;
      }
      T acc = static_cast<T>(p.alpha) * ordered_sum(terms.data(), p.k, p.sum_order);
      T& out = c[i * p.n + j];
      out = p.beta == 0.0 ? acc : acc + static_cast<T>(p.beta) * out;
    }
}

template void gemm_ref<float>(const GemmParams&, const float*, const float*, float*);
template void gemm_ref<double>(const GemmParams&, const double*, const double*, double*);

void register_gemm_ref(KernelRegistry& reg) {
  GemmKernel k;
  k.name = "reference";
  k.supports_doc = "every params field, float32 and float64 (sum rounded: float32)";
  k.supports = [](const GemmParams&, DType) { return true; };
  k.f32 = gemm_ref<float>;
  k.f64 = gemm_ref<double>;
  reg.gemm.at(KernelBackend::reference) = k;
}

}  // namespace driftlab
