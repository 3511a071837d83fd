// Reference gemm: C = alpha*op(A)*op(B) + beta*C, row-major, float and double,
// the K products of each C element summed in params.sum_order. Oracle for fast gemms.
#include <vector>

#include "core/ops/gemm.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

template <typename T>
void gemm_ref(const GemmParams& p, const T* a, const T* b, T* c) {
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
  k.supports_doc = "every params field, float32 and float64";
  k.supports = [](const GemmParams&, DType) { return true; };
  k.f32 = gemm_ref<float>;
  k.f64 = gemm_ref<double>;
  reg.gemm.at(KernelBackend::reference) = k;
}

}  // namespace driftlab
