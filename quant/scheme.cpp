#include "quant/scheme.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/error.h"

namespace driftlab {
namespace quant {

namespace {

ObserverKind observer_kind(QuantObserver o) {
  switch (o) {
    case QuantObserver::minmax: return ObserverKind::minmax;
    case QuantObserver::moving_average: return ObserverKind::moving_average;
    case QuantObserver::histogram: return ObserverKind::histogram;
    case QuantObserver::percentile: return ObserverKind::percentile;
    case QuantObserver::entropy: return ObserverKind::entropy;
  }
  fail("quant: unknown observer ", static_cast<int>(o));
}

const char* toolchain_name(QuantToolchain t) {
  switch (t) {
    case QuantToolchain::tflite: return "tflite";
    case QuantToolchain::torch_qnnpack: return "torch_qnnpack";
    case QuantToolchain::torch_onednn: return "torch_onednn";
    case QuantToolchain::torch_fbgemm: return "torch_fbgemm";
    case QuantToolchain::ort: return "ort";
  }
  return "?";
}

constexpr float kFloat32Eps = 1.1920928955078125e-07f;  // torch.finfo(torch.float32).eps, the observer's eps

float floor_scale(ScaleFloor f, float scale) {
  switch (f) {
    case ScaleFloor::none: return scale;
    case ScaleFloor::float32_eps: return std::max(scale, kFloat32Eps);  // torch.max(scale, self.eps)
    case ScaleFloor::tiny_to_one: return scale < FLT_MIN ? 1.f : scale;  // ORT: scale < finfo.tiny -> 1.0
  }
  return scale;
}

}  // namespace

QuantScheme QuantScheme::from_policy(const Policy& p) {
  QuantScheme s;
  s.toolchain = toolchain_name(p.quant_scheme);
  const bool i8 = p.quant_act_dtype == QuantActDtype::int8;
  s.act_dtype = i8 ? DType::i8 : DType::u8;
  s.act_type_min = i8 ? -128 : 0;
  s.act_type_max = i8 ? 127 : 255;
  // torch/ao/quantization/utils.py calculate_qmin_qmax: reduce_range halves the span,
  // quint8 [0,127], qint8 [-64,63].
  const bool reduced = p.quant_act_range == QuantActRange::reduced;
  s.act_qmin = reduced ? (i8 ? -64 : 0) : s.act_type_min;
  s.act_qmax = reduced ? (i8 ? 63 : 127) : s.act_type_max;
  s.observer.kind = observer_kind(p.quant_observer);
  if (s.observer.kind == ObserverKind::entropy) s.observer.bins = 128;  // ORT Entropy's num_bins default
  s.w_qmin = p.quant_weight_range == QuantWeightRange::narrow ? -127 : -128;
  s.w_qmax = 127;
  s.conv_per_channel = p.quant_conv_weights == QuantGranularity::per_channel;
  s.dense_per_channel = p.quant_dense_weights == QuantGranularity::per_channel;
  s.weight_op = p.quant_weight_scale_op;
  s.act_op = p.quant_act_scale_op;
  s.round = p.quant_round;
  s.zp_round = p.quant_zp_round;
  s.zp_form = p.quant_zp_form;
  s.scale_in_double = p.quant_scale_precision == FloatType::float64;
  s.scale_floor = p.quant_scale_floor;
  s.bias = p.quant_bias;
  s.requant = p.quant_requant;
  s.bias_product_in_double = p.quant_bias_product == FloatType::float64;
  s.multiplier = p.quant_multiplier;
  s.relu_fused = p.quant_relu == QuantRelu::fused;
  s.dot = p.quant_u8s8_dot;
  switch (p.quant_add) {
    case QuantAdd::fixed_point_shift: s.add_rule = QAddRule::fixed_point_shift; break;
    case QuantAdd::float_fma_tail64: s.add_rule = QAddRule::float_fma_tail64; break;
    case QuantAdd::ort_qlinear_add:
      // MLAS's AVX2 QLinearAdd; an int8 QDQ graph runs as uint8 + 128 on x86 (QDQS8ToU8Transformer in
      // ORT's default session): the same formula on shifted integers (docs/QUANT_SOURCES.md section S2.5)
      s.add_rule = QAddRule::float_ratio_fma;
      s.add_offset = i8 ? 128 : 0;
      break;
    case QuantAdd::tflite_fixed_point: s.add_rule = QAddRule::tflite_fixed_point; break;
  }
  switch (p.quant_avg_pool) {
    case QuantAvgPool::float_reciprocal: s.avg_pool_rule = QAvgPoolRule::shared_qparams; break;
    case QuantAvgPool::tflite_integer_mean: s.avg_pool_rule = QAvgPoolRule::tflite_integer_mean; break;
    case QuantAvgPool::tflite_rounded_division: s.avg_pool_rule = QAvgPoolRule::tflite_rounded_division; break;
    case QuantAvgPool::ort_qlinear_global_avg_pool: s.avg_pool_rule = QAvgPoolRule::scale_ratio; break;
  }
  return s;
}

ActQParams activation_qparams(const QuantScheme& s, Range r, const std::string& what) {
  check(std::isfinite(r.min) && std::isfinite(r.max) && r.min <= r.max, what, ": calibrated range [", r.min, ", ",
        r.max, "] is not a finite interval");
  const float mn = std::min(r.min, 0.f), mx = std::max(r.max, 0.f);  // every toolchain includes 0
  const int32_t qmin = s.act_qmin, qmax = s.act_qmax;
  ActQParams q;
  double zp_real;  // the zero point before rounding, in the scheme's precision
  if (s.scale_in_double) {
    // ORT compute_scale_zp: dr = float64(rmax - rmin) (the subtraction in float32), scale = dr / (qmax - qmin)
    // in float64; scale < tiny -> (1, 0); zero point np.round(qmin - rmin / scale) in float64; scale stored float32.
    double scale = static_cast<double>(mx - mn) / static_cast<double>(qmax - qmin);
    if (s.scale_floor == ScaleFloor::tiny_to_one && scale < FLT_MIN) return {1.f, 0};
    if (s.scale_floor == ScaleFloor::float32_eps) scale = std::max(scale, static_cast<double>(kFloat32Eps));
    check(scale > 0, what, ": range [", r.min, ", ", r.max, "] gives scale 0 (quant_scale_floor=none)");
    zp_real = s.zp_form == ZeroPointForm::round_of_difference
                  ? round_with(static_cast<double>(qmin) - static_cast<double>(mn) / scale, s.zp_round)
                  : static_cast<double>(qmin) - round_with(static_cast<double>(mn) / scale, s.zp_round);
    q.scale = static_cast<float>(scale);
  } else {
    // PyTorch _calculate_qparams / TFLite GetAsymmetricQuantizationParams: float32 throughout.
    float scale = floor_scale(s.scale_floor, (mx - mn) / static_cast<float>(qmax - qmin));
    check(scale > 0, what, ": range [", r.min, ", ", r.max,
          "] gives scale 0 (quant_scale_floor=none, as TFLite would store for an all-zero activation)");
    zp_real = s.zp_form == ZeroPointForm::round_of_difference
                  ? round_with(static_cast<float>(qmin) - mn / scale, s.zp_round)  // TFLite: float32 zero_point_from_min
                  : static_cast<double>(qmin) - round_with(mn / scale, s.zp_round);  // torch: qmin - round(min/s)
    q.scale = scale;
  }
  q.zero_point = static_cast<int32_t>(std::min<double>(std::max<double>(zp_real, qmin), qmax));
  return q;
}

QuantizedWeight quantize_weight(const QuantScheme& s, const Tensor& w, bool per_channel, const std::string& what) {
  check(w.dtype() == DType::f32, what, ": weight is ", dtype_name(w.dtype()), ", expected float32");
  std::vector<Range> ranges = per_channel ? per_channel_minmax(w) : std::vector<Range>{minmax_range(w)};
  const int64_t channels = static_cast<int64_t>(ranges.size());
  const int64_t inner = w.numel() / std::max<int64_t>(channels, 1);
  QuantizedWeight out;
  out.q = Tensor(w.shape(), DType::i8);
  const float half_span = static_cast<float>(s.w_qmax - s.w_qmin) / 2.f;  // 127.5 (full) or 127 (narrow)
  const float* src = w.data<float>();
  int8_t* dst = out.q.data<int8_t>();
  for (int64_t c = 0; c < channels; ++c) {
    const Range r = ranges[c];
    check(std::isfinite(r.min) && std::isfinite(r.max), what, ": weight channel ", c, " is not finite");
    // torch: max(-min_neg, max_pos); TFLite: max(|min|, |max|); ORT: max(|rmin|, |rmax|)
    const float amax = std::max(-std::min(r.min, 0.f), std::max(r.max, 0.f));
    float scale;
    if (s.scale_in_double)  // ORT: float64(2*amax) / (qmax - qmin), stored as float32
      scale = static_cast<float>(static_cast<double>(2.f * amax) / static_cast<double>(s.w_qmax - s.w_qmin));
    else  // torch: amax / ((qmax - qmin) / 2); TFLite: amax / 127.f
      scale = amax / half_span;
    scale = floor_scale(s.scale_floor, scale);
    if (scale == 0.f) scale = 1.f;  // an all-zero channel (TFLite PortableSymmetricQuantizeFloats: scale 1)
    out.scale.push_back(scale);
    const float inv = 1.f / scale;
    const float inv_range = amax > 0 ? half_span / amax : 0.f;  // TFLite: 127.f / half_range (0 for range 0)
    for (int64_t i = c * inner; i < (c + 1) * inner; ++i) {
      float v;
      switch (s.weight_op) {
        case WeightScaleOp::divide: v = src[i] / scale; break;
        case WeightScaleOp::mul_reciprocal: v = src[i] * inv; break;
        case WeightScaleOp::mul_inverse_range: v = src[i] * inv_range; break;
        default: fail(what, ": unknown weight scale op");
      }
      v = round_with(v, s.round);
      v = std::min(std::max(v, static_cast<float>(s.w_qmin)), static_cast<float>(s.w_qmax));
      dst[i] = static_cast<int8_t>(v);
    }
  }
  return out;
}

Tensor quantize_bias(const QuantScheme& s, float s_in, const QuantizedWeight& w, const Tensor& bias,
                     const std::string& what) {
  if (!bias.defined()) return Tensor();
  check(bias.dtype() == DType::f32 && bias.rank() == 1, what, ": bias must be a float32 vector");
  const int64_t k = bias.numel();
  const float* b = bias.data<float>();
  if (s.bias == QuantBias::float_in_requant) {
    // oneDNN / fbgemm: b / (s_in * s_w[c]) in float32, added to float(acc) before the multiply
    Tensor out({k}, DType::f32);
    for (int64_t c = 0; c < k; ++c) {
      const float sw = w.scale_of(c);
      // oneDNN takes reciprocal scales: bs = (1/s_in)*(1/s_w), the bias enters as b*bs; fbgemm: b/(s_in*s_w)
      out.data<float>()[c] = s.multiplier == QuantMultiplier::reciprocal_scales ? b[c] * ((1.f / s_in) * (1.f / sw))
                                                                               : b[c] / (s_in * sw);
    }
    return out;
  }
  Tensor out({k}, DType::i32);
  for (int64_t c = 0; c < k; ++c) {
    // s_b stored as float32: a float32 product (TFLite, ORT numpy float32 arrays) or the product of
    // doubles (PyTorch: q_scale() * act_scale) rounded once.
    const float sb = s.bias_product_in_double ? static_cast<float>(static_cast<double>(w.scale_of(c)) * s_in)
                                              : s_in * w.scale_of(c);
    double v = s.bias == QuantBias::int32_divide_f64
                   ? round_with(static_cast<double>(b[c]) / static_cast<double>(sb), s.round)  // ORT: float64 division
                   : static_cast<double>(round_with(b[c] * (1.f / sb), s.round));             // x * (1.0f / scale)
    check(std::isfinite(v) && std::fabs(v) <= 1073741824.0, what, ": bias[", c, "] = ", b[c], " is ", v,
          " steps of s_in*s_w = ", sb, ": beyond 2^30 the int32 accumulator could overflow");
    out.data<int32_t>()[c] = static_cast<int32_t>(v);
  }
  return out;
}

Requant make_requant(const QuantScheme& s, float s_in, const QuantizedWeight& w, int64_t channels,
                     const Tensor& float_bias, ActQParams out, bool relu, const std::string& what) {
  Requant rq;
  rq.rule = s.requant;
  rq.round = s.round;
  rq.zero_point = out.zero_point;
  rq.lo = relu ? std::max(s.act_type_min, out.zero_point) : s.act_type_min;
  rq.hi = s.act_type_max;
  const int64_t n = w.scale.size() == 1 ? 1 : channels;
  check(static_cast<int64_t>(w.scale.size()) == n, what, ": ", w.scale.size(), " weight scales for ", channels,
        " channels");
  const bool fb = float_bias.defined();
  if (fb) check(float_bias.dtype() == DType::f32 && float_bias.numel() == channels, what, ": float bias size");
  const int64_t m = fb ? channels : n;  // a per-channel float bias needs a channel entry each
  for (int64_t c = 0; c < m; ++c) {
    const float sw = w.scale_of(c);
    RequantChannel ch;
    double md = 0;
    switch (s.multiplier) {
      case QuantMultiplier::float64:  // TFLite: double(s_in) * double(s_w) / double(s_out)
        md = static_cast<double>(s_in) * static_cast<double>(sw) / static_cast<double>(out.scale);
        break;
      case QuantMultiplier::float32_divide: md = (s_in * sw) / out.scale; break;  // fbgemm
      case QuantMultiplier::float32_mul_reciprocal: md = (sw * s_in) * (1.f / out.scale); break;  // qnnpack
      case QuantMultiplier::reciprocal_scales:  // oneDNN: (1/s_out) / ((1/s_in) * (1/s_w))
        md = (1.f / out.scale) / ((1.f / s_in) * (1.f / sw));
        break;
    }
    if (s.requant == RequantRule::float_multiply || s.requant == RequantRule::float_multiply_add_zp)
      ch.scale = static_cast<float>(md);
    else
      ch.fixed = quantize_multiplier(md, s.requant == RequantRule::fixed_point_single_rounding);
    if (fb) ch.bias = float_bias.data<float>()[c];
    rq.channels.push_back(ch);
  }
  rq.validate(what.c_str(), channels);
  return rq;
}

QuantizeParams act_quantize_params(const QuantScheme& s, ActQParams q) {
  QuantizeParams p;
  p.scale = {q.scale};
  p.zero_point = {q.zero_point};
  p.op = s.act_op;
  p.round = s.round;
  p.qmin = s.act_type_min;
  p.qmax = s.act_type_max;
  p.dtype = s.act_dtype;
  return p;
}

}  // namespace quant
}  // namespace driftlab
