// BatchNorm: float64 central-difference gradient checks of the training forward (through the
// batch statistics) and of the inference forward (through the fixed running statistics, every
// running-variance meaning, the inverse-std one included), the inference pass leaving every
// running statistic untouched, and the documented effect of each BatchNorm knob on a hand case.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/layers/batchnorm_layer.h"
#include "tests/layers/gradcheck_util.h"
#include "tests/test_util.h"

namespace {

using namespace driftlab;

Policy f64(const char* preset) {
  Policy p = Policy::preset_named(preset);
  p.dtype = FloatType::float64;
  return p;
}

// dx, dgamma and dbeta of the training forward (through the batch statistics).
void gradcheck(const Shape& per_sample, int64_t batch, const char* preset) {
  Sequential net(per_sample);
  auto& bn = net.add(std::make_unique<BatchNormLayer>(per_sample, f64(preset)));
  // Non-trivial affine parameters so that dgamma/dbeta are exercised.
  auto ps = bn.params();
  for (int64_t c = 0; c < ps[0]->value.numel(); ++c) {
    ps[0]->value.data<double>()[c] = 0.5 + 0.25 * static_cast<double>(c);
    ps[1]->value.data<double>()[c] = -0.1 * static_cast<double>(c);
  }
  Shape full{batch};
  full.insert(full.end(), per_sample.begin(), per_sample.end());
  SCOPED_TRACE(preset);
  // Central differences err by O(h^2) ~ 1e-12 plus rounding ~ eps*|loss|/h ~ 1e-9; gradients
  // here are O(1), so 1e-6 absolute leaves three orders of margin. Every element is checked.
  gradcheck_sequential(net, random_tensor(full, DType::f64, 21, -2.0, 2.0), 1e-6, 1, 1);
}

TEST(BatchNormGradCheck, Conv4D) { gradcheck({3, 2, 3}, 2, "torch"); }
TEST(BatchNormGradCheck, Dense2D) { gradcheck({4}, 5, "tensorflow"); }
TEST(BatchNormGradCheck, Batch1Spatial) { gradcheck({2, 3, 3}, 1, "theano"); }

// dx, dgamma and dbeta at inference semantics: y = gamma*(x - rm)*s + beta with s from the
// running statistics (non-trivial ones, set here), under each estimator's meaning of the running
// variance (lasagne_inv_std stores s itself).
void gradcheck_inference(const Shape& per_sample, int64_t batch, const Policy& p) {
  Sequential net(per_sample);
  auto& bn = net.add(std::make_unique<BatchNormLayer>(per_sample, p));
  auto ps = bn.params();
  auto bs = bn.buffers();
  for (int64_t c = 0; c < ps[0]->value.numel(); ++c) {
    ps[0]->value.data<double>()[c] = 0.5 + 0.25 * static_cast<double>(c);
    ps[1]->value.data<double>()[c] = -0.1 * static_cast<double>(c);
    bs[0]->value.data<double>()[c] = 0.3 - 0.2 * static_cast<double>(c);  // running mean
    bs[1]->value.data<double>()[c] = 0.6 + 0.35 * static_cast<double>(c);  // running var (or inv std)
  }
  std::vector<Tensor> before;
  for (Param* b : bn.buffers()) before.push_back(b->value.clone());
  Shape full{batch};
  full.insert(full.end(), per_sample.begin(), per_sample.end());
  // The inference forward is affine in x, gamma and beta: central differences are exact up to
  // rounding (~eps*|loss|/h ~ 1e-9); 1e-7 absolute on O(1) gradients.
  gradcheck_sequential(net, random_tensor(full, DType::f64, 22, -2.0, 2.0), 1e-7, 1, 1, Semantics::inference);
  auto after = bn.buffers();
  for (std::size_t i = 0; i < before.size(); ++i)
    EXPECT_TRUE(bitwise_equal(after[i]->value, before[i])) << "running statistic " << after[i]->name << " moved";
}

TEST(BatchNormGradCheck, InferenceSemanticsEveryEstimator) {
  for (const char* est : {"unbiased", "keras_tf", "keras_theano", "biased", "lasagne_inv_std"})
    for (const char* preset : {"torch", "tensorflow"}) {
      SCOPED_TRACE(std::string(preset) + " " + est);
      Policy p = f64(preset);
      p.set("bn_running_var", est);
      gradcheck_inference({3, 2, 3}, 2, p);
      gradcheck_inference({4}, 5, p);
      gradcheck_inference({2, 3, 3}, 1, p);  // batch 1: fine at inference (no batch statistics)
    }
}

// A backward needs a recorded forward: an inference pass that kept nothing is refused by name.
TEST(BatchNormSemantics, InferenceBackwardNeedsARecordedForward) {
  BatchNormLayer bn({2, 3, 3}, Policy::torch());
  ExecContext exec;
  RunContext plain = RunContext::inference(exec);
  bn.forward(plain, random_tensor({2, 2, 3, 3}, DType::f32, 1));
  EXPECT_NE(error_of([&] { bn.backward(plain, Tensor({2, 2, 3, 3}, DType::f32)); }).find("without a recorded forward"),
            std::string::npos);
}

struct Stats {
  double running_mean, running_var, infer_at_6;
};

// One training step on [0,2,4,6] (mean 3, biased var 5, n=4) then inference on x=6.
Stats one_step(const Policy& p) {
  BatchNormLayer bn({1, 2, 2}, p);
  ExecContext exec;
  RunContext train = RunContext::training(exec, nullptr), infer = RunContext::inference(exec);
  bn.forward(train, Tensor::from<double>({1, 1, 2, 2}, {0, 2, 4, 6}).to(DType::f32));
  Tensor y = bn.forward(infer, Tensor::from<float>({1, 1, 2, 2}, {6, 6, 6, 6}));
  auto b = bn.buffers();
  return {b[0]->value.at(0), b[1]->value.at(0), y.at(0)};
}

// Tolerances: float32 arithmetic on values of order 1-10: 1e-5 relative.
TEST(BatchNormKnobs, RunningVarianceEstimatorPerPreset) {
  Stats torch = one_step(Policy::torch());
  EXPECT_NEAR(torch.running_mean, 0.1 * 3, 1e-6);
  EXPECT_NEAR(torch.running_var, 0.9 + 0.1 * 5 * 4.0 / 3.0, 1e-5);  // unbiased v*n/(n-1)
  Stats theano = one_step(Policy::theano());
  EXPECT_NEAR(theano.running_var, 0.99 + 0.01 * (5 + 1e-3) * 4.0 / (3 - 1e-3), 1e-5);  // eps leaks in
  Stats tf = one_step(Policy::tensorflow());
  // zero-debiased: the first batch's statistic exactly; 4-D: TF's n/(n-1) then Keras's n/(n-1-eps)
  EXPECT_NEAR(tf.running_mean, 3.0, 1e-6);
  EXPECT_NEAR(tf.running_var, 5 * 4.0 / 3.0 * 4.0 / (3 - 1e-3), 1e-4);
  std::cout << "running var after one step: torch " << torch.running_var << ", theano " << theano.running_var
            << ", tensorflow " << tf.running_var << "\n";
  Policy biased = Policy::torch();
  biased.bn_running_var = BnRunningVar::biased;
  EXPECT_NEAR(one_step(biased).running_var, 0.9 + 0.1 * 5, 1e-5);
}

TEST(BatchNormKnobs, KerasTfEstimatorDependsOnRank) {
  Policy tf = Policy::tensorflow();
  EXPECT_EQ(resolve_batchnorm(tf, {3, 4, 4}).estimator, BnVarEstimator::keras_double);  // fused 4-D path
  EXPECT_EQ(resolve_batchnorm(tf, {16}).estimator, BnVarEstimator::keras_scaled);       // 2-D: tf.nn.moments
}

TEST(BatchNormKnobs, ZeroDebiasAndMomentum) {
  Policy p = Policy::torch();
  p.bn_zero_debias = true;
  Stats z = one_step(p);
  EXPECT_NEAR(z.running_mean, 3.0, 1e-6) << "after one zero-debiased step the running mean is the batch mean";
  p.bn_zero_debias = false;
  p.bn_momentum = 0.5;
  EXPECT_NEAR(one_step(p).running_mean, 1.5, 1e-6);
}

TEST(BatchNormKnobs, EpsilonAndInverseStd) {
  Policy a = Policy::torch(), b = Policy::torch();
  b.bn_eps = 1e-1;
  BatchNormLayer la({1, 2, 2}, a), lb({1, 2, 2}, b);
  ExecContext exec;
  RunContext train = RunContext::training(exec, nullptr);
  Tensor x = Tensor::from<float>({1, 1, 2, 2}, {0, 2, 4, 6});
  double ya = la.forward(train, x).at(3), yb = lb.forward(train, x).at(3);
  EXPECT_NEAR(ya, 3 / std::sqrt(5 + 1e-5), 1e-5);
  EXPECT_NEAR(yb, 3 / std::sqrt(5 + 1e-1), 1e-5);
  Policy las = Policy::torch();
  las.bn_running_var = BnRunningVar::lasagne_inv_std;
  las.bn_momentum = 0.0;  // keep nothing: the running value is this batch's 1/sqrt(v+eps)
  Stats s = one_step(las);
  EXPECT_NEAR(s.running_var, 1 / std::sqrt(5 + 1e-5), 1e-6);
  EXPECT_NEAR(s.infer_at_6, (6 - 3) / std::sqrt(5 + 1e-5), 1e-5);
}

}  // namespace
