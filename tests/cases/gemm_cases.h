// gemm's one case table: the products C = alpha*op(A)*op(B) + beta*C that
// tests/ops/test_gemm.cpp (eigen and oneDNN against the reference), tests/cuda/test_gemm_cuda.cpp
// (the own CUDA gemm against a float64 reference, on a GPU and under the CUDA emulation) and
// bench/bm_gemm.cpp read. The CUDA test and the benchmark run a row as written; the CPU test runs
// each row's shape under every transpose pair and every kGemmScalings row as well (cheap on the
// CPU, and what its fast kernels branch on).
//
// To add a case: 1) append a row built with gemm(m, n, k) and, where the case needs them,
// .trans(ta, tb) and .scale(alpha, beta); name it for what is awkward about it or for the layer
// it is ('/' allowed: the benchmark names keep it, the gtest names turn it into '_');
// 2) if a consumer cannot afford it, narrow `uses` with a comment why.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "core/ops/gemm.h"
#include "tests/cases/case_uses.h"

namespace driftlab {

// gemm(m, n, k): C(m,n) = A(m,k) * B(k,n), no transposes, alpha 1, beta 0; then the edits.
struct GemmBuilder {
  GemmParams p;
  constexpr GemmBuilder trans(bool ta, bool tb) const {
    GemmBuilder b = *this;
    b.p.trans_a = ta, b.p.trans_b = tb;
    return b;
  }
  constexpr GemmBuilder scale(double alpha, double beta) const {
    GemmBuilder b = *this;
    b.p.alpha = alpha, b.p.beta = beta;
    return b;
  }
  constexpr operator GemmParams() const { return p; }  // NOLINT: rows read as params
};

constexpr GemmBuilder gemm(int64_t m, int64_t n, int64_t k) {
  GemmBuilder b{};
  b.p.m = m, b.p.n = n, b.p.k = k;
  return b;
}

struct GemmCase {
  const char* name;
  GemmParams p;
  unsigned uses = kAllUses;
};

// A dense layer y(B,out) = x(B,in) * W(out,in)^T + b makes three products per training step:
//   forward          m=B,   n=out, k=in,  trans_b
//   backward_data    m=B,   n=in,  k=out              dx = dy * W
//   backward_weight  m=out, n=in,  k=B,   trans_a, beta=1 (accumulates)   dW += dy^T * x
inline constexpr GemmCase kGemmCases[] = {
    // Awkward shapes, tests only: they exist to break blocking and indexing, and a timing of
    // them would say nothing about a model.
    {"1x1x1", gemm(1, 1, 1), kTests},
    {"odd_7x5x3", gemm(7, 5, 3), kTests},
    {"row_vector_1x37x19", gemm(1, 37, 19), kTests},
    {"column_vector_23x1x41", gemm(23, 1, 41), kTests},
    {"odd_33x17x65", gemm(33, 17, 65), kTests},
    {"dense_like_32x120x256", gemm(32, 120, 256), kTests},
    {"tall_130x3x257", gemm(130, 3, 257), kTests},
    {"wide_5x129x2", gemm(5, 129, 2), kTests},
    {"square_96", gemm(96, 96, 96), kTests},
    {"empty_k_4x3x0", gemm(4, 3, 0), kTests},
    {"odd_nn", gemm(37, 53, 29), kTests},
    {"odd_tn", gemm(65, 31, 67).trans(true, false), kTests},
    {"odd_nt", gemm(17, 129, 63).trans(false, true), kTests},
    {"odd_tt_alpha_beta", gemm(70, 66, 18).trans(true, true).scale(0.5, -1.25), kTests},
    {"row_vector", gemm(1, 200, 77).scale(1.0, 1.0), kTests},
    {"column_vector", gemm(150, 1, 33).trans(true, false).scale(2.0, 0.0), kTests},
    // The CUDA gemm's split-K path: few output tiles and a long K.
    {"splitk_conv_dw_like", gemm(16, 144, 20000).trans(false, true).scale(1.0, 1.0), kTests},
    {"splitk_odd", gemm(5, 7, 4099), kTests},
    // Square, benchmark only: the reference takes 0.05 s (512) to 4 s (2048) a product (float32,
    // no transposes; more transposed), which the CPU test's 17 combinations per backend cannot
    // afford, nor the CUDA emulation (17M multiply-adds a second); square_96 tests the shape.
    // bench/compare reads onednn/float32/square_2048 as the machine's float32 peak.
    {"square_512", gemm(512, 512, 512), kBench},
    {"square_1024", gemm(1024, 1024, 1024), kBench},
    {"square_2048", gemm(2048, 2048, 2048), kBench},
    // The dense layers of LeNet-5 (256->120->84->10) and LeNet-1 (192->10) at batch 32, 64 and
    // 128, every consumer.
    {"lenet5_fc1_b32/forward", gemm(32, 120, 256).trans(false, true)},
    {"lenet5_fc1_b32/backward_data", gemm(32, 256, 120)},
    {"lenet5_fc1_b32/backward_weight", gemm(120, 256, 32).trans(true, false).scale(1.0, 1.0)},
    {"lenet5_fc1_b64/forward", gemm(64, 120, 256).trans(false, true)},
    {"lenet5_fc1_b64/backward_data", gemm(64, 256, 120)},
    {"lenet5_fc1_b64/backward_weight", gemm(120, 256, 64).trans(true, false).scale(1.0, 1.0)},
    {"lenet5_fc1_b128/forward", gemm(128, 120, 256).trans(false, true)},
    {"lenet5_fc1_b128/backward_data", gemm(128, 256, 120)},
    {"lenet5_fc1_b128/backward_weight", gemm(120, 256, 128).trans(true, false).scale(1.0, 1.0)},
    {"lenet5_fc2_b32/forward", gemm(32, 84, 120).trans(false, true)},
    {"lenet5_fc2_b32/backward_data", gemm(32, 120, 84)},
    {"lenet5_fc2_b32/backward_weight", gemm(84, 120, 32).trans(true, false).scale(1.0, 1.0)},
    {"lenet5_fc2_b64/forward", gemm(64, 84, 120).trans(false, true)},
    {"lenet5_fc2_b64/backward_data", gemm(64, 120, 84)},
    {"lenet5_fc2_b64/backward_weight", gemm(84, 120, 64).trans(true, false).scale(1.0, 1.0)},
    {"lenet5_fc2_b128/forward", gemm(128, 84, 120).trans(false, true)},
    {"lenet5_fc2_b128/backward_data", gemm(128, 120, 84)},
    {"lenet5_fc2_b128/backward_weight", gemm(84, 120, 128).trans(true, false).scale(1.0, 1.0)},
    {"lenet5_fc3_b32/forward", gemm(32, 10, 84).trans(false, true)},
    {"lenet5_fc3_b32/backward_data", gemm(32, 84, 10)},
    {"lenet5_fc3_b32/backward_weight", gemm(10, 84, 32).trans(true, false).scale(1.0, 1.0)},
    {"lenet5_fc3_b64/forward", gemm(64, 10, 84).trans(false, true)},
    {"lenet5_fc3_b64/backward_data", gemm(64, 84, 10)},
    {"lenet5_fc3_b64/backward_weight", gemm(10, 84, 64).trans(true, false).scale(1.0, 1.0)},
    {"lenet5_fc3_b128/forward", gemm(128, 10, 84).trans(false, true)},
    {"lenet5_fc3_b128/backward_data", gemm(128, 84, 10)},
    {"lenet5_fc3_b128/backward_weight", gemm(10, 84, 128).trans(true, false).scale(1.0, 1.0)},
    {"lenet1_fc_b32/forward", gemm(32, 10, 192).trans(false, true)},
    {"lenet1_fc_b32/backward_data", gemm(32, 192, 10)},
    {"lenet1_fc_b32/backward_weight", gemm(10, 192, 32).trans(true, false).scale(1.0, 1.0)},
    {"lenet1_fc_b64/forward", gemm(64, 10, 192).trans(false, true)},
    {"lenet1_fc_b64/backward_data", gemm(64, 192, 10)},
    {"lenet1_fc_b64/backward_weight", gemm(10, 192, 64).trans(true, false).scale(1.0, 1.0)},
    {"lenet1_fc_b128/forward", gemm(128, 10, 192).trans(false, true)},
    {"lenet1_fc_b128/backward_data", gemm(128, 192, 10)},
    {"lenet1_fc_b128/backward_weight", gemm(10, 192, 128).trans(true, false).scale(1.0, 1.0)},
};

// The scalings the CPU test runs every row's shape under, besides every transpose pair.
struct GemmScaling {
  const char* name;
  double alpha, beta;
};
inline constexpr GemmScaling kGemmScalings[] = {
    {"a1_b0", 1.0, 0.0},     // plain product; C must not be read (NaN-filled)
    {"a0p5_b0", 0.5, 0.0},   // scaled product, C not read
    {"a1_b1", 1.0, 1.0},     // accumulate into C
    {"a1p5_bm0p75", 1.5, -0.75},
};

// The gtest parameter name of a row ('/' -> '_').
inline std::string gemm_case_name(const GemmCase& c) { return case_test_name(c.name); }

// gtest prints a parameter with PrintTo when it finds one (by argument lookup): the row's name.
inline void PrintTo(const GemmCase& c, std::ostream* os) { *os << c.name; }

}  // namespace driftlab
