// Eigen gemm: C = alpha*op(A)*op(B) + beta*C on row-major float and double matrices, through
// Eigen::Map (no copies) and noalias() products. beta == 0 writes C (=) without reading it;
// otherwise C is scaled by beta and the product added. Eigen splits one product over
// omp_get_max_threads() OpenMP threads (rows of C per thread, every dot product done by one
// thread in a fixed blocking), so results are bitwise reproducible for a fixed thread count.
// Inside an enclosing OpenMP parallel region Eigen runs single-threaded (it checks
// omp_get_num_threads() > 1), which is what conv2d_eigen relies on.
#include "core/eigen.h"
#include "core/ops/gemm.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

template <typename T>
using RowMajorMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

template <typename T, typename OpA, typename OpB>
void multiply_into(const GemmParams& p, const OpA& op_a, const OpB& op_b, T* c) {
  Eigen::Map<RowMajorMatrix<T>> cm(c, p.m, p.n);
  const T alpha = static_cast<T>(p.alpha);
  if (p.beta == 0.0) {
    cm.noalias() = alpha * op_a * op_b;  // never reads C: NaNs in C must not leak through
    return;
  }
  if (p.beta != 1.0) cm *= static_cast<T>(p.beta);
  cm.noalias() += alpha * op_a * op_b;
}

// a:(M,K) or (K,M) when trans_a; b:(K,N) or (N,K) when trans_b; c:(M,N). All row-major.
template <typename T>
void gemm_eigen(const GemmParams& p, const T* a, const T* b, T* c) {
  check(p.m >= 0 && p.n >= 0 && p.k >= 0, "gemm_eigen: negative size m=", p.m, " n=", p.n, " k=", p.k);
  if (p.m == 0 || p.n == 0) return;
  using ConstMap = Eigen::Map<const RowMajorMatrix<T>>;
  const ConstMap am(a, p.trans_a ? p.k : p.m, p.trans_a ? p.m : p.k);
  const ConstMap bm(b, p.trans_b ? p.n : p.k, p.trans_b ? p.k : p.n);
  if (!p.trans_a && !p.trans_b) multiply_into(p, am, bm, c);
  if (!p.trans_a && p.trans_b) multiply_into(p, am, bm.transpose(), c);
  if (p.trans_a && !p.trans_b) multiply_into(p, am.transpose(), bm, c);
  if (p.trans_a && p.trans_b) multiply_into(p, am.transpose(), bm.transpose(), c);
}

}  // namespace

void register_gemm_eigen(KernelRegistry& reg) {
  GemmKernel k;
  k.name = "eigen";
  k.supports_doc = "float32 and float64, sum float32 (sum_order: Eigen's own)";
  k.supports = [](const GemmParams& p, DType) { return p.sum == GemmSum::float32; };
  k.f32 = gemm_eigen<float>;
  k.f64 = gemm_eigen<double>;
  reg.gemm.at(KernelBackend::eigen) = k;
}

}  // namespace driftlab
