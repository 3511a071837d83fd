// LSTM and GRU layers: float64 gradient checks (reference kernels) over every knob value that
// changes the math, one test per recurrent knob showing its effect on a case small enough to
// work out by hand, the frameworks' weight layouts, and the errors for bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "engine/layers/embedding_layer.h"
#include "engine/layers/gru_layer.h"
#include "engine/layers/lstm_layer.h"
#include "engine/random.h"
#include "tests/layers/gradcheck_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

Policy f64_policy(const std::string& spec) {
  Policy p = Policy::parse(spec);
  p.dtype = FloatType::float64;
  use_reference_kernels(p);
  return p;
}

std::unique_ptr<RnnLayer> make_layer(RnnCell cell, const RnnSpec& spec, const Shape& in, const Policy& p,
                                     uint64_t seed = 3) {
  Rng rng(p.rng_engine, seed);
  if (cell == RnnCell::lstm) return std::make_unique<LstmLayer>(spec, in, p, rng);
  return std::make_unique<GruLayer>(spec, in, p, rng);
}

// ---------- gradient checks ----------

struct GradCase {
  const char* name;
  RnnCell cell;
  const char* policy;
  bool return_sequences;
};

const GradCase kGradCases[] = {
    {"lstm_torch", RnnCell::lstm, "torch", false},
    {"lstm_tensorflow_hard_sigmoid_1bias", RnnCell::lstm, "tensorflow", true},
    {"lstm_hard_sigmoid_exclusive_edges", RnnCell::lstm,
     "torch,rnn_recurrent_activation=hard_sigmoid,hard_sigmoid_kind=relu6_div6", false},
    {"gru_torch_after_2bias", RnnCell::gru, "torch", true},
    {"gru_tensorflow_before_1bias_hard", RnnCell::gru, "tensorflow", false},
    {"gru_lasagne_after_1bias_z_takes_new", RnnCell::gru,
     "torch,rnn_num_bias=1,gru_update_convention=z_takes_new", false},
    {"gru_before_2bias_sigmoid", RnnCell::gru, "torch,gru_reset_after=before", true},
    {"gru_before_z_takes_new_hard", RnnCell::gru, "tensorflow,gru_update_convention=z_takes_new", false},
    {"lstm_lasagne_peepholes", RnnCell::lstm, "torch,lstm_peepholes=lasagne,rnn_num_bias=1", true},
    {"lstm_peepholes_hard_sigmoid", RnnCell::lstm, "tensorflow,lstm_peepholes=lasagne", false},
};

class RnnGradcheck : public ::testing::TestWithParam<int> {};

TEST_P(RnnGradcheck, MatchesCentralDifferences) {
  const GradCase& c = kGradCases[GetParam()];
  Policy p = f64_policy(c.policy);
  // Non-zero biases everywhere (Keras initialises them to zero), so every bias path is live.
  p.rnn_bias_init = RnnBiasInit::uniform_inv_sqrt_hidden;
  Sequential net({4, 3});
  RnnSpec spec;
  spec.units = 5;
  spec.return_sequences = c.return_sequences;
  Rng rng(p.rng_engine, 7);
  if (c.cell == RnnCell::lstm)
    net.add(std::make_unique<LstmLayer>(spec, Shape{4, 3}, p, rng));
  else
    net.add(std::make_unique<GruLayer>(spec, Shape{4, 3}, p, rng));
  // Inputs in [-1,1] and weights of a few tenths keep hard-sigmoid pre-activations far from
  // its clip points (+-2.5, +-3), where the derivative jumps and central differences fail.
  Tensor x = random_tensor({2, 4, 3}, DType::f64, 17, -1.0, 1.0);
  // h=1e-6 in float64: truncation ~h^2 * f''' and rounding ~1e-16/h give errors near 1e-10;
  // 1e-7 leaves room for the sums over 4 steps without hiding a wrong term (those are >1e-3).
  gradcheck_sequential(net, x, 1e-7, 1, 1);
}

INSTANTIATE_TEST_SUITE_P(Cells, RnnGradcheck, ::testing::Range(0, static_cast<int>(std::size(kGradCases))),
                         [](const auto& info) { return std::string(kGradCases[info.param].name); });

// ---------- knob effects, worked by hand ----------

// A one-unit, one-feature layer with zero weights and the torch biases given (gate order
// LSTM i,f,g,o / GRU r,z,n; canonical = torch), run for one step on x = 0.
double one_step(RnnCell cell, const std::string& policy, std::vector<double> b_ih, std::vector<double> b_hh) {
  Policy p = f64_policy(policy);
  auto layer = make_layer(cell, RnnSpec{1, false}, {1, 1}, p);
  const int64_t G = rnn_gates(cell);
  TorchRnnWeights w;
  w.weight_ih = Tensor({G, 1}, DType::f64);
  w.weight_hh = Tensor({G, 1}, DType::f64);
  w.bias_ih = Tensor::from<double>({G}, b_ih);
  w.bias_hh = Tensor::from<double>({G}, b_hh);
  layer->set_torch_weights(w);
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  return layer->forward(ctx, Tensor({1, 1, 1}, DType::f64)).at(0);
}

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double hard_sigmoid(double v) { return std::min(1.0, std::max(0.0, 0.2 * v + 0.5)); }

TEST(RnnKnobs, RecurrentActivationSigmoidVsHardSigmoid) {
  // LSTM, one step from c=0: h = o * tanh(i * g) with i = o = act(1), g = tanh(0.5).
  const std::vector<double> b = {1.0, 0.0, 0.5, 1.0}, zero = {0, 0, 0, 0};
  auto expect = [](double a) { return a * std::tanh(a * std::tanh(0.5)); };
  // Single float64 evaluations of the same formula: a few ulps.
  EXPECT_NEAR(one_step(RnnCell::lstm, "torch", b, zero), expect(sigmoid(1.0)), 1e-15);
  EXPECT_NEAR(one_step(RnnCell::lstm, "torch,rnn_recurrent_activation=hard_sigmoid", b, zero),
              expect(1.0 / 6.0 + 0.5), 1e-15);  // hard_sigmoid_kind=relu6_div6 under torch
  EXPECT_NEAR(one_step(RnnCell::lstm, "tensorflow", b, zero), expect(hard_sigmoid(1.0)), 1e-15);
}

TEST(RnnKnobs, GruRecurrentBiasInsideOrOutsideTheReset) {
  // Only b_hn = 1: r = z = sigmoid(0) = 1/2, h_prev = 0, so h = (1 - z) * n = n / 2.
  const std::vector<double> zero = {0, 0, 0}, bhn = {0, 0, 1.0};
  // reset after with 2 biases (torch): n = tanh(r * b_hn) = tanh(1/2)
  EXPECT_NEAR(one_step(RnnCell::gru, "torch", zero, bhn), 0.5 * std::tanh(0.5), 1e-15);
  // reset before: b_hn is added outside the reset: n = tanh(1)
  EXPECT_NEAR(one_step(RnnCell::gru, "torch,gru_reset_after=before", zero, bhn), 0.5 * std::tanh(1.0), 1e-15);
  // one bias, reset before: the two biases fold into one, n = tanh(1)
  EXPECT_NEAR(one_step(RnnCell::gru, "torch,gru_reset_after=before,rnn_num_bias=1", zero, bhn),
              0.5 * std::tanh(1.0), 1e-15);
  // one bias, reset after (Lasagne) has no place for b_hn: refused, not folded
  EXPECT_THROW(one_step(RnnCell::gru, "torch,rnn_num_bias=1", zero, bhn), Error);
}

TEST(RnnKnobs, GruResetPlacementOnTheRecurrentState) {
  // Two steps, x = 0, zero input weights, U = 1 for every gate, b_in = 1 (n only): after the
  // first step h1 = (1-z) tanh(1) with z = 1/2. Second step: r = z = sigmoid(h1);
  // before: n = tanh(1 + r*h1); after: n = tanh(1 + r*(h1)) -- equal without a recurrent bias,
  // so add b_hn = 1: before n = tanh(1 + r*h1 + 1), after n = tanh(1 + r*(h1 + 1)).
  for (const char* reset : {"before", "after"}) {
    Policy p = f64_policy(std::string("torch,gru_reset_after=") + reset);
    auto layer = make_layer(RnnCell::gru, RnnSpec{1, false}, {2, 1}, p);
    TorchRnnWeights w;
    w.weight_ih = Tensor({3, 1}, DType::f64);
    w.weight_hh = Tensor::from<double>({3, 1}, {1, 1, 1});
    w.bias_ih = Tensor::from<double>({3}, {0, 0, 1});
    w.bias_hh = Tensor::from<double>({3}, {0, 0, 1});
    layer->set_torch_weights(w);
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    const double h = layer->forward(ctx, Tensor({1, 2, 1}, DType::f64)).at(0);
    const double after = std::string(reset) == "after";
    const double n1 = after ? std::tanh(1 + 0.5 * 1) : std::tanh(1 + 1);
    const double h1 = 0.5 * n1;
    const double r = sigmoid(h1), z = sigmoid(h1);
    const double n2 = after ? std::tanh(1 + r * (h1 + 1)) : std::tanh(1 + r * h1 + 1);
    // A handful of float64 operations: 1e-14.
    EXPECT_NEAR(h, z * h1 + (1 - z) * n2, 1e-14) << reset;
  }
}

TEST(RnnKnobs, GruUpdateConvention) {
  // b_iz = 1, b_in = 1: z = sigmoid(1), n = tanh(1), h_prev = 0.
  const std::vector<double> b = {0, 1.0, 1.0}, zero = {0, 0, 0};
  const double z = sigmoid(1.0), n = std::tanh(1.0);
  EXPECT_NEAR(one_step(RnnCell::gru, "torch", b, zero), (1 - z) * n, 1e-15);
  EXPECT_NEAR(one_step(RnnCell::gru, "torch,gru_update_convention=z_takes_new", b, zero), z * n, 1e-15);
}

TEST(RnnKnobs, NumBiasChangesTheParameterList) {
  for (const char* spec : {"torch", "tensorflow"}) {
    Policy p = Policy::parse(spec);
    auto l = make_layer(RnnCell::lstm, RnnSpec{8, false}, {5, 3}, p);
    const std::size_t want = p.rnn_num_bias == RnnNumBias::two ? 4 : 3;
    EXPECT_EQ(l->params().size(), want) << spec;
  }
}

TEST(RnnKnobs, InitBounds) {
  const int64_t F = 3, H = 16;
  for (RnnCell cell : {RnnCell::lstm, RnnCell::gru}) {
    const int64_t GH = rnn_gates(cell) * H;
    // torch: every parameter from U(+-1/sqrt(H)), biases non-zero
    auto t = make_layer(cell, RnnSpec{H, false}, {2, F}, Policy::torch());
    const double bt = 1 / std::sqrt(double(H));
    for (Param* p : t->params()) {
      double mx = 0;
      for (int64_t i = 0; i < p->value.numel(); ++i) mx = std::max(mx, std::fabs(p->value.at(i)));
      EXPECT_LE(mx, bt) << p->name;
      EXPECT_GT(mx, 0.5 * bt) << p->name;  // hundreds of draws: the max is near the bound
    }
    // tensorflow: kernel glorot over (F, G*H), biases zero except the LSTM forget block = 1
    auto k = make_layer(cell, RnnSpec{H, false}, {2, F}, Policy::tensorflow());
    const double bg = std::sqrt(6.0 / double(F + GH));
    double mx = 0;
    for (int64_t i = 0; i < k->params()[0]->value.numel(); ++i)
      mx = std::max(mx, std::fabs(k->params()[0]->value.at(i)));
    EXPECT_LE(mx, bg);
    EXPECT_GT(mx, 0.5 * bg);
    const Tensor& b = k->params()[2]->value;
    for (int64_t i = 0; i < GH; ++i) {
      const bool forget = cell == RnnCell::lstm && i / H == 1;
      EXPECT_EQ(b.at(i), forget ? 1.0 : 0.0) << i;
    }
  }
}

TEST(RnnKnobs, ForgetBiasOneUnderTorchInit) {
  auto l = make_layer(RnnCell::lstm, RnnSpec{4, false}, {2, 3}, Policy::parse("torch,lstm_forget_bias_init=one"));
  const Tensor& bi = l->params()[2]->value;
  const Tensor& bh = l->params()[3]->value;
  for (int64_t j = 0; j < 4; ++j) {
    EXPECT_EQ(bi.at(4 + j), 1.0);  // forget block of the input bias
    EXPECT_NE(bh.at(4 + j), 0.0);  // the recurrent bias is drawn as usual
    EXPECT_NE(bi.at(j), 0.0);
  }
}

// Lasagne's peepholes: a (3, units) parameter drawn N(0, 0.1^2) after the usual weights (which
// therefore match the layer without peepholes); zero peepholes give the plain LSTM exactly, on
// the reference and the fast kernels; non-zero ones change the output; a GRU has none.
TEST(RnnKnobs, PeepholesAreAThirdParameterThatZeroTurnsOff) {
  for (const char* backends : {"rnn_backend=reference", "rnn_backend=fast"}) {
    SCOPED_TRACE(backends);
    const std::string base = std::string("torch,") + backends;
    auto plain = make_layer(RnnCell::lstm, RnnSpec{6, true}, {5, 3}, Policy::parse(base));
    auto peep = make_layer(RnnCell::lstm, RnnSpec{6, true}, {5, 3}, Policy::parse(base + ",lstm_peepholes=lasagne"));
    ASSERT_EQ(peep->params().size(), plain->params().size() + 1);
    Param& wp = *peep->params().back();
    EXPECT_EQ(wp.name, "weight_peephole");
    EXPECT_EQ(wp.value.shape(), (Shape{3, 6}));
    double sq = 0;
    for (int64_t i = 0; i < wp.value.numel(); ++i) sq += wp.value.at(i) * wp.value.at(i);
    const double sd = std::sqrt(sq / 18.0);
    EXPECT_GT(sd, 0.04);  // 18 draws of N(0, 0.1^2): the sample deviation is 0.1 within a factor ~2
    EXPECT_LT(sd, 0.2);
    for (std::size_t i = 0; i < plain->params().size(); ++i)
      EXPECT_TRUE(all_close(peep->params()[i]->value, plain->params()[i]->value, 0, 0)) << i;
    EXPECT_NE(peep->describe().find("peepholes"), std::string::npos) << peep->describe();

    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    Tensor x = random_tensor({4, 5, 3}, DType::f32, 21, -1.0, 1.0);
    Tensor y_plain = plain->forward(ctx, x), y_peep = peep->forward(ctx, x);
    double diff = 0;
    for (int64_t i = 0; i < y_plain.numel(); ++i) diff = std::max(diff, std::abs(y_plain.at(i) - y_peep.at(i)));
    EXPECT_GT(diff, 1e-3) << "N(0, 0.01) peepholes left the output unchanged";
    for (int64_t i = 0; i < wp.value.numel(); ++i) wp.value.data<float>()[i] = 0.0f;
    EXPECT_TRUE(all_close(peep->forward(ctx, x), y_plain, 0, 0));
  }
  auto gru = make_layer(RnnCell::gru, RnnSpec{4, false}, {2, 3}, Policy::parse("torch,lstm_peepholes=lasagne"));
  EXPECT_EQ(gru->params().size(), 4u);
  EXPECT_FALSE(gru->op_params().peepholes);
}

TEST(RnnKnobs, OrthogonalRecurrentKernel) {
  for (RnnCell cell : {RnnCell::lstm, RnnCell::gru})
    for (const char* layout : {"gate_cols", "gate_rows"}) {
      // W_hh (G*u, u) canonical: orthonormal columns whichever layout it was drawn in (Keras's
      // (u, G*u) with orthonormal rows is its transpose).
      auto l = make_layer(cell, RnnSpec{6, false}, {2, 3},
                          Policy::parse(std::string("tensorflow,rnn_weight_layout=") + layout));
      const Tensor& w = l->params()[1]->value;
      const int64_t GH = w.dim(0), H = w.dim(1);
      for (int64_t a = 0; a < H; ++a)
        for (int64_t b = 0; b < H; ++b) {
          double s = 0;
          for (int64_t g = 0; g < GH; ++g) s += w.at(g * H + a) * w.at(g * H + b);
          // computed in double, stored in float32: each entry off by ~1e-7 relative
          EXPECT_NEAR(s, a == b ? 1.0 : 0.0, 1e-5) << layout << " " << a << "," << b;
        }
    }
}

TEST(RnnKnobs, WeightLayoutDecidesWhereTheDrawsLand) {
  // Same seed, same initialisers: the stream fills the framework tensor in order, so the
  // exported tensors hold identical bytes while the canonical weights differ (transposed).
  auto rows = make_layer(RnnCell::lstm, RnnSpec{3, false}, {2, 2}, Policy::parse("torch"), 9);
  auto cols = make_layer(RnnCell::lstm, RnnSpec{3, false}, {2, 2}, Policy::parse("torch,rnn_weight_layout=gate_cols"), 9);
  Tensor er = rows->export_param(*rows->params()[0]), ec = cols->export_param(*cols->params()[0]);
  EXPECT_EQ(er.shape(), (Shape{12, 2}));
  EXPECT_EQ(ec.shape(), (Shape{2, 12}));
  EXPECT_TRUE(bitwise_equal(er.reshape({24}), ec.reshape({24})));
  EXPECT_FALSE(all_close(rows->params()[0]->value, cols->params()[0]->value, 0, 0));
  // export/import round trip
  for (auto* l : {rows.get(), cols.get()})
    for (Param* p : l->params()) EXPECT_TRUE(bitwise_equal(l->import_param(*p, l->export_param(*p)), p->value));
}

TEST(RnnKnobs, GruGateOrderInExportsAndKerasLayout) {
  // torch rows r,z,n filled with 1,2,3: Keras columns are z,r,h = 2,1,3.
  auto l = make_layer(RnnCell::gru, RnnSpec{2, false}, {1, 1}, Policy::torch());
  TorchRnnWeights w;
  w.weight_ih = Tensor::from<float>({6, 1}, {1, 1, 2, 2, 3, 3});
  w.weight_hh = Tensor::from<float>({6, 2}, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  w.bias_ih = Tensor::from<float>({6}, {1, 1, 2, 2, 3, 3});
  w.bias_hh = Tensor::from<float>({6}, {1, 1, 2, 2, 3, 3});
  l->set_torch_weights(w);
  KerasRnnWeights k = l->keras_weights();
  EXPECT_TRUE(bitwise_equal(k.kernel, Tensor::from<float>({1, 6}, {2, 2, 1, 1, 3, 3})));
  EXPECT_EQ(k.recurrent_kernel.shape(), (Shape{2, 6}));
  EXPECT_EQ(k.recurrent_kernel.at(0), 2.0);
  EXPECT_EQ(k.recurrent_kernel.at(2), 1.0);
  EXPECT_TRUE(bitwise_equal(k.bias, Tensor::from<float>({2, 6}, {2, 2, 1, 1, 3, 3, 2, 2, 1, 1, 3, 3})));
  // The same layer's export under the torch knobs keeps r,z,n; a zrh twin exports z,r,h.
  auto z = make_layer(RnnCell::gru, RnnSpec{2, false}, {1, 1}, Policy::parse("torch,gru_gate_order=zrh"));
  z->set_torch_weights(w);
  EXPECT_TRUE(bitwise_equal(l->export_param(*l->params()[0]), w.weight_ih));
  EXPECT_TRUE(bitwise_equal(z->export_param(*z->params()[0]), Tensor::from<float>({6, 1}, {2, 2, 1, 1, 3, 3})));
  // and back through the Keras setter
  auto back = make_layer(RnnCell::gru, RnnSpec{2, false}, {1, 1}, Policy::torch());
  back->set_keras_weights(k);
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_TRUE(bitwise_equal(back->params()[i]->value, l->params()[i]->value)) << i;
}

TEST(RnnLayers, TorchWeightsIntoTheTensorflowPresetComputeTheSameLstm) {
  // The conversion users get wrong (keras#8720): a torch LSTM state loaded into a one-bias,
  // column-layout layer. With the activation made equal, outputs must agree.
  Policy tp = f64_policy("torch");
  Policy kp = f64_policy("tensorflow,rnn_recurrent_activation=sigmoid");
  auto src = make_layer(RnnCell::lstm, RnnSpec{5, true}, {4, 3}, tp, 1);
  auto dst = make_layer(RnnCell::lstm, RnnSpec{5, true}, {4, 3}, kp, 2);
  dst->set_torch_weights(src->torch_weights());
  // and through the Keras layout: what a Keras user would load
  auto viak = make_layer(RnnCell::lstm, RnnSpec{5, true}, {4, 3}, kp, 3);
  viak->set_keras_weights(dst->keras_weights());
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  Tensor x = random_tensor({2, 4, 3}, DType::f64, 4);
  Tensor ys = src->forward(ctx, x);
  // b_ih + b_hh folded into one bias changes the rounding of one addition: 1e-15.
  EXPECT_TRUE(all_close(dst->forward(ctx, x), ys, 1e-15, 1e-14));
  EXPECT_TRUE(all_close(viak->forward(ctx, x), ys, 1e-15, 1e-14));
}

TEST(RnnLayers, ShapesAndErrorsNameTheLayer) {
  auto l = make_layer(RnnCell::gru, RnnSpec{7, false}, {5, 3}, Policy::torch());
  EXPECT_EQ(l->output_shape(), (Shape{7}));
  auto s = make_layer(RnnCell::lstm, RnnSpec{7, true}, {5, 3}, Policy::torch());
  EXPECT_EQ(s->output_shape(), (Shape{5, 7}));
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  try {
    l->forward(ctx, Tensor({2, 5, 4}, DType::f32));
    FAIL() << "wrong feature count accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gru"), std::string::npos) << e.what();
  }
  try {
    Rng rng(RngEngine::mt19937_u24, 1);
    LstmLayer bad(RnnSpec{4, false}, {1, 28, 28}, Policy::torch(), rng);
    FAIL() << "3-D per-sample input accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lstm: input must be (steps, features)"), std::string::npos) << e.what();
  }
  TorchRnnWeights w = l->torch_weights();
  w.weight_hh = Tensor({21, 6}, DType::f32);
  EXPECT_THROW(l->set_torch_weights(w), Error);
}


// ---------- padding (rnn_mask) ----------

// embedding (V=6, D=3) -> LSTM/GRU (5 units), token ids (N, T); the embedding publishes the
// padding mask (id 0), the recurrent layer applies the Policy's rnn_mask.
std::unique_ptr<Sequential> token_net(RnnCell cell, const Policy& p, int64_t steps, bool sequences, uint64_t seed = 7) {
  auto net = std::make_unique<Sequential>(Shape{steps});
  Rng rng(p.rng_engine, seed);
  net->add(std::make_unique<EmbeddingLayer>(EmbeddingArgs{6, 3, std::nullopt}, Shape{steps}, p, rng));
  RnnSpec spec;
  spec.units = 5;
  spec.return_sequences = sequences;
  if (cell == RnnCell::lstm)
    net->add(std::make_unique<LstmLayer>(spec, net->current_shape(), p, rng));
  else
    net->add(std::make_unique<GruLayer>(spec, net->current_shape(), p, rng));
  return net;
}

Tensor ids(Shape shape, std::vector<double> v) {
  Tensor t(shape, DType::f64);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<double>()[i] = v[i];
  return t;
}

const GradCase kMaskGradCases[] = {
    {"lstm_torch_carry_last", RnnCell::lstm, "torch,rnn_mask=carry", false},
    {"lstm_tensorflow_zero_sequences", RnnCell::lstm, "tensorflow,rnn_mask=zero", true},
    {"lstm_torch_carry_sequences", RnnCell::lstm, "torch,rnn_mask=carry", true},
    {"gru_torch_carry_sequences", RnnCell::gru, "torch,rnn_mask=carry", true},
    {"gru_tensorflow_carry_last", RnnCell::gru, "tensorflow,rnn_mask=carry", false},
    {"gru_tensorflow_zero_sequences", RnnCell::gru, "tensorflow,rnn_mask=zero", true},
    {"gru_lasagne_carry_last", RnnCell::gru, "torch,rnn_num_bias=1,gru_update_convention=z_takes_new,rnn_mask=carry",
     false},
    {"lstm_peepholes_carry_sequences", RnnCell::lstm, "torch,lstm_peepholes=lasagne,rnn_mask=carry", true},
};

class RnnMaskGradcheck : public ::testing::TestWithParam<int> {};

// Rows: pre-padding, post-padding, all padding, a gap in the middle (ids 1..5 are data).
TEST_P(RnnMaskGradcheck, MatchesCentralDifferencesWithPadding) {
  const GradCase& c = kMaskGradCases[GetParam()];
  Policy p = f64_policy(c.policy);
  p.rnn_bias_init = RnnBiasInit::uniform_inv_sqrt_hidden;  // every bias path live
  auto net = token_net(c.cell, p, 5, c.return_sequences);
  Tensor x = ids({4, 5}, {0, 0, 3, 1, 5,  //
                          2, 4, 5, 0, 0,  //
                          0, 0, 0, 0, 0,  //
                          5, 0, 2, 3, 1});
  // As RnnGradcheck: h=1e-6 in float64 gives errors near 1e-10; 1e-7 hides no wrong term.
  // Token ids are not differentiable (x_stride 0); the table's row 0 must get exactly 0.
  gradcheck_sequential(*net, x, 1e-7, 0, 1);
  for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(net->named_params()[0].second->grad.at(k), 0.0) << "row 0, column " << k;
}

INSTANTIATE_TEST_SUITE_P(Cells, RnnMaskGradcheck, ::testing::Range(0, static_cast<int>(std::size(kMaskGradCases))),
                         [](const auto& info) { return std::string(kMaskGradCases[info.param].name); });

// rnn_mask on one review "3 1 5" padded to 6 steps: carry gives exactly the unpadded network's
// output with pre-padding (the state stays 0 until the first word) and with post-padding (the
// state after the last word is carried to the end); none computes the padding like data.
TEST(RnnKnobs, MaskCarryGivesTheUnpaddedResultNoneDoesNot) {
  for (RnnCell cell : {RnnCell::lstm, RnnCell::gru})
    for (const char* preset : {"tensorflow", "torch"}) {
      SCOPED_TRACE(std::string(rnn_cell_name(cell)) + " " + preset);
      // Reference kernels: each row's dot products are the same sums whatever N*T is, so
      // "exactly" is exact; the fast kernel's GEMM may block a 6-step batch differently.
      const std::string base = std::string(preset) + ",rnn_backend=reference";
      ExecContext exec;
      RunContext ctx = RunContext::inference(exec);
      auto unpadded = token_net(cell, f64_policy(base), 3, false);
      const Tensor want = unpadded->forward(ctx, ids({1, 3}, {3, 1, 5}));
      for (const char* mode : {"none", "carry", "zero"}) {
        auto net = token_net(cell, f64_policy(base + ",rnn_mask=" + mode), 6, false);  // same draws: same weights
        const Tensor pre = net->forward(ctx, ids({1, 6}, {0, 0, 0, 3, 1, 5}));
        const Tensor post = net->forward(ctx, ids({1, 6}, {3, 1, 5, 0, 0, 0}));
        if (std::string(mode) == "none") {
          // Three extra steps of the row-0 embedding move the state by O(0.01-0.1); 1e-4 is far
          // below that and far above rounding.
          EXPECT_FALSE(all_close(pre, want, 1e-4, 0)) << "none, pre-padding";
          EXPECT_FALSE(all_close(post, want, 1e-4, 0)) << "none, post-padding";
        } else {
          EXPECT_TRUE(all_close(pre, want, 0, 0)) << mode << ", pre-padding";
          EXPECT_TRUE(all_close(post, want, 0, 0)) << mode << ", post-padding";
        }
      }
    }
}

// carry vs zero with return_sequences: the padded steps' outputs are the carried state or 0;
// the real steps agree bit for bit; the mask passes on to a next layer (Keras compute_mask)
// and a last-step layer consumes it.
TEST(RnnKnobs, MaskZeroWritesZerosAtPaddedStepsCarryRepeatsTheState) {
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  auto carry = token_net(RnnCell::lstm, f64_policy("torch,rnn_mask=carry"), 4, true);
  auto zero = token_net(RnnCell::lstm, f64_policy("torch,rnn_mask=zero"), 4, true);
  const Tensor x = ids({1, 4}, {2, 0, 4, 0});
  const Tensor yc = carry->forward(ctx, x);
  EXPECT_TRUE(ctx.step_mask.defined()) << "a return_sequences layer passes the mask on";
  const Tensor yz = zero->forward(ctx, x);
  for (int64_t j = 0; j < 5; ++j) {
    EXPECT_EQ(yc.at(5 + j), yc.at(j)) << "carry: step 1 repeats step 0";
    EXPECT_EQ(yc.at(15 + j), yc.at(10 + j)) << "carry: step 3 repeats step 2";
    EXPECT_NE(yc.at(j), 0.0);
    EXPECT_EQ(yz.at(5 + j), 0.0) << "zero: padded step 1";
    EXPECT_EQ(yz.at(15 + j), 0.0) << "zero: padded step 3";
    EXPECT_EQ(yz.at(j), yc.at(j));
    EXPECT_EQ(yz.at(10 + j), yc.at(10 + j));
  }
  auto last = token_net(RnnCell::gru, f64_policy("torch,rnn_mask=zero"), 4, false);
  const Tensor yl = last->forward(ctx, x);
  EXPECT_FALSE(ctx.step_mask.defined()) << "a last-step layer consumes the mask";
  auto last_carry = token_net(RnnCell::gru, f64_policy("torch,rnn_mask=carry"), 4, false);
  EXPECT_TRUE(all_close(yl, last_carry->forward(ctx, x), 0, 0)) << "last step = final state under zero and carry";
}

// The fast float32 kernel under each preset (Eigen / oneDNN GEMM) against the float64
// reference on a padded batch, through the layer (mask from the embedding).
TEST(RnnLayers, MaskedFastKernelMatchesTheReference) {
  for (RnnCell cell : {RnnCell::lstm, RnnCell::gru})
    for (const char* preset : {"tensorflow", "torch"})
      for (const char* mode : {"carry", "zero"}) {
        SCOPED_TRACE(std::string(rnn_cell_name(cell)) + " " + preset + " " + mode);
        const std::string spec = std::string(preset) + ",rnn_mask=" + mode;
        ExecContext exec;
        Policy fast = Policy::parse(spec);
        auto nf = token_net(cell, fast, 5, true);
        auto nr = token_net(cell, f64_policy(spec), 5, true);
        auto pf = nf->named_params(), pr = nr->named_params();
        for (std::size_t i = 0; i < pf.size(); ++i) pf[i].second->value = pr[i].second->value.to(DType::f32);
        Tensor x = ids({3, 5}, {0, 0, 3, 1, 5, 2, 4, 5, 0, 0, 0, 0, 0, 0, 0});
        RunContext cf = RunContext::training(exec, nullptr), cr = RunContext::training(exec, nullptr);
        const Tensor yf = nf->forward(cf, x.to(DType::f32));
        const Tensor yr = nr->forward(cr, x);
        // float32 vs float64 over 5 steps of O(1) values: a few float32 ulps; 1e-5 absolute.
        EXPECT_TRUE(all_close(yf, yr, 1e-5, 0)) << "outputs";
        Tensor dy = random_tensor(yr.shape(), DType::f64, 3);
        nf->zero_grad();
        nr->zero_grad();
        nf->backward(cf, dy.to(DType::f32));
        nr->backward(cr, dy);
        for (std::size_t i = 0; i < pf.size(); ++i)
          // sums over up to 15 (sample, step) rows of O(1) terms in float32: 1e-5 absolute.
          EXPECT_TRUE(all_close(pf[i].second->grad, pr[i].second->grad, 1e-5, 0)) << pf[i].first;
      }
}

}  // namespace
}  // namespace driftlab
