// Fast elementwise activations, float and double: the reference's shared formulas
// (engine/ops/activation.h), one loop per kind so that the compiler vectorises it, split over
// OpenMP threads for large tensors. Each element is computed alone from the same formula, so
// the result equals the reference bit for bit for any thread count. forward/backward write (=).
#include "engine/ops/activation.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;

template <typename T, typename F>
void for_each(int64_t n, F&& f) {
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) f(i);
}

template <typename T>
void forward(const ActivationParams& p, const T* x, T* y, int64_t n) {
  const T slope = static_cast<T>(p.hs_slope), offset = static_cast<T>(p.hs_offset);
  switch (p.kind) {
    case ActKind::relu: return for_each<T>(n, [&](int64_t i) { y[i] = relu_value(x[i]); });
    case ActKind::tanh: return for_each<T>(n, [&](int64_t i) { y[i] = tanh_value(x[i]); });
    case ActKind::sigmoid: return for_each<T>(n, [&](int64_t i) { y[i] = sigmoid_value(x[i]); });
    case ActKind::hard_sigmoid:
      return for_each<T>(n, [&](int64_t i) { y[i] = hard_sigmoid_value(x[i], slope, offset); });
  }
}

template <typename T>
void backward(const ActivationParams& p, const T* x, const T* y, const T* dy, T* dx, int64_t n) {
  const T g0 = static_cast<T>(p.relu_grad_at_zero);
  switch (p.kind) {
    case ActKind::relu: return for_each<T>(n, [&](int64_t i) { dx[i] = relu_grad(x[i], dy[i], g0); });
    case ActKind::tanh: return for_each<T>(n, [&](int64_t i) { dx[i] = tanh_grad(y[i], dy[i]); });
    case ActKind::sigmoid: return for_each<T>(n, [&](int64_t i) { dx[i] = sigmoid_grad(y[i], dy[i]); });
    case ActKind::hard_sigmoid:
      return for_each<T>(n, [&](int64_t i) { dx[i] = hard_sigmoid_grad(p, x[i], dy[i]); });
  }
}

void activation_forward_fast(const ActivationParams& p, const Tensor& x, Tensor& y) {
  check_shape(act_name(p.kind), "y", y, x.shape());
  check_same_dtype(act_name(p.kind), x, y);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    forward<T>(p, x.data<T>(), y.data<T>(), x.numel());
  });
}

void activation_backward_fast(const ActivationParams& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                              Tensor& dx) {
  check_shape(act_name(p.kind), "dy", dy, x.shape());
  check_shape(act_name(p.kind), "dx", dx, x.shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward<T>(p, x.data<T>(), y.data<T>(), dy.data<T>(), dx.data<T>(), x.numel());
  });
}

}  // namespace

void register_activation_fast(KernelRegistry& reg) {
  ActivationKernel k;
  k.name = "fast";
  k.supports_doc = "every params field, float32 and float64; the reference's bits (OpenMP, vectorised)";
  k.supports = [](const ActivationParams&, DType) { return true; };
  k.forward = activation_forward_fast;
  k.backward = activation_backward_fast;
  reg.activation.at(KernelBackend::fast) = k;
}

}  // namespace driftlab
