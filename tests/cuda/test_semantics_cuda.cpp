// Inference semantics on the device: the own BatchNorm inference backward against the CPU
// reference (dx bit for bit: the same elementwise formula; dgamma/dbeta summed in double), and
// the model face's input gradient at inference semantics on the device against the CPU's
// (ResNet-20 and LeNet-5, float64 for a sharp check and float32), leaving every weight and
// running statistic where it was. Skips without a device; runs under the CUDA emulation.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/train/cpu_runner.h"
#include "engine/train/cuda_runner.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cuda/ops.h"
#include "models/models.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/model_test_util.h"

namespace driftlab {
namespace {

TEST(CudaBatchNormInference, BackwardMatchesTheReference) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx(one_backend(false));
  for (DType dt : {DType::f32, DType::f64})
    for (BnVarEstimator est : {BnVarEstimator::unbiased, BnVarEstimator::inv_std}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (est == BnVarEstimator::inv_std ? " inv_std" : " var"));
      BatchNormParams p;
      p.n = 3, p.c = 5, p.s = 63, p.eps = 1e-3, p.estimator = est;
      const Shape xs = {p.n, p.c, p.s}, cs = {p.c};
      const Tensor x = random_tensor(xs, dt, 70, -2.0, 3.0), dy = random_tensor(xs, dt, 71);
      const Tensor g = random_tensor(cs, dt, 72, 0.5, 1.5), rm = random_tensor(cs, dt, 73);
      const Tensor rv = random_tensor(cs, dt, 74, 0.5, 2.0), dg0 = random_tensor(cs, dt, 75), db0 = random_tensor(cs, dt, 76);
      Tensor rdx(xs, dt), rdg = dg0.clone(), rdb = db0.clone();
      batchnorm_backward_infer_ref(p, x, dy, g, Tensor(cs, dt), rm, rv, rdx, rdg, rdb);  // beta: read only by a fused ReLU
      cuda::DeviceTensor gx = cuda::to_device(ctx, x), gdy = cuda::to_device(ctx, dy), gg = cuda::to_device(ctx, g);
      cuda::DeviceTensor grm = cuda::to_device(ctx, rm), grv = cuda::to_device(ctx, rv);
      cuda::DeviceTensor dx(ctx, xs, dt), dg = cuda::to_device(ctx, dg0), db = cuda::to_device(ctx, db0);
      cuda::batchnorm_backward_infer_cuda(ctx, p, gx, gdy, gg, grm, grv, dx, dg, db);
      // dx = dy*(g*s) with s = 1/sqrt(rv+eps) (or rv): the reference's statement on the same T
      // inputs, sqrt and divide correctly rounded on both sides: the same bits.
      EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, dx), rdx));
      // dgamma/dbeta: N*S terms summed in double in another order, one rounding to T, one add:
      // 4u of the sum of |terms| plus the start value.
      const double u = dtype_eps(dt) / 2, count = static_cast<double>(p.n * p.s);
      const double xhat = (max_abs(x) + max_abs(rm)) * (est == BnVarEstimator::inv_std ? max_abs(rv) : 1 / std::sqrt(0.5));
      EXPECT_TRUE(all_close(cuda::to_host(ctx, dg), rdg, 4 * u * (count * max_abs(dy) * xhat + max_abs(dg0)), 0));
      EXPECT_TRUE(all_close(cuda::to_host(ctx, db), rdb, 4 * u * (count * max_abs(dy) + max_abs(db0)), 0));
    }
}

TEST(CudaRunnerSemantics, InferenceInputGradientMatchesTheCpuAndMovesNothing) {
  REQUIRE_CUDA_DEVICE();
  struct Case {
    const char* model;
    const char* policy;
    Shape x;
  };
  for (const Case& c : {Case{"resnet20", "torch,dtype=float64", {2, 3, 32, 32}},
                        Case{"resnet20", "tensorflow", {2, 3, 32, 32}}, Case{"lenet5", "theano", {3, 1, 28, 28}}}) {
    SCOPED_TRACE(std::string(c.model) + " " + c.policy);
    const Policy p = Policy::parse(c.policy);
    Model cpu = build_model(c.model, p, 5), gpu = build_model(c.model, p, 5);
    randomise_running_stats(cpu, 30);
    randomise_running_stats(gpu, 30);
    std::vector<Tensor> before;
    for (auto& nb : gpu.net->named_buffers()) before.push_back(nb.second->value.clone());
    for (auto& np : gpu.net->named_params()) before.push_back(np.second->value.clone());
    const Tensor x = random_tensor(c.x, cpu.dtype(), 6, 0.0, 1.0);
    const std::vector<int32_t> y = {4, 9, 1};
    const std::vector<int32_t> labels(y.begin(), y.begin() + c.x[0]);
    CpuRunner host(cpu);
    cuda::CudaContext ctx(one_backend(false));
    CudaRunner dev(gpu, ctx);
    const InputGradient a = host.input_gradient(x, labels, Semantics::inference);
    const InputGradient b = dev.input_gradient(x, labels, Semantics::inference);
    // float64: the sums run in other orders (tiled gemm, im2col, block trees): ~1e-16 per
    // operation times the depth and sum lengths stays below 1e-11 of the largest element; 1e-9
    // of it fails any indexing bug by far. float32: the same argument at 2^-24 through a deep
    // network, and a relu input within rounding of 0 flips on one side (test_model_cuda.cpp
    // measured 3.5e-3 of a BatchNorm gradient's norm for ResNet-20/tensorflow at batch 4): 3e-2.
    const double tol = cpu.dtype() == DType::f64 ? 1e-9 : 3e-2;
    EXPECT_TRUE(all_close(b.dx, a.dx, tol * max_abs(a.dx), 0)) << "dL/dx";
    EXPECT_TRUE(all_close(b.logits, a.logits, tol * max_abs(a.logits), 0)) << "logits";
    EXPECT_NEAR(b.loss, a.loss, tol * std::fabs(a.loss));
    dev.sync_to_model();
    std::size_t i = 0;
    for (auto& nb : gpu.net->named_buffers()) EXPECT_TRUE(bitwise_equal(nb.second->value, before[i++])) << nb.first;
    for (auto& np : gpu.net->named_params()) EXPECT_TRUE(bitwise_equal(np.second->value, before[i++])) << np.first;
  }
}

}  // namespace
}  // namespace driftlab
