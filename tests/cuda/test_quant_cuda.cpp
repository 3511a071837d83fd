// The own CUDA int8 kernels (kernels/cuda/quant.cu: qconv2d and qdense on __dp4a, qmaxpool2d,
// quantize, dequantize) against the CPU reference kernels (kernels/cpu/ref/quant_ref.cpp), byte for
// byte: every integer sum is exact and every rounding is the shared DL_HOST_DEVICE function, so
// there is no tolerance anywhere. Rows from tests/cases/quant_cases.h (shared with the fast CPU
// kernels' test): odd channels, reduction lengths that are not a multiple of 4 (the dp4a word's
// tail), stride 2 with padding, dilation, batch 1 and 5, more channels than one 64-wide tile; int8
// and uint8 activations and outputs, zero points at the ends of the type and outside it (the masked
// padding path), every RequantRule with both float roundings, per tensor and per channel, with and
// without bias and a fused ReLU clamp; ties decided by each rule; quantize at ties, saturation,
// infinities and NaN, per tensor and per channel. Runs on a GPU, and on the host under the CUDA
// emulation (ctest cuda_emulation, tests/emu); skips with "no CUDA device" otherwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "core/ops/qadd.h"
#include "core/ops/qconv2d.h"
#include "core/ops/qdense.h"
#include "core/ops/qpool.h"
#include "core/ops/quantize.h"
#include "core/ops/requant.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cuda/ops.h"
#include "tests/cases/quant_cases.h"
#include "tests/cuda/cuda_test_util.h"

namespace driftlab {
namespace {

// Outputs compared and found different, per test, printed at its end (the run's record: "N bytes
// compared, 0 differ").
struct Tally {
  const char* what;
  int64_t compared = 0, differ = 0;
  explicit Tally(const char* w) : what(w) {}
  ~Tally() {
    std::printf("[ tally    ] %s: %lld outputs compared with the reference, %lld differ\n", what,
                static_cast<long long>(compared), static_cast<long long>(differ));
  }
  ::testing::AssertionResult add(const Tensor& got, const Tensor& want) {
    compared += want.numel();
    const ::testing::AssertionResult r = bitwise_equal(got, want);
    if (!r) {
      const std::size_t sz = dtype_size(want.dtype());
      for (int64_t i = 0; i < want.numel(); ++i)
        differ += std::memcmp(static_cast<const char*>(got.raw()) + i * sz,
                              static_cast<const char*>(want.raw()) + i * sz, sz) != 0;
    }
    return r;
  }
};

// One qconv2d on the device and on the reference, compared.
::testing::AssertionResult qconv_matches(cuda::CudaContext& ctx, Tally& tally, const QConv2dParams& p,
                                         const Tensor& x, const Tensor& w, const Tensor* b) {
  Tensor want(p.g.y_shape(), p.y_dtype);
  qconv2d_forward_ref(p, x, w, b, want);
  const cuda::DeviceTensor gx = cuda::to_device(ctx, x), gw = cuda::to_device(ctx, w);
  cuda::DeviceTensor gb = b ? cuda::to_device(ctx, *b) : cuda::DeviceTensor();
  cuda::DeviceTensor gy(ctx, p.g.y_shape(), p.y_dtype);
  cuda::qconv2d_forward_own(ctx, p, gx, gw, b ? &gb : nullptr, gy);
  return tally.add(cuda::to_host(ctx, gy), want);
}

::testing::AssertionResult qdense_matches(cuda::CudaContext& ctx, Tally& tally, const QDenseParams& p,
                                          const Tensor& x, const Tensor& w, const Tensor* b) {
  Tensor want({p.n, p.out}, p.y_dtype);
  qdense_forward_ref(p, x, w, b, want);
  const cuda::DeviceTensor gx = cuda::to_device(ctx, x), gw = cuda::to_device(ctx, w);
  cuda::DeviceTensor gb = b ? cuda::to_device(ctx, *b) : cuda::DeviceTensor();
  cuda::DeviceTensor gy(ctx, {p.n, p.out}, p.y_dtype);
  cuda::qdense_forward_own(ctx, p, gx, gw, b ? &gb : nullptr, gy);
  return tally.add(cuda::to_host(ctx, gy), want);
}

std::string what_of(const char* name, DType xt, DType yt, RequantRule rule, RoundRule round, bool per_channel,
                    bool has_bias, bool relu, int32_t x_zp) {
  return std::string(name) + " x " + dtype_name(xt) + " (zp " + std::to_string(x_zp) + ") y " + dtype_name(yt) + " " +
         rule_str(rule, round) + (per_channel ? " per-channel" : " per-tensor") + (has_bias ? " bias" : "") +
         (relu ? " relu" : "");
}

class CudaQConv2d : public ::testing::TestWithParam<QConvCase> {};

// Every (input dtype, output dtype, rule, rounding, granularity, bias, clamp) of one geometry.
TEST_P(CudaQConv2d, EqualsReferenceByteForByte) {
  REQUIRE_CUDA_DEVICE();
  const QConvCase& cs = GetParam();
  cuda::CudaContext ctx;
  Tally tally(cs.name);
  uint64_t seed = 100;
  for (DType xt : {DType::u8, DType::i8})
    for (DType yt : {DType::u8, DType::i8})
      for (RequantRule rule : kRequantRules)
        for (RoundRule round : {RoundRule::half_even, RoundRule::half_away})
          for (bool per_channel : {false, true})
            for (bool has_bias : {false, true})
              for (bool relu : {false, true}) {
                if (is_fixed_point(rule) && round == RoundRule::half_away) continue;  // they ignore `round`
                ++seed;
                QConv2dParams p;
                p.g = cs.geometry();
                p.x_dtype = xt, p.y_dtype = yt;
                // zero points inside the type, at both ends of it (padding packs the extreme byte)
                const int32_t zps_u8[] = {3, 250, 0, 255}, zps_i8[] = {-5, 100, -128, 127};
                p.x_zero_point = xt == DType::i8 ? zps_i8[seed % 4] : zps_u8[seed % 4];
                p.has_bias = has_bias;
                const double acc_scale = std::sqrt(double(p.g.c * p.g.r * p.g.s)) * 128.0 * 90.0;
                p.rq = make_requant(rule, round, per_channel, p.g.k, acc_scale, yt, relu, seed);
                const Tensor x = random_int(p.g.x_shape(), xt, seed, type_min(xt), type_max(xt));
                const Tensor w = random_int(p.g.w_shape(), DType::i8, seed + 7, -128, 127);
                const Tensor b = random_int({p.g.k}, DType::i32, seed + 9, -40000, 40000);
                ASSERT_TRUE(qconv_matches(ctx, tally, p, x, w, has_bias ? &b : nullptr))
                    << what_of(cs.name, xt, yt, rule, round, per_channel, has_bias, relu, p.x_zero_point);
              }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaQConv2d, ::testing::ValuesIn(cases_for(kQConvCases, kCudaTest)),
                         [](const ::testing::TestParamInfo<QConvCase>& i) { return case_test_name(i.param.name); });

// A zero point outside the activation type cannot be packed as a padding byte: the kernel then
// packs 0 and sums the weights of the real positions with a second dp4a under a 0/1 mask. Padded
// geometries (every pad side, stride 2, dilation) under every rule, int8 and uint8.
TEST(CudaQConv2dMaskedPadding, ZeroPointOutsideTheTypeEqualsReference) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  Tally tally("masked padding");
  uint64_t seed = 3000;
  for (const char* name : {"odd_asym_pad", "stride2_pad1", "dilation2", "batch5_c7_stride2_pad1", "k70_c1_pad1"})
    for (DType xt : {DType::u8, DType::i8})
      for (RequantRule rule : kRequantRules) {
        ++seed;
        QConv2dParams p;
        p.g = case_named(kQConvCases, name).geometry();
        p.x_dtype = xt, p.y_dtype = DType::u8;
        p.x_zero_point = xt == DType::u8 ? (seed % 2 ? 300 : -20) : (seed % 2 ? 140 : -200);
        p.has_bias = seed % 2 == 0;
        const double acc_scale = std::sqrt(double(p.g.c * p.g.r * p.g.s)) * 128.0 * 150.0;
        p.rq = make_requant(rule, RoundRule::half_even, seed % 3 == 0, p.g.k, acc_scale, DType::u8, false, seed);
        const Tensor x = random_int(p.g.x_shape(), xt, seed, type_min(xt), type_max(xt));
        const Tensor w = random_int(p.g.w_shape(), DType::i8, seed + 7, -128, 127);
        const Tensor b = random_int({p.g.k}, DType::i32, seed + 9, -40000, 40000);
        ASSERT_TRUE(qconv_matches(ctx, tally, p, x, w, p.has_bias ? &b : nullptr))
            << what_of(name, xt, DType::u8, rule, RoundRule::half_even, seed % 3 == 0, p.has_bias, false,
                       p.x_zero_point);
      }
}

// A 1x1 convolution of one channel with weight 1 and multiplier 0.5: acc = x - x_zp, so every odd
// accumulator is a tie, and the rule decides it (half_even, half_away, gemmlowp's nudge).
TEST(CudaQConv2d, TiesRoundAsTheReference) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  Tally tally("ties");
  for (DType xt : {DType::u8, DType::i8})
    for (RequantRule rule : kRequantRules)
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
        ASSERT_TRUE(qconv_matches(ctx, tally, p, x, w, nullptr)) << dtype_name(xt) << " " << rule_str(rule, round);
      }
}

// Every shape of the dense table under every dtype pair, rule, rounding, granularity, bias, clamp.
TEST(CudaQDense, EqualsReferenceByteForByte) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  Tally tally("qdense");
  uint64_t seed = 500;
  for (const QDenseCase& s : cases_for(kQDenseCases, kCudaTest))
    for (DType xt : {DType::u8, DType::i8})
      for (RequantRule rule : kRequantRules)
        for (RoundRule round : {RoundRule::half_even, RoundRule::half_away})
          for (bool per_channel : {false, true})
            for (bool has_bias : {false, true})
              for (bool relu : {false, true}) {
                if (is_fixed_point(rule) && round == RoundRule::half_away) continue;
                ++seed;
                const DType yt = seed % 3 ? xt : (xt == DType::u8 ? DType::i8 : DType::u8);
                QDenseParams p;
                p.n = s.n, p.in = s.in, p.out = s.out, p.x_dtype = xt, p.y_dtype = yt, p.has_bias = has_bias;
                p.x_zero_point = xt == DType::i8 ? (seed % 2 ? -128 : 31) : (seed % 2 ? 255 : 128);
                p.rq = make_requant(rule, round, per_channel, s.out, std::sqrt(double(s.in)) * 128 * 90, yt, relu, seed);
                const Tensor x = random_int({s.n, s.in}, xt, seed, type_min(xt), type_max(xt));
                const Tensor w = random_int({s.out, s.in}, DType::i8, seed + 3, -128, 127);
                const Tensor b = random_int({s.out}, DType::i32, seed + 5, -40000, 40000);
                ASSERT_TRUE(qdense_matches(ctx, tally, p, x, w, has_bias ? &b : nullptr))
                    << s.n << "x" << s.in << "->" << s.out << " "
                    << what_of("qdense", xt, yt, rule, round, per_channel, has_bias, relu, p.x_zero_point);
              }
}

// The dp4a word at its extremes: every reduction length 1..13 (every tail of a 4-byte word, and
// more than two words), activations and weights at the ends of their types, the zero point at the
// other end (|x - zp| = 255 against |w| = 128: the largest products), and a multiplier that maps the
// accumulator's whole range onto the output's so that a wrong byte in any product moves the result.
TEST(CudaQDense, ExtremeBytesAtEveryTailLength) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  Tally tally("qdense extremes");
  for (int64_t in = 1; in <= 13; ++in)
    for (DType xt : {DType::u8, DType::i8})
      for (int pattern = 0; pattern < 4; ++pattern) {
        QDenseParams p;
        p.n = 5, p.in = in, p.out = 3, p.x_dtype = xt, p.y_dtype = DType::i8;
        p.x_zero_point = pattern % 2 ? type_max(xt) : type_min(xt);
        Tensor x({p.n, in}, xt), w({p.out, in}, DType::i8);
        for (int64_t i = 0; i < x.numel(); ++i) {
          const bool low = pattern < 2 ? true : (i % 3 == 0);  // all at one end, or a mix of both ends
          const int32_t v = low == (pattern % 2 == 1) ? type_min(xt) : type_max(xt);
          if (xt == DType::u8) x.data<uint8_t>()[i] = static_cast<uint8_t>(v);
          if (xt == DType::i8) x.data<int8_t>()[i] = static_cast<int8_t>(v);
        }
        for (int64_t i = 0; i < w.numel(); ++i) w.data<int8_t>()[i] = static_cast<int8_t>(i % 2 ? 127 : -128);
        // |acc| <= 255*128*in: scaled onto about [-127, 127]
        p.rq = make_requant(RequantRule::float_multiply, RoundRule::half_even, false, p.out, 1.0, DType::i8, false, 9);
        p.rq.channels[0].scale = static_cast<float>(127.0 / (255.0 * 128.0 * double(in)));
        p.rq.channels[0].bias = 0.f;
        ASSERT_TRUE(qdense_matches(ctx, tally, p, x, w, nullptr))
            << "in " << in << " " << dtype_name(xt) << " pattern " << pattern;
      }
}

TEST(CudaQMaxPool2d, EqualsReferenceByteForByte) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  Tally tally("qmaxpool2d");
  uint64_t seed = 900;
  for (const QPoolCase& cs : cases_for(kQPoolCases, kCudaTest))
    for (DType t : {DType::u8, DType::i8}) {
      QPool2dParams p;
      p.dtype = t;
      p.g = cs.geometry();
      // a narrow range makes ties and windows whose max is the type's minimum common
      ++seed;
      const Tensor x = random_int(p.g.x_shape(), t, seed, type_min(t), type_min(t) + (seed % 2 ? 255 : 3));
      Tensor want(p.g.y_shape(), t);
      qmaxpool2d_forward_ref(p, x, want);
      const cuda::DeviceTensor gx = cuda::to_device(ctx, x);
      cuda::DeviceTensor gy(ctx, p.g.y_shape(), t);
      cuda::qmaxpool2d_forward_own(ctx, p, gx, gy);
      ASSERT_TRUE(tally.add(cuda::to_host(ctx, gy), want)) << p.g.str() << " " << dtype_name(t);
    }
}

// Quantize (both scale ops, both roundings, int8/uint8/int32) at exact ties of the scale, values that
// saturate, infinities, NaN and -0; dequantize of the result. Per tensor on 10,007 values (not a
// multiple of a block), per channel along axes 0, 1 and 3 of a (5,7,3,4) tensor.
TEST(CudaQuantize, EqualsReferenceByteForByteAtTiesAndNonFinite) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  Tally tally("quantize/dequantize");
  Tensor flat = random_tensor({10007}, DType::f32, 77, -300.0, 300.0);
  float* xs = flat.data<float>();
  const float scale = 0.25f;
  for (int64_t i = 0; i < 2000; ++i) xs[i] = (static_cast<float>(i - 1000) + 0.5f) * scale;
  xs[2000] = std::numeric_limits<float>::infinity();
  xs[2001] = -std::numeric_limits<float>::infinity();
  xs[2002] = std::nanf("");
  xs[2003] = 1e30f, xs[2004] = -1e30f, xs[2005] = -0.f;
  Tensor chan = random_tensor({5, 7, 3, 4}, DType::f32, 78, -40.0, 40.0);
  for (int64_t i = 0; i < chan.numel(); i += 7) chan.data<float>()[i] = (static_cast<float>(i % 50) - 25.5f) * 0.5f;
  struct Layout {
    const Tensor* x;
    int axis;
  };
  for (const Layout& l : {Layout{&flat, -1}, Layout{&chan, 0}, Layout{&chan, 1}, Layout{&chan, 3}})
    for (DType t : {DType::u8, DType::i8, DType::i32})
      for (ScaleOp op : {ScaleOp::divide, ScaleOp::mul_reciprocal})
        for (RoundRule round : {RoundRule::half_even, RoundRule::half_away}) {
          QuantizeParams p;
          p.dtype = t, p.op = op, p.round = round, p.axis = l.axis;
          const int64_t channels = l.axis < 0 ? 1 : l.x->shape()[l.axis];
          for (int64_t c = 0; c < channels; ++c) {
            p.scale.push_back(c % 2 ? 0.0372f * static_cast<float>(c + 1) : 0.25f);  // 0.25: exact ties
            p.zero_point.push_back(t == DType::u8 ? 131 - static_cast<int32_t>(c) : t == DType::i8 ? -7 : 1000);
          }
          p.qmin = t == DType::u8 ? 0 : t == DType::i8 ? -128 : -100000;
          p.qmax = t == DType::u8 ? 255 : t == DType::i8 ? 127 : 100000;
          const std::string what = std::string(dtype_name(t)) + " " + scale_op_name(op) + " " +
                                   round_rule_name(round) + " axis " + std::to_string(l.axis);
          Tensor want(l.x->shape(), t);
          quantize_forward_ref(p, *l.x, want);
          const cuda::DeviceTensor gx = cuda::to_device(ctx, *l.x);
          cuda::DeviceTensor gq(ctx, l.x->shape(), t);
          cuda::quantize_own(ctx, p, gx, gq);
          ASSERT_TRUE(tally.add(cuda::to_host(ctx, gq), want)) << "quantize " << what;
          Tensor back(l.x->shape(), DType::f32);
          dequantize_forward_ref(p, want, back);
          cuda::DeviceTensor gback(ctx, l.x->shape(), DType::f32);
          cuda::dequantize_own(ctx, p, gq, gback);
          ASSERT_TRUE(tally.add(cuda::to_host(ctx, gback), back)) << "dequantize " << what;
        }
}

// The residual block's kernels. qadd under every rule, both value types, on (2,3,5,7) (210
// elements: a tail of 18 past ATen's blocks of 64, decided in channels-last order) and in flat
// order, scales from 1/8 to 40 (ratios above and below one, the tflite multipliers' shifts) and a
// fused ReLU's clamp; the global average with both rules; qrelu; the option-A shortcut.
TEST(CudaQAdd, EveryRuleEqualsReferenceByteForByte) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  Tally tally("qadd");
  uint64_t seed = 1200;
  const Shape shape{2, 3, 5, 7};
  for (QAddRule rule : {QAddRule::fixed_point_shift, QAddRule::float_fma_tail64, QAddRule::float_ratio_fma,
                        QAddRule::tflite_fixed_point})
    for (DType t : {DType::u8, DType::i8})
      for (int variant = 0; variant < 4; ++variant) {
        QAddParams p;
        p.rule = rule;
        p.dtype = t;
        const float scales[4][3] = {{0.05f, 0.07f, 0.1f}, {0.125f, 0.02f, 0.03f}, {0.4f, 0.9f, 40.0f}, {1.0f, 1.0f, 0.5f}};
        p.a_scale = scales[variant][0], p.b_scale = scales[variant][1], p.y_scale = scales[variant][2];
        const int32_t lo = type_min(t), hi = lo + 255;
        p.a_zero_point = lo + 3 + variant * 40, p.b_zero_point = hi - 7 - variant * 30, p.y_zero_point = lo + 128;
        p.lo = variant == 1 ? p.y_zero_point : lo, p.hi = hi;  // variant 1: add_relu's clamp
        if (rule == QAddRule::float_ratio_fma && t == DType::i8 && variant % 2) p.offset = 128;  // ORT's uint8 rewrite
        if (variant < 2) p.n = shape[0], p.c = shape[1], p.h = shape[2], p.w = shape[3];  // channels-last tail
        const Tensor a = random_int(shape, t, ++seed, lo, hi), b = random_int(shape, t, ++seed, lo, hi);
        Tensor want(shape, t);
        qadd_forward_ref(p, a, b, want);
        const cuda::DeviceTensor ga = cuda::to_device(ctx, a), gb = cuda::to_device(ctx, b);
        cuda::DeviceTensor gy(ctx, shape, t);
        cuda::qadd_own(ctx, p, ga, gb, gy);
        ASSERT_TRUE(tally.add(cuda::to_host(ctx, gy), want))
            << qadd_rule_name(rule) << " " << dtype_name(t) << " variant " << variant;
      }
}

TEST(CudaQGlobalAvgPool, EveryRuleEqualsReferenceByteForByte) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  Tally tally("qglobal_avg_pool");
  uint64_t seed = 1300;
  for (QAvgPoolRule rule : {QAvgPoolRule::shared_qparams, QAvgPoolRule::scale_ratio, QAvgPoolRule::tflite_integer_mean,
                            QAvgPoolRule::tflite_rounded_division})
    for (DType t : {DType::u8, DType::i8})
      for (const Shape& shape : {Shape{3, 5, 8, 8}, Shape{2, 7, 3, 5}, Shape{1, 4, 1, 1}}) {
        QGlobalAvgPoolParams p;
        p.n = shape[0], p.c = shape[1], p.h = shape[2], p.w = shape[3];
        p.dtype = t, p.rule = rule;
        p.zero_point = type_min(t) + 100, p.in_scale = 0.03f, p.out_scale = 0.011f, p.out_zero_point = type_min(t) + 9;
        const Tensor x = random_int(shape, t, ++seed, type_min(t), type_min(t) + 255);
        Tensor want({p.n, p.c}, t);
        qglobal_avg_pool_forward_ref(p, x, want);
        const cuda::DeviceTensor gx = cuda::to_device(ctx, x);
        cuda::DeviceTensor gy(ctx, {p.n, p.c}, t);
        cuda::qglobal_avg_pool_own(ctx, p, gx, gy);
        ASSERT_TRUE(tally.add(cuda::to_host(ctx, gy), want)) << qavg_pool_rule_name(rule) << " " << shape_str(shape);
      }
}

// qrelu and the option-A shortcut have one-line definitions: checked against them element by element.
TEST(CudaQResidualParts, ReluAndOptionAShortcutAsDefined) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  for (DType t : {DType::u8, DType::i8}) {
    const Shape xs{2, 3, 7, 6};  // odd height: the last subsampled row is x's row 6
    const Tensor x = random_int(xs, t, 1400 + static_cast<uint64_t>(t), type_min(t), type_min(t) + 255);
    const int32_t zp = type_min(t) + 77;
    const cuda::DeviceTensor gx = cuda::to_device(ctx, x);
    cuda::DeviceTensor gr(ctx, xs, t);
    cuda::qrelu_own(ctx, t, zp, gx, gr);
    const Tensor r = cuda::to_host(ctx, gr);
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(r.at(i), std::max(x.at(i), static_cast<double>(zp))) << i;
    const Shape ss{2, 8, 4, 3};  // 3 channels into 8: 2 zero-point channels before, 3 after
    cuda::DeviceTensor gs(ctx, ss, t);
    cuda::qshortcut_option_a_own(ctx, t, zp, 2, 2, gx, gs);
    const Tensor s = cuda::to_host(ctx, gs);
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t c = 0; c < 8; ++c)
        for (int64_t h = 0; h < 4; ++h)
          for (int64_t w = 0; w < 3; ++w) {
            const bool inside = c >= 2 && c < 5;
            const double want = inside ? x.at(((n * 3 + c - 2) * 7 + 2 * h) * 6 + 2 * w) : zp;
            ASSERT_EQ(s.at(((n * 8 + c) * 4 + h) * 3 + w), want) << n << " " << c << " " << h << " " << w;
          }
  }
}

}  // namespace
}  // namespace driftlab
