// The Adam and RMSprop steps of both CPU kernels: one loop over the elements, each updated by the
// shared formula (core/ops/adaptive.h, the CUDA kernel's too); the reference runs it on one
// thread, the fast kernel splits arrays of 64K elements and more over OpenMP threads. Elementwise,
// so the two give the same bits for any thread count.
#pragma once
#include "core/ops/adaptive.h"

namespace driftlab {
namespace adaptive_loops {

inline void check_tensors(const char* fn, const Tensor& p, const Tensor& grad, const Tensor& a, const Tensor& b) {
  check_shape(fn, "grad", grad, p.shape());
  check_shape(fn, "state", a, p.shape());
  check_shape(fn, "state", b, p.shape());
  check(p.dtype() == grad.dtype() && p.dtype() == a.dtype() && p.dtype() == b.dtype(), fn,
        ": p, grad and state dtypes differ (", dtype_name(p.dtype()), ", ", dtype_name(grad.dtype()), ", ",
        dtype_name(a.dtype()), ", ", dtype_name(b.dtype()), ")");
}

template <bool Parallel, typename Params>
void run(const Params& c, Tensor& p, const Tensor& grad, Tensor& a, Tensor& b) {
  constexpr bool adam = std::is_same_v<Params, AdamStepParams>;
  const char* fn = adam ? (Parallel ? "adam_step_fast" : "adam_step_ref")
                        : (Parallel ? "rmsprop_step_fast" : "rmsprop_step_ref");
  check_tensors(fn, p, grad, a, b);
  check(c.lr > 0, fn, ": lr=", c.lr, " must be > 0");
  dispatch_dtype(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* pd = p.data<T>();
    const T* g = grad.data<T>();
    T* s0 = a.data<T>();
    T* s1 = b.data<T>();
    const int64_t n = p.numel();
    const AdaptiveScalars<T> k = adaptive_scalars<T>(c);
    auto loop = [&](auto rule) {
      using R = decltype(rule);
#pragma omp parallel for schedule(static) if (Parallel && n >= (int64_t(1) << 16))
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (adam) adam_update<R>(k, pd[i], g[i], s0[i], s1[i]);
        else rmsprop_update<R>(k, pd[i], g[i], s0[i], s1[i]);
      }
    };
    if constexpr (adam) with_adam_rule(c, loop);
    else with_rmsprop_rule(c, loop);
  });
}

}  // namespace adaptive_loops
}  // namespace driftlab
