// CUDA BatchNorm (own kernels; cuDNN in test_vendor_cuda.cpp) against the reference:
// training forward (y, mean, var, invstd), inference with both variance meanings, backward
// (dx; dgamma/dbeta '+=' from non-zero starts), and the running update for every estimator
// with and without zero-debias. Shapes: tests/cases/batchnorm_cases.h's rows (shared with the
// CPU test and the benchmark): odd spatial sizes, batch 2, 2-D (S=1), a shifted mean.
// The device sums in double: float64 runs are compared tightly, float32 runs with bounds
// derived below.
#include <gtest/gtest.h>

#include <string>

#include "core/ops/batchnorm.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cuda/ops.h"
#include "tests/cases/batchnorm_cases.h"
#include "tests/cuda/cuda_test_util.h"

namespace driftlab {
namespace {

class CudaBatchNorm : public ::testing::TestWithParam<std::tuple<BatchNormCase, DType>> {};

TEST_P(CudaBatchNorm, MatchesReference) {
  REQUIRE_CUDA_DEVICE();
  const BatchNormCase& bc = std::get<0>(GetParam());
  const DType dt = std::get<1>(GetParam());
  const BatchNormParams p = batchnorm_case_params(bc);
  const Shape xs = {bc.n, bc.c, bc.s}, cs = {bc.c};
  Tensor x = random_tensor(xs, dt, 80, bc.lo, bc.hi), dy = random_tensor(xs, dt, 81);
  Tensor g = random_tensor(cs, dt, 82, 0.5, 1.5), b = random_tensor(cs, dt, 83);
  Tensor dg0 = random_tensor(cs, dt, 84), db0 = random_tensor(cs, dt, 85);
  // float64 reference from the same values
  Tensor x64 = x.to(DType::f64), g64 = g.to(DType::f64), b64 = b.to(DType::f64), dy64 = dy.to(DType::f64);
  Tensor ry(xs, DType::f64), rm(cs, DType::f64), rv(cs, DType::f64), ri(cs, DType::f64);
  batchnorm_forward_train_ref(p, x64, g64, b64, ry, rm, rv, ri);
  Tensor rdx(xs, DType::f64), rdg = dg0.to(DType::f64), rdb = db0.to(DType::f64);
  batchnorm_backward_ref(p, x64, dy64, g64, b64, rm, ri, rdx, rdg, rdb);

  cuda::CudaContext ctx;
  cuda::DeviceTensor gx = cuda::to_device(ctx, x), gg = cuda::to_device(ctx, g), gb = cuda::to_device(ctx, b);
  cuda::DeviceTensor gdy = cuda::to_device(ctx, dy);
  cuda::DeviceTensor y(ctx, xs, dt), m(ctx, cs, dt), v(ctx, cs, dt), inv(ctx, cs, dt);
  cuda::batchnorm_forward_train_own(ctx, p, gx, gg, gb, y, m, v, inv);
  cuda::DeviceTensor dx(ctx, xs, dt), dg = cuda::to_device(ctx, dg0), db = cuda::to_device(ctx, db0);
  cuda::batchnorm_backward_own(ctx, p, gx, gdy, gg, m, inv, dx, dg, db);

  const double u = dtype_eps(dt) / 2;  // unit roundoff
  const double count = static_cast<double>(bc.n * bc.s);
  // Statistics: double sums rounded once to T, then v+eps, sqrt, divide: a few roundings; and
  // the double sums themselves, added in another order than the reference's (a block tree of
  // strided partial sums), carry gamma_count(float64) relative to the sum of |terms| (Higham
  // 3.1): nothing next to float32's rounding, but 10-200 ulp of a float64 result (the CUDA
  // emulation measured 9.6 ulp on the variance, which 8u did not allow).
  const double gsum = gamma_n(bc.n * bc.s, DType::f64);
  EXPECT_TRUE(all_close(cuda::to_host(ctx, m), rm, (4 * u + gsum) * max_abs(x64), 4 * u));
  EXPECT_TRUE(all_close(cuda::to_host(ctx, v), rv, 0, 8 * u + gsum));  // the terms are squares: >= 0
  EXPECT_TRUE(all_close(cuda::to_host(ctx, inv), ri, 0, 8 * u + gsum));
  // y = g*((x-mu)*inv)+b in T: the inputs' errors (mu, inv: 8u relative) times |g|*|x-mu|*inv
  // plus 4 roundings of values <= that size.
  const double ysz = max_abs(g64) * (max_abs(x64) + max_abs(rm)) * max_abs(ri) + max_abs(b64);
  EXPECT_TRUE(all_close(cuda::to_host(ctx, y), ry, 16 * u * ysz, 0)) << "y";
  // dx = scale*(count*dy - sum_dy - xhat*sum_dy_xhat): terms of size count*|dy|*(1+|xhat|^2)
  // with ~8 roundings each, scaled by |g|*inv/count.
  const double xhat = (max_abs(x64) + max_abs(rm)) * max_abs(ri);
  const double dxsz = max_abs(g64) * max_abs(ri) * max_abs(dy64) * (2 + xhat * xhat);
  EXPECT_TRUE(all_close(cuda::to_host(ctx, dx), rdx, 16 * u * dxsz, 0)) << "dx";
  // dgamma/dbeta: count terms of size |dy|*|xhat| summed in double, one rounding to T, one add.
  EXPECT_TRUE(all_close(cuda::to_host(ctx, dg), rdg, 4 * u * (count * max_abs(dy64) * xhat + max_abs(dg0)), 0));
  EXPECT_TRUE(all_close(cuda::to_host(ctx, db), rdb, 4 * u * (count * max_abs(dy64) + max_abs(db0)), 0));
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaBatchNorm,
                         ::testing::Combine(::testing::ValuesIn(cases_for(kBatchNormCases, kCudaTest)),
                                            ::testing::Values(DType::f32, DType::f64)),
                         [](const auto& info) {
                           return batchnorm_case_name(std::get<0>(info.param)) + "_" + dtype_name(std::get<1>(info.param));
                         });

// Inference and the running update take the reference's formulas statement by statement on
// the same T inputs: bit for bit (sqrt and divide are correctly rounded on both sides).
TEST(CudaBatchNormRunning, EveryEstimatorBitwise) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  const BnVarEstimator ests[] = {BnVarEstimator::biased,       BnVarEstimator::unbiased,
                                 BnVarEstimator::keras_scaled, BnVarEstimator::keras_double,
                                 BnVarEstimator::keras_var_plus_eps, BnVarEstimator::inv_std};
  for (DType dt : {DType::f32, DType::f64})
    for (BnVarEstimator est : ests)
      for (bool debias : {false, true}) {
        BatchNormParams p;
        p.n = 4, p.c = 6, p.s = 5, p.eps = 1e-3, p.keep = 0.99, p.estimator = est, p.zero_debias = debias;
        const Shape cs = {p.c};
        Tensor rm = random_tensor(cs, dt, 90), rv = random_tensor(cs, dt, 91, 0.5, 2.0);
        Tensor bm(cs, dt), bv(cs, dt), steps({1}, dt);
        cuda::DeviceTensor grm = cuda::to_device(ctx, rm), grv = cuda::to_device(ctx, rv);
        cuda::DeviceTensor gbm = cuda::to_device(ctx, bm), gbv = cuda::to_device(ctx, bv);
        cuda::DeviceTensor gst = cuda::to_device(ctx, steps);
        for (int step = 0; step < 3; ++step) {
          Tensor m = random_tensor(cs, dt, 92 + step), v = random_tensor(cs, dt, 95 + step, 0.1, 2.0);
          batchnorm_update_running(p, m, v, rm, rv, bm, bv, steps);
          cuda::DeviceTensor gm = cuda::to_device(ctx, m), gv = cuda::to_device(ctx, v);
          cuda::batchnorm_update_running_cuda(ctx, p, gm, gv, grm, grv, gbm, gbv, gst);
        }
        EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, grm), rm)) << static_cast<int>(est) << " " << debias;
        EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, grv), rv)) << static_cast<int>(est) << " " << debias;

        Tensor x = random_tensor({p.n, p.c, p.s}, dt, 99), g = random_tensor(cs, dt, 100), b = random_tensor(cs, dt, 101);
        Tensor ry(x.shape(), dt);
        batchnorm_forward_infer_ref(p, x, g, b, rm, rv, ry);
        cuda::DeviceTensor gx = cuda::to_device(ctx, x), gg = cuda::to_device(ctx, g), gb = cuda::to_device(ctx, b);
        cuda::DeviceTensor gy(ctx, x.shape(), dt);
        cuda::batchnorm_forward_infer_own(ctx, p, gx, gg, gb, grm, grv, gy);
        EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, gy), ry)) << "inference " << static_cast<int>(est);
      }
}

}  // namespace
}  // namespace driftlab
