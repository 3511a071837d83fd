// Recurrent layers of the `torch` preset against PyTorch 1.13 nn.LSTM / nn.GRU, negative tests of
// the knobs that differ from Keras, and the import of a PyTorch RNN state into the tensorflow
// preset (the conversion where users lose accuracy, keras-team/keras#8720 and #15915).
//
//   TorchRnnOracle.*    outputs, dX and every weight gradient (weight_ih_l0, weight_hh_l0,
//                       bias_ih_l0, bias_hh_l0) of LSTM and GRU, last step and whole sequence, in
//                       float32 (default and reference kernels) and float64; 20 SGD steps of an
//                       [embedding ->] RNN -> dense classifier; nn.Embedding's initialisation
//   TorchRnnNegative.*  what a gate-order mismatch (PyTorch weights read as Keras's order
//                       without conversion), a reset_after mismatch and the hard sigmoid do to
//                       the outputs, and that converting / flipping the knob restores the match
//   TorchRnnImport.*    a PyTorch LSTM/GRU state (torch.manual_seed(S); nn.LSTM(...)), written as
//                       .npy by rnn_oracle.py, imported into the tensorflow preset: the gates
//                       land in Keras's order and the outputs match PyTorch's
//
// Each group writes its cases into one folder and runs tests/oracles/torch/rnn_oracle.py once
// (the harness of tests/oracles/oracle_util.h). Comparison: err = max|a - r| / max|r| per tensor. Every test
// prints its table; docs/ORACLE_RUN.md records them.
//
// To add a case: 1) a row in the group's case table (or inputs + add_case in its fill function);
// 2) a kind in rnn_oracle.py if none fits; 3) a comparison at a commented tolerance.
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
#include "tests/oracles/optim_cases.h"
#include "tests/oracles/rnn_oracle_util.h"

namespace driftlab {
namespace {

using namespace rnn_oracle;

// float32: one step of a cell is a dot product of F+u terms per gate, then sigmoid/tanh; the
// recurrence carries each step's rounding into the next, damped by the gates (|dh_t/dh_{t-1}| < 1
// at these weight scales). Expected differences are a few ulps of the largest value times
// sqrt(terms * steps) ~ 1e-6 for the 28-step cases; 1e-5 (the other oracle tests' float32
// tolerance) leaves room, and every mismatch of a formula below errs by > 1e-2.
constexpr double kTol = 1e-5;
// float64 against PyTorch's float64: the same rounding argument at 2^-53 gives ~1e-14; 1e-11
// leaves 1000x, and it still catches any formula difference that float32's tolerance might hide.
constexpr double kTol64 = 1e-11;
// 20 SGD steps: the per-step float32 differences above (~1e-7 relative) grow through the updates
// about tenfold, as in the LeNet oracle (measured below): 1e-4 of the largest weight.
constexpr double kTrainTol = 1e-4;
// ... and in float64 the same growth from 1e-16 stays below 1e-13: 1e-10.
constexpr double kTrainTol64 = 1e-10;
// A negative test must show a difference no rounding explains: more than 100x kTol.
constexpr double kVisible = 1e-3;

oracle::Oracle rnn_script() { return oracle::torch_oracle("rnn_oracle.py"); }

// The PyTorch scripts' file names: inputs <case>.<key>, outputs out/<case>.<key>.
Tensor out(const CaseDir& d, const std::string& name, const std::string& key) { return d.out(name, key); }
Tensor in(const CaseDir& d, const std::string& name, const std::string& key) { return d.in(name, key); }

const char* const kTorchWeights[] = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"};

TorchRnnWeights torch_weights_of(const CaseDir& d, const std::string& name, bool outputs = false) {
  auto get = [&](const char* k) { return outputs ? out(d, name, k) : in(d, name, k); };
  return {get("weight_ih_l0"), get("weight_hh_l0"), get("bias_ih_l0"), get("bias_hh_l0")};
}

std::unique_ptr<RnnLayer> make_rnn(RnnCell cell, int64_t units, bool seq, int64_t steps, int64_t features,
                                   const Policy& p) {
  Rng rng(p.rng_engine, 1);  // the weights are overwritten
  return std::make_unique<RnnLayer>(cell, RnnSpec{units, seq}, Shape{steps, features}, p, rng);
}

// The torch preset on its own kernels, or (reference) every op on its reference kernel.
Policy torch_with(bool reference, bool f64) {
  Policy p = Policy::torch();
  if (reference) use_reference_kernels(p);
  if (f64) p.dtype = FloatType::float64;
  return p;
}

// ---------------------------------------------------------------------------------------------
// Group 1: one layer, explicit weights

struct GradCase {
  const char* name;
  RnnCell cell;
  bool seq;  // return_sequences
  int64_t n, t, f, h;
  double wscale;  // weights U(-wscale, wscale): gates neither linear nor saturated
};
const GradCase kGradCases[] = {
    {"lstm_last", RnnCell::lstm, false, 3, 7, 5, 6, 0.5},
    {"lstm_seq", RnnCell::lstm, true, 3, 7, 5, 6, 0.5},
    {"gru_last", RnnCell::gru, false, 3, 7, 5, 6, 0.5},
    {"gru_seq", RnnCell::gru, true, 3, 7, 5, 6, 0.5},
    // sequential-MNIST shaped: 28 steps of 28 features, 32 units.
    {"lstm_seq_28x28", RnnCell::lstm, true, 4, 28, 28, 32, 0.2},
    {"gru_seq_28x28", RnnCell::gru, true, 4, 28, 28, 32, 0.2},
};

void fill_grad(CaseDir& d) {
  uint64_t seed = 7000;
  for (const GradCase& c : kGradCases) {
    const int64_t gh = rnn_gates(c.cell) * c.h;
    d.input(std::string(c.name) + ".x", random_tensor({c.n, c.t, c.f}, DType::f32, ++seed));
    d.input(std::string(c.name) + ".weight_ih_l0", random_tensor({gh, c.f}, DType::f32, ++seed, -c.wscale, c.wscale));
    d.input(std::string(c.name) + ".weight_hh_l0", random_tensor({gh, c.h}, DType::f32, ++seed, -c.wscale, c.wscale));
    d.input(std::string(c.name) + ".bias_ih_l0", random_tensor({gh}, DType::f32, ++seed, -c.wscale, c.wscale));
    d.input(std::string(c.name) + ".bias_hh_l0", random_tensor({gh}, DType::f32, ++seed, -c.wscale, c.wscale));
    const Shape ys = c.seq ? Shape{c.n, c.t, c.h} : Shape{c.n, c.h};
    d.input(std::string(c.name) + ".r", random_tensor(ys, DType::f32, ++seed));
    d.add_case({{"name", c.name},
                {"kind", "rnn"},
                {"cell", rnn_cell_name(c.cell)},
                {"input_size", c.f},
                {"hidden", c.h},
                {"return_sequences", c.seq}});
  }
}
const CaseDir& grad_run() {
  static const CaseDir d(rnn_script(), "torch_rnn_grad", fill_grad);
  return d;
}

// Runs the case through `layer` (weights already set) and returns y (or the full result).
LayerRun run_case(const CaseDir& d, const GradCase& c, RnnLayer& layer, DType dt) {
  return run_layer(layer, in(d, c.name, "x").to(dt), in(d, c.name, "r").to(dt));
}

TEST(TorchRnnOracle, LstmAndGruOutputsAndEveryGradient) {
  ORACLE_GROUP(d, grad_run);
  ErrorTable table("LSTM / GRU, torch preset, vs PyTorch 1.13 nn.LSTM / nn.GRU with the same weights", "pytorch");
  struct Variant {
    const char* label;
    bool reference;
    bool f64;
  };
  const Variant variants[] = {{"f32", false, false}, {"f32 ref", true, false}, {"f64 ref", true, true}};
  for (const GradCase& c : kGradCases)
    for (const Variant& v : variants) {
      const Policy p = torch_with(v.reference, v.f64);
      auto layer = make_rnn(c.cell, c.h, c.seq, c.t, c.f, p);
      layer->set_torch_weights(torch_weights_of(d, c.name));
      const LayerRun res = run_case(d, c, *layer, v.f64 ? DType::f64 : DType::f32);
      const std::string pre = v.f64 ? "f64." : "";
      const double tol = v.f64 ? kTol64 : kTol;
      const std::string what = std::string(c.name) + " " + v.label;
      EXPECT_TRUE(table.check(what, "output", res.y, out(d, c.name, pre + "y"), tol));
      EXPECT_TRUE(table.check(what, "dX", res.dx, out(d, c.name, pre + "dx"), tol));
      const std::vector<Param*> ps = layer->params();
      ASSERT_EQ(ps.size(), 4u);  // the torch preset has both biases
      for (std::size_t k = 0; k < ps.size(); ++k) {
        const std::string key = ps[k]->name + "_l0";
        EXPECT_EQ(key, kTorchWeights[k]);
        EXPECT_TRUE(table.check(what, "d" + key, exported_grad(*layer, *ps[k], res.grads[k]),
                                out(d, c.name, pre + "g." + key), tol));
      }
    }
  table.print();
}

// ---------------------------------------------------------------------------------------------
// Group 1b: variable-length sequences. PyTorch's pack_padded_sequence against rnn_mask=carry
// with post-padding: the final state is each sequence's state at its last real step, padded
// steps read no input (their dX is 0) and add nothing to the weight gradients.

struct PackedCase {
  const char* name;
  RnnCell cell;
};
const PackedCase kPackedCases[] = {{"lstm_packed", RnnCell::lstm}, {"gru_packed", RnnCell::gru}};
constexpr int64_t kPackN = 4, kPackT = 7, kPackF = 5, kPackH = 6;
const int64_t kPackLengths[kPackN] = {7, 3, 5, 1};

void fill_packed(CaseDir& d) {
  uint64_t seed = 7500;
  for (const PackedCase& c : kPackedCases) {
    const std::string n = c.name;
    const int64_t gh = rnn_gates(c.cell) * kPackH;
    // Padded positions hold random values too: neither engine may read them.
    d.input(n + ".x", random_tensor({kPackN, kPackT, kPackF}, DType::f32, ++seed));
    Tensor lengths({kPackN}, DType::f64);
    for (int64_t i = 0; i < kPackN; ++i) lengths.data<double>()[i] = static_cast<double>(kPackLengths[i]);
    d.input(n + ".lengths", lengths);
    d.input(n + ".weight_ih_l0", random_tensor({gh, kPackF}, DType::f32, ++seed, -0.5, 0.5));
    d.input(n + ".weight_hh_l0", random_tensor({gh, kPackH}, DType::f32, ++seed, -0.5, 0.5));
    d.input(n + ".bias_ih_l0", random_tensor({gh}, DType::f32, ++seed, -0.5, 0.5));
    d.input(n + ".bias_hh_l0", random_tensor({gh}, DType::f32, ++seed, -0.5, 0.5));
    d.input(n + ".r", random_tensor({kPackN, kPackH}, DType::f32, ++seed));
    d.add_case({{"name", n}, {"kind", "rnn_packed"}, {"cell", rnn_cell_name(c.cell)}, {"input_size", kPackF},
                {"hidden", kPackH}});
  }
}
const CaseDir& packed_run() {
  static const CaseDir d(rnn_script(), "torch_rnn_packed", fill_packed);
  return d;
}

TEST(TorchRnnOracle, PackedSequencesEqualMaskCarry) {
  ORACLE_GROUP(d, packed_run);
  ErrorTable table("post-padded sequences (lengths 7,3,5,1): rnn_mask=carry vs pack_padded_sequence h_n",
                   "pytorch");
  StepMask mask{kPackN, kPackT, std::vector<uint8_t>(kPackN * kPackT, 0)};
  for (int64_t i = 0; i < kPackN; ++i)
    for (int64_t t = 0; t < kPackLengths[i]; ++t) mask.keep[i * kPackT + t] = 1;
  for (const PackedCase& c : kPackedCases) {
    const std::string n = c.name;
    for (const char* mode : {"carry", "none"}) {
      Policy p = Policy::torch();
      p.set("rnn_mask", mode);
      auto layer = make_rnn(c.cell, kPackH, false, kPackT, kPackF, p);
      layer->set_torch_weights(torch_weights_of(d, n));
      ExecContext exec;
      RunContext ctx = RunContext::training(exec, nullptr);
      ctx.step_mask = mask;
      for (Param* prm : layer->params()) prm->grad.zero();
      const Tensor y = layer->forward(ctx, in(d, n, "x"));
      const Tensor dx = layer->backward(ctx, in(d, n, "r"));
      const Tensor ref = out(d, n, "y");
      if (std::string(mode) == "none") {  // padded steps computed like data: the states differ
        EXPECT_GT(table.note(n, "rnn_mask=none (no packing): h_n", y, ref), kVisible);
        continue;
      }
      // One recurrence per sequence over at most 7 steps: the tolerances of Group 1.
      EXPECT_TRUE(table.check(n, "h_n", y, ref, kTol));
      EXPECT_TRUE(table.check(n, "dX (0 at padded steps)", dx, out(d, n, "dx"), kTol));
      const std::vector<Param*> ps = layer->params();
      ASSERT_EQ(ps.size(), 4u);
      for (std::size_t k = 0; k < ps.size(); ++k)
        EXPECT_TRUE(table.check(n, std::string("d") + kTorchWeights[k], exported_grad(*layer, *ps[k], ps[k]->grad),
                                out(d, n, std::string("g.") + kTorchWeights[k]), kTol));
    }
  }
  table.print();
}

// ---------------------------------------------------------------------------------------------
// Negative tests on the same PyTorch results

const GradCase& grad_case(const std::string& name) {
  for (const GradCase& c : kGradCases)
    if (name == c.name) return c;
  throw Error("no grad case " + name);
}

Tensor stack2(const Tensor& a, const Tensor& b) {
  Tensor s({2, a.numel()}, a.dtype());
  std::memcpy(s.raw(), a.raw(), a.nbytes());
  std::memcpy(static_cast<unsigned char*>(s.raw()) + a.nbytes(), b.raw(), b.nbytes());
  return s;
}

// PyTorch's GRU weights given to the Keras-layout setter after only a transposition (what the
// converter of keras-team/keras#15915 does): r and z trade places. The LSTM's orders agree, so
// there the transposition is the whole conversion. Swapping the r/z blocks restores the GRU.
TEST(TorchRnnNegative, GateOrderTorchWeightsReadAsKerasOrder) {
  ORACLE_GROUP(d, grad_run);
  ErrorTable table("gate order: PyTorch weights read in Keras's order (layer: torch semantics)", "pytorch");
  for (const char* name : {"gru_seq", "lstm_seq"}) {
    const GradCase& c = grad_case(name);
    const TorchRnnWeights w = torch_weights_of(d, name);
    const Tensor ref = out(d, name, "y");
    const int64_t g = rnn_gates(c.cell);
    auto y_with = [&](const KerasRnnWeights& kw) {
      auto layer = make_rnn(c.cell, c.h, c.seq, c.t, c.f, Policy::torch());
      layer->set_keras_weights(kw);
      return run_case(d, c, *layer, DType::f32).y;
    };
    // Naive: kernel = W_ih^T, recurrent = W_hh^T, bias = [b_ih; b_hh], no block reordering.
    const Tensor naive = y_with({transpose2d(w.weight_ih), transpose2d(w.weight_hh), stack2(w.bias_ih, w.bias_hh)});
    // Converted: the r/z blocks swapped as well (a no-op order for the LSTM's i,f,g,o = i,f,c,o).
    auto conv = [&](const Tensor& t) { return c.cell == RnnCell::gru ? swap_gate_blocks01(t, g, true) : t; };
    const Tensor converted = y_with({transpose2d(conv(w.weight_ih)), transpose2d(conv(w.weight_hh)),
                                     stack2(conv(w.bias_ih), conv(w.bias_hh))});
    if (c.cell == RnnCell::gru) {
      const double e = table.note(name, "transposed only (r,z read as z,r)", naive, ref);
      EXPECT_GT(e, kVisible) << "reading r,z as z,r must change the GRU's output";
    } else {
      EXPECT_TRUE(table.check(name, "transposed only (orders agree)", naive, ref, kTol));
    }
    EXPECT_TRUE(table.check(name, c.cell == RnnCell::gru ? "converted (r/z blocks swapped)" : "converted", converted, ref, kTol));
  }
  // The same through the knob that says how weight files are read (RnnLayer::import_param):
  // torch weights, transposed into Keras's column layout, read with gru_gate_order=zrh (the
  // tensorflow preset's) vs flipped to rzn.
  const GradCase& c = grad_case("gru_seq");
  const TorchRnnWeights w = torch_weights_of(d, c.name);
  for (const char* order : {"zrh", "rzn"}) {
    Policy p = Policy::parse(std::string("torch,rnn_weight_layout=gate_cols,gru_gate_order=") + order);
    auto layer = make_rnn(c.cell, c.h, c.seq, c.t, c.f, p);
    const std::vector<Param*> ps = layer->params();
    ps[0]->value = layer->import_param(*ps[0], transpose2d(w.weight_ih));
    ps[1]->value = layer->import_param(*ps[1], transpose2d(w.weight_hh));
    ps[2]->value = layer->import_param(*ps[2], w.bias_ih);
    ps[3]->value = layer->import_param(*ps[3], w.bias_hh);
    const Tensor y = run_case(d, c, *layer, DType::f32).y;
    const std::string qty = std::string("import_param, gru_gate_order=") + order;
    if (std::string(order) == "zrh")
      EXPECT_GT(table.note(c.name, qty, y, out(d, c.name, "y")), kVisible);
    else
      EXPECT_TRUE(table.check(c.name, qty, y, out(d, c.name, "y"), kTol));
  }
  table.print();
}

// gru_reset_after=before (Keras 2.2.4) computes another function than PyTorch's reset-after GRU
// with the same weights; the torch preset's value restores the match. Likewise the recurrent
// activation: Keras 2.2.4's hard sigmoid vs PyTorch's sigmoid.
TEST(TorchRnnNegative, ResetAfterAndRecurrentActivation) {
  ORACLE_GROUP(d, grad_run);
  ErrorTable table("GRU reset placement and the gate activation vs PyTorch (same weights)", "pytorch");
  struct Flip {
    const char* case_name;
    const char* wrong;  // knobs on top of the torch preset
    const char* what;
  };
  const Flip flips[] = {
      {"gru_seq", "torch,gru_reset_after=before", "gru_reset_after=before (Keras 2.2.4)"},
      {"gru_seq_28x28", "torch,gru_reset_after=before", "gru_reset_after=before (Keras 2.2.4)"},
      {"gru_seq", "torch,rnn_recurrent_activation=hard_sigmoid", "rnn_recurrent_activation=hard_sigmoid"},
      {"lstm_seq", "torch,rnn_recurrent_activation=hard_sigmoid", "rnn_recurrent_activation=hard_sigmoid"},
  };
  for (const Flip& f : flips) {
    const GradCase& c = grad_case(f.case_name);
    const Tensor ref = out(d, c.name, "y");
    for (const bool flipped : {false, true}) {
      auto layer = make_rnn(c.cell, c.h, c.seq, c.t, c.f, flipped ? Policy::torch() : Policy::parse(f.wrong));
      layer->set_torch_weights(torch_weights_of(d, c.name));
      const LayerRun res = run_case(d, c, *layer, DType::f32);
      if (!flipped) {
        EXPECT_GT(table.note(c.name, f.what, res.y, ref), kVisible) << f.wrong;
        table.note(c.name, std::string(f.what) + ", dX", res.dx, out(d, c.name, "dx"));
      } else {
        EXPECT_TRUE(table.check(c.name, "flipped back to the torch preset", res.y, ref, kTol));
      }
    }
  }
  table.print();
}

// ---------------------------------------------------------------------------------------------
// Group 2: PyTorch's own state imported into the tensorflow preset

constexpr int64_t kImpN = 3, kImpT = 9, kImpF = 5, kImpH = 8;
constexpr uint64_t kImpSeed = 20240;

void fill_import(CaseDir& d) {
  for (const char* cell : {"lstm", "gru"}) {
    const std::string name = std::string("state_") + cell;
    d.input(name + ".x", random_tensor({kImpN, kImpT, kImpF}, DType::f32, kImpSeed + 1));
    d.add_case({{"name", name}, {"kind", "rnn_state"}, {"cell", cell}, {"input_size", kImpF}, {"hidden", kImpH},
                {"seed", kImpSeed}});
  }
}
const CaseDir& import_run() {
  static const CaseDir d(rnn_script(), "torch_rnn_import", fill_import);
  return d;
}

// The tensorflow preset with the semantics knobs set to what the PyTorch model computes (sigmoid
// gates, and for the GRU reset-after with its two biases: tf.keras's GRU(reset_after=True)),
// keeping the tensorflow preset's Keras layout (kernel (F,G*u), GRU gates z,r,h, one LSTM bias).
// The state is imported with set_torch_weights: the gates must land where Keras expects them.
TEST(TorchRnnImport, PyTorchStateIntoTensorflowPresetReordersGates) {
  ORACLE_GROUP(d, import_run);
  ErrorTable table("PyTorch state (torch.manual_seed; nn.LSTM/nn.GRU) imported into the tensorflow preset",
                   "pytorch");
  for (const RnnCell cell : {RnnCell::lstm, RnnCell::gru}) {
    const std::string name = std::string("state_") + rnn_cell_name(cell);
    const int64_t g = rnn_gates(cell);
    const TorchRnnWeights w = torch_weights_of(d, name, /*outputs=*/true);
    const Tensor x = in(d, name, "x"), ref = out(d, name, "y");
    const Policy tf = Policy::parse(cell == RnnCell::lstm
                                        ? "tensorflow,rnn_recurrent_activation=sigmoid"
                                        : "tensorflow,rnn_recurrent_activation=sigmoid,gru_reset_after=after,"
                                          "rnn_num_bias=2");
    ASSERT_EQ(tf.rnn_weight_layout, RnnWeightLayout::gate_cols);
    ASSERT_EQ(tf.gru_gate_order, GruGateOrder::zrh);
    auto layer = make_rnn(cell, kImpH, true, kImpT, kImpF, tf);
    layer->set_torch_weights(w);
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    EXPECT_TRUE(table.check(name, "output after import", layer->forward(ctx, x), ref, kTol));

    // The layer's Keras-layout weights are PyTorch's transposed with the GRU's r,z blocks swapped:
    // exactly, element for element (a permutation moves values without rounding).
    const std::vector<Param*> ps = layer->params();
    auto keras_of = [&](const Tensor& t) { return transpose2d(cell == RnnCell::gru ? swap_gate_blocks01(t, g, true) : t); };
    EXPECT_TRUE(bitwise_equal(layer->export_param(*ps[0]), keras_of(w.weight_ih))) << name << " kernel";
    EXPECT_TRUE(bitwise_equal(layer->export_param(*ps[1]), keras_of(w.weight_hh))) << name << " recurrent_kernel";
    // The naive import (a Keras-layout file made by transposing only) through the preset's reader.
    auto naive = make_rnn(cell, kImpH, true, kImpT, kImpF, tf);
    const std::vector<Param*> nps = naive->params();
    nps[0]->value = naive->import_param(*nps[0], transpose2d(w.weight_ih));
    nps[1]->value = naive->import_param(*nps[1], transpose2d(w.weight_hh));
    // Biases converted correctly (summed for the LSTM's one bias), so only the kernels differ.
    for (std::size_t k = 2; k < nps.size(); ++k) nps[k]->value = ps[k]->value.clone();
    const Tensor y_naive = naive->forward(ctx, x);
    if (cell == RnnCell::gru)
      EXPECT_GT(table.note(name, "naive import: kernels transposed only", y_naive, ref), kVisible);
    else
      EXPECT_TRUE(table.check(name, "naive import: transposed only (orders agree)", y_naive, ref, kTol));
    // And with the tensorflow preset's own semantics (hard sigmoid; GRU reset before, one bias)
    // the correctly imported weights still compute another function: layout is not all.
    auto pure = make_rnn(cell, kImpH, true, kImpT, kImpF, Policy::tensorflow());
    pure->set_torch_weights(w);
    EXPECT_GT(table.note(name, "tensorflow preset semantics unchanged", pure->forward(ctx, x), ref), kVisible);
  }
  table.print();
}

// ---------------------------------------------------------------------------------------------
// Group 3: training, and nn.Embedding's initialisation

const TrainCase kTrainCases[] = {
    {"lstm_embedding", RnnCell::lstm, 20, 6, 6, 8, 4, 8},
    {"gru_features", RnnCell::gru, 0, 5, 7, 8, 3, 8},
};
constexpr uint64_t kTrainSeed = 77;

// The rnn_oracle.py Classifier's parameter name of a driftlab parameter "<i>.<kind>.<name>".
std::string torch_param_name(const std::string& driftlab_name) {
  const std::string kind = driftlab_name.substr(driftlab_name.find('.') + 1, driftlab_name.rfind('.') - driftlab_name.find('.') - 1);
  const std::string param = driftlab_name.substr(driftlab_name.rfind('.') + 1);
  if (kind == "embedding") return "emb." + param;
  if (kind == "dense") return "fc." + param;
  return "rnn." + param + "_l0";
}

void fill_train(CaseDir& d) {
  uint64_t seed = 9100;
  for (const TrainCase& c : kTrainCases) {
    const std::string n = c.name;
    Model m = make_classifier(c, Policy::torch(), kTrainSeed);  // driftlab's torch-preset initial weights
    for (auto& np : m.net->named_params()) d.input(n + ".p." + torch_param_name(np.first), np.second->value);
    const Tensor xs = c.num_ids > 0 ? random_ids({kSteps, c.batch, c.steps}, c.num_ids, ++seed)
                                    : random_tensor({kSteps, c.batch, c.steps, c.features}, DType::f32, ++seed);
    d.input(n + ".xs", xs);
    std::vector<int32_t> labels = random_labels(kSteps * c.batch, c.classes, ++seed);
    const Tensor ls = labels_tensor(labels).reshape({kSteps, c.batch});
    d.input(n + ".labels", ls);
    json cj = {{"name", n},           {"kind", "rnn_train"}, {"cell", rnn_cell_name(c.cell)},
               {"input_size", c.features}, {"hidden", c.units}, {"num_classes", c.classes},
               {"lr", kLr},           {"momentum", kMomentum}, {"steps", kSteps}};
    cj["embedding"] = c.num_ids > 0 ? json{{"num_ids", c.num_ids}, {"dim", c.features}} : json(nullptr);
    d.add_case(cj);
    // Adam and RMSprop (tests/oracles/optim_cases.h) on the LSTM classifier, the same weights
    // and batches as its SGD case.
    if (c.cell != RnnCell::lstm) continue;
    for (const OptimVariant& v : kOptimVariants) {
      const std::string on = n + "_optim_" + v.name;
      for (auto& np : m.net->named_params()) d.input(on + ".p." + torch_param_name(np.first), np.second->value);
      d.input(on + ".xs", xs);
      d.input(on + ".labels", ls);
      json oj = optim_case_json(v, Policy::torch());
      for (const char* k : {"cell", "input_size", "hidden", "num_classes", "steps", "embedding"}) oj[k] = cj[k];
      oj["name"] = on, oj["kind"] = "rnn_train";
      d.add_case(oj);
    }
  }
}
const CaseDir& train_run() {
  static const CaseDir d(rnn_script(), "torch_rnn_train", fill_train);
  return d;
}

// 20 steps of case `name` (inputs p.*, xs, labels) under `policy` and `cfg` from PyTorch's initial
// weights, checked against its results (prefix 'f64.' in float64) after every step's loss and at
// the end, at the SGD tolerances above.
void check_rnn_training(const CaseDir& d, const std::string& name, const TrainCase& c, Policy p,
                        const TrainConfig& cfg, bool f64, const std::string& what, ErrorTable& table) {
  if (f64) p.dtype = FloatType::float64;
  Model m = make_classifier(c, p, kTrainSeed);
  for (auto& np : m.net->named_params())
    np.second->value = in(d, name, "p." + torch_param_name(np.first)).to(m.dtype());
  ExecContext exec;
  CpuRunner trainer(m, cfg, exec);
  const Tensor xs = in(d, name, "xs"), ls = in(d, name, "labels");
  std::vector<double> losses;
  for (int k = 0; k < kSteps; ++k) {
    const Tensor lk = slice0(ls, k);
    std::vector<int32_t> labels(static_cast<std::size_t>(lk.numel()));
    for (int64_t i = 0; i < lk.numel(); ++i) labels[static_cast<std::size_t>(i)] = static_cast<int32_t>(lk.at(i));
    losses.push_back(trainer.train_step(slice0(xs, k), labels));
  }
  const std::string pre = f64 ? "f64." : "";
  const double tol = f64 ? kTrainTol64 : kTrainTol;
  EXPECT_TRUE(table.check(what, "loss of each step", Tensor::from<double>({kSteps}, losses),
                          out(d, name, pre + "losses"), tol));
  for (auto& np : m.net->named_params())
    EXPECT_TRUE(table.check(what, "after 20 steps: " + torch_param_name(np.first), np.second->value,
                            out(d, name, pre + "p." + torch_param_name(np.first)), tol));
}

TEST(TorchRnnOracle, TwentySgdStepsOfRnnClassifiers) {
  ORACLE_GROUP(d, train_run);
  ErrorTable table("[embedding ->] LSTM/GRU -> dense, 20 torch.optim.SGD steps (lr 0.1, momentum 0.9), torch preset",
                   "pytorch");
  TrainConfig cfg;
  cfg.optim.lr = kLr;
  cfg.optim.momentum = kMomentum;
  for (const TrainCase& c : kTrainCases)
    for (const bool f64 : {false, true}) {
      cfg.batch = c.batch;
      check_rnn_training(d, c.name, c, Policy::torch(), cfg, f64, std::string(c.name) + (f64 ? " f64" : " f32"), table);
    }
  table.print();
}

// 20 steps of Adam / AdamW / RMSprop (+ StepLR) on the LSTM classifier (embedding -> LSTM -> dense)
// against torch.optim from the same weights; tolerances as for SGD above.
TEST(TorchRnnOracle, AdamAndRmspropTwentyStepsOfTheLstmClassifier) {
  ORACLE_GROUP(d, train_run);
  ErrorTable table("embedding -> LSTM -> dense, 20 steps of torch.optim.Adam/AdamW/RMSprop (+StepLR), torch preset",
                   "pytorch");
  const TrainCase& c = kTrainCases[0];
  for (const OptimVariant& v : kOptimVariants)
    for (const bool f64 : {false, true})
      check_rnn_training(d, std::string(c.name) + "_optim_" + v.name, c, optim_policy(v, Policy::torch()),
                         optim_train_config(v, c.batch), f64, std::string(v.name) + (f64 ? " f64" : " f32"), table);
  table.print();
}

// nn.Embedding's N(0,1): a table of whole 16-element blocks and one with a redrawn tail block.
struct InitCase {
  const char* name;
  int64_t v, dim;
  uint64_t seed;
};
const InitCase kInitCases[] = {{"emb_init_50x8", 50, 8, 0}, {"emb_init_37x3", 37, 3, 42}};

void fill_init(CaseDir& d) {
  for (const InitCase& c : kInitCases)
    d.add_case({{"name", c.name}, {"kind", "init_embedding"}, {"num_ids", c.v}, {"dim", c.dim}, {"seed", c.seed}});
}
// PyTorch as it runs here (AVX2 kernels) and forced to its portable kernels.
const CaseDir& init_run_avx() {
  static const CaseDir d(rnn_script(), "torch_rnn_init", fill_init);
  return d;
}
const CaseDir& init_run_portable() {
  static const CaseDir d(rnn_script(), "torch_rnn_init_default_cpu", fill_init, {1, "ATEN_CPU_CAPABILITY=default"});
  return d;
}

// EmbeddingLayer under the torch preset, drawn from Rng(mt19937, S), against torch.manual_seed(S);
// nn.Embedding(V, D). driftlab follows PyTorch's portable normal_fill (uniforms first, then
// Box-Muller per 16-element block, theta through double, C-library log/sin/cos): against PyTorch
// forced to its portable kernels (ATEN_CPU_CAPABILITY=default) every element must be the same
// bits. PyTorch's default AVX2 kernel computes theta in float and uses its own vectorised
// log/sin/cos; against it (and against PyTorch's own portable run, measured: 9.2e-7 absolute,
// 244 of 400 elements identical) the difference is the rounding of theta, ulp(2 pi)/2 = 2.4e-7,
// times the radius (<= 5.8), plus an ulp or two of log: < 2e-6 absolute, i.e. < 1e-6 of a
// table whose largest |value| is >= 2 (always, for >= 100 N(0,1) draws). A different algorithm
// (another pairing, no redrawn tail block) errs by O(1).
TEST(TorchRnnOracle, EmbeddingInitFollowsTorchManualSeed) {
  ORACLE_GROUP(avx, init_run_avx);
  const CaseDir& portable = init_run_portable();
  ASSERT_EQ(portable.error(), "") << "PyTorch RNN oracle (portable kernels) failed";
  ErrorTable table("nn.Embedding(V, D) after torch.manual_seed(S) vs EmbeddingLayer (torch preset)", "pytorch");
  for (const InitCase& c : kInitCases) {
    Rng rng(RngEngine::mt19937_u24, c.seed);
    EmbeddingLayer emb({c.v, c.dim, {}}, {1}, Policy::torch(), rng);
    const Tensor& w = emb.params()[0]->value;
    EXPECT_TRUE(bitwise_equal(w, out(portable, c.name, "weight"))) << c.name << " vs ATEN_CPU_CAPABILITY=default";
    EXPECT_TRUE(table.check(c.name, "weight vs PyTorch portable kernels", w, out(portable, c.name, "weight"), 0.0));
    EXPECT_TRUE(table.check(c.name, "weight vs PyTorch AVX2 kernels", w, out(avx, c.name, "weight"), 1e-6));
  }
  table.print();
}

}  // namespace
}  // namespace driftlab
