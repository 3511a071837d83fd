#include "core/ops/qconv2d.h"

#include "core/error.h"

namespace driftlab {

void QConv2dParams::validate() const {
  g.validate();
  check(!g.flip, "qconv2d: flip must be resolved into the weights");
  check(y_dtype == DType::i8 || y_dtype == DType::u8, "qconv2d: output dtype ", dtype_name(y_dtype));
  check_acc_fits("qconv2d", x_dtype, g.c_per_group() * g.r * g.s, has_bias);
  check(dot != DotRule::int16_pairs_channels || x_dtype == DType::u8, "qconv2d: int16_pairs_channels (oneDNN's "
        "VPMADDUBSW pairs) takes uint8 activations, the input is ", dtype_name(x_dtype));
  rq.validate("qconv2d", g.k);
}

}  // namespace driftlab
