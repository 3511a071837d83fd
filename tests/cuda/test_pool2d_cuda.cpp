// CUDA max/average pooling (own kernels) against the reference: bit for bit, float32 and
// float64, on tests/cases/pool2d_cases.h's rows (shared with the CPU test and the benchmark:
// awkward shapes and the LeNet/VGG-like layers), with ties (small-integer inputs), NaN, both
// tie rules and both average divisors. Bitwise because a max involves no rounding and the
// average's sums run in the reference's order (kernels built with -fmad=false).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/ops/pool2d.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cuda/ops.h"
#include "tests/cases/pool2d_cases.h"
#include "tests/cuda/cuda_test_util.h"

namespace driftlab {
namespace {

class CudaPool2d : public ::testing::TestWithParam<std::tuple<Pool2dCase, DType>> {};

TEST_P(CudaPool2d, BitwiseAsReference) {
  REQUIRE_CUDA_DEVICE();
  const DType dt = std::get<1>(GetParam());
  cuda::CudaContext ctx;
  for (int variant = 0; variant < 4; ++variant) {
    Pool2dParams p = std::get<0>(GetParam()).p;
    p.ties = variant % 2 ? PoolTies::all : PoolTies::first;
    p.count_include_pad = variant < 2;
    // Small integers make ties common; one NaN tests "NaN wins".
    Tensor x = random_tensor(p.x_shape(), dt, 30 + variant, -3.0, 3.0);
    for (int64_t i = 0; i < x.numel(); ++i)
      dispatch_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        x.data<T>()[i] = std::floor(x.data<T>()[i]);
      });
    if (variant == 3) dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      x.data<T>()[x.numel() / 2] = std::numeric_limits<T>::quiet_NaN();
    });
    Tensor dy = random_tensor(p.y_shape(), dt, 40 + variant);
    cuda::DeviceTensor gx = cuda::to_device(ctx, x), gdy = cuda::to_device(ctx, dy);
    cuda::DeviceTensor y(ctx, p.y_shape(), dt), dx(ctx, p.x_shape(), dt);

    Tensor ry(p.y_shape(), dt), rdx(p.x_shape(), dt);
    maxpool2d_forward_ref(p, x, ry);
    cuda::maxpool2d_forward_own(ctx, p, gx, y);
    EXPECT_TRUE(all_close(cuda::to_host(ctx, y), ry, 0, 0)) << "max forward, variant " << variant;
    maxpool2d_backward_ref(p, x, dy, rdx);
    cuda::maxpool2d_backward_own(ctx, p, gx, gdy, dx);
    EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, dx), rdx)) << "max backward, variant " << variant;

    if (variant == 3) continue;  // NaN propagates through averages identically; nothing new
    avgpool2d_forward_ref(p, x, ry);
    cuda::avgpool2d_forward_own(ctx, p, gx, y);
    EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, y), ry)) << "avg forward, variant " << variant;
    avgpool2d_backward_ref(p, dy, rdx);
    cuda::avgpool2d_backward_own(ctx, p, gdy, dx);
    EXPECT_TRUE(bitwise_equal(cuda::to_host(ctx, dx), rdx)) << "avg backward, variant " << variant;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaPool2d,
                         ::testing::Combine(::testing::ValuesIn(cases_for(kPool2dCases, kCudaTest)),
                                            ::testing::Values(DType::f32, DType::f64)),
                         [](const auto& info) {
                           return pool2d_case_name(std::get<0>(info.param)) + "_" + dtype_name(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace driftlab
