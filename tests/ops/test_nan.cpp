// NaN through the kernels, as the frameworks keep it (docs/POLICIES.md, relu_grad_at_nan and
// "NaN semantics"): every CPU kernel (reference and fast) gives the same answer, and that answer
// is the framework's, not just the other kernel's.
//   relu: NaN in, NaN out (every framework); dReLU at NaN passes dy (PyTorch) or is NaN (TF.js,
//     Theano), by relu_grad_at_nan.
//   max pool: a window holding a NaN has max NaN and, with ties=first, its LAST NaN in row-major
//     order gets dy (PyTorch's `val > maxval || isnan(val)` scan); the first max among numbers.
//   LSTM/GRU: a NaN input makes that sample's states NaN from that step on, and only that
//     sample's; the fast AVX-512 kernel's exp/tanh clamps used to turn NaN into the bound
//     (sigmoid(NaN) = 1, tanh(NaN) = +-1).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/ops/activation.h"
#include "core/ops/pool2d.h"
#include "core/ops/rnn.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "tests/cases/rnn_cases.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

void put(Tensor& t, int64_t i, double v) {
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    t.data<T>()[i] = static_cast<T>(v);
  });
}

Tensor from(Shape s, DType dt, std::initializer_list<double> v) {
  Tensor t(std::move(s), dt);
  int64_t i = 0;
  for (double x : v) put(t, i++, x);
  return t;
}

TEST(NanRelu, ForwardKeepsNanAndBackwardFollowsTheKnob) {
  const KernelRegistry reg = make_cpu_registry();
  for (KernelBackend b : {KernelBackend::reference, KernelBackend::fast})
    for (DType dt : {DType::f32, DType::f64})
      for (ReluNanGrad g : {ReluNanGrad::dy, ReluNanGrad::nan}) {
        SCOPED_TRACE(std::string(backend_name(b)) + " " + dtype_name(dt) + (g == ReluNanGrad::dy ? " dy" : " nan"));
        const ActivationKernel& k = reg.activation.at(b);
        ActivationParams p;
        p.kind = ActKind::relu;
        p.relu_nan_grad = g;
        const Tensor x = from({5}, dt, {kNaN, -1.0, 0.0, 2.0, -0.0});
        const Tensor dy = from({5}, dt, {10.0, 20.0, 30.0, 40.0, 50.0});
        Tensor y({5}, dt), dx({5}, dt);
        k.forward(p, x, y);
        k.backward(p, x, y, dy, dx);
        EXPECT_TRUE(std::isnan(y.at(0))) << "relu(NaN) = " << y.at(0);
        EXPECT_EQ(y.at(1), 0.0);
        EXPECT_EQ(y.at(3), 2.0);
        EXPECT_FALSE(std::signbit(y.at(4))) << "relu(-0) is +0, as before";
        if (g == ReluNanGrad::dy)
          EXPECT_EQ(dx.at(0), 10.0);
        else
          EXPECT_TRUE(std::isnan(dx.at(0))) << dx.at(0);
        EXPECT_EQ(dx.at(1), 0.0);
        EXPECT_EQ(dx.at(2), 0.0);  // relu_grad_at_zero = 0
        EXPECT_EQ(dx.at(3), 40.0);
      }
}

// One plane 4x4 with 2x2 windows (the fast kernel's AVX-512 path for float) and the same plane
// pooled 3x3 stride 1 (its general scan): windows with one NaN, two NaNs, and none.
TEST(NanMaxPool, MaxIsNanAndTheLastNanGetsTheGradient) {
  const KernelRegistry reg = make_cpu_registry();
  // row-major 4x4; window (0,0) = {1, NaN, 3, 4}; (0,1) = {NaN, 2, NaN, 0}: two NaNs, at 2 and 6;
  // (1,0) = {5, 6, 7, 8}; (1,1) = {9, 9, NaN, NaN}: two NaNs at 14 and 15.
  const std::initializer_list<double> v = {1, kNaN, kNaN, 2, 3, 4, kNaN, 0, 5, 6, 9, 9, 7, 8, kNaN, kNaN};
  for (KernelBackend b : {KernelBackend::reference, KernelBackend::fast})
    for (DType dt : {DType::f32, DType::f64}) {
      SCOPED_TRACE(std::string(backend_name(b)) + " " + dtype_name(dt));
      const Pool2dKernel& k = reg.maxpool2d.at(b);
      Pool2dParams p;
      p.h = p.w = 4;
      const Tensor x = from({1, 1, 4, 4}, dt, v);
      const Tensor dy = from({1, 1, 2, 2}, dt, {10, 20, 30, 40});
      Tensor y(p.y_shape(), dt), dx(p.x_shape(), dt);
      k.forward(p, x, y);
      k.backward(p, x, dy, dx);
      EXPECT_TRUE(std::isnan(y.at(0)) && std::isnan(y.at(1)) && std::isnan(y.at(3))) << y.at(0) << y.at(1) << y.at(3);
      EXPECT_EQ(y.at(2), 8.0);
      for (int64_t i = 0; i < 16; ++i) {
        // window (0,0): its only NaN (1); (0,1): the last NaN (6); (1,0): the max 8 (13); (1,1): the last NaN (15)
        const double want = i == 1 ? 10 : i == 6 ? 20 : i == 13 ? 30 : i == 15 ? 40 : 0;
        EXPECT_EQ(dx.at(i), want) << "dx[" << i << "]";
      }
      // 3x3 windows, stride 1, over the same plane: window (0,0) holds NaNs at 1, 2, 6, so 6 wins.
      Pool2dParams q = p;
      q.kh = q.kw = 3;
      q.stride_h = q.stride_w = 1;
      Tensor y3(q.y_shape(), dt), dx3(q.x_shape(), dt);
      const Tensor dy3 = from({1, 1, 2, 2}, dt, {1, 0, 0, 0});
      k.forward(q, x, y3);
      k.backward(q, x, dy3, dx3);
      EXPECT_TRUE(std::isnan(y3.at(0)));
      for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(dx3.at(i), i == 6 ? 1.0 : 0.0) << "3x3 dx[" << i << "]";
      // ties=all (Theano): a NaN max equals nothing, so that window's dy goes nowhere.
      p.ties = PoolTies::all;
      k.backward(p, x, dy, dx);
      for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(dx.at(i), i == 13 ? 30.0 : 0.0) << "ties=all dx[" << i << "]";
    }
}

// LSTM and GRU, every CPU cell of the case table, one NaN in sample 0's input at step 2: the
// reference's states of sample 0 are NaN from step 2 on and every other sample's are finite; the
// fast kernel agrees element for element on which values are NaN.
TEST(NanRnn, NanInputPropagatesInTheFastKernelAsInTheReference) {
  const KernelRegistry reg = make_cpu_registry();
  for (const RnnCase& c : cases_for(kRnnCases, kCpuTest)) {
    SCOPED_TRACE(c.name);
    const RnnParams p = rnn_case_params(c, kRnnTiles);
    const int64_t GH = rnn_gates(p.cell) * p.hidden;
    Tensor x = random_tensor({p.batch, p.steps, p.input}, DType::f32, 41, -1.0, 1.0);
    put(x, 2 * p.input + 0, kNaN);  // sample 0, step 2, feature 0
    Tensor w_ih = random_tensor({GH, p.input}, DType::f32, 42, -0.5, 0.5);
    Tensor w_hh = random_tensor({GH, p.hidden}, DType::f32, 43, -0.5, 0.5);
    Tensor bias = random_tensor({GH}, DType::f32, 44, -0.5, 0.5);
    Tensor peep = random_tensor({3 * p.hidden}, DType::f32, 45, -0.5, 0.5);
    const RnnWeights<float> w{w_ih.data<float>(), w_hh.data<float>(), bias.data<float>(),
                              p.two_biases ? bias.data<float>() : nullptr, p.peepholes ? peep.data<float>() : nullptr};
    Tensor h_ref({p.batch, p.steps, p.hidden}, DType::f32), h_fast(h_ref.shape(), DType::f32);
    Tensor ws({rnn_workspace_size(p)}, DType::f32);
    RnnExec ex{2};
    reg.rnn.at(KernelBackend::reference).forward_f32(p, ex, x.data<float>(), nullptr, w, h_ref.data<float>(),
                                                       ws.data<float>());
    reg.rnn.at(KernelBackend::fast).forward_f32(p, ex, x.data<float>(), nullptr, w, h_fast.data<float>(),
                                                  ws.data<float>());
    int64_t nan_ref = 0, mismatches = 0;
    for (int64_t n = 0; n < p.batch; ++n)
      for (int64_t t = 0; t < p.steps; ++t)
        for (int64_t j = 0; j < p.hidden; ++j) {
          const int64_t i = (n * p.steps + t) * p.hidden + j;
          const bool r = std::isnan(h_ref.at(i)), f = std::isnan(h_fast.at(i));
          nan_ref += r;
          EXPECT_EQ(r, n == 0 && t >= 2) << "reference h[" << n << "," << t << "," << j << "] = " << h_ref.at(i);
          if (r != f && mismatches++ < 5)
            ADD_FAILURE() << "fast h[" << n << "," << t << "," << j << "] = " << h_fast.at(i) << ", reference "
                          << h_ref.at(i);
        }
    EXPECT_EQ(nan_ref, (p.steps - 2) * p.hidden);
    EXPECT_EQ(mismatches, 0);
  }
}

}  // namespace
}  // namespace driftlab
