// KernelRegistry: one table per op, indexed by backend, filled by explicit registration
// functions (no static registrar objects, which a static library can silently drop).
// ExecContext carries the registry and the thread count; there is no global state.
//
// To add a backend for an op: 1) write kernels/cpu/<backend>/<op>_<backend>.cpp with a
// register_<op>_<backend>(KernelRegistry&) function; 2) declare it below; 3) call it from
// make_cpu_registry() in registry.cpp; 4) add the fast-vs-reference test in tests/ops/.
#pragma once
#include <array>

#include "engine/ops/conv2d.h"
#include "engine/ops/gemm.h"
#include "engine/ops/rnn.h"

namespace driftlab {

struct KernelRegistry {
  std::array<Conv2dKernel, kNumKernelBackends> conv2d{};
  std::array<GemmKernel, kNumKernelBackends> gemm{};
  std::array<RnnKernel, kNumKernelBackends> rnn{};
};

KernelRegistry make_cpu_registry();

void register_conv2d_ref(KernelRegistry&);
void register_conv2d_eigen(KernelRegistry&);
void register_conv2d_onednn(KernelRegistry&);
void register_gemm_ref(KernelRegistry&);
void register_gemm_eigen(KernelRegistry&);
void register_gemm_onednn(KernelRegistry&);
void register_rnn_ref(KernelRegistry&);
void register_rnn_fast(KernelRegistry&);  // fills the eigen and onednn slots (one kernel: no GEMM calls)

// The kernel for `want` if it is registered and supports (params, dtype), else the reference.
const Conv2dKernel& select_conv2d(const KernelRegistry&, KernelBackend want, const Conv2dParams&, DType);
const GemmKernel& select_gemm(const KernelRegistry&, KernelBackend want, DType);
const RnnKernel& select_rnn(const KernelRegistry&, KernelBackend want, DType);

// Calls the selected gemm for T.
template <typename T>
void run_gemm(const GemmKernel& k, const GemmParams& p, const T* a, const T* b, T* c);

// Runs each registered float32 GEMM once on 32x32x32 (result discarded): a library that sets
// itself up on its first real call does it here, before a timed loop. oneDNN's sgemm takes
// ~30 ms on its first call of that size or larger on this machine (CPU dispatch, JIT), ~0.01 ms
// after (measured); a 1x1x1 call does not trigger it.
void warm_up_gemms(const KernelRegistry&);

// OpenMP's current thread count (omp_get_max_threads: OMP_NUM_THREADS or the CLI's --threads).
int default_threads();

struct ExecContext {
  KernelRegistry kernels = make_cpu_registry();
  // Threads used by fast kernels: by default what OpenMP is set to, so every command and
  // library call runs at the thread count the user chose. Results are reproducible per count.
  int threads = default_threads();
};

}  // namespace driftlab
