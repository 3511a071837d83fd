// The fast CPU kernels' dispatch on a channel-blocked tensor's block (engine/layers/layout.h:
// (N, C/B, H, W, B), B channels side by side): the loops are compiled for B = 8 and 16, the
// blocks oneDNN's convolutions compute in on AVX2 and AVX-512 machines.
#pragma once
#include <type_traits>

#include "core/error.h"
#include "core/tensor.h"

namespace driftlab {

// Calls f(std::integral_constant<int, B>) for x's channel block (8 or 16); fails naming `fn`
// for any other (a plain tensor included: the caller takes its plain loops first).
template <typename F>
void for_block(const char* fn, const Tensor& x, F&& f) {
  switch (x.channel_block()) {
    case 8: return f(std::integral_constant<int, 8>{});
    case 16: return f(std::integral_constant<int, 16>{});
    default: fail(fn, ": channel block ", x.channel_block(), " (the fast kernel takes plain, 8 or 16)");
  }
}

// `other` (y, dy, dx) must be in x's layout.
inline void check_same_block(const char* fn, const Tensor& x, const Tensor& other, const char* name) {
  if (other.channel_block() != x.channel_block())
    fail(fn, ": ", name, " in channel block ", other.channel_block(), ", x in ", x.channel_block());
}

}  // namespace driftlab
