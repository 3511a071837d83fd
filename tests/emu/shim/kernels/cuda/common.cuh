// CUDA emulation shim (tests/emu), found before kernels/cuda/common.cuh: device math is
// <cmath>'s (the qualifiers go in the shim check.h); the real common.cuh (grid-stride loop,
// ordered_sum_dev) follows, unchanged, on the emulated threadIdx/blockIdx/blockDim/gridDim.
#pragma once
#include <cmath>

#include "kernels/cuda/check.h"

using std::exp;
using std::isfinite;
using std::log;
using std::sqrt;
using std::tanh;
#include "../../../../../kernels/cuda/common.cuh"
