// Reference softmax cross-entropy, three formulations (see core/ops/softmax_xent.h), float and
// double: the rows in order on one thread (kernels/cpu/softmax_xent_rows.h), the batch sum in
// params.sum_order.
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "kernels/cpu/softmax_xent_rows.h"

namespace driftlab {

double softmax_xent_forward_ref(const SoftmaxXentParams& prm, const Tensor& z, const std::vector<int32_t>& labels) {
  return xent_rows::run_forward<false>(prm, z, labels);
}

void softmax_xent_backward_ref(const SoftmaxXentParams& prm, const Tensor& z, const std::vector<int32_t>& labels,
                               Tensor& dz) {
  xent_rows::run_backward<false>(prm, z, labels, dz);
}

void register_softmax_xent_ref(KernelRegistry& reg) {
  SoftmaxXentKernel k;
  k.name = "reference";
  k.supports_doc = "every params field, float32 and float64";
  k.supports = [](const SoftmaxXentParams&, DType) { return true; };
  k.forward = softmax_xent_forward_ref;
  k.backward = softmax_xent_backward_ref;
  reg.softmax_xent.at(KernelBackend::reference) = k;
}

}  // namespace driftlab
