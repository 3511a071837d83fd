// The reduced-precision roundings (core/ops/reduced_precision.h) against independent definitions:
// float16 against the compiler's own _Float16 conversion (libgcc's or F16C's round to nearest
// even), TF32 and bfloat16 against arithmetic in double (the value divided by its step in the
// format, rounded by nearbyint / round / trunc, multiplied back: no bit manipulation), on
// random bit patterns of every exponent, subnormals included; and a few values by hand.
// Then against what PyTorch 2.11 computed on an NVIDIA H200 (cuBLAS 13, cuDNN 9.19), captured once
// by bench/peers/reduced_precision_capture.py (tests/data/h200_reduced_precision, capture.json):
// the expected values are the device's, never driftlab's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/ops/loss_scale.h"
#include "core/ops/reduced_precision.h"
#include "engine/io/npy.h"
#include "tests/ops/reduced_precision_util.h"

namespace driftlab {
namespace {

// The format's step at x: float32's exponent range, `mbits` explicit mantissa bits, subnormals
// below 2^-126 on the grid 2^(-126 - mbits).
double step_at(double x, int mbits) {
  int e = 0;
  std::frexp(std::fabs(x), &e);  // |x| = f * 2^e, f in [0.5, 1)
  return std::ldexp(1.0, std::max(e - 1, -126) - mbits);
}

// The rounding by arithmetic: x / step is exact in double (a float32 over a power of two).
float by_arithmetic(float x, int mbits, Rounding r) {
  if (x == 0 || !std::isfinite(x)) return x;
  const double s = step_at(x, mbits), q = static_cast<double>(x) / s;
  const double k = r == Rounding::nearest_even ? std::nearbyint(q) : r == Rounding::nearest_away ? std::round(q) : std::trunc(q);
  const double v = k * s;
  if (std::fabs(v) > std::numeric_limits<float>::max()) return std::copysign(std::numeric_limits<float>::infinity(), x);
  return static_cast<float>(v);  // exact: v has at most mbits + 1 significant bits
}

// Random float32 bit patterns: every exponent equally often, NaN and inf excluded.
std::vector<float> random_floats(int n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<float> v;
  while (static_cast<int>(v.size()) < n) {
    const float x = bits_float(static_cast<uint32_t>(g()));
    if (std::isfinite(x)) v.push_back(x);
  }
  return v;
}

TEST(ReducedPrecision, Tf32AndBf16MatchArithmeticInDoubleUnderEveryRounding) {
  for (const Rounding r : {Rounding::nearest_even, Rounding::nearest_away, Rounding::truncate})
    for (const float x : random_floats(200000, 1)) {
      ASSERT_EQ(float_bits(round_to_tf32(x, r)), float_bits(by_arithmetic(x, 10, r))) << x << " rounding " << int(r);
      ASSERT_EQ(float_bits(round_to_bf16(x, r)), float_bits(by_arithmetic(x, 7, r))) << x << " rounding " << int(r);
    }
}

// Ties are the cases random patterns rarely hit: the low 13 (TF32) bits exactly half a step, with
// the kept mantissa even and odd.
TEST(ReducedPrecision, Tf32TiesByHand) {
  const float tie_even = 1.0f + std::ldexp(1.0f, -11);      // 1 + half a TF32 step: kept mantissa even
  const float tie_odd = 1.0f + 3 * std::ldexp(1.0f, -11);   // 1 + 1.5 steps: kept mantissa odd
  EXPECT_EQ(round_to_tf32(tie_even, Rounding::nearest_even), 1.0f);
  EXPECT_EQ(round_to_tf32(tie_odd, Rounding::nearest_even), 1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(round_to_tf32(tie_even, Rounding::nearest_away), 1.0f + std::ldexp(1.0f, -10));
  EXPECT_EQ(round_to_tf32(-tie_even, Rounding::nearest_away), -(1.0f + std::ldexp(1.0f, -10)));
  EXPECT_EQ(round_to_tf32(tie_odd, Rounding::truncate), 1.0f + std::ldexp(1.0f, -10));
  for (const Rounding r : {Rounding::nearest_even, Rounding::nearest_away}) {
    EXPECT_EQ(round_to_tf32(tie_even, r), by_arithmetic(tie_even, 10, r));
    EXPECT_EQ(round_to_tf32(tie_odd, r), by_arithmetic(tie_odd, 10, r));
  }
  // the largest float32 rounds past TF32's largest (carry into the exponent): infinity
  EXPECT_TRUE(std::isinf(round_to_tf32(std::numeric_limits<float>::max())));
  EXPECT_EQ(round_to_tf32(std::numeric_limits<float>::max(), Rounding::truncate),
            by_arithmetic(std::numeric_limits<float>::max(), 10, Rounding::truncate));
  EXPECT_TRUE(std::isnan(round_to_tf32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(round_to_bf16(bits_float(0x7f800001u))));  // a signalling NaN stays a NaN
  EXPECT_EQ(round_to_tf32(-std::numeric_limits<float>::infinity()), -std::numeric_limits<float>::infinity());
}

TEST(ReducedPrecision, Fp16MatchesTheCompilersFloat16Conversion) {
#ifndef __FLT16_MAX__  // clang 14 has no _Float16 on x86 (g++ 12, the build's compiler, has)
  GTEST_SKIP() << "this compiler has no _Float16 to compare with";
#else
  std::vector<float> xs = random_floats(200000, 2);
  // float16's own range, densely: every exponent from its subnormals to past its overflow
  std::mt19937 g(3);
  std::uniform_real_distribution<float> e(-27.0f, 17.0f), m(1.0f, 2.0f);
  for (int i = 0; i < 200000; ++i) xs.push_back((i & 1 ? -1.0f : 1.0f) * m(g) * std::exp2(std::floor(e(g))));
  for (const float b : {65504.0f, 65519.99f, 65520.0f, 65536.0f, std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),
                        std::ldexp(1.5f, -25), std::ldexp(1.0f, -14), std::ldexp(1023.5f, -24)})
    xs.push_back(b), xs.push_back(-b);
  for (const float x : xs) {
    const float want = static_cast<float>(static_cast<_Float16>(x));
    ASSERT_EQ(float_bits(round_to_fp16(x)), float_bits(want)) << x;
  }
#endif
}

// TF32 and float16 keep the same 10 fraction bits: rounded to nearest even, a float32 in float16's
// normal range [2^-14, 65504] becomes the same value in both (so math_rnn=float16, whose products
// stay float32, computes what math_rnn=tf32 does until an operand leaves that range); below it
// float16 keeps fewer bits (subnormals), above it overflows.
TEST(ReducedPrecision, Fp16IsTf32InFloat16sNormalRange) {
  std::mt19937 g(5);
  std::uniform_real_distribution<float> e(-14.0f, 15.0f), m(1.0f, 2.0f);
  int64_t normal = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = (i & 1 ? -1.0f : 1.0f) * m(g) * std::exp2(std::floor(e(g)));
    if (std::fabs(round_to_fp16(x)) > 65504.0f || std::fabs(x) < std::ldexp(1.0f, -14)) continue;
    ++normal;
    ASSERT_EQ(float_bits(round_to_fp16(x)), float_bits(round_to_tf32(x, Rounding::nearest_even))) << x;
  }
  EXPECT_GT(normal, 190000);
  // outside it they part: a float16 subnormal keeps fewer bits, and float16 overflows
  EXPECT_NE(round_to_fp16(std::ldexp(1.2345f, -20)), round_to_tf32(std::ldexp(1.2345f, -20), Rounding::nearest_even));
  EXPECT_NE(round_to_fp16(70000.0f), round_to_tf32(70000.0f, Rounding::nearest_even));
}

// --- against the H200 captures ---

using rp_test::capture;
using rp_test::sum_bound_gamma;


// C = A @ I under torch.backends.cuda.matmul.allow_tf32: every product is a * 1 and every sum adds
// zeros, so C is A as the tensor cores received it. cuBLAS rounds both operands to nearest even
// (not the truncation an mma instruction applies to raw float32 registers, nor PTX's cvt.rna);
// the captured A holds ties (low 13 bits 0x1000, both parities), on which the three rules differ.
TEST(ReducedPrecisionH200, CublasRoundsTf32OperandsToNearestEven) {
  const Tensor a = read_npy(capture("ident_a"));
  const Tensor c = read_npy(capture("ident_a_times_i_tf32")), ct = read_npy(capture("ident_i_times_at_tf32"));
  ASSERT_EQ(a.shape(), c.shape());
  const int64_t rows = a.dim(0), cols = a.dim(1);
  int64_t away_differs = 0, trunc_differs = 0;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      const float x = a.data<float>()[i * cols + j];
      ASSERT_EQ(float_bits(c.data<float>()[i * cols + j]), float_bits(round_to_tf32(x))) << "A[" << i << "," << j << "]";
      ASSERT_EQ(float_bits(ct.data<float>()[j * rows + i]), float_bits(round_to_tf32(x))) << "B[" << j << "," << i << "]";
      away_differs += round_to_tf32(x, Rounding::nearest_away) != round_to_tf32(x);
      trunc_differs += round_to_tf32(x, Rounding::truncate) != round_to_tf32(x);
    }
  // the capture tells the rules apart: ties where away differs, and half the values for truncation
  EXPECT_GT(away_differs, 500);
  EXPECT_GT(trunc_differs, rows * cols / 4);
}

// The largest error of a captured matmul against an emulation (operands rounded by `round_in`,
// products summed in double, then `round_out`), in units of the bound: float32 accumulation of the
// rounded operands, plus half a step of the output format (out_mbits mantissa bits; 23: float32).
// Returns also the share of elements the emulation gives bit for bit.
std::pair<double, double> matmul_against(const Tensor& dev, float (*round_in)(float), float (*round_out)(float),
                                         int out_mbits) {
  const Tensor a = read_npy(capture("mm_a")), b = read_npy(capture("mm_b"));
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
  double worst = 0;
  int64_t exact = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, mag = 0;
      for (int64_t t = 0; t < k; ++t) {
        const double p = static_cast<double>(round_in(a.data<float>()[i * k + t])) * round_in(b.data<float>()[t * n + j]);
        sum += p, mag += std::fabs(p);
      }
      const float want = round_out(static_cast<float>(sum));
      const float got = dev.data<float>()[i * n + j];
      exact += float_bits(want) == float_bits(got);
      worst = std::max(worst, std::fabs(got - sum) / (sum_bound_gamma(k) * mag + rp_test::half_step(sum, out_mbits) * 1.0000001));
    }
  return {worst, static_cast<double>(exact) / static_cast<double>(m * n)};
}

float keep(float x) { return x; }
float tf32_even(float x) { return round_to_tf32(x); }
float tf32_truncated(float x) { return round_to_tf32(x, Rounding::truncate); }
float bf16_even(float x) { return round_to_bf16(x); }
float fp16_even(float x) { return round_to_fp16(x); }

// A 64x512 @ 512x64 matmul: TF32 is the operands rounded to nearest even and summed in float32
// (within the bound; truncated operands are not), and autocast's float16 / bfloat16 matmul is the
// operands rounded to the format, summed in float32 and the result rounded to the format.
TEST(ReducedPrecisionH200, MatmulModesAreRoundedOperandsSummedInFloat32) {
  const auto [tf32, tf32_exact] = matmul_against(read_npy(capture("mm_tf32")), tf32_even, keep, 23);
  const auto [trunc, trunc_exact] = matmul_against(read_npy(capture("mm_tf32")), tf32_truncated, keep, 23);
  const auto [f32, f32_exact] = matmul_against(read_npy(capture("mm_fp32")), keep, keep, 23);
  const auto [f16, f16_exact] = matmul_against(read_npy(capture("mm_fp16")), fp16_even, fp16_even, 10);
  const auto [b16, b16_exact] = matmul_against(read_npy(capture("mm_bf16")), bf16_even, bf16_even, 7);
  std::printf("worst error per bound (share bit for bit): tf32 %.3g (%.3f), tf32 with truncated operands %.3g, "
              "float32 %.3g (%.3f), float16 autocast %.3g (%.3f), bfloat16 autocast %.3g (%.3f)\n",
              tf32, tf32_exact, trunc, f32, f32_exact, f16, f16_exact, b16, b16_exact);
  EXPECT_LE(tf32, 1.0);
  EXPECT_GT(trunc, 1.0);  // the bound tells the roundings apart
  EXPECT_LE(f32, 1.0);
  EXPECT_LE(f16, 1.0);
  EXPECT_LE(b16, 1.0);
}

// GradScaler (init_scale 2^20, growth_interval 4, growth 2, backoff 0.5) over 40 float16 autocast
// steps of an MLP on the H200: given the overflow flags that run found, the rule reproduces its
// scale at every step (the flags themselves come from float16 gradients: reproducing them needs
// driftlab's float16 training, not built yet).
TEST(ReducedPrecisionH200, GradScalersDynamicRuleGivesTheCapturedScales) {
  const Tensor scales = read_npy(capture("gs_scale")), found = read_npy(capture("gs_found_inf"));
  ASSERT_EQ(scales.numel(), found.numel());
  DynamicLossScale s;
  s.scale = std::ldexp(1.0f, 20);
  s.growth_interval = 4;
  int64_t skipped = 0, grown = 0;
  for (int64_t i = 0; i < scales.numel(); ++i) {
    ASSERT_EQ(s.scale, scales.at(i)) << "step " << i;
    const float before = s.scale;
    skipped += !s.update(found.at(i) != 0);
    grown += s.scale > before;
  }
  // the run overflowed, backed off and grew (else the rule would be tested on one branch)
  EXPECT_GE(skipped, 5);
  EXPECT_GE(grown, 3);
}

}  // namespace
}  // namespace driftlab
