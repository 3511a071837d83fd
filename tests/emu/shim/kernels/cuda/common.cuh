// CUDA emulation shim (tests/emu), found before kernels/cuda/common.cuh: device math is
// <cmath>'s, __dp4a is computed byte by byte as the PTX instruction does (the qualifiers go in the
// shim check.h); the real common.cuh (grid-stride loop,
// ordered_sum_dev) follows, unchanged, on the emulated threadIdx/blockIdx/blockDim/gridDim.
#pragma once
#include <cmath>

#include "kernels/cuda/check.h"

using std::exp;
using std::isfinite;
using std::log;
using std::sqrt;
using std::tanh;

// __dp4a as the PTX instruction dp4a computes it (PTX ISA, "dp4a"): the four bytes of a times the
// four bytes of b, byte i with byte i, each byte signed or unsigned as its operand's type says, the
// four products added to c in 32 bits, wrapping (dp4a has no saturating form). Each product
// (|p| <= 255*255) is exact in int32; the additions are done in uint32, so that a wrap is the
// hardware's modular sum and not undefined behaviour. The order of the additions cannot matter:
// modular addition is associative. CUDA 13's sm_61_intrinsics.h declares the two scalar overloads
// used here (signed x signed with int accumulate, unsigned x unsigned with unsigned accumulate).
template <bool kASigned, bool kBSigned>
inline unsigned dl_emu_dp4a(unsigned a, unsigned b, unsigned c) {
  unsigned acc = c;
  for (int i = 0; i < 4; ++i) {
    const unsigned ab = (a >> (8 * i)) & 0xFFu, bb = (b >> (8 * i)) & 0xFFu;
    const int av = kASigned ? static_cast<int>(static_cast<signed char>(ab)) : static_cast<int>(ab);
    const int bv = kBSigned ? static_cast<int>(static_cast<signed char>(bb)) : static_cast<int>(bb);
    acc += static_cast<unsigned>(av * bv);
  }
  return acc;
}
inline int __dp4a(int a, int b, int c) {
  return static_cast<int>(dl_emu_dp4a<true, true>(static_cast<unsigned>(a), static_cast<unsigned>(b),
                                                  static_cast<unsigned>(c)));
}
inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) { return dl_emu_dp4a<false, false>(a, b, c); }
#include "../../../../../kernels/cuda/common.cuh"
