// What the reduced-precision tests share: Higham's float32 accumulation bound, half a step of a
// result format, bfloat16 neighbours, and the path of an NVIDIA H200 capture
// (tests/data/h200_reduced_precision).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

namespace driftlab {
namespace rp_test {

// |fl(sum) - sum| <= gamma_K sum |terms| for a float32 sum of K terms in any order, gamma_K =
// K u / (1 - K u), u = 2^-24 (Higham, Accuracy and Stability of Numerical Algorithms, 3.1): the
// bound for the tensor cores', oneDNN's and Eigen's undocumented orders alike.
inline double sum_bound_gamma(int64_t k) {
  const double u = std::ldexp(1.0, -24);
  return k * u / (1 - k * u);
}

// Half a step of a format with `mbits` mantissa bits at |v| (0 for a float32 result, mbits 23):
// float16's subnormal grid below 2^-14, float32's exponent range otherwise.
inline double half_step(double v, int mbits) {
  if (mbits >= 23 || v == 0) return 0;
  int e = 0;
  std::frexp(v, &e);
  return std::ldexp(0.5, std::max(e - 1, mbits == 10 ? -14 : -126) - mbits);
}

// The 16 bits a bfloat16 value keeps (v a bfloat16 value held in a double).
inline uint16_t bf16_bits(double v) {
  const float f = static_cast<float>(v);
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>(b >> 16);
}

// Two bfloat16 values one step apart (same sign): what a tie decided two ways gives.
inline bool bf16_neighbours(double a, double b) {
  return std::signbit(a) == std::signbit(b) && std::abs(bf16_bits(a) - bf16_bits(b)) == 1;
}

inline std::string capture(const std::string& name) {
  return std::string(DRIFTLAB_SOURCE_DIR) + "/tests/data/h200_reduced_precision/" + name + ".npy";
}

}  // namespace rp_test
}  // namespace driftlab
