// The SGD step of both CPU kernels: one loop over the elements, each updated by the shared
// formula sgd_update (core/ops/sgd.h, the CUDA kernel's too); the reference runs it on one
// thread, the fast kernel splits arrays of 64K elements and more over OpenMP threads (VGG-16's
// 33M parameters: a memory-bound pass one thread does not saturate). Elementwise, so the two
// give the same bits for any thread count.
#pragma once
#include "core/ops/sgd.h"

namespace driftlab {
namespace sgd_loops {

template <bool Parallel>
void run(const SgdStepParams& c, Tensor& p, const Tensor& grad, Tensor& state) {
  const char* fn = Parallel ? "sgd_step_fast" : "sgd_step_ref";
  check_shape(fn, "grad", grad, p.shape());
  check_shape(fn, "state", state, p.shape());
  check(p.dtype() == grad.dtype() && p.dtype() == state.dtype(), fn, ": p, grad and state dtypes differ (",
        dtype_name(p.dtype()), ", ", dtype_name(grad.dtype()), ", ", dtype_name(state.dtype()), ")");
  check(c.lr > 0, fn, ": lr=", c.lr, " must be > 0");
  dispatch_dtype(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* pd = p.data<T>();
    const T* g = grad.data<T>();
    T* s = state.data<T>();
    const int64_t n = p.numel();
    const T lr = static_cast<T>(c.lr), mu = static_cast<T>(c.momentum), wd = static_cast<T>(c.weight_decay);
    with_sgd_rule(c, [&](auto rule) {
      using R = decltype(rule);
#pragma omp parallel for schedule(static) if (Parallel && n >= (int64_t(1) << 16))
      for (int64_t i = 0; i < n; ++i) sgd_update<R>(lr, mu, wd, pd[i], g[i], s[i]);
    });
  });
}

}  // namespace sgd_loops
}  // namespace driftlab
