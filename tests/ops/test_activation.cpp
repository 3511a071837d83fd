// The fast activation kernel (the registry's `fast` slot) against the reference: the same bits
// for every kind and every framework constant (relu's gradient at 0, both hard sigmoids and both
// edge rules), float32 and float64, on tensors large enough to be split over threads (1, 2 and
// 3 threads), with the inputs where the formulas branch (0, the hard sigmoid's clip points) and
// NaN/infinities placed among them: both call the same per-element functions. The cases are
// tests/cases/activation_cases.h's rows (shared with the CUDA test): to add one, append it there.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/ops/activation.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "tests/cases/activation_cases.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

// 40,000 values in [-4, 4] (above the kernel's 32K-element parallel threshold), with exact 0s, the
// clip points of both hard sigmoids (+-2.5, +-3), NaN and infinities among them.
Tensor input(DType dt) {
  Tensor x = random_tensor({4, 10000}, dt, 31, -4.0, 4.0);
  const double special[] = {0.0, -0.0, 2.5, -2.5, 3.0, -3.0, std::nan(""), INFINITY, -INFINITY};
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    T* d = x.data<T>();
    for (int64_t i = 0; i < x.numel(); i += 97) d[i] = static_cast<T>(special[(i / 97) % 9]);
  });
  return x;
}

TEST(ActivationFast, SameBitsAsTheReference) {
  const KernelRegistry reg = make_cpu_registry();
  const ActivationKernel& fast = reg.activation.at(KernelBackend::fast);
  ASSERT_STREQ(fast.name, "fast");
  for (const ActivationCase& c : cases_for(kActivationCases, kCpuTest))
    for (DType dt : {DType::f32, DType::f64}) {
      SCOPED_TRACE(std::string(c.name) + " " + dtype_name(dt));
      const Tensor x = input(dt), dy = random_tensor(x.shape(), dt, 32);
      Tensor y_ref(x.shape(), dt), dx_ref(x.shape(), dt);
      activation_forward_ref(c.p, x, y_ref);
      activation_backward_ref(c.p, x, y_ref, dy, dx_ref);
      for (int threads : {1, 2, 3}) {
        ThreadCountGuard guard(threads);
        Tensor y(x.shape(), dt), dx(x.shape(), dt);
        fast.forward(c.p, x, y);
        fast.backward(c.p, x, y, dy, dx);
        EXPECT_TRUE(bitwise_equal(y, y_ref)) << threads << " threads";
        EXPECT_TRUE(bitwise_equal(dx, dx_ref)) << threads << " threads";
      }
    }
}

}  // namespace
}  // namespace driftlab
