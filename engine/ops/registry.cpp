#include "engine/ops/registry.h"

#include <vector>

#include <omp.h>

namespace driftlab {

int default_threads() { return omp_get_max_threads(); }

const char* backend_name(KernelBackend b) {
  switch (b) {
    case KernelBackend::reference: return "reference";
    case KernelBackend::eigen: return "eigen";
    case KernelBackend::onednn: return "onednn";
  }
  return "?";
}

KernelRegistry make_cpu_registry() {
  KernelRegistry r;
  register_conv2d_ref(r);
  register_conv2d_eigen(r);
  register_conv2d_onednn(r);
  register_gemm_ref(r);
  register_gemm_eigen(r);
  register_gemm_onednn(r);
  register_rnn_ref(r);
  register_rnn_fast(r);
  return r;
}

const Conv2dKernel& select_conv2d(const KernelRegistry& reg, KernelBackend want,
                                  const Conv2dParams& p, DType dt) {
  const Conv2dKernel& k = reg.conv2d[static_cast<int>(want)];
  if (k.forward && (!k.supports || k.supports(p, dt))) return k;
  return reg.conv2d[static_cast<int>(KernelBackend::reference)];
}

const GemmKernel& select_gemm(const KernelRegistry& reg, KernelBackend want, DType dt) {
  const GemmKernel& k = reg.gemm[static_cast<int>(want)];
  if (dt == DType::f32 ? k.f32 != nullptr : k.f64 != nullptr) return k;
  return reg.gemm[static_cast<int>(KernelBackend::reference)];
}

void warm_up_gemms(const KernelRegistry& reg) {
  GemmParams p;
  p.m = p.n = p.k = 32;
  std::vector<float> a(32 * 32, 1.0f), b(a), c(a);
  for (const GemmKernel& k : reg.gemm)
    if (k.f32) k.f32(p, a.data(), b.data(), c.data());
}

const RnnKernel& select_rnn(const KernelRegistry& reg, KernelBackend want, DType dt) {
  const RnnKernel& k = reg.rnn[static_cast<int>(want)];
  if (dt == DType::f32 ? k.forward_f32 != nullptr : k.forward_f64 != nullptr) return k;
  return reg.rnn[static_cast<int>(KernelBackend::reference)];
}

template <>
void run_gemm<float>(const GemmKernel& k, const GemmParams& p, const float* a, const float* b, float* c) {
  k.f32(p, a, b, c);
}
template <>
void run_gemm<double>(const GemmKernel& k, const GemmParams& p, const double* a, const double* b,
                      double* c) {
  k.f64(p, a, b, c);
}

}  // namespace driftlab
