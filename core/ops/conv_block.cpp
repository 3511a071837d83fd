#include "core/ops/conv_block.h"

#include <sstream>

namespace driftlab {

std::string ConvBlockParams::str() const {
  std::ostringstream os;
  os << "conv " << conv.str() << (bias ? " + bias" : "") << ", " << act_name(act.kind) << ", maxpool "
     << pool.str();
  return os.str();
}

void ConvBlockParams::validate() const {
  conv.validate();
  pool.validate();
  if (!(pool.n == conv.n && pool.c == conv.k && pool.h == conv.out_h() && pool.w == conv.out_w()))
    fail("conv_block: the pooling's input [", pool.n, ",", pool.c, ",", pool.h, ",", pool.w,
         "] is not the convolution's output (", str(), ")");
}

}  // namespace driftlab
