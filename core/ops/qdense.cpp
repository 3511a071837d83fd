#include "core/ops/qdense.h"

#include "core/error.h"

namespace driftlab {

void QDenseParams::validate() const {
  check(n >= 0 && in > 0 && out > 0, "qdense: sizes n=", n, " in=", in, " out=", out);
  check(y_dtype == DType::i8 || y_dtype == DType::u8, "qdense: output dtype ", dtype_name(y_dtype));
  check_acc_fits("qdense", x_dtype, in, has_bias);
  check(dot != DotRule::int16_pairs_channels || x_dtype == DType::u8, "qdense: int16_pairs_channels (oneDNN's "
        "VPMADDUBSW pairs) takes uint8 activations, the input is ", dtype_name(x_dtype));
  rq.validate("qdense", out);
}

}  // namespace driftlab
