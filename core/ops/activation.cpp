#include "core/ops/activation.h"

#include "core/error.h"

namespace driftlab {

const char* act_name(ActKind k) {
  switch (k) {
    case ActKind::relu: return "relu";
    case ActKind::tanh: return "tanh";
    case ActKind::sigmoid: return "sigmoid";
    case ActKind::hard_sigmoid: return "hard_sigmoid";
    case ActKind::clip: return "clip";
  }
  fail("act_name: unknown activation kind ", static_cast<int>(k));
}

}  // namespace driftlab
