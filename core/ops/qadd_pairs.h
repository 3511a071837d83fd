// Where two rules of the quantized add part: every pair of stored uint8 values through qadd_one
// (core/ops/qadd.h) under two resolved parameter sets. What `driftlab explain quant_add` and the
// casebook's qnnpack-qadd-rounding count.
#pragma once
#include <cstdint>

#include "core/ops/qadd.h"

namespace driftlab {

// How many of the 65,536 pairs (a, b) of stored uint8 values give different outputs under p and q
// (each resolve()d; elementwise, no tail: position 0, body 0).
inline int64_t qadd_pairs_differing(const QAddParams& p, const QAddParams& q) {
  int64_t differ = 0;
  for (int32_t a = 0; a < 256; ++a)
    for (int32_t b = 0; b < 256; ++b) differ += qadd_one(p, a, b, 0, 0, 0, 255) != qadd_one(q, a, b, 0, 0, 0, 255);
  return differ;
}

}  // namespace driftlab
