// Recurrent layers of the `tensorflow` preset against TensorFlow.js 4.22 tf.layers.lstm /
// tf.layers.gru (the Keras-2.2 cells: LSTM gates i,f,c,o, GRU z,r,h with the reset gate applied
// before the recurrent matmul, one bias), with recurrentActivation hardSigmoid (TF.js's default,
// Keras 2.2.4's clip(0.2x+0.5)) and sigmoid; and negative tests of the knobs where PyTorch differs.
//
//   TfjsRnnOracle.*    outputs, dX, dkernel, drecurrent_kernel, dbias (Keras layout) of LSTM and
//                      GRU, last step and whole sequence, default and reference kernels; 20
//                      tf.train.momentum steps of an [embedding ->] RNN -> dense softmax classifier
//   TfjsRnnNegative.*  Keras GRU weights read in PyTorch's order without conversion, a reset-after
//                      GRU (which TF.js cannot even build: its GRUCell throws for resetAfter=true),
//                      sigmoid vs hard sigmoid and the hard sigmoid's kind: each error shown,
//                      and converting / flipping the knob back restores the match
//
// How it runs: each group writes its cases (weights in Keras layout, inputs, one-hot labels as
// .npy; cases.json) into one folder and runs `node tests/oracles/tfjs/rnn_oracle.js DIR` once (the
// harness of tests/oracles/oracle_util.h). Without node or tfjs the tests SKIP saying so.
// Comparison: err = max|a - r| / max|r| per tensor; every test prints its table (docs/ORACLE_RUN.md).
//
// To add a case: 1) a row in the group's case table; 2) a kind in rnn_oracle.js if none fits;
// 3) a comparison at a commented tolerance.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/layers/dense_layer.h"
#include "engine/layers/embedding_layer.h"
#include "engine/layers/rnn_layer.h"
#include "engine/model.h"
#include "engine/policy.h"
#include "engine/random.h"
#include "engine/train/cpu_runner.h"
#include "tests/oracles/rnn_oracle_util.h"
#include "tests/oracles/tfjs_optim_cases.h"

namespace driftlab {
namespace {

using namespace rnn_oracle;

// float32 both sides; TF.js's CPU backend accumulates matMul in its own order. As for PyTorch
// (test_rnn_oracle_torch.cpp): a few ulps times sqrt(terms * steps) ~ 1e-6 at 28 steps; 1e-5 is
// the float32 tolerance of every oracle test, and each formula difference below errs by > 1e-2.
constexpr double kTol = 1e-5;
// 20 momentum steps: per-step differences ~1e-7 relative grow about tenfold through the updates
// (as in the LeNet oracle): 1e-4 of the largest weight.
constexpr double kTrainTol = 1e-4;
// A negative test must show a difference no rounding explains: more than 100x kTol.
constexpr double kVisible = 1e-3;

oracle::Oracle rnn_script() { return oracle::tfjs_oracle("rnn_oracle.js"); }

Tensor out(const CaseDir& d, const std::string& name, const std::string& key) { return d.out(name, key); }

std::unique_ptr<RnnLayer> make_rnn(RnnCell cell, int64_t units, bool seq, int64_t steps, int64_t features,
                                   const Policy& p) {
  Rng rng(p.rng_engine, 1);  // the weights are overwritten
  return std::make_unique<RnnLayer>(cell, RnnSpec{units, seq}, Shape{steps, features}, p, rng);
}

const char* tfjs_activation(RnnGateAct a) { return a == RnnGateAct::hard_sigmoid ? "hardSigmoid" : "sigmoid"; }

// ---------------------------------------------------------------------------------------------
// Group 1: one layer, explicit weights

struct GradCase {
  const char* name;
  RnnCell cell;
  RnnGateAct act;
  bool seq;
  int64_t n, t, f, h;
  double wscale;  // weights U(-wscale, wscale)
};
const GradCase kGradCases[] = {
    {"lstm_hard_last", RnnCell::lstm, RnnGateAct::hard_sigmoid, false, 3, 7, 5, 6, 0.5},
    {"lstm_hard_seq", RnnCell::lstm, RnnGateAct::hard_sigmoid, true, 3, 7, 5, 6, 0.5},
    {"lstm_sigmoid_seq", RnnCell::lstm, RnnGateAct::sigmoid, true, 3, 7, 5, 6, 0.5},
    {"gru_hard_last", RnnCell::gru, RnnGateAct::hard_sigmoid, false, 3, 7, 5, 6, 0.5},
    {"gru_hard_seq", RnnCell::gru, RnnGateAct::hard_sigmoid, true, 3, 7, 5, 6, 0.5},
    {"gru_sigmoid_seq", RnnCell::gru, RnnGateAct::sigmoid, true, 3, 7, 5, 6, 0.5},
    // weights U(-1.5, 1.5): 12% (LSTM) and 18% (GRU) of the gate pre-activations lie beyond the
    // hard sigmoid's +-2.5 (clipped, zero gradient), the rest on its slope; at 0.5 none do.
    {"lstm_hard_seq_saturated", RnnCell::lstm, RnnGateAct::hard_sigmoid, true, 3, 7, 5, 6, 1.5},
    {"gru_hard_seq_saturated", RnnCell::gru, RnnGateAct::hard_sigmoid, true, 3, 7, 5, 6, 1.5},
    {"lstm_hard_seq_28x28", RnnCell::lstm, RnnGateAct::hard_sigmoid, true, 4, 28, 28, 32, 0.2},
    {"gru_hard_seq_28x28", RnnCell::gru, RnnGateAct::hard_sigmoid, true, 4, 28, 28, 32, 0.2},
};

void fill_grad(CaseDir& d) {
  uint64_t seed = 8000;
  for (const GradCase& c : kGradCases) {
    const std::string n = c.name;
    const int64_t gh = rnn_gates(c.cell) * c.h;
    const Shape ys = c.seq ? Shape{c.n, c.t, c.h} : Shape{c.n, c.h};
    d.add_case({{"name", n},
                {"kind", "rnn_grad"},
                {"cell", rnn_cell_name(c.cell)},
                {"units", c.h},
                {"recurrentActivation", tfjs_activation(c.act)},
                {"returnSequences", c.seq},
                {"x", d.input(n + ".x", random_tensor({c.n, c.t, c.f}, DType::f32, ++seed))},
                {"kernel", d.input(n + ".kernel", random_tensor({c.f, gh}, DType::f32, ++seed, -c.wscale, c.wscale))},
                {"recurrentKernel",
                 d.input(n + ".recurrent_kernel", random_tensor({c.h, gh}, DType::f32, ++seed, -c.wscale, c.wscale))},
                {"bias", d.input(n + ".bias", random_tensor({gh}, DType::f32, ++seed, -c.wscale, c.wscale))},
                {"r", d.input(n + ".r", random_tensor(ys, DType::f32, ++seed))}});
  }
}
const CaseDir& grad_run() {
  static const CaseDir d(rnn_script(), "tfjs_rnn_grad", fill_grad);
  return d;
}

KerasRnnWeights keras_weights_of(const CaseDir& d, const std::string& name) {
  return {d.in(name + ".kernel"), d.in(name + ".recurrent_kernel"), d.in(name + ".bias")};
}

Policy tf_policy(RnnGateAct act, const std::string& extra = "") {
  Policy p = Policy::parse(std::string("tensorflow,rnn_recurrent_activation=") +
                           (act == RnnGateAct::hard_sigmoid ? "hard_sigmoid" : "sigmoid") + extra);
  return p;
}

LayerRun run_case(const CaseDir& d, const GradCase& c, RnnLayer& layer) {
  return run_layer(layer, d.in(std::string(c.name) + ".x"), d.in(std::string(c.name) + ".r"));
}

TEST(TfjsRnnOracle, LstmAndGruOutputsAndEveryGradient) {
  ORACLE_GROUP(d, grad_run);
  ErrorTable table("LSTM / GRU, tensorflow preset, vs TF.js 4.22 tf.layers.lstm / gru with the same weights", "tfjs");
  const char* const keys[] = {"dkernel", "drecurrent_kernel", "dbias"};
  for (const GradCase& c : kGradCases)
    for (const bool reference : {false, true}) {
      Policy p = tf_policy(c.act);
      if (reference) use_reference_kernels(p);
      auto layer = make_rnn(c.cell, c.h, c.seq, c.t, c.f, p);
      layer->set_keras_weights(keras_weights_of(d, c.name));
      const LayerRun res = run_case(d, c, *layer);
      const std::string what = std::string(c.name) + (reference ? " ref" : "");
      EXPECT_TRUE(table.check(what, "output", res.y, out(d, c.name, "y"), kTol));
      EXPECT_TRUE(table.check(what, "dX", res.dx, out(d, c.name, "dx"), kTol));
      const std::vector<Param*> ps = layer->params();
      ASSERT_EQ(ps.size(), 3u);  // Keras's one bias
      for (std::size_t k = 0; k < ps.size(); ++k)
        EXPECT_TRUE(table.check(what, keys[k], exported_grad(*layer, *ps[k], res.grads[k]), out(d, c.name, keys[k]),
                                kTol));
    }
  table.print();
}

// ---------------------------------------------------------------------------------------------
// Negative tests on the same TF.js results

const GradCase& grad_case(const std::string& name) {
  for (const GradCase& c : kGradCases)
    if (name == c.name) return c;
  throw Error("no grad case " + name);
}

// Keras's GRU weights (z,r,h columns) given to the PyTorch-layout setter after only a
// transposition: z and r trade places. The LSTM's orders agree. Swapping the blocks restores it.
TEST(TfjsRnnNegative, GateOrderKerasWeightsReadWithoutConversion) {
  ORACLE_GROUP(d, grad_run);
  ErrorTable table("gate order: Keras weights read in PyTorch's order (layer: tensorflow preset)", "tfjs");
  for (const char* name : {"gru_hard_seq", "lstm_hard_seq"}) {
    const GradCase& c = grad_case(name);
    const KerasRnnWeights w = keras_weights_of(d, name);
    const Tensor ref = out(d, name, "y");
    const int64_t g = rnn_gates(c.cell);
    auto y_with = [&](const TorchRnnWeights& tw) {
      auto layer = make_rnn(c.cell, c.h, c.seq, c.t, c.f, tf_policy(c.act));
      layer->set_torch_weights(tw);
      return run_case(d, c, *layer).y;
    };
    const Tensor naive = y_with({transpose2d(w.kernel), transpose2d(w.recurrent_kernel), w.bias, Tensor()});
    auto conv = [&](const Tensor& t) { return c.cell == RnnCell::gru ? swap_gate_blocks01(t, g, true) : t; };
    const Tensor converted =
        y_with({conv(transpose2d(w.kernel)), conv(transpose2d(w.recurrent_kernel)), conv(w.bias), Tensor()});
    if (c.cell == RnnCell::gru)
      EXPECT_GT(table.note(name, "transposed only (z,r read as r,z)", naive, ref), kVisible);
    else
      EXPECT_TRUE(table.check(name, "transposed only (orders agree)", naive, ref, kTol));
    EXPECT_TRUE(table.check(name, c.cell == RnnCell::gru ? "converted (z/r blocks swapped)" : "converted", converted, ref, kTol));
  }
  // Through the knob that says how weight files are read (RnnLayer::import_param): Keras files
  // read with gru_gate_order=rzn (PyTorch's) vs the tensorflow preset's zrh.
  const GradCase& c = grad_case("gru_hard_seq");
  const KerasRnnWeights w = keras_weights_of(d, c.name);
  for (const char* order : {"rzn", "zrh"}) {
    auto layer = make_rnn(c.cell, c.h, c.seq, c.t, c.f, tf_policy(c.act, std::string(",gru_gate_order=") + order));
    const std::vector<Param*> ps = layer->params();
    ps[0]->value = layer->import_param(*ps[0], w.kernel);
    ps[1]->value = layer->import_param(*ps[1], w.recurrent_kernel);
    ps[2]->value = layer->import_param(*ps[2], w.bias);
    const Tensor y = run_case(d, c, *layer).y;
    const std::string qty = std::string("import_param, gru_gate_order=") + order;
    if (std::string(order) == "rzn")
      EXPECT_GT(table.note(c.name, qty, y, out(d, c.name, "y")), kVisible);
    else
      EXPECT_TRUE(table.check(c.name, qty, y, out(d, c.name, "y"), kTol));
  }
  table.print();
}

// Knobs on top of the tensorflow preset that PyTorch (or Keras 3) would set, against TF.js:
// each changes the output visibly; the preset's value (or the matching activation) restores it.
TEST(TfjsRnnNegative, ResetAfterAndGateActivation) {
  ORACLE_GROUP(d, grad_run);
  ErrorTable table("GRU reset placement and the gate activation vs TF.js (same weights)", "tfjs");
  struct Flip {
    const char* case_name;
    const char* knob;  // set on top of the case's tensorflow policy
    const char* value;
    const char* what;
  };
  const Flip flips[] = {
      // TF.js has only reset-before; reset-after with Keras's one bias is Lasagne's form (no b_hn).
      {"gru_hard_seq", "gru_reset_after", "after", "gru_reset_after=after (torch, TF2)"},
      {"gru_hard_seq_28x28", "gru_reset_after", "after", "gru_reset_after=after (torch, TF2)"},
      {"gru_sigmoid_seq", "gru_reset_after", "after", "gru_reset_after=after (torch, TF2)"},
      {"lstm_hard_seq", "rnn_recurrent_activation", "sigmoid", "sigmoid gates (torch, Keras >= 2.3)"},
      {"lstm_sigmoid_seq", "rnn_recurrent_activation", "hard_sigmoid", "hard sigmoid gates (Keras 2.2.4)"},
      {"gru_hard_seq", "hard_sigmoid_kind", "relu6_div6", "hard_sigmoid_kind=relu6_div6 (Keras 3)"},
  };
  for (const Flip& f : flips) {
    const GradCase& c = grad_case(f.case_name);
    const Tensor ref = out(d, c.name, "y");
    for (const bool flipped : {false, true}) {
      Policy p = tf_policy(c.act);
      if (!flipped) p.set(f.knob, f.value);
      auto layer = make_rnn(c.cell, c.h, c.seq, c.t, c.f, p);
      layer->set_keras_weights(keras_weights_of(d, c.name));
      const LayerRun res = run_case(d, c, *layer);
      if (!flipped) {
        EXPECT_GT(table.note(c.name, f.what, res.y, ref), kVisible) << f.knob << "=" << f.value;
        table.note(c.name, std::string(f.what) + ", dX", res.dx, out(d, c.name, "dx"));
      } else {
        EXPECT_TRUE(table.check(c.name, "flipped back", res.y, ref, kTol));
      }
    }
  }
  table.print();
}

// ---------------------------------------------------------------------------------------------
// Group 2: training

const TrainCase kTrainCases[] = {
    {"gru_embedding", RnnCell::gru, 20, 6, 6, 8, 4, 8},
    {"lstm_features", RnnCell::lstm, 0, 5, 7, 8, 3, 8},
    {"gru_mask_zero_pre_padding", RnnCell::gru, 20, 6, 6, 8, 4, 8, "pre"},
    {"lstm_mask_zero_post_padding", RnnCell::lstm, 20, 6, 6, 8, 4, 8, "post"},
};

Policy train_policy(const TrainCase& c) {
  Policy p = Policy::tensorflow();
  if (c.padding) p.rnn_mask = RnnMask::carry;  // Keras/TF.js mask_zero=True
  return p;
}

// Token ids with the case's padding (see TrainCase::padding).
Tensor padded_ids(const TrainCase& c, uint64_t seed) {
  Tensor x = random_ids({c.batch, c.steps}, c.num_ids, seed);
  if (!c.padding) return x;
  const bool pre = std::string(c.padding) == "pre";
  for (int64_t i = 0; i < c.batch; ++i) {
    const int64_t pad = (3 * i) % (c.steps + 1);
    for (int64_t k = 0; k < pad; ++k) x.data<float>()[i * c.steps + (pre ? k : c.steps - 1 - k)] = 0.0f;
  }
  return x;
}
constexpr uint64_t kTrainSeed = 78;

// Every layer's weights in TF.js's getWeights() order and layout: embedding table (V,D); RNN
// kernel, recurrent_kernel, bias (RnnLayer::export_param under the tensorflow preset); dense
// kernel (in,out) = weight^T, bias.
std::vector<std::vector<Tensor>> tfjs_weights(Model& m) {
  std::vector<std::vector<Tensor>> w(m.net->size());
  for (std::size_t i = 0; i < m.net->size(); ++i) {
    Layer& l = m.net->layer(i);
    for (Param* p : l.params()) {
      if (auto* r = layer_as<RnnLayer>(l))
        w[i].push_back(r->export_param(*p));
      else if (l.kind() == "dense" && !p->is_bias)
        w[i].push_back(transpose2d(p->value));
      else
        w[i].push_back(p->value.clone());
    }
  }
  return w;
}

void fill_train(CaseDir& d) {
  uint64_t seed = 9200;
  for (const TrainCase& c : kTrainCases) {
    const std::string n = c.name;
    Model m = make_classifier(c, train_policy(c), kTrainSeed);  // driftlab's tensorflow-preset initial weights
    const auto w = tfjs_weights(m);
    json batches = json::array();
    for (int k = 0; k < kSteps; ++k) {
      const std::string b = n + ".b" + std::to_string(k);
      const Tensor x = c.num_ids > 0 ? padded_ids(c, ++seed)
                                     : random_tensor({c.batch, c.steps, c.features}, DType::f32, ++seed);
      batches.push_back({{"x", d.input(b + ".x", x)},
                         {"labels", d.input(b + ".labels", one_hot(random_labels(c.batch, c.classes, ++seed), c.classes))}});
    }
    const std::size_t r = c.num_ids > 0 ? 1 : 0;  // index of the RNN layer
    json cj = {{"name", n},
               {"kind", "rnn_train"},
               {"cell", rnn_cell_name(c.cell)},
               {"units", c.units},
               {"recurrentActivation", "hardSigmoid"},
               {"kernel", d.input(n + ".kernel", w[r][0])},
               {"recurrentKernel", d.input(n + ".recurrent_kernel", w[r][1])},
               {"bias", d.input(n + ".bias", w[r][2])},
               {"dense", {{"kernel", d.input(n + ".dense_kernel", w[r + 1][0])},
                          {"bias", d.input(n + ".dense_bias", w[r + 1][1])}}},
               {"batches", batches},
               {"lr", kLr},
               {"momentum", kMomentum}};
    cj["embedding"] = c.num_ids > 0 ? json{{"inputDim", c.num_ids},
                                           {"outputDim", c.features},
                                           {"maskZero", c.padding != nullptr},
                                           {"table", d.input(n + ".table", w[0][0])}}
                                    : json(nullptr);
    d.add_case(cj);
    // The LSTM classifiers also with tf.train.adam (+ step schedule) and tf.train.rmsprop (momentum),
    // the same weights and batches (tests/oracles/tfjs_optim_cases.h).
    if (c.cell != RnnCell::lstm) continue;
    for (const int oi : {kTfjsAdamStep, kTfjsRmspropMomentum}) {
      json oj = cj;
      oj["name"] = n + "_" + kTfjsOptimCases[oi].name;
      const json fields = tfjs_optimizer_json(kTfjsOptimCases[oi], kSteps);  // items() needs it alive
      for (auto& [k, v] : fields.items()) oj[k] = v;
      d.add_case(oj);
    }
  }
}
const CaseDir& train_run() {
  static const CaseDir d(rnn_script(), "tfjs_rnn_train", fill_train);
  return d;
}

TrainConfig momentum_config(const TrainCase& c) {
  TrainConfig cfg;
  cfg.batch = c.batch;
  cfg.optim.lr = kLr;
  cfg.optim.momentum = kMomentum;
  return cfg;
}

// kSteps steps of m on the case's batches (momentum unless cfg says otherwise); each step's loss.
Tensor train_steps(const CaseDir& d, const TrainCase& c, Model& m, const TrainConfig& cfg) {
  ExecContext exec;
  CpuRunner trainer(m, cfg, exec);
  std::vector<double> losses;
  for (int k = 0; k < kSteps; ++k) {
    const std::string b = std::string(c.name) + ".b" + std::to_string(k);
    const Tensor y = d.in(b + ".labels");
    std::vector<int32_t> labels(static_cast<std::size_t>(y.dim(0)));
    for (int64_t i = 0; i < y.numel(); ++i)
      if (y.at(i) == 1.0) labels[static_cast<std::size_t>(i / c.classes)] = static_cast<int32_t>(i % c.classes);
    losses.push_back(trainer.train_step(d.in(b + ".x"), labels));
  }
  return Tensor::from<double>({kSteps}, losses);
}

// Every layer's weights of m against TF.js's after the case `name`'s 20 steps.
void check_weights(const CaseDir& d, const std::string& name, const std::string& qty, Model& m, ErrorTable& table,
                   double tol) {
  const auto w = tfjs_weights(m);
  const char* const names[][3] = {{"embeddings", "", ""}, {"kernel", "recurrent_kernel", "bias"}, {"kernel", "bias", ""}};
  for (std::size_t i = 0; i < w.size(); ++i) {
    const std::size_t kind = m.net->layer(i).kind() == "embedding" ? 0 : m.net->layer(i).kind() == "dense" ? 2 : 1;
    for (std::size_t j = 0; j < w[i].size(); ++j) {
      const std::string what = qty + m.net->layer(i).kind() + " " + names[kind][j];
      const Tensor ref = out(d, name, "w" + std::to_string(i) + "_" + std::to_string(j));
      if (tol >= 0) EXPECT_TRUE(table.check(name, what, w[i][j], ref, tol));
      else table.note(name, what, w[i][j], ref);
    }
  }
}

TEST(TfjsRnnOracle, TwentyMomentumStepsOfRnnClassifiers) {
  ORACLE_GROUP(d, train_run);
  ErrorTable table("[embedding ->] LSTM/GRU (hard sigmoid) -> dense softmax, 20 tf.train.momentum steps "
                   "(lr 0.1, momentum 0.9), tensorflow preset; *_mask_zero_*: padded ids, embedding maskZero "
                   "vs rnn_mask=carry",
                   "tfjs");
  for (const TrainCase& c : kTrainCases) {
    Model m = make_classifier(c, train_policy(c), kTrainSeed);
    const Tensor losses = train_steps(d, c, m, momentum_config(c));
    EXPECT_TRUE(table.check(c.name, "loss of each step", losses, out(d, c.name, "losses"), kTrainTol));
    if (c.padding) {  // negative: without the mask the padding is computed and the losses leave TF.js's
      Model none = make_classifier(c, Policy::tensorflow(), kTrainSeed);
      EXPECT_GT(table.note(c.name, "rnn_mask=none: loss of each step", train_steps(d, c, none, momentum_config(c)),
                           out(d, c.name, "losses")),
                kVisible);
    }
    check_weights(d, c.name, "after 20 steps: ", m, table, kTrainTol);
  }
  table.print();
}

// The LSTM classifiers (features, and embedding with mask_zero) trained 20 steps with
// tf.train.adam (+ step schedule) and tf.train.rmsprop (momentum 0.9): the tensorflow preset with
// the TF.js optimiser knobs (tests/oracles/tfjs_optim_cases.h) against TF.js, at the momentum
// runs' tolerance; the preset's own Keras 2.2.4 formulas shown beside (information).
TEST(TfjsRnnOracle, TwentyAdamAndRmspropStepsOfLstmClassifiers) {
  ORACLE_GROUP(d, train_run);
  ErrorTable table("[embedding ->] LSTM -> dense softmax, 20 steps of tf.train.adam (+ step schedule) / "
                   "tf.train.rmsprop (momentum 0.9), tensorflow preset + TF.js optimiser knobs",
                   "tfjs");
  for (const TrainCase& c : kTrainCases) {
    if (c.cell != RnnCell::lstm) continue;
    for (const int oi : {kTfjsAdamStep, kTfjsRmspropMomentum}) {
      const TfjsOptimCase& oc = kTfjsOptimCases[oi];
      const std::string name = std::string(c.name) + "_" + oc.name;
      for (const bool as_tfjs : {true, false}) {
        Model m = make_classifier(c, tfjs_optim_policy(oc, as_tfjs, train_policy(c)), kTrainSeed);
        const Tensor losses = train_steps(d, c, m, tfjs_optim_config(oc, c.batch));
        const std::string qty = as_tfjs ? "" : "Keras 2.2.4 formula: ";
        if (as_tfjs) EXPECT_TRUE(table.check(name, "loss of each step", losses, out(d, name, "losses"), kTrainTol));
        else table.note(name, qty + "loss of each step", losses, out(d, name, "losses"));
        check_weights(d, name, qty + "after 20 steps: ", m, table, as_tfjs ? kTrainTol : -1.0);
      }
    }
  }
  table.print();
}

}  // namespace
}  // namespace driftlab
