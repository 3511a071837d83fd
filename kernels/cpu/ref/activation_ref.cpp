// Reference elementwise activations, float and double: the shared loops
// (kernels/cpu/activation_loops.h) on one thread, each element the formula of
// core/ops/activation.h. forward/backward write (=).
#include "kernels/cpu/activation_loops.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

void activation_forward_ref(const ActivationParams& p, const Tensor& x, Tensor& y) {
  activation_loops::run_forward<false>(p, x, y);
}

void activation_backward_ref(const ActivationParams& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                             Tensor& dx) {
  activation_loops::run_backward<false>(p, x, y, dy, dx);
}

void register_activation_ref(KernelRegistry& reg) {
  ActivationKernel k;
  k.name = "reference";
  k.supports_doc = "every params field, float32 and float64";
  k.supports = [](const ActivationParams&, DType) { return true; };
  k.forward = activation_forward_ref;
  k.backward = activation_backward_ref;
  k.relu_forward_any_zero = activation_loops::run_relu_forward_any_zero<false>;
  k.relu_backward_of_output = activation_loops::run_relu_backward_of_output<false>;
  reg.activation.at(KernelBackend::reference) = k;
}

}  // namespace driftlab
