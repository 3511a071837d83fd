// Reduced-precision number formats as a float32 computation sees them: the value a float32
// operand becomes when it is stored in, or fed to a tensor core as, a narrower format.
//
//   TF32      1 sign, 8 exponent, 10 mantissa bits (float32's range): NVIDIA's tensor-core input
//             format for float32 matmuls and convolutions (Ampere and later) when TF32 math is
//             allowed (PyTorch's torch.backends.cuda.matmul.allow_tf32 / cudnn.allow_tf32,
//             TensorFlow's tf.config.experimental.enable_tensor_float_32_execution).
//   bfloat16  1 sign, 8 exponent, 7 mantissa bits (float32's range): torch.bfloat16, tf.bfloat16.
//   float16   IEEE 754 binary16: 1 sign, 5 exponent, 10 mantissa bits, subnormals from 2^-24,
//             largest finite 65504.
//
// Each rounding takes a float32 and returns the float32 holding the narrower value exactly (a
// round trip through the format). Rounding rules:
//   nearest_even  round to nearest, ties to even: IEEE's default, what a cast to torch.float16 or
//                 torch.bfloat16 does (c10/util/BFloat16.h round_to_nearest_even, c10/util/Half.h
//                 fp16_ieee_from_fp32_value), and the PTX conversion cvt.rn.
//   nearest_away  round to nearest, ties away from zero: PTX cvt.rna.tf32.f32 (the only rounding
//                 PTX offers into TF32), CUTLASS's float -> tfloat32_t converter.
//   truncate      drop the low bits (toward zero): what an mma instruction does with the low 13
//                 bits of a raw float32 register it is given as a .tf32 operand.
// NaN stays NaN (quiet), infinities stay; a finite value that rounds past the format's largest
// becomes infinity of its sign (except under truncate, which never rounds up).
//
// DL_HOST_DEVICE: the CPU emulation and the CUDA kernels share these definitions.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace driftlab {

enum class Rounding { nearest_even, nearest_away, truncate };

DL_HOST_DEVICE inline uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

DL_HOST_DEVICE inline float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// x with its low `drop` mantissa bits rounded away (float32's exponent range: TF32, bfloat16).
// A carry out of the mantissa increments the exponent, as it must (and reaches infinity's
// encoding past the largest finite value).
DL_HOST_DEVICE inline float round_mantissa(float x, int drop, Rounding r) {
  const uint32_t u = float_bits(x);
  if ((u & 0x7f800000u) == 0x7f800000u)  // inf or NaN
    return (u & 0x007fffffu) ? bits_float(u | 0x00400000u) : x;
  const uint32_t low_mask = (1u << drop) - 1u, half = 1u << (drop - 1);
  const uint32_t low = u & low_mask;
  uint32_t kept = u & ~low_mask;
  bool up = false;
  switch (r) {
    case Rounding::truncate: up = false; break;
    case Rounding::nearest_away: up = low >= half; break;
    case Rounding::nearest_even: up = low > half || (low == half && (kept & (1u << drop)) != 0); break;
  }
  if (up) kept += 1u << drop;  // magnitude up: the sign bit is untouched (the carry stops at inf)
  return bits_float(kept);
}

DL_HOST_DEVICE inline float round_to_tf32(float x, Rounding r = Rounding::nearest_even) {
  return round_mantissa(x, 13, r);
}

DL_HOST_DEVICE inline float round_to_bf16(float x, Rounding r = Rounding::nearest_even) {
  return round_mantissa(x, 16, r);
}

// IEEE binary16, round to nearest even (the only rounding used for float16 storage), with its
// subnormals (steps of 2^-24 below 2^-14) and overflow to infinity at 65520 and above.
DL_HOST_DEVICE inline float round_to_fp16(float x) {
  const uint32_t u = float_bits(x);
  const uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
  if (mag >= 0x7f800000u) return mag > 0x7f800000u ? bits_float(u | 0x00400000u) : x;  // NaN, inf
  const float a = bits_float(mag);
  if (a >= 65520.0f) return bits_float(sign | 0x7f800000u);  // past 65504 + half a step
  const int exp = static_cast<int>(mag >> 23) - 127;
  float rounded;
  if (exp >= -14) {
    rounded = round_mantissa(a, 13, Rounding::nearest_even);  // normal binary16: 10 mantissa bits
  } else {
    // Subnormal binary16 (or zero): a multiple of 2^-24. Adding and subtracting 2^-24 * 2^23 = 0.5
    // rounds a to that grid in float32's own round-to-nearest-even (exact: a < 2^-14).
    const float magic = 0.5f;
    volatile float t = a + magic;  // volatile: no reassociation under fast-math
    rounded = t - magic;
  }
  return bits_float(sign | float_bits(rounded));
}

// The math mode of a float32 matmul or convolution: which format its operands take before the
// products (accumulation is float32 in every mode), and which its result is stored in.
//   float32   operands and result as they are
//   tf32      operands rounded to TF32 (by a stated rule), result float32: tensor-core TF32
//   bfloat16  operands and result rounded to bfloat16: an autocast op in bfloat16
//   float16   operands and result rounded to float16: an autocast op in float16
enum class MathMode { float32, tf32, bfloat16, float16 };

DL_HOST_DEVICE inline float round_operand(float x, MathMode m, Rounding tf32_rule) {
  switch (m) {
    case MathMode::float32: return x;
    case MathMode::tf32: return round_to_tf32(x, tf32_rule);
    case MathMode::bfloat16: return round_to_bf16(x);
    case MathMode::float16: return round_to_fp16(x);
  }
  return x;
}

DL_HOST_DEVICE inline float round_result(float x, MathMode m) {
  switch (m) {
    case MathMode::float32:
    case MathMode::tf32: return x;
    case MathMode::bfloat16: return round_to_bf16(x);
    case MathMode::float16: return round_to_fp16(x);
  }
  return x;
}

}  // namespace driftlab
