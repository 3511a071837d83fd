// One tiny, hand-computable case per Policy knob showing its documented effect (the frameworks'
// behaviour each knob copies is in engine/policy.cpp knob_table() and docs/POLICIES.md).
// Where the effect has a size (a loss gap, a drift, a bound) the test records and prints it.
// The optimiser knobs' step-by-step formulas are in tests/test_sgd.cpp; this file shows the
// knob-level effects (sgd_form trajectories, weight_decay_mode, weight_decay_on_bias).
//
// To add a knob test: 1) one TEST(Knob_<knob>, <effect>) with inputs small enough to compute
// by hand in a comment; 2) report(...) the size of the effect where it has one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/layers/activation_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/global_avg_pool_layer.h"
#include "engine/layers/init.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "core/ops/conv2d.h"
#include "core/ops/softmax_xent.h"
#include "engine/policy.h"
#include "engine/random.h"
#include "engine/train/optimizer.h"
#include "engine/cuda/device_net.h"
#include "engine/train/cpu_runner.h"
#include "kernels/cpu/ref/ref.h"
#include "models/models.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

// Records the size of an effect in the XML report and prints it.
void report(const std::string& key, double value) {
  ::testing::Test::RecordProperty(key, std::to_string(value));
  std::cout << "  [effect] " << key << " = " << value << "\n";
}

Tensor ints(Shape shape, int64_t start = 0) {
  std::vector<float> v(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(start + static_cast<int64_t>(i));
  return Tensor::from<float>(std::move(shape), v);
}

Conv2dSpec spec(int64_t k, int64_t stride, PadMode pad, int64_t out = 1, bool bias = false) {
  Conv2dSpec s;
  s.out_channels = out;
  s.kernel_h = s.kernel_w = k;
  s.stride = stride;
  s.pad = pad;
  s.bias = bias;
  return s;
}

// ---------------------------------------------------------------------------------------------
// conv_same_pad

struct Pads {
  int64_t t, b, l, r;
};
Pads pads_of(const std::string& policy, int64_t k, int64_t stride, Shape in = {1, 4, 4}) {
  Conv2dParams p = resolve_conv2d(Policy::parse(policy), in, spec(k, stride, PadMode::same));
  return {p.pad_t, p.pad_b, p.pad_l, p.pad_r};
}

TEST(Knob_conv_same_pad, ResolvedPads) {
  // 4x4, k=3, s=2: out = ceil(4/2) = 2, total pad P = (2-1)*2 + 3 - 4 = 1 (odd).
  Pads tf = pads_of("tensorflow", 3, 2);  // after: floor(P/2)=0 before, 1 after
  EXPECT_EQ(tf.t, 0);
  EXPECT_EQ(tf.b, 1);
  EXPECT_EQ(tf.l, 0);
  EXPECT_EQ(tf.r, 1);
  Pads th = pads_of("theano", 3, 2);  // before: half pad 1 before, crop leaves 0 after
  EXPECT_EQ(th.t, 1);
  EXPECT_EQ(th.b, 0);
  EXPECT_EQ(th.l, 1);
  EXPECT_EQ(th.r, 0);
  // k=3, s=1: P=2, symmetric under every rule.
  for (const char* preset : {"torch", "tensorflow", "theano"}) {
    Pads p = pads_of(preset, 3, 1);
    EXPECT_EQ(p.t, 1) << preset;
    EXPECT_EQ(p.b, 1) << preset;
    EXPECT_EQ(p.l, 1) << preset;
    EXPECT_EQ(p.r, 1) << preset;
  }
  // k=2, s=1: P=1: tf (0,1), theano (1,0), torch 'same' (0,1) (extra on the right).
  Pads tf2 = pads_of("tensorflow", 2, 1), th2 = pads_of("theano", 2, 1), pt2 = pads_of("torch", 2, 1);
  EXPECT_EQ(tf2.t, 0);
  EXPECT_EQ(tf2.b, 1);
  EXPECT_EQ(th2.t, 1);
  EXPECT_EQ(th2.b, 0);
  EXPECT_EQ(pt2.l, 0);
  EXPECT_EQ(pt2.r, 1);
}

TEST(Knob_conv_same_pad, StridedSameUnderTheTorchValues) {
  // after_stride1 is PyTorch's own padding='same': refused with stride 2.
  try {
    pads_of("torch,conv_same_pad=after_stride1", 3, 2);
    FAIL() << "conv_same_pad=after_stride1 with stride 2 must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not supported for strided convolutions"), std::string::npos) << e.what();
  }
  // The torch preset (half_strided) pads as PyTorch code writes a strided 'same' conv,
  // padding=(k-1)//2 on every side: 4x4, k=3, s=2 -> 1/1/1/1 (TF: 0/1/0/1), the output still
  // ceil(4/2) = 2.
  Pads t = pads_of("torch", 3, 2);
  EXPECT_EQ(t.t, 1);
  EXPECT_EQ(t.b, 1);
  EXPECT_EQ(t.l, 1);
  EXPECT_EQ(t.r, 1);
  // 5x5 (odd), k=5, dilation 1, s=2: padding 2 every side, out floor((5+4-5)/2)+1 = 3 = ceil(5/2)
  Pads t5 = pads_of("torch", 5, 2, {1, 5, 5});
  EXPECT_EQ(t5.t, 2);
  EXPECT_EQ(t5.r, 2);
  // an even kernel at stride 2: (k-1)//2 every side would not keep ceil(n/s): refused by name
  try {
    pads_of("torch", 2, 2);
    FAIL() << "half_strided with an even kernel at stride 2 must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv_same_pad=half_strided"), std::string::npos) << e.what();
  }
  // at stride 1 it is PyTorch's padding='same' (k=2: the extra pad right)
  Pads t2 = pads_of("torch", 2, 1);
  EXPECT_EQ(t2.l, 0);
  EXPECT_EQ(t2.r, 1);
  // The knob alone decides: torch with conv_same_pad=after pads like TF.
  Pads p = pads_of("torch,conv_same_pad=after", 3, 2);
  EXPECT_EQ(p.b, 1);
  EXPECT_EQ(p.t, 0);
}

TEST(Knob_conv_same_pad, ForwardValues) {
  // x[i][j] = 4i + j (0..15), ones 3x3 kernel, stride 2, 'same'.
  // TF pads bottom/right: windows rows {0,1,2},{2,3}, cols likewise:
  //   (0,0)=0+1+2+4+5+6+8+9+10=45  (0,1)=2+3+6+7+10+11=39  (1,0)=8+9+10+12+13+14=66  (1,1)=10+11+14+15=50
  // Theano pads top/left: windows rows {0,1},{1,2,3}:
  //   (0,0)=0+1+4+5=10  (0,1)=1+2+3+5+6+7=24  (1,0)=4+5+8+9+12+13=51  (1,1)=5+6+7+9+10+11+13+14+15=90
  auto run = [](const char* preset) {
    Policy pol = Policy::parse(std::string(preset) + ",conv_backend=reference");
    Rng rng(pol.rng_engine, 1);
    Conv2dLayer layer(spec(3, 2, PadMode::same), {1, 4, 4}, pol, rng);
    layer.params()[0]->value.fill(1.0);  // symmetric kernel: the flip of theano changes nothing
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    return layer.forward(ctx, ints({1, 1, 4, 4}));
  };
  // Small integers: every sum is exact in float32, so the comparison is exact (atol 0).
  EXPECT_TRUE(all_close(run("tensorflow"), Tensor::from<float>({1, 1, 2, 2}, {45, 39, 66, 50}), 0, 0));
  EXPECT_TRUE(all_close(run("theano"), Tensor::from<float>({1, 1, 2, 2}, {10, 24, 51, 90}), 0, 0));
  report("conv_same_pad_output00_tf_minus_theano", 45 - 10);
}

// ---------------------------------------------------------------------------------------------
// conv_kernel_flip

Tensor conv_once(const std::string& policy, const Tensor& w, const Tensor& x, const Conv2dSpec& s) {
  Policy pol = Policy::parse(policy);
  Rng rng(pol.rng_engine, 1);
  Conv2dLayer layer(s, {x.dim(1), x.dim(2), x.dim(3)}, pol, rng);
  layer.params()[0]->value = w.clone();
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  return layer.forward(ctx, x);
}

// x = [1,2,3], w = [1,10,100]: correlation 1*1+2*10+3*100 = 321; convolution (w reversed) 123.
const Tensor& x_1x3() {
  static const Tensor t = Tensor::from<float>({1, 1, 1, 3}, {1, 2, 3});
  return t;
}
const Tensor& w_1x3() {
  static const Tensor t = Tensor::from<float>({1, 1, 1, 3}, {1, 10, 100});
  return t;
}
Conv2dSpec spec_1x3() {
  Conv2dSpec s = spec(1, 1, PadMode::valid);
  s.kernel_h = 1;
  s.kernel_w = 3;
  return s;
}

// oneDNN is checked in subprocesses below (OnednnFlip*): its plan cache crashed on a flipped
// call after an unflipped one of the same shape, and a crash must fail one test, not the binary.
const char* const kFlipSafeBackends[] = {"reference", "eigen"};

TEST(Knob_conv_kernel_flip, CorrelationVsConvolution1x3) {
  const Conv2dSpec s = spec_1x3();
  for (const char* be : kFlipSafeBackends) {  // integers: exact in every summation order
    const std::string b = std::string(",conv_backend=") + be;
    EXPECT_EQ(conv_once("torch" + b, w_1x3(), x_1x3(), s).at(0), 321.0f) << be;
    EXPECT_EQ(conv_once("torch,conv_kernel_flip=true" + b, w_1x3(), x_1x3(), s).at(0), 123.0f) << be;
    EXPECT_EQ(conv_once("theano" + b, w_1x3(), x_1x3(), s).at(0), 123.0f) << be;
  }
  report("conv_kernel_flip_1x3_correlation_minus_convolution", 321 - 123);
}

// ---------------------------------------------------------------------------------------------
// conv_algorithm: every preset runs direct sums; winograd asks for oneDNN's Winograd primitives
// (tests/ops/test_conv2d.cpp Conv2dOnednn.WinogradWhereOneDnnHasItDirectElsewhere checks them
// against float64), is refused by name where no kernel has it, and trains a ResNet-20 step.
TEST(Knob_conv_algorithm, DirectInEveryPresetWinogradRefusedWhereNoKernelHasIt) {
  for (const char* preset : {"torch", "tensorflow", "theano"})
    EXPECT_EQ(Policy::parse(preset).get("conv_algorithm"), "direct") << preset;
  const Conv2dSpec s = spec(3, 1, PadMode::same, 32);
  EXPECT_EQ(resolve_conv2d(Policy::parse("torch,conv_algorithm=winograd"), {32, 8, 8}, s).algorithm,
            ConvAlgorithm::winograd);
  EXPECT_NE(error_of([&] { resolve_conv2d(Policy::parse("torch,conv_algorithm=winograd,conv_backend=eigen"), {32, 8, 8}, s); })
                .find("conv_algorithm=winograd runs on conv_backend=onednn only"),
            std::string::npos);
  EXPECT_NE(error_of([&] { resolve_conv2d(Policy::parse("torch,conv_algorithm=winograd,dtype=float64"), {32, 8, 8}, s); })
                .find("conv_algorithm=winograd needs dtype=float32"),
            std::string::npos);
  EXPECT_NE(error_of([] { resolve_cuda_exec(Policy::parse("torch,conv_algorithm=winograd")); })
                .find("cuda: conv_algorithm=winograd is built for the CPU's oneDNN kernel only"),
            std::string::npos);
}

TEST(Knob_conv_algorithm, WinogradChangesAResnetStepWhereOneDnnHasIt) {
  const KernelRegistry reg = make_cpu_registry();
  Conv2dParams q = resolve_conv2d(Policy::parse("torch,conv_algorithm=winograd"), {64, 8, 8},
                                  spec(3, 1, PadMode::same, 64));
  q.n = 4;
  const bool has = std::string(reg.conv2d.at(KernelBackend::onednn).algorithm(q)) == "winograd";
  const Tensor x = random_tensor({4, 3, 32, 32}, DType::f32, 3, 0.0, 1.0);
  const std::vector<int32_t> y = {1, 2, 3, 4};
  std::vector<double> losses;
  std::vector<Tensor> firsts;
  for (const char* pol : {"torch", "torch,conv_algorithm=winograd"}) {
    Model m = build_model("resnet20", Policy::parse(pol), 7);
    TrainConfig cfg;
    cfg.batch = 4;
    CpuRunner r(m, cfg);
    r.train_step(x, y);
    losses.push_back(r.train_step(x, y));  // the second step's loss: after the first step's update
    firsts.push_back(m.net->named_params().at(0).second->value.clone());
  }
  ASSERT_TRUE(std::isfinite(losses[1]));
  // The same mathematics: the losses agree to float32 rounding through 20 layers (1e-3 relative is
  // far above it and far below what a wrong convolution does to a loss near 2.3).
  EXPECT_NEAR(losses[1], losses[0], 1e-3 * std::fabs(losses[0]));
  if (has) {
    EXPECT_FALSE(bitwise_equal(firsts[1], firsts[0])) << "Winograd left the stem's weights on direct's bits";
    report("conv_algorithm_resnet20_second_step_loss_winograd_minus_direct", losses[1] - losses[0]);
  } else {
    EXPECT_TRUE(bitwise_equal(firsts[1], firsts[0]));  // direct everywhere on this ISA
  }
}

TEST(Knob_conv_kernel_flip, FlipEqualsRotatedKernel) {
  // Small-integer x in [-3,3] and w in [-2,2], 2 in / 3 out channels, 3x2 kernel (non-square so
  // a transposition instead of a rotation would be caught), padding 1, stride 1: exact in float32.
  std::mt19937 gen(5);
  std::vector<float> xv(2 * 2 * 5 * 6), wv(3 * 2 * 3 * 2);
  for (auto& v : xv) v = static_cast<float>(static_cast<int>(gen() % 7) - 3);
  for (auto& v : wv) v = static_cast<float>(static_cast<int>(gen() % 5) - 2);
  const Tensor x = Tensor::from<float>({2, 2, 5, 6}, xv);
  const Tensor w = Tensor::from<float>({3, 2, 3, 2}, wv);
  Tensor rot({3, 2, 3, 2}, DType::f32);
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t c = 0; c < 2; ++c)
          rot.data<float>()[((o * 2 + i) * 3 + r) * 2 + c] = w.data<float>()[((o * 2 + i) * 3 + (2 - r)) * 2 + (1 - c)];
  Conv2dSpec s = spec(3, 1, PadMode::explicit_pad, 3);
  s.kernel_w = 2;
  s.pad_h = s.pad_w = 1;
  for (const char* be : kFlipSafeBackends) {
    const std::string b = std::string(",conv_backend=") + be;
    const Tensor flipped = conv_once("torch,conv_kernel_flip=true" + b, w, x, s);
    const Tensor rotated = conv_once("torch" + b, rot, x, s);
    EXPECT_TRUE(bitwise_equal(flipped, rotated)) << be;
    // And the flip is not a no-op on this data.
    EXPECT_FALSE(bitwise_equal(flipped, conv_once("torch" + b, w, x, s))) << be;
  }
}

// The oneDNN cases run in a child process (a death-test subprocess that must exit 0), so a
// crash fails only the test that found it.
struct ConvGrads {
  Tensor y, dx, dw;
};
// Training forward and backward of a 1x3-kernel conv with small-integer data (exact in float32).
ConvGrads conv_grads(const std::string& policy, const Tensor& x) {
  Policy pol = Policy::parse(policy);
  Rng rng(pol.rng_engine, 1);
  Conv2dLayer layer(spec_1x3(), {1, 1, x.dim(3)}, pol, rng);
  layer.params()[0]->value = w_1x3().clone();
  layer.params()[0]->grad.zero();
  ExecContext exec;
  RunContext ctx = RunContext::training(exec, nullptr);
  ConvGrads g;
  g.y = layer.forward(ctx, x);
  std::vector<float> dyv(static_cast<std::size_t>(g.y.numel()));
  for (std::size_t i = 0; i < dyv.size(); ++i) dyv[i] = static_cast<float>(i % 3) - 1.0f;
  g.dx = layer.backward(ctx, Tensor::from<float>(g.y.shape(), dyv));
  g.dw = layer.params()[0]->grad.clone();
  return g;
}

void onednn_flip_child(bool unflipped_first, int64_t width) {
  // A fresh shape per test (1 x width input, 1x3 kernel), so no earlier call in this process
  // has cached a oneDNN plan for it; inputs beyond the first three are small integers too.
  std::vector<float> xv(static_cast<std::size_t>(width));
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i + 1);
  const Tensor x = Tensor::from<float>({1, 1, 1, width}, xv);
  int bad = 0;
  if (unflipped_first) bad |= conv_grads("torch,conv_backend=onednn", x).y.at(0) != 321.0f;
  const ConvGrads got = conv_grads("torch,conv_kernel_flip=true,conv_backend=onednn", x);
  const ConvGrads want = conv_grads("torch,conv_kernel_flip=true,conv_backend=reference", x);
  bad |= got.y.at(0) != 123.0f;
  bad |= !bitwise_equal(got.y, want.y) || !bitwise_equal(got.dx, want.dx) || !bitwise_equal(got.dw, want.dw);
  std::fprintf(stderr, "onednn flipped conv gave y0=%g (want 123)\n", static_cast<double>(got.y.at(0)));
  std::exit(bad);
}

// "threadsafe" death tests re-run the binary for the child instead of forking a process that
// has OpenMP/oneDNN threads; the previous style is restored afterwards.
class ThreadsafeDeathTests {
 public:
  ThreadsafeDeathTests() : saved_(GTEST_FLAG_GET(death_test_style)) { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
  ~ThreadsafeDeathTests() { GTEST_FLAG_SET(death_test_style, saved_); }

 private:
  std::string saved_;
};

TEST(Knob_conv_kernel_flip, OnednnFlipFreshShape) {
  ThreadsafeDeathTests style;
  EXPECT_EXIT(onednn_flip_child(false, 5), ::testing::ExitedWithCode(0), "");
}

// Regression for a crash found at commit b2bf47b in kernels/cpu/onednn/conv2d_onednn.cpp:
// get_plan's cache key (line 155) leaves out p.flip ("the primitive does not depend on them"),
// but make_plan (line 141) sized plan->flipped_w only when p.flip was set. A flipped call after
// an unflipped call of the same shape got the cached plan with an empty flipped_w, and
// rotate_kernel (lines 216 forward, 235 backward_data) wrote through its null data(): SIGSEGV.
// Any Theano-preset model run after a torch/tensorflow one of the same shapes in one process.
TEST(Knob_conv_kernel_flip, OnednnFlipAfterUnflippedSameShape) {
  ThreadsafeDeathTests style;
  EXPECT_EXIT(onednn_flip_child(true, 6), ::testing::ExitedWithCode(0), "");
}

// ---------------------------------------------------------------------------------------------
// flatten_order

TEST(Knob_flatten_order, ChwVsHwc) {
  ExecContext exec;
  RunContext ctx = RunContext::training(exec, nullptr);
  const Tensor x = ints({1, 2, 2, 2});  // x[c][h][w] = 4c + 2h + w
  FlattenLayer chw({2, 2, 2}, Policy::parse("torch"));
  FlattenLayer hwc({2, 2, 2}, Policy::parse("tensorflow"));
  // hwc feature (h*W + w)*C + c holds x[c][h][w]: 0,4,1,5,2,6,3,7.
  EXPECT_TRUE(all_close(chw.forward(ctx, x), Tensor::from<float>({1, 8}, {0, 1, 2, 3, 4, 5, 6, 7}), 0, 0));
  EXPECT_TRUE(all_close(hwc.forward(ctx, x), Tensor::from<float>({1, 8}, {0, 4, 1, 5, 2, 6, 3, 7}), 0, 0));
  // Backward is the inverse permutation: dx of dy = the forward output is x again.
  EXPECT_TRUE(all_close(hwc.backward(ctx, hwc.forward(ctx, x)), x, 0, 0));
  EXPECT_TRUE(all_close(chw.backward(ctx, chw.forward(ctx, x)), x, 0, 0));
}

// ---------------------------------------------------------------------------------------------
// init_weight, init_bias, weight_layout

float max_abs_f(const Tensor& t) {
  float m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, static_cast<float>(std::fabs(t.at(i))));
  return m;
}

TEST(Knob_init_weight, BoundsRespectedAndReached) {
  // Conv weight (64,32,3,3): fan_in = 32*9 = 288, fan_out = 64*9 = 576.
  struct Case {
    const char* policy;
    double bound;
  } cases[] = {{"tensorflow", std::sqrt(6.0 / (288 + 576))}, {"torch", 1.0 / std::sqrt(288.0)}};
  for (const auto& c : cases) {
    Policy pol = Policy::parse(c.policy);
    Rng rng(pol.rng_engine, 3);
    Tensor w({64, 32, 3, 3}, DType::f32);
    init_weight(w, 288, 576, pol, rng);
    // lo + u*(hi-lo) in float with u < 1 never exceeds the float-rounded bound.
    const float bound = static_cast<float>(c.bound);
    EXPECT_LE(max_abs_f(w), bound) << c.policy;
    // 18432 uniform draws: P(max|w| < 0.999 bound) = 0.999^18432 ~ 1e-8.
    EXPECT_GE(max_abs_f(w), 0.999f * bound) << c.policy;
    report(std::string("init_weight_bound_") + c.policy, c.bound);
  }
}

TEST(Knob_init_bias, ZerosVsUniformFanIn) {
  for (const char* preset : {"tensorflow", "theano", "torch"}) {
    Policy pol = Policy::parse(preset);
    Rng rng(pol.rng_engine, 4);
    Conv2dLayer layer(spec(3, 1, PadMode::valid, 16, true), {5, 8, 8}, pol, rng);
    const Tensor& b = layer.params()[1]->value;
    ASSERT_TRUE(layer.params()[1]->is_bias);
    const double fan_in_bound = 1.0 / std::sqrt(5.0 * 9.0);
    if (pol.init_bias == BiasInit::zeros) {
      EXPECT_EQ(max_abs_f(b), 0.0f) << preset;
    } else {
      EXPECT_LE(max_abs_f(b), static_cast<float>(fan_in_bound)) << preset;
      EXPECT_GT(max_abs_f(b), 0.0f) << preset;
    }
  }
  EXPECT_EQ(Policy::tensorflow().init_bias, BiasInit::zeros);
  EXPECT_EQ(Policy::torch().init_bias, BiasInit::uniform_fan_in);
}

// The sequence init_weight draws: the same engine, seed and float formula (lo + u*(hi-lo)).
std::vector<float> drawn_sequence(const Policy& pol, uint64_t seed, int64_t n, double bound) {
  Rng rng(pol.rng_engine, seed);
  const float lo = static_cast<float>(-bound), hi = static_cast<float>(bound);
  std::vector<float> s(static_cast<std::size_t>(n));
  for (auto& v : s) v = rng.uniform<float>(lo, hi);
  return s;
}

TEST(Knob_weight_layout, ConvDrawOrderHwioVsOihw) {
  const int64_t O = 3, I = 2, KH = 2, KW = 3, fan_in = I * KH * KW, fan_out = O * KH * KW;
  for (const char* preset : {"tensorflow", "torch"}) {
    Policy pol = Policy::parse(preset);
    const double bound = pol.init_weight == WeightInit::glorot_uniform
                             ? std::sqrt(6.0 / static_cast<double>(fan_in + fan_out))
                             : 1.0 / std::sqrt(static_cast<double>(fan_in));
    Rng rng(pol.rng_engine, 9);
    Tensor w({O, I, KH, KW}, DType::f32);
    init_weight(w, fan_in, fan_out, pol, rng);
    const std::vector<float> seq = drawn_sequence(pol, 9, O * I * KH * KW, bound);
    const float* wd = w.data<float>();
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < I; ++i)
        for (int64_t y = 0; y < KH; ++y)
          for (int64_t x = 0; x < KW; ++x) {
            const int64_t oihw = ((o * I + i) * KH + y) * KW + x, hwio = ((y * KW + x) * I + i) * O + o;
            const float want = pol.weight_layout == WeightLayout::hwio ? seq[hwio] : seq[oihw];
            ASSERT_EQ(wd[oihw], want) << preset << " o=" << o << " i=" << i << " y=" << y << " x=" << x;
          }
    if (pol.weight_layout == WeightLayout::hwio) {
      EXPECT_TRUE(bitwise_equal(w, from_framework_layout(Tensor::from<float>({KH, KW, I, O}, seq), WeightLayout::hwio)));
    }
  }
}

TEST(Knob_weight_layout, DenseDrawOrderInOutVsOutIn) {
  const int64_t OUT = 3, IN = 4;
  for (const char* preset : {"tensorflow", "torch"}) {
    Policy pol = Policy::parse(preset);
    Rng rng(pol.rng_engine, 12);
    DenseLayer layer(OUT, {IN}, pol, rng);
    const double bound = pol.init_weight == WeightInit::glorot_uniform ? std::sqrt(6.0 / (IN + OUT))
                                                                       : 1.0 / std::sqrt(static_cast<double>(IN));
    const std::vector<float> seq = drawn_sequence(pol, 12, OUT * IN, bound);
    const float* wd = layer.params()[0]->value.data<float>();  // stored (out,in)
    for (int64_t o = 0; o < OUT; ++o)
      for (int64_t i = 0; i < IN; ++i)
        EXPECT_EQ(wd[o * IN + i], pol.weight_layout == WeightLayout::hwio ? seq[i * OUT + o] : seq[o * IN + i])
            << preset << " o=" << o << " i=" << i;
  }
}

TEST(Knob_weight_layout, FrameworkLayoutRoundTrip) {
  const Tensor w = ints({3, 2, 2, 3});
  for (WeightLayout l : {WeightLayout::oihw, WeightLayout::hwio})
    EXPECT_TRUE(bitwise_equal(from_framework_layout(to_framework_layout(w, l), l), w));
  const Tensor hwio = to_framework_layout(w, WeightLayout::hwio);
  EXPECT_EQ(hwio.shape(), (Shape{2, 3, 2, 3}));
  // W_oihw[o][i][y][x] = W_hwio[y][x][i][o]: o=2,i=1,y=1,x=0.
  EXPECT_EQ(hwio.at(((1 * 3 + 0) * 2 + 1) * 3 + 2), w.at(((2 * 2 + 1) * 2 + 1) * 3 + 0));
}

// ---------------------------------------------------------------------------------------------
// Activations

Tensor act_grad(ActKind kind, const std::string& policy, const std::vector<float>& xs, Tensor* y_out = nullptr) {
  ActivationLayer layer(kind, {static_cast<int64_t>(xs.size())}, Policy::parse(policy));
  ExecContext exec;
  RunContext ctx = RunContext::training(exec, nullptr);
  const int64_t n = static_cast<int64_t>(xs.size());
  Tensor y = layer.forward(ctx, Tensor::from<float>({1, n}, xs));
  if (y_out) *y_out = y;
  return layer.backward(ctx, Tensor::from<float>({1, n}, std::vector<float>(xs.size(), 1.0f)));
}

TEST(Knob_relu_grad_at_zero, TorchZeroTheanoHalf) {
  EXPECT_TRUE(all_close(act_grad(ActKind::relu, "torch", {-1, 0, 1}), Tensor::from<float>({1, 3}, {0, 0, 1}), 0, 0));
  EXPECT_TRUE(all_close(act_grad(ActKind::relu, "theano", {-1, 0, 1}), Tensor::from<float>({1, 3}, {0, 0.5f, 1}), 0, 0));
  EXPECT_TRUE(all_close(act_grad(ActKind::relu, "torch,relu_grad_at_zero=1", {-1, 0, 1}),
                        Tensor::from<float>({1, 3}, {0, 1, 1}), 0, 0));
  report("relu_grad_at_zero_theano_minus_torch", 0.5);
}

TEST(Knob_maxpool_grad_ties, FirstVsAll) {
  for (const char* preset : {"torch", "theano"}) {
    Pool2dSpec s;
    s.kind = PoolKind::max;
    s.window = 2;
    Pool2dLayer layer(s, {1, 2, 2}, Policy::parse(preset));
    ExecContext exec;
    RunContext ctx = RunContext::training(exec, nullptr);
    const Tensor x = Tensor::from<float>({1, 1, 2, 2}, {3, 3, 3, 3});
    EXPECT_EQ(layer.forward(ctx, x).at(0), 3.0f);
    const Tensor dx = layer.backward(ctx, Tensor::from<float>({1, 1, 1, 1}, {1}));
    const Tensor want = std::string(preset) == "torch" ? Tensor::from<float>({1, 1, 2, 2}, {1, 0, 0, 0})
                                                       : Tensor::from<float>({1, 1, 2, 2}, {1, 1, 1, 1});
    EXPECT_TRUE(all_close(dx, want, 0, 0)) << preset;
  }
  report("maxpool_grad_ties_total_grad_all_over_first_2x2", 4);
}

TEST(Knob_hard_sigmoid_kind, Values) {
  const std::vector<float> xs = {-3, -2.5f, 0, 1, 2.5f, 3};
  Tensor y02, y6;
  act_grad(ActKind::hard_sigmoid, "tensorflow", xs, &y02);  // clip(0.2x + 0.5, 0, 1)
  act_grad(ActKind::hard_sigmoid, "torch", xs, &y6);        // min(max(x + 3, 0), 6) / 6
  // slope and offset rounded to float and one multiply-add: within a few float32 ulps of 1 (1.2e-7).
  const double tol = 1e-6;
  EXPECT_TRUE(all_close(y02, Tensor::from<double>({1, 6}, {0, 0, 0.5, 0.7, 1, 1}), tol, 0));
  EXPECT_TRUE(
      all_close(y6, Tensor::from<double>({1, 6}, {0, 0.5 - 2.5 / 6, 0.5, 0.5 + 1.0 / 6, 0.5 + 2.5 / 6, 1}), tol, 0));
  report("hard_sigmoid_kind_at_1_linear0p2_minus_relu6", 0.7 - (0.5 + 1.0 / 6));
}

// relu6_div6 is computed as ATen's hardsigmoid kernel computes it (aten/src/ATen/native/cpu/
// Activation.cpp: min(max(x + 3, 0), 6) / 6), bit for bit; the algebraically equal x/6 + 0.5 is
// not the same float on many inputs (the negative control: the form matters).
TEST(Knob_hard_sigmoid_kind, Relu6Div6ShiftsClampsAndDividesAsPyTorch) {
  const Tensor x = random_tensor({1, 20000}, DType::f32, 77, -5.0, 5.0);
  ActivationLayer layer(ActKind::hard_sigmoid, Shape{20000}, Policy::torch());
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  const Tensor y = layer.forward(ctx, x);
  int64_t mismatched = 0, other_form_differs = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float xi = x.data<float>()[i], yi = y.data<float>()[i];
    const float want = std::min(std::max(xi + 3.0f, 0.0f), 6.0f) / 6.0f;
    const float linear = std::min(std::max(xi * (1.0f / 6.0f) + 0.5f, 0.0f), 1.0f);
    mismatched += std::memcmp(&yi, &want, 4) != 0;
    other_form_differs += linear != want;
  }
  EXPECT_EQ(mismatched, 0);
  EXPECT_GT(other_form_differs, 1000) << "x/6 + 0.5 should part from the divide form on many inputs";
  report("hard_sigmoid_relu6_div6_linear_form_differs_of_20000", static_cast<double>(other_form_differs));
}

TEST(Knob_hard_sigmoid_grad_edges, InclusiveVsExclusive) {
  const float s02 = static_cast<float>(0.2), s6 = static_cast<float>(1.0 / 6.0);  // dy = 1: dx = slope
  // tensorflow: linear_0p2, inclusive: slope at exactly +-2.5, zero beyond.
  Tensor g = act_grad(ActKind::hard_sigmoid, "tensorflow", {-2.5f, 2.5f, 2.6f, 3.0f});
  EXPECT_EQ(g.at(0), s02);
  EXPECT_EQ(g.at(1), s02);
  EXPECT_EQ(g.at(2), 0.0f);
  EXPECT_EQ(g.at(3), 0.0f);
  // torch: relu6_div6, exclusive: zero at exactly +-3, slope at 2.9 and at 2.5.
  g = act_grad(ActKind::hard_sigmoid, "torch", {-3.0f, 3.0f, 2.9f, 2.5f});
  EXPECT_EQ(g.at(0), 0.0f);
  EXPECT_EQ(g.at(1), 0.0f);
  EXPECT_EQ(g.at(2), s6);
  EXPECT_EQ(g.at(3), s6);
  // The knob alone: linear_0p2 with exclusive edges loses the slope at exactly 2.5.
  g = act_grad(ActKind::hard_sigmoid, "tensorflow,hard_sigmoid_grad_edges=exclusive", {2.5f, 2.4f});
  EXPECT_EQ(g.at(0), 0.0f);
  EXPECT_EQ(g.at(1), s02);
  // relu6_div6 with inclusive edges keeps it at exactly 3.
  g = act_grad(ActKind::hard_sigmoid, "torch,hard_sigmoid_grad_edges=inclusive", {3.0f, -3.0f});
  EXPECT_EQ(g.at(0), s6);
  EXPECT_EQ(g.at(1), s6);
  report("hard_sigmoid_grad_at_edge_inclusive_minus_exclusive", 0.2);
}

// ---------------------------------------------------------------------------------------------
// ce_formulation, ce_clip_eps, loss_reduction

struct LossGrad {
  double loss;
  Tensor dz;
};
LossGrad xent(const std::string& policy, const Tensor& z, const std::vector<int32_t>& labels) {
  const SoftmaxXentParams p = resolve_loss(Policy::parse(policy));
  Tensor dz(z.shape(), z.dtype());
  softmax_xent_backward_ref(p, z, labels, dz);
  return {softmax_xent_forward_ref(p, z, labels), dz};
}

TEST(Knob_ce_formulation, ConfidentWrongLogits0And20) {
  const Tensor z = Tensor::from<float>({1, 2}, {0, 20});
  // float32 ulp at 20 is 1.9e-6; at 16 it is 9.5e-7: one rounding of log() each.
  const double ulp20 = 2e-6;

  // log_softmax: log(1 + e^-20) + 20 - 0; 1 + 2e-9 rounds to 1 in float, so exactly 20.
  // Gradient softmax - onehot = [2e-9 - 1, 1] = [-1, 1] in float (N=1, mean).
  LossGrad t = xent("torch", z, {0});
  EXPECT_NEAR(t.loss, 20.0, ulp20);
  EXPECT_TRUE(all_close(t.dz, Tensor::from<float>({1, 2}, {-1, 1}), 0, 0));

  // softmax_clip: q0 = 2e-9 < eps = 1e-7 is clipped: loss -log(1e-7) = 16.118, gradient exactly 0.
  LossGrad k = xent("tensorflow", z, {0});
  EXPECT_NEAR(k.loss, -std::log(1e-7), ulp20);
  EXPECT_TRUE(all_close(k.dz, Tensor::from<float>({1, 2}, {0, 0}), 0, 0));

  // softmax_log: p0 = exp(-20)/(1 + exp(-20)) ~ 2.06e-9 is representable in float, loss ~ 20,
  // and the gradient p*(dp - p.dp) ~ [-1, 1] (no clip).
  LossGrad l = xent("tensorflow,ce_formulation=softmax_log", z, {0});
  const float p0 = std::exp(-20.0f) / (1.0f + std::exp(-20.0f));
  EXPECT_NEAR(l.loss, -std::log(static_cast<double>(p0)), ulp20);
  EXPECT_NEAR(l.loss, 20.0, ulp20);
  // Chain rule in float: -1/p0 times p0 and back, a few roundings of values ~1: 1e-6.
  EXPECT_TRUE(all_close(l.dz, Tensor::from<float>({1, 2}, {-1, 1}), 1e-6, 0));

  report("ce_loss_log_softmax_logits_0_20", t.loss);
  report("ce_loss_softmax_clip_logits_0_20", k.loss);
  report("ce_loss_softmax_log_logits_0_20", l.loss);
  report("ce_grad_gap_log_softmax_vs_clip", std::fabs(t.dz.at(0) - k.dz.at(0)));
}

TEST(Knob_ce_formulation, ConfidentCorrectClipsAtOneMinusEps) {
  const Tensor z = Tensor::from<float>({1, 2}, {0, 20});
  // Target 1: q1 = 1 (float) > 1 - eps: Keras clips to 1-eps, so loss -log(1-1e-7) and zero gradient.
  LossGrad k = xent("tensorflow", z, {1});
  const float one_minus_eps = 1.0f - static_cast<float>(1e-7);  // 0.99999988 (float rounding)
  EXPECT_NEAR(k.loss, -std::log(static_cast<double>(one_minus_eps)), 1e-12);  // one float log ~1e-7 * 6e-8
  EXPECT_TRUE(all_close(k.dz, Tensor::from<float>({1, 2}, {0, 0}), 0, 0));
  // log_softmax still pushes: dz0 = p0 ~ 2.06e-9.
  LossGrad t = xent("torch", z, {1});
  EXPECT_GT(t.dz.at(0), 2e-9);
  EXPECT_LT(t.dz.at(0), 2.1e-9);
  report("ce_grad_confident_correct_log_softmax_dz0", t.dz.at(0));
  report("ce_loss_confident_correct_softmax_clip", k.loss);
}

TEST(Knob_ce_clip_eps, EpsilonSetsTheSaturatedLoss) {
  const Tensor z = Tensor::from<float>({1, 2}, {0, 20});
  LossGrad k = xent("tensorflow,ce_clip_eps=0.001", z, {0});
  // -log(float(1e-3)) = 6.9078; float ulp at 7 is 4.8e-7.
  EXPECT_NEAR(k.loss, -std::log(1e-3), 1e-6);
  EXPECT_TRUE(all_close(k.dz, Tensor::from<float>({1, 2}, {0, 0}), 0, 0));
  // With eps below q0 ~ 2.06e-9 nothing is clipped: loss ~ 20 and a live gradient.
  LossGrad u = xent("tensorflow,ce_clip_eps=1e-12", z, {0});
  EXPECT_NEAR(u.loss, 20.0, 2e-6);
  EXPECT_LT(u.dz.at(0), -0.99);
  report("ce_clip_eps_1e-3_saturated_loss", k.loss);
}

TEST(Knob_loss_reduction, SumIsNTimesMean) {
  const Tensor z = random_tensor({3, 4}, DType::f64, 77, -2, 2);
  const std::vector<int32_t> labels = {1, 0, 3};
  LossGrad mean = xent("torch,dtype=float64", z, labels);
  LossGrad sum = xent("torch,dtype=float64,loss_reduction=sum", z, labels);
  // float64: total/3 and (p-t)*(1/3) each carry a couple of roundings: 1e-14 relative is ample.
  EXPECT_NEAR(sum.loss, 3 * mean.loss, 1e-14 * sum.loss);
  Tensor scaled = mean.dz.clone();
  for (int64_t i = 0; i < scaled.numel(); ++i) scaled.data<double>()[i] *= 3;
  EXPECT_TRUE(all_close(sum.dz, scaled, 0, 1e-14));
  report("loss_reduction_sum_over_mean", sum.loss / mean.loss);
}

// ---------------------------------------------------------------------------------------------
// sgd_form, weight_decay_mode, weight_decay_on_bias

// p0=1, constant g=0.5, lr=0.1, mu=0.9: the parameter after each of `steps` steps.
std::vector<double> trajectory(SgdForm form, bool nesterov, DType dt, int steps) {
  Param p{"w", Tensor({1}, dt), Tensor({1}, dt), false};
  p.value.fill(1.0);
  OptimConfig c;
  c.lr = 0.1;
  c.momentum = 0.9;
  c.nesterov = nesterov;
  Policy pol = Policy::torch();
  pol.sgd_form = form;
  Optimizer sgd(c, resolve_optim(pol));
  std::vector<std::pair<std::string, Param*>> params = {{"w", &p}};
  std::vector<double> out;
  for (int s = 0; s < steps; ++s) {
    p.grad.fill(0.5);
    sgd.step(ExecContext{}, params);
    out.push_back(p.value.at(0));
  }
  return out;
}

const SgdForm kForms[] = {SgdForm::torch_buffer, SgdForm::keras_velocity, SgdForm::lasagne_difference};
const char* form_name(SgdForm f) {
  return f == SgdForm::torch_buffer ? "torch_buffer" : f == SgdForm::keras_velocity ? "keras_velocity" : "lasagne_difference";
}

TEST(Knob_sgd_form, SameTrajectoryInExactArithmetic) {
  for (bool nesterov : {false, true}) {
    const std::vector<double> ref = trajectory(SgdForm::torch_buffer, nesterov, DType::f64, 5);
    // Hand check (test_sgd.cpp has every form step by step): momentum p1=0.95, p2=0.855;
    // Nesterov p1=0.905, p2=0.7695.
    EXPECT_NEAR(ref[0], nesterov ? 0.905 : 0.95, 1e-15);
    EXPECT_NEAR(ref[1], nesterov ? 0.7695 : 0.855, 1e-15);
    for (SgdForm f : kForms) {
      const std::vector<double> t = trajectory(f, nesterov, DType::f64, 5);
      // The three formulas are algebraically equal for constant lr; float64 rounding of ~10
      // operations on values ~1 stays below 1e-15 per step, so 1e-12 after 5 steps is ample.
      for (int s = 0; s < 5; ++s) EXPECT_NEAR(t[s], ref[s], 1e-12) << form_name(f) << " step " << s + 1;
    }
  }
}

TEST(Knob_sgd_form, Float32RoundingDiffersAfterManySteps) {
  constexpr int kSteps = 2000;
  double max_gap = 0;
  for (bool nesterov : {false, true}) {
    std::vector<std::vector<double>> end;
    for (SgdForm f : kForms) end.push_back(trajectory(f, nesterov, DType::f32, kSteps));
    for (int a = 0; a < 3; ++a)
      for (int b = a + 1; b < 3; ++b) {
        const double gap = std::fabs(end[a].back() - end[b].back());
        max_gap = std::max(max_gap, gap);
        report(std::string("sgd_form_float32_gap_after_2000_steps_") + (nesterov ? "nesterov_" : "") +
                   form_name(kForms[a]) + "_vs_" + form_name(kForms[b]),
               gap);
      }
  }
  EXPECT_GT(max_gap, 0.0) << "the three float32 update formulas should round differently somewhere";
}

// One plain-SGD step (no momentum) with decay D=0.01 on p0=2, g=0.5, lr=0.1; returns p1.
double decayed_step(const std::string& policy, bool is_bias, double momentum = 0.0, int steps = 1,
                    double* penalty = nullptr) {
  Param p{"w", Tensor({1}, DType::f64), Tensor({1}, DType::f64), is_bias};
  p.value.fill(2.0);
  OptimConfig c;
  c.lr = 0.1;
  c.momentum = momentum;
  c.weight_decay = 0.01;
  Optimizer sgd(c, resolve_optim(Policy::parse(policy)));
  std::vector<std::pair<std::string, Param*>> params = {{"w", &p}};
  if (penalty) *penalty = sgd.penalty(params);
  for (int s = 0; s < steps; ++s) {
    p.grad.fill(0.5);
    sgd.step(ExecContext{}, params);
  }
  return p.value.at(0);
}

TEST(Knob_weight_decay_mode, WhereTheDecayEnters) {
  // Hand values in float64; each is a handful of roundings of values ~1: 1e-14.
  const double tol = 1e-14;
  double pen_grad = -1, pen_l2 = -1;
  // grad_add: g = 0.5 + 0.01*2 = 0.52, p = 2 - 0.052 = 1.948.
  EXPECT_NEAR(decayed_step("torch,weight_decay_mode=grad_add", false, 0, 1, &pen_grad), 1.948, tol);
  // l2_loss: g = 0.5 + 2*0.01*2 = 0.54, p = 1.946; penalty D*sum p^2 = 0.01*4 = 0.04.
  EXPECT_NEAR(decayed_step("torch,weight_decay_mode=l2_loss", false, 0, 1, &pen_l2), 1.946, tol);
  EXPECT_NEAR(pen_l2, 0.04, tol);
  EXPECT_EQ(pen_grad, 0.0);  // only l2_loss adds to the loss
  // decoupled: p = 2 - 0.1*0.01*2 = 1.998, then p -= 0.1*0.5: 1.948 (same as grad_add without momentum).
  EXPECT_NEAR(decayed_step("torch,weight_decay_mode=decoupled", false), 1.948, tol);
  // With momentum 0.9 (torch_buffer) decoupled decay bypasses the buffer:
  //   grad_add:  b1=0.52, p1=1.948; g2=0.5+0.01948=0.51948, b2=0.468+0.51948=0.98748, p2=1.849252
  //   decoupled: p=1.998, b1=0.5, p1=1.948; p=1.948-0.001948=1.946052, b2=0.95, p2=1.851052
  const double ga = decayed_step("torch,weight_decay_mode=grad_add", false, 0.9, 2);
  const double dc = decayed_step("torch,weight_decay_mode=decoupled", false, 0.9, 2);
  EXPECT_NEAR(ga, 1.849252, tol);
  EXPECT_NEAR(dc, 1.851052, tol);
  report("weight_decay_mode_l2_minus_grad_add_step1", 1.948 - 1.946);
  report("weight_decay_mode_decoupled_minus_grad_add_momentum_step2", dc - ga);
}

TEST(Knob_weight_decay_on_bias, BiasUndecayedWhenFalse) {
  // No decay: p = 2 - 0.1*0.5 = 1.95; grad_add decay: 1.948.
  EXPECT_NEAR(decayed_step("torch", /*is_bias=*/true), 1.948, 1e-14);
  EXPECT_NEAR(decayed_step("torch,weight_decay_on_bias=false", true), 1.95, 1e-14);
  EXPECT_NEAR(decayed_step("torch,weight_decay_on_bias=false", false), 1.948, 1e-14);  // weights still decay
  double pen = -1;
  decayed_step("tensorflow", true, 0, 1, &pen);  // l2_loss, biases excluded from the penalty
  EXPECT_EQ(pen, 0.0);
  decayed_step("tensorflow,weight_decay_on_bias=true", true, 0, 1, &pen);
  EXPECT_NEAR(pen, 0.04, 1e-15);
}

// ---------------------------------------------------------------------------------------------
// rng_engine, shuffle

TEST(Knob_rng_engine, DifferentStreamsSameSeed) {
  const RngEngine engines[] = {RngEngine::mt19937_u24, RngEngine::philox_u23, RngEngine::mrg31k3p};
  std::vector<std::vector<uint32_t>> streams;
  for (RngEngine e : engines) {
    Rng r(e, 42);
    std::vector<uint32_t> s;
    for (int i = 0; i < 8; ++i) s.push_back(r.next_u32());
    streams.push_back(s);
  }
  EXPECT_NE(streams[0], streams[1]);
  EXPECT_NE(streams[0], streams[2]);
  EXPECT_NE(streams[1], streams[2]);
  // And a model built under each engine gets different weights.
  std::set<float> first_weight;
  for (RngEngine e : engines) {
    Policy pol = Policy::torch();
    pol.rng_engine = e;
    Model m = build_model("lenet1", pol, 42);
    first_weight.insert(m.net->named_params()[0].second->value.data<float>()[0]);
  }
  EXPECT_EQ(first_weight.size(), 3u);
}

TEST(Knob_rng_engine, UniformF32InUnitInterval) {
  struct Case {
    RngEngine e;
    double grid;  // the conversion's spacing: every value is a multiple of it
  } cases[] = {{RngEngine::mt19937_u24, 0x1p-24}, {RngEngine::philox_u23, 0x1p-23}, {RngEngine::mrg31k3p, 0}};
  for (const auto& c : cases) {
    Rng r(c.e, 7);
    double lo = 1, hi = 0, sum = 0;
    constexpr int kN = 100000;
    for (int i = 0; i < kN; ++i) {
      const float u = r.uniform_f32();
      ASSERT_GE(u, 0.0f);
      ASSERT_LT(u, 1.0f);
      if (c.grid > 0) {
        ASSERT_EQ(std::floor(u / c.grid), u / c.grid) << u;
      }
      lo = std::min(lo, static_cast<double>(u));
      hi = std::max(hi, static_cast<double>(u));
      sum += u;
    }
    // Mean of 1e5 uniforms: sd 0.289/sqrt(1e5) = 9e-4; 5e-3 is > 5 sigma.
    EXPECT_NEAR(sum / kN, 0.5, 5e-3) << static_cast<int>(c.e);
    EXPECT_LT(lo, 1e-3);
    EXPECT_GT(hi, 1 - 1e-3);
  }
}

bool is_permutation_of_iota(const std::vector<int64_t>& p) {
  std::vector<bool> seen(p.size(), false);
  for (int64_t v : p) {
    if (v < 0 || v >= static_cast<int64_t>(p.size()) || seen[static_cast<std::size_t>(v)]) return false;
    seen[static_cast<std::size_t>(v)] = true;
  }
  return true;
}

TEST(Knob_shuffle, ForwardModuloVsBackwardRejection) {
  std::vector<int64_t> iota(10);
  for (int64_t i = 0; i < 10; ++i) iota[static_cast<std::size_t>(i)] = i;
  for (uint32_t seed : {0u, 1u, 42u, 2024u}) {
    std::mt19937 a(seed), b(seed), c(seed);
    const auto fwd = permutation(10, ShuffleAlgo::forward_modulo, a);
    const auto bwd = permutation(10, ShuffleAlgo::backward_rejection, b);
    const auto none = permutation(10, ShuffleAlgo::none, c);
    EXPECT_TRUE(is_permutation_of_iota(fwd)) << seed;
    EXPECT_TRUE(is_permutation_of_iota(bwd)) << seed;
    EXPECT_NE(fwd, bwd) << "seed " << seed;
    EXPECT_NE(fwd, iota) << seed;
    EXPECT_NE(bwd, iota) << seed;
    EXPECT_EQ(none, iota);
  }
}

// ---------------------------------------------------------------------------------------------
// conv_backend, gemm_backend, acc_order, dtype

TEST(Knob_conv_gemm_backend, ModelOutputsMatchReference) {
  const Tensor x = random_tensor({4, 1, 28, 28}, DType::f32, 81, 0.0, 1.0);
  for (const char* preset : {"torch", "tensorflow"}) {
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    // The blocks unfused (conv_block_backend=reference): a fused block would run its own
    // convolution whatever conv_backend says.
    const std::string unfused = std::string(preset) + ",conv_block_backend=reference";
    Model ref = build_model("lenet5", Policy::parse(unfused + ",conv_backend=reference,gemm_backend=reference"), 5);
    const Tensor want = ref.forward(ctx, x);
    for (const char* cb : {"reference", "eigen", "onednn"})
      for (const char* gb : {"reference", "eigen", "onednn"}) {
        const std::string spec = unfused + ",conv_backend=" + cb + ",gemm_backend=" + gb;
        Model m = build_model("lenet5", Policy::parse(spec), 5);
        const Tensor got = m.forward(ctx, x);
        // Only the float32 summation order differs: dot products of <= 256 terms ~O(0.1..1)
        // each differ by <= K*eps*sum|terms| ~ 256*6e-8 ~ 1.5e-5 in the worst case, through 5
        // layers; logits are O(0.1..1), so 1e-4 abs + 1e-4 rel has margin yet catches a wrong
        // element (an error of O(0.01) or more).
        EXPECT_TRUE(all_close(got, want, 1e-4, 1e-4)) << spec;
        double gap = 0;
        for (int64_t i = 0; i < got.numel(); ++i) gap = std::max(gap, std::fabs(got.at(i) - want.at(i)));
        report("backend_max_abs_diff_" + std::string(preset) + "_" + cb + "_" + gb, gap);
      }
  }
}

TEST(Knob_acc_order, AdversarialSumThroughGemmAndConv) {
  // Terms in float32: 1e8 + 1 rounds to 1e8 (spacing 8 there).
  //   [1, 1e8, -1e8]: ascending (1+1e8)-1e8 = 0; descending (-1e8+1e8)+1 = 1; pairwise 1+(1e8-1e8) = 1
  //   [1e8, -1e8, 1]: ascending (1e8-1e8)+1 = 1; descending (1-1e8)+1e8 = 0; pairwise 1e8+(-1e8+1) = 0
  struct Case {
    std::vector<float> w;
    float asc, desc, pair;
  } cases[] = {{{1, 1e8f, -1e8f}, 0, 1, 1}, {{1e8f, -1e8f, 1}, 1, 0, 0}};
  for (const auto& c : cases) {
    const float want[3] = {c.asc, c.desc, c.pair};
    const char* orders[3] = {"ascending", "descending", "pairwise"};
    for (int o = 0; o < 3; ++o) {
      const Policy pol = Policy::parse(std::string("torch,conv_backend=reference,gemm_backend=reference,acc_order=") + orders[o]);
      Rng rng(pol.rng_engine, 1);
      ExecContext exec;
      RunContext ctx = RunContext::inference(exec);
      // Dense (gemm 1x3 * 3x1): y = x . w with x = [1,1,1], no bias.
      DenseLayer dense(1, {3}, pol, rng, /*bias=*/false);
      dense.params()[0]->value = Tensor::from<float>({1, 3}, c.w);
      EXPECT_EQ(dense.forward(ctx, Tensor::from<float>({1, 3}, {1, 1, 1})).at(0), want[o]) << "dense " << orders[o];
      // Conv 1x3 kernel over a 1x3 ones input: the same three products.
      Conv2dSpec s = spec(1, 1, PadMode::valid);
      s.kernel_h = 1;
      s.kernel_w = 3;
      Conv2dLayer conv(s, {1, 1, 3}, pol, rng);
      conv.params()[0]->value = Tensor::from<float>({1, 1, 1, 3}, c.w);
      EXPECT_EQ(conv.forward(ctx, Tensor::from<float>({1, 1, 1, 3}, {1, 1, 1})).at(0), want[o]) << "conv " << orders[o];
    }
  }
  report("acc_order_adversarial_sum_gap", 1.0);
}

// acc_order reaches the average-pooling layers (until 2026-11-24 they ignored it). float32 window
// [1e8, 1, -1e8, 1]: ascending ((1e8+1)-1e8)+1 = 1; descending ((1-1e8)+1)+1e8 = 0; pairwise
// (1e8+1)+(-1e8+1) = 0; the layers divide by 4.
TEST(Knob_acc_order, ReachesAveragePoolingAndGlobalAveragePooling) {
  const Tensor x = Tensor::from<float>({1, 1, 2, 2}, {1e8f, 1, -1e8f, 1});
  const struct {
    const char* order;
    float sum;
  } cases[] = {{"ascending", 1}, {"descending", 0}, {"pairwise", 0}};
  for (const auto& c : cases) {
    for (const char* backend : {"reference", "fast"}) {
      const Policy pol = Policy::parse(std::string("torch,pool_backend=") + backend + ",acc_order=" + c.order);
      ExecContext exec;
      RunContext ctx = RunContext::inference(exec);
      Pool2dSpec ps;
      ps.kind = PoolKind::avg;
      ps.window = 2;
      Pool2dLayer pool(ps, {1, 2, 2}, pol);
      EXPECT_EQ(pool.forward(ctx, x).at(0), c.sum / 4) << "avg pool " << c.order << " " << backend;
      GlobalAvgPoolLayer gap({1, 2, 2}, pol);
      EXPECT_EQ(gap.forward(ctx, x).at(0), c.sum / 4) << "global avg pool " << c.order << " " << backend;
    }
  }
}

TEST(Knob_dtype, Float64PolicyBuildsFloat64) {
  for (const char* spec : {"torch", "torch,dtype=float64", "tensorflow,dtype=float64"}) {
    const Policy pol = Policy::parse(spec);
    const DType want = pol.dtype == FloatType::float64 ? DType::f64 : DType::f32;
    Model m = build_model("lenet1", pol, 1);
    EXPECT_EQ(m.dtype(), want) << spec;
    for (auto& np : m.net->named_params()) {
      EXPECT_EQ(np.second->value.dtype(), want) << spec << " " << np.first;
      EXPECT_EQ(np.second->grad.dtype(), want) << spec << " " << np.first;
    }
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    // A float32 batch is converted to the model's dtype.
    EXPECT_EQ(m.forward(ctx, random_tensor({1, 1, 28, 28}, DType::f32, 3, 0, 1)).dtype(), want) << spec;
  }
}


// ---------------------------------------------------------------------------------------------
// model_conv_padding, embedding_init

// ResNet-20's first downsampling conv (3x3, stride 2, 16x32x32 -> 32x16x16): 'same' under TF's
// rule pads 0 before and 1 after (total (16-1)*2+3-32 = 1, the odd pixel after); PyTorch's
// padding=1 pads 1 on every side, so its windows sit one pixel up-left of TF's. Stride-1 convs
// pad 1/1 either way.
TEST(Knob_model_conv_padding, SameVsExplicitHalfOnTheStridedConv) {
  for (const char* value : {"same", "explicit_half"}) {
    SCOPED_TRACE(value);
    Model m = build_model("resnet20", Policy::parse(std::string("tensorflow,model_conv_padding=") + value), 1);
    // Layer 9: the first residual block of stage 2; its main path's first conv has stride 2.
    auto* block = layer_as<ResidualLayer>(m.net->layer(9));
    ASSERT_NE(block, nullptr) << m.net->layer(9).describe();
    auto* conv = layer_as<Conv2dLayer>(block->main().layer(0));
    ASSERT_NE(conv, nullptr);
    const Conv2dParams& p = conv->op_params();
    ASSERT_EQ(p.stride_h, 2);
    const bool same = std::string(value) == "same";
    EXPECT_EQ(p.pad_t, same ? 0 : 1);
    EXPECT_EQ(p.pad_b, 1);
    EXPECT_EQ(p.pad_l, same ? 0 : 1);
    auto* first = layer_as<Conv2dLayer>(m.net->layer(0));
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(first->op_params().pad_t, 1);  // stride 1: the same either way
  }
  // The presets: Keras model code writes padding='same', PyTorch's padding=1.
  EXPECT_EQ(Policy::tensorflow().model_conv_padding, ModelConvPadding::same);
  EXPECT_EQ(Policy::theano().model_conv_padding, ModelConvPadding::same);
  EXPECT_EQ(Policy::torch().model_conv_padding, ModelConvPadding::explicit_half);
  report("model_conv_padding_stride2_pad_top_same_minus_explicit", -1);
}

TEST(Knob_embedding_init, KerasUniformVsTorchNormal) {
  for (const char* spec : {"torch", "torch,embedding_init=uniform_0p05", "tensorflow", "tensorflow,embedding_init=normal_1"}) {
    SCOPED_TRACE(spec);
    const Policy p = Policy::parse(spec);
    ModelArgs args;
    args.num_ids = 1000, args.steps = 20;
    Model m = build_model("lstm-imdb", p, 1, args);
    const Tensor& table = m.net->named_params().at(0).second->value;
    double mx = 0, sq = 0;
    for (int64_t i = 0; i < table.numel(); ++i) mx = std::max(mx, std::fabs(table.at(i))), sq += table.at(i) * table.at(i);
    const double sd = std::sqrt(sq / static_cast<double>(table.numel()));
    if (p.embedding_init == EmbeddingInit::uniform_0p05) {
      EXPECT_LE(mx, 0.05);
      EXPECT_NEAR(sd, 0.05 / std::sqrt(3.0), 0.002);  // 128,000 draws of U(-0.05, 0.05)
    } else {
      EXPECT_GT(mx, 3.0);  // 128,000 draws of N(0,1) reach 3 sigma many times
      EXPECT_NEAR(sd, 1.0, 0.02);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// conv_block_backend, rnn_backend, bn_backend, pool_backend, act_backend, loss_backend, sgd_backend:
// which kernel runs (the registry's trace), and how far apart their results are. conv_block, rnn
// and bn change the float32 summation order (rounding only); the other four give the reference's bits: their effect is
// speed, and zero on every number (tests/ops compares them bit for bit).
TEST(Knob_own_backends, EachPicksItsKernelAndOnlyConvBlockRnnAndBnChangeBits) {
  struct Row {
    const char* knob;
    const char* model;
    Shape x;
    const char* op;
    bool same_bits;
  };
  const Row rows[] = {{"conv_block_backend", "lenet5", {4, 1, 28, 28}, "conv_block", false},
                      {"rnn_backend", "lstm", {4, 28, 28}, "rnn", false},
                      {"bn_backend", "resnet20", {2, 3, 32, 32}, "batchnorm", false},
                      {"pool_backend", "lenet5", {4, 1, 28, 28}, "maxpool2d", true},
                      {"act_backend", "lenet5", {4, 1, 28, 28}, "activation", true},
                      {"loss_backend", "lenet5", {4, 1, 28, 28}, "softmax_xent", true},
                      {"sgd_backend", "lenet5", {4, 1, 28, 28}, "sgd", true}};
  for (const Row& r : rows) {
    SCOPED_TRACE(r.knob);
    std::vector<Tensor> weights[2];
    for (int v = 0; v < 2; ++v) {
      const std::string value = v == 0 ? "reference" : "fast";
      // the pooling and activation layers of a LeNet block run inside conv_block unless it is off
      const std::string knob = r.knob, blocks = knob == "conv_block_backend" ? "" : ",conv_block_backend=reference";
      Model m = build_model(r.model, Policy::parse("torch," + knob + "=" + value + blocks), 1);
      std::vector<KernelChoice> trace;
      ExecContext exec;
      exec.trace = &trace;
      CpuRunner runner(m, {}, exec);
      runner.train_step(random_tensor(r.x, DType::f32, 3, 0.0, 1.0), std::vector<int32_t>(r.x[0], 2));
      int seen = 0;
      for (const KernelChoice& c : trace) {
        if (c.op != r.op) continue;
        EXPECT_EQ(c.kernel, value);
        ++seen;
      }
      // conv_block_backend=reference is no conv_block kernel at all: the three layers run
      if (knob == "conv_block_backend" && value == "reference")
        EXPECT_EQ(seen, 0);
      else
        EXPECT_GT(seen, 0) << r.op << " never dispatched";
      for (auto& np : m.net->named_params()) weights[v].push_back(np.second->value.clone());
    }
    double gap = 0;
    for (std::size_t i = 0; i < weights[0].size(); ++i) {
      if (r.same_bits) {
        EXPECT_TRUE(bitwise_equal(weights[1][i], weights[0][i]));
      }
      for (int64_t j = 0; j < weights[0][i].numel(); ++j)
        gap = std::max(gap, std::fabs(weights[1][i].at(j) - weights[0][i].at(j)));
    }
    // conv_block/rnn/bn: one SGD step apart in float32 summation order only: far below a formula change
    // (a step moves weights by ~lr*|g| ~ 1e-3), and not zero.
    if (!r.same_bits) {
      EXPECT_GT(gap, 0.0);
      EXPECT_LT(gap, 1e-5);
    }
    report(std::string(r.knob) + "_weight_gap_after_one_step", gap);
  }
}

}  // namespace
}  // namespace driftlab
