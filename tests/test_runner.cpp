// The model face (engine/train/runner.h) on the CPU: the input gradient under inference semantics
// equals central differences of the inference loss (float64, ResNet-20 with non-trivial running
// statistics and LeNet-5), moves no running statistic and no weight, and is not the training-mode
// gradient; train semantics move the running statistics as a training forward does; logits and
// evaluate agree with the layers run by hand; --device cuda without a device is one clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/host_memory.h"
#include "engine/data/dataset.h"
#include "engine/train/cpu_runner.h"
#include "kernels/cpu/ref/ref.h"
#include "models/models.h"
#include "tests/model_test_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

std::vector<Tensor> snapshot(Model& m) {
  std::vector<Tensor> out;
  for (auto& np : m.net->named_params()) out.push_back(np.second->value.clone());
  for (auto& nb : m.net->named_buffers()) out.push_back(nb.second->value.clone());
  return out;
}

struct FaceCase {
  const char* model;
  const char* policy;
  Shape x;
};

// gtest prints the parameter in listings and failures: the row, not its bytes.
void PrintTo(const FaceCase& c, std::ostream* os) { *os << c.model << " " << c.policy << " " << shape_str(c.x); }

class RunnerInputGradient : public ::testing::TestWithParam<FaceCase> {};

TEST_P(RunnerInputGradient, InferenceGradientIsTheDerivativeOfTheInferenceLossAndMovesNothing) {
  const FaceCase c = GetParam();
  Policy p = Policy::parse(c.policy);
  p.dtype = FloatType::float64;
  // oneDNN has no float64 convolution (the registry would run the single-threaded reference):
  // Eigen's float64 kernel keeps the test fast; the semantics under test do not depend on it.
  p.conv_backend = KernelBackend::eigen;
  Model m = build_model(c.model, p, 3);
  randomise_running_stats(m, 40);
  CpuRunner runner(m);
  const Tensor x = random_tensor(c.x, DType::f64, 5, 0.0, 1.0);
  const std::vector<int32_t> y = {3, 7};
  const std::vector<Tensor> before = snapshot(m);
  const InputGradient g = runner.input_gradient(x, y, Semantics::inference);
  ASSERT_EQ(g.dx.shape(), x.shape());
  // Nothing moved: weights and every BatchNorm running statistic, bit for bit.
  const std::vector<Tensor> after = snapshot(m);
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(bitwise_equal(after[i], before[i])) << i;
  // The same call again gives the same bits (no state is carried between calls).
  EXPECT_TRUE(bitwise_equal(runner.input_gradient(x, y, Semantics::inference).dx, g.dx));
  // Central differences of the inference loss (logits() is inference semantics) on 12 inputs
  // spread over the batch: truncation O(h^2) ~ 1e-12, rounding ~ eps*|loss|/h ~ 1e-10; the
  // gradients are O(1e-3..1e-1), so 1e-7 absolute plus 1e-5 relative fails any missing term.
  const double h = 1e-6;
  // The loss of the Policy on the inference logits, as input_gradient forms it.
  const SoftmaxXentParams lp = resolve_loss(p);
  auto loss_at = [&](const Tensor& xi) { return softmax_xent_forward_ref(lp, runner.logits(xi), y); };
  EXPECT_EQ(loss_at(x), g.loss);
  const int64_t stride = x.numel() / 12;
  for (int64_t i = 0; i < x.numel(); i += stride) {
    Tensor xp = x.clone(), xm = x.clone();
    xp.data<double>()[i] += h;
    xm.data<double>()[i] -= h;
    const double fd = (loss_at(xp) - loss_at(xm)) / (2 * h);
    EXPECT_NEAR(g.dx.at(i), fd, 1e-7 + 1e-5 * std::fabs(fd)) << "dx[" << i << "]";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, RunnerInputGradient,
                         ::testing::Values(FaceCase{"resnet20", "torch", {2, 3, 32, 32}},
                                           FaceCase{"resnet20", "tensorflow", {2, 3, 32, 32}},
                                           FaceCase{"lenet5", "theano", {2, 1, 28, 28}}),
                         [](const ::testing::TestParamInfo<FaceCase>& i) {
                           return std::string(i.param.model) + "_" + i.param.policy;
                         });

TEST(RunnerSemantics, TrainSemanticsMoveRunningStatisticsAndGiveAnotherGradient) {
  Model m = build_model("resnet20", Policy::torch(), 3);
  randomise_running_stats(m, 60);
  CpuRunner runner(m);
  const Tensor x = random_tensor({4, 3, 32, 32}, DType::f32, 6, 0.0, 1.0);
  const std::vector<int32_t> y = {1, 2, 3, 4};
  const InputGradient infer = runner.input_gradient(x, y, Semantics::inference);
  const std::vector<Tensor> before = snapshot(m);
  const InputGradient train = runner.input_gradient(x, y, Semantics::train);
  const std::vector<Tensor> after = snapshot(m);
  const std::size_t params = m.net->named_params().size();
  int moved = 0;
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (i < params) {
      EXPECT_TRUE(bitwise_equal(after[i], before[i])) << "a weight moved";
    } else if (!bitwise_equal(after[i], before[i])) {
      ++moved;
    }
  }
  EXPECT_EQ(moved, 2 * 19) << "every BatchNorm's running mean and variance (19 BatchNorms in ResNet-20)";
  // Batch statistics instead of the running ones: a different function of x, so another gradient.
  double gap = 0, scale = 0;
  for (int64_t i = 0; i < infer.dx.numel(); ++i) {
    gap = std::max(gap, std::fabs(infer.dx.at(i) - train.dx.at(i)));
    scale = std::max(scale, std::fabs(infer.dx.at(i)));
  }
  EXPECT_GT(gap, 0.1 * scale);
}

// input_gradient computes dx only (RunContext::param_grads = false): the same dx bit for bit as a
// full backward that also forms every weight gradient, and the conv and dense weight gradients
// left as they were.
TEST(Runner, InputGradientSkipsTheWeightGradientsAndGivesTheSameDx) {
  for (const char* arch : {"lenet5", "resnet20"}) {
    SCOPED_TRACE(arch);
    Model m = build_model(arch, Policy::torch(), 3);
    const bool cifar = std::string(arch) == "resnet20";
    const Tensor x = random_tensor(cifar ? Shape{3, 3, 32, 32} : Shape{3, 1, 28, 28}, DType::f32, 8, 0.0, 1.0);
    const std::vector<int32_t> y = {1, 5, 9};
    // the full backward, by hand
    ExecContext exec;
    RunContext ctx = RunContext::recorded(exec, Semantics::inference);
    m.net->zero_grad();
    const Tensor logits = m.forward(ctx, x);
    const SoftmaxXentParams lp = resolve_loss(m.policy);
    Tensor dz = Tensor::empty(logits.shape(), logits.dtype());
    softmax_xent_backward_ref(lp, logits, y, dz);
    const Tensor full_dx = m.net->backward(ctx, dz);
    std::vector<Tensor> grads;
    for (auto& np : m.net->named_params()) grads.push_back(np.second->grad.clone());
    CpuRunner runner(m);
    const InputGradient g = runner.input_gradient(x, y, Semantics::inference);
    EXPECT_TRUE(bitwise_equal(g.dx, full_dx));
    // the conv and dense weights (rank >= 2): not touched (BatchNorm's gamma and beta gradients
    // come out of its dx kernel at no extra cost and are formed anyway)
    std::size_t i = 0, checked = 0;
    for (auto& np : m.net->named_params()) {
      if (np.second->grad.rank() >= 2) {
        EXPECT_TRUE(bitwise_equal(np.second->grad, grads[i])) << np.first;
        ++checked;
      }
      ++i;
    }
    EXPECT_GE(checked, 5u);
  }
}

TEST(Runner, LogitsAndEvaluateAreTheInferenceForward) {
  Model m = build_model("lenet5", Policy::tensorflow(), 2);
  CpuRunner runner(m);
  Dataset d;
  d.name = "random";
  d.images = random_tensor({37, 1, 28, 28}, DType::f32, 9, 0.0, 1.0);
  for (int i = 0; i < 37; ++i) d.labels.push_back(i % 10);
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  const Tensor want = m.forward(ctx, d.images);
  EXPECT_TRUE(bitwise_equal(runner.logits(d.images), want));
  const EvalResult e = runner.evaluate(d, 10);
  EXPECT_EQ(e.n, 37);
  EXPECT_EQ(e.accuracy, static_cast<double>(count_correct(want, d.labels)) / 37.0);
  EXPECT_GT(e.loss, 0.0);
}

// An epoch times its first step apart (EpochStats::first_step_seconds, images_per_s_after_first:
// metrics.json's, what bench/compare sets beside a peer timed after its first step): within the
// epoch's time, the rest at a rate of its own; an epoch of one batch has no steps after the first.
TEST(Runner, AnEpochTimesItsFirstStepApart) {
  Model m = build_model("lenet1", Policy::parse("torch"), 3);
  Dataset d;
  d.name = "random";
  d.num_classes = 10;
  d.images = random_tensor({96, 1, 28, 28}, DType::f32, 9, 0.0, 1.0);
  for (int32_t j = 0; j < 96; ++j) d.labels.push_back(j % 10);
  for (int64_t batch : {32, 96}) {
    TrainConfig cfg;
    cfg.batch = batch;
    CpuRunner r(m, cfg);
    const EpochStats st = r.run_epoch(d, nullptr, nullptr);
    if (batch == 96) {
      EXPECT_EQ(st.images_per_s_after_first, 0.0);
      continue;
    }
    EXPECT_GT(st.first_step_seconds, 0.0);
    EXPECT_LT(st.first_step_seconds, st.seconds);
    EXPECT_GT(st.images_per_s_after_first, 0.0);
    // 64 images after the first 32, in the epoch's time less the first step's
    EXPECT_NEAR(64.0 / st.images_per_s_after_first + st.first_step_seconds, st.seconds, 1e-9 * st.seconds);
  }
}

// A training step holds nothing of its batch after it: each layer's backward takes what its
// forward kept (engine/layers/layer.h), so the tensor memory in use after a step is the model's,
// its gradients' and the optimizer's: the same at any batch size. Before, every layer kept its
// last input until the next forward replaced it (ResNet-20 at B-128: 243 MB in use between steps),
// and a next step's activations were allocated beside the last one's. The model kinds cover every
// layer that keeps something (convolutions, LeNet's fused conv blocks, batchnorm with and without
// its ReLU, ReLU, pooling, residual blocks, dense, dropout, LSTM, GRU, embedding). A second
// backward without a new forward is refused by name, as PyTorch refuses a graph freed by backward.
TEST(Runner, AStepHoldsNothingOfItsBatchAfterIt) {
  for (const char* name : {"lenet1", "lenet5", "resnet20", "vgg16", "lstm", "gru-imdb"}) {
    SCOPED_TRACE(name);
    std::size_t held[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      const int64_t batch = k == 0 ? 2 : 6;
      const ModelInfo* row = nullptr;
      for (const ModelInfo& r : model_table()) row = r.name == name ? &r : row;
      ASSERT_NE(row, nullptr);
      const ModelInfo& info = *row;
      Shape xs{batch};
      xs.insert(xs.end(), info.input_shape.begin(), info.input_shape.end());
      const bool ids = std::string(name) == "gru-imdb";  // token ids: integers in 0..num_ids-1
      Tensor x = random_tensor(xs, DType::f32, 5, 0.0, ids ? 0.0 : 1.0);
      if (ids)
        for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(1 + (i * 37) % 500);
      std::vector<int32_t> y;
      for (int64_t i = 0; i < batch; ++i) y.push_back(static_cast<int32_t>(i % info.num_classes));
      Shape one = xs;
      one[0] = 1;
      Tensor x1(one, DType::f32);
      std::memcpy(x1.data<float>(), x.data<float>(), static_cast<std::size_t>(x1.numel()) * sizeof(float));
      // Each round from an empty cache: the allocator lends a request a cached block up to twice
      // its class and counts it at that class, so what the last round left cached would change this
      // round's count (VGG-16's weights: 6 MiB).
      host_memory::trim();
      const std::size_t base = host_memory::stats().in_use_bytes;  // x, x1 and y held here throughout
      {
        Model m = build_model(name, Policy::parse("torch"), 3);
        TrainConfig cfg;
        cfg.batch = batch;
        cfg.optim.momentum = 0.9;  // a momentum buffer per parameter: the optimizer's state
        CpuRunner r(m, cfg);
        // The optimizer's state is made in a first step, at the same batch in both rounds: the
        // allocator may lend it larger cached blocks (counted at their class), which a step's
        // freed activations of another batch size would make other ones.
        r.train_step(x1, {y[0]});
        r.train_step(x, y);
        r.train_step(x, y);
        held[k] = host_memory::stats().in_use_bytes - base;
        // A second backward through the step's recording: the recording is gone.
        ExecContext exec;
        RunContext ctx = RunContext::training(exec, nullptr);
        const Tensor dz = random_tensor({batch, info.num_classes}, DType::f32, 6);
        const std::string e = error_of([&] { m.net->backward(ctx, dz); });
        EXPECT_NE(e.find("backward without a recorded forward"), std::string::npos) << e;
      }
      EXPECT_EQ(host_memory::stats().in_use_bytes, base);  // the model gone, nothing else held
    }
    EXPECT_GT(held[0], 0u);  // the weights, their gradients, the momentum
    EXPECT_EQ(held[0], held[1]) << "in use after a step at B-2 and B-6";
  }
}

TEST(Runner, CudaWithoutADeviceIsOneClearError) {
  Model m = build_model("lenet1", Policy::torch(), 1);
  try {
    open_runner(m, Device::cuda);
    GTEST_SKIP() << "a CUDA device is present";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
  EXPECT_NE(error_of([] { parse_device("tpu"); }).find("unknown device 'tpu' (known: cpu, cuda)"), std::string::npos);
}

}  // namespace
}  // namespace driftlab
