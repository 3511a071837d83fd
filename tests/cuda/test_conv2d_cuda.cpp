// CUDA conv2d (own im2col + gemm; cuDNN in test_vendor_cuda.cpp) against the reference
// kernels on tests/cases/conv2d_cases.h's rows (shared with the CPU test and the benchmarks):
// odd sizes, batch 1, stride 2, dilation, padding on one side only, pads wider than the kernel,
// flip, 1x1, no bias, and the model layers. All three passes, float32 and float64.
// Tolerance: gamma_n * (the same pass run on |inputs| in float64), n = the number of terms
// per output (see cuda_test_util.h); backward_weight/db start from non-zero values to check '+='.
#include <gtest/gtest.h>

#include <string>

#include "core/ops/conv2d.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cuda/ops.h"
#include "tests/cases/conv2d_cases.h"
#include "tests/cuda/cuda_test_util.h"

namespace driftlab {
namespace {

class CudaConv2d : public ::testing::TestWithParam<std::tuple<Conv2dCase, DType>> {};

TEST_P(CudaConv2d, AllPassesMatchReference) {
  REQUIRE_CUDA_DEVICE();
  const Conv2dCase& cc = std::get<0>(GetParam());
  const DType dt = std::get<1>(GetParam());
  const Conv2dParams& p = cc.p;
  Tensor x = random_tensor(p.x_shape(), dt, 10), w = random_tensor(p.w_shape(), dt, 11);
  Tensor b = random_tensor({p.k}, dt, 12), dy = random_tensor(p.y_shape(), dt, 13);
  Tensor dw0 = random_tensor(p.w_shape(), dt, 14), db0 = random_tensor({p.k}, dt, 15);
  const Tensor x64 = x.to(DType::f64), w64 = w.to(DType::f64), b64 = b.to(DType::f64), dy64 = dy.to(DType::f64);

  cuda::CudaContext ctx;
  cuda::DeviceTensor dx_ = cuda::to_device(ctx, x), dw_ = cuda::to_device(ctx, w), db_ = cuda::to_device(ctx, b);
  cuda::DeviceTensor ddy = cuda::to_device(ctx, dy);

  // forward: C*R*S products + bias per output
  Tensor ref(p.y_shape(), DType::f64), bound(p.y_shape(), DType::f64);
  Tensor absb = abs64(b);
  conv2d_forward_ref(p, x64, w64, cc.bias ? &b64 : nullptr, ref);
  conv2d_forward_ref(p, abs64(x), abs64(w), cc.bias ? &absb : nullptr, bound);
  cuda::DeviceTensor y(ctx, p.y_shape(), dt);
  cuda::conv2d_forward_own(ctx, p, dx_, dw_, cc.bias ? &db_ : nullptr, y);
  EXPECT_TRUE(all_close(cuda::to_host(ctx, y), ref, gamma_n(p.c * p.r * p.s + 1, dt) * max_abs(bound), 0.0))
      << cc.name << " forward";

  // backward_data: at most K*R*S products per dx element
  Tensor rdx(p.x_shape(), DType::f64), bdx(p.x_shape(), DType::f64);
  conv2d_backward_data_ref(p, dy64, w64, rdx);
  conv2d_backward_data_ref(p, abs64(dy), abs64(w), bdx);
  cuda::DeviceTensor gx(ctx, p.x_shape(), dt);
  cuda::conv2d_backward_data_own(ctx, p, ddy, dw_, gx);
  EXPECT_TRUE(all_close(cuda::to_host(ctx, gx), rdx, gamma_n(p.k * p.r * p.s, dt) * max_abs(bdx), 0.0))
      << cc.name << " backward_data";

  // backward_weight (+=): N*P*Q products added to the starting value
  Tensor rdw = dw0.to(DType::f64), rdb = db0.to(DType::f64), bdw = abs64(dw0), bdb = abs64(db0);
  conv2d_backward_weight_ref(p, x64, dy64, rdw, cc.bias ? &rdb : nullptr);
  conv2d_backward_weight_ref(p, abs64(x), abs64(dy), bdw, cc.bias ? &bdb : nullptr);
  cuda::DeviceTensor gw = cuda::to_device(ctx, dw0), gb = cuda::to_device(ctx, db0);
  cuda::conv2d_backward_weight_own(ctx, p, dx_, ddy, gw, cc.bias ? &gb : nullptr);
  const int64_t terms = p.n * p.out_h() * p.out_w() + 1;
  EXPECT_TRUE(all_close(cuda::to_host(ctx, gw), rdw, gamma_n(terms, dt) * max_abs(bdw), 0.0)) << cc.name << " dw";
  if (cc.bias) {
    EXPECT_TRUE(all_close(cuda::to_host(ctx, gb), rdb, gamma_n(terms, dt) * max_abs(bdb), 0.0)) << cc.name << " db";
  }
}

TEST_P(CudaConv2d, SameBitsTwice) {
  REQUIRE_CUDA_DEVICE();
  const Conv2dCase& cc = std::get<0>(GetParam());
  const DType dt = std::get<1>(GetParam());
  const Conv2dParams& p = cc.p;
  cuda::CudaContext ctx;
  cuda::DeviceTensor x = cuda::to_device(ctx, random_tensor(p.x_shape(), dt, 20));
  cuda::DeviceTensor dy = cuda::to_device(ctx, random_tensor(p.y_shape(), dt, 21));
  Tensor out[2];
  for (Tensor& o : out) {
    cuda::DeviceTensor dw = cuda::DeviceTensor::zeros(ctx, p.w_shape(), dt);
    cuda::conv2d_backward_weight_own(ctx, p, x, dy, dw, nullptr);
    o = cuda::to_host(ctx, dw);
  }
  EXPECT_TRUE(bitwise_equal(out[0], out[1])) << cc.name;  // no atomics anywhere in the own path
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaConv2d,
                         ::testing::Combine(::testing::ValuesIn(cases_for(kConv2dCases, kCudaTest)),
                                            ::testing::Values(DType::f32, DType::f64)),
                         [](const auto& info) {
                           return conv2d_case_name(std::get<0>(info.param)) + "_" + dtype_name(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace driftlab
