#include "engine/model.h"

namespace driftlab {

int64_t Model::num_params() const {
  int64_t n = 0;
  for (auto& np : net->named_params()) n += np.second->value.numel();
  return n;
}

Tensor Model::forward(RunContext& ctx, const Tensor& x) const {
  return net->forward(ctx, in_dtype(x));
}

}  // namespace driftlab
