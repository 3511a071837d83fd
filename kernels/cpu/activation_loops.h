// The activation loops of both CPU kernels: the reference runs them on one thread, the fast
// kernel splits them over OpenMP threads (Parallel). One loop per kind, so that the compiler
// vectorises it; each element is the shared formula of core/ops/activation.h computed alone, so
// the two kernels give the same bits for any thread count. forward/backward write (=).
#pragma once
#include "core/parallel.h"
#include "core/ops/activation.h"

namespace driftlab {
namespace activation_loops {

template <bool Parallel, typename F>
void for_each(int64_t n, F&& f) {
#pragma omp parallel for schedule(static) if (Parallel && n > kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) f(i);
}

template <bool Parallel, typename T>
void forward(const ActivationParams& p, const T* x, T* y, int64_t n) {
  const T slope = static_cast<T>(p.hs_slope), offset = static_cast<T>(p.hs_offset);
  switch (p.kind) {
    case ActKind::relu: return for_each<Parallel>(n, [&](int64_t i) { y[i] = relu_value(x[i]); });
    case ActKind::tanh: return for_each<Parallel>(n, [&](int64_t i) { y[i] = tanh_value(x[i]); });
    case ActKind::sigmoid: return for_each<Parallel>(n, [&](int64_t i) { y[i] = sigmoid_value(x[i]); });
    case ActKind::hard_sigmoid:
      if (p.hs_divide) {
        const T shift = static_cast<T>(p.hs_offset / p.hs_slope), range = static_cast<T>(1.0 / p.hs_slope);
        return for_each<Parallel>(n, [&](int64_t i) { y[i] = hard_sigmoid_divide_value(x[i], shift, range); });
      }
      return for_each<Parallel>(n, [&](int64_t i) { y[i] = hard_sigmoid_value(x[i], slope, offset); });
    case ActKind::clip: {
      const T lo = static_cast<T>(p.clip_min), hi = static_cast<T>(p.clip_max);
      return for_each<Parallel>(n, [&](int64_t i) { y[i] = clip_value(x[i], lo, hi); });
    }
  }
}

template <bool Parallel, typename T>
void backward(const ActivationParams& p, const T* x, const T* y, const T* dy, T* dx, int64_t n) {
  const T g0 = static_cast<T>(p.relu_grad_at_zero);
  const bool nan_is_nan = p.relu_nan_grad == ReluNanGrad::nan;
  switch (p.kind) {
    case ActKind::relu:
      return for_each<Parallel>(n, [&](int64_t i) { dx[i] = relu_grad(x[i], dy[i], g0, nan_is_nan); });
    case ActKind::tanh: return for_each<Parallel>(n, [&](int64_t i) { dx[i] = tanh_grad(y[i], dy[i]); });
    case ActKind::sigmoid: return for_each<Parallel>(n, [&](int64_t i) { dx[i] = sigmoid_grad(y[i], dy[i]); });
    case ActKind::hard_sigmoid:
      return for_each<Parallel>(n, [&](int64_t i) { dx[i] = hard_sigmoid_grad(p, x[i], dy[i]); });
    case ActKind::clip: return for_each<Parallel>(n, [&](int64_t i) { dx[i] = clip_grad(p, x[i], dy[i]); });
  }
}

// The ReLU's forward (the same y as forward) and whether any x[i] was +-0; and its backward from y
// alone (relu_grad_of_output). Each element alone again: the flag is an OR, the same for any split.
template <bool Parallel, typename T>
bool relu_forward_any_zero(const T* x, T* y, int64_t n) {
  int zero = 0;
#pragma omp parallel for simd schedule(static) reduction(| : zero) if (Parallel && n > kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) {
    y[i] = relu_value(x[i]);
    zero |= x[i] == T(0);
  }
  return zero != 0;
}

template <bool Parallel, typename T>
void relu_backward_of_output(const ActivationParams& p, const T* y, const T* dy, T* dx, int64_t n) {
  const bool nan_is_nan = p.relu_nan_grad == ReluNanGrad::nan;
  for_each<Parallel>(n, [&](int64_t i) { dx[i] = relu_grad_of_output(y[i], dy[i], nan_is_nan); });
}

// The Tensor entry points: shapes and dtypes checked, then the loops for T.
template <bool Parallel>
void run_forward(const ActivationParams& p, const Tensor& x, Tensor& y) {
  check_shape(act_name(p.kind), "y", y, x.shape());
  check_same_dtype(act_name(p.kind), x, y);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    forward<Parallel, T>(p, x.data<T>(), y.data<T>(), x.numel());
  });
}

template <bool Parallel>
void run_backward(const ActivationParams& p, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  check_shape(act_name(p.kind), "dy", dy, x.shape());
  check_shape(act_name(p.kind), "dx", dx, x.shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward<Parallel, T>(p, x.data<T>(), y.data<T>(), dy.data<T>(), dx.data<T>(), x.numel());
  });
}

template <bool Parallel>
bool run_relu_forward_any_zero(const ActivationParams& p, const Tensor& x, Tensor& y) {
  check(p.kind == ActKind::relu, "activation: relu_forward_any_zero for ", act_name(p.kind));
  check_shape("relu", "y", y, x.shape());
  check_same_dtype("relu", x, y);
  return dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return relu_forward_any_zero<Parallel, T>(x.data<T>(), y.data<T>(), x.numel());
  });
}

template <bool Parallel>
void run_relu_backward_of_output(const ActivationParams& p, const Tensor& y, const Tensor& dy, Tensor& dx) {
  check(p.kind == ActKind::relu, "activation: relu_backward_of_output for ", act_name(p.kind));
  check_shape("relu", "dy", dy, y.shape());
  check_shape("relu", "dx", dx, y.shape());
  dispatch_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    relu_backward_of_output<Parallel, T>(p, y.data<T>(), dy.data<T>(), dx.data<T>(), y.numel());
  });
}

}  // namespace activation_loops
}  // namespace driftlab
