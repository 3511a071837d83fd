// The vector roundings (kernels/cpu/fast/round_fast.h) against the scalar functions of
// core/ops/reduced_precision.h (themselves tested against _Float16 and arithmetic in double in
// test_reduced_precision.cpp): every path this CPU runs (scalar, AVX2+F16C, AVX-512), every
// format and rule, bit for bit, NaN included, on values chosen at each format's edges (ties of
// both parities, the float16 overflow threshold and subnormal grid, float32 subnormals, which
// VCVTNEPS2BF16 would flush and a bfloat16 cast rounds), an evenly spaced sweep over all 2^32
// bit patterns and random ones; lengths that leave a scalar tail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/fast/round_fast.h"

namespace driftlab {
namespace {

float scalar_round(float x, RoundFormat f, Rounding r) {
  switch (f) {
    case RoundFormat::tf32: return round_to_tf32(x, r);
    case RoundFormat::bf16: return round_to_bf16(x, r);
    case RoundFormat::fp16: return round_to_fp16(x);
  }
  return x;
}

std::vector<float> test_values() {
  std::vector<float> v;
  auto both = [&v](float x) { v.push_back(x), v.push_back(-x); };
  for (float x : {0.0f, 1.0f, 65504.0f, 65519.996f, 65520.0f, 65536.0f, std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::infinity(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),
                  std::ldexp(3.0f, -26), std::ldexp(1.0f, -14), std::ldexp(1023.5f, -24)})
    both(x);
  // Ties and near-ties below each format's kept bits, with an even and an odd kept bit.
  for (int drop : {13, 16}) {
    const uint32_t half = 1u << (drop - 1);
    for (uint32_t base : {0x3f800000u, 0x3f810000u, 0x00012345u, 0x7f7f0000u, 0x00800000u})
      for (uint32_t kept_lsb : {0u, 1u << drop})
        for (int64_t d : {-1, 0, 1}) {
          uint32_t u = (base & ~((1u << drop) - 1u)) | kept_lsb;
          u = static_cast<uint32_t>(static_cast<int64_t>(u + half) + d);
          float x;
          std::memcpy(&x, &u, 4);
          both(x);
        }
  }
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7fbfffffu, 0xffc12345u, 0xff800001u}) {
    float x;
    std::memcpy(&x, &nan, 4);
    v.push_back(x);
  }
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) {  // every exponent, every sign
    const uint32_t b = static_cast<uint32_t>(u);
    float x;
    std::memcpy(&x, &b, 4);
    v.push_back(x);
  }
  std::mt19937 gen(11);
  for (int i = 0; i < 500000; ++i) {
    const uint32_t b = gen();
    float x;
    std::memcpy(&x, &b, 4);
    v.push_back(x);
  }
  v.resize(v.size() / 16 * 16 + 7);  // a tail of 7 after the vectors (the padding values: 0)
  return v;
}

TEST(RoundFast, EveryPathBitForBitTheScalarFunctions) {
  const std::vector<float> values = test_values();
  int paths = 0;
  for (RoundPath p : {RoundPath::scalar, RoundPath::avx2, RoundPath::avx512}) {
    if (!round_path_available(p)) continue;
    ++paths;
    for (auto [f, r] : {std::pair{RoundFormat::tf32, Rounding::nearest_even}, {RoundFormat::tf32, Rounding::nearest_away},
                        {RoundFormat::tf32, Rounding::truncate}, {RoundFormat::bf16, Rounding::nearest_even},
                        {RoundFormat::bf16, Rounding::nearest_away}, {RoundFormat::bf16, Rounding::truncate},
                        {RoundFormat::fp16, Rounding::nearest_even}}) {
      std::vector<float> d = values;
      round_floats_on(p, d.data(), static_cast<int64_t>(d.size()), f, r);
      int64_t bad = 0;
      for (std::size_t i = 0; i < d.size(); ++i) {
        const float want = scalar_round(values[i], f, r);
        if (std::memcmp(&want, &d[i], 4) != 0 && bad++ < 5)
          ADD_FAILURE() << round_path_name(p) << " format " << static_cast<int>(f) << " rule " << static_cast<int>(r)
                        << ": " << std::hexfloat << values[i] << " -> " << d[i] << ", the scalar function " << want;
      }
      EXPECT_EQ(bad, 0) << round_path_name(p);
    }
  }
  EXPECT_GE(paths, 2);  // scalar and at least AVX2 on any x86-64 machine of this project's kind
  std::cout << "best path on this CPU: " << round_path_name(best_round_path()) << ", " << values.size()
            << " values per format\n";
}

// A float32 subnormal rounds in bfloat16 (a multiple of 2^-133 survives); VCVTNEPS2BF16 would give
// 0. The values are worked by hand: 2^-130 is a bfloat16 subnormal (7 mantissa bits below 2^-126).
TEST(RoundFast, Bfloat16KeepsFloat32Subnormals) {
  for (RoundPath p : {RoundPath::avx2, RoundPath::avx512}) {
    if (!round_path_available(p)) continue;
    std::vector<float> d(32, std::ldexp(1.0f, -130));
    d[3] = std::ldexp(1.0f, -130) + std::ldexp(1.0f, -149);  // rounds back to 2^-130
    round_floats_on(p, d.data(), 32, RoundFormat::bf16, Rounding::nearest_even);
    EXPECT_EQ(d[0], std::ldexp(1.0f, -130)) << round_path_name(p);
    EXPECT_EQ(d[3], std::ldexp(1.0f, -130)) << round_path_name(p);
  }
}

}  // namespace
}  // namespace driftlab
