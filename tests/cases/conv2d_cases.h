// conv2d's one case table: the convolutions that tests/ops/test_conv2d.cpp (eigen and oneDNN
// against the reference), tests/cuda/test_conv2d_cuda.cpp (the own CUDA kernels against the
// reference, on a GPU and under the CUDA emulation), bench/bm_conv2d.cpp and bench/bm_cuda.cpp's
// BM_CudaConv2d read. A row is the geometry, the knobs and the tests' batch n; the tests run it
// as written, the benchmarks set their own batch (bm_conv2d 32/64/128, bm_cuda 128) after
// checking the kernel against the reference at batch 2.
//
// To add a case: 1) append a row, named for what is awkward about it or for the model layer it
// is, built with conv(n, c, h, w, k, r, s) and the edits below; 2) if a consumer cannot afford it,
// narrow `uses` with a comment why. Nothing else: every backend, dtype and benchmark picks it up.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "core/ops/conv2d.h"
#include "tests/cases/case_uses.h"

namespace driftlab {

// conv(n, c, h, w, k, r, s), then the edits that make the case awkward:
// conv(2, 3, 7, 9, 5, 3, 3).stride(2).pad(0, 1, 2, 0).flip().
struct Conv2dBuilder {
  Conv2dParams p;
  constexpr Conv2dBuilder stride(int64_t sh, int64_t sw) const {
    Conv2dBuilder b = *this;
    b.p.stride_h = sh, b.p.stride_w = sw;
    return b;
  }
  constexpr Conv2dBuilder stride(int64_t s) const { return stride(s, s); }
  constexpr Conv2dBuilder dilation(int64_t dh, int64_t dw) const {
    Conv2dBuilder b = *this;
    b.p.dil_h = dh, b.p.dil_w = dw;
    return b;
  }
  constexpr Conv2dBuilder dilation(int64_t d) const { return dilation(d, d); }
  constexpr Conv2dBuilder pad(int64_t t, int64_t bottom, int64_t l, int64_t r) const {
    Conv2dBuilder b = *this;
    b.p.pad_t = t, b.p.pad_b = bottom, b.p.pad_l = l, b.p.pad_r = r;
    return b;
  }
  constexpr Conv2dBuilder pad(int64_t all) const { return pad(all, all, all, all); }
  constexpr Conv2dBuilder flip() const {
    Conv2dBuilder b = *this;
    b.p.flip = true;
    return b;
  }
  constexpr operator Conv2dParams() const { return p; }  // NOLINT: rows read as params
};

constexpr Conv2dBuilder conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s) {
  Conv2dBuilder b{};
  b.p.n = n, b.p.c = c, b.p.h = h, b.p.w = w, b.p.k = k, b.p.r = r, b.p.s = s;
  return b;
}

struct Conv2dCase {
  const char* name;
  Conv2dParams p;  // n: the tests' batch (the benchmarks set their own)
  bool bias = true;
  unsigned uses = kAllUses;
};

inline constexpr Conv2dCase kConv2dCases[] = {
    // Awkward shapes, tests only: they exist to break indexing, no model has them, and a
    // timing of them would say nothing about one.
    {"odd_sizes_c3", conv(2, 3, 7, 9, 5, 3, 3).pad(1), true, kTests},
    {"stride2_pad1", conv(3, 3, 11, 10, 4, 3, 3).stride(2).pad(1), true, kTests},
    {"dilation2", conv(2, 2, 9, 11, 3, 3, 2).dilation(2), true, kTests},
    {"asym_pad", conv(2, 3, 8, 7, 4, 3, 3).pad(0, 1, 2, 0), true, kTests},
    {"pad_one_side_only", conv(2, 3, 8, 7, 4, 3, 3).pad(0, 1, 0, 2), true, kTests},
    {"tf_same_stride2_asym", conv(2, 4, 8, 8, 6, 3, 3).stride(2).pad(0, 1, 0, 1), true, kTests},
    {"one_by_one", conv(3, 5, 6, 7, 4, 1, 1), true, kTests},
    {"one_by_one_stride2", conv(2, 3, 7, 6, 5, 1, 1).stride(2), true, kTests},
    {"one_by_one_stride2_pad", conv(2, 3, 7, 6, 5, 1, 1).stride(2).pad(1, 0, 0, 1), true, kTests},
    {"nonsquare_kernel_flip", conv(2, 3, 9, 8, 5, 2, 4).flip().pad(1, 0, 2, 1), true, kTests},
    {"flip_lenet_conv2_no_bias", conv(4, 6, 12, 12, 16, 5, 5).flip(), false, kTests},
    {"c1_mixed_stride_dilation_flip", conv(2, 1, 13, 12, 3, 3, 3).stride(2, 1).dilation(1, 2).flip().pad(1, 0, 0, 2),
     true, kTests},
    {"pad_wider_than_kernel", conv(2, 2, 5, 6, 3, 2, 3).pad(3, 2, 4, 3), true, kTests},
    {"many_channels_c17_k19_stride2_flip", conv(3, 17, 9, 10, 19, 3, 3).stride(2).flip().pad(1, 1, 0, 1), true,
     kTests},
    {"cifar_3x3_c16_same", conv(2, 16, 10, 10, 16, 3, 3).pad(1), true, kTests},
    // Convolutions that are dense layers (every output position meets every input position at
    // one tap; oneDNN's backend runs them as GEMMs): channel counts that are and are not a
    // multiple of the 8 or 16 channel block, flip, a 5x5 kernel, a 1x1 plane.
    {"dense_plane_2x2_flip_c20_k24", conv(3, 20, 2, 2, 24, 3, 3).pad(1).flip(), true, kTests},
    {"dense_plane_3x3_k5x5_pad2_no_bias", conv(2, 16, 3, 3, 32, 5, 5).pad(2), false, kTests},
    {"dense_plane_1x1_plane", conv(4, 32, 1, 1, 16, 3, 3).pad(1), true, kTests},
    // Model layers, every consumer. n is the tests' batch: awkward where a test wanted it so.
    {"lenet5_conv1", conv(1, 1, 28, 28, 6, 5, 5)},    // 1->6, 28x28 -> 24x24; batch 1
    {"lenet5_conv2", conv(7, 6, 12, 12, 16, 5, 5)},   // 6->16, 12x12 -> 8x8; an odd batch
    {"lenet1_conv1", conv(2, 1, 28, 28, 4, 5, 5)},    // 1->4, 28x28 -> 24x24
    {"lenet1_conv2", conv(2, 4, 12, 12, 12, 5, 5)},   // 4->12, 12x12 -> 8x8
    {"resnet20_s1", conv(9, 16, 32, 32, 16, 3, 3).pad(1)},  // 16->16 'same', 32x32; batch 9
    {"resnet20_s2", conv(2, 32, 16, 16, 32, 3, 3).pad(1)},
    {"resnet20_s3", conv(2, 64, 8, 8, 64, 3, 3).pad(1)},
    // VGG-16 at batch 1: at batch 2 the reference's weight gradient of c4 took 1 s a call, and
    // the CPU test makes 6 such calls per backend. These rows run in the CUDA test on a GPU but
    // not under the CUDA emulation: ctest's cuda_emulation filters out *vgg16* (CMakeLists.txt:
    // minutes of emulated convolution; the ResNet-20 rows are the same kind of layer).
    {"vgg16_c1_2", conv(1, 64, 32, 32, 64, 3, 3).pad(1)},
    {"vgg16_c4", conv(1, 512, 4, 4, 512, 3, 3).pad(1)},
    {"vgg16_c5", conv(1, 512, 2, 2, 512, 3, 3).pad(1)},  // 2x2: a dense layer (see above)
};

// The gtest parameter name of a row.
inline std::string conv2d_case_name(const Conv2dCase& c) { return case_test_name(c.name); }

// gtest prints a parameter with PrintTo when it finds one (by argument lookup): the row's name.
inline void PrintTo(const Conv2dCase& c, std::ostream* os) { *os << c.name; }

}  // namespace driftlab
