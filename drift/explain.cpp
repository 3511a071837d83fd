#include "drift/explain.h"

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
namespace {

std::string row(const Tensor& t, int64_t begin, int64_t count, int prec = 4) {
  std::ostringstream os;
  os << std::setprecision(prec) << "[";
  for (int64_t i = 0; i < count; ++i) os << (i ? ", " : "") << t.at(begin + i);
  os << "]";
  return os.str();
}

const char* kPresets[] = {"tensorflow", "theano", "torch"};

// 4x4 input 1..16, 3x3 kernel of ones, stride 2, 'same': where the extra row/column goes.
std::string ex_conv_same_pad() {
  std::ostringstream os;
  os << "4x4 input 1..16, 3x3 kernel of ones, stride 2, padding 'same' (output ceil(4/2)=2x2):\n";
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i + 1);
  Tensor x = Tensor::from<float>({1, 1, 4, 4}, v);
  Conv2dSpec spec;
  spec.kernel_h = spec.kernel_w = 3;
  spec.stride = 2;
  spec.pad = PadMode::same;
  spec.bias = false;
  for (const char* value : {"after", "before", "after_stride1"}) {
    Policy p = Policy::torch();
    p.set("conv_same_pad", value);
    os << "  conv_same_pad=" << value << ": ";
    try {
      Conv2dParams c = resolve_conv2d(p, {1, 4, 4}, spec);
      c.n = 1;
      Tensor w({1, 1, 3, 3}, DType::f32);
      w.fill(1.0);
      Tensor y(c.y_shape(), DType::f32);
      conv2d_forward_ref(c, x, w, nullptr, y);
      os << "pads top/bottom/left/right " << c.pad_t << "/" << c.pad_b << "/" << c.pad_l << "/" << c.pad_r
         << ", output " << row(y, 0, 4) << "\n";
    } catch (const Error& e) {
      os << "refused: " << e.what() << "\n";
    }
  }
  return os.str();
}

std::string ex_conv_kernel_flip() {
  std::ostringstream os;
  Tensor x = Tensor::from<float>({1, 1, 1, 3}, {1, 2, 3});
  Tensor w = Tensor::from<float>({1, 1, 1, 3}, {1, 10, 100});
  Conv2dParams c;
  c.r = 1;
  c.s = 3;
  c.w = 3;
  for (bool flip : {false, true}) {
    c.flip = flip;
    Tensor y(c.y_shape(), DType::f32);
    conv2d_forward_ref(c, x, w, nullptr, y);
    os << "  input [1,2,3], kernel [1,10,100], flip=" << (flip ? "true " : "false") << " -> " << y.at(0)
       << (flip ? "  (convolution: 1*100 + 2*10 + 3*1)\n" : "  (cross-correlation: 1*1 + 2*10 + 3*100)\n");
  }
  return os.str();
}

std::string ex_flatten_order() {
  std::ostringstream os;
  os << "  a (C,H,W)=(2,2,2) map holding 0..7 in C,H,W order, flattened:\n";
  std::vector<float> v(8);
  for (int i = 0; i < 8; ++i) v[i] = static_cast<float>(i);
  Tensor x = Tensor::from<float>({1, 2, 2, 2}, v);
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  for (const char* o : {"chw", "hwc"}) {
    Policy p = Policy::torch();
    p.set("flatten_order", o);
    FlattenLayer f({2, 2, 2}, p);
    os << "    flatten_order=" << o << ": " << row(f.forward(ctx, x), 0, 8) << "\n";
  }
  return os.str();
}

std::string ex_weight_layout() {
  std::ostringstream os;
  os << "  the first 6 uniform draws of one stream land on different weights of a 2x1x2x2 (OIHW) kernel:\n";
  for (const char* l : {"oihw", "hwio"}) {
    Policy p = Policy::torch();
    p.set("weight_layout", l);
    Tensor w({2, 1, 2, 2}, DType::f32);
    Rng rng(RngEngine::mt19937_u24, 1);
    init_weight(w, 4, 8, p, rng);
    os << "    weight_layout=" << l << ": OIHW weights " << row(w, 0, 8, 3) << "\n";
  }
  return os.str();
}

std::string ex_init() {
  std::ostringstream os;
  os << "  bounds for LeNet-5's layers (fan_in, fan_out):\n";
  struct L {
    const char* name;
    int64_t fi, fo;
  } layers[] = {{"conv1 1->6 5x5", 25, 150}, {"conv2 6->16 5x5", 150, 400}, {"dense 256->120", 256, 120},
                {"dense 120->84", 120, 84}, {"dense 84->10", 84, 10}};
  for (const auto& l : layers)
    os << "    " << std::left << std::setw(16) << l.name << " glorot_uniform +-" << std::setprecision(4)
       << std::sqrt(6.0 / static_cast<double>(l.fi + l.fo)) << "   kaiming_uniform_sqrt5 +-"
       << 1.0 / std::sqrt(static_cast<double>(l.fi)) << "   bias uniform_fan_in +-"
       << 1.0 / std::sqrt(static_cast<double>(l.fi)) << "\n";
  return os.str();
}

std::string ex_model_conv_padding() {
  std::ostringstream os;
  os << "  ResNet-20's first strided conv (3x3, stride 2, 16x32x32 -> 32x16x16), tensorflow preset:\n";
  for (const char* value : {"same", "explicit_half"}) {
    Model m = build_model("resnet20", Policy::parse(std::string("tensorflow,model_conv_padding=") + value), 1);
    auto* block = dynamic_cast<ResidualLayer*>(&m.net->layer(9));
    const Conv2dParams& p = dynamic_cast<Conv2dLayer&>(block->main().layer(0)).op_params();
    os << "    " << std::left << std::setw(14) << value << "pad t/b/l/r " << p.pad_t << "/" << p.pad_b << "/" << p.pad_l
       << "/" << p.pad_r << ": output (0,0) reads input rows " << (0 - p.pad_t) << ".." << (2 - p.pad_t) << "\n";
  }
  os << "  (same: TF puts the odd pad after; padding=1 centres the window one pixel up-left)\n";
  return os.str();
}

std::string ex_embedding_init() {
  std::ostringstream os;
  os << "  the first 4 values of a 1000x8 table, seed 1, under each value (torch's engine):\n";
  for (const char* value : {"uniform_0p05", "normal_1"}) {
    Policy p = Policy::parse(std::string("torch,embedding_init=") + value);
    Rng rng(p.rng_engine, 1);
    EmbeddingLayer l({1000, 8, {}}, {4}, p, rng);
    os << "    " << std::left << std::setw(14) << value << row(l.params()[0]->value, 0, 4) << "\n";
  }
  return os.str();
}

std::string ex_relu() {
  std::ostringstream os;
  Tensor x = Tensor::from<float>({3}, {-1, 0, 1});
  Tensor dy = Tensor::from<float>({3}, {1, 1, 1});
  for (const char* preset : {"torch", "theano"}) {
    ActivationParams a = resolve_activation(Policy::preset_named(preset), ActKind::relu);
    Tensor y({3}, DType::f32), dx({3}, DType::f32);
    activation_forward_ref(a, x, y);
    activation_backward_ref(a, x, y, dy, dx);
    os << "  " << preset << ": x=[-1, 0, 1] relu=" << row(y, 0, 3) << " gradient=" << row(dx, 0, 3) << "\n";
  }
  return os.str();
}

std::string ex_relu_nan() {
  std::ostringstream os;
  Tensor x = Tensor::from<float>({3}, {std::numeric_limits<float>::quiet_NaN(), -1, 1});
  Tensor dy = Tensor::from<float>({3}, {2, 2, 2});
  for (const char* preset : {"torch", "tensorflow"}) {
    ActivationParams a = resolve_activation(Policy::preset_named(preset), ActKind::relu);
    Tensor y({3}, DType::f32), dx({3}, DType::f32);
    activation_forward_ref(a, x, y);
    activation_backward_ref(a, x, y, dy, dx);
    os << "  " << preset << ": x=[nan, -1, 1] dy=2 relu=" << row(y, 0, 3) << " gradient=" << row(dx, 0, 3) << "\n";
  }
  return os.str();
}

std::string ex_maxpool_ties() {
  std::ostringstream os;
  Pool2dParams p;
  p.n = p.c = 1;
  p.h = p.w = 2;
  Tensor x = Tensor::from<float>({1, 1, 2, 2}, {5, 5, 5, 5});
  Tensor dy = Tensor::from<float>({1, 1, 1, 1}, {1});
  for (PoolTies t : {PoolTies::first, PoolTies::all}) {
    p.ties = t;
    Tensor dx({1, 1, 2, 2}, DType::f32);
    maxpool2d_backward_ref(p, x, dy, dx);
    os << "  2x2 window [5,5,5,5], dy=1, maxpool_grad_ties=" << (t == PoolTies::first ? "first" : "all  ")
       << " -> dx " << row(dx, 0, 4) << "\n";
  }
  return os.str();
}

std::string ex_hard_sigmoid() {
  std::ostringstream os;
  std::vector<float> xs = {-3, -2.5f, 0, 1, 2.5f, 3};
  Tensor x = Tensor::from<float>({6}, xs), dy({6}, DType::f32);
  dy.fill(1.0);
  for (const char* preset : {"tensorflow", "torch"}) {
    ActivationParams a = resolve_activation(Policy::preset_named(preset), ActKind::hard_sigmoid);
    Tensor y({6}, DType::f32), dx({6}, DType::f32);
    activation_forward_ref(a, x, y);
    activation_backward_ref(a, x, y, dy, dx);
    os << "  " << std::left << std::setw(10) << preset << " x=[-3,-2.5,0,1,2.5,3] y=" << row(y, 0, 6)
       << " dy/dx=" << row(dx, 0, 6) << "\n";
  }
  return os.str();
}

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

std::string ex_backend(const std::string& knob) {
  std::ostringstream os;
  const bool conv = knob == "conv_backend";
  os << "  the same " << (conv ? "LeNet-5 conv2 (16@5x5 over 6x12x12, batch 4)" : "256x120 GEMM (batch 4)")
     << " on each backend, max |difference| to the reference:\n";
  ExecContext exec;
  Tensor ref;
  for (KernelBackend b : {KernelBackend::reference, KernelBackend::eigen, KernelBackend::onednn}) {
    Tensor y;
    if (conv) {
      Conv2dParams p;
      p.n = 4;
      p.c = 6;
      p.h = p.w = 12;
      p.k = 16;
      p.r = p.s = 5;
      Tensor x(p.x_shape(), DType::f32), w(p.w_shape(), DType::f32);
      Rng local(RngEngine::mt19937_u24, 5);
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = local.uniform<float>(-1.f, 1.f);
      for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = local.uniform<float>(-1.f, 1.f);
      y = Tensor(p.y_shape(), DType::f32);
      exec.kernels.conv2d.select(b, p, DType::f32).forward(p, x, w, nullptr, y);
    } else {
      GemmParams p;
      p.m = 4;
      p.n = 120;
      p.k = 256;
      Tensor a({4, 256}, DType::f32), w({256, 120}, DType::f32);
      Rng local(RngEngine::mt19937_u24, 5);
      for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = local.uniform<float>(-1.f, 1.f);
      for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = local.uniform<float>(-1.f, 1.f);
      y = Tensor({4, 120}, DType::f32);
      run_gemm<float>(exec.kernels.gemm.select(b, p, DType::f32), p, a.data<float>(), w.data<float>(), y.data<float>());
    }
    if (!ref.defined()) ref = y;
    double m = 0;
    for (int64_t i = 0; i < y.numel(); ++i) m = std::max(m, std::abs(y.at(i) - ref.at(i)));
    os << "    " << std::left << std::setw(10) << backend_name(b) << " max |y - y_reference| = " << m << "\n";
  }
  os << "  the same mathematics; only the order of the float32 additions differs.\n";
  return os.str();
}

// A knob that picks driftlab's own CPU kernel (conv_block/rnn/bn/pool/act/loss/sgd_backend): the op run
// once per value on the same random sample, the kernel that ran as the registry names it, and
// how far each result is from the reference's.
std::string ex_own_backend(const std::string& knob) {
  std::ostringstream os;
  Rng local(RngEngine::mt19937_u24, 5);
  auto random = [&](Shape s) {
    Tensor t(std::move(s), DType::f32);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = local.uniform<float>(-1.f, 1.f);
    return t;
  };
  std::string what;
  // Each runs the op under `p` and returns its output; `kernel` gets the registry's choice.
  std::function<Tensor(const Policy&, std::string&)> run;
  if (knob == "rnn_backend") {
    what = "an LSTM of 32 units over 28 steps of 28 features, batch 4 (the last state)";
    Tensor x = random({4, 28, 28});
    run = [x](const Policy& p, std::string& kernel) {
      Rng r(p.rng_engine, 1);
      LstmLayer l(RnnSpec{32, false}, {28, 28}, p, r);
      std::vector<KernelChoice> trace;
      ExecContext exec;
      exec.trace = &trace;
      RunContext ctx = RunContext::inference(exec);
      Tensor y = l.forward(ctx, x);
      kernel = trace.at(0).kernel;
      return y;
    };
  } else if (knob == "conv_block_backend") {
    what = "LeNet-5's first block (conv 6@5x5 + bias, relu, 2x2 max pool) on 4 images of 28x28";
    Tensor x = random({4, 1, 28, 28});
    run = [x](const Policy& p, std::string& kernel) {
      Rng r(p.rng_engine, 1);
      Sequential net({1, 28, 28});
      Conv2dSpec cs;
      cs.out_channels = 6;
      cs.kernel_h = cs.kernel_w = 5;
      cs.pad = PadMode::valid;
      net.add(std::make_unique<Conv2dLayer>(cs, net.current_shape(), p, r));
      net.add(std::make_unique<ActivationLayer>(ActKind::relu, net.current_shape(), p));
      Pool2dSpec ps;
      ps.window = 2;
      net.add(std::make_unique<Pool2dLayer>(ps, net.current_shape(), p));
      std::vector<KernelChoice> trace;
      ExecContext exec;
      exec.trace = &trace;
      RunContext ctx = RunContext::inference(exec);
      Tensor y = net.forward(ctx, x);
      kernel = trace.at(0).op == "conv_block" ? "conv_block " + trace.at(0).kernel
                                              : "the layers' (conv2d " + trace.at(0).kernel + ")";
      return y;
    };
  } else if (knob == "bn_backend") {
    what = "a training-mode BatchNorm over 8 channels of 6x6, batch 4";
    Tensor x = random({4, 8, 6, 6});
    run = [x](const Policy& p, std::string& kernel) {
      BatchNormLayer l({8, 6, 6}, p);
      std::vector<KernelChoice> trace;
      ExecContext exec;
      exec.trace = &trace;
      RunContext ctx = RunContext::training(exec, nullptr);
      Tensor y = l.forward(ctx, x);
      kernel = trace.at(0).kernel;
      return y;
    };
  } else {
    what = knob == "pool_backend" ? "2x2 max pooling of 6@24x24, batch 4"
           : knob == "act_backend" ? "relu of 4x6x24x24 values"
           : knob == "loss_backend" ? "softmax cross-entropy (the policy's) of 64 rows of 10 logits"
                                    : "one SGD step (lr 0.1, momentum 0.9) of 10,000 weights";
    Tensor x = random({4, 6, 24, 24}), z = random({64, 10}), w = random({10000}), g = random({10000});
    std::vector<int32_t> labels(64);
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i % 10);
    run = [=](const Policy& p, std::string& kernel) {
      ExecContext exec;
      if (knob == "pool_backend") {
        Pool2dParams q;
        q.n = 4, q.c = 6, q.h = q.w = 24;
        Tensor y(q.y_shape(), DType::f32);
        const Pool2dKernel& k = exec.kernels.maxpool2d.select(p.pool_backend, q, DType::f32);
        kernel = k.name;
        k.forward(q, x, y);
        return y;
      }
      if (knob == "act_backend") {
        ActivationParams a;
        Tensor y(x.shape(), DType::f32);
        const ActivationKernel& k = exec.kernels.activation.select(p.act_backend, a, DType::f32);
        kernel = k.name;
        k.forward(a, x, y);
        return y;
      }
      if (knob == "loss_backend") {
        const SoftmaxXentParams lp = resolve_loss(p);
        const SoftmaxXentKernel& k = exec.kernels.softmax_xent.select(p.loss_backend, lp, DType::f32);
        kernel = k.name;
        Tensor dz(z.shape(), DType::f32);
        k.backward(lp, z, labels, dz);
        return dz;
      }
      SgdStepParams sp = sgd_step_params({0.1, 0.9, false, 0.0}, resolve_optim(p), false, false);
      Tensor wt = w.clone(), st = g.clone();
      const SgdKernel& k = exec.kernels.sgd.select(p.sgd_backend, sp, DType::f32);
      kernel = k.name;
      k.step(sp, wt, g, st);
      return wt;
    };
  }
  os << "  " << what << ", torch preset, float32, under each value:\n";
  Tensor ref;
  for (const char* v : {"reference", "fast"}) {
    Policy p = Policy::torch();
    p.set(knob, v);
    std::string kernel;
    Tensor y = run(p, kernel);
    if (!ref.defined()) ref = y;
    double m = 0;
    for (int64_t i = 0; i < y.numel(); ++i) m = std::max(m, std::abs(y.at(i) - ref.at(i)));
    os << "    " << std::left << std::setw(10) << v << " ran kernel '" << kernel << "', max |y - y_reference| = " << m
       << (m == 0 && std::string(v) != "reference" ? " (the same bits)" : "") << "\n";
  }
  return os.str();
}

std::string ex_acc_order() {
  std::ostringstream os;
  float terms[3] = {1.0f, 1e8f, -1e8f};
  os << "  float32 sum of [1, 1e8, -1e8]:";
  for (SumOrder o : {SumOrder::ascending, SumOrder::descending, SumOrder::pairwise}) {
    Policy p;
    p.acc_order = o;
    os << "  " << p.get("acc_order") << " = " << ordered_sum(terms, 3, o);
  }
  os << "\n  (ascending: (1+1e8)-1e8 = 0 because 1e8+1 rounds to 1e8; descending: (-1e8+1e8)+1 = 1)\n";
  return os.str();
}

std::string ex_batchnorm() {
  std::ostringstream os;
  os << "  one training step of BatchNorm on a 1x2x2 map holding [0, 2, 4, 6] (batch mean 3, biased variance 5,\n"
        "  n = 4), from the initial running mean 0 / variance 1, then inference on x = 6:\n";
  Tensor x = Tensor::from<float>({1, 1, 2, 2}, {0, 2, 4, 6});
  Tensor probe = Tensor::from<float>({1, 1, 2, 2}, {6, 6, 6, 6});
  ExecContext exec;
  for (const char* preset : kPresets) {
    Policy p = Policy::preset_named(preset);
    BatchNormLayer bn({1, 2, 2}, p);
    RunContext train = RunContext::training(exec, nullptr), infer = RunContext::inference(exec);
    Tensor y = bn.forward(train, x);
    Tensor out = bn.forward(infer, probe);
    auto b = bn.buffers();
    os << "    " << std::left << std::setw(11) << preset << "eps " << p.bn_eps << ", keep " << p.bn_momentum
       << ", " << p.get("bn_running_var") << (p.bn_zero_debias ? ", zero-debiased" : "") << std::setprecision(6)
       << ": running mean " << b[0]->value.at(0) << ", running var " << b[1]->value.at(0) << ", y(6) = " << out.at(0)
       << " (training y(6) = " << y.at(3) << ")\n";
  }
  os << "  the zero-debiased average equals the batch statistic after one step; the others have moved only\n"
        "  1% (Keras) or 10% (torch) of the way, so early inference differs by far more than eps does.\n";
  return os.str();
}

std::string ex_dtype() {
  std::ostringstream os;
  float f = 0.1f + 0.2f;
  double d = 0.1 + 0.2;
  os << std::setprecision(17) << "  0.1 + 0.2 in float32 = " << f << ", in float64 = " << d << "\n";
  return os.str();
}

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

// The CUDA knobs change which GPU library mode runs; without a device the example shows the
// exec params each value resolves to (what `--device cuda` would run), and the device status.
std::string ex_cuda(const std::string& knob) {
  std::ostringstream os;
  const KnobInfo& k = knob_info(knob);
  for (const std::string& v : k.values) {
    Policy p = Policy::torch();
    p.set(knob, v);
    os << "  torch," << knob << "=" << v << " -> " << resolve_cuda_exec(p).str() << "\n";
  }
  std::string why;
  const int n = cuda::device_count(&why);
  os << "  this machine: " << (n > 0 ? std::to_string(n) + " CUDA device(s): run `driftlab train --device cuda`"
                                     : "no CUDA device (" + why + ")")
     << "\n";
  return os.str();
}

// int8 knobs: LeNet-1 (torch preset, seed 1, random weights) calibrated on 32 random images in
// [0, 1) and quantized under each value of the knob on the torch preset's toolchain (torch_qnnpack;
// quant_scheme: each toolchain); for 16 test images: the input and first-conv scale/zero point, the
// integer logits' count that differ from the first value's, and image 0's first dequantized logits.
std::string ex_quant(const std::string& knob) {
  std::ostringstream os;
  Model m = build_model("lenet1", Policy::torch(), 1);
  Rng rng(RngEngine::mt19937_u24, 17);
  Tensor calib({32, 1, 28, 28}, DType::f32), x({16, 1, 28, 28}, DType::f32);
  for (Tensor* t : {&calib, &x})
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = rng.uniform_f32();
  os << "  LeNet-1 (random weights), calibrated on 32 random images, 16 test images; torch preset (torch_qnnpack)"
     << (knob == "quant_scheme" ? "" : " with " + knob + " set") << ":\n";
  Tensor first;
  for (const std::string& v : knob_info(knob).values) {
    Policy pol = Policy::torch();
    os << "    " << knob << "=" << std::left << std::setw(28) << v << std::right;
    try {
      pol.set(knob, v);
      quant::PtqResult r = quant::quantize_model(m, pol, calib);
      ExecContext exec;
      RunContext ctx = RunContext::inference(exec);
      const Tensor y = r.model.forward(ctx, x);
      int64_t differ = 0;
      if (!first.defined()) first = y;
      for (int64_t i = 0; i < y.numel(); ++i) differ += y.at(i) != first.at(i);
      os << " input s=" << std::setprecision(6) << r.points[0].q.scale << " zp=" << r.points[0].q.zero_point
         << ", conv1 out s=" << r.points[1].q.scale << " zp=" << r.points[1].q.zero_point << "; logits differing from the "
         << "first value: " << differ << "/" << y.numel() << "; image 0:";
      for (int j = 0; j < 3; ++j) os << " " << std::setprecision(5) << y.at(j);
      os << "\n";
    } catch (const Error& e) {
      os << " refused: " << e.what() << "\n";
    }
  }
  return os.str();
}

// A dynamic-quantization knob: the torch preset's LSTM classifier (random weights) quantized
// dynamically under torch_qnnpack with the knob at each value: logits vs fp32 and vs the first value.
std::string ex_quant_dynamic(const std::string& knob, const std::string& arch = "lstm") {
  std::ostringstream os;
  Model m = build_model(arch, Policy::torch(), 1);
  Rng rng(RngEngine::mt19937_u24, 17);
  Tensor x({8, 28, 28}, DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 2.0f * rng.uniform_f32() - 0.5f;
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  const Tensor yf = m.forward(ctx, x);
  os << "  " << (arch == "gru" ? "GRU" : "LSTM") << " classifier (28 steps x 28 features, 128 units; random "
        "weights), 8 random sequences in [-0.5, 1.5), "
        "dynamic int8 under torch_qnnpack with "
     << knob << " set:\n";
  Tensor first;
  for (const std::string& v : knob_info(knob).values) {
    Policy pol = Policy::torch();
    os << "    " << knob << "=" << std::left << std::setw(20) << v << std::right;
    try {
      pol.set(knob, v);
      Model q = quant::quantize_dynamic(m, pol);
      const Tensor y = q.forward(ctx, x);
      double sig = 0, err = 0;
      int64_t differ = 0;
      if (!first.defined()) first = y;
      for (int64_t i = 0; i < y.numel(); ++i) {
        sig += yf.at(i) * yf.at(i);
        err += (y.at(i) - yf.at(i)) * (y.at(i) - yf.at(i));
        differ += y.at(i) != first.at(i);
      }
      os << " logits vs fp32 SQNR " << std::fixed << std::setprecision(2) << 10 * std::log10(sig / err)
         << std::defaultfloat << " dB; differing from the first value: " << differ << "/" << y.numel()
         << "; sample 0:";
      for (int j = 0; j < 3; ++j) os << " " << std::setprecision(6) << y.at(j);
      os << "\n";
    } catch (const Error& e) {
      os << " refused: " << e.what() << "\n";
    }
  }
  return os.str();
}

}  // namespace

std::string explain_knob(const std::string& knob) {
  const KnobInfo& k = knob_info(knob);
  std::ostringstream os;
  os << k.name << " (" << k.group << "): " << k.what << "\n";
  if (!k.values.empty()) {
    os << "values:";
    for (const auto& v : k.values) os << " " << v;
    os << "\n";
  } else {
    os << "values: a number\n";
  }
  os << "  tensorflow (Keras 2.2.4 on TF 1.x) = " << Policy::tensorflow().get(knob) << ": " << k.tensorflow << "\n"
     << "  theano     (Keras 2.2.4 on Theano) = " << Policy::theano().get(knob) << ": " << k.theano << "\n"
     << "  torch      (PyTorch 1.13)          = " << Policy::torch().get(knob) << ": " << k.torch << "\n"
     << "source: " << k.source << "\n\nexample (computed now by driftlab's kernels):\n";
  static const std::map<std::string, std::function<std::string()>> kExamples = {
      {"conv_same_pad", ex_conv_same_pad},
      {"conv_kernel_flip", ex_conv_kernel_flip},
      {"flatten_order", ex_flatten_order},
      {"weight_layout", ex_weight_layout},
      {"init_weight", ex_init},
      {"init_bias", ex_init},
      {"embedding_init", ex_embedding_init},
      {"model_conv_padding", ex_model_conv_padding},
      {"relu_grad_at_zero", ex_relu},
      {"relu_grad_at_nan", ex_relu_nan},
      {"maxpool_grad_ties", ex_maxpool_ties},
      {"hard_sigmoid_kind", ex_hard_sigmoid},
      {"hard_sigmoid_grad_edges", ex_hard_sigmoid},
      {"ce_formulation", ex_ce},
      {"ce_clip_eps", ex_ce},
      {"loss_reduction", ex_loss_reduction},
      {"sgd_form", [] { return ex_sgd("sgd_form"); }},
      {"weight_decay_mode", ex_weight_decay},
      {"adam_form", [] { return ex_adaptive("adam_form"); }},
      {"optim_moment_update", [] { return ex_adaptive("optim_moment_update"); }},
      {"optim_square_order", [] { return ex_adaptive("optim_square_order"); }},
      {"adam_beta_power", [] { return ex_adaptive("adam_beta_power"); }},
      {"optim_scalar_precision", [] { return ex_adaptive("optim_scalar_precision"); }},
      {"adam_eps", [] { return ex_adaptive("adam_eps"); }},
      {"rmsprop_form", [] { return ex_adaptive("rmsprop_form"); }},
      {"rmsprop_rho", [] { return ex_adaptive("rmsprop_rho"); }},
      {"rmsprop_eps", [] { return ex_adaptive("rmsprop_eps"); }},
      {"rmsprop_ms_init", [] { return ex_adaptive("rmsprop_ms_init"); }},
      {"plateau_rule", ex_plateau},
      {"optim_fma", [] { return ex_adaptive("optim_fma"); }},
      {"adam_lr_t_order", [] { return ex_adaptive("adam_lr_t_order"); }},
      {"weight_decay_on_bias", ex_weight_decay},
      {"rng_engine", ex_rng},
      {"shuffle", ex_shuffle},
      {"conv_backend", [] { return ex_backend("conv_backend"); }},
      {"gemm_backend", [] { return ex_backend("gemm_backend"); }},
      {"conv_block_backend", [] { return ex_own_backend("conv_block_backend"); }},
      {"rnn_backend", [] { return ex_own_backend("rnn_backend"); }},
      {"bn_backend", [] { return ex_own_backend("bn_backend"); }},
      {"pool_backend", [] { return ex_own_backend("pool_backend"); }},
      {"act_backend", [] { return ex_own_backend("act_backend"); }},
      {"loss_backend", [] { return ex_own_backend("loss_backend"); }},
      {"sgd_backend", [] { return ex_own_backend("sgd_backend"); }},
      {"acc_order", ex_acc_order},
      {"dtype", ex_dtype},
      {"bn_eps", ex_batchnorm},
      {"bn_momentum", ex_batchnorm},
      {"bn_running_var", ex_batchnorm},
      {"bn_zero_debias", ex_batchnorm},
      {"rnn_weight_layout", [] { return ex_rnn_layout("rnn_weight_layout"); }},
      {"gru_gate_order", [] { return ex_rnn_layout("gru_gate_order"); }},
      {"rnn_num_bias",
       [] { return ex_rnn_math("rnn_num_bias", RnnCell::gru, {0, 0, 0}, {0, 0, 1}, "only the recurrent n bias b_hn = 1"); }},
      {"rnn_recurrent_activation",
       [] { return ex_rnn_math("rnn_recurrent_activation", RnnCell::lstm, {1, 0, 0.5f, 1}, {0, 0, 0, 0},
                               "b_i = b_o = 1, b_g = 0.5: h = o*tanh(i*tanh(0.5))"); }},
      {"gru_reset_after",
       [] { return ex_rnn_math("gru_reset_after", RnnCell::gru, {0, 0, 0}, {0, 0, 1},
                               "b_hn = 1, r = 1/2: after tanh(r*b_hn), before tanh(b_hn)"); }},
      {"gru_update_convention",
       [] { return ex_rnn_math("gru_update_convention", RnnCell::gru, {0, 1, 1}, {0, 0, 0},
                               "b_z = b_n = 1: h = (1-z)*n or z*n"); }},
      {"rnn_kernel_init", [] { return ex_rnn_init("rnn_kernel_init", 0); }},
      {"rnn_recurrent_init", [] { return ex_rnn_init("rnn_recurrent_init", 1); }},
      {"rnn_bias_init", [] { return ex_rnn_init("rnn_bias_init", 2); }},
      {"lstm_forget_bias_init", [] { return ex_rnn_init("lstm_forget_bias_init", 2); }},
      {"lstm_peepholes", ex_peepholes},
      {"rnn_mask", ex_rnn_mask},
      {"cuda_kernels", [] { return ex_cuda("cuda_kernels"); }},
      {"tf32_matmul", [] { return ex_cuda("tf32_matmul"); }},
      {"tf32_conv", [] { return ex_cuda("tf32_conv"); }},
      {"cuda_deterministic", [] { return ex_cuda("cuda_deterministic"); }},
      {"cudnn_algo_search", [] { return ex_cuda("cudnn_algo_search"); }},
      {"quant_scheme", [] { return ex_quant("quant_scheme"); }},
      {"quant_act_dtype", [] { return ex_quant("quant_act_dtype"); }},
      {"quant_act_range", [] { return ex_quant("quant_act_range"); }},
      {"quant_observer", [] { return ex_quant("quant_observer"); }},
      {"quant_weight_range", [] { return ex_quant("quant_weight_range"); }},
      {"quant_conv_weights", [] { return ex_quant("quant_conv_weights"); }},
      {"quant_dense_weights", [] { return ex_quant("quant_dense_weights"); }},
      {"quant_weight_scale_op", [] { return ex_quant("quant_weight_scale_op"); }},
      {"quant_act_scale_op", [] { return ex_quant("quant_act_scale_op"); }},
      {"quant_round", [] { return ex_quant("quant_round"); }},
      {"quant_zp_round", [] { return ex_quant("quant_zp_round"); }},
      {"quant_zp_form", [] { return ex_quant("quant_zp_form"); }},
      {"quant_scale_precision", [] { return ex_quant("quant_scale_precision"); }},
      {"quant_scale_floor", [] { return ex_quant("quant_scale_floor"); }},
      {"quant_bias", [] { return ex_quant("quant_bias"); }},
      {"quant_bias_product", [] { return ex_quant("quant_bias_product"); }},
      {"quant_requant", [] { return ex_quant("quant_requant"); }},
      {"quant_multiplier", [] { return ex_quant("quant_multiplier"); }},
      {"quant_relu", [] { return ex_quant("quant_relu"); }},
      {"quant_u8s8_dot", [] { return ex_quant("quant_u8s8_dot"); }},
      {"quant_backend", [] { return ex_quant("quant_backend"); }},
      {"quant_add", [] { return ex_quant("quant_add"); }},
      {"quant_avg_pool", [] { return ex_quant("quant_avg_pool"); }},
      {"quant_dyn_act", [] { return ex_quant_dynamic("quant_dyn_act"); }},
      {"quant_dyn_range", [] { return ex_quant_dynamic("quant_dyn_range"); }},
      {"quant_dyn_weights", [] { return ex_quant_dynamic("quant_dyn_weights"); }},
      {"quant_dyn_output", [] { return ex_quant_dynamic("quant_dyn_output"); }},
      {"quant_dyn_input_proj", [] { return ex_quant_dynamic("quant_dyn_input_proj"); }},
      {"quant_dyn_gru", [] { return ex_quant_dynamic("quant_dyn_gru", "gru"); }},
  };
  auto it = kExamples.find(knob);
  check(it != kExamples.end(), "explain: knob '", knob, "' has no worked example yet");
  os << it->second();
  return os.str();
}

}  // namespace driftlab
