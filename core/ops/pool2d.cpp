#include "core/ops/pool2d.h"

#include <sstream>

#include "core/error.h"

namespace driftlab {

std::string Pool2dParams::str() const {
  std::ostringstream os;
  os << "input [" << n << "," << c << "," << h << "," << w << "], window " << kh << "x" << kw << ", stride ("
     << stride_h << "," << stride_w << "), pad t/b/l/r (" << pad_t << "," << pad_b << "," << pad_l << "," << pad_r
     << ")";
  return os.str();
}

void Pool2dParams::validate() const {
  if (!(n >= 1 && c >= 1 && h >= 1 && w >= 1 && kh >= 1 && kw >= 1 && stride_h >= 1 && stride_w >= 1))
    fail("pool2d: bad parameters (", str(), ")");
  if (!(pad_t >= 0 && pad_b >= 0 && pad_l >= 0 && pad_r >= 0)) fail("pool2d: negative padding (", str(), ")");
  if (!(pad_t < kh && pad_b < kh && pad_l < kw && pad_r < kw))
    fail("pool2d: padding must be smaller than the window (", str(), ")");
  if (!(h + pad_t + pad_b >= kh && w + pad_l + pad_r >= kw))
    fail("pool2d: window larger than padded input (", str(), ")");
}

}  // namespace driftlab
