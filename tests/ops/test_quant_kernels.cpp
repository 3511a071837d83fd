// The integer kernels of core/ops/quant.h and kernels/cpu/ref/quant_ref.cpp against values
// computed by hand (each case's comment shows the arithmetic): every rounding rule at its ties,
// both signs; TFLite's QuantizeMultiplier at its edges (a mantissa that rounds up to 2^31,
// multipliers below 2^-31, shifts beyond 30/31); gemmlowp's fixed-point multiply with double and
// single rounding; the float requantization; quantize by division vs by the reciprocal; the
// quantized conv, dense and max pool on tiny inputs; ONNX Runtime's QLinearAdd (float ratios, fma,
// the uint8 offset) and global average pooling (own output scale) at their ties.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <limits>

#include "engine/random.h"
#include "kernels/cpu/ref/ref.h"
#include "tests/cases/quant_cases.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

TEST(QuantRounding, TiesHalfAwayAndHalfEvenBothSigns) {
  struct Case {
    float v, away, even;
  };
  const Case cases[] = {{0.5f, 1, 0},   {-0.5f, -1, 0},  {1.5f, 2, 2},    {-1.5f, -2, -2}, {2.5f, 3, 2},
                        {-2.5f, -3, -2}, {2.4999998f, 2, 2}, {-2.5000002f, -3, -3}, {7.f, 7, 7},
                        {16777218.f, 16777218.f, 16777218.f}, {-0.f, 0, 0}};
  for (const Case& c : cases) {
    EXPECT_EQ(round_with(c.v, RoundRule::half_away), c.away) << c.v;
    EXPECT_EQ(round_with(c.v, RoundRule::half_even), c.even) << c.v;
    EXPECT_EQ(round_with(double(c.v), RoundRule::half_even), double(c.even)) << c.v;
  }
  // The sign of a zero result is not kept (-0.5 gives +0 where nearbyint gives -0): every caller
  // converts the result to an integer.
  EXPECT_TRUE(std::isnan(round_with(std::nanf(""), RoundRule::half_even)));
}

TEST(QuantMultiplier, TfliteQuantizeMultiplierEdges) {
  auto qm = [](double m, bool single) { return quantize_multiplier(m, single); };
  // 0.5 = 0.5 * 2^0 -> m0 = 0.5 * 2^31 = 2^30, shift 0
  EXPECT_EQ(qm(0.5, false).m0, 1 << 30);
  EXPECT_EQ(qm(0.5, false).shift, 0);
  // 1.0 = 0.5 * 2^1
  EXPECT_EQ(qm(1.0, false).m0, 1 << 30);
  EXPECT_EQ(qm(1.0, false).shift, 1);
  // 0.75 -> 0.75 * 2^31 = 1610612736
  EXPECT_EQ(qm(0.75, false).m0, 1610612736);
  // mantissa 1 - 2^-34: q * 2^31 = 2^31 - 1/8 rounds to 2^31 -> halved to 2^30, shift -3 + 1
  const double m = (1.0 - std::ldexp(1.0, -34)) * 0.125;
  EXPECT_EQ(qm(m, false).m0, 1 << 30);
  EXPECT_EQ(qm(m, false).shift, -2);
  // 2^-32 = 0.5 * 2^-31: the smallest shift kept
  EXPECT_EQ(qm(std::ldexp(1.0, -32), false).m0, 1 << 30);
  EXPECT_EQ(qm(std::ldexp(1.0, -32), false).shift, -31);
  // below: 2^-33 = 0.5 * 2^-32, shift < -31 -> (0, 0), every output becomes the zero point
  EXPECT_EQ(qm(std::ldexp(1.0, -33), false).m0, 0);
  EXPECT_EQ(qm(std::ldexp(1.0, -33), false).shift, 0);
  EXPECT_EQ(qm(1e-12, true).m0, 0);
  // zero
  EXPECT_EQ(qm(0.0, false).m0, 0);
  // single rounding saturates a shift above 30: 2^31 = 0.5 * 2^32 -> (2^31 - 1, 30)
  EXPECT_EQ(qm(std::ldexp(1.0, 31), true).m0, INT32_MAX);
  EXPECT_EQ(qm(std::ldexp(1.0, 31), true).shift, 30);
  // double rounding has no form for a left shift of 32
  EXPECT_THROW(qm(std::ldexp(1.0, 31), false), Error);
  EXPECT_THROW(qm(-0.5, false), Error);
  EXPECT_THROW(qm(std::nan(""), false), Error);
}

TEST(QuantFixedPoint, HighMulAndDivideByPotRoundTheirOwnWays) {
  const int32_t h = 1 << 30;  // 0.5 as a Q31 multiplier
  // 2*a*b/2^32 with a*b = +-2^30 * k:
  EXPECT_EQ(sat_rounding_doubling_high_mul(1, h), 1);    // +0.5 -> 1
  EXPECT_EQ(sat_rounding_doubling_high_mul(-1, h), 0);   // -0.5 -> 0 (ties toward +inf)
  EXPECT_EQ(sat_rounding_doubling_high_mul(3, h), 2);    // +1.5 -> 2
  EXPECT_EQ(sat_rounding_doubling_high_mul(-3, h), -1);  // -1.5 -> -1
  EXPECT_EQ(sat_rounding_doubling_high_mul(h, h), 1 << 29);
  EXPECT_EQ(sat_rounding_doubling_high_mul(INT32_MIN, INT32_MIN), INT32_MAX);  // the one overflow
  EXPECT_EQ(sat_rounding_doubling_high_mul(INT32_MIN, INT32_MAX), -INT32_MAX);  // -(2^31-1) exactly
  // x / 2^e, ties away from zero
  EXPECT_EQ(rounding_divide_by_pot(3, 1), 2);    // 1.5
  EXPECT_EQ(rounding_divide_by_pot(-3, 1), -2);  // -1.5
  EXPECT_EQ(rounding_divide_by_pot(-1, 1), -1);  // -0.5
  EXPECT_EQ(rounding_divide_by_pot(1, 1), 1);    // 0.5
  EXPECT_EQ(rounding_divide_by_pot(-5, 2), -1);  // -1.25
  EXPECT_EQ(rounding_divide_by_pot(-6, 2), -2);  // -1.5
  EXPECT_EQ(rounding_divide_by_pot(INT32_MAX, 31), 1);   // 0.99999999953
  EXPECT_EQ(rounding_divide_by_pot(INT32_MIN, 31), -1);  // -1 exactly
  EXPECT_EQ(rounding_divide_by_pot(1 << 30, 31), 1);     // 0.5 -> 1
  EXPECT_EQ(rounding_divide_by_pot(-(1 << 30), 31), -1); // -0.5 -> -1
  EXPECT_EQ(rounding_divide_by_pot(7, 0), 7);
}

TEST(QuantFixedPoint, DoubleAndSingleRoundingDisagreeWhereTheyShould) {
  const FixedPointMultiplier quarter{1 << 30, -1};  // 0.25
  // double: high mul exact, then the divide rounds ties away from zero
  EXPECT_EQ(mbqm_double_rounding(2, quarter), 1);    // 0.5 -> 1
  EXPECT_EQ(mbqm_double_rounding(-2, quarter), -1);  // -0.5 -> -1
  EXPECT_EQ(mbqm_double_rounding(-6, quarter), -2);  // -1.5 -> -2
  // single: (x*m0 + 2^31) >> 32 rounds ties toward +inf
  EXPECT_EQ(mbqm_single_rounding(2, quarter), 1);    // 0.5 -> 1
  EXPECT_EQ(mbqm_single_rounding(-2, quarter), 0);   // -0.5 -> 0
  EXPECT_EQ(mbqm_single_rounding(-6, quarter), -1);  // -1.5 -> -1
  // double rounding's classic error: x = 1, M = 0.25 + 2^-32 (m0 = 2^30 + 1, shift -1). The high
  // mul gives (2^30+1 + 2^30)/2^31 -> 1 (0.50000000047 rounded), then 1/2 -> 1; one rounding of
  // 0.25000000023 gives 0.
  const FixedPointMultiplier m{(1 << 30) + 1, -1};
  EXPECT_EQ(mbqm_double_rounding(1, m), 1);
  EXPECT_EQ(mbqm_single_rounding(1, m), 0);
  // left shifts: M = 2 (m0 2^30, shift 2): 3 -> 12 << ... 3*2 = 6
  EXPECT_EQ(mbqm_double_rounding(3, {1 << 30, 2}), 6);
  EXPECT_EQ(mbqm_single_rounding(3, {1 << 30, 2}), 6);
  // a multiplier of 0 (below 2^-31): every accumulator becomes 0
  EXPECT_EQ(mbqm_double_rounding(INT32_MAX, {0, 0}), 0);
  EXPECT_EQ(mbqm_double_rounding(INT32_MIN, {0, 0}), 0);
  // the smallest shift, -31 (M = 2^-32): 2^30 * M = 0.25 -> 0
  EXPECT_EQ(mbqm_double_rounding(1 << 30, {1 << 30, -31}), 0);
  // (2^31 - 1) * M = 0.49999999977, but the high mul rounds to 2^30 first and 2^30 / 2^31 = 0.5
  // then rounds away: 1 (single rounding: 0)
  EXPECT_EQ(mbqm_double_rounding(INT32_MAX, {1 << 30, -31}), 1);
  EXPECT_EQ(mbqm_single_rounding(INT32_MAX, {1 << 30, -31}), 0);
  // -2^31 * M = -0.5: high mul -2^30 exactly, then the divide's tie goes away from zero: -1
  EXPECT_EQ(mbqm_double_rounding(INT32_MIN, {1 << 30, -31}), -1);
}

TEST(QuantRequant, FloatMultiplyRoundsThenAddsZeroPointThenClamps) {
  RequantChannel ch;
  ch.scale = 0.5f;
  auto rq = [&](int32_t acc, RoundRule r, int32_t zp = 10, int32_t lo = 0, int32_t hi = 255) {
    return requantize_one(acc, ch, RequantRule::float_multiply, r, zp, lo, hi);
  };
  EXPECT_EQ(rq(1, RoundRule::half_even), 10);   // 0.5 -> 0
  EXPECT_EQ(rq(1, RoundRule::half_away), 11);   // 0.5 -> 1
  EXPECT_EQ(rq(5, RoundRule::half_even), 12);   // 2.5 -> 2
  EXPECT_EQ(rq(-1, RoundRule::half_even), 10);  // -0.5 -> -0
  EXPECT_EQ(rq(-1, RoundRule::half_away), 9);   // -0.5 -> -1
  EXPECT_EQ(rq(-100, RoundRule::half_even), 0);   // -50 + 10 clamps at 0
  EXPECT_EQ(rq(1000, RoundRule::half_even), 255);  // 500 + 10 clamps at 255
  EXPECT_EQ(rq(INT32_MAX, RoundRule::half_even), 255);
  EXPECT_EQ(rq(-7, RoundRule::half_even, 10, 10, 255), 10);  // ReLU fused: clamp low at the zero point
  // 5 * 0.1f = 0.50000000745 rounds (float32) to exactly 0.5: a tie that only the float product makes
  ch.scale = 0.1f;
  EXPECT_EQ(rq(5, RoundRule::half_even, 0), 0);
  EXPECT_EQ(rq(5, RoundRule::half_away, 0), 1);
  // a float bias is added to float(acc) before the multiply: (1 + 0.25) * 0.5 = 0.625 -> 1
  ch.scale = 0.5f;
  ch.bias = 0.25f;
  EXPECT_EQ(rq(1, RoundRule::half_even, 0), 1);
  // float(acc) rounds large accumulators: 2^24 + 1 becomes 2^24 before the multiply
  ch.bias = 0.f;
  ch.scale = 1.f;
  EXPECT_EQ(requantize_one((1 << 24) + 1, ch, RequantRule::float_multiply, RoundRule::half_even, 0, INT32_MIN / 2,
                           INT32_MAX / 2),
            1 << 24);
}

TEST(QuantRequant, FixedPointRulesAddZeroPointAfterTheMultiply) {
  RequantChannel ch;
  ch.fixed = {1 << 30, 0};  // 0.5
  auto rq = [&](int32_t acc, RequantRule rule) { return requantize_one(acc, ch, rule, RoundRule::half_away, -5, -128, 127); };
  EXPECT_EQ(rq(1, RequantRule::fixed_point_double_rounding), -4);   // 0.5 -> 1
  EXPECT_EQ(rq(-1, RequantRule::fixed_point_double_rounding), -5);  // -0.5 -> 0 (the high mul's tie)
  EXPECT_EQ(rq(-3, RequantRule::fixed_point_single_rounding), -6);  // -1.5 -> -1
  EXPECT_EQ(rq(1000, RequantRule::fixed_point_double_rounding), 127);
  EXPECT_EQ(rq(-1000, RequantRule::fixed_point_single_rounding), -128);
}

TEST(QuantQuantize, DivisionAndReciprocalDifferOnFbgemmsExample) {
  // FBGEMM's documented case: x / s = 127.49999... but x * (1/s) rounds to 127.5 in float32 and
  // then to 128 (half even): PyTorch quantizes by the reciprocal, TFLite and ONNX by division.
  const float x = 0.273939937f, s = 0.00214854861f, inv = 1.0f / s;
  EXPECT_EQ(quantize_one(x, s, inv, 0, ScaleOp::divide, RoundRule::half_even, 0, 255), 127);
  EXPECT_EQ(quantize_one(x, s, inv, 0, ScaleOp::mul_reciprocal, RoundRule::half_even, 0, 255), 128);
  // ties: zp added after the rounding; half even vs away
  EXPECT_EQ(quantize_one(0.5f, 1.f, 1.f, 1, ScaleOp::mul_reciprocal, RoundRule::half_even, 0, 255), 1);
  EXPECT_EQ(quantize_one(0.5f, 1.f, 1.f, 1, ScaleOp::divide, RoundRule::half_away, 0, 255), 2);
  EXPECT_EQ(quantize_one(-2.5f, 1.f, 1.f, 0, ScaleOp::divide, RoundRule::half_even, -128, 127), -2);
  EXPECT_EQ(quantize_one(-2.5f, 1.f, 1.f, 0, ScaleOp::divide, RoundRule::half_away, -128, 127), -3);
  // saturation, infinities, NaN (to qmin: what PyTorch's nearbyint-then-clamp gives on x86)
  EXPECT_EQ(quantize_one(1e30f, 0.1f, 10.f, 0, ScaleOp::divide, RoundRule::half_even, -127, 127), 127);
  EXPECT_EQ(quantize_one(-INFINITY, 0.1f, 10.f, 3, ScaleOp::divide, RoundRule::half_even, -128, 127), -128);
  EXPECT_EQ(quantize_one(std::nanf(""), 0.1f, 10.f, 3, ScaleOp::divide, RoundRule::half_even, 0, 255), 0);
  EXPECT_EQ(dequantize_one(0, 128, 0.5f), -64.f);
  EXPECT_EQ(dequantize_one(-128, -128, 0.5f), 0.f);
}

TEST(QuantQuantize, PerChannelTensorRoundTrip) {
  QuantizeParams p;
  p.scale = {0.5f, 0.25f};
  p.zero_point = {0, 2};
  p.axis = 1;
  p.dtype = DType::i8;
  p.qmin = -127;
  p.op = ScaleOp::divide;
  p.round = RoundRule::half_even;
  Tensor x = Tensor::from<float>({2, 2, 2}, {0.25f, -1.f, 0.125f, 100.f, -0.75f, 1.f, -0.375f, -100.f});
  Tensor q(x.shape(), DType::i8);
  quantize_forward_ref(p, x, q);
  // channel 0 (s .5, zp 0): .25/.5=.5 -> 0; -2; channel 1 (s .25, zp 2): .5 -> 0 + 2 = 2; 400 -> 127 (clamp)
  // n=1: ch0: -1.5 -> -2; 2 -> 2; ch1: -1.5 -> -2 + 2 = 0; -400 -> -127
  EXPECT_EQ(std::vector<double>({q.at(0), q.at(1), q.at(2), q.at(3), q.at(4), q.at(5), q.at(6), q.at(7)}),
            std::vector<double>({0, -2, 2, 127, -2, 2, 0, -127}));
  Tensor back(x.shape(), DType::f32);
  dequantize_forward_ref(p, q, back);
  EXPECT_EQ(back.at(1), -1.0);
  EXPECT_EQ(back.at(3), 0.25 * 125);
  p.scale = {0.f, 1.f};
  EXPECT_THROW(quantize_forward_ref(p, x, q), Error);
}

Requant float_rq(float scale, int32_t zp, RoundRule r) {
  Requant rq;
  rq.rule = RequantRule::float_multiply;
  rq.round = r;
  rq.zero_point = zp;
  rq.lo = 0;
  rq.hi = 255;
  rq.channels = {RequantChannel{{}, scale, 0.f}};
  return rq;
}

TEST(QuantConv, HandComputedUint8WithZeroPointsBiasAndPadding) {
  QConv2dParams p;
  p.g.c = 1, p.g.h = p.g.w = 3, p.g.k = 1, p.g.r = p.g.s = 2;
  p.x_dtype = p.y_dtype = DType::u8;
  p.x_zero_point = 3;
  p.has_bias = true;
  p.rq = float_rq(0.5f, 100, RoundRule::half_even);
  Tensor x = Tensor::from<uint8_t>({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor w = Tensor::from<int8_t>({1, 1, 2, 2}, {1, -1, 2, 0});
  Tensor b = Tensor::from<int32_t>({1}, {4});
  Tensor y(p.g.y_shape(), DType::u8);
  qconv2d_forward_ref(p, x, w, &b, y);
  // x - 3 = [-2 -1 0; 1 2 3; 4 5 6]; windows . [1 -1; 2 0] = 1, 3, 7, 9; + 4 = 5, 7, 11, 13;
  // * 0.5 = 2.5, 3.5, 5.5, 6.5 -> half even 2, 4, 6, 6; + 100
  EXPECT_EQ(std::vector<double>({y.at(0), y.at(1), y.at(2), y.at(3)}), std::vector<double>({102, 104, 106, 106}));
  // padding reads the zero point: top-left output of a 1-padded conv sees only x[0][0] under w[1][1] = 0
  p.g.pad_t = p.g.pad_l = p.g.pad_b = p.g.pad_r = 1;
  Tensor y2(p.g.y_shape(), DType::u8);
  qconv2d_forward_ref(p, x, w, &b, y2);
  EXPECT_EQ(y2.at(0), 102);  // (0 + 4) * 0.5 = 2 -> 102
  // wrong dtypes and a missing bias are refused by name
  Tensor xi = Tensor::from<int8_t>({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_THROW(qconv2d_forward_ref(p, xi, w, &b, y2), Error);
  EXPECT_THROW(qconv2d_forward_ref(p, x, w, nullptr, y2), Error);
}

// Channels [c0, c0 + c) of x (N,C,H,W), or rows [c0, c0 + c) of w (K,...).
template <typename T>
Tensor channels(const Tensor& x, int64_t axis, int64_t c0, int64_t c) {
  Shape s = x.shape();
  const int64_t outer = axis == 1 ? s[0] : 1, inner = x.numel() / (outer * s[static_cast<std::size_t>(axis)]);
  const int64_t total = s[static_cast<std::size_t>(axis)];
  s[static_cast<std::size_t>(axis)] = c;
  Tensor y(s, x.dtype());
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(x.data<T>() + (o * total + c0) * inner, c * inner, y.data<T>() + o * c * inner);
  return y;
}

// A grouped convolution is its groups convolved apart (the int8 graphs' depthwise convs, quant/graph_ptq.h): the reference kernel's grouped loops give,
// for each group, the bytes of a one-group call on that group's input channels and weight rows
// (which the one-group kernels are tested on: tests/ops/test_quant_kernels.cpp), under the exact
// dot and oneDNN's int16 channel pairs, depthwise and 2 and 3 groups, strided, padded, dilated.
TEST(QuantConv, GroupedIsItsGroupsConvolvedApart) {
  struct Case {
    int64_t c, k, groups, stride, pad, dil;
  };
  for (const Case& t : {Case{6, 4, 2, 1, 1, 1}, Case{5, 5, 5, 2, 1, 1}, Case{8, 8, 8, 1, 2, 2}, Case{6, 9, 3, 2, 0, 1}})
    for (DotRule dot : {DotRule::exact, DotRule::int16_pairs_channels}) {
      QConv2dParams p;
      p.g.n = 2, p.g.c = t.c, p.g.h = 7, p.g.w = 6, p.g.k = t.k, p.g.r = p.g.s = 3, p.g.groups = t.groups;
      p.g.stride_h = p.g.stride_w = t.stride;
      p.g.pad_t = p.g.pad_b = p.g.pad_l = p.g.pad_r = t.pad;
      p.g.dil_h = p.g.dil_w = t.dil;
      p.x_dtype = p.y_dtype = DType::u8;
      p.x_zero_point = 7;
      p.has_bias = true;
      p.dot = dot;
      p.rq.rule = RequantRule::float_multiply;
      p.rq.round = RoundRule::half_even;
      p.rq.zero_point = 120, p.rq.lo = 0, p.rq.hi = 255;
      p.rq.channels = {RequantChannel{{}, 0.013f, 0.f}};
      const Tensor x = random_int(p.g.x_shape(), DType::u8, 1, 0, 255);
      const Tensor w = random_int(p.g.w_shape(), DType::i8, 2, -127, 127);
      const Tensor b = random_int({t.k}, DType::i32, 3, -900, 900);
      Tensor y(p.g.y_shape(), DType::u8);
      qconv2d_forward_ref(p, x, w, &b, y);
      const int64_t cpg = t.c / t.groups, kpg = t.k / t.groups;
      for (int64_t gi = 0; gi < t.groups; ++gi) {
        QConv2dParams q = p;
        q.g.c = cpg, q.g.k = kpg, q.g.groups = 1;
        const Tensor xg = channels<uint8_t>(x, 1, gi * cpg, cpg);
        const Tensor wg = channels<int8_t>(w, 0, gi * kpg, kpg);
        const Tensor bg = channels<int32_t>(b, 0, gi * kpg, kpg);
        Tensor yg(q.g.y_shape(), DType::u8);
        qconv2d_forward_ref(q, xg, wg, &bg, yg);
        EXPECT_TRUE(bitwise_equal(yg, channels<uint8_t>(y, 1, gi * kpg, kpg)))
            << "groups " << t.groups << " group " << gi << " dot " << static_cast<int>(dot);
      }
    }
}

TEST(QuantDense, HandComputedInt8OutputWithFixedPointRequant) {
  QDenseParams p;
  p.n = 1, p.in = 3, p.out = 2;
  p.x_dtype = DType::u8;
  p.y_dtype = DType::i8;
  p.x_zero_point = 128;
  p.rq.rule = RequantRule::fixed_point_double_rounding;
  p.rq.zero_point = 0;
  p.rq.lo = -128, p.rq.hi = 127;
  p.rq.channels = {RequantChannel{{1 << 30, 0}, 0.f, 0.f}};  // 0.5
  Tensor x = Tensor::from<uint8_t>({1, 3}, {10, 0, 255});
  Tensor w = Tensor::from<int8_t>({2, 3}, {1, 1, 1, -128, 0, 127});
  Tensor y({1, 2}, DType::i8);
  qdense_forward_ref(p, x, w, nullptr, y);
  // x - 128 = [-118 -128 127]; row 0: -119 * 0.5 = -59.5 -> the high mul's tie goes up: -59
  // row 1: 15104 + 16129 = 31233 * 0.5 = 15616.5 -> 15617 -> clamped to 127
  EXPECT_EQ(y.at(0), -59);
  EXPECT_EQ(y.at(1), 127);
}

// DotRule::int16_pairs_channels: VPMADDUBSW's int16 saturation of each pair of stored-uint8 x int8
// products (x86 without VNNI, oneDNN). Scale 1/256 keeps accumulators up to 65280 inside uint8.
TEST(QuantDense, Int16PairsSaturateEachPairOfStoredProducts) {
  QDenseParams p;
  p.n = 1, p.in = 5, p.out = 5;
  p.x_dtype = p.y_dtype = DType::u8;
  p.rq = float_rq(1.0f / 256, 0, RoundRule::half_even);
  Tensor x = Tensor::from<uint8_t>({1, 5}, {255, 255, 255, 255, 255});
  Tensor w = Tensor::from<int8_t>({5, 5}, {127, 127, 0, 0, 0,      // pair (0,1): 64770 -> 32767
                                           127, 0, 127, 0, 0,      // 0 and 2 are in different pairs: 64770
                                           0, 0, 0, 127, 127,      // 3 pairs with 2, and 4 with nothing
                                           0, 0, 0, 0, 127,        // the odd last input pairs with nothing
                                           -128, -128, 127, 127, 0});  // -65280 -> -32768; +64770 -> 32767
  Tensor exact({1, 5}, DType::u8), pairs({1, 5}, DType::u8);
  qdense_forward_ref(p, x, w, nullptr, exact);
  p.dot = DotRule::int16_pairs_channels;
  qdense_forward_ref(p, x, w, nullptr, pairs);
  // exact: 64770/256 = 253.008 -> 253 (rows 0-2); 32385/256 = 126.504 -> 127; row 4: -510/256
  // = -1.99 -> -2 -> clamped 0
  EXPECT_EQ(std::vector<double>({exact.at(0), exact.at(1), exact.at(2), exact.at(3), exact.at(4)}),
            std::vector<double>({253, 253, 253, 127, 0}));
  // pairs: 32767/256 = 127.996 -> 128; row 1: 32385 + 32385 = 64770 -> 253; row 2: (2,3) 32385 +
  // (4) 32385 -> 253; row 3 -> 127; row 4: -32768 + 32767 = -1 -> -0.004 -> 0
  EXPECT_EQ(std::vector<double>({pairs.at(0), pairs.at(1), pairs.at(2), pairs.at(3), pairs.at(4)}),
            std::vector<double>({128, 253, 253, 127, 0}));
  // the zero point is subtracted after, from the stored values' sums: x_zp = 100 makes row 0
  // 32767 - 100 * 254 = 7367 -> 28.78 -> 29 (exact: 155 * 254 = 39370 -> 153.79 -> 154)
  p.x_zero_point = 100;
  qdense_forward_ref(p, x, w, nullptr, pairs);
  EXPECT_EQ(pairs.at(0), 29);
  p.dot = DotRule::exact;
  qdense_forward_ref(p, x, w, nullptr, exact);
  EXPECT_EQ(exact.at(0), 154);
  // int8 activations have no VPMADDUBSW form: refused by name
  p.dot = DotRule::int16_pairs_channels;
  p.x_dtype = DType::i8;
  EXPECT_THROW(p.validate(), Error);
}

TEST(QuantConv, Int16PairsAreChannelPairsOfOneTapAndPaddingAddsNothing) {
  QConv2dParams p;
  p.g.c = 3, p.g.h = 1, p.g.w = 2, p.g.k = 1, p.g.r = 1, p.g.s = 2;
  p.x_dtype = p.y_dtype = DType::u8;
  p.dot = DotRule::int16_pairs_channels;
  // every input 255; tap 0 weights (c0, c1, c2) = (127, 127, 127), tap 1 = (0, 0, 127)
  Tensor x = Tensor::from<uint8_t>({1, 3, 1, 2}, {255, 255, 255, 255, 255, 255});
  Tensor w = Tensor::from<int8_t>({1, 3, 1, 2}, {127, 0, 127, 0, 127, 127});
  Tensor y(p.g.y_shape(), DType::u8);
  // tap 0: (c0, c1) 64770 -> 32767, c2 alone 32385; tap 1: c2 alone 32385 (taps never share a pair)
  p.rq = float_rq(1.0f / 1024, 0, RoundRule::half_even);
  qconv2d_forward_ref(p, x, w, nullptr, y);
  EXPECT_EQ(y.at(0), 95);  // 97537 / 1024 = 95.25 (exact: 129540 / 1024 = 126.504 -> 127)
  p.dot = DotRule::exact;
  qconv2d_forward_ref(p, x, w, nullptr, y);
  EXPECT_EQ(y.at(0), 127);
  // padding: with one column of padding on the left, output 0 sees tap 1 only at column 0 (32385
  // -> 31.6 -> 32) and output 1 the two taps as above; the padded tap adds nothing in either rule
  p.dot = DotRule::int16_pairs_channels;
  p.g.pad_l = 1;
  Tensor y2(p.g.y_shape(), DType::u8);
  qconv2d_forward_ref(p, x, w, nullptr, y2);
  EXPECT_EQ(y2.at(0), 32);
  EXPECT_EQ(y2.at(1), 95);
}

// DotRule::int16_pairs_hwc (ONNX Runtime's MLAS): adjacent terms of the (kh, kw, c) im2col row, so a
// pair spans two taps when C is odd; a padding tap enters as the stored zero point; int8 activations
// run as uint8 + 128.
TEST(QuantConv, Int16PairsHwcSpanTapsReadTheZeroPointAtPaddingAndShiftInt8) {
  QConv2dParams p;
  p.g.c = 1, p.g.h = 1, p.g.w = 2, p.g.k = 1, p.g.r = 1, p.g.s = 2;
  p.x_dtype = p.y_dtype = DType::u8;
  p.rq = float_rq(1.0f / 256, 0, RoundRule::half_even);
  Tensor x = Tensor::from<uint8_t>({1, 1, 1, 2}, {255, 255});
  Tensor w = Tensor::from<int8_t>({1, 1, 1, 2}, {127, 127});
  Tensor y(p.g.y_shape(), DType::u8);
  auto run = [&](DotRule d) {
    p.dot = d;
    qconv2d_forward_ref(p, x, w, nullptr, y);
    return y.at(0);
  };
  // one channel: taps 0 and 1 are one pair under hwc (64770 -> 32767 -> 128), two lone terms under
  // channel pairs (64770 -> 253), as in exact
  EXPECT_EQ(run(DotRule::int16_pairs_hwc), 128);
  EXPECT_EQ(run(DotRule::int16_pairs_channels), 253);
  EXPECT_EQ(run(DotRule::exact), 253);
  // padding on the left, x_zp = 200, w = (-128, -128): output 0 pairs the padding tap (stored 200)
  // with x[0] = 255: 200*-128 + 255*-128 = -58240 -> -32768, then - 200 * (-256) = +51200 -> 18432
  // -> 72. exact: (255 - 200) * -128 = -7040 -> -27.5 -> clamped 0; channel pairs skip the padding
  // tap: 255*-128 = -32640 lone, + 200*128 = -7040 -> 0
  p.g.pad_l = 1;
  p.x_zero_point = 200;
  w = Tensor::from<int8_t>({1, 1, 1, 2}, {-128, -128});
  y = Tensor(p.g.y_shape(), DType::u8);
  EXPECT_EQ(run(DotRule::int16_pairs_hwc), 72);
  EXPECT_EQ(run(DotRule::exact), 0);
  EXPECT_EQ(run(DotRule::int16_pairs_channels), 0);
  // int8 activations: stored 127 runs as 255, zero point 0 as 128: 64770 -> 32767 - 128 * 254 = 255
  // -> 0.996 -> 1 (exact: 127 * 254 = 32258 -> 126.0 -> 126); channel pairs refuse int8
  p.g.pad_l = 0;
  p.x_zero_point = 0;
  p.x_dtype = p.y_dtype = DType::i8;
  p.rq.lo = -128, p.rq.hi = 127;
  x = Tensor::from<int8_t>({1, 1, 1, 2}, {127, 127});
  w = Tensor::from<int8_t>({1, 1, 1, 2}, {127, 127});
  y = Tensor(p.g.y_shape(), DType::i8);
  EXPECT_EQ(run(DotRule::int16_pairs_hwc), 1);
  EXPECT_EQ(run(DotRule::exact), 126);
  EXPECT_THROW(run(DotRule::int16_pairs_channels), Error);
}

TEST(QuantMaxPool, IntegerMaxAndPaddingNeverWins) {
  QPool2dParams p;
  p.g.c = 1, p.g.h = p.g.w = 3, p.g.kh = p.g.kw = 2, p.g.stride_h = p.g.stride_w = 2;
  p.g.pad_b = p.g.pad_r = 1;
  p.dtype = DType::i8;
  Tensor x = Tensor::from<int8_t>({1, 1, 3, 3}, {-128, -5, -7, -100, -3, -9, -120, -128, -127});
  Tensor y(p.g.y_shape(), DType::i8);
  qmaxpool2d_forward_ref(p, x, y);
  EXPECT_EQ(std::vector<double>({y.at(0), y.at(1), y.at(2), y.at(3)}), std::vector<double>({-3, -7, -120, -127}));
}

TEST(QuantConv, AccumulatorBoundIsCheckedAtValidation) {
  QConv2dParams p;
  p.g.c = 70000, p.g.h = p.g.w = 1, p.g.k = 1, p.g.r = p.g.s = 1;
  p.rq = float_rq(1.f, 0, RoundRule::half_even);
  EXPECT_THROW(p.validate(), Error);  // 70000 * 255 * 128 > 2^31
  p.g.c = 60000;
  EXPECT_NO_THROW(p.validate());
}

// int8 add params under `rule`, the full int8 clamp; and the reference kernel on one element.
QAddParams int8_add(QAddRule rule, float sa, int32_t za, float sb, int32_t zb, float sy, int32_t zy) {
  QAddParams p;
  p.rule = rule;
  p.dtype = DType::i8;
  p.lo = -128, p.hi = 127;
  p.a_scale = sa, p.b_scale = sb, p.y_scale = sy;
  p.a_zero_point = za, p.b_zero_point = zb, p.y_zero_point = zy;
  return p;
}
int8_t add_one(const QAddParams& p, int8_t a, int8_t b) {
  Tensor ta = Tensor::from<int8_t>({1}, {a}), tb = Tensor::from<int8_t>({1}, {b}), ty({1}, DType::i8);
  qadd_forward_ref(p, ta, tb, ty);
  return ty.data<int8_t>()[0];
}

// ONNX Runtime's QLinearAdd (QAddRule::float_ratio_fma), hand-computed: one int8 element per case.
int8_t ort_add(float sa, int32_t za, int8_t a, float sb, int32_t zb, int8_t b, float sy, int32_t zy, int32_t offset = 0) {
  QAddParams p = int8_add(QAddRule::float_ratio_fma, sa, za, sb, zb, sy, zy);
  p.offset = offset;
  return add_one(p, a, b);
}

TEST(QuantAdd, OrtRatioFmaTiesHalfEvenBothSignsAndSaturation) {
  // ratios 0.5 and 0.25 (s_y = 1), zero points 0: exact arithmetic, v = 0.5 a + 0.25 b
  EXPECT_EQ(ort_add(0.5f, 0, 1, 0.25f, 0, 0, 1.f, 0), 0);     // 0.5 -> 0
  EXPECT_EQ(ort_add(0.5f, 0, 3, 0.25f, 0, 0, 1.f, 0), 2);     // 1.5 -> 2
  EXPECT_EQ(ort_add(0.5f, 0, -1, 0.25f, 0, 0, 1.f, 0), 0);    // -0.5 -> 0
  EXPECT_EQ(ort_add(0.5f, 0, -3, 0.25f, 0, 0, 1.f, 0), -2);   // -1.5 -> -2
  EXPECT_EQ(ort_add(0.5f, 0, 2, 0.25f, 0, 2, 1.f, 0), 2);     // 1 + 0.5 = 1.5 -> 2
  EXPECT_EQ(ort_add(0.5f, 0, 0, 0.25f, 0, 10, 1.f, 0), 2);    // 2.5 -> 2
  // zero points enter through the fixed part F = zy - fma(r_a, za, r_b*zb) = 5 - (0.5*3 + 0.25*(-2)) = 4:
  // a = 4, b = 0: 0.25*0 + 4 = 4, then 0.5*4 + 4 = 6
  EXPECT_EQ(ort_add(0.5f, 3, 4, 0.25f, -2, 0, 1.f, 5), 6);
  // saturation: 2*127 + 2*127 = 508 -> 127; 2*(-128)*2 = -512 -> -128
  EXPECT_EQ(ort_add(1.f, 0, 127, 1.f, 0, 127, 0.5f, 0), 127);
  EXPECT_EQ(ort_add(1.f, 0, -128, 1.f, 0, -128, 0.5f, 0), -128);
  // |v| >= 2^31: cvtps2dq gives INT32_MIN, which the packs saturate LOW: 127 * 2^30 -> -128, not 127
  EXPECT_EQ(ort_add(1.f, 0, 127, 1.f, 0, 0, 0x1p-30f, 0), -128);
}

// TFLite's int8 ADD (QAddRule::tflite_fixed_point): the worked examples of
// docs/research/tflite_int8_add_mean_pool.md 2.7 (every integer there computed by hand from
// TFLite's reference formulas; no TFLite binary runs here), one element per case.
int8_t tflite_add(float sa, int32_t za, int8_t a, float sb, int32_t zb, int8_t b, float sy, int32_t zy,
                  int32_t lo = -128) {
  QAddParams p = int8_add(QAddRule::tflite_fixed_point, sa, za, sb, zb, sy, zy);
  p.lo = lo;
  return add_one(p, a, b);
}

TEST(QuantAdd, TfliteWorkedExamples) {
  {  // the multipliers of A1: (2^30, 0), (2^30, -1), (2^30, -19)
    QAddParams p = int8_add(QAddRule::tflite_fixed_point, 0.5f, 0, 0.25f, 0, 1.f, 0);
    p.resolve();
    EXPECT_EQ(p.a_fixed.m0, 1 << 30);
    EXPECT_EQ(p.a_fixed.shift, 0);
    EXPECT_EQ(p.b_fixed.m0, 1 << 30);
    EXPECT_EQ(p.b_fixed.shift, -1);
    EXPECT_EQ(p.y_fixed.m0, 1 << 30);
    EXPECT_EQ(p.y_fixed.shift, -19);
  }
  // A1: s = 0.5, 0.25 -> 1, zero points 0: round half away of (2a + b)/4
  EXPECT_EQ(tflite_add(0.5f, 0, 3, 0.25f, 0, 2, 1.f, 0), 2);     // (a)
  EXPECT_EQ(tflite_add(0.5f, 0, 0, 0.25f, 0, 2, 1.f, 0), 1);     // (b) +0.5 -> 1
  EXPECT_EQ(tflite_add(0.5f, 0, 0, 0.25f, 0, -2, 1.f, 0), -1);   // (c) -0.5 -> -1 (single rounding: 0)
  EXPECT_EQ(tflite_add(0.5f, 0, -1, 0.25f, 0, 0, 1.f, 0), -1);   // (d)
  EXPECT_EQ(tflite_add(0.5f, 0, -3, 0.25f, 0, 1, 1.f, 0), -1);   // (e) -1.25 -> -1
  // A2: zero points and a fused RELU (clamp at zp_out = -2)
  EXPECT_EQ(tflite_add(0.5f, -1, -3, 0.25f, 3, 1, 1.f, -2, -2), -2);
  EXPECT_EQ(tflite_add(0.5f, -1, -3, 0.25f, 3, 1, 1.f, -2), -4);
  // A3: float32 scales as a converter stores them
  EXPECT_EQ(tflite_add(0.0235f, -7, 100, 0.0172f, 12, -50, 0.0311f, -3), 44);    // exact 43.56
  EXPECT_EQ(tflite_add(0.0235f, -7, -128, 0.0172f, 12, 127, 0.0311f, -3), -31);  // exact -30.83
  // A4: saturation (381 -> 127)
  EXPECT_EQ(tflite_add(0.5f, 0, 127, 0.25f, 0, 127, 0.25f, 0), 127);
  // A5's reference result (TFLite's NEON path gives -101 there)
  EXPECT_EQ(tflite_add(0.1037505716085434f, 57, 122, 0.04183778539299965f, -53, -122, 0.2857022285461426f, -115), -102);
}

// Against the real value: the double-rounding pipeline stays within one step of round(real) over
// random scales, zero points and values (each of its three roundings is at most half a step of its
// own quantity; the scaled input terms carry 2^20 of headroom, so their roundings cost < 2^-19 step).
TEST(QuantAdd, TfliteWithinOneStepOfTheRealSum) {
  Rng rng(RngEngine::mt19937_u24, 77);
  int64_t exact = 0, off_by_one = 0;
  for (int i = 0; i < 20000; ++i) {
    const float sa = 0.001f + rng.uniform_f32() * 0.1f, sb = 0.001f + rng.uniform_f32() * 0.1f;
    const float sy = (sa + sb) * (0.25f + rng.uniform_f32());
    const int32_t za = static_cast<int32_t>(rng.uniform_f32() * 255) - 128, zb = static_cast<int32_t>(rng.uniform_f32() * 255) - 128;
    const int32_t zy = static_cast<int32_t>(rng.uniform_f32() * 255) - 128;
    const int8_t a = static_cast<int8_t>(static_cast<int32_t>(rng.uniform_f32() * 255) - 128);
    const int8_t b = static_cast<int8_t>(static_cast<int32_t>(rng.uniform_f32() * 255) - 128);
    const double real = (double(sa) * (a - za) + double(sb) * (b - zb)) / double(sy) + zy;
    const double want = std::min(127.0, std::max(-128.0, std::round(real)));
    const int got = tflite_add(sa, za, a, sb, zb, b, sy, zy);
    ASSERT_LE(std::fabs(got - want), 1.0) << i;
    (got == want ? exact : off_by_one) += 1;
  }
  std::cout << "[ tally    ] tflite add: " << exact << " of 20000 equal round(real), " << off_by_one << " one step off\n";
  EXPECT_GT(exact, 19000);
}

TEST(QuantAdd, OrtRatioFmaRoundsOnceWhereOrtsBinaryFuses) {
  // Per element, fmaf(a, r_a, t): r_a = 1 + 2^-23, a = 5, t = F = -(4.5 + 2^-21) (from s_b = 4.5 + 2^-21,
  // zb = 1, b = 0: F = 0 - fma(r_a, 0, r_b * 1)). Exact 5 + 5*2^-23 - 4.5 - 4*2^-23 = 0.5 + 2^-23 -> 1;
  // a separate multiply would round 5 + 5*2^-23 to 5 + 2^-21 first: exactly 0.5 -> 0.
  EXPECT_EQ(ort_add(1.f + 0x1p-23f, 0, 5, 4.5f + 0x1p-21f, 1, 0, 1.f, 0), 1);
  // The fixed part: r_a*za + r_b*zb contracted, fma(r_a, za, r_b*zb) with r_a = 1 + 2^-23, za = 5,
  // r_b = 4.5 + 2^-21, zb = -1: -(4.5 + 2^-21) + 5 + 5*2^-23 = 0.5 + 2^-23 (one rounding, exact),
  // F = -(0.5 + 2^-23); a = b = 0: v = F -> -1. Uncontracted, 5 + 2^-21 - 4.5 - 2^-21 = 0.5: F = -0.5 -> 0.
  EXPECT_EQ(ort_add(1.f + 0x1p-23f, 5, 0, 4.5f + 0x1p-21f, -1, 0, 1.f, 0), -1);
}

TEST(QuantAdd, OrtRatioFmaOffsetShiftsTheRoundings) {
  // r_a = 0.5 + 3*2^-24, r_b = 0.25, zero points 0, a = 1, b = -16: real value -3.4999998 (exact: -3).
  // offset 0: F = 0, t = fma(-16, 0.25, 0) = -4, fma(1, r_a, -4) = -3.5 + 3*2^-24 rounds (ulp 2^-22
  // there) to -3.5 + 2^-22 -> -3.
  EXPECT_EQ(ort_add(0.5f + 0x1p-24f * 3, 0, 1, 0.25f, 0, -16, 1.f, 0), -3);
  // offset 128 (ORT's uint8 run of an int8 graph): F = 128 - fma(r_a, 128, 0.25*128) = 128 - (96 + 3*2^-17)
  // = 32 - 3*2^-17; t = fma(112, 0.25, F) = 60 - 3*2^-17; fma(129, r_a, t) = 124.5 + 3*2^-24, which rounds
  // (ulp 2^-17 at 124) to 124.5 -> 124, minus 128: -4.
  EXPECT_EQ(ort_add(0.5f + 0x1p-24f * 3, 0, 1, 0.25f, 0, -16, 1.f, 0, 128), -4);
  // an offset is only ORT's 128 on int8
  QAddParams p;
  p.rule = QAddRule::float_ratio_fma;
  p.dtype = DType::i8;
  p.lo = -128, p.hi = 127;
  p.offset = 64;
  EXPECT_THROW(p.resolve(), Error);
}

TEST(QuantGlobalAvgPool, OrtScaleRatioOwnZeroPointTiesBothSigns) {
  // int8, 2x2 planes (N = 4), s_in = s_out = 1: M = 1/(1*4) = 0.25; zp_in = 1, zp_out = -3.
  QGlobalAvgPoolParams p;
  p.n = 1, p.c = 5, p.h = p.w = 2;
  p.dtype = DType::i8;
  p.rule = QAvgPoolRule::scale_ratio;
  p.zero_point = 1, p.out_zero_point = -3;
  Tensor x = Tensor::from<int8_t>({1, 5, 2, 2}, {1, 1, 2, 2,  2, 2, 3, 3,  0, 0, 1, 1,  -1, -1, 0, 0,  3, 3, 4, 4});
  Tensor y({1, 5}, DType::i8);
  qglobal_avg_pool_forward_ref(p, x, y);
  // sums 6, 10, 2, -2, 14; acc = sum - 4: 2, 6, -2, -6, 10; * 0.25 = 0.5, 1.5, -0.5, -1.5, 2.5
  // -> half even 0, 2, 0, -2, 2; + (-3)
  EXPECT_EQ(std::vector<double>({y.at(0), y.at(1), y.at(2), y.at(3), y.at(4)}),
            std::vector<double>({-3, -1, -3, -5, -1}));
  // the output scale: s_out = 1/64 makes M = 1/((1/64)*4) = 16: acc 10 -> 160 - 3 = 157, saturates at 127;
  // acc -6 -> -96 - 3 = -99; with zp_out = -100, -96 - 100 = -196 saturates at -128
  p.out_scale = 1.f / 64;
  qglobal_avg_pool_forward_ref(p, x, y);
  EXPECT_EQ(y.at(4), 127);
  EXPECT_EQ(y.at(3), -99);
  p.out_zero_point = -100;
  qglobal_avg_pool_forward_ref(p, x, y);
  EXPECT_EQ(y.at(3), -128);
  EXPECT_EQ(y.at(4), 60);  // 160 - 100
}

TEST(QuantGlobalAvgPool, OrtMultiplierIsProductFirstAndRangeChecked) {
  QGlobalAvgPoolParams p;
  p.h = p.w = 7;
  p.rule = QAvgPoolRule::scale_ratio;
  p.in_scale = 0.01f, p.out_scale = 0.013f;
  // MLAS: s_in / (s_out * float(N)); the other order differs by an ulp for these scales
  EXPECT_EQ(p.resolve().m, 0.01f / (0.013f * 49.f));
  EXPECT_NE(p.resolve().m, 0.01f / 49.f / 0.013f);
  p.out_scale = 0.01f / (49.f * 300.f);  // M = 300 >= 256: MLAS refuses, so does this
  EXPECT_THROW((void)p.resolve(), Error);
  p.rule = QAvgPoolRule::shared_qparams;  // PyTorch: 1.0f/N whatever the scales
  EXPECT_EQ(p.resolve().m, 1.0f / 49.f);
}

// TFLite's MEAN over H,W (int8): the worked examples M1-M5 of docs/research/tflite_int8_add_mean_pool.md
// section 3.6, every integer of which the research derived by hand from the TFLite sources (P1:
// TF >= 2.13's QuantizedMeanOrSum, P4: TF <= 2.12's reference integer Mean), independent of this code.
struct MeanCase {
  const char* name;
  float s_in, s_out;
  int32_t zp_in, zp_out;
  std::vector<int> q;  // one channel's values (N = q.size())
  int p1, p4;          // the expected outputs under tflite_integer_mean and tflite_rounded_division
};

Tensor one_plane(const std::vector<int>& q, int64_t h, int64_t w) {
  Tensor x({1, 1, h, w}, DType::i8);
  for (std::size_t i = 0; i < q.size(); ++i) x.data<int8_t>()[i] = static_cast<int8_t>(q[i]);
  return x;
}

// 49 int8 values summing to `sum` (the 7x7 plane of M5: only the sum enters MEAN)
std::vector<int> values_summing_to(int sum) {
  std::vector<int> q(49, 0);
  for (int i = 0; sum != 0; i = (i + 1) % 49) {
    const int step = sum > 0 ? 1 : -1;
    q[static_cast<std::size_t>(i)] += step, sum -= step;
  }
  return q;
}

TEST(QuantGlobalAvgPool, TfliteMeanWorkedExamples) {
  const MeanCase cases[] = {
      {"M1 negative tie", 1.0f, 0.5f, 0, 0, {-1, -2, -3, 1}, -2, -3},
      {"M1 mirrored", 1.0f, 0.5f, 0, 0, {1, 2, 3, -1}, 3, 3},
      {"M2 zp_in * ratio not an integer", 0.5f, 1.0f, -3, 4, {-3, -3, -3, -3}, 4, 4},
      {"M3 same scale and zero point", 0.1f, 0.1f, -10, -10, {-11, -11, -11, -10}, -11, -11},
      {"M4 P1's double rounding", 0.1f, 0.1f, -10, -10, {-10, -10, -10, -9}, -9, -10},
      {"M5 7x7, sum -54", 0.0235f, 0.0112f, -20, -50, values_summing_to(-54), -10, -10},
      {"M5 7x7, sum -35 (P1's double rounding)", 0.0235f, 0.0112f, -20, -50, values_summing_to(-35), -9, -10},
  };
  for (const MeanCase& c : cases) {
    const int64_t side = c.q.size() == 49 ? 7 : 2;
    const Tensor x = one_plane(c.q, side, side);
    for (QAvgPoolRule rule : {QAvgPoolRule::tflite_integer_mean, QAvgPoolRule::tflite_rounded_division}) {
      QGlobalAvgPoolParams p;
      p.n = 1, p.c = 1, p.h = p.w = side;
      p.dtype = DType::i8, p.rule = rule;
      p.zero_point = c.zp_in, p.in_scale = c.s_in, p.out_scale = c.s_out, p.out_zero_point = c.zp_out;
      Tensor y({1, 1}, DType::i8);
      qglobal_avg_pool_forward_ref(p, x, y);
      const int want = rule == QAvgPoolRule::tflite_integer_mean ? c.p1 : c.p4;
      EXPECT_EQ(y.at(0), want) << c.name << " " << qavg_pool_rule_name(rule);
    }
  }
  // M5's multipliers: Prepare's ratio 2.0982142886840642 -> (1126470219, 2); P1 folds N = 49 in
  // with k = 5: M' = 1126470219 * 32 / 49 = 735654020, shift' = -3
  QGlobalAvgPoolParams p;
  p.h = p.w = 7, p.in_scale = 0.0235f, p.out_scale = 0.0112f;
  p.rule = QAvgPoolRule::tflite_rounded_division;
  EXPECT_EQ(p.resolve().fixed.m0, 1126470219);
  EXPECT_EQ(p.resolve().fixed.shift, 2);
  p.rule = QAvgPoolRule::tflite_integer_mean;
  EXPECT_EQ(p.resolve().fixed.m0, 735654020);
  EXPECT_EQ(p.resolve().fixed.shift, -3);
}

// Every sum a 2x2 and a 7x7 int8 plane can have, both TFLite rules: never more than one step from
// the real mean (rounded), and saturation at the type's ends.
TEST(QuantGlobalAvgPool, TfliteMeanWithinOneStepOfTheRealMean) {
  for (int64_t side : {2, 7})
    for (QAvgPoolRule rule : {QAvgPoolRule::tflite_integer_mean, QAvgPoolRule::tflite_rounded_division}) {
      QGlobalAvgPoolParams p;
      p.n = 1, p.c = 1, p.h = p.w = side;
      p.dtype = DType::i8, p.rule = rule;
      p.zero_point = -20, p.in_scale = 0.0235f, p.out_scale = 0.0112f, p.out_zero_point = -50;
      const int64_t n = side * side;
      int64_t far = 0, checked = 0;
      for (int64_t sum = -128 * n; sum <= 127 * n; sum += (side == 7 ? 7 : 1)) {
        std::vector<int> q(static_cast<std::size_t>(n), 0);
        int64_t left = sum;
        for (std::size_t i = 0; i < q.size(); ++i) {
          const int64_t v = std::max<int64_t>(-128, std::min<int64_t>(127, left));
          q[i] = static_cast<int>(v), left -= v;
        }
        Tensor y({1, 1}, DType::i8);
        qglobal_avg_pool_forward_ref(p, one_plane(q, side, side), y);
        const double real = (static_cast<double>(sum) / n - p.zero_point) * p.in_scale / p.out_scale + p.out_zero_point;
        const double clamped = std::max(-128.0, std::min(127.0, real));
        far += std::abs(y.at(0) - clamped) > 1.0;
        ++checked;
      }
      EXPECT_EQ(far, 0) << qavg_pool_rule_name(rule) << " " << side << "x" << side << ", " << checked << " sums";
    }
}

}  // namespace
}  // namespace driftlab
