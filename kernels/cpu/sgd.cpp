// Fast SGD step, float and double: the shared formula sgd_update (engine/ops/sgd.h) per element,
// OpenMP over arrays of 64K elements and more (VGG-16's 33M parameters: the update is a
// memory-bound pass that one thread does not saturate). Elementwise, so the result equals the
// reference's bit for bit whatever the thread count.
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

namespace {

void sgd_step_fast(const SgdStepParams& c, Tensor& p, const Tensor& grad, Tensor& state) {
  check_sgd_args("sgd_step_fast", c, p, grad, state);
  dispatch_dtype(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* pd = p.data<T>();
    const T* g = grad.data<T>();
    T* s = state.data<T>();
    const int64_t n = p.numel();
#pragma omp parallel for schedule(static) if (n >= (int64_t(1) << 16))
    for (int64_t i = 0; i < n; ++i) sgd_update(c, pd[i], g[i], s[i]);
  });
}

}  // namespace

void register_sgd_fast(KernelRegistry& reg) {
  SgdKernel k;
  k.name = "fast";
  k.supports_doc = "every form and weight-decay mode, float32 and float64; the reference's bits (OpenMP)";
  k.supports = [](const SgdStepParams&, DType) { return true; };
  k.step = sgd_step_fast;
  reg.sgd.at(KernelBackend::fast) = k;
}

}  // namespace driftlab
