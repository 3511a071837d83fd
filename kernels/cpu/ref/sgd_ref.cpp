// Reference SGD step, float and double: one loop over the elements, each updated by the shared
// formula sgd_update (engine/ops/sgd.h), which the fast CPU kernel and the CUDA kernel call too.
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

void check_sgd_args(const char* fn, const SgdStepParams& c, const Tensor& p, const Tensor& grad, const Tensor& state) {
  check_shape(fn, "grad", grad, p.shape());
  check_shape(fn, "state", state, p.shape());
  check(p.dtype() == grad.dtype() && p.dtype() == state.dtype(), fn, ": p, grad and state dtypes differ (",
        dtype_name(p.dtype()), ", ", dtype_name(grad.dtype()), ", ", dtype_name(state.dtype()), ")");
  check(c.lr > 0, fn, ": lr=", c.lr, " must be > 0");
}

void sgd_step_ref(const SgdStepParams& c, Tensor& p, const Tensor& grad, Tensor& state) {
  check_sgd_args("sgd_step_ref", c, p, grad, state);
  dispatch_dtype(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* pd = p.data<T>();
    const T* g = grad.data<T>();
    T* s = state.data<T>();
    for (int64_t i = 0; i < p.numel(); ++i) sgd_update(c, pd[i], g[i], s[i]);
  });
}

void register_sgd_ref(KernelRegistry& reg) {
  SgdKernel k;
  k.name = "reference";
  k.supports_doc = "every form and weight-decay mode, float32 and float64";
  k.supports = [](const SgdStepParams&, DType) { return true; };
  k.step = sgd_step_ref;
  reg.sgd.at(KernelBackend::reference) = k;
}

}  // namespace driftlab
