// Residual blocks (identity, option A, option B), global average pooling and the CIFAR
// models: float64 central-difference gradient checks through whole blocks, shortcut values on
// hand cases, and the parameter counts of every model.
#include <gtest/gtest.h>

#include <cmath>

#include "core/host_memory.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/global_avg_pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "engine/random.h"
#include "engine/train/cpu_runner.h"
#include "kernels/cpu/ref/ref.h"
#include "models/models.h"
#include "tests/layers/gradcheck_util.h"
#include "tests/test_util.h"

namespace {

using namespace driftlab;

Policy f64_ref(const char* preset) {
  Policy p = Policy::preset_named(preset);
  p.dtype = FloatType::float64;
  use_reference_kernels(p);
  return p;
}


// A recorded ReLU keeps its output instead of its input where no input was +-0 (the kernels'
// relu_forward_any_zero): an input nothing else keeps (a residual block's sum) is freed as the
// ReLU's forward returns, which host_memory's count of the storage in use shows, and the backward
// gives the reference kernel's bits from x. With an exact 0 in x the layer keeps x (its gradient at
// 0, 0.5 here, needs it) and gives those bits too.
TEST(ReluLayer, KeepsItsOutputInsteadOfAnInputWithoutZeros) {
  Policy p = Policy::preset_named("torch");
  p.relu_grad_at_zero = 0.5;
  const Shape in{4, 16, 16};
  ExecContext exec;
  for (bool with_zero : {false, true}) {
    SCOPED_TRACE(with_zero ? "an exact 0 in x" : "no 0 in x");
    ActivationLayer relu(ActKind::relu, in, p);  // holding nothing from an earlier forward
    Tensor x = random_tensor({64, 4, 16, 16}, DType::f32, 7, -1.0, 1.0);
    if (with_zero) x.data<float>()[5] = 0.0f;
    const Tensor dy = random_tensor(x.shape(), DType::f32, 8);
    Tensor y_ref(x.shape(), DType::f32), dx_ref(x.shape(), DType::f32);
    activation_forward_ref(relu.op_params(), x, y_ref);
    activation_backward_ref(relu.op_params(), x, y_ref, dy, dx_ref);
    RunContext ctx = RunContext::recorded(exec, Semantics::train);
    const std::size_t before = host_memory::stats().in_use_bytes;  // x, held here
    const Tensor y = relu.forward(ctx, x);
    x = Tensor();
    const std::size_t held = host_memory::stats().in_use_bytes - before;  // y, and x if the layer kept it
    const std::size_t block = host_memory::size_class(y.numel() * sizeof(float));
    EXPECT_EQ(held, with_zero ? block : 0u);  // y took what x gave back, or both are held
    EXPECT_TRUE(bitwise_equal(y, y_ref));
    EXPECT_TRUE(bitwise_equal(relu.backward(ctx, dy), dx_ref));
  }
}

class ResidualGradCheck : public ::testing::TestWithParam<Shortcut> {};

TEST_P(ResidualGradCheck, BlockWithStride2) {
  Policy p = f64_ref("torch");
  Rng rng(p.rng_engine, 3);
  Sequential net({2, 6, 6});
  const bool same = GetParam() == Shortcut::identity;
  add_basic_block(net, p, rng, same ? 2 : 4, same ? 1 : 2, GetParam());
  net.add(std::make_unique<GlobalAvgPoolLayer>(net.current_shape(), p));
  // Central differences: O(h^2) truncation plus ~1e-10 rounding on O(1) losses; through two
  // BatchNorms the gradients stay O(1), so 2e-6 absolute is three orders above the noise.
  gradcheck_sequential(net, random_tensor({2, 2, 6, 6}, DType::f64, 5, -1.0, 1.0), 2e-6, 3, 5);
}

INSTANTIATE_TEST_SUITE_P(Shortcuts, ResidualGradCheck,
                         ::testing::Values(Shortcut::identity, Shortcut::option_a, Shortcut::option_b),
                         [](const ::testing::TestParamInfo<Shortcut>& i) {
                           return i.param == Shortcut::identity ? "identity"
                                                                : (i.param == Shortcut::option_a ? "optionA" : "optionB");
                         });

// Option A on a hand case: x[:, :, ::2, ::2] lands in the middle channels, zeros around it.
TEST(Residual, OptionAShortcutValues) {
  Policy p = Policy::torch();
  Rng rng(p.rng_engine, 1);
  auto main = std::make_unique<Sequential>(Shape{2, 4, 4});
  Conv2dSpec s;
  s.out_channels = 4;
  s.kernel_h = s.kernel_w = 1;
  s.stride = 2;
  s.bias = false;
  main->add(std::make_unique<Conv2dLayer>(s, Shape{2, 4, 4}, p, rng));
  ResidualLayer res(std::move(main), Shortcut::option_a, p, rng);
  for (Param* prm : res.params()) prm->value.zero();  // main path outputs 0: y is the shortcut alone
  std::vector<float> v(32);
  for (int i = 0; i < 32; ++i) v[i] = static_cast<float>(i);
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  Tensor y = res.forward(ctx, Tensor::from<float>({1, 2, 4, 4}, v));
  ASSERT_EQ(y.shape(), (Shape{1, 4, 2, 2}));
  EXPECT_TRUE(bitwise_equal(y, Tensor::from<float>({1, 4, 2, 2}, {0, 0, 0, 0, 0, 2, 8, 10, 16, 18, 24, 26, 0, 0, 0, 0})));
}

TEST(Models, ParameterCounts) {
  struct Count {
    const char* name;
    int64_t params;
  } counts[] = {{"lenet1", 3246},       {"lenet5", 44426},       {"resnet20", 269722},
                {"resnet20b", 272474},  {"resnet18", 11173962},  {"vgg16", 33638218}};
  for (const auto& c : counts)
    for (const char* preset : {"torch", "tensorflow"})
      EXPECT_EQ(build_model(c.name, Policy::preset_named(preset), 1).num_params(), c.params) << c.name << " " << preset;
}

// ResNet's stride-2 3x3 convolutions: TF 'same' pads (0,1), PyTorch's padding=1 pads (1,1).
TEST(Models, ResNetDownsamplingPadsPerPreset) {
  for (const char* preset : {"tensorflow", "torch"}) {
    Model m = build_model("resnet20", Policy::preset_named(preset), 1);
    auto* res = layer_as<ResidualLayer>(m.net->layer(3 + 2 * 3));  // first block of stage 2
    ASSERT_NE(res, nullptr) << preset;
    auto* conv = layer_as<Conv2dLayer>(res->main().layer(0));
    ASSERT_NE(conv, nullptr);
    const Conv2dParams& c = conv->op_params();
    EXPECT_EQ(c.stride_h, 2);
    EXPECT_EQ(c.pad_t, std::string(preset) == "tensorflow" ? 0 : 1) << preset;
    EXPECT_EQ(c.pad_b, 1) << preset;
  }
}

// One training step of each CIFAR model at batch 2 runs and gives a finite loss.
TEST(Models, CifarModelsTrainOneStep) {
  for (const char* name : {"resnet20", "resnet20b"}) {
    Model m = build_model(name, Policy::torch(), 1);
    ExecContext exec;
    TrainConfig cfg;
    cfg.batch = 2;
    cfg.optim = {0.01, 0.9, false, 0.0};
    CpuRunner t(m, cfg, exec);
    double loss = t.train_step(random_tensor({2, 3, 32, 32}, DType::f32, 4, 0.0, 1.0), {3, 7});
    EXPECT_TRUE(std::isfinite(loss)) << name;
    EXPECT_NEAR(loss, std::log(10.0), 1.5) << name << ": an untrained 10-class model starts near log(10)";
  }
}

}  // namespace
