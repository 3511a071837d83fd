// CUDA conv2d (own im2col + gemm; cuDNN in test_vendor_cuda.cpp) against the reference
// kernels on awkward shapes: odd sizes, batch 1, stride 2, dilation, padding on one side only,
// pads wider than the kernel, flip, 1x1, no bias. All three passes, float32 and float64.
// Tolerance: gamma_n * (the same pass run on |inputs| in float64), n = the number of terms
// per output (see cuda_test_util.h); backward_weight/db start from non-zero values to check '+='.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "engine/ops/conv2d.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cuda/ops.h"
#include "tests/cuda/cuda_test_util.h"

namespace driftlab {
namespace {

struct CudaConvCase {
  const char* name;
  Conv2dParams p;
  bool bias = true;
};

Conv2dParams conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                  const std::function<void(Conv2dParams&)>& edit = nullptr) {
  Conv2dParams p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.k = k, p.r = r, p.s = s;
  if (edit) edit(p);
  return p;
}

const std::vector<CudaConvCase>& cases() {
  static const std::vector<CudaConvCase> cs = {
      {"odd_sizes_c3", conv(2, 3, 7, 9, 5, 3, 3, [](Conv2dParams& p) { p.pad_t = p.pad_b = p.pad_l = p.pad_r = 1; })},
      {"batch1_lenet_conv1", conv(1, 1, 28, 28, 6, 5, 5)},
      {"stride2_pad1", conv(3, 3, 11, 10, 4, 3, 3,
                            [](Conv2dParams& p) {
                              p.stride_h = p.stride_w = 2;
                              p.pad_t = p.pad_b = p.pad_l = p.pad_r = 1;
                            })},
      {"dilation2", conv(2, 2, 9, 11, 3, 3, 2, [](Conv2dParams& p) { p.dil_h = p.dil_w = 2; })},
      {"pad_one_side_only", conv(2, 3, 8, 7, 4, 3, 3, [](Conv2dParams& p) { p.pad_b = 1, p.pad_r = 2; })},
      {"tf_same_stride2_asym", conv(2, 4, 8, 8, 6, 3, 3,
                                    [](Conv2dParams& p) {
                                      p.stride_h = p.stride_w = 2;
                                      p.pad_t = 0, p.pad_b = 1, p.pad_l = 0, p.pad_r = 1;
                                    })},
      {"one_by_one_stride2", conv(2, 3, 7, 6, 5, 1, 1, [](Conv2dParams& p) { p.stride_h = p.stride_w = 2; })},
      {"nonsquare_kernel_flip", conv(2, 3, 9, 8, 5, 2, 4,
                                     [](Conv2dParams& p) {
                                       p.flip = true;
                                       p.pad_t = 1, p.pad_l = 2, p.pad_r = 1;
                                     })},
      {"flip_lenet_conv2_no_bias", conv(4, 6, 12, 12, 16, 5, 5, [](Conv2dParams& p) { p.flip = true; }), false},
      {"pad_wider_than_kernel", conv(2, 2, 5, 6, 3, 2, 3,
                                     [](Conv2dParams& p) { p.pad_t = 3, p.pad_b = 2, p.pad_l = 4, p.pad_r = 3; })},
      {"resnet20_stage1_batch9", conv(9, 16, 32, 32, 16, 3, 3,
                                      [](Conv2dParams& p) { p.pad_t = p.pad_b = p.pad_l = p.pad_r = 1; })},
      {"many_channels_c17_k19_stride2_flip", conv(3, 17, 9, 10, 19, 3, 3,
                                                  [](Conv2dParams& p) {
                                                    p.stride_h = p.stride_w = 2, p.flip = true;
                                                    p.pad_t = 1, p.pad_b = 1, p.pad_l = 0, p.pad_r = 1;
                                                  })},
  };
  return cs;
}

class CudaConv2d : public ::testing::TestWithParam<std::tuple<CudaConvCase, DType>> {};

TEST_P(CudaConv2d, AllPassesMatchReference) {
  REQUIRE_CUDA_DEVICE();
  const CudaConvCase& cc = std::get<0>(GetParam());
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
  const CudaConvCase& cc = std::get<0>(GetParam());
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
                         ::testing::Combine(::testing::ValuesIn(cases()), ::testing::Values(DType::f32, DType::f64)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  dtype_name(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace driftlab
