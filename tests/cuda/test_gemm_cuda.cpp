// CUDA gemm (own tiled kernel; cuBLAS in test_vendor_cuda.cpp) against the reference gemm on
// awkward shapes: odd sizes, 1-wide, both transposes, beta != 0, and shapes that take the
// split-K path. Float64 runs are checked with the f64 bound, float32 runs against a float64
// reference of the same float inputs with the f32 bound (gamma_K * sum|a||b|).
#include <gtest/gtest.h>

#include <vector>

#include "engine/ops/gemm.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cuda/ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace driftlab {
namespace {

struct GemmCase {
  const char* name;
  int64_t m, n, k;
  bool ta, tb;
  double alpha, beta;
};

const std::vector<GemmCase>& gemm_cases() {
  static const std::vector<GemmCase> cases = {
      {"tiny_1x1x1", 1, 1, 1, false, false, 1.0, 0.0},
      {"odd_nn", 37, 53, 29, false, false, 1.0, 0.0},
      {"odd_tn", 65, 31, 67, true, false, 1.0, 0.0},
      {"odd_nt", 17, 129, 63, false, true, 1.0, 0.0},
      {"odd_tt_alpha_beta", 70, 66, 18, true, true, 0.5, -1.25},
      {"row_vector", 1, 200, 77, false, false, 1.0, 1.0},
      {"column_vector", 150, 1, 33, true, false, 2.0, 0.0},
      {"splitk_conv_dw_like", 16, 144, 20000, false, true, 1.0, 1.0},  // few tiles, long K
      {"splitk_odd", 5, 7, 4099, false, false, 1.0, 0.0},
  };
  return cases;
}

class CudaGemm : public ::testing::TestWithParam<std::tuple<GemmCase, DType>> {};

TEST_P(CudaGemm, MatchesReference) {
  REQUIRE_CUDA_DEVICE();
  const GemmCase& gc = std::get<0>(GetParam());
  const DType dt = std::get<1>(GetParam());
  GemmParams p;
  p.m = gc.m, p.n = gc.n, p.k = gc.k, p.trans_a = gc.ta, p.trans_b = gc.tb, p.alpha = gc.alpha, p.beta = gc.beta;
  Tensor a = random_tensor(gc.ta ? Shape{gc.k, gc.m} : Shape{gc.m, gc.k}, dt, 1);
  Tensor b = random_tensor(gc.tb ? Shape{gc.n, gc.k} : Shape{gc.k, gc.n}, dt, 2);
  Tensor c0 = random_tensor({gc.m, gc.n}, dt, 3);
  // Reference in float64 from the same values, and the same gemm on |a|,|b|,|c| for the bound.
  Tensor ref = c0.to(DType::f64), bound = abs64(c0);
  gemm_ref<double>(p, a.to(DType::f64).data<double>(), b.to(DType::f64).data<double>(), ref.data<double>());
  GemmParams pa = p;
  pa.alpha = gc.alpha < 0 ? -gc.alpha : gc.alpha, pa.beta = gc.beta < 0 ? -gc.beta : gc.beta;
  gemm_ref<double>(pa, abs64(a).data<double>(), abs64(b).data<double>(), bound.data<double>());

  cuda::CudaContext ctx;
  cuda::DeviceTensor da = cuda::to_device(ctx, a), db = cuda::to_device(ctx, b), dc = cuda::to_device(ctx, c0);
  cuda::gemm_own(ctx, p, da, db, dc);
  Tensor got = cuda::to_host(ctx, dc);
  // K products, the alpha/beta scaling and the beta*C add: gamma_{K+2} of sum|terms|.
  const double atol = gamma_n(gc.k + 2, dt) * max_abs(bound);
  EXPECT_TRUE(all_close(got, ref, atol, 0.0)) << gc.name;
}

TEST_P(CudaGemm, SameBitsTwice) {
  REQUIRE_CUDA_DEVICE();
  const GemmCase& gc = std::get<0>(GetParam());
  const DType dt = std::get<1>(GetParam());
  GemmParams p;
  p.m = gc.m, p.n = gc.n, p.k = gc.k, p.trans_a = gc.ta, p.trans_b = gc.tb, p.alpha = gc.alpha, p.beta = gc.beta;
  Tensor a = random_tensor(gc.ta ? Shape{gc.k, gc.m} : Shape{gc.m, gc.k}, dt, 4);
  Tensor b = random_tensor(gc.tb ? Shape{gc.n, gc.k} : Shape{gc.k, gc.n}, dt, 5);
  Tensor c0 = random_tensor({gc.m, gc.n}, dt, 6);
  cuda::CudaContext ctx;
  cuda::DeviceTensor da = cuda::to_device(ctx, a), db = cuda::to_device(ctx, b);
  cuda::DeviceTensor c1 = cuda::to_device(ctx, c0), c2 = cuda::to_device(ctx, c0);
  cuda::gemm_own(ctx, p, da, db, c1);
  cuda::gemm_own(ctx, p, da, db, c2);
  EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, c1), cuda::to_host(ctx, c2)));  // no atomics, fixed split order
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaGemm,
                         ::testing::Combine(::testing::ValuesIn(gemm_cases()),
                                            ::testing::Values(DType::f32, DType::f64)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  dtype_name(std::get<1>(info.param));
                         });

TEST(CudaGemmArgs, ShapeMismatchIsAnError) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  GemmParams p;
  p.m = 2, p.n = 3, p.k = 4;
  cuda::DeviceTensor a(ctx, {2, 4}, DType::f32), b(ctx, {4, 3}, DType::f32), c(ctx, {3, 3}, DType::f32);
  EXPECT_THROW(cuda::gemm_own(ctx, p, a, b, c), Error);
}

}  // namespace
}  // namespace driftlab
