// `driftlab explain`'s worked examples for the LSTM/GRU knobs: gate math, biases, layouts, initialisers, peepholes, the mask (drift/explain_examples.h).
#include "drift/explain_examples.h"

#include "engine/cuda/device_net.h"
#include "kernels/cuda/device.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <map>
#include <memory>
#include <limits>
#include <sstream>

#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/embedding_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/gru_layer.h"
#include "engine/layers/lstm_layer.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "engine/layers/init.h"
#include "core/ops/activation.h"
#include "core/ops/pool2d.h"
#include "core/ops/softmax_xent.h"
#include "engine/random.h"
#include "engine/train/optimizer.h"
#include "engine/train/schedule.h"
#include "engine/train/runner.h"
#include "kernels/cpu/ref/ref.h"
#include "models/models.h"
#include "quant/dynamic.h"
#include "quant/ptq.h"

namespace driftlab {
namespace explain {

// One step of a one-unit GRU (x = 0, h_prev = 0, zero weights) with the torch biases given
// (gate order r,z,n), under `knob` set to each of its values.
std::string ex_rnn_math(const std::string& knob, RnnCell cell, std::vector<float> b_ih, std::vector<float> b_hh,
                        const std::string& what) {
  std::ostringstream os;
  os << "  one " << rnn_cell_name(cell) << " unit, one step from h=0 (and c=0), x=0, zero weights, " << what << ":\n";
  const int64_t G = rnn_gates(cell);
  for (const auto& v : knob_info(knob).values) {
    Policy p = Policy::torch();
    p.set(knob, v);
    os << "    " << knob << "=" << v << ": ";
    try {
      Rng rng(p.rng_engine, 1);
      std::unique_ptr<RnnLayer> l;
      if (cell == RnnCell::lstm)
        l = std::make_unique<LstmLayer>(RnnSpec{1, false}, Shape{1, 1}, p, rng);
      else
        l = std::make_unique<GruLayer>(RnnSpec{1, false}, Shape{1, 1}, p, rng);
      TorchRnnWeights w{Tensor({G, 1}, DType::f32), Tensor({G, 1}, DType::f32), Tensor::from<float>({G}, b_ih),
                        Tensor::from<float>({G}, b_hh)};
      l->set_torch_weights(w);
      ExecContext exec;
      RunContext ctx = RunContext::inference(exec);
      os << "h = " << std::setprecision(6) << l->forward(ctx, Tensor({1, 1, 1}, DType::f32)).at(0) << "\n";
    } catch (const Error& e) {
      os << "refused: " << e.what() << "\n";
    }
  }
  return os.str();
}

// Peepholes: one LSTM unit whose cell state grows from 0, with and without unit peepholes.
std::string ex_peepholes() {
  std::ostringstream os;
  os << "  one LSTM unit, x=0, zero weights, b_i = b_g = 1 (so c grows from 0), peephole weights\n"
     << "  w_ci = w_cf = w_co = 1 where the layer has them; h at steps 1, 2, 3:\n";
  for (const auto& v : knob_info("lstm_peepholes").values) {
    Policy p = Policy::torch();
    p.set("lstm_peepholes", v);
    Rng rng(p.rng_engine, 1);
    LstmLayer l(RnnSpec{1, true}, Shape{3, 1}, p, rng);
    l.set_torch_weights({Tensor({4, 1}, DType::f32), Tensor({4, 1}, DType::f32),
                         Tensor::from<float>({4}, {1, 0, 1, 0}), Tensor({4}, DType::f32)});
    const Tensor ones = Tensor::from<float>({3, 1}, {1, 1, 1});
    if (l.peephole_weights()) l.set_peephole_weights(&ones);
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    const Tensor h = l.forward(ctx, Tensor({1, 3, 1}, DType::f32));
    os << "    lstm_peepholes=" << std::left << std::setw(8) << v << std::setprecision(6) << h.at(0) << " " << h.at(1)
       << " " << h.at(2) << "\n";
  }
  return os.str();
}

// Where the packed weights go: a GRU whose torch rows r,z,n hold 1,2,3, exported under each value.
std::string ex_rnn_layout(const std::string& knob) {
  std::ostringstream os;
  os << "  GRU, 1 input, 2 units; weight_ih rows r,r,z,z,n,n = 1,1,2,2,3,3 (torch layout); exported as:\n";
  for (const auto& v : knob_info(knob).values) {
    Policy p = Policy::torch();
    p.set(knob, v);
    Rng rng(p.rng_engine, 1);
    GruLayer l(RnnSpec{2, false}, Shape{1, 1}, p, rng);
    TorchRnnWeights w = l.torch_weights();
    w.weight_ih = Tensor::from<float>({6, 1}, {1, 1, 2, 2, 3, 3});
    l.set_torch_weights(w);
    Tensor e = l.export_param(*l.params()[0]);
    os << "    " << knob << "=" << v << ": shape " << shape_str(e.shape()) << " " << row(e, 0, 6) << "\n";
  }
  return os.str();
}

// Initial LSTM parameters (3 inputs, 4 units) under each value of an init knob.
std::string ex_rnn_init(const std::string& knob, std::size_t param) {
  std::ostringstream os;
  os << "  LSTM, 3 inputs, 4 units, seed 1; the first 8 values and max |value| of parameter " << param
     << " (0 weight_ih, 1 weight_hh, 2 bias_ih, canonical layout, gates i,f,g,o):\n";
  for (const auto& v : knob_info(knob).values) {
    Policy p = Policy::tensorflow();
    p.set(knob, v);
    Rng rng(p.rng_engine, 1);
    LstmLayer l(RnnSpec{4, false}, Shape{2, 3}, p, rng);
    const Tensor& t = l.params()[param]->value;
    double mx = 0;
    for (int64_t i = 0; i < t.numel(); ++i) mx = std::max(mx, std::fabs(t.at(i)));
    os << "    " << knob << "=" << v << ": " << row(t, 0, 8, 3) << "  max " << std::setprecision(4) << mx << "\n";
  }
  return os.str();
}

// A review "3 1" padded with id 0 to 4 steps before or after, embedding -> LSTM (sequences).
std::string ex_rnn_mask() {
  std::ostringstream os;
  os << "  embedding 4x2 -> LSTM 2 units returning every step (tensorflow preset, seed 1), the review \"3 1\"\n"
     << "  padded with id 0; h_t[0] at each step (the last one is what a last-step layer returns,\n"
     << "  except under zero, where a last-step layer returns the final state, as under carry):\n";
  auto run = [](const Policy& p, std::vector<float> ids) {
    const int64_t T = static_cast<int64_t>(ids.size());
    Rng rng(p.rng_engine, 1);
    Sequential net({T});
    net.add(std::make_unique<EmbeddingLayer>(EmbeddingArgs{4, 2, std::nullopt}, Shape{T}, p, rng));
    net.add(std::make_unique<LstmLayer>(RnnSpec{2, true}, net.current_shape(), p, rng));
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    Tensor y = net.forward(ctx, Tensor::from<float>({1, T}, ids));
    std::ostringstream r;
    r << std::setprecision(5) << "[";
    for (int64_t t = 0; t < T; ++t) r << (t ? ", " : "") << y.at(t * 2);
    return r.str() + "]";
  };
  os << "    unpadded \"3 1\":            " << run(Policy::tensorflow(), {3, 1}) << "\n";
  for (const auto& v : knob_info("rnn_mask").values) {
    Policy p = Policy::tensorflow();
    p.set("rnn_mask", v);
    os << "    rnn_mask=" << std::left << std::setw(6) << v << "pre  0 0 3 1: " << run(p, {0, 0, 3, 1})
       << "   post 3 1 0 0: " << run(p, {3, 1, 0, 0}) << "\n";
  }
  return os.str();
}

}  // namespace explain
}  // namespace driftlab
