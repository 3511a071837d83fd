// Random engines of the three frameworks, each with its own float conversion, and the two
// shuffling algorithms. Written from the published algorithms and the frameworks' documented
// conversions (see docs/POLICIES.md, knobs rng_engine and shuffle); no state is global:
// every stream is an Rng value owned by whoever draws from it.
#pragma once
#include <cstddef>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/policy.h"

namespace driftlab {

class Rng {
 public:
  Rng(RngEngine engine, uint64_t seed);

  uint32_t next_u32();  // 32 random bits (31 for MRG31k3p)
  // U[0,1) in float with the engine's conversion:
  //   mt19937_u24: (r & 0xFFFFFF) * 2^-24          (PyTorch CPU uniform_real)
  //   philox_u23:  bits 0x3F800000 | (r & 0x7FFFFF) as float, minus 1   (TF Uint32ToFloat)
  //   mrg31k3p:    z * 4.6566126e-10f                (Theano rng_mrg NORM for float32)
  float uniform_f32();
  double uniform_f64();  // 53 bits from two draws (mrg31k3p: z * 2^-31, Theano float64)
  // u*(hi-lo) + lo in T, the form all three frameworks use for uniform(lo, hi). For
  // mt19937_u24 it is one fused multiply-add, as PyTorch's AVX2/AVX-512 CPU kernels compute it
  // (the compiler contracts uniform_real_distribution's x*(to-from)+from; PyTorch forced to
  // ATEN_CPU_CAPABILITY=default rounds twice) — found by the PyTorch oracle test.
  template <typename T>
  T uniform(T lo, T hi);

  RngEngine engine() const { return engine_; }

  // The whole state as text (the engine's name, then its words), for checkpoints; set_state
  // takes what state() wrote for the same engine and throws naming the field it could not read.
  std::string state() const;
  void set_state(const std::string& text);

 private:
  RngEngine engine_;
  std::mt19937 mt_;
  // Philox4x32-10 state: 128-bit counter, 64-bit key, 4 buffered outputs.
  std::array<uint32_t, 4> ctr_{}, buf_{};
  std::array<uint32_t, 2> key_{};
  int buf_pos_ = 4;
  // MRG31k3p state: two components of three words each.
  std::array<int64_t, 3> x1_{}, x2_{};
};

template <>
inline float Rng::uniform<float>(float lo, float hi) {
  const float u = uniform_f32();
  return engine_ == RngEngine::mt19937_u24 ? std::fma(u, hi - lo, lo) : u * (hi - lo) + lo;
}
template <>
inline double Rng::uniform<double>(double lo, double hi) {
  const double u = uniform_f64();
  return engine_ == RngEngine::mt19937_u24 ? std::fma(u, hi - lo, lo) : u * (hi - lo) + lo;
}

// Standard normals by Marsaglia and Tsang's ziggurat ("The Ziggurat Method for Generating Random
// Variables", J. Stat. Softw. 5(8), 2000: 128 layers, r = 3.442619855899), written from the paper,
// drawing 32-bit words from an Rng. The layer index comes from a second word rather than the low
// bits of the value's word (Doornik 2005: that reuse correlates them). Not any framework's
// normals: for draws no framework semantics depends on (the Boundary attack's random directions,
// whose libraries' own numpy streams cannot be reproduced anyway). About 2 words per draw.
class ZigguratNormal {
 public:
  explicit ZigguratNormal(Rng& rng) : rng_(rng) {}
  double next();

 private:
  double tail_or_wedge(int32_t hz, uint32_t iz);
  double unit_open();  // U(0, 1]
  Rng& rng_;
};

// Philox4x32-10 block function (Salmon et al., SC'11): exposed for its known-answer test.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key);

// A permutation of 0..n-1 drawn from `mt` (an MT19937 stream):
//   forward_modulo:     for i in 0..n-2: j = i + r32 % (n-i); swap(i, j)   (torch.randperm CPU)
//   backward_rejection: for i in n-1..1: j = r32 & mask, redrawn while j > i; swap(i, j)
//                       (numpy RandomState.shuffle via rk_interval)
//   none:               the identity
std::vector<int64_t> permutation(int64_t n, ShuffleAlgo algo, std::mt19937& mt);

// An MT19937 stream's state as the standard's operator<< writes it (624 words and the
// position), and back; mt19937_from_text throws naming `what` when the text is not one.
std::string mt19937_text(const std::mt19937& mt);
void mt19937_from_text(std::mt19937& mt, const std::string& text, const std::string& what);

// FNV-1a 64 of n bytes, continuing from h (the offset basis to start): the content hashes runs
// record (data order, --init sources).
constexpr uint64_t kFnv1a64Basis = 14695981039346656037ull;
uint64_t fnv1a64(const void* data, std::size_t n, uint64_t h = kFnv1a64Basis);

// FNV-1a 64 of a permutation's indices (each as 8 little-endian bytes): one number per epoch
// that says whether two runs saw the same batches in the same order.
uint64_t order_hash(const std::vector<int64_t>& order);

}  // namespace driftlab
