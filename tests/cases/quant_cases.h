// The int8 ops' case tables and their inputs: the quantized convolution geometries, dense shapes
// and max-pooling windows that tests/ops/test_quant_fast.cpp (the fast CPU kernels against the
// reference, byte for byte) and tests/cuda/test_quant_cuda.cpp (the own CUDA dp4a kernels against
// the reference, byte for byte, on a GPU and under the CUDA emulation) read; plus the integer
// inputs and the requantization both sweep (every RequantRule and rounding, per tensor and per
// channel, with and without a fused ReLU clamp).
//
// To add a case: 1) append a row named for what is awkward about it (odd channels, a reduction
// length that is not a multiple of 4 or of a register tile, stride 2 with padding, batch 1 or an
// odd batch) or for the layer it is; 2) if a consumer cannot afford it, narrow `uses` with a
// comment why. To add a requantization rule: add it to kRequantRules.
#pragma once
#include <algorithm>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>

#include "core/ops/requant.h"
#include "tests/cases/case_uses.h"

namespace driftlab {

struct QConvCase {
  const char* name;
  int64_t n, c, h, w, k, r, s, stride_h, stride_w, dil, pad_t, pad_b, pad_l, pad_r;
  unsigned uses = kTests;
  Conv2dParams geometry() const {
    Conv2dParams g;
    g.n = n, g.c = c, g.h = h, g.w = w, g.k = k, g.r = r, g.s = s;
    g.stride_h = stride_h, g.stride_w = stride_w, g.dil_h = g.dil_w = dil;
    g.pad_t = pad_t, g.pad_b = pad_b, g.pad_l = pad_l, g.pad_r = pad_r;
    return g;
  }
};
inline void PrintTo(const QConvCase& c, std::ostream* os) { *os << c.name; }

// One row per geometry; every row runs under every dtype, rule, granularity, bias and clamp. The
// reduction length C*R*S is noted where it is not a multiple of 4 (the dp4a word's tail).
inline constexpr QConvCase kQConvCases[] = {
    {"lenet5_conv1", 3, 1, 28, 28, 6, 5, 5, 1, 1, 1, 0, 0, 0, 0},         // J = 25
    {"lenet5_conv2", 2, 6, 12, 12, 16, 5, 5, 1, 1, 1, 0, 0, 0, 0},        // J = 150
    {"odd_asym_pad", 1, 3, 7, 9, 5, 3, 3, 1, 1, 1, 1, 0, 2, 1},           // J = 27
    {"stride2_pad1", 3, 5, 11, 10, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1},         // J = 45
    {"stride2x1_5x5_asym", 2, 4, 9, 8, 9, 5, 5, 2, 1, 1, 2, 1, 0, 2},     // J = 100
    {"conv1x1", 5, 13, 6, 5, 17, 1, 1, 1, 1, 1, 0, 0, 0, 0},              // J = 13, batch 5
    {"conv1x1_stride2", 1, 8, 7, 7, 3, 1, 1, 2, 2, 1, 0, 0, 0, 0},
    {"dilation2", 2, 3, 10, 10, 4, 3, 3, 1, 1, 2, 2, 2, 2, 2},            // J = 27
    {"k19_pad1", 2, 17, 6, 6, 19, 3, 3, 1, 1, 1, 1, 1, 1, 1},             // J = 153
    {"j288_5x5_pad2", 1, 32, 6, 5, 20, 3, 3, 1, 1, 1, 2, 0, 1, 2},
    // batch 5, odd channels, stride 2 with padding on every side: J = 63
    {"batch5_c7_stride2_pad1", 5, 7, 9, 9, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1},
    // more output channels than one 64-channel CUDA tile, one input channel: J = 9
    {"k70_c1_pad1", 1, 1, 5, 6, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    // the fast CPU kernel's quad plane: channels not a multiple of 4, pad_r > pad_l (the shared
    // padding column), rows wider than one 16-pixel step, stride-2 phases with even and odd pad_l and
    // odd widths, a stride above 2 (the scalar phase split) with dilation
    {"pad_r_gt_pad_l", 2, 5, 6, 7, 3, 3, 3, 1, 1, 1, 0, 1, 0, 2},          // J = 45
    {"wide_rows_33", 1, 6, 5, 33, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1},          // J = 54
    {"stride2_odd_w17", 2, 7, 13, 17, 9, 3, 3, 2, 2, 1, 1, 1, 1, 1},       // J = 63
    {"stride2_pad_l0", 1, 6, 10, 21, 5, 3, 3, 2, 2, 1, 0, 1, 0, 1},        // J = 54
    {"stride2_dil2", 2, 3, 12, 12, 5, 3, 3, 2, 2, 2, 2, 2, 2, 2},          // J = 27
    {"stride1x2_asym", 1, 9, 9, 19, 10, 3, 2, 1, 2, 1, 1, 2, 0, 1},        // J = 54
    {"stride3_dil2", 2, 5, 15, 14, 6, 3, 3, 3, 3, 2, 2, 1, 1, 2},          // J = 45
    // small output planes, where the fast CPU kernel gathers the output columns of several images
    // into one panel (qconv_gathered): VGG-16's 4x4 and 2x2 stages at batches that leave a partial
    // panel, a stride-2 small plane, a 1x1 plane
    {"small_plane_4x4_b11", 11, 20, 4, 4, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // J = 180
    {"small_plane_2x2_b37", 37, 9, 2, 2, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1},   // J = 81
    {"small_plane_stride2_b6", 6, 8, 7, 7, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1},  // 4x4 out
    {"one_pixel_b5", 5, 16, 3, 3, 8, 3, 3, 1, 1, 1, 0, 0, 0, 0},             // 1x1 out
    // ResNet-20's downsampling conv and a stage-3 conv at full size: CPU only (under the CUDA
    // emulation every thread is a fiber; these two would take minutes over the whole sweep)
    {"resnet20_downsample", 1, 16, 32, 32, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1, kCpuTest},
    {"resnet20_stage3", 1, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, kCpuTest},
};

struct QDenseCase {
  int64_t n, in, out;
  unsigned uses = kTests;
};
// batch 1, odd batches, one and several 64-row blocks; `in` not a multiple of 4 (1, 5, 13, 257);
// out of 1, 10, 17 (past two register tiles), 70 (past one 64-channel CUDA tile) and LeNet-5's layers;
// 300 x 522 -> 77: two of the fast CPU kernel's row blocks (240 rows, the last partial) and two of
// its 64-channel runs (the last partial)
inline constexpr QDenseCase kQDenseCases[] = {
    {1, 256, 120}, {3, 5, 10}, {64, 120, 84}, {65, 84, 10}, {130, 257, 17}, {7, 1, 1}, {100, 256, 120},
    {5, 13, 70}, {300, 522, 77},
};

struct QPoolCase {
  int64_t n, c, h, w, kh, kw, sh, sw, pt, pb, pl, pr;
  unsigned uses = kTests;
  Pool2dParams geometry() const {
    Pool2dParams g;
    g.n = n, g.c = c, g.h = h, g.w = w, g.kh = kh, g.kw = kw, g.stride_h = sh, g.stride_w = sw;
    g.pad_t = pt, g.pad_b = pb, g.pad_l = pl, g.pad_r = pr;
    return g;
  }
};
inline constexpr QPoolCase kQPoolCases[] = {
    {3, 6, 24, 24, 2, 2, 2, 2, 0, 0, 0, 0}, {1, 5, 9, 7, 2, 2, 2, 2, 0, 0, 0, 0}, {2, 3, 11, 10, 3, 3, 2, 2, 1, 1, 1, 1},
    {2, 4, 6, 7, 3, 3, 1, 1, 0, 2, 1, 0},   {1, 2, 5, 5, 2, 3, 1, 2, 1, 0, 0, 1}, {5, 7, 5, 5, 3, 3, 2, 2, 1, 1, 1, 1},
};

inline constexpr RequantRule kRequantRules[] = {
    RequantRule::fixed_point_double_rounding, RequantRule::fixed_point_single_rounding, RequantRule::float_multiply,
    RequantRule::float_multiply_add_zp};
inline bool is_fixed_point(RequantRule r) {
  return r == RequantRule::fixed_point_double_rounding || r == RequantRule::fixed_point_single_rounding;
}

// Uniform integers in [lo, hi] of an integer dtype (random_tensor makes floats), from the seed.
inline Tensor random_int(Shape shape, DType dtype, uint64_t seed, int64_t lo, int64_t hi) {
  Tensor t(std::move(shape), dtype);
  std::mt19937_64 gen(seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = lo + static_cast<int64_t>(gen() % static_cast<uint64_t>(hi - lo + 1));
    if (dtype == DType::u8) t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    if (dtype == DType::i8) t.data<int8_t>()[i] = static_cast<int8_t>(v);
    if (dtype == DType::i32) t.data<int32_t>()[i] = static_cast<int32_t>(v);
  }
  return t;
}

inline int32_t type_min(DType t) { return t == DType::i8 ? -128 : 0; }
inline int32_t type_max(DType t) { return t == DType::i8 ? 127 : 255; }

// Requantization for `k` channels whose accumulators are of size ~acc_scale: multipliers spread
// so that outputs cover the range and saturate at both ends (ties: the *TiesRoundAsTheReference tests).
inline Requant make_requant(RequantRule rule, RoundRule round, bool per_channel, int64_t k, double acc_scale,
                            DType yt, bool relu, uint64_t seed) {
  Requant rq;
  rq.rule = rule;
  rq.round = round;
  rq.zero_point = yt == DType::i8 ? -3 : 7;
  rq.lo = relu ? std::max(type_min(yt), rq.zero_point) : type_min(yt);
  rq.hi = type_max(yt);
  const int64_t nch = per_channel ? k : 1;
  // tests/test_util.h's random_tensor values (no gtest here: the benchmarks may read this header)
  std::mt19937_64 gen_u(seed), gen_b(seed + 1);
  auto uniform = [](std::mt19937_64& g, double lo, double hi) {
    return lo + (hi - lo) * (static_cast<double>(g() >> 11) * 0x1.0p-53);
  };
  for (int64_t i = 0; i < nch; ++i) {
    RequantChannel ch;
    const double m = uniform(gen_u, 0.3, 3.0) * 100.0 / acc_scale;
    const double fb = uniform(gen_b, -400.0, 400.0);
    ch.scale = static_cast<float>(m);
    // float_multiply_add_zp (oneDNN) and float_multiply (fbgemm) may carry a float bias
    ch.bias = i % 2 == 1 ? static_cast<float>(fb) : 0.f;
    ch.fixed = quantize_multiplier(m, rule == RequantRule::fixed_point_single_rounding);
    rq.channels.push_back(ch);
  }
  return rq;
}

inline std::string rule_str(RequantRule r, RoundRule rr) {
  return std::string(requant_rule_name(r)) + "/" + round_rule_name(rr);
}

}  // namespace driftlab
