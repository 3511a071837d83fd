#include "core/ops/conv2d.h"

#include <sstream>

namespace driftlab {

std::string Conv2dParams::str() const {
  std::ostringstream os;
  os << "input [" << n << "," << c << "," << h << "," << w << "], kernel [" << k << "," << (groups >= 1 ? c / groups : c) << ","
     << r << "," << s << "], stride (" << stride_h << "," << stride_w << "), dilation (" << dil_h
     << "," << dil_w << "), pad t/b/l/r (" << pad_t << "," << pad_b << "," << pad_l << "," << pad_r
     << ")" << (groups != 1 ? ", groups " + std::to_string(groups) : std::string()) << (flip ? ", flipped" : "")
     << (algorithm == ConvAlgorithm::winograd ? ", winograd" : "");
  return os.str();
}

void Conv2dParams::validate() const {
  // if/fail: str() is built only on failure (validate runs on every kernel call).
  if (!(n >= 1 && c >= 1 && h >= 1 && w >= 1 && k >= 1 && r >= 1 && s >= 1)) fail("conv2d: empty dimension (", str(), ")");
  if (!(stride_h >= 1 && stride_w >= 1 && dil_h >= 1 && dil_w >= 1))
    fail("conv2d: stride and dilation must be >= 1 (", str(), ")");
  if (!(groups >= 1 && c % groups == 0 && k % groups == 0))
    fail("conv2d: groups must divide the input and output channels (", str(), ")");
  if (!(pad_t >= 0 && pad_b >= 0 && pad_l >= 0 && pad_r >= 0)) fail("conv2d: negative padding (", str(), ")");
  if (!(h + pad_t + pad_b >= dil_h * (r - 1) + 1 && w + pad_l + pad_r >= dil_w * (s - 1) + 1))
    fail("conv2d: kernel larger than padded input (", str(), ")");
}

AxisPad same_padding(int64_t n, int64_t k, int64_t stride, int64_t dilation, bool extra_after) {
  int64_t dk = (k - 1) * dilation + 1;
  int64_t out = (n + stride - 1) / stride;
  int64_t total = (out - 1) * stride + dk - n;
  if (total < 0) total = 0;
  if (extra_after) return {total / 2, total - total / 2};
  // Keras 2.2.4 on Theano: 'half' padding dk/2 before, then the output is cropped to
  // ceil(n/s) rows, so only the pad the kept windows reach remains after.
  int64_t before = dk / 2;
  int64_t after = (out - 1) * stride + dk - n - before;
  return {before, after < 0 ? 0 : after};
}

}  // namespace driftlab
