// Adam and RMSprop steps, reference and fast, float and double: the shared loop
// (kernels/cpu/adaptive_loops.h) on one thread, or over OpenMP threads for arrays of 64K elements
// and more; the same bits for any thread count.
#include "kernels/cpu/adaptive_loops.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

void register_adaptive_ref(KernelRegistry& reg) {
  AdamKernel a;
  a.name = "reference";
  a.supports_doc = "every form, moment update, square order and weight-decay mode, float32 and float64";
  a.supports = [](const AdamStepParams&, DType) { return true; };
  a.step = adaptive_loops::run<false, AdamStepParams>;
  reg.adam.at(KernelBackend::reference) = a;
  RmspropKernel r;
  r.name = "reference";
  r.supports_doc = a.supports_doc;
  r.supports = [](const RmspropStepParams&, DType) { return true; };
  r.step = adaptive_loops::run<false, RmspropStepParams>;
  reg.rmsprop.at(KernelBackend::reference) = r;
}

void register_adaptive_fast(KernelRegistry& reg) {
  AdamKernel a;
  a.name = "fast";
  a.supports_doc = "everything the reference does; the reference's bits (OpenMP)";
  a.supports = [](const AdamStepParams&, DType) { return true; };
  a.step = adaptive_loops::run<true, AdamStepParams>;
  reg.adam.at(KernelBackend::fast) = a;
  RmspropKernel r;
  r.name = "fast";
  r.supports_doc = a.supports_doc;
  r.supports = [](const RmspropStepParams&, DType) { return true; };
  r.step = adaptive_loops::run<true, RmspropStepParams>;
  reg.rmsprop.at(KernelBackend::fast) = r;
}

}  // namespace driftlab
