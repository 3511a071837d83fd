// Float64 central-difference gradient check of a whole Sequential under train or inference
// semantics (recorded passes), shared by the BatchNorm and residual-block tests.
#pragma once
#include <gtest/gtest.h>

#include "engine/layers/sequential.h"
#include "tests/test_util.h"

namespace driftlab {

// loss = sum(net(x) * R) for a fixed random R: dx (every x_stride-th element) and every
// p_stride-th element of every parameter gradient against float64 central differences (h=1e-6),
// within the absolute tolerance `tol` the caller justifies. x_stride <= 0 skips dx: for inputs
// that are not differentiable (token ids of an embedding, which refuse non-integer values).
inline void gradcheck_sequential(Sequential& net, const Tensor& x, double tol, int64_t x_stride, int64_t p_stride,
                                 Semantics semantics = Semantics::train) {
  ExecContext exec;
  Tensor probe;
  {
    RunContext ctx = RunContext::recorded(exec, semantics);
    probe = net.forward(ctx, x);
  }
  Tensor r = random_tensor(probe.shape(), DType::f64, 31, -1.0, 1.0);
  auto loss = [&](const Tensor& in) {
    RunContext ctx = RunContext::recorded(exec, semantics);
    Tensor y = net.forward(ctx, in);
    double s = 0;
    for (int64_t i = 0; i < y.numel(); ++i) s += y.at(i) * r.at(i);
    return s;
  };
  net.zero_grad();
  RunContext ctx = RunContext::recorded(exec, semantics);
  net.forward(ctx, x);
  Tensor dx = net.backward(ctx, r);
  const double h = 1e-6;
  for (int64_t i = 0; x_stride > 0 && i < x.numel(); i += x_stride) {
    Tensor xp = x.clone(), xm = x.clone();
    xp.data<double>()[i] += h;
    xm.data<double>()[i] -= h;
    EXPECT_NEAR(dx.at(i), (loss(xp) - loss(xm)) / (2 * h), tol) << "dx[" << i << "]";
  }
  for (auto& np : net.named_params()) {
    Param* p = np.second;
    for (int64_t i = 0; i < p->value.numel(); i += p_stride) {
      double v = p->value.at(i);
      p->value.data<double>()[i] = v + h;
      double lp = loss(x);
      p->value.data<double>()[i] = v - h;
      double lm = loss(x);
      p->value.data<double>()[i] = v;
      EXPECT_NEAR(p->grad.at(i), (lp - lm) / (2 * h), tol) << np.first << "[" << i << "]";
    }
  }
}


}  // namespace driftlab
