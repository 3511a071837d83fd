// CUDA softmax cross-entropy (own kernel; cuDNN softmax in test_vendor_cuda.cpp) against the
// reference: the three formulations x both reductions x the three class-sum orders, float32
// and float64, on tests/cases/softmax_xent_cases.h's shapes (shared with the CPU test),
// including confident samples whose clipped gradient must be exactly zero.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/ops/softmax_xent.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cuda/ops.h"
#include "tests/cases/softmax_xent_cases.h"
#include "tests/cuda/cuda_test_util.h"

namespace driftlab {
namespace {

TEST(CudaSoftmaxXent, EveryFormulationMatchesReference) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  for (DType dt : {DType::f32, DType::f64})
    for (const SoftmaxXentCase& c : cases_for(kSoftmaxXentCases, kCudaTest))
      for (const SoftmaxXentParams& p : softmax_xent_settings()) {
        SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dt) + " " + softmax_xent_setting_str(p));
        const int64_t n = c.n, k = c.k;
        const CeFormulation form = p.form;
        const bool mean = p.mean;
        Tensor z = random_tensor({n, k}, dt, 110, -5.0, 5.0);
        std::vector<int32_t> labels(n);
        for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int32_t>((i * 7) % k);
        // A confident sample: q_y clips at 1-eps, so its softmax_clip gradient is exactly 0.
        if (k > 1) dispatch_dtype(dt, [&](auto tag) {
          using T = decltype(tag);
          z.data<T>()[0 * k + labels[0]] = T(40);
        });
        const double ref = softmax_xent_forward_ref(p, z, labels);
        Tensor rdz(z.shape(), dt);
        softmax_xent_backward_ref(p, z, labels, rdz);
        cuda::DeviceTensor gz = cuda::to_device(ctx, z), gdz(ctx, z.shape(), dt);
        const double got = cuda::softmax_xent_forward_own(ctx, p, gz, labels);
        cuda::softmax_xent_backward_own(ctx, p, gz, labels, gdz);
        // Same operations in the same order; only exp/log differ (CUDA <= 2 ulp, glibc <= 1):
        // per sample a loss of size <= |z|+log K ~ 10 off by ~8 ulp; the batch sum adds n such.
        const double eps = dtype_eps(dt);
        const double loss_tol = 8 * eps * 10 * (mean ? 1.0 : static_cast<double>(n));
        EXPECT_NEAR(got, ref, loss_tol) << "k=" << k << " form " << static_cast<int>(form);
        // dz entries are probabilities (<= 1) times 1/n, each off by a few ulp of exp;
        // softmax_log divides by p_y (up to 1/p_y amplification), bounded by the relative part.
        EXPECT_TRUE(all_close(cuda::to_host(ctx, gdz), rdz, 8 * eps, 64 * eps))
            << "k=" << k << " form " << static_cast<int>(form);
        if (form == CeFormulation::softmax_clip && k > 1) {
          Tensor h = cuda::to_host(ctx, gdz);
          for (int64_t j = 0; j < k; ++j) EXPECT_EQ(h.at(j), 0.0) << "clipped sample's gradient";
        }
      }
}

TEST(CudaSoftmaxXent, BadLabelNamesTheSample) {
  REQUIRE_CUDA_DEVICE();
  cuda::CudaContext ctx;
  cuda::DeviceTensor z = cuda::to_device(ctx, random_tensor({3, 4}, DType::f32, 1));
  try {
    cuda::softmax_xent_forward_own(ctx, SoftmaxXentParams{}, z, {0, 4, 1});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 4 of sample 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace driftlab
