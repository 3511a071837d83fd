// Fast SGD step, float and double: the reference's loop (kernels/cpu/sgd_loops.h) over OpenMP
// threads for arrays of 64K elements and more; the reference's bits for any thread count.
#include "kernels/cpu/registry.h"
#include "kernels/cpu/sgd_loops.h"

namespace driftlab {

void register_sgd_fast(KernelRegistry& reg) {
  SgdKernel k;
  k.name = "fast";
  k.supports_doc = "every form and weight-decay mode, float32 and float64; the reference's bits (OpenMP)";
  k.supports = [](const SgdStepParams&, DType) { return true; };
  k.step = sgd_loops::run<true>;
  reg.sgd.at(KernelBackend::fast) = k;
}

}  // namespace driftlab
