// Float64 central-difference gradient checks of every layer, the loss, and LeNet-1/5 end to end,
// with every op on its reference kernel (use_reference_kernels, dtype=float64).
//
// Method: for a layer, loss f = sum(y * R) with a fixed random R, so dL/dy = R; backward(R) gives
// the analytic dx and (added into zeroed) dW/db, each compared with (f(v+h) - f(v-h)) / 2h.
// For a whole model the loss is the Policy's softmax cross-entropy.
//
// To add a case: 1) append a row to the case table of its layer (a name saying what is awkward
// about it, the preset, the spec, the input shape); 2) nothing else: the check picks it up.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/layers/activation_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/dropout_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/pool_layer.h"
#include "core/ops/softmax_xent.h"
#include "engine/policy.h"
#include "engine/random.h"
#include "engine/train/cpu_runner.h"
#include "kernels/cpu/ref/ref.h"
#include "models/models.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

// Step of the central difference. Truncation error is O(h^2 f''') ~ 1e-12 and rounding error
// is ~ eps*|f|/h ~ 2e-16*|f|/1e-6 ~ 2e-10*|f|: both far below kGradRelTol of the gradient scale.
constexpr double kH = 1e-6;
// Relative tolerance, against the largest gradient magnitude of the tensor checked (and also
// per element): 1e-6 leaves four orders of magnitude above the ~1e-10 error of the difference
// quotient, yet any wrong formula (a missing factor, a wrong index) errs by O(1) of the scale.
constexpr double kGradRelTol = 1e-6;
// Floor of that scale: below it rounding noise eps*|f|/h (~2e-10*|f|, |f| <= ~10 here) rather than
// the gradient would set the error, so tensors whose gradient is ~0 are checked absolutely.
constexpr double kScaleFloor = 1e-2;

Policy gc_policy(const std::string& spec) {
  Policy p = Policy::parse(spec);
  use_reference_kernels(p);
  p.dtype = FloatType::float64;
  return p;
}

double dot(const Tensor& a, const Tensor& b) {
  const double* pa = a.data<double>();
  const double* pb = b.data<double>();
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) s += pa[i] * pb[i];
  return s;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.at(i)));
  return m;
}

// All indices of an n-element tensor, or `limit` of them spread over it (first and last always
// included) when checking every element would be too slow (whole models).
std::vector<int64_t> pick_indices(int64_t n, int64_t limit, uint64_t seed) {
  std::vector<int64_t> idx;
  if (limit <= 0 || n <= limit) {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
    return idx;
  }
  std::mt19937_64 gen(seed);
  idx.push_back(0);
  idx.push_back(n - 1);
  while (static_cast<int64_t>(idx.size()) < limit) idx.push_back(static_cast<int64_t>(gen() % static_cast<uint64_t>(n)));
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  return idx;
}

// Compares analytic[idx] with the central difference of f with respect to value[idx]
// (value is perturbed in place and restored).
::testing::AssertionResult check_grad(const std::string& what, Tensor value, const Tensor& analytic,
                                      const std::function<double()>& f, const std::vector<int64_t>& idx) {
  const int64_t n = static_cast<int64_t>(idx.size());
  Tensor num({n}, DType::f64), ana({n}, DType::f64);
  double* v = value.data<double>();
  for (int64_t j = 0; j < n; ++j) {
    const int64_t i = idx[j];
    const double orig = v[i];
    v[i] = orig + kH;
    const double fp = f();
    v[i] = orig - kH;
    const double fm = f();
    v[i] = orig;
    num.data<double>()[j] = (fp - fm) / (2 * kH);
    ana.data<double>()[j] = analytic.at(i);
  }
  const double scale = std::max({max_abs(num), max_abs(ana), kScaleFloor});
  ::testing::AssertionResult r = all_close(ana, num, kGradRelTol * scale, kGradRelTol);
  if (!r) r << " [" << what << ", analytic vs numeric, gradient scale " << scale << "]";
  return r;
}

// Gradient check of one layer for loss = sum(y*R). `before_forward` runs before every forward
// (dropout resets its random stream there, so every evaluation draws the same mask).
void gradcheck_layer(Layer& layer, const Tensor& x_in, uint64_t seed,
                     const std::function<void(RunContext&)>& before_forward = nullptr) {
  // One thread: the check is about the math, and thousands of tiny forwards through OpenMP
  // kernels (the fast max pool) only pay fork/join costs, badly so on a loaded machine.
  ThreadCountGuard one_thread(1);
  ExecContext exec;
  RunContext ctx = RunContext::training(exec, nullptr);
  Tensor x = x_in.clone();
  auto run = [&]() {
    if (before_forward) before_forward(ctx);
    return layer.forward(ctx, x);
  };
  Tensor y = run();
  const Tensor r = random_tensor(y.shape(), DType::f64, seed);
  for (Param* p : layer.params()) p->grad.zero();  // backward ADDS into parameter gradients
  const Tensor dx = layer.backward(ctx, r).clone();
  std::vector<Tensor> grads;
  for (Param* p : layer.params()) grads.push_back(p->grad.clone());
  // A check of all-zero gradients would prove nothing: every case here has a live gradient.
  EXPECT_GT(max_abs(dx), 1e-3) << layer.describe();

  auto f = [&]() { return dot(run(), r); };
  EXPECT_TRUE(check_grad("dx", x, dx, f, pick_indices(x.numel(), 0, 0))) << layer.describe();
  auto params = layer.params();
  for (std::size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(check_grad(params[i]->name, params[i]->value, grads[i], f, pick_indices(grads[i].numel(), 0, 0)))
        << layer.describe();
}

// The harness itself: a gradient with one element off by 1e-4 of the gradient scale (100x the
// tolerance) must fail and a correct one must pass, so a passing check below means something.
TEST(GradCheckHarness, RejectsAGradientWrongByOneIn1e4) {
  Tensor v = random_tensor({6}, DType::f64, 1);
  auto f = [&]() {  // f = sum(v_i^3 / 3), df/dv_i = v_i^2
    double s = 0;
    for (int64_t i = 0; i < v.numel(); ++i) s += v.at(i) * v.at(i) * v.at(i) / 3;
    return s;
  };
  Tensor good({6}, DType::f64);
  for (int64_t i = 0; i < 6; ++i) good.data<double>()[i] = v.at(i) * v.at(i);
  Tensor bad = good.clone();
  bad.data<double>()[3] += 1e-4 * max_abs(good);
  EXPECT_TRUE(check_grad("good", v, good, f, pick_indices(6, 0, 0)));
  EXPECT_FALSE(check_grad("bad", v, bad, f, pick_indices(6, 0, 0)));
}

// ---------------------------------------------------------------------------------------------
// Conv2d

struct ConvCase {
  const char* name;
  const char* policy;  // preset plus knob edits; backends and dtype are forced by gc_policy
  Conv2dSpec spec;
  Shape in_chw;
  int64_t batch;
};

Conv2dSpec conv_spec(int64_t out, int64_t k, int64_t stride, int64_t dilation, PadMode pad, int64_t pad_hw = 0,
                     bool bias = true) {
  Conv2dSpec s;
  s.out_channels = out;
  s.kernel_h = s.kernel_w = k;
  s.stride = stride;
  s.dilation = dilation;
  s.pad = pad;
  s.pad_h = s.pad_w = pad_hw;
  s.bias = bias;
  return s;
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {"valid_3x3", "torch", conv_spec(3, 3, 1, 1, PadMode::valid), {2, 6, 5}, 2},
      // 7x6 input, k=3, s=2: TF puts the odd pad after (rows (1,1), cols (0,1)).
      {"same_stride2_tensorflow", "tensorflow", conv_spec(3, 3, 2, 1, PadMode::same), {2, 7, 6}, 2},
      // Same shape under Theano: extra pad before (rows (1,1), cols (1,0)), and a flipped kernel.
      {"same_stride2_theano_flip", "theano", conv_spec(3, 3, 2, 1, PadMode::same), {2, 7, 6}, 2},
      // Even kernel 'same' at stride 1: total pad 1, after (TF) or before (Theano).
      {"same_even_k2_tensorflow", "tensorflow", conv_spec(2, 2, 1, 1, PadMode::same), {2, 5, 4}, 2},
      {"same_even_k2_theano", "theano", conv_spec(2, 2, 1, 1, PadMode::same), {2, 5, 4}, 2},
      {"explicit_pad1", "torch", conv_spec(3, 3, 1, 1, PadMode::explicit_pad, 1), {2, 5, 5}, 2},
      {"explicit_pad2_stride2", "torch", conv_spec(2, 3, 2, 1, PadMode::explicit_pad, 2), {1, 6, 7}, 2},
      {"dilation2", "torch", conv_spec(2, 3, 1, 2, PadMode::valid), {2, 7, 8}, 2},
      {"dilation2_same_tensorflow", "tensorflow", conv_spec(2, 3, 1, 2, PadMode::same), {1, 6, 6}, 2},
      {"flip_valid", "torch,conv_kernel_flip=true", conv_spec(3, 3, 1, 1, PadMode::valid), {2, 5, 6}, 2},
      {"flip_nonsquare_input_no_bias", "torch,conv_kernel_flip=true",
       conv_spec(2, 3, 1, 1, PadMode::explicit_pad, 1, false), {3, 4, 6}, 1},
  };
  return cases;
}

void PrintTo(const ConvCase& c, std::ostream* os) { *os << c.name << " " << c.policy; }

class GradCheckConv : public ::testing::TestWithParam<ConvCase> {};

TEST_P(GradCheckConv, DxDwDb) {
  const ConvCase& c = GetParam();
  const Policy policy = gc_policy(c.policy);
  Rng rng(policy.rng_engine, 7);
  Conv2dLayer layer(c.spec, c.in_chw, policy, rng);
  // Non-zero biases even under zeros-initialising presets, so db is checked at a generic point.
  for (Param* p : layer.params())
    if (p->is_bias) p->value = random_tensor(p->value.shape(), DType::f64, 11);
  Shape xs{c.batch};
  xs.insert(xs.end(), c.in_chw.begin(), c.in_chw.end());
  SCOPED_TRACE(layer.describe());
  gradcheck_layer(layer, random_tensor(xs, DType::f64, 3), 5);
}

INSTANTIATE_TEST_SUITE_P(Cases, GradCheckConv, ::testing::ValuesIn(conv_cases()),
                         [](const ::testing::TestParamInfo<ConvCase>& i) { return std::string(i.param.name); });

// ---------------------------------------------------------------------------------------------
// Pooling

// Distinct values at least 0.01 apart (a shuffled ramp): no ties and no near-ties, so the max is
// differentiable and a +-h step cannot change which element wins.
Tensor distinct_values(const Shape& shape, uint64_t seed) {
  Tensor t(shape, DType::f64);
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = -1.0 + 0.01 * static_cast<double>(i);
  std::mt19937 gen(static_cast<uint32_t>(seed));
  std::shuffle(v.begin(), v.end(), gen);
  std::copy(v.begin(), v.end(), t.data<double>());
  return t;
}

struct PoolCase {
  const char* name;
  const char* policy;
  PoolKind kind;
  int64_t window, stride;
  Shape in_chw;
};

const std::vector<PoolCase>& pool_cases() {
  static const std::vector<PoolCase> cases = {
      {"max2_torch", "torch", PoolKind::max, 2, 0, {2, 4, 6}},
      {"max2_odd_input_drops_edge", "torch", PoolKind::max, 2, 0, {2, 5, 7}},
      // Overlapping windows: one input can win several windows (gradients accumulate).
      {"max3_stride2_overlap", "torch", PoolKind::max, 3, 2, {1, 7, 7}},
      // 'all' ties only differs on ties; without ties it must give the same (correct) gradient.
      {"max2_theano_ties_all", "theano", PoolKind::max, 2, 0, {2, 4, 4}},
      {"avg2", "torch", PoolKind::avg, 2, 0, {2, 4, 6}},
      {"avg3_stride2_overlap", "tensorflow", PoolKind::avg, 3, 2, {2, 7, 5}},
  };
  return cases;
}

void PrintTo(const PoolCase& c, std::ostream* os) { *os << c.name << " " << c.policy; }

class GradCheckPool : public ::testing::TestWithParam<PoolCase> {};

TEST_P(GradCheckPool, Dx) {
  const PoolCase& c = GetParam();
  Pool2dSpec spec;
  spec.kind = c.kind;
  spec.window = c.window;
  spec.stride = c.stride;
  Pool2dLayer layer(spec, c.in_chw, gc_policy(c.policy));
  Shape xs{2};
  xs.insert(xs.end(), c.in_chw.begin(), c.in_chw.end());
  SCOPED_TRACE(layer.describe());
  gradcheck_layer(layer, distinct_values(xs, 13), 17);
}

INSTANTIATE_TEST_SUITE_P(Cases, GradCheckPool, ::testing::ValuesIn(pool_cases()),
                         [](const ::testing::TestParamInfo<PoolCase>& i) { return std::string(i.param.name); });

// ---------------------------------------------------------------------------------------------
// Dense, activations, flatten, dropout

TEST(GradCheckDense, DxDwDb) {
  for (const char* preset : {"torch", "tensorflow"}) {  // oihw vs hwio draw order: same math
    const Policy policy = gc_policy(preset);
    Rng rng(policy.rng_engine, 3);
    DenseLayer layer(5, {7}, policy, rng);
    for (Param* p : layer.params())
      if (p->is_bias) p->value = random_tensor(p->value.shape(), DType::f64, 19);
    SCOPED_TRACE(preset);
    gradcheck_layer(layer, random_tensor({3, 7}, DType::f64, 23), 29);
  }
}

TEST(GradCheckDense, NoBias) {
  const Policy policy = gc_policy("torch");
  Rng rng(policy.rng_engine, 3);
  DenseLayer layer(4, {6}, policy, rng, /*bias=*/false);
  ASSERT_EQ(layer.params().size(), 1u);
  gradcheck_layer(layer, random_tensor({2, 6}, DType::f64, 31), 37);
}

// Inputs in [-4,4] kept more than 1e-3 (>> h) from every kink: 0 (relu), +-2.5 (linear_0p2 hard
// sigmoid edges) and +-3 (relu6_div6 edges), where the function is not differentiable.
Tensor away_from_kinks(const Shape& shape, uint64_t seed) {
  Tensor t = random_tensor(shape, DType::f64, seed, -4.0, 4.0);
  double* d = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i)
    for (double kink : {0.0, 2.5, -2.5, 3.0, -3.0})
      if (std::fabs(d[i] - kink) < 1e-3) d[i] = kink + (d[i] < kink ? -2e-3 : 2e-3);
  return t;
}

struct ActCase {
  const char* name;
  ActKind kind;
  const char* policy;
};

void PrintTo(const ActCase& c, std::ostream* os) { *os << c.name << " " << c.policy; }

class GradCheckActivation : public ::testing::TestWithParam<ActCase> {};

TEST_P(GradCheckActivation, Dx) {
  const ActCase& c = GetParam();
  ActivationLayer layer(c.kind, {3, 4, 5}, gc_policy(c.policy));
  SCOPED_TRACE(layer.describe());
  gradcheck_layer(layer, away_from_kinks({2, 3, 4, 5}, 41), 43);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GradCheckActivation,
    ::testing::Values(ActCase{"relu_torch", ActKind::relu, "torch"},
                      ActCase{"relu_theano_half_at_zero", ActKind::relu, "theano"},
                      ActCase{"tanh", ActKind::tanh, "torch"}, ActCase{"sigmoid", ActKind::sigmoid, "torch"},
                      ActCase{"hard_sigmoid_linear_0p2", ActKind::hard_sigmoid, "tensorflow"},
                      ActCase{"hard_sigmoid_relu6_div6", ActKind::hard_sigmoid, "torch"},
                      ActCase{"hard_sigmoid_0p2_exclusive", ActKind::hard_sigmoid,
                              "tensorflow,hard_sigmoid_grad_edges=exclusive"}),
    [](const ::testing::TestParamInfo<ActCase>& i) { return std::string(i.param.name); });

TEST(GradCheckFlatten, ChwAndHwc) {
  for (const char* spec : {"torch,flatten_order=chw", "torch,flatten_order=hwc"}) {
    FlattenLayer layer({3, 2, 4}, gc_policy(spec));
    SCOPED_TRACE(layer.describe());
    gradcheck_layer(layer, random_tensor({2, 3, 2, 4}, DType::f64, 47), 53);
  }
}

TEST(GradCheckDropout, FixedMaskCentralDifference) {
  const Policy policy = gc_policy("torch");
  DropoutLayer layer(0.3, {4, 5});
  std::unique_ptr<Rng> rng;
  // The same seed before every forward: every evaluation of f uses the same mask.
  gradcheck_layer(layer, random_tensor({3, 4, 5}, DType::f64, 59), 61, [&](RunContext& ctx) {
    rng = std::make_unique<Rng>(policy.rng_engine, 99);
    ctx.rng = rng.get();
  });
}

TEST(GradCheckDropout, DxIsDyTimesMaskOverKeep) {
  const double rate = 0.4;
  DropoutLayer layer(rate, {50});
  ExecContext exec;
  for (RngEngine engine : {RngEngine::mt19937_u24, RngEngine::philox_u23, RngEngine::mrg31k3p}) {
    Rng rng(engine, 5);
    RunContext ctx = RunContext::training(exec, &rng);
    const Tensor x = Tensor::from<double>({2, 50}, std::vector<double>(100, 1.0));
    const Tensor y = layer.forward(ctx, x);
    const Tensor dy = random_tensor({2, 50}, DType::f64, 67);
    const Tensor dx = layer.backward(ctx, dy);
    // With x = 1, y is the mask/(1-p) itself, so dx must be dy * y elementwise, exactly.
    int64_t kept = 0;
    Tensor want({2, 50}, DType::f64);
    for (int64_t i = 0; i < 100; ++i) {
      EXPECT_TRUE(y.at(i) == 0.0 || y.at(i) == 1.0 / (1.0 - rate)) << "i=" << i << " y=" << y.at(i);
      kept += y.at(i) != 0.0;
      want.data<double>()[i] = dy.at(i) * y.at(i);
    }
    EXPECT_TRUE(bitwise_equal(dx, want));
    // 100 draws at keep 0.6: 60 +- 4.9 (1 sigma); [35, 85] is a 5-sigma band.
    EXPECT_GT(kept, 35);
    EXPECT_LT(kept, 85);
  }
}

// ---------------------------------------------------------------------------------------------
// Softmax cross-entropy

struct XentCase {
  CeFormulation form;
  bool mean;
};

void PrintTo(const XentCase& c, std::ostream* os) {
  *os << "formulation " << static_cast<int>(c.form) << (c.mean ? " mean" : " sum");
}

class GradCheckXent : public ::testing::TestWithParam<XentCase> {};

TEST_P(GradCheckXent, Dz) {
  SoftmaxXentParams p;
  p.form = GetParam().form;
  p.mean = GetParam().mean;
  p.clip_eps = 1e-7;
  // Logits in [-2,2] over 5 classes: every probability in ~[4e-3, 0.9], inside [eps, 1-eps].
  Tensor z = random_tensor({4, 5}, DType::f64, 71, -2.0, 2.0);
  const std::vector<int32_t> labels = {0, 3, 4, 1};
  auto f = [&]() { return softmax_xent_forward_ref(p, z, labels); };
  Tensor dz(z.shape(), DType::f64);
  softmax_xent_backward_ref(p, z, labels, dz);
  EXPECT_GT(max_abs(dz), 1e-2);
  EXPECT_TRUE(check_grad("dz", z, dz, f, pick_indices(z.numel(), 0, 0)));
}

// Saturated rows: a target probability ~1e-13 (far below eps) and ~1-4e-13 (above 1-eps). Under
// softmax_clip both are clipped, so the loss is flat there and the gradient of those rows is
// exactly zero; the other formulations keep a gradient. Either way analytic == numeric.
TEST_P(GradCheckXent, DzSaturatedRows) {
  SoftmaxXentParams p;
  p.form = GetParam().form;
  p.mean = GetParam().mean;
  Tensor z = Tensor::from<double>({3, 5}, {0.0, 30.0, 0.5, -0.5, 1.0,  //
                                           30.0, 0.0, 0.2, -0.1, 0.3,  //
                                           0.4, -0.3, 1.2, 0.1, -1.0});
  const std::vector<int32_t> labels = {0, 0, 2};
  auto f = [&]() { return softmax_xent_forward_ref(p, z, labels); };
  Tensor dz(z.shape(), DType::f64);
  softmax_xent_backward_ref(p, z, labels, dz);
  EXPECT_TRUE(check_grad("dz", z, dz, f, pick_indices(z.numel(), 0, 0)));
  if (p.form == CeFormulation::softmax_clip) {
    for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(dz.at(i), 0.0) << "clipped rows, element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GradCheckXent,
                         ::testing::Values(XentCase{CeFormulation::log_softmax, true},
                                           XentCase{CeFormulation::log_softmax, false},
                                           XentCase{CeFormulation::softmax_clip, true},
                                           XentCase{CeFormulation::softmax_clip, false},
                                           XentCase{CeFormulation::softmax_log, true},
                                           XentCase{CeFormulation::softmax_log, false}),
                         [](const ::testing::TestParamInfo<XentCase>& i) {
                           const char* f = i.param.form == CeFormulation::log_softmax    ? "log_softmax"
                                           : i.param.form == CeFormulation::softmax_clip ? "softmax_clip"
                                                                                        : "softmax_log";
                           return std::string(f) + (i.param.mean ? "_mean" : "_sum");
                         });

// ---------------------------------------------------------------------------------------------
// Whole models: LeNet-1 and LeNet-5, batch 2, with the Policy's loss.

struct ModelCase {
  const char* model;
  const char* policy;
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.model << " " << c.policy; }

class GradCheckModel : public ::testing::TestWithParam<ModelCase> {};

TEST_P(GradCheckModel, EndToEnd) {
  const ModelCase& c = GetParam();
  const Policy policy = gc_policy(c.policy);
  Model m = build_model(c.model, policy, 2024);
  ASSERT_EQ(m.dtype(), DType::f64);
  ThreadCountGuard one_thread(1);  // as in gradcheck_layer: ~10^3 tiny forwards
  ExecContext exec;
  RunContext ctx = RunContext::training(exec, nullptr);
  const SoftmaxXentParams loss = resolve_loss(policy);
  Tensor x = random_tensor({2, 1, 28, 28}, DType::f64, 73, 0.0, 1.0);
  const std::vector<int32_t> labels = {3, 7};

  m.net->zero_grad();  // backward ADDS into parameter gradients
  const Tensor logits = m.net->forward(ctx, x);
  Tensor dz(logits.shape(), DType::f64);
  softmax_xent_backward_ref(loss, logits, labels, dz);
  const Tensor dx = m.net->backward(ctx, dz).clone();
  auto named = m.net->named_params();
  std::vector<Tensor> grads;
  for (auto& np : named) grads.push_back(np.second->grad.clone());

  auto f = [&]() { return softmax_xent_forward_ref(loss, m.net->forward(ctx, x), labels); };
  // Every element of a 44k-parameter model would take ~10^5 forwards: check 24 spread entries of
  // each parameter tensor (always its first and last) and 48 of the input.
  constexpr int64_t kPerTensor = 24;
  EXPECT_TRUE(check_grad("dx", x, dx, f, pick_indices(x.numel(), 2 * kPerTensor, 1)));
  for (std::size_t i = 0; i < named.size(); ++i) {
    EXPECT_GT(max_abs(grads[i]), 0.0) << named[i].first << " has an all-zero gradient";
    EXPECT_TRUE(check_grad(named[i].first, named[i].second->value, grads[i], f,
                           pick_indices(grads[i].numel(), kPerTensor, 100 + i)));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GradCheckModel,
                         ::testing::Values(ModelCase{"lenet1", "torch"}, ModelCase{"lenet1", "theano"},
                                           ModelCase{"lenet5", "torch"}, ModelCase{"lenet5", "tensorflow"}),
                         [](const ::testing::TestParamInfo<ModelCase>& i) {
                           return std::string(i.param.model) + "_" + i.param.policy;
                         });

}  // namespace
}  // namespace driftlab
