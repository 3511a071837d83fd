// The fast softmax cross-entropy kernel (the registry's `fast` slot: rows over OpenMP threads)
// against the reference: the same loss and dz bits for each formulation, both reductions and
// every summation order, float32 and float64, batches below and above the kernel's parallel
// threshold, at 1, 2 and 3 threads; confident rows (the clip of softmax_clip engaged) included.
#include <gtest/gtest.h>

#include "engine/ops/softmax_xent.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

TEST(SoftmaxXentFast, SameBitsAsTheReference) {
  const KernelRegistry reg = make_cpu_registry();
  const SoftmaxXentKernel& fast = reg.softmax_xent.at(KernelBackend::fast);
  ASSERT_STREQ(fast.name, "fast");
  for (int64_t n : {7, 1000})
    for (DType dt : {DType::f32, DType::f64})
      for (CeFormulation form : {CeFormulation::log_softmax, CeFormulation::softmax_clip, CeFormulation::softmax_log})
        for (bool mean : {true, false})
          for (SumOrder order : {SumOrder::ascending, SumOrder::descending, SumOrder::pairwise}) {
            SoftmaxXentParams p;
            p.form = form, p.mean = mean, p.sum_order = order;
            SCOPED_TRACE("n " + std::to_string(n) + " " + dtype_name(dt) + " form " +
                         std::to_string(static_cast<int>(form)) + " mean " + std::to_string(mean) + " order " +
                         std::to_string(static_cast<int>(order)));
            // Logits up to +-30: some rows are confident enough for softmax_clip's clip to engage.
            Tensor z = random_tensor({n, 10}, dt, 41, -30.0, 30.0);
            std::vector<int32_t> y(static_cast<std::size_t>(n));
            for (int64_t i = 0; i < n; ++i) y[static_cast<std::size_t>(i)] = static_cast<int32_t>((i * 7) % 10);
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
