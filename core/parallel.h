// When an elementwise host loop is worth an OpenMP region. One constant for the activation loops
// (kernels/cpu/activation_loops.h), the residual add (engine/layers/residual_layer.cpp) and the
// attacks' host loops (attacks/gradient.cpp).
#pragma once
#include <cstdint>

namespace driftlab {

// Below this many elements a parallel region (about 1 us to open) costs more than it saves.
constexpr int64_t kParallelMinElements = int64_t{1} << 15;

}  // namespace driftlab
