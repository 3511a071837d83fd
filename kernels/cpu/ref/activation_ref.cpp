// Reference elementwise activations, float and double: one plain loop per kind, each element
// the shared formula of engine/ops/activation.h. forward/backward write (=).
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

template <typename T>
void forward(const ActivationParams& p, const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = activation_value(p, x[i]);
}

template <typename T>
void backward(const ActivationParams& p, const T* x, const T* y, const T* dy, T* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = activation_grad(p, x[i], y[i], dy[i]);
}

}  // namespace

void activation_forward_ref(const ActivationParams& p, const Tensor& x, Tensor& y) {
  check_shape(act_name(p.kind), "y", y, x.shape());
  check_same_dtype(act_name(p.kind), x, y);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    forward<T>(p, x.data<T>(), y.data<T>(), x.numel());
  });
}

void activation_backward_ref(const ActivationParams& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                             Tensor& dx) {
  check_shape(act_name(p.kind), "dy", dy, x.shape());
  check_shape(act_name(p.kind), "dx", dx, x.shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward<T>(p, x.data<T>(), y.data<T>(), dy.data<T>(), dx.data<T>(), x.numel());
  });
}

void register_activation_ref(KernelRegistry& reg) {
  ActivationKernel k;
  k.name = "reference";
  k.supports_doc = "every params field, float32 and float64";
  k.supports = [](const ActivationParams&, DType) { return true; };
  k.forward = activation_forward_ref;
  k.backward = activation_backward_ref;
  reg.activation.at(KernelBackend::reference) = k;
}

}  // namespace driftlab
