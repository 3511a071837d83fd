// oneDNN gemm: C = alpha*op(A)*op(B) + beta*C on row-major float32 matrices through dnnl_sgemm,
// whose 'N'/'T' flags and leading dimensions are row-major (oneDNN >= 1.0, checked by
// tests/ops/test_gemm.cpp). beta == 0 writes C (=) without reading it. No double path: f64 is
// null and the dispatcher falls back to the reference. oneDNN threads over
// omp_get_max_threads() OpenMP threads and is reproducible for a fixed thread count.
#include <oneapi/dnnl/dnnl.h>

#include "core/ops/gemm.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

// a:(M,K) or (K,M) when trans_a; b:(K,N) or (N,K) when trans_b; c:(M,N). All row-major.
void gemm_onednn_f32(const GemmParams& p, const float* a, const float* b, float* c) {
  check(p.m >= 0 && p.n >= 0 && p.k >= 0, "gemm_onednn: negative size m=", p.m, " n=", p.n, " k=", p.k);
  if (p.m == 0 || p.n == 0) return;
  if (p.k == 0) {
    // oneDNN rejects a leading dimension of 0; an empty product leaves beta*C.
    const float beta = static_cast<float>(p.beta);
    for (int64_t i = 0; i < p.m * p.n; ++i) c[i] = p.beta == 0.0 ? 0.0f : beta * c[i];
    return;
  }
  // Leading dimension = row length of the matrix as stored.
  const dnnl_dim_t lda = p.trans_a ? p.m : p.k, ldb = p.trans_b ? p.k : p.n, ldc = p.n;
  const dnnl_status_t st = dnnl_sgemm(p.trans_a ? 'T' : 'N', p.trans_b ? 'T' : 'N', p.m, p.n, p.k,
                                      static_cast<float>(p.alpha), a, lda, b, ldb, static_cast<float>(p.beta), c, ldc);
  check(st == dnnl_success, "gemm_onednn: dnnl_sgemm failed with status ", static_cast<int>(st), " (m=", p.m,
        " n=", p.n, " k=", p.k, " trans_a=", p.trans_a, " trans_b=", p.trans_b, ")");
}

}  // namespace

void register_gemm_onednn(KernelRegistry& reg) {
  GemmKernel k;
  k.name = "onednn";
  k.supports_doc = "float32, sum float32 (dnnl_sgemm; sum_order: oneDNN's own)";
  k.supports = [](const GemmParams& p, DType dt) { return dt == DType::f32 && p.sum == GemmSum::float32; };
  k.f32 = gemm_onednn_f32;
  k.f64 = nullptr;
  reg.gemm.at(KernelBackend::onednn) = k;
}

}  // namespace driftlab
