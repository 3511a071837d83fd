// NaN through the own CUDA kernels (run under the CUDA emulation without a GPU), against the
// CPU reference and against the semantics themselves (tests/ops/test_nan.cpp is the CPU side):
// relu keeps NaN and its gradient at NaN follows relu_nan_grad; a max-pool window holding NaNs
// outputs NaN and sends dy to its last NaN (PyTorch's scan); an LSTM's NaN input makes only that
// sample's states NaN, from that step on.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/ops/activation.h"
#include "core/ops/pool2d.h"
#include "core/ops/rnn.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cuda/ops.h"
#include "tests/cases/rnn_cases.h"
#include "tests/cuda/cuda_test_util.h"

namespace driftlab {
namespace {

using cuda::CudaContext;
using cuda::DeviceTensor;

const double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor from(Shape s, DType dt, std::initializer_list<double> v) {
  Tensor t(std::move(s), dt);
  int64_t i = 0;
  for (double x : v)
    dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      t.data<T>()[i++] = static_cast<T>(x);
    });
  return t;
}

TEST(CudaNan, ReluKeepsNanAndItsGradientFollowsTheKnob) {
  REQUIRE_CUDA_DEVICE();
  CudaContext ctx;
  for (DType dt : {DType::f32, DType::f64})
    for (ReluNanGrad g : {ReluNanGrad::dy, ReluNanGrad::nan}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (g == ReluNanGrad::dy ? " dy" : " nan"));
      ActivationParams p;
      p.relu_nan_grad = g;
      const Tensor x = from({4}, dt, {kNaN, -1, 0, 2}), dy = from({4}, dt, {10, 20, 30, 40});
      DeviceTensor gx = cuda::to_device(ctx, x), gdy = cuda::to_device(ctx, dy);
      DeviceTensor gy(ctx, {4}, dt), gdx(ctx, {4}, dt);
      cuda::activation_forward_cuda(ctx, p, gx, gy);
      cuda::activation_backward_cuda(ctx, p, gx, gy, gdy, gdx);
      const Tensor y = cuda::to_host(ctx, gy), dx = cuda::to_host(ctx, gdx);
      Tensor ry({4}, dt), rdx({4}, dt);
      activation_forward_ref(p, x, ry);
      activation_backward_ref(p, x, ry, dy, rdx);
      EXPECT_TRUE(std::isnan(y.at(0))) << "relu(NaN) on the device = " << y.at(0);
      EXPECT_TRUE(g == ReluNanGrad::dy ? dx.at(0) == 10.0 : std::isnan(dx.at(0))) << dx.at(0);
      EXPECT_TRUE(all_close(y, ry, 0, 0));
      EXPECT_TRUE(all_close(dx, rdx, 0, 0));
    }
}

TEST(CudaNan, MaxPoolSendsDyToTheLastNan) {
  REQUIRE_CUDA_DEVICE();
  CudaContext ctx;
  for (DType dt : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dt));
    Pool2dParams p;
    p.h = p.w = 4;
    // windows: {1,NaN,3,4}, {NaN,2,NaN,0}, {5,6,7,8}, {9,9,NaN,NaN}
    const Tensor x = from({1, 1, 4, 4}, dt, {1, kNaN, kNaN, 2, 3, 4, kNaN, 0, 5, 6, 9, 9, 7, 8, kNaN, kNaN});
    const Tensor dy = from({1, 1, 2, 2}, dt, {10, 20, 30, 40});
    DeviceTensor gx = cuda::to_device(ctx, x), gdy = cuda::to_device(ctx, dy);
    DeviceTensor gy(ctx, p.y_shape(), dt), gdx(ctx, p.x_shape(), dt);
    cuda::maxpool2d_forward_own(ctx, p, gx, gy);
    cuda::maxpool2d_backward_own(ctx, p, gx, gdy, gdx);
    const Tensor y = cuda::to_host(ctx, gy), dx = cuda::to_host(ctx, gdx);
    EXPECT_TRUE(std::isnan(y.at(0)) && std::isnan(y.at(1)) && std::isnan(y.at(3)));
    EXPECT_EQ(y.at(2), 8.0);
    for (int64_t i = 0; i < 16; ++i)
      EXPECT_EQ(dx.at(i), i == 1 ? 10 : i == 6 ? 20 : i == 13 ? 30 : i == 15 ? 40 : 0) << "dx[" << i << "]";
    Tensor rdx(p.x_shape(), dt);
    maxpool2d_backward_ref(p, x, dy, rdx);
    EXPECT_TRUE(bitwise_equal(dx, rdx));
  }
}

TEST(CudaNan, LstmNanInputOnlyThatSampleFromThatStep) {
  REQUIRE_CUDA_DEVICE();
  CudaContext ctx(one_backend(false));
  const RnnShape s{3, 5, 4, 6};
  for (const RnnCase& c : kRnnCases) {
    SCOPED_TRACE(c.name);
    const RnnParams p = rnn_case_params(c, s);
    const int64_t GH = rnn_gates(p.cell) * p.hidden;
    Tensor x = random_tensor({s.batch, s.steps, s.input}, DType::f32, 60, -1.0, 1.0);
    x.data<float>()[(1 * s.steps + 2) * s.input] = std::numeric_limits<float>::quiet_NaN();
    DeviceTensor gx = cuda::to_device(ctx, x),
                 w_ih = cuda::to_device(ctx, random_tensor({GH, s.input}, DType::f32, 61, -0.5, 0.5)),
                 w_hh = cuda::to_device(ctx, random_tensor({GH, s.hidden}, DType::f32, 62, -0.5, 0.5)),
                 b = cuda::to_device(ctx, random_tensor({GH}, DType::f32, 63, -0.5, 0.5)),
                 peep = cuda::to_device(ctx, random_tensor({3 * s.hidden}, DType::f32, 64, -0.5, 0.5));
    DeviceTensor h(ctx, {s.batch, s.steps, s.hidden}, DType::f32);
    cuda::RnnDeviceWeights w{&w_ih, &w_hh, &b, p.two_biases ? &b : nullptr, p.peepholes ? &peep : nullptr};
    cuda::rnn_forward_cuda(ctx, p, gx, nullptr, w, h, nullptr);
    const Tensor hh = cuda::to_host(ctx, h);
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t t = 0; t < s.steps; ++t)
        for (int64_t j = 0; j < s.hidden; ++j) {
          const double v = hh.at((n * s.steps + t) * s.hidden + j);
          EXPECT_EQ(std::isnan(v), n == 1 && t >= 2) << "h[" << n << "," << t << "," << j << "] = " << v;
        }
  }
}

}  // namespace
}  // namespace driftlab
