// The fused conv_block kernel (kernels/cpu/fast/conv_block_fast.cpp) against its reference (the conv2d,
// activation and maxpool2d reference kernels composed), and the fused path through whole models.
//
// Two kinds of data:
//  - small integers (x, w, b, dy in -2..2; relu with the knobs that give halves): every sum is an
//    exact float32 integer or half-integer in any order, so the fast kernel must give the
//    reference's values exactly, and ties (equal window maxima, z == 0) are frequent: this checks
//    the indexing, the pooling's winners under both tie rules, relu's gradient at zero and at NaN;
//  - uniform reals (every activation): the convolution's sums run in another order, so each
//    result is compared within n * eps * max|ref| (n: the number of terms summed into one
//    output, an upper bound on the order's effect relative to the tensor's scale).
// And the kernel gives the same bits run after run at a fixed thread count (its reduction order
// is fixed), and refuses what its supports() does not claim.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/ops/conv_block.h"
#include "engine/train/cpu_runner.h"
#include "kernels/cpu/fast/conv_block_fast.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "models/models.h"
#include "tests/test_util.h"

namespace {

using namespace driftlab;

struct BlockCase {
  const char* name;
  int64_t n, c, h, w, k, r, s;
  int64_t pad_t, pad_b, pad_l, pad_r;
  bool flip, bias;
  ActKind act;
  int64_t pool;
  PoolTies ties;
  double grad_at_zero;
  ReluNanGrad nan_grad;
};

// LeNet's blocks (batch 19: several groups of 8 images per thread and a partial one), the Theano knobs (flip, ties=all, dReLU(0)=0.5, NaN gradient), 'same' padding
// split unevenly, planes whose width is not a multiple of 8 or whose height is odd (the scalar
// epilogue), 3x3 pooling, no bias, channel counts that are not multiples of the register tile.
const BlockCase kCases[] = {
    {"lenet5_conv1", 3, 1, 28, 28, 6, 5, 5, 0, 0, 0, 0, false, true, ActKind::relu, 2, PoolTies::first, 0.0, ReluNanGrad::dy},
    {"lenet5_conv2", 5, 6, 12, 12, 16, 5, 5, 0, 0, 0, 0, false, true, ActKind::relu, 2, PoolTies::first, 0.0, ReluNanGrad::dy},
    {"lenet5_conv2_b19", 19, 6, 12, 12, 16, 5, 5, 0, 0, 0, 0, false, true, ActKind::relu, 2, PoolTies::first, 0.0, ReluNanGrad::dy},
    {"lenet1_conv1", 4, 1, 28, 28, 4, 5, 5, 0, 0, 0, 0, false, true, ActKind::relu, 2, PoolTies::first, 0.0, ReluNanGrad::dy},
    {"lenet1_conv2", 3, 4, 12, 12, 12, 5, 5, 0, 0, 0, 0, false, true, ActKind::relu, 2, PoolTies::first, 0.0, ReluNanGrad::dy},
    {"theano_conv1", 3, 1, 28, 28, 6, 5, 5, 0, 0, 0, 0, true, true, ActKind::relu, 2, PoolTies::all, 0.5, ReluNanGrad::nan},
    {"theano_conv2", 2, 6, 12, 12, 16, 5, 5, 0, 0, 0, 0, true, true, ActKind::relu, 2, PoolTies::all, 0.5, ReluNanGrad::nan},
    {"same_uneven_4x4", 2, 3, 11, 13, 5, 4, 4, 1, 2, 1, 2, false, true, ActKind::relu, 2, PoolTies::first, 0.0, ReluNanGrad::dy},
    {"same_before_flip", 2, 2, 10, 9, 7, 4, 4, 2, 1, 2, 1, true, true, ActKind::relu, 2, PoolTies::all, 0.5, ReluNanGrad::dy},
    {"odd_rows_w16", 3, 2, 13, 20, 3, 5, 5, 0, 0, 0, 0, false, true, ActKind::relu, 2, PoolTies::first, 0.0, ReluNanGrad::dy},
    {"pool3_nobias", 2, 2, 17, 19, 7, 3, 3, 0, 0, 0, 0, false, false, ActKind::relu, 3, PoolTies::first, 0.0, ReluNanGrad::dy},
    {"wide_k", 2, 3, 10, 10, 33, 3, 3, 1, 1, 1, 1, false, true, ActKind::relu, 2, PoolTies::first, 0.0, ReluNanGrad::dy},
    {"narrow_k40", 3, 3, 8, 8, 40, 3, 3, 1, 1, 1, 1, false, true, ActKind::relu, 2, PoolTies::first, 0.0, ReluNanGrad::dy},
    {"one_by_one", 2, 5, 8, 8, 9, 1, 1, 0, 0, 0, 0, false, true, ActKind::relu, 2, PoolTies::first, 0.0, ReluNanGrad::dy},
    {"tanh", 3, 1, 28, 28, 6, 5, 5, 0, 0, 0, 0, false, true, ActKind::tanh, 2, PoolTies::first, 0.0, ReluNanGrad::dy},
    {"sigmoid_flip", 2, 4, 12, 12, 12, 5, 5, 0, 0, 0, 0, true, true, ActKind::sigmoid, 2, PoolTies::all, 0.0, ReluNanGrad::dy},
    {"hard_sigmoid", 2, 3, 11, 13, 5, 3, 3, 1, 1, 1, 1, false, true, ActKind::hard_sigmoid, 2, PoolTies::first, 0.0, ReluNanGrad::dy},
};

void PrintTo(const BlockCase& c, std::ostream* os) { *os << c.name; }

ConvBlockParams params_of(const BlockCase& c) {
  ConvBlockParams p;
  p.conv.n = c.n, p.conv.c = c.c, p.conv.h = c.h, p.conv.w = c.w, p.conv.k = c.k, p.conv.r = c.r, p.conv.s = c.s;
  p.conv.pad_t = c.pad_t, p.conv.pad_b = c.pad_b, p.conv.pad_l = c.pad_l, p.conv.pad_r = c.pad_r;
  p.conv.flip = c.flip;
  p.bias = c.bias;
  p.act.kind = c.act;
  p.act.relu_grad_at_zero = c.grad_at_zero;
  p.act.relu_nan_grad = c.nan_grad;
  p.act.hs_grad_edges_inclusive = false;
  p.pool.n = c.n, p.pool.c = c.k, p.pool.h = p.conv.out_h(), p.pool.w = p.conv.out_w();
  p.pool.kh = p.pool.kw = p.pool.stride_h = p.pool.stride_w = c.pool;
  p.pool.ties = c.ties;
  p.validate();
  return p;
}

const KernelRegistry& registry() {
  static const KernelRegistry reg = make_cpu_registry();
  return reg;
}
const ConvBlockKernel& fast_kernel() { return registry().conv_block.at(KernelBackend::fast); }
const ConvBlockKernel& ref_kernel() { return registry().conv_block.reference(); }

Tensor integers(Shape shape, uint64_t seed) {
  Tensor t = random_tensor(std::move(shape), DType::f32, seed, -2.0, 3.0);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = std::floor(t.data<float>()[i]);
  return t;
}

struct Results {
  Tensor y, z, dx, dw, db;
};

// forward (recording z) then backward with dx, dw and db, dw/db starting from `seed_grads`.
Results run(const ConvBlockKernel& k, const ConvBlockParams& p, const Tensor& x, const Tensor& w, const Tensor& b,
            const Tensor& dy, const Tensor& dw0, const Tensor& db0) {
  Results r;
  r.y = Tensor(p.y_shape(), DType::f32);
  r.z = Tensor(p.z_shape(), DType::f32);
  k.forward(p, x, w, p.bias ? &b : nullptr, r.y, &r.z);
  r.dx = Tensor(p.x_shape(), DType::f32);
  r.dw = dw0.clone();
  r.db = db0.clone();
  k.backward(p, x, w, r.z, dy, &r.dx, &r.dw, &r.db);
  return r;
}

class ConvBlockFast : public ::testing::TestWithParam<BlockCase> {};
class ConvBlockFastExact : public ::testing::TestWithParam<BlockCase> {};  // the relu rows

std::vector<BlockCase> relu_cases() {
  std::vector<BlockCase> out;
  for (const BlockCase& c : kCases)
    if (c.act == ActKind::relu) out.push_back(c);
  return out;
}

TEST_P(ConvBlockFastExact, SupportedAndExactOnIntegerData) {
  const BlockCase& c = GetParam();
  const ConvBlockParams p = params_of(c);
  const ConvBlockKernel& fast = fast_kernel();
  ASSERT_TRUE(fast.name) << "this build has no fast conv_block (not AVX2+FMA)";
  ASSERT_TRUE(fast.supports(p, DType::f32)) << p.str();
  const Tensor x = integers(p.x_shape(), 1), w = integers(p.conv.w_shape(), 2), b = integers({c.k}, 3);
  const Tensor dy = integers(p.y_shape(), 4), dw0 = integers(p.conv.w_shape(), 5), db0 = integers({c.k}, 6);
  const Results want = run(ref_kernel(), p, x, w, b, dy, dw0, db0);
  for (int threads : {1, 2}) {
    ThreadCountGuard guard(threads);
    const Results got = run(fast, p, x, w, b, dy, dw0, db0);
    EXPECT_TRUE(bitwise_equal(got.z, want.z)) << "z, threads " << threads;
    EXPECT_TRUE(bitwise_equal(got.y, want.y)) << "y, threads " << threads;
    EXPECT_TRUE(bitwise_equal(got.dx, want.dx)) << "dx, threads " << threads;
    EXPECT_TRUE(bitwise_equal(got.dw, want.dw)) << "dw, threads " << threads;
    EXPECT_TRUE(bitwise_equal(got.db, want.db)) << "db, threads " << threads;
  }
}

// A NaN in the input makes a patch of NaN pre-activations: the windows' winners (the last NaN),
// and relu's gradient at NaN (dy passed, or NaN) must be the reference's. Values compared with
// NaN matching NaN (a NaN's payload is not part of the contract).
TEST_P(ConvBlockFastExact, NaNInputsPickTheReferenceWinners) {
  const BlockCase& c = GetParam();
  const ConvBlockParams p = params_of(c);
  Tensor x = integers(p.x_shape(), 11);
  x.data<float>()[x.numel() / 3] = std::numeric_limits<float>::quiet_NaN();
  const Tensor w = integers(p.conv.w_shape(), 12), b = integers({c.k}, 13), dy = integers(p.y_shape(), 14);
  const Tensor dw0(p.conv.w_shape(), DType::f32), db0({c.k}, DType::f32);
  const Results want = run(ref_kernel(), p, x, w, b, dy, dw0, db0);
  const Results got = run(fast_kernel(), p, x, w, b, dy, dw0, db0);
  EXPECT_TRUE(all_close(got.z, want.z, 0, 0));
  EXPECT_TRUE(all_close(got.y, want.y, 0, 0));
  EXPECT_TRUE(all_close(got.dx, want.dx, 0, 0));
  EXPECT_TRUE(all_close(got.dw, want.dw, 0, 0));
  EXPECT_TRUE(all_close(got.db, want.db, 0, 0));
}

// Uniform reals: every result within n * eps * max|ref| of the reference, n the number of terms
// summed into one element (z: C*R*S + 1; dx: K*R*S; dw: N*P*Q; db: N*P*Q); y, a max of z's
// activations, follows z.
TEST_P(ConvBlockFast, RealDataWithinTheSummationOrderBound) {
  const BlockCase& c = GetParam();
  const ConvBlockParams p = params_of(c);
  const Tensor x = random_tensor(p.x_shape(), DType::f32, 21), w = random_tensor(p.conv.w_shape(), DType::f32, 22);
  const Tensor b = random_tensor({c.k}, DType::f32, 23), dy = random_tensor(p.y_shape(), DType::f32, 24);
  const Tensor dw0(p.conv.w_shape(), DType::f32), db0({c.k}, DType::f32);
  const Results want = run(ref_kernel(), p, x, w, b, dy, dw0, db0);
  const Results got = run(fast_kernel(), p, x, w, b, dy, dw0, db0);
  const double eps = dtype_eps(DType::f32);
  auto bound = [&](const Tensor& ref, int64_t terms) {
    double m = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) m = std::max(m, std::fabs(ref.at(i)));
    return static_cast<double>(terms) * eps * m;
  };
  const int64_t PQ = p.conv.out_h() * p.conv.out_w();
  EXPECT_TRUE(all_close(got.z, want.z, bound(want.z, c.c * c.r * c.s + 1), 0));
  EXPECT_TRUE(all_close(got.y, want.y, bound(want.z, c.c * c.r * c.s + 1), 0));
  EXPECT_TRUE(all_close(got.dx, want.dx, bound(want.dx, c.k * c.r * c.s), 0));
  EXPECT_TRUE(all_close(got.dw, want.dw, bound(want.dw, c.n * PQ), 0));
  EXPECT_TRUE(all_close(got.db, want.db, bound(want.db, c.n * PQ), 0));
}

// The weight gradient's reduction runs in a fixed order for a thread count: the same bits twice.
TEST_P(ConvBlockFast, BitIdenticalAcrossRuns) {
  const BlockCase& c = GetParam();
  const ConvBlockParams p = params_of(c);
  const Tensor x = random_tensor(p.x_shape(), DType::f32, 31), w = random_tensor(p.conv.w_shape(), DType::f32, 32);
  const Tensor b = random_tensor({c.k}, DType::f32, 33), dy = random_tensor(p.y_shape(), DType::f32, 34);
  const Tensor dw0(p.conv.w_shape(), DType::f32), db0({c.k}, DType::f32);
  ThreadCountGuard guard(2);
  const Results a = run(fast_kernel(), p, x, w, b, dy, dw0, db0);
  const Results b2 = run(fast_kernel(), p, x, w, b, dy, dw0, db0);
  EXPECT_TRUE(bitwise_equal(a.y, b2.y));
  EXPECT_TRUE(bitwise_equal(a.dx, b2.dx));
  EXPECT_TRUE(bitwise_equal(a.dw, b2.dw));
  EXPECT_TRUE(bitwise_equal(a.db, b2.db));
}

// The groups' partial sums are reduced in group order whichever thread ran them: one thread and
// two give the same bits (the batch of 19 is three groups, the last partial).
TEST_P(ConvBlockFast, SameBitsAtOneAndTwoThreads) {
  const BlockCase& c = GetParam();
  const ConvBlockParams p = params_of(c);
  const Tensor x = random_tensor(p.x_shape(), DType::f32, 41), w = random_tensor(p.conv.w_shape(), DType::f32, 42);
  const Tensor b = random_tensor({c.k}, DType::f32, 43), dy = random_tensor(p.y_shape(), DType::f32, 44);
  const Tensor dw0 = random_tensor(p.conv.w_shape(), DType::f32, 45), db0 = random_tensor({c.k}, DType::f32, 46);
  Results one, two;
  {
    ThreadCountGuard guard(1);
    one = run(fast_kernel(), p, x, w, b, dy, dw0, db0);
  }
  {
    ThreadCountGuard guard(2);
    two = run(fast_kernel(), p, x, w, b, dy, dw0, db0);
  }
  EXPECT_TRUE(bitwise_equal(one.y, two.y));
  EXPECT_TRUE(bitwise_equal(one.dx, two.dx));
  EXPECT_TRUE(bitwise_equal(one.dw, two.dw));
  EXPECT_TRUE(bitwise_equal(one.db, two.db));
}

// AVX-512 builds may take 16-float tiles (two 8-float vectors per register); each output's taps are
// still added one FMA at a time in the same order, so the forward (z, y) and db (other code) are
// the 8-float tiles' bits exactly. dx: the input gradient's col2im adds the tiles into place in tile
// order, so another tile shape adds an element's K*R*S terms in another order: each within
// K*R*S eps max|dx| of the exact sum (RealDataWithinTheSummationOrderBound), so within twice that
// of each other. dw: the wide weight-gradient tile sums 16 lanes (two dz vectors per register)
// where the narrow one sums 8, another order of a weight's N*P*Q terms: within twice
// N*P*Q eps max|sum| of each other, plus an ulp of each side's final add into the given dw0.
TEST_P(ConvBlockFast, WideTilesGiveTheNarrowOnesForwardBitsAndGradientsWithinTheBound) {
  if (!conv_block_fast_has_wide_tiles()) GTEST_SKIP() << "no AVX-512 in this build: one kind of tile";
  const BlockCase& c = GetParam();
  const ConvBlockParams p = params_of(c);
  const Tensor x = random_tensor(p.x_shape(), DType::f32, 51), w = random_tensor(p.conv.w_shape(), DType::f32, 52);
  const Tensor b = random_tensor({c.k}, DType::f32, 53), dy = random_tensor(p.y_shape(), DType::f32, 54);
  const Tensor dw0 = random_tensor(p.conv.w_shape(), DType::f32, 55), db0 = random_tensor({c.k}, DType::f32, 56);
  ThreadCountGuard guard(2);
  const Results wide = run(fast_kernel(), p, x, w, b, dy, dw0, db0);
  conv_block_fast_allow_wide_tiles(false);
  const Results narrow = run(fast_kernel(), p, x, w, b, dy, dw0, db0);
  conv_block_fast_allow_wide_tiles(true);
  EXPECT_TRUE(bitwise_equal(wide.z, narrow.z));
  EXPECT_TRUE(bitwise_equal(wide.y, narrow.y));
  const double eps = dtype_eps(DType::f32);
  double m = 0;
  for (int64_t i = 0; i < narrow.dx.numel(); ++i) m = std::max(m, std::fabs(narrow.dx.at(i)));
  EXPECT_TRUE(all_close(wide.dx, narrow.dx, 2.0 * static_cast<double>(c.k * c.r * c.s) * eps * m, 0));
  double m_sum = 0, m_all = 0;
  for (int64_t i = 0; i < narrow.dw.numel(); ++i)
    m_sum = std::max(m_sum, std::fabs(narrow.dw.at(i) - dw0.at(i))), m_all = std::max(m_all, std::fabs(narrow.dw.at(i)));
  const int64_t terms = c.n * p.conv.out_h() * p.conv.out_w();
  EXPECT_TRUE(all_close(wide.dw, narrow.dw, 2.0 * static_cast<double>(terms) * eps * m_sum + 2.0 * eps * m_all, 0));
  // That the wide weight-gradient tile ran shows where its 16-lane order must change bits: LeNet's
  // planes give each weight hundreds of terms (the small cases' few pooled winners per lane can
  // sum to the same bits in either order: same_before_flip does).
  if (std::string(c.name).rfind("lenet", 0) == 0)
    EXPECT_FALSE(bitwise_equal(wide.dw, narrow.dw)) << "the wide weight-gradient tile did not run";
  EXPECT_TRUE(bitwise_equal(wide.db, narrow.db));
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvBlockFast, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });
// integer data keeps relu's sums exact (tanh's and sigmoid's values are not integers)
INSTANTIATE_TEST_SUITE_P(Cases, ConvBlockFastExact, ::testing::ValuesIn(relu_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// What supports() turns down goes to the three layers (Sequential) or, called directly, is refused.
TEST(ConvBlockFastLimits, RefusesWhatItDoesNotClaim) {
  const ConvBlockKernel& fast = fast_kernel();
  ASSERT_TRUE(fast.name);
  const ConvBlockParams base = params_of(kCases[0]);
  EXPECT_TRUE(fast.supports(base, DType::f32));
  EXPECT_FALSE(fast.supports(base, DType::f64));
  ConvBlockParams strided = base;
  strided.conv.stride_h = strided.conv.stride_w = 2;
  EXPECT_FALSE(fast.supports(strided, DType::f32));
  ConvBlockParams overlapping = base;
  overlapping.pool.stride_h = overlapping.pool.stride_w = 1;
  EXPECT_FALSE(fast.supports(overlapping, DType::f32));
  ConvBlockParams wide = base;
  wide.conv.c = 64;
  EXPECT_FALSE(fast.supports(wide, DType::f32));
  const Tensor x(base.x_shape(), DType::f64), w(base.conv.w_shape(), DType::f64), b({6}, DType::f64);
  Tensor y(base.y_shape(), DType::f64);
  EXPECT_NE(error_of([&] { fast.forward(base, x, w, &b, y, nullptr); }).find("unsupported block"), std::string::npos);
}

// ---- through models (Sequential's fusion) ----

double max_gap(Model& a, Model& b) {
  double gap = 0;
  auto pa = a.net->named_params(), pb = b.net->named_params();
  for (std::size_t i = 0; i < pa.size(); ++i)
    for (int64_t j = 0; j < pa[i].second->value.numel(); ++j)
      gap = std::max(gap, std::fabs(pa[i].second->value.at(j) - pb[i].second->value.at(j)));
  return gap;
}

// One SGD step fused and unfused from the same weights: the fused kernel runs (the trace) for both
// blocks, forward and backward, and the weights land within float32 summation-order distance
// (a step moves them by ~lr*|g| ~ 1e-3; the bound is 1e-5, as for the other backend knobs), for
// the torch preset and the Theano knobs (flip, ties=all, dReLU(0)=0.5).
TEST(ConvBlockModel, FusedTrainStepMatchesTheLayers) {
  for (const std::string preset : {"torch", "theano", "tensorflow"})
    for (const char* model : {"lenet1", "lenet5"}) {
      SCOPED_TRACE(preset + " " + model);
      Model fused = build_model(model, Policy::parse(preset + ",conv_block_backend=fast"), 7);
      Model layers = build_model(model, Policy::parse(preset + ",conv_block_backend=reference"), 7);
      ASSERT_EQ(max_gap(fused, layers), 0.0);
      const Tensor x = random_tensor({8, 1, 28, 28}, DType::f32, 5, 0.0, 1.0);
      const std::vector<int32_t> labels = {0, 1, 2, 3, 4, 5, 6, 7};
      std::vector<KernelChoice> trace;
      ExecContext exec;
      exec.trace = &trace;
      CpuRunner rf(fused, {}, exec), rl(layers, {});
      const double lf = rf.train_step(x, labels), ll = rl.train_step(x, labels);
      EXPECT_NEAR(lf, ll, 1e-5);
      int blocks = 0, convs = 0;
      for (const KernelChoice& c : trace) {
        blocks += c.op == "conv_block" && c.kernel == "fast";
        convs += c.op == "conv2d";
      }
      EXPECT_EQ(blocks, 4);  // two blocks, forward and backward
      EXPECT_EQ(convs, 0);
      const double gap = max_gap(fused, layers);
      EXPECT_GT(gap, 0.0);
      EXPECT_LT(gap, 1e-5);
    }
}

// An attack's input gradient (inference semantics, no parameter gradients) through the fused
// first block: dx within the summation-order bound of the layers' dx.
TEST(ConvBlockModel, InputGradientMatchesTheLayers) {
  Model fused = build_model("lenet5", Policy::torch(), 3);
  Model layers = build_model("lenet5", Policy::parse("torch,conv_block_backend=reference"), 3);
  const Tensor x = random_tensor({4, 1, 28, 28}, DType::f32, 9, 0.0, 1.0);
  CpuRunner rf(fused), rl(layers);
  const InputGradient gf = rf.input_gradient(x, {1, 2, 3, 4}, Semantics::inference);
  const InputGradient gl = rl.input_gradient(x, {1, 2, 3, 4}, Semantics::inference);
  double m = 0;
  for (int64_t i = 0; i < gl.dx.numel(); ++i) m = std::max(m, std::fabs(gl.dx.at(i)));
  // dx sums 6*25 terms in conv1 after 16*25 in conv2 and the dense layers: 1e3 * eps * max|dx|
  EXPECT_TRUE(all_close(gf.dx, gl.dx, 1e3 * dtype_eps(DType::f32) * m, 0));
  EXPECT_TRUE(all_close(gf.logits, gl.logits, 1e-5, 1e-5));
  for (auto& np : fused.net->named_params()) {
    for (int64_t j = 0; j < np.second->grad.numel(); ++j) ASSERT_EQ(np.second->grad.at(j), 0.0) << np.first;
  }
}

// describe() says which blocks run fused and why one does not.
TEST(ConvBlockModel, DescribeSaysWhetherTheBlockIsFused) {
  Model m = build_model("lenet5", Policy::torch(), 1);
  EXPECT_NE(m.net->layer(0).describe().find("conv_block fast: fused with relu, maxpool"), std::string::npos);
  Model d = build_model("lenet5", Policy::parse("torch,dtype=float64"), 1);
  EXPECT_NE(d.net->layer(0).describe().find("not fused: conv_block fast supports float32"), std::string::npos);
  Model r = build_model("lenet5", Policy::parse("torch,conv_block_backend=reference"), 1);
  EXPECT_EQ(r.net->layer(0).describe().find("conv_block"), std::string::npos);
}

}  // namespace
