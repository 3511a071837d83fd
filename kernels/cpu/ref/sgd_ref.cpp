// Reference SGD step, float and double: the shared loop (kernels/cpu/sgd_loops.h) on one thread,
// each element updated by sgd_update (core/ops/sgd.h).
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "kernels/cpu/sgd_loops.h"

namespace driftlab {

void sgd_step_ref(const SgdStepParams& c, Tensor& p, const Tensor& grad, Tensor& state) {
  sgd_loops::run<false>(c, p, grad, state);
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
