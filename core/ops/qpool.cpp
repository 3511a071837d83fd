#include "core/ops/qpool.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace driftlab {

const char* qavg_pool_rule_name(QAvgPoolRule r) {
  switch (r) {
    case QAvgPoolRule::shared_qparams: return "shared_qparams";
    case QAvgPoolRule::scale_ratio: return "scale_ratio";
    case QAvgPoolRule::tflite_integer_mean: return "tflite_integer_mean";
    case QAvgPoolRule::tflite_rounded_division: return "tflite_rounded_division";
  }
  return "?";
}

QGlobalAvgPoolParams::Resolved QGlobalAvgPoolParams::resolve() const {
  Resolved r;
  r.rule = rule;
  r.count = h * w;
  check(r.count > 0 && r.count < (int64_t{1} << 23), "qglobal_avg_pool: ", r.count, " values per channel");
  r.zp_in = zero_point;
  r.zp_out = output_zero_point();
  if (rule == QAvgPoolRule::shared_qparams) {
    r.m = 1.0f / static_cast<float>(r.count);
    return r;
  }
  for (float sc : {in_scale, out_scale})
    check(std::isfinite(sc) && sc > 0, "qglobal_avg_pool: scale ", sc, " is not finite and positive");
  if (rule == QAvgPoolRule::scale_ratio) {
    // MLAS CheckQLinearGlobalAveragePoolScaleAndSize: the float32 product, then the division
    r.m = in_scale / (out_scale * static_cast<float>(r.count));
    check(r.m >= 0x1.0p-32f && r.m < 256.0f, "qglobal_avg_pool: multiplier s_in/(s_out*N) = ", in_scale, "/(",
          out_scale, "*", r.count, ") = ", r.m, " outside ONNX Runtime's [2^-32, 256)");
    return r;
  }
  // TFLite PrepareMeanOrSum: the plain QuantizeMultiplier of the ratio in double (shift may be
  // positive). A left shift that could overflow x's int32 (|x| <= 255 N) is refused: TFLite's would wrap.
  const FixedPointMultiplier ratio = quantize_multiplier(static_cast<double>(in_scale) / out_scale, false);
  check(ratio.shift <= 0 || static_cast<double>(r.count) * 255.0 * std::ldexp(1.0, ratio.shift) < 2147483648.0,
        "qglobal_avg_pool: scale ratio ", in_scale, "/", out_scale, " with ", r.count,
        " values per channel overflows TFLite's int32 left shift");
  if (rule == QAvgPoolRule::tflite_rounded_division) {
    r.fixed = ratio;
    return r;
  }
  // QuantizedMeanOrSum's folding of N: k = min(floor(log2 N), 32, 31 + shift), M' = (M << k) / N
  // (int64, truncating), shift' = shift - k
  int k = 0;
  while ((int64_t{2} << k) <= r.count) ++k;
  k = std::min(k, 32);
  k = std::min(k, 31 + ratio.shift);
  r.fixed.m0 = static_cast<int32_t>((static_cast<int64_t>(ratio.m0) << k) / r.count);
  r.fixed.shift = ratio.shift - k;
  return r;
}

}  // namespace driftlab
