// The fast int8 kernels (kernels/cpu/fast/quant_fast.cpp, registry slot `fast`) against the reference
// (kernels/cpu/ref/quant_ref.cpp), byte for byte: every integer output must be the same, so every
// comparison here is bitwise_equal (no tolerance). Awkward shapes (batch 1 and odd batches, odd
// channel counts, stride 2, asymmetric padding, dilation, 1x1 and 5x5 kernels, more output
// channels than one register tile), int8 and uint8 activations with nonzero zero points,
// per-tensor and per-channel requantization under every RequantRule and both float roundings,
// with and without bias, with and without a fused ReLU clamp; then whole LeNet-5 models quantized
// under every scheme, fast vs reference logits.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>

#include "kernels/cpu/registry.h"
#include "models/models.h"
#include "quant/ptq.h"
#include "tests/cases/quant_cases.h"
#include "tests/oracles/oracle_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

const KernelRegistry& registry() {
  static const KernelRegistry reg = make_cpu_registry();
  return reg;
}

Conv2dParams geometry_of(const QConvCase& cs) {
  Conv2dParams g;
  g.n = cs.n, g.c = cs.c, g.h = cs.h, g.w = cs.w, g.k = cs.k, g.r = cs.r, g.s = cs.s;
  g.stride_h = cs.stride_h, g.stride_w = cs.stride_w, g.dil_h = g.dil_w = cs.dil;
  g.pad_t = cs.pad_t, g.pad_b = cs.pad_b, g.pad_l = cs.pad_l, g.pad_r = cs.pad_r;
  return g;
}

// Every (dtype, rule, rounding, granularity, bias, clamp) of one geometry: fast == reference.
void check_qconv_case(const QConvCase& cs) {
  const QConv2dKernel& ref = registry().qconv2d.reference();
  const QConv2dKernel& fast = registry().qconv2d.at(KernelBackend::fast);
  ASSERT_NE(fast.name, nullptr);
  const RequantRule rules[] = {RequantRule::fixed_point_double_rounding, RequantRule::fixed_point_single_rounding,
                               RequantRule::float_multiply, RequantRule::float_multiply_add_zp};
  uint64_t seed = 100;
  for (DType xt : {DType::u8, DType::i8})
    for (DType yt : {DType::u8, DType::i8})
      for (RequantRule rule : rules)
        for (RoundRule round : {RoundRule::half_even, RoundRule::half_away})
          for (bool per_channel : {false, true})
            for (bool has_bias : {false, true})
              for (bool relu : {false, true}) {
                const bool fixed = rule == RequantRule::fixed_point_double_rounding ||
                                   rule == RequantRule::fixed_point_single_rounding;
                if (fixed && round == RoundRule::half_away) continue;  // the fixed rules ignore `round`
                ++seed;
                QConv2dParams p;
                p.g = geometry_of(cs);
                const Conv2dParams& g = p.g;
                p.x_dtype = xt, p.y_dtype = yt;
                p.x_zero_point = xt == DType::i8 ? (seed % 2 ? -5 : 100) : (seed % 2 ? 3 : 250);
                p.has_bias = has_bias;
                const double acc_scale = std::sqrt(double(g.c * g.r * g.s)) * 128.0 * 90.0;
                p.rq = make_requant(rule, round, per_channel, g.k, acc_scale, yt, relu, seed);
                const Tensor x = random_int(g.x_shape(), xt, seed, type_min(xt), type_max(xt));
                const Tensor w = random_int(g.w_shape(), DType::i8, seed + 7, -128, 127);
                const Tensor b = random_int({g.k}, DType::i32, seed + 9, -40000, 40000);
                Tensor y_ref(g.y_shape(), yt), y_fast(g.y_shape(), yt);
                ASSERT_TRUE(fast.supports(p, xt)) << cs.name;
                ref.forward(p, x, w, has_bias ? &b : nullptr, y_ref);
                fast.forward(p, x, w, has_bias ? &b : nullptr, y_fast);
                ASSERT_TRUE(bitwise_equal(y_fast, y_ref))
                    << cs.name << " x " << dtype_name(xt) << " y " << dtype_name(yt) << " " << rule_str(rule, round)
                    << (per_channel ? " per-channel" : " per-tensor") << (has_bias ? " bias" : "")
                    << (relu ? " relu" : "");
              }
}

class QConvFast : public ::testing::TestWithParam<QConvCase> {};
TEST_P(QConvFast, EqualsReferenceByteForByte) { check_qconv_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Cases, QConvFast, ::testing::ValuesIn(cases_for(kQConvCases, kCpuTest)),
                         [](const ::testing::TestParamInfo<QConvCase>& i) { return std::string(i.param.name); });

TEST(QConvFast, SameBytesAtEveryThreadCountAndRefusesAPaddingItCannotWrite) {
  QConv2dParams p;
  p.g.n = 5, p.g.c = 6, p.g.h = p.g.w = 12, p.g.k = 16, p.g.r = p.g.s = 5, p.g.pad_t = p.g.pad_l = 1;
  p.x_dtype = p.y_dtype = DType::u8;
  p.x_zero_point = 17;
  p.rq = make_requant(RequantRule::float_multiply, RoundRule::half_even, true, 16, 1e5, DType::u8, true, 3);
  const Tensor x = random_int(p.g.x_shape(), DType::u8, 1, 0, 255);
  const Tensor w = random_int(p.g.w_shape(), DType::i8, 2, -128, 127);
  const QConv2dKernel& fast = registry().qconv2d.at(KernelBackend::fast);
  Tensor y1(p.g.y_shape(), DType::u8), y3(p.g.y_shape(), DType::u8), yr(p.g.y_shape(), DType::u8);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  fast.forward(p, x, w, nullptr, y1);
  omp_set_num_threads(3);
  fast.forward(p, x, w, nullptr, y3);
  omp_set_num_threads(saved);
  registry().qconv2d.reference().forward(p, x, w, nullptr, yr);
  EXPECT_TRUE(bitwise_equal(y1, yr));
  EXPECT_TRUE(bitwise_equal(y3, yr));
  // A zero point outside the byte range: with padding the fast kernel cannot write it (refused:
  // the registry falls back to the reference); without padding the correction term is exact.
  p.x_zero_point = 300;
  EXPECT_FALSE(fast.supports(p, DType::u8));
  p.g.pad_t = p.g.pad_l = 0;
  EXPECT_TRUE(fast.supports(p, DType::u8));
  Tensor a(p.g.y_shape(), DType::u8), r(p.g.y_shape(), DType::u8);
  fast.forward(p, x, w, nullptr, a);
  registry().qconv2d.reference().forward(p, x, w, nullptr, r);
  EXPECT_TRUE(bitwise_equal(a, r));
}

// A 1x1 convolution of one channel with weight 1 and multiplier 0.5: acc = x - x_zp, so every odd
// accumulator is a tie, and the rounding rule decides it (half_even vs half_away, gemmlowp's nudge).
TEST(QConvFast, TiesRoundAsTheReference) {
  const RequantRule rules[] = {RequantRule::fixed_point_double_rounding, RequantRule::fixed_point_single_rounding,
                               RequantRule::float_multiply, RequantRule::float_multiply_add_zp};
  for (DType xt : {DType::u8, DType::i8})
    for (RequantRule rule : rules)
      for (RoundRule round : {RoundRule::half_even, RoundRule::half_away}) {
        QConv2dParams p;
        p.g.n = 3, p.g.c = 1, p.g.h = 16, p.g.w = 16, p.g.k = 1, p.g.r = p.g.s = 1;
        p.x_dtype = p.y_dtype = xt;
        p.x_zero_point = xt == DType::i8 ? 1 : 128;
        p.rq = make_requant(rule, round, false, 1, 1.0, xt, false, 1);
        p.rq.channels[0].scale = 0.5f, p.rq.channels[0].bias = 0.f;
        p.rq.channels[0].fixed = quantize_multiplier(0.5, rule == RequantRule::fixed_point_single_rounding);
        Tensor x(p.g.x_shape(), xt);  // every value of the type, 768 = 3 x 256
        for (int64_t i = 0; i < x.numel(); ++i) {
          if (xt == DType::u8) x.data<uint8_t>()[i] = static_cast<uint8_t>(i);
          if (xt == DType::i8) x.data<int8_t>()[i] = static_cast<int8_t>(static_cast<uint8_t>(i));
        }
        Tensor w({1, 1, 1, 1}, DType::i8);
        w.data<int8_t>()[0] = 1;
        Tensor a(p.g.y_shape(), xt), r(p.g.y_shape(), xt);
        registry().qconv2d.at(KernelBackend::fast).forward(p, x, w, nullptr, a);
        registry().qconv2d.reference().forward(p, x, w, nullptr, r);
        ASSERT_TRUE(bitwise_equal(a, r)) << dtype_name(xt) << " " << rule_str(rule, round);
      }
}

// Depthwise convolutions (MobileNet's: groups = C = K) take the fast kernel's own loops: the
// reference's bytes under every dtype, rule, granularity, bias and clamp, exact sums and oneDNN's
// channel pairs; ONNX Runtime's pairs and other groupings stay with the reference.
TEST(QConvFast, DepthwiseEqualsReferenceByteForByte) {
  const QConv2dKernel& ref = registry().qconv2d.reference();
  const QConv2dKernel& fast = registry().qconv2d.at(KernelBackend::fast);
  const QConvCase cases[] = {{"dw3x3", 2, 8, 9, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1},
                             {"dw3x3_s2_asym", 3, 5, 11, 10, 5, 3, 3, 2, 2, 1, 1, 0, 2, 1},
                             {"dw5x5_dil2", 1, 6, 13, 12, 6, 5, 5, 1, 1, 2, 4, 4, 4, 4},
                             {"dw3x3_s2_one", 1, 32, 4, 4, 32, 3, 3, 2, 1, 1, 1, 1, 1, 1}};
  const RequantRule rules[] = {RequantRule::fixed_point_double_rounding, RequantRule::fixed_point_single_rounding,
                               RequantRule::float_multiply, RequantRule::float_multiply_add_zp};
  uint64_t seed = 900;
  int64_t compared = 0;
  for (const QConvCase& cs : cases)
    for (DType xt : {DType::u8, DType::i8})
      for (DotRule dot : {DotRule::exact, DotRule::int16_pairs_channels})
        for (RequantRule rule : rules)
          for (bool per_channel : {false, true})
            for (bool has_bias : {false, true})
              for (bool relu : {false, true}) {
                if (dot == DotRule::int16_pairs_channels && xt != DType::u8) continue;  // uint8 only
                ++seed;
                QConv2dParams p;
                p.g = geometry_of(cs);
                p.g.groups = cs.c;
                const Conv2dParams& g = p.g;
                p.x_dtype = p.y_dtype = xt;
                p.dot = dot;
                p.x_zero_point = xt == DType::i8 ? (seed % 2 ? -5 : 100) : (seed % 2 ? 3 : 250);
                p.has_bias = has_bias;
                p.rq = make_requant(rule, RoundRule::half_even, per_channel, g.k, 3.0 * 128.0 * 90.0, xt, relu, seed);
                const Tensor x = random_int(g.x_shape(), xt, seed, type_min(xt), type_max(xt));
                const Tensor w = random_int(g.w_shape(), DType::i8, seed + 7, -128, 127);
                const Tensor b = random_int({g.k}, DType::i32, seed + 9, -40000, 40000);
                Tensor y_ref(g.y_shape(), xt), y_fast(g.y_shape(), xt);
                ASSERT_TRUE(fast.supports(p, xt)) << cs.name;
                ref.forward(p, x, w, has_bias ? &b : nullptr, y_ref);
                fast.forward(p, x, w, has_bias ? &b : nullptr, y_fast);
                ASSERT_TRUE(bitwise_equal(y_fast, y_ref)) << cs.name << " x " << dtype_name(xt) << " rule "
                                                          << static_cast<int>(rule) << (per_channel ? " per-channel" : "")
                                                          << (has_bias ? " bias" : "") << (relu ? " relu" : "");
                compared += y_ref.numel();
              }
  std::cout << "depthwise: " << compared << " outputs compared, all equal\n";
  QConv2dParams p;
  p.g = geometry_of(cases[0]);
  p.g.groups = cases[0].c;
  p.x_dtype = p.y_dtype = DType::u8;
  p.dot = DotRule::int16_pairs_hwc;
  EXPECT_FALSE(fast.supports(p, DType::u8));  // ONNX Runtime's pairs span taps: the reference
  p.dot = DotRule::exact;
  p.g.groups = 2;  // two channels a group: not depthwise
  EXPECT_FALSE(fast.supports(p, DType::u8));
}

TEST(QDenseFast, EqualsReferenceByteForByte) {
  const QDenseKernel& ref = registry().qdense.reference();
  const QDenseKernel& fast = registry().qdense.at(KernelBackend::fast);
  ASSERT_NE(fast.name, nullptr);
  uint64_t seed = 500;
  for (const QDenseCase& s : cases_for(kQDenseCases, kCpuTest))
    for (DType xt : {DType::u8, DType::i8})
      for (RequantRule rule : {RequantRule::fixed_point_double_rounding, RequantRule::fixed_point_single_rounding,
                               RequantRule::float_multiply, RequantRule::float_multiply_add_zp})
        for (RoundRule round : {RoundRule::half_even, RoundRule::half_away})
          for (bool per_channel : {false, true})
            for (bool has_bias : {false, true})
              for (bool relu : {false, true}) {
                ++seed;
                const DType yt = seed % 3 ? xt : (xt == DType::u8 ? DType::i8 : DType::u8);
                QDenseParams p;
                p.n = s.n, p.in = s.in, p.out = s.out, p.x_dtype = xt, p.y_dtype = yt, p.has_bias = has_bias;
                p.x_zero_point = xt == DType::i8 ? (seed % 2 ? -128 : 31) : (seed % 2 ? 255 : 128);
                p.rq = make_requant(rule, round, per_channel, s.out, std::sqrt(double(s.in)) * 128 * 90, yt, relu, seed);
                const Tensor x = random_int({s.n, s.in}, xt, seed, type_min(xt), type_max(xt));
                const Tensor w = random_int({s.out, s.in}, DType::i8, seed + 3, -128, 127);
                const Tensor b = random_int({s.out}, DType::i32, seed + 5, -40000, 40000);
                Tensor y_ref({s.n, s.out}, yt), y_fast({s.n, s.out}, yt);
                ASSERT_TRUE(fast.supports(p, xt));
                ref.forward(p, x, w, has_bias ? &b : nullptr, y_ref);
                fast.forward(p, x, w, has_bias ? &b : nullptr, y_fast);
                ASSERT_TRUE(bitwise_equal(y_fast, y_ref))
                    << s.n << "x" << s.in << "->" << s.out << " x " << dtype_name(xt) << " y " << dtype_name(yt)
                    << " " << rule_str(rule, round) << (per_channel ? " per-channel" : "") << (has_bias ? " bias" : "")
                    << (relu ? " relu" : "");
              }
}

// The int16 pair rules (quant_u8s8_dot: what x86 without VNNI computes, ORT's MLAS and oneDNN):
// VPMADDUBSW on AVX2 (a portable loop elsewhere) over the quad layout (ORT's rule with an odd
// channel count: over an im2col panel in (kh, kw, c) order), byte for byte against the
// reference's Int16Pairs. Full-range bytes and weights, so that pairs saturate (checked: the rule
// moves outputs away from the exact sum; the tally says in how many cases). oneDNN's rule with
// padding and a zero point above 128 (a padding pair that could saturate, where oneDNN skips the
// tap) is left to the reference by supports(); at 128 and below it runs fast.
TEST(QConvFast, Int16PairRulesEqualTheReferenceWhereSupported) {
  const QConv2dKernel& ref = registry().qconv2d.reference();
  const QConv2dKernel& fast = registry().qconv2d.at(KernelBackend::fast);
  uint64_t seed = 1300;
  int64_t ran = 0, refused = 0, compared = 0, saturated = 0;
  for (const QConvCase& cs : cases_for(kQConvCases, kCpuTest))
    for (DotRule dot : {DotRule::int16_pairs_hwc, DotRule::int16_pairs_channels})
      for (DType xt : {DType::u8, DType::i8})
       for (int32_t zp_u8 : {200, 128}) {  // oneDNN's rule with padding: fast up to 128 (supports())
        if (dot == DotRule::int16_pairs_channels && xt == DType::i8) continue;  // oneDNN's rule: uint8 only
        if (zp_u8 == 128 && (xt == DType::i8 || dot == DotRule::int16_pairs_hwc)) continue;
        ++seed;
        QConv2dParams p;
        p.g = geometry_of(cs);
        const Conv2dParams& g = p.g;
        p.x_dtype = p.y_dtype = xt;
        p.x_zero_point = xt == DType::i8 ? -100 : zp_u8;
        p.has_bias = true;
        p.rq = make_requant(RequantRule::float_multiply, RoundRule::half_even, seed % 2 == 0, g.k,
                            std::sqrt(double(g.c * g.r * g.s)) * 128.0 * 90.0, xt, false, seed);
        const bool padded = g.pad_t || g.pad_b || g.pad_l || g.pad_r;
        // ORT's rule everywhere (an odd C through the im2col path); oneDNN's wherever the padding's
        // zero-point pairs cannot saturate (any C: an odd one pairs the last channel with weight 0)
        const bool expect = dot == DotRule::int16_pairs_hwc || !padded || p.x_zero_point <= 128;
        p.dot = dot;
        EXPECT_EQ(fast.supports(p, xt), expect) << cs.name << " C " << g.c << (padded ? " padded" : "");
        if (!expect) {
          ++refused;
          continue;
        }
        ++ran;
        const Tensor x = random_int(g.x_shape(), xt, seed, type_min(xt), type_max(xt));
        const Tensor w = random_int(g.w_shape(), DType::i8, seed + 7, -128, 127);
        const Tensor b = random_int({g.k}, DType::i32, seed + 9, -40000, 40000);
        Tensor y_ref(g.y_shape(), xt), y_fast(g.y_shape(), xt), y_exact(g.y_shape(), xt);
        ref.forward(p, x, w, &b, y_ref);
        fast.forward(p, x, w, &b, y_fast);
        ASSERT_TRUE(bitwise_equal(y_fast, y_ref)) << cs.name << " " << dtype_name(xt)
                                                  << (dot == DotRule::int16_pairs_hwc ? " hwc" : " channels");
        compared += y_ref.numel();
        QConv2dParams e = p;
        e.dot = DotRule::exact;
        ref.forward(e, x, w, &b, y_exact);
        saturated += !bitwise_equal(y_exact, y_ref);
      }
  std::cout << "[ tally    ] int16 pairs: " << ran << " convolutions fast, " << compared << " outputs compared, 0 differ; "
            << refused << " left to the reference; in " << saturated << " the saturation moved outputs\n";
  EXPECT_GT(ran, 0);
  EXPECT_GT(saturated, ran / 2);  // the data exercises the saturation, not only the exact sums
  EXPECT_GT(refused, 0);
}

TEST(QDenseFast, Int16PairRulesEqualTheReference) {
  const QDenseKernel& ref = registry().qdense.reference();
  const QDenseKernel& fast = registry().qdense.at(KernelBackend::fast);
  uint64_t seed = 1700;
  for (const QDenseCase& s : cases_for(kQDenseCases, kCpuTest))
    for (DotRule dot : {DotRule::int16_pairs_hwc, DotRule::int16_pairs_channels})
      for (DType xt : {DType::u8, DType::i8}) {
        if (dot == DotRule::int16_pairs_channels && xt == DType::i8) continue;
        ++seed;
        QDenseParams p;
        p.n = s.n, p.in = s.in, p.out = s.out, p.x_dtype = p.y_dtype = xt, p.has_bias = true, p.dot = dot;
        p.x_zero_point = xt == DType::i8 ? 20 : 7;
        p.rq = make_requant(RequantRule::float_multiply, RoundRule::half_even, seed % 2 == 0, s.out,
                            std::sqrt(double(s.in)) * 128 * 90, xt, seed % 3 == 0, seed);
        const Tensor x = random_int({s.n, s.in}, xt, seed, type_min(xt), type_max(xt));
        const Tensor w = random_int({s.out, s.in}, DType::i8, seed + 3, -128, 127);
        const Tensor b = random_int({s.out}, DType::i32, seed + 5, -40000, 40000);
        Tensor y_ref({s.n, s.out}, xt), y_fast({s.n, s.out}, xt);
        ASSERT_TRUE(fast.supports(p, xt));
        ref.forward(p, x, w, &b, y_ref);
        fast.forward(p, x, w, &b, y_fast);
        ASSERT_TRUE(bitwise_equal(y_fast, y_ref)) << s.n << "x" << s.in << "->" << s.out << " " << dtype_name(xt)
                                                  << (dot == DotRule::int16_pairs_hwc ? " hwc" : " channels");
      }
}

TEST(QMaxPool2dFast, EqualsReferenceByteForByte) {
  const QMaxPool2dKernel& fast = registry().qmaxpool2d.at(KernelBackend::fast);
  ASSERT_NE(fast.name, nullptr);
  uint64_t seed = 900;
  for (const QPoolCase& cs : cases_for(kQPoolCases, kCpuTest))
    for (DType t : {DType::u8, DType::i8}) {
      QPool2dParams p;
      p.dtype = t;
      p.g = cs.geometry();
      const Tensor x = random_int(p.g.x_shape(), t, ++seed, type_min(t), type_max(t));
      Tensor a(p.g.y_shape(), t), r(p.g.y_shape(), t);
      ASSERT_TRUE(fast.supports(p, t));
      fast.forward(p, x, a);
      registry().qmaxpool2d.reference().forward(p, x, r);
      ASSERT_TRUE(bitwise_equal(a, r)) << p.g.str() << " " << dtype_name(t);
    }
}

TEST(QuantizeFast, EqualsReferenceByteForByteAtTiesAndNonFinite) {
  // 10007 values (more than one 4096-element work item, not a multiple of it): uniform values,
  // exact ties of the scale (k + 0.5 steps), huge values that saturate, infinities, NaN.
  Tensor x = random_tensor({10007}, DType::f32, 77, -300.0, 300.0);
  float* xs = x.data<float>();
  const float scale = 0.25f;
  for (int64_t i = 0; i < 2000; ++i) xs[i] = (static_cast<float>(i - 1000) + 0.5f) * scale;
  xs[2000] = std::numeric_limits<float>::infinity();
  xs[2001] = -std::numeric_limits<float>::infinity();
  xs[2002] = std::nanf("");
  xs[2003] = 1e30f, xs[2004] = -1e30f, xs[2005] = -0.f;
  const QuantizeKernel& fast = registry().quantize.at(KernelBackend::fast);
  const QuantizeKernel& ref = registry().quantize.reference();
  ASSERT_NE(fast.name, nullptr);
  for (DType t : {DType::u8, DType::i8, DType::i32})
    for (ScaleOp op : {ScaleOp::divide, ScaleOp::mul_reciprocal})
      for (RoundRule round : {RoundRule::half_even, RoundRule::half_away})
        for (float s : {scale, 0.0372f}) {
          QuantizeParams p;
          p.dtype = t, p.op = op, p.round = round, p.scale = {s};
          p.zero_point = {t == DType::u8 ? 131 : t == DType::i8 ? -7 : 1000};
          p.qmin = t == DType::u8 ? 0 : t == DType::i8 ? -128 : -100000;
          p.qmax = t == DType::u8 ? 255 : t == DType::i8 ? 127 : 100000;
          Tensor a(x.shape(), t), r(x.shape(), t);
          ASSERT_TRUE(fast.supports(p, DType::f32));
          fast.quantize(p, x, a);
          ref.quantize(p, x, r);
          ASSERT_TRUE(bitwise_equal(a, r)) << dtype_name(t) << " " << scale_op_name(op) << " "
                                           << round_rule_name(round) << " s=" << s;
          Tensor da(x.shape(), DType::f32), dr(x.shape(), DType::f32);
          fast.dequantize(p, a, da);
          ref.dequantize(p, a, dr);
          ASSERT_TRUE(bitwise_equal(da, dr)) << dtype_name(t);
        }
  QuantizeParams per_channel;
  per_channel.scale = {1.f, 2.f}, per_channel.zero_point = {0, 0}, per_channel.axis = 0;
  EXPECT_FALSE(fast.supports(per_channel, DType::f32));  // weights only, once: the reference does them
}

// qadd under the three rules the fast kernel takes (ONNX Runtime's ratio rule with and without its
// offset of 128 on int8): channels-last (N,C,H,W) layouts whose numel % 64 leaves a tail of every
// size class (0, 41, 60, ...), a flat layout, more than one OpenMP chunk (4096) with a tail, batch
// 1 and odd batches, odd channel counts; int8 and uint8 with zero points at both ends; with and
// without the fused ReLU clamp; scales whose sums hit exact ties (0.5 and 0.25 of the output scale:
// round-half-even in the float rule, qnnpack's ties-away shift in the fixed one) and scales that
// saturate at both ends; 1 and 3 threads; the output aliasing an input.
TEST(QAddFast, EqualsReferenceByteForByteUnderEveryRuleItTakes) {
  struct Layout {
    int64_t n, c, h, w;  // n = 0: flat order, `c` elements
  };
  const Layout layouts[] = {{1, 3, 5, 7},  {3, 17, 4, 5}, {2, 16, 8, 8},   {5, 33, 3, 3},
                            {0, 1000, 0, 0}, {3, 7, 33, 31}, {1, 64, 8, 8}, {7, 1, 1, 1}};
  struct Scales {
    float a, b, y;
  };
  const Scales scales[] = {{0.5f, 0.25f, 1.f}, {0.0371f, 0.0523f, 0.0619f}, {0.11f, 0.013f, 0.02f},
                           {0.02f, 0.02f, 0.9f}};
  const QAddKernel& ref = registry().qadd.reference();
  const QAddKernel& fast = registry().qadd.at(KernelBackend::fast);
  ASSERT_NE(fast.name, nullptr);
  const int saved = omp_get_max_threads();
  uint64_t seed = 1200;
  for (const Layout& l : layouts)
    for (QAddRule rule : {QAddRule::fixed_point_shift, QAddRule::float_fma_tail64, QAddRule::float_ratio_fma})
      for (DType t : {DType::u8, DType::i8})
        for (const Scales& sc : scales)
          for (bool relu : {false, true}) {
            ++seed;
            QAddParams p;
            p.rule = rule, p.dtype = t;
            p.a_scale = sc.a, p.b_scale = sc.b, p.y_scale = sc.y;
            p.a_zero_point = t == DType::u8 ? (seed % 2 ? 0 : 255) : (seed % 2 ? -128 : 127);
            p.b_zero_point = t == DType::u8 ? 131 : -9;
            p.y_zero_point = t == DType::u8 ? (seed % 3 ? 64 : 200) : (seed % 3 ? 5 : -100);
            p.lo = relu ? std::max(type_min(t), p.y_zero_point) : type_min(t);
            p.hi = type_max(t);
            p.n = l.n, p.c = l.n ? l.c : 0, p.h = l.h, p.w = l.w;
            // ONNX Runtime's uint8 run of an int8 graph shifts every value by 128 (QAddParams::offset)
            p.offset = rule == QAddRule::float_ratio_fma && t == DType::i8 && seed % 4 < 2 ? 128 : 0;
            const Shape shape = l.n ? Shape{l.n, l.c, l.h, l.w} : Shape{l.c};
            const Tensor a = random_int(shape, t, seed, type_min(t), type_max(t));
            const Tensor b = random_int(shape, t, seed + 1, type_min(t), type_max(t));
            Tensor r(shape, t), y1(shape, t), y3(shape, t);
            ASSERT_TRUE(fast.supports(p, t));
            ref.forward(p, a, b, r);
            omp_set_num_threads(1);
            fast.forward(p, a, b, y1);
            omp_set_num_threads(3);
            fast.forward(p, a, b, y3);
            omp_set_num_threads(saved);
            const std::string what = std::string(qadd_rule_name(rule)) + " " + dtype_name(t) + " " +
                                     shape_str(shape) + " scales " + std::to_string(sc.a) + "," +
                                     std::to_string(sc.b) + "->" + std::to_string(sc.y) + (relu ? " relu" : "");
            ASSERT_TRUE(bitwise_equal(y1, r)) << what;
            ASSERT_TRUE(bitwise_equal(y3, r)) << what << " (3 threads)";
            Tensor in_place = a.clone();  // y aliasing a: the tail is read before the body writes
            fast.forward(p, in_place, b, in_place);
            ASSERT_TRUE(bitwise_equal(in_place, r)) << what << " (in place)";
          }
}

// The float rule's tail is its own formula: inputs (qa, qb) where the body's fma and the tail's
// multiply-then-add give different bytes (the first of the 65,536 uint8 pairs that does) fill every
// element; the reference then holds exactly numel % 64 tail bytes (at channels-last positions, or
// flat ones), and the fast kernel must put them at the same places.
TEST(QAddFast, FloatRuleTailUsesTheScalarFormulaAtChannelsLastPositions) {
  QAddParams p;
  p.rule = QAddRule::float_fma_tail64, p.dtype = DType::u8;
  // scales and zero points found by search (the two formulas differ at about one pair in 10^8):
  // (79, 6) gives (da + db) / s_y = -2.49999881 by the fma, -2.50000262 by the scalar formula
  p.a_scale = 0.0371f, p.b_scale = 0.0523f, p.y_scale = 0x1.fb3fa8p-5f;  // 0.06192
  p.a_zero_point = 0, p.b_zero_point = 65, p.y_zero_point = 64, p.lo = 0, p.hi = 255;
  // the two formulas of QAddRule::float_fma_tail64 (core/ops/quant.h), before the clamp
  auto one = [&](int a, int b, bool body) {
    const float da = body ? std::fma(p.a_scale, float(a), p.a_scale * float(-p.a_zero_point))
                          : float(a - p.a_zero_point) * p.a_scale;
    const float db = body ? std::fma(p.b_scale, float(b), p.b_scale * float(-p.b_zero_point))
                          : float(b - p.b_zero_point) * p.b_scale;
    return round_with((da + db) * (1.0f / p.y_scale), RoundRule::half_even);
  };
  int qa = -1, qb = -1;
  for (int a = 0; a < 256 && qa < 0; ++a)
    for (int b = 0; b < 256; ++b)
      if (one(a, b, true) != one(a, b, false) && one(a, b, true) + p.y_zero_point >= 0 &&
          one(a, b, true) + p.y_zero_point <= 255 && one(a, b, false) + p.y_zero_point <= 255 &&
          one(a, b, false) + p.y_zero_point >= 0) {
        qa = a, qb = b;
        break;
      }
  ASSERT_GE(qa, 0) << "no uint8 pair where the tail's formula changes a byte: pick other scales";
  const Shape shape{3, 5, 3, 3};  // 135 elements: a tail of 7
  Tensor a(shape, DType::u8), b(shape, DType::u8);
  std::fill(a.data<uint8_t>(), a.data<uint8_t>() + a.numel(), static_cast<uint8_t>(qa));
  std::fill(b.data<uint8_t>(), b.data<uint8_t>() + b.numel(), static_cast<uint8_t>(qb));
  const uint8_t tail_byte = static_cast<uint8_t>(one(qa, qb, false) + p.y_zero_point);
  for (bool nhwc : {true, false}) {
    QAddParams q = p;
    if (nhwc) q.n = 3, q.c = 5, q.h = 3, q.w = 3;
    Tensor r(shape, DType::u8), f(shape, DType::u8);
    registry().qadd.reference().forward(q, a, b, r);
    registry().qadd.at(KernelBackend::fast).forward(q, a, b, f);
    EXPECT_EQ(std::count(r.data<uint8_t>(), r.data<uint8_t>() + r.numel(), tail_byte), 7);
    // channels-last: the last 7 of NHWC are image 2, pixel (2,2) channels 0-4 and pixel (2,1) channels 3-4
    const int64_t last = nhwc ? ((2 * 5 + 0) * 3 + 2) * 3 + 2 : 134;
    EXPECT_EQ(r.data<uint8_t>()[last], tail_byte);
    EXPECT_TRUE(bitwise_equal(f, r)) << (nhwc ? "channels-last" : "flat");
  }
}

// Global average pooling: 1x1 (every value its own mean), 2x2 (means in quarters: ties), ResNet-20's
// 8x8, odd planes, batch 1 and odd batches, odd channel counts, zero points at both ends, int8 and
// uint8; 1 and 3 threads.
TEST(QGlobalAvgPoolFast, EqualsReferenceByteForByte) {
  struct Case {
    int64_t n, c, h, w;
  };
  const Case cases[] = {{1, 3, 8, 8}, {3, 17, 5, 7}, {2, 64, 8, 8}, {5, 1, 1, 1}, {4, 33, 13, 11}, {7, 9, 2, 2},
                        {100, 64, 8, 8}};
  const QGlobalAvgPoolKernel& fast = registry().qglobal_avg_pool.at(KernelBackend::fast);
  ASSERT_NE(fast.name, nullptr);
  const int saved = omp_get_max_threads();
  uint64_t seed = 1500;
  for (const Case& cs : cases)
    for (DType t : {DType::u8, DType::i8})
      for (int32_t zp : {type_min(t), type_max(t), t == DType::u8 ? 113 : -3})
      for (QAvgPoolRule rule : {QAvgPoolRule::shared_qparams, QAvgPoolRule::scale_ratio}) {
        QGlobalAvgPoolParams p;
        p.n = cs.n, p.c = cs.c, p.h = cs.h, p.w = cs.w, p.zero_point = zp, p.dtype = t;
        // ORT's own output scale and zero point: M = 0.05/(0.0123*N) (a ratio of about 4/N, inexact)
        p.rule = rule, p.in_scale = 0.05f, p.out_scale = 0.0123f, p.out_zero_point = t == DType::u8 ? 7 : -9;
        const Tensor x = random_int({cs.n, cs.c, cs.h, cs.w}, t, ++seed, type_min(t), type_max(t));
        Tensor r({cs.n, cs.c}, t), y1({cs.n, cs.c}, t), y3({cs.n, cs.c}, t);
        ASSERT_TRUE(fast.supports(p, t));
        registry().qglobal_avg_pool.reference().forward(p, x, r);
        omp_set_num_threads(1);
        fast.forward(p, x, y1);
        omp_set_num_threads(3);
        fast.forward(p, x, y3);
        omp_set_num_threads(saved);
        ASSERT_TRUE(bitwise_equal(y1, r)) << cs.n << "x" << cs.c << "x" << cs.h << "x" << cs.w << " " << dtype_name(t)
                                          << " zp " << zp << " " << qavg_pool_rule_name(rule);
        ASSERT_TRUE(bitwise_equal(y3, r)) << "3 threads";
      }
}

// ResNet-20's convolutions as the two PyTorch schemes resolve them: 3x3 stride 1 and 2, padding 1,
// uint8 activations with their zero points, per-tensor (qnnpack) or per-channel (onednn) weights.
TEST(QConvFast, SupportsEveryResnet20Convolution) {
  const QConv2dKernel& fast = registry().qconv2d.at(KernelBackend::fast);
  struct Conv {
    int64_t c, hw, k, stride;
  };
  for (const Conv& cv : {Conv{3, 32, 16, 1}, Conv{16, 32, 16, 1}, Conv{16, 32, 32, 2}, Conv{32, 16, 32, 1},
                         Conv{32, 16, 64, 2}, Conv{64, 8, 64, 1}})
    for (int32_t zp : {0, 1, 57, 128, 255}) {
      QConv2dParams p;
      p.g.n = 2, p.g.c = cv.c, p.g.h = p.g.w = cv.hw, p.g.k = cv.k, p.g.r = p.g.s = 3;
      p.g.stride_h = p.g.stride_w = cv.stride, p.g.pad_t = p.g.pad_b = p.g.pad_l = p.g.pad_r = 1;
      p.x_dtype = p.y_dtype = DType::u8, p.x_zero_point = zp, p.has_bias = true;
      p.rq = make_requant(RequantRule::float_multiply, RoundRule::half_even, zp % 2 == 1, cv.k, 3e4, DType::u8,
                          true, 5);
      EXPECT_TRUE(fast.supports(p, DType::u8)) << p.g.str() << " zp " << zp;
    }
}

// A whole quantized LeNet-5 under each scheme: quant_backend=fast (the default) and
// quant_backend=reference give the same logits bit for bit, and the fast kernels did run.
TEST(QuantFastModel, Lenet5LogitsEqualReferenceUnderEveryScheme) {
  Model m = build_model("lenet5", Policy::torch(), 3);
  const Tensor calib = random_tensor({64, 1, 28, 28}, DType::f32, 11, 0.0, 1.0);
  const Tensor x = random_tensor({37, 1, 28, 28}, DType::f32, 12, 0.0, 1.0);
  for (const char* scheme : {"torch_qnnpack", "torch_onednn", "tflite", "ort", "torch_fbgemm"}) {
    const std::string base = std::string("torch,quant_scheme=") + scheme;
    quant::PtqResult fast = quant::quantize_model(m, Policy::parse(base), calib);
    quant::PtqResult ref = quant::quantize_model(m, Policy::parse(base + ",quant_backend=reference"), calib);
    ExecContext exec;
    std::vector<KernelChoice> trace;
    exec.trace = &trace;
    RunContext ctx = RunContext::inference(exec);
    const Tensor yf = fast.model.forward(ctx, x);
    int fast_kernels = 0;
    for (const KernelChoice& c : trace) fast_kernels += c.kernel == "fast";
    EXPECT_EQ(fast_kernels, static_cast<int>(trace.size())) << scheme << ": a layer fell back to the reference";
    exec.trace = nullptr;
    const Tensor yr = ref.model.forward(ctx, x);
    EXPECT_TRUE(bitwise_equal(yf, yr)) << scheme;
  }
}

// ResNet-20 quantized under both PyTorch schemes and ONNX Runtime's (BatchNorm folded, residual adds
// under each scheme's add rule, global average pooling), with non-trivial BatchNorm state: every
// layer runs on a fast kernel and the logits equal the reference kernels' bit for bit, on 3 images
// (an odd batch).
TEST(QuantFastModel, Resnet20LogitsEqualReferenceUnderTorchAndOrtSchemes) {
  Model m = oracle::model_with_random_state("resnet20", Policy::torch(), 7);
  const Tensor calib = random_tensor({16, 3, 32, 32}, DType::f32, 21, -1.0, 1.0);
  const Tensor x = random_tensor({3, 3, 32, 32}, DType::f32, 22, -1.0, 1.0);
  for (const char* scheme : {"torch_qnnpack", "torch_onednn", "ort"}) {
    const std::string base = std::string("torch,quant_scheme=") + scheme;
    quant::PtqResult fast = quant::quantize_model(m, Policy::parse(base), calib);
    quant::PtqResult ref = quant::quantize_model(m, Policy::parse(base + ",quant_backend=reference"), calib);
    ExecContext exec;
    std::vector<KernelChoice> trace;
    exec.trace = &trace;
    RunContext ctx = RunContext::inference(exec);
    const Tensor yf = fast.model.forward(ctx, x);
    std::map<std::string, int> ops;
    for (const KernelChoice& c : trace) {
      EXPECT_EQ(c.kernel, "fast") << scheme << ": " << c.op << " fell back to the reference";
      ++ops[c.op];
    }
    EXPECT_EQ(ops["qconv2d"], 19) << scheme;
    EXPECT_EQ(ops["qadd"], 9) << scheme;
    EXPECT_EQ(ops["qglobal_avg_pool"], 1) << scheme;
    exec.trace = nullptr;
    const Tensor yr = ref.model.forward(ctx, x);
    EXPECT_TRUE(bitwise_equal(yf, yr)) << scheme;
  }
}

}  // namespace
}  // namespace driftlab
