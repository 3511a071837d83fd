// `driftlab explain`'s worked examples for the numeric knobs: CPU kernel backends, accumulation order, the CUDA switches (drift/explain_examples.h).
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
#include "engine/layers/dense_layer.h"
#include "engine/layers/math_mode.h"
#include "engine/layers/embedding_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/gru_layer.h"
#include "engine/layers/lstm_layer.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "engine/layers/init.h"
#include "core/ops/activation.h"
#include "core/ops/loss_scale.h"
#include "core/ops/reduced_precision.h"
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

// conv_algorithm: one 3x3 convolution (64 -> 64 channels over 8x8, batch 4, values in [-1, 1]) on
// oneDNN's kernel under each value: the algorithm that ran, and each result's largest distance to
// the float64 sums (the reference kernel) over the largest sum of |x w| of an output.
std::string ex_conv_algorithm() {
  std::ostringstream os;
  Conv2dParams p;
  p.n = 4;
  p.c = p.k = 64;
  p.h = p.w = 8;
  p.r = p.s = 3;
  p.pad_t = p.pad_b = p.pad_l = p.pad_r = 1;
  Rng local(RngEngine::mt19937_u24, 5);
  Tensor x(p.x_shape(), DType::f32), w(p.w_shape(), DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = local.uniform<float>(-1.f, 1.f);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = local.uniform<float>(-1.f, 1.f);
  auto abs64 = [](const Tensor& t) {
    Tensor a = t.to(DType::f64);
    for (int64_t i = 0; i < a.numel(); ++i) a.data<double>()[i] = std::fabs(a.data<double>()[i]);
    return a;
  };
  Tensor exact(p.y_shape(), DType::f64), scale(p.y_shape(), DType::f64);
  conv2d_forward_ref(p, x.to(DType::f64), w.to(DType::f64), nullptr, exact);
  conv2d_forward_ref(p, abs64(x), abs64(w), nullptr, scale);  // each output's sum of |x w|
  const double top = *std::max_element(scale.data<double>(), scale.data<double>() + scale.numel());
  os << "  one convolution 64 -> 64 @3x3 over 8x8, batch 4, on conv_backend=onednn; |y - exact| over the largest "
        "sum of |x w| of an output ("
     << top << "):\n";
  ExecContext exec;
  Tensor direct;
  for (ConvAlgorithm a : {ConvAlgorithm::direct, ConvAlgorithm::winograd}) {
    p.algorithm = a;
    const Conv2dKernel& k = exec.kernels.conv2d.select(KernelBackend::onednn, p, DType::f32);
    Tensor y(p.y_shape(), DType::f32);
    k.forward(p, x, w, nullptr, y);
    double worst = 0;
    for (int64_t o = 0; o < y.numel(); ++o)
      worst = std::max(worst, std::fabs(static_cast<double>(y.data<float>()[o]) - exact.data<double>()[o]));
    os << "    conv_algorithm=" << (a == ConvAlgorithm::direct ? "direct  " : "winograd") << " ran "
       << (k.algorithm ? k.algorithm(p) : k.name) << ": largest error " << worst / top;
    if (a == ConvAlgorithm::winograd) {
      int64_t differ = 0;
      for (int64_t i = 0; i < y.numel(); ++i) differ += y.data<float>()[i] != direct.data<float>()[i];
      os << ", " << differ << " of " << y.numel() << " outputs other bits than direct's";
    }
    os << "\n";
    if (a == ConvAlgorithm::direct) direct = y;
  }
  os << "  the same mathematics; Winograd's transforms add roundings of their own.\n";
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

// One output unit under policy p: a convolution over c channels with a k x k kernel on a k x k
// input, or a dense unit of the same c*k*k inputs (one product per input either way), seed 1;
// and its (zero) input of one sample.
namespace {
struct OneUnit {
  std::unique_ptr<Layer> layer;
  Tensor x;
};
OneUnit one_unit(const Policy& p, bool conv, int64_t c, int64_t k, bool bias) {
  Rng rng(p.rng_engine, 1);
  OneUnit u;
  if (conv) {
    Conv2dSpec cs;
    cs.out_channels = 1;
    cs.kernel_h = cs.kernel_w = k;
    cs.bias = bias;
    u.layer = std::make_unique<Conv2dLayer>(cs, Shape{c, k, k}, p, rng);
    u.x = Tensor({1, c, k, k}, DType::f32);
  } else {
    u.layer = std::make_unique<DenseLayer>(1, Shape{c * k * k}, p, rng, bias);
    u.x = Tensor({1, c * k * k}, DType::f32);
  }
  return u;
}
}  // namespace

// The math modes: one output of 256 float32 products (x_i = sin(i + 1), w_i = cos(i) / 8, no
// bias), a dense unit for math_matmul and tf32_rounding, a 4x4 convolution over 16 channels for
// math_conv, under each value against the float64 sum; for tf32_rounding also the three rules on
// operands at a tie.
std::string ex_math(const std::string& knob) {
  std::ostringstream os;
  os << std::setprecision(9);
  const bool conv = knob == "math_conv";
  auto output = [conv](const std::string& spec) {
    OneUnit u = one_unit(Policy::parse(spec), conv, 16, 4, false);
    std::unique_ptr<Layer>& l = u.layer;
    Tensor& x = u.x;
    Tensor& w = l->params()[0]->value;  // 256 values either way, in the order of x's
    for (int i = 0; i < 256; ++i) {
      x.data<float>()[i] = static_cast<float>(std::sin(i + 1.0));
      w.data<float>()[i] = static_cast<float>(std::cos(static_cast<double>(i)) / 8);
    }
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    return static_cast<double>(l->forward(ctx, x).data<float>()[0]);
  };
  double exact = 0;
  for (int i = 0; i < 256; ++i)
    exact += static_cast<double>(static_cast<float>(std::sin(i + 1.0))) *
             static_cast<double>(static_cast<float>(std::cos(static_cast<double>(i)) / 8));
  os << "  " << (conv ? "one convolution output (16 channels, 4x4)" : "one dense unit") << ", 256 float32 products;"
     << " float64 sum " << exact << "\n";
  std::vector<std::string> specs;
  if (knob == "tf32_rounding") {
    for (const float v : {1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11), 1.0f + std::ldexp(1.0f, -12)})
      os << "  operand " << v << " -> nearest_even " << round_to_tf32(v) << ", nearest_away "
         << round_to_tf32(v, Rounding::nearest_away) << ", truncate " << round_to_tf32(v, Rounding::truncate) << "\n";
    for (const std::string& v : knob_info(knob).values) specs.push_back("torch,math_matmul=tf32,tf32_rounding=" + v);
  } else {
    for (const std::string& v : knob_info(knob).values) specs.push_back("torch," + knob + "=" + v);
  }
  for (const std::string& spec : specs) {
    const double y = output(spec);
    os << "  " << spec << " -> " << y << " (error " << y - exact << ")\n";
  }
  return os.str();
}

// math_rnn: an LSTM (16 features, 32 units, seed 1) over 8 steps of x = sin(i) / 2: its last state
// under float32 and tf32 against the same layer (the float32 weights) computed in float64.
namespace {
// An LSTM of 32 units over 8 steps (weights seed 1, x = sin(i) / 2) under each spec: its last
// state's largest difference from the float64 layer's, or the refusal a spec meets.
std::string rnn_last_state_sweep(const std::vector<std::string>& specs) {
  std::ostringstream os;
  os << std::setprecision(9);
  const Policy p32 = Policy::torch();
  Rng rng(p32.rng_engine, 1);
  RnnSpec s;
  s.units = 32;
  LstmLayer weights(s, Shape{8, 16}, p32, rng);
  auto last_state = [&](const std::string& spec) {
    const Policy p = Policy::parse(spec);
    Rng unused(p.rng_engine, 1);
    LstmLayer l(s, Shape{8, 16}, p, unused);
    const DType dt = p.dtype == FloatType::float64 ? DType::f64 : DType::f32;
    auto dst = l.params();
    auto src = weights.params();
    for (std::size_t i = 0; i < dst.size(); ++i) dst[i]->value = src[i]->value.to(dt);
    Tensor x({1, 8, 16}, DType::f32);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(std::sin(i) / 2);
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    const Tensor h = l.forward(ctx, x.to(dt));
    std::vector<double> v;
    for (int64_t j = 0; j < h.numel(); ++j) v.push_back(h.at(j));
    return v;
  };
  const std::vector<double> ref = last_state("torch,dtype=float64");
  os << "  an LSTM of 32 units over 8 steps; its last state's largest difference from float64:\n";
  for (const std::string& spec : specs) {
    try {
      const std::vector<double> h = last_state(spec);
      double worst = 0;
      for (std::size_t j = 0; j < h.size(); ++j) worst = std::max(worst, std::abs(h[j] - ref[j]));
      os << "  " << spec << " -> " << worst << "\n";
    } catch (const Error& e) {
      os << "  " << spec << " -> refused: " << e.what() << "\n";
    }
  }
  return os.str();
}
}  // namespace

std::string ex_math_rnn() {
  std::vector<std::string> specs;
  for (const std::string& v : knob_info("math_rnn").values) specs.push_back("torch,math_rnn=" + v);
  return rnn_last_state_sweep(specs);
}

// rnn_autocast_rule, rnn_input_bias_rounding: the same LSTM under autocast=bfloat16 with each value.
std::string ex_rnn_autocast(const std::string& knob) {
  std::vector<std::string> specs{"torch"};
  for (const std::string& v : knob_info(knob).values) specs.push_back("torch,autocast=bfloat16," + knob + "=" + v);
  return rnn_last_state_sweep(specs);
}

// Autocast: ResNet-20 (seed 1, inference) on one image (x = sin(i) / 2) under each value: the
// format every layer's output is held in (what autocast's op lists decide), and the logits
// against autocast=off.
std::string ex_autocast() {
  std::ostringstream os;
  os << std::setprecision(6);
  std::vector<double> base;
  for (const std::string& v : knob_info("autocast").values) {
    Model m = build_model("resnet20", Policy::parse("torch,autocast=" + v), 1);
    Tensor x({1, 3, 32, 32}, DType::f32);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(std::sin(static_cast<double>(i)) / 2);
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    const Tensor y = m.forward(ctx, x);
    std::map<std::string, std::string> formats;  // kind -> the formats its outputs are in
    for (std::size_t i = 0; i < m.net->size(); ++i) {
      std::string& f = formats[m.net->layer(i).kind()];
      const std::string name = math_mode_name(m.net->output_format(i));
      if (f.find(name) == std::string::npos) f += (f.empty() ? "" : "/") + name;
    }
    os << "  torch,autocast=" << v << ": layer outputs in";
    for (const auto& [kind, f] : formats) os << " " << kind << " " << f << ";";
    double worst = 0, top = 0;
    for (int64_t j = 0; j < y.numel(); ++j) {
      if (base.empty()) top = std::max(top, std::abs(static_cast<double>(y.data<float>()[j])));
      else worst = std::max(worst, std::abs(y.data<float>()[j] - base[static_cast<std::size_t>(j)]));
    }
    if (base.empty()) {
      for (int64_t j = 0; j < y.numel(); ++j) base.push_back(y.data<float>()[j]);
      os << " logits up to " << top << "\n";
    } else {
      os << " logits differ from off by up to " << worst << "\n";
    }
  }
  os << "  (inside the residual blocks the same rule: conv2d and dense give the format, every other layer"
     << " keeps its input's)\n";
  return os.str();
}

// autocast_input_cast: a network that begins with BatchNorm (BatchNorm -> ReLU -> flatten -> dense
// 5 on 2x4x4 inputs, train semantics, seed 1) under autocast=bfloat16 with each value: the format
// of each layer's output and the logits against the float32 network; then LeNet-5, which begins
// with a convolution, where the two values agree bit for bit.
std::string ex_autocast_input_cast() {
  std::ostringstream os;
  os << std::setprecision(6);
  Tensor x({4, 2, 4, 4}, DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i)));
  auto run = [&](const std::string& spec, std::string* formats) {
    const Policy p = Policy::parse(spec);
    Rng rng(p.rng_engine, 1);
    Sequential net(Shape{2, 4, 4});
    net.add(std::make_unique<BatchNormLayer>(net.current_shape(), p));
    net.add(std::make_unique<ActivationLayer>(ActKind::relu, net.current_shape(), p));
    net.add(std::make_unique<FlattenLayer>(net.current_shape(), p));
    net.add(std::make_unique<DenseLayer>(5, net.current_shape(), p, rng));
    net.apply_input_cast(p);
    if (formats)
      for (std::size_t i = 0; i < net.size(); ++i)
        *formats += std::string(i ? ", " : "") + net.layer(i).kind() + " " + math_mode_name(net.output_format(i));
    ExecContext exec;
    RunContext ctx = RunContext::recorded(exec, Semantics::train);
    return net.forward(ctx, x);
  };
  const Tensor base = run("torch", nullptr);
  for (const std::string& v : knob_info("autocast_input_cast").values) {
    std::string formats;
    const Tensor y = run("torch,autocast=bfloat16,autocast_input_cast=" + v, &formats);
    double worst = 0;
    for (int64_t j = 0; j < y.numel(); ++j) worst = std::max(worst, std::abs(static_cast<double>(y.data<float>()[j] - base.data<float>()[j])));
    os << "  autocast_input_cast=" << v << ": " << formats << "; logits differ from float32 by up to " << worst << "\n";
  }
  Tensor xl({1, 1, 28, 28}, DType::f32);
  for (int64_t i = 0; i < xl.numel(); ++i) xl.data<float>()[i] = static_cast<float>(std::sin(static_cast<double>(i)) / 2 + 0.5);
  std::vector<Tensor> logits;
  for (const std::string& v : knob_info("autocast_input_cast").values) {
    Model m = build_model("lenet5", Policy::parse("tensorflow,autocast=bfloat16,autocast_input_cast=" + v), 1);
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    logits.push_back(m.forward(ctx, xl));
  }
  int64_t differ = 0;
  for (int64_t j = 0; j < logits[0].numel(); ++j) differ += logits[0].data<float>()[j] != logits[1].data<float>()[j];
  os << "  LeNet-5 (a convolution first, which casts its input under both): " << differ << " of "
     << logits[0].numel() << " logits differ between the two values\n";
  return os.str();
}

// Loss scaling: why a float16 gradient needs it (a small gradient flushed to zero, the same one
// scaled, held, and unscaled back), then the dynamic rule's scale over a run whose steps overflow
// as given, under each value of the knob (the others at the torch preset's).
std::string ex_loss_scale(const std::string& knob) {
  std::ostringstream os;
  os << std::setprecision(6);
  const double g = 2e-8;
  const float scale = 65536.0f;
  os << "  a float16 gradient of " << g << ": held as " << round_to_fp16(static_cast<float>(g)) << "; scaled by "
     << scale << " it is held as " << round_to_fp16(static_cast<float>(g) * scale) << ", unscaled "
     << round_to_fp16(static_cast<float>(g) * scale) / scale << "\n";
  std::vector<int> overflow = {1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0};
  if (knob == "loss_scale_min") overflow = {1, 1, 1, 1, 0, 0, 0};
  os << "  steps overflowing:";
  for (int f : overflow) os << " " << (f ? "x" : ".");
  os << "\n";
  std::vector<std::string> specs;
  if (knob == "loss_scale") specs = {"torch", "torch,loss_scale=static", "torch,loss_scale=dynamic"};
  if (knob == "loss_scale_min")
    specs = {"torch,loss_scale=dynamic,loss_scale_init=4", "torch,loss_scale=dynamic,loss_scale_init=4,loss_scale_min=1"};
  if (knob == "loss_scale_skipped_step")
    specs = {"torch,loss_scale=dynamic", "torch,loss_scale=dynamic,loss_scale_skipped_step=counted"};
  if (knob == "loss_scale_init") specs = {"torch,loss_scale=dynamic", "tensorflow,loss_scale=dynamic"};
  if (knob == "loss_scale_growth_interval")
    specs = {"torch,loss_scale=dynamic", "torch,loss_scale=dynamic,loss_scale_growth_interval=4"};
  for (const std::string& spec : specs) {
    const Policy p = Policy::parse(spec);
    os << "  " << spec << ":";
    if (p.loss_scale == LossScale::none) {
      os << " every step taken, the gradient as computed (the small one above: 0)\n";
      continue;
    }
    if (p.loss_scale == LossScale::fixed) {
      os << " the scale stays " << p.loss_scale_init << "; every step taken (an overflow is a non-finite step:"
         << " --on-nonfinite)\n";
      continue;
    }
    DynamicLossScale s = loss_scale_rule(p);
    std::ostringstream adam_t;
    int64_t taken = 0, counted = 0;
    os << " scale before each step";
    for (int f : overflow) {
      os << " " << s.scale;
      if (s.update(f != 0)) adam_t << " " << ++taken + counted;
      else if (p.loss_scale_skipped_step == SkippedStep::counted) ++counted;
    }
    os << "\n";
    if (knob == "loss_scale_skipped_step") os << "    Adam's t at each step taken:" << adam_t.str() << "\n";
  }
  return os.str();
}

// Bias rounding: one float16 dense unit whose product is 1 + 0.4 * 2^-10 (inputs 1 and 0.0004,
// weights 1) and whose bias is 2^-12, under each value: once rounds 1 + 0.65 * 2^-10 up, twice
// rounds the product down to 1 first and 1 + 2^-12 down again.
std::string ex_bias_rounding(const std::string& knob) {
  std::ostringstream os;
  os << std::setprecision(9);
  const bool conv = knob == "conv_bias_rounding";
  os << "  one " << (conv ? "1x1 convolution output" : "dense unit")
     << " under autocast=float16 (float16 step at 1: 2^-10 = 0.0009765625): inputs 1 and 0.0004,"
     << " weights 1, bias 2^-12\n";
  for (const std::string& v : knob_info(knob).values) {
    OneUnit u = one_unit(Policy::parse("torch,autocast=float16," + knob + "=" + v), conv, 2, 1, true);
    std::unique_ptr<Layer>& l = u.layer;
    Tensor& x = u.x;
    x.data<float>()[0] = 1.0f;
    x.data<float>()[1] = 0.0004f;
    l->params()[0]->value.data<float>()[0] = l->params()[0]->value.data<float>()[1] = 1.0f;
    l->params()[1]->value.data<float>()[0] = std::ldexp(1.0f, -12);
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    const float y = l->forward(ctx, x).data<float>()[0];
    os << "  torch,autocast=float16," << knob << "=" << v << " -> " << y << "\n";
  }
  return os.str();
}

// matmul_sum: one dense weight's gradient over a batch of 300 (x_i = 1 + sin(i) / 4, dL/dy_i =
// cos(i) / 2, bfloat16 values under autocast=bfloat16), a sum of 300 products, under each rule
// against the float64 sum of the same (rounded) terms; and the sum of 300 ones, where bfloat16's
// arithmetic stops at 256.
std::string ex_matmul_sum() {
  std::ostringstream os;
  os << std::setprecision(9);
  const int64_t n = 300;
  os << "  dL/dW of a dense layer (1 input, 1 unit) over a batch of " << n << " under autocast=bfloat16\n";
  for (const bool ones : {false, true}) {
    Tensor x({n, 1}, DType::f32), dy({n, 1}, DType::f32);
    double exact = 0;  // of the terms as autocast takes them, rounded to bfloat16
    for (int64_t i = 0; i < n; ++i) {
      x.data<float>()[i] = ones ? 1.0f : static_cast<float>(1.0 + std::sin(i) / 4);
      dy.data<float>()[i] = ones ? 1.0f : static_cast<float>(std::cos(i) / 2);
      exact += static_cast<double>(round_to_bf16(x.data<float>()[i])) * round_to_bf16(dy.data<float>()[i]);
    }
    os << "  " << (ones ? "x_i = 1, dL/dy_i = 1" : "x_i = 1 + sin(i)/4, dL/dy_i = cos(i)/2") << " (float64 sum "
       << exact << "):\n";
    for (const std::string& v : knob_info("matmul_sum").values) {
      OneUnit u = one_unit(Policy::parse("torch,autocast=bfloat16,matmul_sum=" + v), false, 1, 1, false);
      ExecContext exec;
      RunContext ctx = RunContext::training(exec, nullptr);
      u.layer->forward(ctx, x);
      Param* w = u.layer->params()[0];
      w->grad.fill(0.0);
      u.layer->backward(ctx, dy);
      const double g = w->grad.data<float>()[0];
      os << "    torch,autocast=bfloat16,matmul_sum=" << v << " -> " << g << " (off by " << std::abs(g - exact) << ")\n";
    }
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

}  // namespace explain
}  // namespace driftlab
