// pool2d's one case table: the pooling geometries that tests/ops/test_pool2d.cpp (the fast max
// and average kernels against the reference, bit for bit), tests/cuda/test_pool2d_cuda.cpp (the
// own CUDA kernels against the reference, bit for bit, on a GPU and under the CUDA emulation)
// and bench/bm_pool2d.cpp (max and average, fast and reference) read. A row is the shape, the
// window, the stride and the pads; the tie rule and the average's divisor are swept by each
// consumer.
//
// To add a case: 1) append a row built with pool(n, c, h, w) (a 2x2 window, stride 2, no pads)
// and the edits below, named for what is awkward about it or for the layer it is; 2) if a
// consumer cannot afford it, narrow `uses` with a comment why.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "core/ops/pool2d.h"
#include "tests/cases/case_uses.h"

namespace driftlab {

// pool(n, c, h, w): a 2x2 window with stride 2 and no pads, then the edits:
// pool(2, 3, 9, 8).window(3, 3).stride(2, 2).pad(0, 1, 1, 0).
struct Pool2dBuilder {
  Pool2dParams p;
  constexpr Pool2dBuilder window(int64_t kh, int64_t kw) const {
    Pool2dBuilder b = *this;
    b.p.kh = kh, b.p.kw = kw;
    return b;
  }
  constexpr Pool2dBuilder stride(int64_t sh, int64_t sw) const {
    Pool2dBuilder b = *this;
    b.p.stride_h = sh, b.p.stride_w = sw;
    return b;
  }
  constexpr Pool2dBuilder pad(int64_t t, int64_t bottom, int64_t l, int64_t r) const {
    Pool2dBuilder b = *this;
    b.p.pad_t = t, b.p.pad_b = bottom, b.p.pad_l = l, b.p.pad_r = r;
    return b;
  }
  constexpr operator Pool2dParams() const { return p; }  // NOLINT: rows read as params
};

constexpr Pool2dBuilder pool(int64_t n, int64_t c, int64_t h, int64_t w) {
  Pool2dBuilder b{};
  b.p.n = n, b.p.c = c, b.p.h = h, b.p.w = w;
  b.p.kh = b.p.kw = 2, b.p.stride_h = b.p.stride_w = 2;
  return b;
}

struct Pool2dCase {
  const char* name;
  Pool2dParams p;  // ties and count_include_pad: set by the consumer
  unsigned uses = kAllUses;
};

inline constexpr Pool2dCase kPool2dCases[] = {
    // Awkward shapes, tests only: they exist to break indexing and the fast kernels' vector
    // paths, and their timings (microseconds) would say nothing about a model.
    {"lenet_2x2", pool(3, 6, 24, 24), kTests},
    // 2x2 rows of 19 and 17 windows: one full 16-window vector group plus a masked tail.
    {"wide_2x2_tail", pool(2, 3, 6, 38), kTests},
    {"wide_2x2_odd", pool(1, 2, 5, 35), kTests},
    {"cifar_2x2", pool(2, 4, 32, 32), kTests},
    {"odd_input_floor", pool(2, 3, 7, 9), kTests},
    {"overlap_3x3_s2", pool(1, 2, 9, 8).window(3, 3), kTests},
    {"odd_3x3_s2_overlap", pool(2, 3, 9, 11).window(3, 3), kTests},
    {"overlap_3x3_s1", pool(2, 1, 5, 6).window(3, 3).stride(1, 1), kTests},
    {"stride1_overlap_3x3", pool(2, 2, 6, 7).window(3, 3).stride(1, 1).pad(1, 1, 1, 1), kTests},
    {"pad_one_side", pool(1, 3, 6, 7).window(3, 3).pad(0, 1, 1, 0), kTests},
    {"batch1_pad_one_side", pool(1, 2, 7, 8).window(3, 3).pad(0, 1, 1, 0), kTests},
    {"pad_all_sides", pool(2, 2, 5, 5).window(3, 2).stride(2, 1).pad(1, 1, 1, 1), kTests},
    {"torch_ceil_mode_pads", pool(2, 5, 13, 13).window(3, 3).pad(1, 2, 1, 2), kTests},
    {"non_square", pool(1, 4, 10, 3).window(4, 1).stride(3, 1), kTests},
    {"batch1_1x1", pool(1, 1, 4, 4).window(1, 1).stride(1, 1), kTests},
    // Windows that do not overlap, with positions no window covers (the average pool's backward
    // takes a shorter path there): strides past the window and padding; a global pool.
    {"gaps_stride3_2x2_pad", pool(2, 3, 9, 10).window(2, 2).stride(3, 3).pad(1, 0, 1, 0), kTests},
    {"global_8x8", pool(3, 5, 8, 8).window(8, 8).stride(8, 8), kTests},
    // Model layers at the benchmark's batch, every consumer.
    {"lenet5_pool1_b128", pool(128, 6, 24, 24)},
    {"lenet5_pool2_b128", pool(128, 16, 8, 8)},
    {"vgg_like_64x32x32_b32", pool(32, 64, 32, 32)},
    {"resnet20_global_b128", pool(128, 64, 8, 8).window(8, 8).stride(8, 8)},  // ResNet-20's global average
    // torchvision ResNet-18/50's stem pool (3x3, stride 2, pad 1; the graph models' predictions) at
    // batch 8: the overlapping-window paths at a model's size. Benchmark only: 6.4M inputs per case
    // would multiply the tests' time by the sweeps for no new geometry (overlap_3x3_s2 covers it).
    {"resnet_stem_3x3_s2_b8", pool(8, 64, 112, 112).window(3, 3).pad(1, 1, 1, 1), kBench},
};

// The gtest parameter name of a row.
inline std::string pool2d_case_name(const Pool2dCase& c) { return case_test_name(c.name); }

// gtest prints a parameter with PrintTo when it finds one (by argument lookup): the row's name.
inline void PrintTo(const Pool2dCase& c, std::ostream* os) { *os << c.name; }

}  // namespace driftlab
