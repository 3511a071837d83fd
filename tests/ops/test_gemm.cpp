// Fast gemm kernels (eigen f32/f64, onednn f32) against the reference, parameterised over
// (backend x dtype x case), each case run as written and under every transpose pair and
// scaling (trans_a x trans_b x alpha/beta), plus the onednn float64 fallback and bitwise
// reproducibility with 2 threads.
//
// The cases are tests/cases/gemm_cases.h's rows (shared with the CUDA test and the benchmark),
// the scalings its kGemmScalings: to add one, append it there; every backend, dtype and
// transpose combination picks it up.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "core/ops/gemm.h"
#include "kernels/cpu/registry.h"
#include "tests/cases/gemm_cases.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

struct GemmTestParam {
  KernelBackend backend;
  DType dtype;
  GemmCase c;
};

void PrintTo(const GemmTestParam& tp, std::ostream* os) {
  *os << backend_name(tp.backend) << " " << dtype_name(tp.dtype) << " " << tp.c.name;
}

std::vector<GemmTestParam> gemm_params() {
  std::vector<GemmTestParam> out;
  for (KernelBackend b : {KernelBackend::eigen, KernelBackend::onednn})
    for (DType dt : {DType::f32, DType::f64}) {
      if (b == KernelBackend::onednn && dt == DType::f64) continue;  // null f64: see OnednnGemm test
      for (const GemmCase& c : cases_for(kGemmCases, kCpuTest)) out.push_back({b, dt, c});
    }
  return out;
}

// A row's product as written, then its shape under every transpose pair and every scaling of
// kGemmScalings (the one equal to the row as written is not run twice).
struct GemmCombo {
  std::string name;
  GemmParams p;
};
std::vector<GemmCombo> combos(const GemmCase& c) {
  std::vector<GemmCombo> out = {{"as_written", c.p}};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (const GemmScaling& sc : kGemmScalings) {
        GemmParams p = c.p;
        p.trans_a = ta, p.trans_b = tb, p.alpha = sc.alpha, p.beta = sc.beta;
        if (p.trans_a == c.p.trans_a && p.trans_b == c.p.trans_b && p.alpha == c.p.alpha && p.beta == c.p.beta)
          continue;
        out.push_back({std::string(ta ? "T" : "N") + (tb ? "T" : "N") + "_" + sc.name, p});
      }
  return out;
}

template <typename T>
void call_gemm(const GemmKernel& k, const GemmParams& p, const Tensor& a, const Tensor& b, Tensor& c) {
  run_gemm<T>(k, p, a.data<T>(), b.data<T>(), c.data<T>());
}

void call_gemm(const GemmKernel& k, const GemmParams& p, const Tensor& a, const Tensor& b, Tensor& c) {
  if (a.dtype() == DType::f64)
    call_gemm<double>(k, p, a, b, c);
  else
    call_gemm<float>(k, p, a, b, c);
}

class GemmFastVsRef : public ::testing::TestWithParam<GemmTestParam> {};

TEST_P(GemmFastVsRef, MatchesReference) {
  const GemmTestParam& tp = GetParam();
  const KernelRegistry reg = make_cpu_registry();
  const GemmKernel& fast = reg.gemm.at(tp.backend);
  ASSERT_STREQ(fast.name, backend_name(tp.backend));
  ASSERT_TRUE(tp.dtype == DType::f32 ? fast.f32 != nullptr : fast.f64 != nullptr);

  for (const GemmCombo& combo : combos(tp.c)) {
    SCOPED_TRACE(combo.name);
    const GemmParams& p = combo.p;
    Tensor a = random_tensor(p.trans_a ? Shape{p.k, p.m} : Shape{p.m, p.k}, tp.dtype, 21);
    Tensor b = random_tensor(p.trans_b ? Shape{p.n, p.k} : Shape{p.k, p.n}, tp.dtype, 22);
    Tensor c = random_tensor({p.m, p.n}, tp.dtype, 23);
    // beta == 0 means C is write-only: NaNs there must not reach the result.
    if (p.beta == 0.0) c.fill(std::numeric_limits<double>::quiet_NaN());
    Tensor c_ref = c.clone();
    call_gemm(fast, p, a, b, c);
    call_gemm(reg.gemm.at(KernelBackend::reference), p, a, b, c_ref);

    // Inputs in [-1, 1]: each C element sums K products of magnitude <= 1 in a different order
    // (blocked, FMA, threads) from the reference; the drift is ~ sqrt(K)*sqrt(K)*eps/2 (partial
    // sums grow like sqrt(K)), so 8*K*eps scaled by |alpha| bounds it with margin (~1e-12
    // relative in double). beta*C (|C| <= 1) adds one rounding of |beta|, the final add one
    // rounding of |C| (the rtol).
    const double eps = dtype_eps(tp.dtype);
    const double atol = 8.0 * std::max<int64_t>(p.k, 1) * eps * std::max(1.0, std::fabs(p.alpha)) +
                        4.0 * eps * std::fabs(p.beta);
    EXPECT_TRUE(all_close(c, c_ref, atol, 4.0 * eps))
        << "m=" << p.m << " n=" << p.n << " k=" << p.k << " trans_a=" << p.trans_a << " trans_b=" << p.trans_b
        << " alpha=" << p.alpha << " beta=" << p.beta;
  }
}

std::string gemm_param_name(const ::testing::TestParamInfo<GemmTestParam>& info) {
  const GemmTestParam& p = info.param;
  return std::string(backend_name(p.backend)) + "_" + dtype_name(p.dtype) + "_" + gemm_case_name(p.c);
}

INSTANTIATE_TEST_SUITE_P(Cases, GemmFastVsRef, ::testing::ValuesIn(gemm_params()), gemm_param_name);

TEST(OnednnGemm, Float64FallsBackToReference) {
  const KernelRegistry reg = make_cpu_registry();
  EXPECT_EQ(reg.gemm.at(KernelBackend::onednn).f64, nullptr);
  EXPECT_STREQ(reg.gemm.select(KernelBackend::onednn, GemmParams{}, DType::f64).name, "reference");
  EXPECT_STREQ(reg.gemm.select(KernelBackend::onednn, GemmParams{}, DType::f32).name, "onednn");
}

// dnnl_sgemm is row-major: with small integers the product is exact, so any layout mix-up
// (column-major reading, swapped leading dimensions) shows as a wrong integer, not a rounding.
TEST(OnednnGemm, RowMajorExactOnSmallIntegers) {
  const KernelRegistry reg = make_cpu_registry();
  GemmParams p;
  p.m = 2, p.n = 3, p.k = 4;
  const std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8};                  // (2,4)
  const std::vector<float> b = {1, 0, 2, -1, 1, 0, 0, 3, 1, 2, -2, 1};    // (4,3)
  const std::vector<float> expect = {7, 3, 9, 15, 11, 25};               // a*b, by hand
  std::vector<float> c(6, std::numeric_limits<float>::quiet_NaN());
  reg.gemm.at(KernelBackend::onednn).f32(p, a.data(), b.data(), c.data());
  EXPECT_EQ(c, expect);
}

// Shapes of the reproducibility test (not case-table rows: a fixed product, run twice).
struct ReproShape {
  const char* name;
  int64_t m, n, k;
};

class GemmReproducible : public ::testing::TestWithParam<std::tuple<KernelBackend, DType, ReproShape>> {};

// Same inputs twice with 2 threads: bitwise-identical C (DESIGN rule 6). Shapes large enough
// for the libraries to split the work across threads, including a long-K one where a library
// might split K.
TEST_P(GemmReproducible, TwoThreadsBitwiseIdentical) {
  const auto [backend, dtype, shape] = GetParam();
  ThreadCountGuard threads(2);
  const KernelRegistry reg = make_cpu_registry();
  const GemmKernel& k = reg.gemm.at(backend);
  GemmParams p;
  p.m = shape.m, p.n = shape.n, p.k = shape.k, p.trans_b = true, p.beta = 0.5;
  Tensor a = random_tensor({p.m, p.k}, dtype, 31), b = random_tensor({p.n, p.k}, dtype, 32);
  Tensor c0 = random_tensor({p.m, p.n}, dtype, 33);
  Tensor c[2] = {c0.clone(), c0.clone()};
  for (Tensor& ci : c) call_gemm(k, p, a, b, ci);
  EXPECT_TRUE(bitwise_equal(c[0], c[1]));
}

INSTANTIATE_TEST_SUITE_P(
    Backends, GemmReproducible,
    ::testing::Combine(::testing::Values(KernelBackend::eigen, KernelBackend::onednn), ::testing::Values(DType::f32),
                       ::testing::Values(ReproShape{"square_300", 300, 300, 300}, ReproShape{"long_k", 16, 10, 20000},
                                         ReproShape{"dense_128x120x400", 128, 120, 400})),
    [](const auto& info) {
      return std::string(backend_name(std::get<0>(info.param))) + "_" + std::get<2>(info.param).name;
    });

TEST(GemmReproducibleDouble, EigenTwoThreadsBitwiseIdentical) {
  ThreadCountGuard threads(2);
  const KernelRegistry reg = make_cpu_registry();
  GemmParams p;
  p.m = 257, p.n = 300, p.k = 311, p.trans_a = true;
  Tensor a = random_tensor({p.k, p.m}, DType::f64, 41), b = random_tensor({p.k, p.n}, DType::f64, 42);
  Tensor c[2] = {Tensor({p.m, p.n}, DType::f64), Tensor({p.m, p.n}, DType::f64)};
  for (Tensor& ci : c) call_gemm(reg.gemm.at(KernelBackend::eigen), p, a, b, ci);
  EXPECT_TRUE(bitwise_equal(c[0], c[1]));
}

}  // namespace
}  // namespace driftlab
