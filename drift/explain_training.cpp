// `driftlab explain`'s worked examples for the training knobs: loss, optimiser formulas, schedules, weight decay, random engine, shuffle (drift/explain_examples.h).
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

std::string ex_ce() {
  std::ostringstream os;
  os << "  logits [0, 20], true class 0 (a confident wrong prediction), batch of one:\n";
  Tensor z = Tensor::from<float>({1, 2}, {0, 20});
  for (CeFormulation f : {CeFormulation::log_softmax, CeFormulation::softmax_clip, CeFormulation::softmax_log}) {
    SoftmaxXentParams p;
    p.form = f;
    Tensor dz({1, 2}, DType::f32);
    double loss = softmax_xent_forward_ref(p, z, {0});
    softmax_xent_backward_ref(p, z, {0}, dz);
    const char* name = f == CeFormulation::log_softmax ? "log_softmax " : (f == CeFormulation::softmax_clip ? "softmax_clip" : "softmax_log ");
    os << "    " << name << " loss " << std::setprecision(6) << loss << "  dL/dz " << row(dz, 0, 2, 6) << "\n";
  }
  os << "  under softmax_clip the probability 2.06e-9 is clipped to 1e-7: the loss saturates at -log(1e-7) = 16.118\n"
        "  and the gradient is exactly 0, so the sample stops teaching the network anything.\n";
  return os.str();
}

std::string ex_loss_reduction() {
  std::ostringstream os;
  Tensor z = Tensor::from<float>({2, 2}, {0, 1, 2, 0});
  for (bool mean : {true, false}) {
    SoftmaxXentParams p;
    p.mean = mean;
    Tensor dz({2, 2}, DType::f32);
    double loss = softmax_xent_forward_ref(p, z, {0, 0});
    softmax_xent_backward_ref(p, z, {0, 0}, dz);
    os << "  logits [[0,1],[2,0]], labels [0,0], loss_reduction=" << (mean ? "mean" : "sum ") << " loss "
       << std::setprecision(5) << loss << " dL/dz " << row(dz, 0, 4) << "\n";
  }
  return os.str();
}

std::string ex_sgd(const std::string& knob) {
  std::ostringstream os;
  os << "  one parameter p=1, constant gradient g=0.5, lr=0.1, momentum 0.9, three steps, float32:\n";
  const char* forms[] = {"torch_buffer", "keras_velocity", "lasagne_difference"};
  for (const char* form : forms) {
    Policy pol = Policy::torch();
    pol.set("sgd_form", form);
    if (knob != "sgd_form") pol.set("weight_decay_mode", "grad_add");
    Param prm{"weight", Tensor::from<float>({1}, {1.0f}), Tensor::from<float>({1}, {0.5f}), false};
    Optimizer sgd({0.1, 0.9, false, 0.0}, resolve_optim(pol));
    std::vector<std::pair<std::string, Param*>> ps = {{"p", &prm}};
    const ExecContext exec;
    os << "    " << std::left << std::setw(19) << form;
    for (int i = 0; i < 3; ++i) {
      sgd.step(exec, ps);
      os << " " << std::setprecision(9) << prm.value.at(0);
    }
    os << "\n";
  }
  os << "  identical algebra at constant lr; the rounding differs (see the 9th digit), and torch's buffer\n"
        "  rescales all past gradients when lr changes, Keras's velocity does not.\n";
  return os.str();
}

// Adam / RMSprop knobs: one parameter p=1 and the gradients 5e-8, -2e-8, 3e-8 (float32), three steps
// under each value of the knob on the torch preset (numeric knobs: each preset's value).
std::string ex_adaptive(const std::string& knob) {
  std::ostringstream os;
  const bool rms = knob.rfind("rmsprop", 0) == 0;
  os << "  " << (rms ? "RMSprop" : "Adam") << ", one parameter p=1, gradients 5e-8, -2e-8, 3e-8 (near eps), lr 0.01, float32"
     << (knob == "weight_decay_mode" ? ", weight decay 0.1" : "") << ", p after each step:\n";
  std::vector<std::string> values = knob_info(knob).values;
  if (values.empty())
    for (const char* preset : kPresets) values.push_back(Policy::preset_named(preset).get(knob));
  for (const std::string& v : values) {
    Policy pol = Policy::torch();
    pol.set(knob, v);
    OptimConfig c;
    c.kind = rms ? OptimizerKind::rmsprop : OptimizerKind::adam;
    c.lr = 0.01;
    Optimizer opt(c, resolve_optim(pol));
    Param prm{"weight", Tensor::from<float>({1}, {1.0f}), Tensor::from<float>({1}, {0.0f}), false};
    std::vector<std::pair<std::string, Param*>> ps = {{"p", &prm}};
    os << "    " << knob << "=" << std::left << std::setw(20) << v;
    for (float g : {5e-8f, -2e-8f, 3e-8f}) {
      prm.grad.data<float>()[0] = g;
      opt.step(ExecContext{}, ps);
      os << " " << std::setprecision(9) << prm.value.at(0);
    }
    os << "\n";
  }
  return os.str();
}

// ReduceLROnPlateau over 12 epochs whose validation loss never improves, patience 2, cooldown 2.
std::string ex_plateau() {
  std::ostringstream os;
  os << "  plateau:factor=0.5,patience=2,cooldown=2, a validation loss that never improves, the rate after each of\n"
        "  12 epochs:\n";
  for (const char* rule : {"torch", "keras"}) {
    Policy pol = Policy::torch();
    pol.set("plateau_rule", rule);
    LrSchedule s(parse_schedule("plateau:factor=0.5,patience=2,cooldown=2"), 1.0, pol);
    os << "    plateau_rule=" << std::left << std::setw(6) << rule;
    for (int e = 0; e < 12; ++e) {
      s.after_epoch(1.0);
      os << " " << s.lr();
    }
    os << "\n";
  }
  return os.str();
}

std::string ex_weight_decay() {
  std::ostringstream os;
  os << "  weight p=2 and bias b=2, zero loss gradient, --weight-decay 0.01, lr 0.1, no momentum, one step:\n";
  for (const char* preset : kPresets) {
    Policy pol = Policy::preset_named(preset);
    Param w{"weight", Tensor::from<float>({1}, {2.0f}), Tensor::from<float>({1}, {0.0f}), false};
    Param b{"bias", Tensor::from<float>({1}, {2.0f}), Tensor::from<float>({1}, {0.0f}), true};
    Optimizer sgd({0.1, 0.0, false, 0.01}, resolve_optim(pol));
    std::vector<std::pair<std::string, Param*>> ps = {{"w", &w}, {"b", &b}};
    sgd.step(ExecContext{}, ps);
    os << "    " << std::left << std::setw(11) << preset << "(" << pol.get("weight_decay_mode") << ", on bias "
       << pol.get("weight_decay_on_bias") << "): weight " << std::setprecision(6) << w.value.at(0) << ", bias "
       << b.value.at(0) << "\n";
  }
  return os.str();
}

std::string ex_rng() {
  std::ostringstream os;
  os << "  the first four U[0,1) floats for seed 1:\n";
  for (RngEngine e : {RngEngine::mt19937_u24, RngEngine::philox_u23, RngEngine::mrg31k3p}) {
    Rng rng(e, 1);
    Policy p;
    p.rng_engine = e;
    os << "    " << std::left << std::setw(12) << p.get("rng_engine") << std::setprecision(8);
    for (int i = 0; i < 4; ++i) os << " " << rng.uniform_f32();
    os << "\n";
  }
  os << "  (mt19937_u24 with seed 1 is torch.manual_seed(1); torch.rand(4), bit for bit)\n";
  return os.str();
}

std::string ex_shuffle() {
  std::ostringstream os;
  os << "  the first epoch's order of 10 samples, seed 1:\n";
  for (ShuffleAlgo a : {ShuffleAlgo::forward_modulo, ShuffleAlgo::backward_rejection, ShuffleAlgo::none}) {
    std::mt19937 mt(1);
    auto perm = permutation(10, a, mt);
    Policy p;
    p.shuffle = a;
    os << "    " << std::left << std::setw(19) << p.get("shuffle");
    for (auto v : perm) os << " " << v;
    os << "\n";
  }
  os << "  (forward_modulo with seed 1 is torch.manual_seed(1); torch.randperm(10);\n"
        "   backward_rejection is np.random.seed(1); np.random.shuffle(np.arange(10)))\n";
  return os.str();
}

}  // namespace explain
}  // namespace driftlab
