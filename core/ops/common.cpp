#include "core/ops/common.h"

#include "core/error.h"

namespace driftlab {

namespace {
constexpr KernelBackend kBackends[] = {KernelBackend::reference, KernelBackend::fast, KernelBackend::eigen,
                                       KernelBackend::onednn};
}

const char* backend_name(KernelBackend b) {
  switch (b) {
    case KernelBackend::reference: return "reference";
    case KernelBackend::fast: return "fast";
    case KernelBackend::eigen: return "eigen";
    case KernelBackend::onednn: return "onednn";
  }
  fail("backend_name: unknown kernel backend ", static_cast<int>(b));
}

KernelBackend backend_from_name(const std::string& name) {
  for (KernelBackend b : kBackends)
    if (name == backend_name(b)) return b;
  fail("kernel backend: unknown '", name, "' (known: reference, fast, eigen, onednn)");
}

}  // namespace driftlab
