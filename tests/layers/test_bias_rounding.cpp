// conv_bias_rounding / matmul_bias_rounding (engine/layers/math_mode.h): under a bfloat16 or
// float16 op, `once` adds the (rounded) bias to the float32 sum and rounds once (oneDNN's
// convolution and linear, cuBLAS addmm); `twice` rounds the product, adds the rounded bias and
// rounds again (PyTorch's cuDNN convolution then output.add_(bias), Convolution.cpp; Keras's
// tf.nn.bias_add after the float16 op). The reference: the float32 layer without its bias, on the
// rounded input and weights, its result rounded, the rounded bias added and the sum rounded, each
// rounding written out here.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "core/ops/reduced_precision.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/layout.h"
#include "engine/layers/math_mode.h"
#include "engine/random.h"

namespace driftlab {
namespace {

float round_in(float v, const std::string& format) {
  return format == "bfloat16" ? round_to_bf16(v) : round_to_fp16(v);
}
Tensor rounded(const Tensor& t, const std::string& format) {
  Tensor r = t.clone();
  for (int64_t j = 0; j < r.numel(); ++j) r.data<float>()[j] = round_in(r.data<float>()[j], format);
  return r;
}

Tensor input(const Shape& s) {
  Tensor x(s, DType::f32);
  for (int64_t j = 0; j < x.numel(); ++j) x.data<float>()[j] = static_cast<float>(std::sin(0.7 * j + 0.3) * 3.0);
  return x;
}

// The layer under test (bias) and its float32 twin (no bias, the same weights: the weight is drawn
// first), for "dense" or "conv2d".
std::unique_ptr<Layer> make(const std::string& op, const Policy& p, bool bias) {
  Rng rng(p.rng_engine, 5);
  if (op == "dense") return std::make_unique<DenseLayer>(24, Shape{40}, p, rng, bias);
  Conv2dSpec cs;
  cs.out_channels = 16;
  cs.kernel_h = cs.kernel_w = 3;
  cs.bias = bias;
  return std::make_unique<Conv2dLayer>(cs, Shape{8, 7, 7}, p, rng);
}

TEST(BiasRounding, TwiceRoundsTheProductThenTheSum) {
  int64_t differ = 0, total = 0;
  for (const std::string op : {"dense", "conv2d"})
    for (const std::string format : {"bfloat16", "float16"})
      for (const std::string backend : {"reference", "eigen", "onednn"}) {
        const std::string knob = op == "dense" ? "matmul_bias_rounding" : "conv_bias_rounding";
        const std::string kb = op == "dense" ? "gemm_backend" : "conv_backend";
        const std::string base = "torch,autocast=" + format + "," + kb + "=" + backend;
        const Policy twice = Policy::parse(base + "," + knob + "=twice"), once = Policy::parse(base);
        const Policy plain = Policy::parse("torch," + kb + "=" + backend);
        auto lt = make(op, twice, true), lo = make(op, once, true), lp = make(op, plain, false);
        // Larger biases than the initialiser's, so that the two orders part more often.
        Tensor& b = lt->params()[1]->value;
        for (int64_t j = 0; j < b.numel(); ++j) b.data<float>()[j] = static_cast<float>(std::cos(j * 1.3) * 2.0);
        lo->params()[1]->value = b.clone();
        lp->params()[0]->value = rounded(lt->params()[0]->value, format);
        const Tensor x = input(op == "dense" ? Shape{6, 40} : Shape{3, 8, 7, 7});
        ExecContext exec;
        exec.channel_blocks = false;
        RunContext ctx = RunContext::inference(exec);
        const Tensor yt = lt->forward(ctx, x), yo = lo->forward(ctx, x);
        Tensor want = lp->forward(ctx, rounded(x, format));
        const Tensor bo = rounded(b, format);
        const int64_t per = op == "dense" ? 24 : 16, plane = op == "dense" ? 1 : 25;
        for (int64_t j = 0; j < want.numel(); ++j) {
          const int64_t ch = (j / plane) % per;
          float& w = want.data<float>()[j];
          w = round_in(round_in(w, format) + bo.data<float>()[ch], format);
        }
        ASSERT_EQ(yt.numel(), want.numel());
        for (int64_t j = 0; j < want.numel(); ++j) {
          ASSERT_EQ(yt.data<float>()[j], want.data<float>()[j]) << op << " " << format << " " << backend << " [" << j << "]";
          differ += yt.data<float>()[j] != yo.data<float>()[j];
          ++total;
        }
      }
  // The knob's effect: the two orders part where the product's rounding and the sum's interact.
  EXPECT_GT(differ, 0);
  std::cout << differ << " of " << total << " outputs differ between once and twice\n";
}

// The channel bias of `twice` on a channel-blocked convolution output (oneDNN's nChw16c between
// layers): the same sums as on the plain tensor.
TEST(BiasRounding, ChannelBiasOnBlockedLayout) {
  Tensor y = input({2, 32, 3, 3});
  Tensor b({32}, DType::f32);
  for (int64_t j = 0; j < 32; ++j) b.data<float>()[j] = static_cast<float>(j) * 0.25f - 3.0f;
  Tensor blocked = to_block(y, 16);
  add_channel_bias(y, b);
  add_channel_bias(blocked, b);
  const Tensor back = to_plain(blocked);
  for (int64_t j = 0; j < y.numel(); ++j) ASSERT_EQ(back.data<float>()[j], y.data<float>()[j]) << j;
  // And the plain sums themselves: element (n, c, i) is the input plus bias[c].
  const Tensor x = input({2, 32, 3, 3});
  for (int64_t j = 0; j < y.numel(); ++j)
    ASSERT_EQ(y.data<float>()[j], x.data<float>()[j] + b.data<float>()[(j / 9) % 32]) << j;
}

TEST(BiasRounding, PresetsAndVariants) {
  EXPECT_EQ(Policy::torch().conv_bias_rounding, BiasRounding::once);
  EXPECT_EQ(Policy::torch().matmul_bias_rounding, BiasRounding::once);
  EXPECT_EQ(Policy::parse("torch_gpu").conv_bias_rounding, BiasRounding::twice);    // cuDNN then add_
  EXPECT_EQ(Policy::parse("torch_gpu").matmul_bias_rounding, BiasRounding::once);  // addmm
  EXPECT_EQ(Policy::tensorflow().conv_bias_rounding, BiasRounding::twice);
  EXPECT_EQ(Policy::tensorflow().matmul_bias_rounding, BiasRounding::twice);
}

}  // namespace
}  // namespace driftlab
