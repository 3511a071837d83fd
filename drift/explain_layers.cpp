// `driftlab explain`'s worked examples for the layer knobs: padding, flip, flatten order, layouts, initialisers, activations, pooling, BatchNorm, dtype (drift/explain_examples.h).
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
  for (const std::string& value : knob_info("conv_same_pad").values) {
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
    auto* block = layer_as<ResidualLayer>(m.net->layer(9));
    auto* conv = block ? layer_as<Conv2dLayer>(block->main().layer(0)) : nullptr;
    check(conv != nullptr, "explain: ResNet-20's layer 9 is no residual block starting with a convolution");
    const Conv2dParams& p = conv->op_params();
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

}  // namespace explain
}  // namespace driftlab
