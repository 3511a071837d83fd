// The fast softmax cross-entropy kernel (the registry's `fast` slot: rows over OpenMP threads)
// against the reference: the same loss and dz bits for each formulation, both reductions and
// every summation order, float32 and float64, batches below and above the kernel's parallel
// threshold, at 1, 2 and 3 threads; confident rows (the clip of softmax_clip engaged) included.
// The shapes and settings are tests/cases/softmax_xent_cases.h's (shared with the CUDA test):
// to add one, append it there.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/ops/softmax_xent.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "tests/cases/softmax_xent_cases.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

TEST(SoftmaxXentFast, SameBitsAsTheReference) {
  const KernelRegistry reg = make_cpu_registry();
  const SoftmaxXentKernel& fast = reg.softmax_xent.at(KernelBackend::fast);
  ASSERT_STREQ(fast.name, "fast");
  for (const SoftmaxXentCase& c : cases_for(kSoftmaxXentCases, kCpuTest))
    for (DType dt : {DType::f32, DType::f64})
      for (const SoftmaxXentParams& p : softmax_xent_settings()) {
        SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dt) + " " + softmax_xent_setting_str(p));
        // Logits up to +-30: some rows are confident enough for softmax_clip's clip to engage.
        Tensor z = random_tensor({c.n, c.k}, dt, 41, -30.0, 30.0);
        std::vector<int32_t> y(static_cast<std::size_t>(c.n));
        for (int64_t i = 0; i < c.n; ++i) y[static_cast<std::size_t>(i)] = static_cast<int32_t>((i * 7) % c.k);
        const double loss_ref = softmax_xent_forward_ref(p, z, y);
        Tensor dz_ref(z.shape(), dt);
        softmax_xent_backward_ref(p, z, y, dz_ref);
        for (int threads : {1, 2, 3}) {
          ThreadCountGuard guard(threads);
          Tensor dz(z.shape(), dt);
          EXPECT_EQ(fast.forward(p, z, y), loss_ref) << threads << " threads";
          fast.backward(p, z, y, dz);
          EXPECT_TRUE(bitwise_equal(dz, dz_ref)) << threads << " threads";
        }
      }
}

TEST(SoftmaxXentFast, BadLabelsNameTheSample) {
  const KernelRegistry reg = make_cpu_registry();
  const Tensor z = random_tensor({3, 4}, DType::f32, 1);
  const std::string e = error_of([&] { reg.softmax_xent.at(KernelBackend::fast).forward({}, z, {0, 4, 1}); });
  EXPECT_NE(e.find("label 4 of sample 1 is outside 0..3"), std::string::npos) << e;
}

}  // namespace
}  // namespace driftlab
