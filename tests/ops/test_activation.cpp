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

// A ReLU's backward from its output alone (ActivationKernel::relu_backward_of_output) against the
// backward from its input: the same bits wherever no input was +-0, which relu_forward_any_zero
// reports from the forward's own pass (its y the forward's bits). Every relu row (gradient at 0 of
// 0, 0.5 and 1), both NaN rules, infinities and NaN in dy as well as in x, both kernels, 1-3 threads.
// And why the rule: at an exact 0 the two backwards differ (g * dy against +0).
TEST(ActivationKernels, ReluBackwardFromItsOutputGivesTheBackwardsBitsWhereNoInputWasZero) {
  const KernelRegistry reg = make_cpu_registry();
  for (KernelBackend b : {KernelBackend::reference, KernelBackend::fast}) {
    const ActivationKernel& k = reg.activation.at(b);
    ASSERT_TRUE(k.relu_forward_any_zero && k.relu_backward_of_output) << k.name;
    for (const ActivationCase& c : cases_for(kActivationCases, kCpuTest)) {
      if (c.p.kind != ActKind::relu) continue;
      for (ReluNanGrad nan_rule : {ReluNanGrad::dy, ReluNanGrad::nan})
        for (DType dt : {DType::f32, DType::f64}) {
          SCOPED_TRACE(std::string(k.name) + " " + c.name + (nan_rule == ReluNanGrad::nan ? " nan" : " dy") + " " +
                       dtype_name(dt));
          ActivationParams p = c.p;
          p.relu_nan_grad = nan_rule;
          const Tensor x = input(dt);  // +0 and -0 among NaN, infinities and the rest
          Tensor nonzero = x.clone(), dy = random_tensor(x.shape(), dt, 33);
          dispatch_dtype(dt, [&](auto tag) {
            using T = decltype(tag);
            T* d = nonzero.data<T>();
            T* g = dy.data<T>();
            for (int64_t i = 0; i < x.numel(); ++i)
              if (d[i] == T(0)) d[i] = std::signbit(d[i]) ? T(-1e-30) : T(1e-30);
            const T odd[] = {std::numeric_limits<T>::quiet_NaN(), T(INFINITY), T(-INFINITY), T(-0.0)};
            for (int64_t i = 5; i < x.numel(); i += 89) g[i] = odd[(i / 89) % 4];
          });
          Tensor y_ref(x.shape(), dt), dx_ref(x.shape(), dt);
          k.forward(p, nonzero, y_ref);
          k.backward(p, nonzero, y_ref, dy, dx_ref);
          for (int threads : {1, 2, 3}) {
            ThreadCountGuard guard(threads);
            Tensor y(x.shape(), dt), dx(x.shape(), dt), y_zero(x.shape(), dt);
            EXPECT_FALSE(k.relu_forward_any_zero(p, nonzero, y)) << threads << " threads";
            EXPECT_TRUE(bitwise_equal(y, y_ref)) << threads << " threads";
            k.relu_backward_of_output(p, y, dy, dx);
            EXPECT_TRUE(bitwise_equal(dx, dx_ref)) << threads << " threads";
            EXPECT_TRUE(k.relu_forward_any_zero(p, x, y_zero)) << threads << " threads";
          }
        }
    }
    // One -0 among 40,000 is a zero (past the parallel threshold: any thread's part may hold it);
    // NaN is not.
    for (float z : {-0.0f, 0.0f, std::numeric_limits<float>::quiet_NaN()}) {
      Tensor x = random_tensor({4, 10000}, DType::f32, 34, 0.5, 1.0), y(x.shape(), DType::f32);
      x.data<float>()[39999] = z;
      EXPECT_EQ(k.relu_forward_any_zero(act_relu(0.0), x, y), !std::isnan(z)) << k.name << " " << z;
    }
    // At x = 0 with a gradient at 0 of 0.5, the backward from x gives 0.5 * dy, from y = +0 it gives +0.
    const ActivationParams half = act_relu(0.5);
    const Tensor x = Tensor::from({1}, std::vector<float>{0.0f}), dy = Tensor::from({1}, std::vector<float>{-2.0f});
    Tensor y(x.shape(), DType::f32), from_x(x.shape(), DType::f32), from_y(x.shape(), DType::f32);
    EXPECT_TRUE(k.relu_forward_any_zero(half, x, y));
    k.backward(half, x, y, dy, from_x);
    k.relu_backward_of_output(half, y, dy, from_y);
    EXPECT_EQ(from_x.data<float>()[0], -1.0f);
    EXPECT_EQ(from_y.data<float>()[0], 0.0f);
  }
}

}  // namespace
}  // namespace driftlab
