// Channel-blocked activations between layers (engine/layers/layout.h, Sequential's negotiation):
// the Tensor refuses layout-unaware reads by name; conversions are exact and agree with
// blocked_offset; a hand-built ResNet piece keeps its activations blocked where the oneDNN
// convolutions compute in a block (a probe layer sees it), and ResNet-20 (option A) and ResNet-20b
// (option B) give, blocked against plain (ExecContext::channel_blocks):
//   * inference semantics (prediction, the attacks' input gradient): the same bits, since every
//     op there is the same primitive on the same bytes or elementwise;
//   * a training step: the plain path's results within BatchNorm's summation-order tolerance,
//     and the same bits twice at a fixed thread count.
// The float64 gradient checks of every layer (tests/layers/test_gradcheck.cpp, test_residual.cpp)
// run the plain path, which the blocked one is compared to here.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/global_avg_pool_layer.h"
#include "engine/layers/layout.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "engine/random.h"
#include "models/models.h"
#include "tests/test_util.h"

namespace {

using namespace driftlab;

TEST(Layout, ABlockedTensorRefusesLayoutUnawareReadsByName) {
  const Tensor x = to_block(random_tensor({2, 16, 3, 3}, DType::f32, 1), 16);
  EXPECT_EQ(x.channel_block(), 16);
  for (const std::string& msg : {error_of([&] { (void)x.data<float>(); }), error_of([&] { (void)x.at(0); }),
                                 error_of([&] { (void)x.reshape({2, 144}); }),
                                 error_of([&] { (void)x.to(DType::f64); })})
    EXPECT_NE(msg.find("channel-blocked (nChw16c)"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { (void)random_tensor({2, 12, 3, 3}, DType::f32, 1).with_block(16); }).find("multiple"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)random_tensor({2, 16}, DType::f32, 1).with_block(8); }).find("(N,C,H,W)"),
            std::string::npos);
}

TEST(Layout, ConversionsAreExactAndAgreeWithBlockedOffset) {
  const Tensor x = random_tensor({3, 32, 5, 7}, DType::f32, 2);
  for (int b : {8, 16}) {
    const Tensor xb = to_block(x, b);
    const float* d = xb.blocked_data<float>();
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t c = 0; c < 32; ++c)
        for (int64_t s = 0; s < 35; ++s)
          ASSERT_EQ(d[blocked_offset(n, c, s, 32, 35, b)], x.data<float>()[(n * 32 + c) * 35 + s]) << b;
    EXPECT_TRUE(bitwise_equal(to_plain(xb), x));
    EXPECT_TRUE(bitwise_equal(to_plain(to_block(xb, 24 - b)), x)) << "block to block goes through plain";
    EXPECT_TRUE(bitwise_equal(to_plain(xb.clone()), x)) << "clone keeps the block";
  }
}

// A layer-unaware op handed a blocked tensor directly (not through Sequential) fails, naming it.
TEST(Layout, ALayoutUnawareLayerHandedABlockedTensorFails) {
  const Policy p = Policy::torch();
  FlattenLayer flatten({16, 4, 4}, p);
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  const std::string msg =
      error_of([&] { (void)flatten.forward(ctx, to_block(random_tensor({2, 16, 4, 4}, DType::f32, 3), 16)); });
  EXPECT_NE(msg.find("channel-blocked"), std::string::npos) << msg;
}

// Identity that records the channel block of what it is given: where Sequential keeps tensors.
class Probe : public ExternalLayer {
 public:
  explicit Probe(Shape s) : shape_(std::move(s)) {}
  std::string kind() const override { return "probe"; }
  std::string describe() const override { return "probe"; }
  Shape output_shape() const override { return shape_; }
  int input_block(const ExecContext&, DType) const override { return kAnyBlock; }
  Tensor forward(RunContext&, const Tensor& x) override {
    seen_forward = x.channel_block();
    return x;
  }
  Tensor backward(RunContext&, const Tensor& dy) override {
    seen_backward = dy.channel_block();
    return dy;
  }
  int seen_forward = -2, seen_backward = -2;

 private:
  Shape shape_;
};

TEST(BlockedActivations, SequentialKeepsThemBetweenTheLayersThatTakeThem) {
  const int blk = Conv2dLayer::kernel_block(make_cpu_registry().conv2d.at(KernelBackend::onednn));
  if (blk == 0) GTEST_SKIP() << "oneDNN computes in no channel block on this CPU";
  Policy p = Policy::torch();
  p.conv_backend = KernelBackend::onednn;
  Rng rng(p.rng_engine, 5);
  Sequential net({3, 8, 8});
  Conv2dSpec s;
  s.out_channels = 16;
  s.pad = PadMode::explicit_pad;
  s.pad_h = s.pad_w = 1;
  net.add(std::make_unique<Conv2dLayer>(s, net.current_shape(), p, rng));
  net.add(std::make_unique<BatchNormLayer>(net.current_shape(), p));
  auto* probe1 = static_cast<Probe*>(&net.add(std::make_unique<Probe>(net.current_shape())));
  add_basic_block(net, p, rng, 32, 2, Shortcut::option_a);
  auto* probe2 = static_cast<Probe*>(&net.add(std::make_unique<Probe>(net.current_shape())));
  add_basic_block(net, p, rng, 32, 1, Shortcut::identity);
  net.add(std::make_unique<GlobalAvgPoolLayer>(net.current_shape(), p));
  auto* probe3 = static_cast<Probe*>(&net.add(std::make_unique<Probe>(net.current_shape())));
  ExecContext exec;
  Rng drop(p.rng_engine, 1);
  RunContext ctx = RunContext::training(exec, &drop);
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 6);
  const Tensor y = net.forward(ctx, x);
  EXPECT_EQ(probe1->seen_forward, blk) << "conv -> BatchNorm -> (probe) -> conv: blocked";
  EXPECT_EQ(probe2->seen_forward, blk) << "between two residual blocks: blocked";
  EXPECT_EQ(probe3->seen_forward, 0) << "after global average pooling: plain";
  EXPECT_EQ(y.channel_block(), 0);
  const Tensor dx = net.backward(ctx, random_tensor(y.shape(), DType::f32, 7));
  EXPECT_EQ(probe1->seen_backward, blk);
  EXPECT_EQ(probe2->seen_backward, blk);
  EXPECT_EQ(dx.channel_block(), 0) << "the input gradient comes back in the input's layout";
  exec.channel_blocks = false;
  (void)net.forward(ctx, x);
  EXPECT_EQ(probe1->seen_forward, 0) << "channel_blocks off: plain everywhere";
  EXPECT_EQ(probe2->seen_forward, 0);
}

// One training step of `net` (train semantics, the input gradient too) from zeroed gradients, with
// channel_blocks on or off: its output, input gradient and parameter gradients.
struct Step {
  Tensor y, dx;
  std::vector<Tensor> grads;
};
Step training_step(Sequential& net, const Policy& p, const Tensor& x, const Tensor& dy, bool blocks) {
  ExecContext exec;
  exec.channel_blocks = blocks;
  Rng drop(p.rng_engine, 1);
  RunContext ctx = RunContext::training(exec, &drop);
  ctx.input_grad = true;
  for (auto& np : net.named_params()) np.second->grad.fill(0.0);
  Step r;
  r.y = net.forward(ctx, x);
  r.dx = net.backward(ctx, dy);
  for (auto& np : net.named_params()) r.grads.push_back(np.second->grad.clone());
  return r;
}

// The blocked step's results are the plain step's bits.
void expect_same_bits(const Step& blocked, const Step& plain) {
  EXPECT_TRUE(bitwise_equal(blocked.y, plain.y));
  EXPECT_TRUE(bitwise_equal(blocked.dx, plain.dx));
  ASSERT_EQ(blocked.grads.size(), plain.grads.size());
  for (std::size_t i = 0; i < plain.grads.size(); ++i)
    EXPECT_TRUE(bitwise_equal(blocked.grads[i], plain.grads[i])) << "gradient " << i;
}

// Max and average pooling take the block (kernels/cpu/fast/pool2d_fast.cpp's blocked loops):
// conv -> ReLU -> max pool -> conv -> ReLU -> average pool -> conv keeps every activation
// blocked, forward and backward, and gives the bits of the same net with channel_blocks off
// (the same oneDNN primitives on the same bytes; pooling and ReLU lane by lane).
TEST(BlockedActivations, PoolingKeepsThemAndGivesThePlainBits) {
  const int blk = Conv2dLayer::kernel_block(make_cpu_registry().conv2d.at(KernelBackend::onednn));
  if (blk == 0) GTEST_SKIP() << "oneDNN computes in no channel block on this CPU";
  ThreadCountGuard threads(2);
  Policy p = Policy::torch();
  p.conv_backend = KernelBackend::onednn;
  Rng rng(p.rng_engine, 5);
  // 40 input channels: more than the fused conv_block path takes (kernels/cpu/fast/
  // conv_block_fast.cpp's small layers), so the first conv -> ReLU -> pool runs layer by layer.
  Sequential net({40, 12, 12});
  auto conv_relu = [&](int64_t c) {
    Conv2dSpec s;
    s.out_channels = c;
    s.pad = PadMode::explicit_pad;
    s.pad_h = s.pad_w = 1;
    net.add(std::make_unique<Conv2dLayer>(s, net.current_shape(), p, rng));
    net.add(std::make_unique<ActivationLayer>(ActKind::relu, net.current_shape(), p));
  };
  auto pool = [&](PoolKind kind, int64_t window, int64_t stride) {
    Pool2dSpec s;
    s.kind = kind;
    s.window = window;
    s.stride = stride;
    net.add(std::make_unique<Pool2dLayer>(s, net.current_shape(), p));
    return static_cast<Probe*>(&net.add(std::make_unique<Probe>(net.current_shape())));
  };
  conv_relu(16);
  Probe* after_max = pool(PoolKind::max, 2, 2);
  conv_relu(32);
  Probe* after_avg = pool(PoolKind::avg, 3, 1);  // overlapping windows: backward sums
  conv_relu(16);
  net.add(std::make_unique<FlattenLayer>(net.current_shape(), p));
  net.add(std::make_unique<DenseLayer>(5, net.current_shape(), p, rng));
  const Tensor x = random_tensor({3, 40, 12, 12}, DType::f32, 8);
  const Tensor dy = random_tensor({3, 5}, DType::f32, 9);
  const Step plain = training_step(net, p, x, dy, false);
  EXPECT_EQ(after_max->seen_forward, 0);
  EXPECT_EQ(after_avg->seen_forward, 0);
  const Step blocked = training_step(net, p, x, dy, true);
  EXPECT_EQ(after_max->seen_forward, blk) << "conv -> ReLU -> max pool -> (probe): blocked";
  EXPECT_EQ(after_avg->seen_forward, blk) << "conv -> ReLU -> average pool -> (probe): blocked";
  EXPECT_EQ(after_max->seen_backward, blk);
  EXPECT_EQ(after_avg->seen_backward, blk);
  expect_same_bits(blocked, plain);
}

// Global average pooling takes its input in the block the convolution before it computes in
// (kAsProduced: no layer after it asks for one, its (N,C) result carries none): conv -> ReLU ->
// (probe) -> global pool -> dense sees the block forward and backward and gives the bits of the
// same net with channel_blocks off (each channel's sum in the plain order, lane by lane). ResNet-20
// ends so; the ResNet-20 tests below run it in a whole model.
TEST(BlockedActivations, GlobalPoolingTakesTheBlockAsProducedWithThePlainBits) {
  const int blk = Conv2dLayer::kernel_block(make_cpu_registry().conv2d.at(KernelBackend::onednn));
  if (blk == 0) GTEST_SKIP() << "oneDNN computes in no channel block on this CPU";
  ThreadCountGuard threads(2);
  Policy p = Policy::torch();
  p.conv_backend = KernelBackend::onednn;
  Rng rng(p.rng_engine, 6);
  Sequential net({24, 5, 7});
  Conv2dSpec s;
  s.out_channels = 32;
  s.pad = PadMode::explicit_pad;
  s.pad_h = s.pad_w = 1;
  net.add(std::make_unique<Conv2dLayer>(s, net.current_shape(), p, rng));
  net.add(std::make_unique<ActivationLayer>(ActKind::relu, net.current_shape(), p));
  auto* seen = static_cast<Probe*>(&net.add(std::make_unique<Probe>(net.current_shape())));
  net.add(std::make_unique<GlobalAvgPoolLayer>(net.current_shape(), p));
  net.add(std::make_unique<DenseLayer>(4, net.current_shape(), p, rng));
  const Tensor x = random_tensor({3, 24, 5, 7}, DType::f32, 8);
  const Tensor dy = random_tensor({3, 4}, DType::f32, 9);
  const Step plain = training_step(net, p, x, dy, false);
  EXPECT_EQ(seen->seen_forward, 0);
  const Step blocked = training_step(net, p, x, dy, true);
  EXPECT_EQ(seen->seen_forward, blk) << "conv -> ReLU -> (probe) -> global pool: blocked";
  EXPECT_EQ(seen->seen_backward, blk) << "the pool's dx in its input's block";
  EXPECT_EQ(blocked.y.channel_block(), 0);
  expect_same_bits(blocked, plain);
  // a prediction too (inference semantics, nothing recorded)
  ExecContext exec;
  RunContext ictx = RunContext::inference(exec);
  ExecContext plain_exec;
  plain_exec.channel_blocks = false;
  RunContext pctx = RunContext::inference(plain_exec);
  EXPECT_TRUE(bitwise_equal(net.forward(ictx, x), net.forward(pctx, x)));
}

struct Pass {
  Tensor out, dx;
  std::vector<Tensor> grads, buffers;
};

// One recorded forward and backward of `m` (train or inference semantics) from the same start.
Pass run_pass(const char* model, Semantics sem, bool blocks, bool param_grads) {
  Model m = build_model(model, Policy::torch(), 11);
  ExecContext exec;
  exec.channel_blocks = blocks;
  Rng drop(Policy::torch().rng_engine, 1);
  RunContext ctx = RunContext::recorded(exec, sem, &drop);
  ctx.param_grads = param_grads;
  const Tensor x = random_tensor({4, 3, 32, 32}, DType::f32, 12, 0.0, 1.0);
  Pass r;
  r.out = m.net->forward(ctx, x);
  r.dx = m.net->backward(ctx, random_tensor(r.out.shape(), DType::f32, 13));
  for (auto& np : m.net->named_params()) r.grads.push_back(np.second->grad.clone());
  for (auto& nb : m.net->named_buffers()) r.buffers.push_back(nb.second->value.clone());
  return r;
}

class BlockedResNet : public ::testing::TestWithParam<const char*> {};

TEST_P(BlockedResNet, InferenceGivesThePlainBits) {
  ThreadCountGuard threads(2);
  // param_grads off, as the attacks run it: dx only; on: dgamma/dbeta sums differ in order, skip
  const Pass plain = run_pass(GetParam(), Semantics::inference, false, false);
  const Pass blocked = run_pass(GetParam(), Semantics::inference, true, false);
  EXPECT_TRUE(bitwise_equal(blocked.out, plain.out));
  EXPECT_TRUE(bitwise_equal(blocked.dx, plain.dx));
}

TEST_P(BlockedResNet, TrainingStepWithinBatchNormSummationOrderOfThePlainPath) {
  ThreadCountGuard threads(2);
  const Pass plain = run_pass(GetParam(), Semantics::train, false, true);
  const Pass blocked = run_pass(GetParam(), Semantics::train, true, true);
  const Pass again = run_pass(GetParam(), Semantics::train, true, true);
  // Tolerance: the blocked BatchNorm sums each (image, channel) plane in lanes and four partial
  // sums where the plain one sums rows in 16 lanes: both within a few float32 ulps of the exact
  // sums (tests/ops/test_batchnorm.cpp's 2e-5 against float64). Through 19 BatchNorms a 1e-6
  // relative change of a mean or a variance moves logits and gradients by about as much per layer;
  // 1e-4 of each tensor's largest entry leaves two orders of margin, and a wrong layout (channels
  // mixed up) is off by O(1).
  const double tol = 1e-4;
  EXPECT_TRUE(near_normwise(blocked.out, plain.out, tol)) << "logits";
  ASSERT_EQ(blocked.grads.size(), plain.grads.size());
  for (std::size_t i = 0; i < plain.grads.size(); ++i)
    EXPECT_TRUE(near_normwise(blocked.grads[i], plain.grads[i], tol)) << "gradient " << i;
  for (std::size_t i = 0; i < plain.buffers.size(); ++i)
    EXPECT_TRUE(near_normwise(blocked.buffers[i], plain.buffers[i], tol)) << "running statistic " << i;
  EXPECT_TRUE(bitwise_equal(again.out, blocked.out)) << "the same bits twice at 2 threads";
  for (std::size_t i = 0; i < blocked.grads.size(); ++i) EXPECT_TRUE(bitwise_equal(again.grads[i], blocked.grads[i]));
}

INSTANTIATE_TEST_SUITE_P(Models, BlockedResNet, ::testing::Values("resnet20", "resnet20b"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });

}  // namespace
