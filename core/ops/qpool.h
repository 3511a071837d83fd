// Quantized pooling, int8|uint8 in and out, every output written (=): max pooling x (N,C,H,W) ->
// y (N,C,P,Q) (QPool2dParams: the fp32 op's geometry), and global average pooling x (N,C,H,W) ->
// y (N,C) under the toolchains' rules (QAvgPoolRule; qgap_one is the per-output formula every
// backend calls). The fixed-point multipliers are core/ops/requant.h's.
#pragma once
#include <cstdint>

#include "core/host_device.h"
#include "core/tensor.h"
#include "core/ops/pool2d.h"
#include "core/ops/requant.h"

namespace driftlab {

// Max pooling on quantized values: the integer max (monotone in the real value for any positive
// scale), input and output sharing scale and zero point (what PyTorch's, TFLite's and ORT's
// quantized max pools do). The geometry's padding reads the type's minimum.
struct QPool2dParams {
  Pool2dParams g;
  DType dtype = DType::u8;
};

using QMaxPool2dForwardFn = void (*)(const QPool2dParams&, const Tensor& x, Tensor& y);

struct QMaxPool2dKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const QPool2dParams&, DType) = nullptr;
  QMaxPool2dForwardFn forward = nullptr;
};

// --------------------------------------------------------------------------------------------
// Average over all of H*W per channel (global average pooling), N = H*W, x = sum(q) - N*zp_in (exact
// in int32 below N = 2^23), clamped to the type's range after each rule's rounding:
enum class QAvgPoolRule {
  // PyTorch adaptive_avg_pool2d on channels-last input, both engines: the output keeps the input's
  // scale and zero point, M = 1.0f/N (float32).
  shared_qparams,
  // ONNX Runtime QLinearGlobalAveragePool (MLAS qlgavgpool.cpp, ORT 1.23, ran: docs/QUANT_SOURCES.md
  // section S2.5): the output has its own scale and zero point, M = s_in / (s_out * float(N)) in float32
  // (MLAS refuses M outside [2^-32, 256) and N >= 2^24: so does validate()).
  // Both float rules: y = round_half_even(float(x) * M) + zp_out.
  scale_ratio,
  // TFLite's MEAN over axes [1,2] as TF >= 2.13 runs it (reduce.cc PrepareMeanOrSum, reference/reduce.h
  // QuantizedMeanOrSum; docs/research/tflite_int8_add_mean_pool.md 3.4 P1), own output scale and
  // zero point: (M, shift) = QuantizeMultiplier(double(s_in) / double(s_out)); k = min(floor(log2 N),
  // 32, 31 + shift); M' = (int64(M) << k) / N truncated; y = MBQM(x, M', shift - k) (double rounding)
  // + zp_out.
  tflite_integer_mean,
  // TF <= 2.12's reference_integer_ops::Mean (ibid. P4): a = MBQM(x, M, shift) with the ratio's
  // multiplier (N not in it), then a > 0 ? (a + N/2) / N : (a - N/2) / N (C division, truncating:
  // ties away from zero), + zp_out.
  tflite_rounded_division,
};
const char* qavg_pool_rule_name(QAvgPoolRule r);

struct QGlobalAvgPoolParams {
  int64_t n = 1, c = 1, h = 1, w = 1;
  int32_t zero_point = 0;  // the input's
  DType dtype = DType::u8;
  QAvgPoolRule rule = QAvgPoolRule::shared_qparams;
  float in_scale = 1, out_scale = 1;  // every rule but shared_qparams
  int32_t out_zero_point = 0;         // every rule but shared_qparams (which keeps zero_point)
  bool own_qparams() const { return rule != QAvgPoolRule::shared_qparams; }
  int32_t output_zero_point() const { return own_qparams() ? out_zero_point : zero_point; }
  struct Resolved;
  Resolved resolve() const;  // the numbers of the rule (checks scales and count; throws naming them)
};

// What qgap_one needs, from QGlobalAvgPoolParams::resolve().
struct QGlobalAvgPoolParams::Resolved {
  QAvgPoolRule rule = QAvgPoolRule::shared_qparams;
  int64_t count = 1;
  int32_t zp_in = 0, zp_out = 0;
  float m = 1;                 // the float rules' M
  FixedPointMultiplier fixed;  // tflite_integer_mean: (M', shift - k); tflite_rounded_division: (M, shift)
};

// One output of the global average: `sum` the plane's stored values, clamped to [tmin, tmax].
// Shared by the reference, the fast CPU and the CUDA kernels. Float rules: |sum - count*zp| <
// 2^23 * 256 is exact in float32 below 2^24 only when count < 2^16, as every caller's is (an image
// plane); MLAS converts the same int32 the same way.
DL_HOST_DEVICE inline int32_t qgap_one(const QGlobalAvgPoolParams::Resolved& r, int64_t sum, int32_t tmin,
                                       int32_t tmax) {
  const int32_t x = static_cast<int32_t>(sum - r.count * r.zp_in);
  int64_t q;
  if (r.rule == QAvgPoolRule::tflite_integer_mean) {
    q = mbqm_double_rounding(x, r.fixed);
  } else if (r.rule == QAvgPoolRule::tflite_rounded_division) {
    const int32_t a = mbqm_double_rounding(x, r.fixed);
    const int32_t half = static_cast<int32_t>(r.count / 2), n = static_cast<int32_t>(r.count);
    q = a > 0 ? (a + half) / n : (a - half) / n;
  } else {
    q = static_cast<int64_t>(round_with(static_cast<float>(x) * r.m, RoundRule::half_even));
  }
  q += r.zp_out;
  return static_cast<int32_t>(q < tmin ? tmin : (q > tmax ? tmax : q));
}

using QGlobalAvgPoolFn = void (*)(const QGlobalAvgPoolParams&, const Tensor& x, Tensor& y);

struct QGlobalAvgPoolKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const QGlobalAvgPoolParams&, DType) = nullptr;
  QGlobalAvgPoolFn forward = nullptr;
};

}  // namespace driftlab
