// cuBLAS gemm for row-major driftlab matrices: C = alpha*op(A)*op(B) + beta*C is computed as
// the column-major C^T = op(B)^T op(A)^T, i.e. cublas<t>gemm(opB, opA, n, m, k, B, A, C).
// Math mode per call from CudaExecParams::tf32_matmul (CUBLAS_TF32_TENSOR_OP_MATH vs
// CUBLAS_DEFAULT_MATH, which is plain FP32 unless NVIDIA_TF32_OVERRIDE forces otherwise);
// deterministic disallows cuBLAS atomics (the default, set explicitly so the switch is visible).
#include "kernels/cuda/cublas/cublas_api.h"

#include "kernels/cuda/check.h"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {

void gemm_cublas(CudaContext& ctx, const GemmParams& p, const DeviceTensor& a, const DeviceTensor& b,
                 DeviceTensor& c) {
  check(a.numel() == p.m * p.k && b.numel() == p.k * p.n && c.numel() == p.m * p.n, "gemm_cublas: m=", p.m,
        " n=", p.n, " k=", p.k, " but a ", shape_str(a.shape()), ", b ", shape_str(b.shape()), ", c ",
        shape_str(c.shape()));
  check(a.dtype() == b.dtype() && b.dtype() == c.dtype(), "gemm_cublas: mixed dtypes");
  check(p.m <= 2147483647 && p.n <= 2147483647 && p.k <= 2147483647, "gemm_cublas: sizes above int range");
  if (p.m == 0 || p.n == 0) return;
  cublasHandle_t h = static_cast<cublasHandle_t>(ctx.cublas());
  const CudaExecParams& ep = ctx.params();
  DL_CUBLAS_CHECK(cublas_api().set_math_mode(h, ep.tf32_matmul ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  DL_CUBLAS_CHECK(cublas_api().set_atomics_mode(h, ep.deterministic ? CUBLAS_ATOMICS_NOT_ALLOWED : CUBLAS_ATOMICS_ALLOWED));
  const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  const cublasOperation_t opa = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, opb = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = p.trans_a ? m : k, ldb = p.trans_b ? k : n;  // row lengths of the stored matrices
  if (a.dtype() == DType::f32) {
    const float alpha = static_cast<float>(p.alpha), beta = static_cast<float>(p.beta);
    DL_CUBLAS_CHECK(cublas_api().sgemm(h, opb, opa, n, m, k, &alpha, b.data<float>(), ldb, a.data<float>(), lda, &beta,
                                c.data<float>(), n));
  } else {
    const double alpha = p.alpha, beta = p.beta;
    DL_CUBLAS_CHECK(cublas_api().dgemm(h, opb, opa, n, m, k, &alpha, b.data<double>(), ldb, a.data<double>(), lda, &beta,
                                c.data<double>(), n));
  }
}

}  // namespace cuda
}  // namespace driftlab
