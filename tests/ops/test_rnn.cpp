// The fast float32 LSTM/GRU kernels (kernels/cpu/fast/rnn_fast.cpp, both GEMM backends) against the
// reference (kernels/cpu/ref/rnn_ref.cpp): forward h_seq, dx and every parameter gradient,
// over cells x knob-resolved params, without and with a padding mask; and thread-count
// independence of the fast kernel. The cells and shapes are tests/cases/rnn_cases.h's tables
// (shared with the CUDA test and the benchmark): to add one, append it there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/registry.h"
#include "kernels/cpu/fast/rnn_fast_tiles.h"
#include "core/ops/activation.h"
#include "core/ops/rnn.h"
#include "tests/rnn_test_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

// The shapes by name, for the tests that pick one (tests/cases/rnn_cases.h says what each
// exercises).
constexpr RnnShape kSmall = kRnnSmall, kTiles = kRnnTiles, kChunks = kRnnChunks;

// A mask for a shape: sample n pads its first n%3 and its last n%2 steps (the last sample none).
std::vector<uint8_t> shape_mask(const RnnShape& s) {
  std::vector<uint8_t> m(static_cast<std::size_t>(s.batch * s.steps), 1);
  for (int64_t n = 0; n + 1 < s.batch; ++n)
    for (int64_t t = 0; t < s.steps; ++t)
      if (t < n % 3 || t >= s.steps - n % 2) m[static_cast<std::size_t>(n * s.steps + t)] = 0;
  return m;
}

struct RnnRun {
  Tensor h, dx, dw_ih, dw_hh, db_ih, db_hh, dw_peep;
};

// kSmall's 5 samples x 7 steps with pre-, post- and mid-padding and a sequence all padding.
const std::vector<uint8_t>& kMask = rnn_test_mask();

bool same_shape(const RnnShape& a, const RnnShape& b) {
  return a.batch == b.batch && a.steps == b.steps && a.input == b.input && a.hidden == b.hidden;
}

RnnRun run(const RnnKernel& k, int threads, const RnnParams& p, uint64_t seed,
           const uint8_t* mask = nullptr) {
  const int64_t GH = rnn_gates(p.cell) * p.hidden;
  Tensor x = random_tensor({p.batch, p.steps, p.input}, DType::f32, seed, -1.0, 1.0);
  Tensor w_ih = random_tensor({GH, p.input}, DType::f32, seed + 1, -0.5, 0.5);
  Tensor w_hh = random_tensor({GH, p.hidden}, DType::f32, seed + 2, -0.5, 0.5);
  Tensor b_ih = random_tensor({GH}, DType::f32, seed + 3, -0.5, 0.5);
  Tensor b_hh = random_tensor({GH}, DType::f32, seed + 4, -0.5, 0.5);
  Tensor dh = random_tensor({p.batch, p.steps, p.hidden}, DType::f32, seed + 5, -1.0, 1.0);
  Tensor w_peep = random_tensor({3 * p.hidden}, DType::f32, seed + 6, -0.5, 0.5);
  RnnRun r{Tensor({p.batch, p.steps, p.hidden}, DType::f32), Tensor(x.shape(), DType::f32),
           Tensor(w_ih.shape(), DType::f32), Tensor(w_hh.shape(), DType::f32), Tensor({GH}, DType::f32),
           Tensor({GH}, DType::f32), Tensor({3 * p.hidden}, DType::f32)};
  Tensor ws({rnn_workspace_size(p)}, DType::f32);
  RnnExec ex{threads};
  const RnnWeights<float> w{w_ih.data<float>(), w_hh.data<float>(), b_ih.data<float>(),
                            p.two_biases ? b_hh.data<float>() : nullptr, p.peepholes ? w_peep.data<float>() : nullptr};
  k.forward_f32(p, ex, x.data<float>(), mask, w, r.h.data<float>(), ws.data<float>());
  k.backward_f32(p, ex, x.data<float>(), mask, w, r.h.data<float>(), ws.data<float>(), dh.data<float>(),
                 r.dx.data<float>(),
                 {r.dw_ih.data<float>(), r.dw_hh.data<float>(), r.db_ih.data<float>(),
                  p.two_biases ? r.db_hh.data<float>() : nullptr, p.peepholes ? r.dw_peep.data<float>() : nullptr});
  return r;
}

class RnnFastVsRef : public ::testing::TestWithParam<std::tuple<KernelBackend, RnnCase>> {};

TEST_P(RnnFastVsRef, ForwardAndBackwardMatchTheReference) {
  const KernelBackend b = std::get<0>(GetParam());
  const RnnCase& c = std::get<1>(GetParam());
  SCOPED_TRACE(c.name);
  KernelRegistry reg = make_cpu_registry();
  const RnnKernel& fast = reg.rnn.at(b);
  ASSERT_NE(fast.forward_f32, nullptr) << backend_name(b);
  const RnnKernel& ref = reg.rnn.at(KernelBackend::reference);
  for (const RnnShapeCase& sc : cases_for(kRnnShapes, kCpuTest)) {
    const RnnShape& shape = sc.s;
    // The small shape's mask has an all-padding sequence and a gap; the others get shape_mask's.
    const std::vector<uint8_t> pads = same_shape(shape, kSmall) ? kMask : shape_mask(shape);
    for (const uint8_t* mask : {static_cast<const uint8_t*>(nullptr), pads.data()}) {
      SCOPED_TRACE(std::string(mask ? "with the padding mask" : "no mask") + ", shape " + sc.name + ", batch " +
                   std::to_string(shape.batch) + " hidden " + std::to_string(shape.hidden));
      const RnnParams p = rnn_case_params(c, shape);
      RnnRun f = run(fast, 2, p, 11, mask);
      RnnRun r = run(ref, 1, p, 11, mask);
      // float32 on both sides, sums of up to N*T=300 (parameter gradients) or G*H=280 terms in a
      // different order (tiles and per-chunk sums vs ascending), and the fast kernel's polynomial
      // exp/tanh (within 2 ulp of libm's), propagated through up to 7 steps of BPTT: a few
      // hundred ulps of values O(1-10), so atol 1e-5 plus rtol 1e-4.
      EXPECT_TRUE(all_close(f.h, r.h, 1e-5, 1e-4)) << "h_seq";
      EXPECT_TRUE(all_close(f.dx, r.dx, 1e-5, 1e-4)) << "dx";
      EXPECT_TRUE(all_close(f.dw_ih, r.dw_ih, 1e-5, 1e-4)) << "dw_ih";
      EXPECT_TRUE(all_close(f.dw_hh, r.dw_hh, 1e-5, 1e-4)) << "dw_hh";
      EXPECT_TRUE(all_close(f.db_ih, r.db_ih, 1e-5, 1e-4)) << "db_ih";
      EXPECT_TRUE(all_close(f.db_hh, r.db_hh, 1e-5, 1e-4)) << "db_hh";
      EXPECT_TRUE(all_close(f.dw_peep, r.dw_peep, 1e-5, 1e-4)) << "dw_peep";
    }
  }
}

// What a padded step does, in both kernels, exactly: the state is the previous step's (zero
// before the first real step), and the step's input gets no gradient.
TEST_P(RnnFastVsRef, PaddedStepsCarryTheStateExactly) {
  const KernelBackend b = std::get<0>(GetParam());
  const RnnCase& c = std::get<1>(GetParam());
  SCOPED_TRACE(c.name);
  KernelRegistry reg = make_cpu_registry();
  const RnnParams p = rnn_case_params(c, kSmall);
  for (KernelBackend kb : {KernelBackend::reference, b}) {
    SCOPED_TRACE(backend_name(kb));
    RnnRun r = run(reg.rnn.at(kb), 2, p, 11, kMask.data());
    EXPECT_TRUE(padded_steps_carry(p, kMask, r.h, r.dx));
  }
}

INSTANTIATE_TEST_SUITE_P(All, RnnFastVsRef,
                         ::testing::Combine(::testing::Values(KernelBackend::fast),
                                            ::testing::ValuesIn(cases_for(kRnnCases, kCpuTest))),
                         [](const auto& info) {
                           return std::string(backend_name(std::get<0>(info.param))) + "_" +
                                  rnn_case_name(std::get<1>(info.param));
                         });

// The fast kernel's gate activation, both hard-sigmoid forms, lane by lane against the scalar
// formula every other kernel uses (core/ops/activation.h hard_sigmoid_of), bit for bit: 20,000
// inputs over [-4, 4] and the edges. The divide form (PyTorch's, hard_sigmoid_kind=relu6_div6) is
// told apart from the slope form with the same constants, x/6 + 0.5, on some of them (the
// forward tolerance of RnnFastVsRef cannot tell the two apart).
TEST(RnnFast, HardSigmoidGateIsTheScalarFormulaBitForBit) {
  std::vector<float> xs = {-4.0f, -3.0f, -2.5f, 0.0f, 2.5f, 3.0f, 4.0f, -0.0f, 2.9999998f, -2.9999998f};
  uint64_t state = 12345;
  while (xs.size() % 16 != 0 || xs.size() < 20000) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    xs.push_back(-4.0f + 8.0f * static_cast<float>(state >> 40) / static_cast<float>(1ull << 24));
  }
  for (const bool divide : {false, true}) {
    SCOPED_TRACE(divide ? "divide form" : "slope form");
    ActivationParams g;
    g.kind = ActKind::hard_sigmoid;
    g.hs_slope = divide ? 1.0 / 6.0 : 0.2;
    g.hs_offset = 0.5;
    g.hs_divide = divide;
    const rnn_fast::Gate gate(g);
    ActivationParams slope_form = g;
    slope_form.hs_divide = false;
    const rnn_fast::Gate other(slope_form);
    int64_t differ = 0, apart = 0;
    for (std::size_t i = 0; i < xs.size(); i += 16) {
      rnn_fast::v16 a;
      for (int l = 0; l < 16; ++l) a[l] = xs[i + l];
      const rnn_fast::v16 y = rnn_fast::gate<true>(gate, a), z = rnn_fast::gate<true>(other, a);
      for (int l = 0; l < 16; ++l) {
        const float got = y[l], want = hard_sigmoid_of(g, xs[i + l]);
        differ += std::memcmp(&got, &want, sizeof want) != 0;
        apart += y[l] != z[l];
      }
    }
    EXPECT_EQ(differ, 0);
    if (divide) EXPECT_GT(apart, 1000);  // x/6 + 0.5 rounds differently from (x + 3) / 6 on many inputs
  }
}

// Inference (no workspace): the fast kernel keeps one step of state and gives the same bits as
// a forward that fills the whole workspace for the backward; so does the reference.
TEST(RnnFast, InferenceWithoutWorkspaceGivesTheSameStates) {
  KernelRegistry reg = make_cpu_registry();
  for (KernelBackend b : {KernelBackend::reference, KernelBackend::fast})
    for (const RnnCase& c : cases_for(kRnnCases, kCpuTest))
      for (const uint8_t* mask : {static_cast<const uint8_t*>(nullptr), kMask.data()}) {
        SCOPED_TRACE(std::string(c.name) + " " + backend_name(b) + (mask ? " masked" : ""));
        const RnnParams p = mask ? rnn_case_params(c, kSmall) : rnn_case_params(c, kTiles);
        const RnnKernel& k = reg.rnn.at(b);
        RnnExec ex{2};
        const int64_t GH = rnn_gates(p.cell) * p.hidden;
        Tensor x = random_tensor({p.batch, p.steps, p.input}, DType::f32, 3, -1.0, 1.0);
        Tensor w_ih = random_tensor({GH, p.input}, DType::f32, 4, -0.5, 0.5);
        Tensor w_hh = random_tensor({GH, p.hidden}, DType::f32, 5, -0.5, 0.5);
        Tensor bias = random_tensor({GH}, DType::f32, 6, -0.5, 0.5);
        Tensor peep = random_tensor({3 * p.hidden}, DType::f32, 7, -0.5, 0.5);
        Tensor ws({rnn_workspace_size(p)}, DType::f32), h1({p.batch, p.steps, p.hidden}, DType::f32),
            h2({p.batch, p.steps, p.hidden}, DType::f32);
        const RnnWeights<float> w{w_ih.data<float>(), w_hh.data<float>(), bias.data<float>(),
                                  p.two_biases ? bias.data<float>() : nullptr,
                                  p.peepholes ? peep.data<float>() : nullptr};
        k.forward_f32(p, ex, x.data<float>(), mask, w, h1.data<float>(), ws.data<float>());
        k.forward_f32(p, ex, x.data<float>(), mask, w, h2.data<float>(), nullptr);
        EXPECT_TRUE(all_close(h1, h2, 0, 0));
      }
}

TEST(RnnFast, SameBitsForAnyThreadCount) {
  KernelRegistry reg = make_cpu_registry();
  const KernelBackend b = KernelBackend::fast;
  const std::vector<uint8_t> chunks_mask = shape_mask(kChunks);
  for (const RnnCase& c : cases_for(kRnnCases, kCpuTest))
    for (int shape = 0; shape < 3; ++shape) {
      SCOPED_TRACE(std::string(c.name) + " shape " + std::to_string(shape));
      const RnnParams p = rnn_case_params(c, shape == 0 ? kSmall : shape == 1 ? kTiles : kChunks);
      const uint8_t* mask = shape == 0 ? kMask.data() : shape == 2 ? chunks_mask.data() : nullptr;
      RnnRun one = run(reg.rnn.at(b), 1, p, 5, mask);
      // Rows are split among threads (the backward: whole chunks of fixed size), never the
      // terms of one sum: exact equality.
      for (int threads : {2, 3}) {
        SCOPED_TRACE(std::to_string(threads) + " threads");
        RnnRun more = run(reg.rnn.at(b), threads, p, 5, mask);
        EXPECT_TRUE(all_close(one.h, more.h, 0, 0));
        EXPECT_TRUE(all_close(one.dx, more.dx, 0, 0));
        EXPECT_TRUE(all_close(one.dw_ih, more.dw_ih, 0, 0));
        EXPECT_TRUE(all_close(one.dw_hh, more.dw_hh, 0, 0));
        EXPECT_TRUE(all_close(one.db_ih, more.db_ih, 0, 0));
        EXPECT_TRUE(all_close(one.dw_peep, more.dw_peep, 0, 0));
      }
    }
}

// dh_last_step: a gradient for h_T alone gives the same bits as the full (N,T,H) gradient that is
// zero at every other step, in both kernels (with the padding mask: the last step padded too).
TEST(RnnOp, LastStepGradientEqualsTheFullOneWithZeros) {
  KernelRegistry reg = make_cpu_registry();
  for (KernelBackend b : {KernelBackend::reference, KernelBackend::fast})
    for (const RnnCase& c : cases_for(kRnnCases, kCpuTest)) {
      SCOPED_TRACE(std::string(c.name) + " " + backend_name(b));
      const RnnParams p = rnn_case_params(c, kSmall);
      const int64_t GH = rnn_gates(p.cell) * p.hidden, N = p.batch, S = p.steps, H = p.hidden;
      const RnnKernel& k = reg.rnn.at(b);
      RnnExec ex{2};
      Tensor x = random_tensor({N, S, p.input}, DType::f32, 3, -1.0, 1.0);
      Tensor w_ih = random_tensor({GH, p.input}, DType::f32, 4, -0.5, 0.5);
      Tensor w_hh = random_tensor({GH, H}, DType::f32, 5, -0.5, 0.5);
      Tensor bias = random_tensor({GH}, DType::f32, 6, -0.5, 0.5);
      Tensor peep = random_tensor({3 * H}, DType::f32, 7, -0.5, 0.5);
      Tensor dh_last = random_tensor({N, H}, DType::f32, 8, -1.0, 1.0), dh_full({N, S, H}, DType::f32);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < H; ++j) dh_full.data<float>()[(n * S + S - 1) * H + j] = dh_last.data<float>()[n * H + j];
      const RnnWeights<float> w{w_ih.data<float>(), w_hh.data<float>(), bias.data<float>(),
                                p.two_biases ? bias.data<float>() : nullptr, p.peepholes ? peep.data<float>() : nullptr};
      Tensor ws({rnn_workspace_size(p)}, DType::f32), h({N, S, H}, DType::f32);
      k.forward_f32(p, ex, x.data<float>(), kMask.data(), w, h.data<float>(), ws.data<float>());
      std::vector<Tensor> out;
      for (int last = 0; last < 2; ++last) {
        RnnParams q = p;
        q.dh_last_step = last == 1;
        Tensor dx(x.shape(), DType::f32), dw_ih(w_ih.shape(), DType::f32), dw_hh(w_hh.shape(), DType::f32),
            db({GH}, DType::f32), dp({3 * H}, DType::f32);
        k.backward_f32(q, ex, x.data<float>(), kMask.data(), w, h.data<float>(), ws.data<float>(),
                       (last ? dh_last : dh_full).data<float>(), dx.data<float>(),
                       {dw_ih.data<float>(), dw_hh.data<float>(), db.data<float>(), nullptr,
                        p.peepholes ? dp.data<float>() : nullptr});
        for (Tensor* t : {&dx, &dw_ih, &dw_hh, &db, &dp}) out.push_back(*t);
      }
      for (std::size_t i = 0; i < 5; ++i) EXPECT_TRUE(all_close(out[i], out[i + 5], 0, 0)) << "gradient " << i;
      const float* g = out[1].data<float>();
      EXPECT_TRUE(std::any_of(g, g + out[1].numel(), [](float v) { return v != 0.0f; })) << "dw_ih is all zero";
    }
}

TEST(RnnOp, BadSizesAreRefusedNamingTheCell) {
  RnnParams p = rnn_case_params(case_named(kRnnCases, "gru_torch"), kSmall);
  p.hidden = 0;
  try {
    check_rnn_params(p);
    FAIL() << "hidden=0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gru: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("hidden=0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace driftlab

namespace driftlab {
namespace {

// hard_sigmoid_grad_edges inside the LSTM: the input gate's pre-activation sits exactly on the
// clip point (0.2*2.5+0.5 = 1; relu6_div6: 3/6+0.5 = 1). Inclusive edges (Keras, Theano) pass
// the slope there, exclusive ones (torch) give 0; both kernels agree with the hand value.
TEST(RnnOp, HardSigmoidGradientEdgesAtTheClipPoint) {
  struct Edge {
    double slope, edge;
    bool inclusive;
  } edges[] = {{0.2, 2.5, true}, {0.2, 2.5, false}, {1.0 / 6.0, 3.0, true}, {1.0 / 6.0, 3.0, false}};
  KernelRegistry reg = make_cpu_registry();
  for (const Edge& e : edges)
    for (KernelBackend b : {KernelBackend::reference, KernelBackend::fast}) {
      RnnParams p;
      p.cell = RnnCell::lstm;
      p.batch = p.steps = p.input = p.hidden = 1;
      p.gate_act = {ActKind::hard_sigmoid, 0.0, e.slope, 0.5, e.inclusive};
      p.two_biases = false;
      const float x = 0, w_ih[4] = {0, 0, 0, 0}, w_hh[4] = {0, 0, 0, 0};
      const float b_ih[4] = {static_cast<float>(e.edge), 0, 1, 0};  // a_i on the edge, a_g = 1
      float h = 0, dh = 1, dx = 0, dw_ih[4] = {}, dw_hh[4] = {}, db_ih[4] = {};
      std::vector<float> ws(static_cast<std::size_t>(rnn_workspace_size(p)));
      const RnnKernel& k = reg.rnn.at(b);
      RnnExec ex{1};
      const RnnWeights<float> w{w_ih, w_hh, b_ih, nullptr, nullptr};
      k.forward_f32(p, ex, &x, nullptr, w, &h, ws.data());
      k.backward_f32(p, ex, &x, nullptr, w, &h, ws.data(), &dh, &dx, {dw_ih, dw_hh, db_ih, nullptr, nullptr});
      // i = 1, o = 0.5, g = tanh(1), c = g: dL/da_i = dh * o * (1 - tanh(c)^2) * g * slope-or-0
      const double g = std::tanh(1.0), tc = std::tanh(g);
      const double want = 0.5 * (1 - tc * tc) * g * (e.inclusive ? e.slope : 0.0);
      // float32 evaluation of a few operations, the fast kernel with its polynomial tanh: 1e-6.
      EXPECT_NEAR(db_ih[0], want, 1e-6) << backend_name(b) << " slope " << e.slope << " inclusive " << e.inclusive;
      EXPECT_NEAR(h, 0.5 * tc, 1e-6) << backend_name(b);
    }
}

}  // namespace
}  // namespace driftlab
