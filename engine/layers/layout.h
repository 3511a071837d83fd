// Channel-blocked activations: (N,C,H,W) stored as (N, C/B, H, W, B), B channels side by side
// (oneDNN's nChw16c / nChw8c), the layout its convolution kernels compute in. Keeping a network's
// activations in it between layers that understand it saves the reorders to and from NCHW around
// every convolution (docs/research/blocked_layout_plan.md).
//
// The Tensor carries its block (Tensor::channel_block); data<T>() refuses a blocked tensor, so
// layout-unaware code fails by name instead of reading channels in the wrong places. Who produces
// and who accepts blocked tensors is negotiated by Sequential (Layer::input_block,
// RunContext::out_block); a network's output and its input gradient are always plain.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace driftlab {

// What a layer's forward accepts (Layer::input_block): 0 = plain only; kAnyBlock = any layout,
// the output and the gradients in the input's (elementwise and per-channel layers);
// kAsProduced = any layout, the output carrying none (a global pool's (N,C)): it asks nothing of
// the layer before it, which then keeps the block it computes in (RunContext::out_block
// kAsProduced: a convolution writes its kernel's block); dx in the input's layout.
constexpr int kAnyBlock = -1;
constexpr int kAsProduced = -2;

// Whether a layer whose input_block is `takes` reads a tensor in block b as it is.
inline bool takes_block(int takes, int b) { return takes == kAnyBlock || takes == kAsProduced || takes == b; }

// x in channel block b (0: plain): x itself when it already is, else a converted copy. Any float
// dtype; every element moved, none computed.
Tensor to_block(const Tensor& x, int b);
inline Tensor to_plain(const Tensor& x) { return to_block(x, 0); }

// The flat element offset of (n, c, h, w) in a (N,C,H,W) tensor stored with channel block b.
inline int64_t blocked_offset(int64_t n, int64_t c, int64_t s, int64_t channels, int64_t plane, int b) {
  if (b == 0) return (n * channels + c) * plane + s;
  return ((n * (channels / b) + c / b) * plane + s) * b + c % b;
}

}  // namespace driftlab
