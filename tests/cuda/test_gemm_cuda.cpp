// CUDA gemm (own tiled kernel; cuBLAS in test_vendor_cuda.cpp) against the reference gemm on
// tests/cases/gemm_cases.h's rows (shared with the CPU test and the benchmark), each as written:
// odd sizes, 1-wide, an empty K, both transposes, beta != 0, shapes that take the split-K path,
// and the LeNet dense layers' products. Float64 runs are checked with the f64 bound, float32 runs against a float64
// reference of the same float inputs with the f32 bound (gamma_K * sum|a||b|).
#include <gtest/gtest.h>

#include <string>

#include "core/ops/gemm.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cuda/ops.h"
#include "tests/cases/gemm_cases.h"
#include "tests/cuda/cuda_test_util.h"

namespace driftlab {
namespace {

class CudaGemm : public ::testing::TestWithParam<std::tuple<GemmCase, DType>> {};

TEST_P(CudaGemm, MatchesReference) {
  REQUIRE_CUDA_DEVICE();
  const GemmCase& gc = std::get<0>(GetParam());
  const DType dt = std::get<1>(GetParam());
  const GemmParams& p = gc.p;
  Tensor a = random_tensor(p.trans_a ? Shape{p.k, p.m} : Shape{p.m, p.k}, dt, 1);
  Tensor b = random_tensor(p.trans_b ? Shape{p.n, p.k} : Shape{p.k, p.n}, dt, 2);
  Tensor c0 = random_tensor({p.m, p.n}, dt, 3);
  // Reference in float64 from the same values, and the same gemm on |a|,|b|,|c| for the bound.
  Tensor ref = c0.to(DType::f64), bound = abs64(c0);
  gemm_ref<double>(p, a.to(DType::f64).data<double>(), b.to(DType::f64).data<double>(), ref.data<double>());
  GemmParams pa = p;
  pa.alpha = p.alpha < 0 ? -p.alpha : p.alpha, pa.beta = p.beta < 0 ? -p.beta : p.beta;
  gemm_ref<double>(pa, abs64(a).data<double>(), abs64(b).data<double>(), bound.data<double>());

  cuda::CudaContext ctx;
  cuda::DeviceTensor da = cuda::to_device(ctx, a), db = cuda::to_device(ctx, b), dc = cuda::to_device(ctx, c0);
  cuda::gemm_own(ctx, p, da, db, dc);
  Tensor got = cuda::to_host(ctx, dc);
  // K products, the alpha/beta scaling and the beta*C add: gamma_{K+2} of sum|terms|.
  const double atol = gamma_n(p.k + 2, dt) * max_abs(bound);
  EXPECT_TRUE(all_close(got, ref, atol, 0.0)) << gc.name;
}

TEST_P(CudaGemm, SameBitsTwice) {
  REQUIRE_CUDA_DEVICE();
  const GemmCase& gc = std::get<0>(GetParam());
  const DType dt = std::get<1>(GetParam());
  const GemmParams& p = gc.p;
  Tensor a = random_tensor(p.trans_a ? Shape{p.k, p.m} : Shape{p.m, p.k}, dt, 4);
  Tensor b = random_tensor(p.trans_b ? Shape{p.n, p.k} : Shape{p.k, p.n}, dt, 5);
  Tensor c0 = random_tensor({p.m, p.n}, dt, 6);
  cuda::CudaContext ctx;
  cuda::DeviceTensor da = cuda::to_device(ctx, a), db = cuda::to_device(ctx, b);
  cuda::DeviceTensor c1 = cuda::to_device(ctx, c0), c2 = cuda::to_device(ctx, c0);
  cuda::gemm_own(ctx, p, da, db, c1);
  cuda::gemm_own(ctx, p, da, db, c2);
  EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, c1), cuda::to_host(ctx, c2)));  // no atomics, fixed split order
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaGemm,
                         ::testing::Combine(::testing::ValuesIn(cases_for(kGemmCases, kCudaTest)),
                                            ::testing::Values(DType::f32, DType::f64)),
                         [](const auto& info) {
                           return gemm_case_name(std::get<0>(info.param)) + "_" + dtype_name(std::get<1>(info.param));
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
