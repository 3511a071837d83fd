#include "engine/layers/visit.h"

#include "engine/layers/layer.h"

namespace driftlab {

const char* layer_kind_name(LayerKind k) {
  switch (k) {
#define DL_KIND_NAME(cls, name) \
  case LayerKind::name:         \
    return #name;
    DRIFTLAB_LAYER_KINDS(DL_KIND_NAME)
#undef DL_KIND_NAME
    case LayerKind::external:
      return "external";
  }
  return "?";
}

namespace {

// Every engine kind runs forward and backward on the CPU (each layer's forward/backward, on the
// registry's kernels); layers above the engine say for themselves.
struct CpuSupport {
#define DL_CPU(cls, name) \
  static Support support(Kind<cls>) { return Support::all("forward, backward"); }
  DRIFTLAB_LAYER_KINDS(DL_CPU)
#undef DL_CPU
  static Support support(Kind<ExternalLayer>) { return Support::some("as its library says"); }
};

}  // namespace

SupportColumn cpu_support() { return support_of<CpuSupport>(); }

}  // namespace driftlab
