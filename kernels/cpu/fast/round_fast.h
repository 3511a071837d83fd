// In-place rounding of float32 arrays to the values a reduced format holds: TF32 or bfloat16
// (the low 13 or 16 mantissa bits rounded away by a stated rule) and IEEE binary16 (round to
// nearest even, subnormals, overflow to infinity), bit for bit as core/ops/reduced_precision.h's
// scalar functions, which are the reference (round_floats_reference). NaN becomes the quiet NaN
// those functions give (the input's bits with the quiet bit set); infinities stay.
//
// The vector paths: TF32 and bfloat16 by integer arithmetic on the bits (add half a step less one
// plus the kept least significant bit, clear the dropped bits: exact for subnormal inputs too);
// float16 by the F16C round trip (VCVTPS2PH with round-to-nearest-even, then VCVTPH2PS), which
// yields IEEE binary16 including its subnormals. AVX-512 BF16's VCVTNEPS2BF16 is not used: it
// treats float32 subnormal inputs as zero and flushes subnormal results, while a bfloat16 cast
// (c10::BFloat16, tf.bfloat16 on the CPU) rounds them.
#pragma once

#include <cstdint>

#include "core/ops/reduced_precision.h"

namespace driftlab {

enum class RoundFormat { tf32, bf16, fp16 };
enum class RoundPath { scalar, avx2, avx512 };
const char* round_path_name(RoundPath p);

// The scalar loop (the reference), and one path by name (available: this CPU runs it).
void round_floats_reference(float* d, int64_t n, RoundFormat f, Rounding rule);
bool round_path_available(RoundPath p);
void round_floats_on(RoundPath p, float* d, int64_t n, RoundFormat f, Rounding rule);
// The fastest available path. `rule` applies to tf32 and bf16 (float16 is always nearest even).
RoundPath best_round_path();
void round_floats(float* d, int64_t n, RoundFormat f, Rounding rule);

}  // namespace driftlab
