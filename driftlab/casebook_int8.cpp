// The casebook's int8 cases (driftlab/casebook.h; pages in docs/casebook/).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "core/ops/qadd.h"
#include "core/ops/qadd_pairs.h"
#include "core/ops/qconv2d.h"
#include "core/ops/requant.h"
#include "driftlab/casebook.h"
#include "kernels/cpu/ref/ref.h"

namespace driftlab {
namespace {

float float_of_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// One output of an int8 convolution whose kernel covers the whole uint8 input x (N=1, K=1): the
// u8 x s8 sum under `dot`, requantized as float(acc) * scale + zp (qnnpack's and MLAS's form).
int32_t one_qconv_output(const Tensor& x, const Tensor& w, int32_t x_zp, DotRule dot, float scale, int32_t zp) {
  QConv2dParams p;
  p.g.n = 1, p.g.c = x.shape()[1], p.g.h = x.shape()[2], p.g.w = x.shape()[3];
  p.g.k = 1, p.g.r = p.g.h, p.g.s = p.g.w;
  p.x_dtype = p.y_dtype = DType::u8;
  p.x_zero_point = x_zp;
  p.dot = dot;
  p.rq.rule = RequantRule::float_multiply;
  p.rq.zero_point = zp;
  p.rq.lo = 0, p.rq.hi = 255;
  RequantChannel ch;
  ch.scale = scale;
  p.rq.channels = {ch};
  Tensor y({1, 1, 1, 1}, DType::u8);
  qconv2d_forward_ref(p, x, w, nullptr, y);
  return static_cast<int32_t>(y.at(0));
}

// The same output computed here without the kernels: the exact integer sum of (x - x_zp) * w, then
// the float_multiply requantization round(float(acc) * scale) + zp (round to nearest even, as
// nearbyint under the default rounding mode), clamped to uint8.
int32_t exact_qconv_output(const Tensor& x, const Tensor& w, int32_t x_zp, float scale, int32_t zp) {
  int64_t acc = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    acc += (int64_t{x.data<uint8_t>()[i]} - x_zp) * int64_t{w.data<int8_t>()[i]};
  const float y = std::nearbyint(static_cast<float>(acc) * scale) + static_cast<float>(zp);
  return static_cast<int32_t>(std::min(255.0f, std::max(0.0f, y)));
}

// pytorch/pytorch#37343: qnnpack's quantized add against fbgemm's (ATen's x86 qadd) on one element.
CaseResult qnnpack_qadd() {
  // The thread's scales, given as float32 bytes (struct.unpack('f', ...)): a b'\xf1$&=', b b'.\xe5\xb5=', c b'L\xed\xb8='.
  auto params = [](QAddRule rule) {
    QAddParams p;
    p.rule = rule;
    p.a_scale = float_of_bits(0x3d2624f1u);
    p.b_scale = float_of_bits(0x3db5e52eu);
    p.y_scale = float_of_bits(0x3db8ed4cu);
    p.a_zero_point = 112;
    p.b_zero_point = 126;
    p.y_zero_point = 124;
    p.resolve();
    return p;
  };
  const QAddParams qnn = params(QAddRule::fixed_point_shift), fb = params(QAddRule::float_fma_tail64);
  auto add = [](const QAddParams& p, int32_t a, int32_t b) { return qadd_one(p, a, b, 0, 0, 0, 255); };
  const int32_t yq = add(qnn, 158, 136), yf = add(fb, 158, 136);
  // every pair of stored values under the same scales: how often the two rules part
  const int64_t differ = qadd_pairs_differing(qnn, fb);
  const double exact = ((158 - 112) * double(qnn.a_scale) + (136 - 126) * double(qnn.b_scale)) / double(qnn.y_scale);
  // the real sum, rounded to the nearest output step, computed here in double (the float32 scales
  // are exact in double; the sum's distance from the tie, 2.2e-6 steps, is far above double's error)
  const auto ideal = static_cast<int32_t>(std::lround(exact)) + 124;
  CaseResult r;
  r.reporter = std::abs(yq - ideal);
  r.flipped = std::abs(yf - ideal);
  std::ostringstream os;
  os << std::setprecision(10) << "  one quantized add, quint8: a = 158 (scale " << qnn.a_scale << ", zp 112), b = 136 (scale "
     << qnn.b_scale << ", zp 126), output scale " << qnn.y_scale << ", zp 124\n"
     << "  the real sum in output steps: " << exact << " (just under a tie)\n"
     << "  qnnpack (22-bit fixed-point ratios, ties away from zero): " << yq << "; fbgemm (float, ties to even): " << yf
     << "; the real sum rounded: " << ideal << "\n"
     << "  over all 65,536 pairs of stored values with these scales the two engines part on " << differ << "\n";
  r.text = os.str();
  return r;
}

// pytorch/pytorch#44939: fbgemm's u8 x s8 products summed in int16 pairs (VPMADDUBSW) saturate.
CaseResult fbgemm_saturation() {
  // The reporter's quantized input (scale 0.13133743405342102, zp 1) and a kernel with his pair:
  // 71 at tap (1,1), 107 at tap (1,2); the other taps small. Weight scale and output scale ours.
  const Tensor x = Tensor::from<uint8_t>({1, 1, 3, 3}, {42, 93, 209, 96, 211, 171, 200, 174, 38});
  const Tensor w = Tensor::from<int8_t>({1, 1, 3, 3}, {-3, -2, -1, 4, 71, 107, 2, -5, 1});
  const float m = static_cast<float>(0.13133743405342102 * 0.005 / 0.1);  // s_x * s_w / s_y
  auto conv = [&](DotRule dot, const Tensor& in) { return one_qconv_output(in, w, 1, dot, m, 0); };
  const int32_t qnnpack = conv(DotRule::exact, x), fbgemm = conv(DotRule::int16_pairs_hwc, x);
  // reduce_range (the maintainer's workaround): activations calibrated to [0, 127], halving the stored values
  Tensor half({1, 1, 3, 3}, DType::u8);
  for (int64_t i = 0; i < 9; ++i) half.data<uint8_t>()[i] = static_cast<uint8_t>(x.data<uint8_t>()[i] / 2);
  const int32_t rq = conv(DotRule::exact, half), rf = conv(DotRule::int16_pairs_hwc, half);
  const int32_t want = exact_qconv_output(x, w, 1, m, 0);
  CaseResult r;
  r.reporter = std::abs(fbgemm - want);
  r.flipped = std::abs(qnnpack - want);
  std::ostringstream os;
  os << "  one quantized 3x3 convolution, uint8 input [[42,93,209],[96,211,171],[200,174,38]] (zp 1), int8 weights with 71 and 107\n"
     << "  at the taps of 211 and 171; M = s_x * s_w / s_y = 0.1313 * 0.005 / 0.1 (the weight and output scales ours)\n"
     << "  VPMADDUBSW adds 211*71 + 171*107 = 33278 into an int16: saturated to 32767, the accumulator loses 511\n"
     << "  output: qnnpack (exact int32 sum) " << qnnpack << ", fbgemm (int16 pairs) " << fbgemm
     << "; the exact sum requantized here without the kernels: " << want << "\n"
     << "  with reduce_range (stored values <= 127, the maintainer's workaround) the pair fits: " << rq << " and " << rf << "\n";
  r.text = os.str();
  return r;
}

// tensorflow/tensorflow#25087: TFLite's two roundings against TensorFlow's float multiply.
CaseResult tflite_double_rounding() {
  const FixedPointMultiplier m{1583594044, -9};  // the thread's quantized_multiplier and shift
  const int32_t x = 7984;
  const double real = double(m.m0) * std::ldexp(1.0, m.shift - 31);
  const int32_t two = mbqm_double_rounding(x, m), one = mbqm_single_rounding(x, m);
  const auto flt = static_cast<int32_t>(std::lround(x * real));
  // every accumulator in [-2^20, 2^20] under this multiplier: how often double rounding leaves the float result
  int64_t differ = 0, differ_single = 0, n = 0;
  for (int32_t a = -(1 << 20); a <= (1 << 20); ++a, ++n) {
    const double f = std::round(a * real);
    differ += mbqm_double_rounding(a, m) != f;
    differ_single += mbqm_single_rounding(a, m) != f;
  }
  CaseResult r;
  r.reporter = std::abs(two - flt);
  r.flipped = std::abs(one - flt);
  std::ostringstream os;
  os << std::setprecision(12) << "  MultiplyByQuantizedMultiplier(7984, 1583594044, shift -9): the multiplier " << real << "\n"
     << "  TensorFlow's float: round(7984 * M) = round(" << x * real << ") = " << flt << "\n"
     << "  TFLite, two roundings (gemmlowp: SaturatingRoundingDoublingHighMul, then RoundingDivideByPOT): " << two << "\n"
     << "  one rounding (TFLite built with TFLITE_SINGLE_ROUNDING, tensorflow/tensorflow#50290): " << one << "\n"
     << "  over the " << n << " accumulators in [-2^20, 2^20]: double rounding leaves the float result on " << differ
     << ", single rounding on " << differ_single << "\n";
  r.text = os.str();
  return r;
}

// microsoft/onnxruntime#16105: ONNX Runtime's u8 x s8 QGemm on an AVX2 CPU without VNNI.
CaseResult ort_qgemm_avx2() {
  // A later commenter's QGemm: x = [210, 198, 234], w = [-81, -80, 127], every zero point 0; here
  // as a 1x1 convolution over 3 channels (the same im2col row), output scale ours.
  const Tensor x = Tensor::from<uint8_t>({1, 3, 1, 1}, {210, 198, 234});
  const Tensor w = Tensor::from<int8_t>({1, 3, 1, 1}, {-81, -80, 127});
  auto qgemm = [&](DotRule dot) { return one_qconv_output(x, w, 0, dot, 0.02f, 128); };
  const int32_t avx2 = qgemm(DotRule::int16_pairs_hwc), vnni = qgemm(DotRule::exact);
  const int32_t want = exact_qconv_output(x, w, 0, 0.02f, 128);
  CaseResult r;
  r.reporter = std::abs(avx2 - want);
  r.flipped = std::abs(vnni - want);
  std::ostringstream os;
  os << "  a u8 x s8 product of 3 terms: x [210, 198, 234], w [-81, -80, 127], zero points 0, output scale 1/50, zp 128\n"
     << "  exact sum: 210*-81 + 198*-80 + 234*127 = -3132; on AVX2 the first pair, -32850, saturates to -32768: -3050\n"
     << "  output: AVX-512 VNNI / exact " << vnni << ", AVX2 (int16 pairs) " << avx2 << ", computed here without the kernels "
     << want
     << "   (the reporter's own model: expected 103, got 92)\n";
  r.text = os.str();
  return r;
}

}  // namespace

namespace casebook_detail {

std::vector<CaseInfo> int8_cases() {
  std::vector<CaseInfo> v;
  v.push_back({"qnnpack-qadd-rounding", "int8", "pytorch/pytorch#37343",
               "qadd two qint8 tensor with qnnpack backend gives the wrong result in some condition.",
               "torch.ops.quantized.add under torch.backends.quantized.engine = 'qnnpack' vs 'fbgemm', one element, the "
               "thread's scales and zero points",
               "quant_add: fixed_point_shift (qnnpack) -> float_fma_tail64 (fbgemm's ATen qadd)",
               "|y - y_exact| in output steps, y_exact the real sum rounded to the nearest step (computed in double)", 0.5,
               0.0,
               "none within PyTorch (each engine has its own add); compare int8 outputs across engines with a tolerance of one "
               "step, or run both sides on one engine",
               qnnpack_qadd});
  v.push_back({"fbgemm-int16-saturation", "int8", "pytorch/pytorch#44939",
               "Running quantized convolution with FBGEMM and QNNPACK yield different results.",
               "a quantized convolution on fbgemm (x86 without VNNI: u8 x s8 products added in int16 pairs) vs qnnpack (an "
               "exact int32 sum), full-range uint8 activations",
               "quant_u8s8_dot: int16_pairs_hwc -> exact",
               "|y - y_exact| in output steps, y_exact from the exact integer sum requantized without the kernels", 0.5, 0.0,
               "calibrate activations with reduce_range=True (fbgemm's default qconfig) so that a pair fits int16, or run on a "
               "CPU with VNNI",
               fbgemm_saturation});
  v.push_back({"tflite-double-rounding", "int8", "tensorflow/tensorflow#25087",
               "the two roundings in it will cause different result from floating point arithmetic",
               "TFLite's MultiplyByQuantizedMultiplier with gemmlowp's two roundings against TensorFlow's float "
               "round(acc * M), the thread's multiplier and accumulator",
               "quant_requant: fixed_point_double_rounding -> fixed_point_single_rounding",
               "|y_tflite - y_float| in output steps", 0.5, 0.0,
               "build TFLite with TFLITE_SINGLE_ROUNDING=1, or compare int8 outputs with a one-step tolerance",
               tflite_double_rounding});
  v.push_back({"ort-qgemm-avx2-saturation", "int8", "microsoft/onnxruntime#16105",
               "In the example code below, the expected output is 103 but got 92.",
               "a QLinearConv / QGemm with uint8 activations and int8 weights run by ONNX Runtime on an AMD CPU with AVX2 "
               "(no VNNI) against an Intel CPU with AVX-512 VNNI",
               "quant_u8s8_dot: int16_pairs_hwc (MLAS on AVX2) -> exact (VNNI)",
               "|y - y_exact| in output steps, y_exact from the exact integer sum requantized without the kernels", 0.5, 0.0,
               "quantize weights to 7 bits (reduce_range) or activations as uint8 with U8U8 "
               "(session option session.x64quantprecision), or run on a CPU with VNNI",
               ort_qgemm_avx2});
  return v;
}

}  // namespace casebook_detail
}  // namespace driftlab
