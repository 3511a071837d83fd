// Fast softmax cross-entropy, float and double: the reference's rows
// (kernels/cpu/softmax_xent_rows.h) split over OpenMP threads, each row computed alone; the
// per-row losses are then reduced on one thread in params.sum_order, as the reference reduces
// them. So the loss and dz equal the reference's bit for bit, whatever the thread count.
#include "kernels/cpu/registry.h"
#include "kernels/cpu/softmax_xent_rows.h"

namespace driftlab {

void register_softmax_xent_fast(KernelRegistry& reg) {
  SoftmaxXentKernel k;
  k.name = "fast";
  k.supports_doc = "every params field, float32 and float64; the reference's bits (rows over OpenMP threads)";
  k.supports = [](const SoftmaxXentParams&, DType) { return true; };
  k.forward = xent_rows::run_forward<true>;
  k.backward = xent_rows::run_backward<true>;
  reg.softmax_xent.at(KernelBackend::fast) = k;
}

}  // namespace driftlab
