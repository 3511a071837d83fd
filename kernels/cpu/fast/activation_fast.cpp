// Fast elementwise activations, float and double: the reference's loops
// (kernels/cpu/activation_loops.h) split over OpenMP threads for large tensors. Each element is
// computed alone from the same formula, so the result equals the reference bit for bit for any
// thread count. forward/backward write (=).
#include "kernels/cpu/activation_loops.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

void register_activation_fast(KernelRegistry& reg) {
  ActivationKernel k;
  k.name = "fast";
  k.supports_doc = "every params field, float32 and float64; the reference's bits (OpenMP, vectorised)";
  k.supports = [](const ActivationParams&, DType) { return true; };
  k.forward = activation_loops::run_forward<true>;
  k.backward = activation_loops::run_backward<true>;
  k.relu_forward_any_zero = activation_loops::run_relu_forward_any_zero<true>;
  k.relu_backward_of_output = activation_loops::run_relu_backward_of_output<true>;
  reg.activation.at(KernelBackend::fast) = k;
}

}  // namespace driftlab
