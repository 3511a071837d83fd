// The casebook's layer and training cases (driftlab/casebook.h; pages in docs/casebook/).
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/ops/pool2d.h"
#include "core/ops/softmax_xent.h"
#include "drift/drift.h"
#include "driftlab/casebook.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/rnn_layer.h"
#include "engine/policy.h"
#include "engine/random.h"
#include "engine/train/runner.h"
#include "kernels/cpu/ref/ref.h"

namespace driftlab {
namespace {

// max|a - b| / max|b|
double rel_max_diff(const Tensor& a, const Tensor& b) { return max_diff(a, b).rel; }

Tensor uniform(const Shape& s, uint64_t seed, double lo, double hi) {
  Rng rng(RngEngine::mt19937_u24, seed);
  Tensor t(s, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(lo + (hi - lo) * rng.uniform_f64());
  return t;
}

Tensor forward(Layer& l, const Tensor& x) {
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  return l.forward(ctx, x);
}

// Copies a's parameters into b (the same kind of layer, the same shapes).
void copy_params(Layer& from, Layer& to) {
  auto a = from.params(), b = to.params();
  check(a.size() == b.size(), "case: layers of different kinds");
  for (std::size_t i = 0; i < a.size(); ++i) b[i]->value = a[i]->value.clone();
}

// keras-team/keras#19291: a PyTorch Conv2d(k=3, s=2, padding=1) ported to Keras Conv2D(padding='same').
CaseResult conv_same_stride2() {
  Conv2dSpec spec;
  spec.out_channels = 8;
  spec.kernel_h = spec.kernel_w = 3;
  spec.stride = 2;
  spec.pad = PadMode::same;
  spec.bias = false;
  const Shape in{3, 16, 16};  // an even input, as the reporter's 128x128 stem
  const Tensor x = uniform({1, 3, 16, 16}, 1, -1, 1);
  auto layer = [&](const std::string& policy) {
    Rng rng(RngEngine::mt19937_u24, 7);
    return std::make_unique<Conv2dLayer>(spec, in, Policy::parse(policy), rng);
  };
  auto torch = layer("torch"), keras = layer("tensorflow"), fixed = layer("torch,conv_same_pad=after");
  copy_params(*torch, *keras);
  copy_params(*torch, *fixed);
  const Tensor yt = forward(*torch, x), yk = forward(*keras, x), yf = forward(*fixed, x);
  const Conv2dParams pt = resolve_conv2d(Policy::torch(), in, spec), pk = resolve_conv2d(Policy::tensorflow(), in, spec);
  int64_t differ = 0;
  for (int64_t i = 0; i < yt.numel(); ++i) differ += yt.at(i) != yk.at(i);
  CaseResult r;
  r.reporter = rel_max_diff(yt, yk);
  r.flipped = rel_max_diff(yf, yk);
  std::ostringstream os;
  os << "  one Conv2D, 3 -> 8 channels, 3x3, stride 2, on a 16x16 input (even, as the reporter's 128x128), the same weights\n"
     << "  pads top/bottom/left/right: PyTorch padding=1 " << pt.pad_t << "/" << pt.pad_b << "/" << pt.pad_l << "/" << pt.pad_r
     << ", Keras 'same' " << pk.pad_t << "/" << pk.pad_b << "/" << pk.pad_l << "/" << pk.pad_r << "\n"
     << "  outputs that differ: " << differ << " of " << yt.numel()
     << " (every window moves by one pixel, not only the border the reporter saw)\n";
  r.text = os.str();
  return r;
}

// keras-team/keras#7563: Keras's categorical_crossentropy on probabilities against the logits form.
CaseResult ce_clip() {
  const Tensor z = Tensor::from<float>({2, 3}, {300, 100, 100, -100, 200, 500});  // the thread's logits
  const std::vector<int32_t> labels{0, 1};                                       // its one-hot Y
  auto loss = [&](const std::string& policy, Tensor* dz) {
    const SoftmaxXentParams p = resolve_loss(Policy::parse(policy));
    if (dz) softmax_xent_backward_ref(p, z, labels, *dz);
    return softmax_xent_forward_ref(p, z, labels);
  };
  Tensor gk({2, 3}, DType::f32), gt({2, 3}, DType::f32);
  const double keras = loss("tensorflow", &gk), logits = loss("torch", &gt);
  const double fixed = loss("tensorflow,ce_formulation=log_softmax", nullptr);
  CaseResult r;
  r.reporter = std::fabs(keras - logits);
  r.flipped = std::fabs(fixed - logits);
  std::ostringstream os;
  os << std::setprecision(10) << "  logits [[300,100,100],[-100,200,500]], labels [0, 1], mean over the batch\n"
     << "  Keras categorical_crossentropy (softmax, clip to [1e-7, 1-1e-7], -log): " << keras
     << "   (the thread: 8.05904786964)\n"
     << "  softmax_cross_entropy_with_logits / PyTorch CrossEntropyLoss:           " << logits << "   (the thread: 150.0)\n"
     << std::setprecision(4) << "  dL/dz of sample 2 (its label's probability is clipped): Keras [" << gk.at(3) << ", " << gk.at(4)
     << ", " << gk.at(5) << "], logits form [" << gt.at(3) << ", " << gt.at(4) << ", " << gt.at(5) << "]\n";
  r.text = os.str();
  return r;
}

// pytorch/pytorch#58434 (numbers of the kind in pytorch/pytorch#66212): float32 matmul in TF32.
CaseResult tf32_matmul() {
  const Tensor x = uniform({1, 1000}, 3, -1, 1);
  auto layer = [&](const std::string& policy) {
    Rng rng(RngEngine::mt19937_u24, 5);
    return std::make_unique<DenseLayer>(50, Shape{1000}, Policy::parse(policy), rng, false);
  };
  auto f32 = layer("torch"), tf32 = layer("torch,math_matmul=tf32");
  copy_params(*f32, *tf32);
  const Tensor& w = f32->params()[0]->value;
  std::vector<double> exact(50, 0.0);
  for (int64_t o = 0; o < 50; ++o)
    for (int64_t i = 0; i < 1000; ++i) exact[o] += double(w.at(o * 1000 + i)) * double(x.at(i));
  auto rel = [&](const Tensor& y) {
    double num = 0, den = 0;
    for (int64_t o = 0; o < 50; ++o) {
      num += (y.at(o) - exact[o]) * (y.at(o) - exact[o]);
      den += exact[o] * exact[o];
    }
    return std::sqrt(num / den);
  };
  CaseResult r;
  r.reporter = rel(forward(*tf32, x));
  r.flipped = rel(forward(*f32, x));
  std::ostringstream os;
  os << std::setprecision(3) << "  A @ x with A 50x1000 (a dense layer's weights), x of 1000 values, against the float64 product:\n"
     << "  relative error ||y - y64|| / ||y64||: TF32 operands (an Ampere GPU, allow_tf32 on) " << r.reporter
     << ", float32 " << r.flipped << "\n"
     << "  (pytorch/pytorch#66212 measured ~3e-4 on an RTX 3090 and ~1e-7 with allow_tf32 = False)\n";
  r.text = os.str();
  return r;
}

// huggingface/transformers#19454: PyTorch's BatchNorm momentum (0.1) typed into Keras's momentum.
// Both halves are measured against PyTorch's rule computed here in double (torch/nn/modules/batchnorm.py:
// running = (1 - 0.1) * running + 0.1 * batch statistic, the variance unbiased; eval y = (x - mean) /
// sqrt(var + 1e-5) with gamma 1 and beta 0), not against driftlab's own torch preset.
CaseResult bn_momentum() {
  const Shape in{4, 6, 6};
  auto layer = [&](const std::string& policy) { return std::make_unique<BatchNormLayer>(in, Policy::parse(policy)); };
  auto ported = layer("torch,bn_momentum=0.1,bn_eps=0.001"), fixed = layer("torch,bn_momentum=0.9,bn_eps=1e-5");
  ExecContext exec;
  Rng rng(RngEngine::mt19937_u24, 11);
  std::vector<double> mean(4, 0.0), var(4, 1.0);  // PyTorch's initial running statistics
  // Ten training steps on batches whose mean and spread drift, as a training run's activations do.
  for (int s = 0; s < 10; ++s) {
    const Tensor x = uniform({8, 4, 6, 6}, 100 + s, -1 + 0.3 * s, 1 + 0.5 * s);
    for (auto* l : {ported.get(), fixed.get()}) {
      RunContext ctx = RunContext::training(exec, &rng);
      l->forward(ctx, x);
    }
    for (int64_t c = 0; c < 4; ++c) {
      double sum = 0, sq = 0;
      const int64_t m = 8 * 36;
      for (int64_t n = 0; n < 8; ++n)
        for (int64_t i = 0; i < 36; ++i) sum += x.at((n * 4 + c) * 36 + i);
      const double mu = sum / m;
      for (int64_t n = 0; n < 8; ++n)
        for (int64_t i = 0; i < 36; ++i) sq += (x.at((n * 4 + c) * 36 + i) - mu) * (x.at((n * 4 + c) * 36 + i) - mu);
      mean[c] = 0.9 * mean[c] + 0.1 * mu;
      var[c] = 0.9 * var[c] + 0.1 * sq / (m - 1);
    }
  }
  const Tensor x = uniform({8, 4, 6, 6}, 999, -2, 4);
  Tensor yt(x.shape(), DType::f32);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = (i / 36) % 4;
    yt.data<float>()[i] = static_cast<float>((x.at(i) - mean[c]) / std::sqrt(var[c] + 1e-5));
  }
  CaseResult r;
  r.reporter = rel_max_diff(forward(*ported, x), yt);
  r.flipped = rel_max_diff(forward(*fixed, x), yt);
  std::ostringstream os;
  os << std::setprecision(3) << "  one BatchNorm2d (4 channels), 10 training steps on drifting batches, then inference on one batch\n"
     << "  PyTorch BatchNorm2d(momentum=0.1, eps=1e-5) keeps 0.9 of its running statistics per step (its rule computed\n"
     << "  here in double); the port BatchNormalization(momentum=0.1, epsilon=1e-3) keeps 0.1 of them:\n"
     << "  max|y_port - y_torch| / max|y_torch| " << r.reporter << "; with momentum 0.9, epsilon 1e-5: " << r.flipped << "\n";
  r.text = os.str();
  return r;
}

// keras-team/keras#9112: a GRU trained with CuDNN's convention (reset after) run by Keras's GRU (reset before).
// Both halves are measured against the CuDNN / PyTorch GRU computed here in double from the layer's
// weights in PyTorch's layout (torch.nn.GRU's documented equations; gates r, z, n in that order).
CaseResult gru_reset_after() {
  RnnSpec spec;
  spec.units = 16;
  const int64_t N = 4, T = 6, F = 8, H = 16;
  const Shape in{T, F};
  const Tensor x = uniform({N, T, F}, 13, -1, 1);
  auto layer = [&](const std::string& policy) {
    Rng rng(RngEngine::mt19937_u24, 17);
    return std::make_unique<RnnLayer>(RnnCell::gru, spec, in, Policy::parse(policy), rng);
  };
  auto fixed = layer("torch"), keras = layer("torch,gru_reset_after=before");
  copy_params(*fixed, *keras);
  const TorchRnnWeights w = fixed->torch_weights();
  Tensor yc({N, H}, DType::f32);
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> h(H, 0.0), g(3 * H), gh(3 * H);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t j = 0; j < 3 * H; ++j) {
        double a = w.bias_ih.at(j), b = w.bias_hh.at(j);
        for (int64_t f = 0; f < F; ++f) a += double(w.weight_ih.at(j * F + f)) * x.at((n * T + t) * F + f);
        for (int64_t k = 0; k < H; ++k) b += double(w.weight_hh.at(j * H + k)) * h[k];
        g[j] = a, gh[j] = b;
      }
      for (int64_t k = 0; k < H; ++k) {
        const double r = 1 / (1 + std::exp(-(g[k] + gh[k]))), z = 1 / (1 + std::exp(-(g[H + k] + gh[H + k])));
        const double c = std::tanh(g[2 * H + k] + r * gh[2 * H + k]);
        h[k] = (1 - z) * c + z * h[k];
      }
    }
    for (int64_t k = 0; k < H; ++k) yc.data<float>()[n * H + k] = static_cast<float>(h[k]);
  }
  CaseResult r;
  r.reporter = rel_max_diff(forward(*keras, x), yc);
  r.flipped = rel_max_diff(forward(*fixed, x), yc);
  std::ostringstream os;
  os << std::setprecision(3) << "  one GRU (8 features, 16 units, 6 steps, batch 4), the same weights and both biases\n"
     << "  CuDNN / PyTorch: n = tanh(W_in x + b_in + r * (W_hn h + b_hn)) (computed here in double); Keras's GRU\n"
     << "  (reset_after=False): n = tanh(W_in x + b_in + W_hn (r * h) + b_hn)\n"
     << "  last state, max|h - h_cudnn| / max|h_cudnn|: Keras's GRU " << r.reporter << ", reset_after " << r.flipped << "\n";
  r.text = os.str();
  return r;
}

// tensorflow/tensorflow#65381: Keras 3's hard_sigmoid is relu6(x + 3) / 6, Keras 2's clip(0.2 x + 0.5).
CaseResult keras3_hard_sigmoid() {
  std::vector<float> v;
  for (int i = -40; i < 40; ++i) v.push_back(static_cast<float>(i) / 10);  // the reporter's x / 10, x in -40..39
  const Tensor x = Tensor::from<float>({1, static_cast<int64_t>(v.size())}, v);
  auto run = [&](const std::string& policy) {
    ActivationLayer l(ActKind::hard_sigmoid, Shape{static_cast<int64_t>(v.size())}, Policy::parse(policy));
    return forward(l, x);
  };
  const Tensor k2 = run("tensorflow"), k3 = run("torch");  // Keras 3's is PyTorch's Hardsigmoid
  double gap = 0, at = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (std::fabs(k3.at(i) - k2.at(i)) > gap) gap = std::fabs(k3.at(i) - k2.at(i)), at = x.at(i);
  CaseResult r;
  r.reporter = gap;
  r.flipped = rel_max_diff(run("tensorflow,hard_sigmoid_kind=relu6_div6"), k3);  // Keras 2's layer, the knob flipped
  std::ostringstream os;
  os << std::setprecision(8) << "  hard_sigmoid(x / 10) for x in -40..39, as the reporter ran it\n"
     << "  at -2.5: Keras 2 (clip(0.2x + 0.5)) " << k2.at(15) << ", Keras 3 (relu6(x + 3) / 6) " << k3.at(15)
     << "   (the thread: 0.083333336)\n"
     << "  at -1.0: " << k2.at(30) << " and " << k3.at(30) << "; the largest gap " << gap << " at x = " << at << "\n";
  r.text = os.str();
  return r;
}

// tensorflow/tensorflow#4886: max pooling's gradient at ties, TensorFlow (one input) vs Theano (every tied input).
CaseResult maxpool_ties() {
  const Tensor x = Tensor::from<float>({1, 1, 2, 2}, {1, 2, 2, 2});  // the thread's window
  const Tensor dy = Tensor::from<float>({1, 1, 1, 1}, {1});
  auto grad = [&](const std::string& policy) {
    Pool2dParams p;
    p.h = p.w = 2;
    p.ties = Policy::parse(policy).maxpool_grad_ties;
    Tensor dx({1, 1, 2, 2}, DType::f32);
    maxpool2d_backward_ref(p, x, dy, dx);
    return dx;
  };
  const Tensor tf = grad("tensorflow"), th = grad("theano"), fixed = grad("theano,maxpool_grad_ties=first");
  auto sum_abs_diff = [](const Tensor& a, const Tensor& b) {
    double s = 0;
    for (int64_t i = 0; i < a.numel(); ++i) s += std::fabs(a.at(i) - b.at(i));
    return s;
  };
  CaseResult r;
  r.reporter = sum_abs_diff(th, tf);
  r.flipped = sum_abs_diff(fixed, tf);
  std::ostringstream os;
  os << "  one 2x2 max pool over [1, 2, 2, 2] (three inputs tie at the max), upstream gradient 1\n"
     << "  dL/dx TensorFlow [" << tf.at(0) << ", " << tf.at(1) << ", " << tf.at(2) << ", " << tf.at(3) << "], Theano ["
     << th.at(0) << ", " << th.at(1) << ", " << th.at(2) << ", " << th.at(3) << "]   (the thread: [0,1,0,0] and [0,1,1,1])\n";
  r.text = os.str();
  return r;
}

// tensorflow/tfjs#2205: a channels-first Keras model's Flatten -> Dense run in TF.js, whose Flatten
// then ignored the data format (Keras permutes to channels-last before flattening).
CaseResult flatten_order_tfjs() {
  const Shape map{4, 3, 3};  // (C, H, W) feature map before the Flatten
  const Tensor x = uniform({1, 4, 3, 3}, 23, -1, 1);
  Tensor weight;
  auto net = [&](const std::string& policy) {
    Rng rng(RngEngine::mt19937_u24, 29);
    const Policy p = Policy::parse(policy);
    FlattenLayer f(map, p);
    DenseLayer d(1, Shape{36}, p, rng, false);
    weight = d.params()[0]->value.clone();  // (1, 36): one weight per flattened position
    return forward(d, forward(f, x));
  };
  const Tensor keras = net("tensorflow"), tfjs = net("tensorflow,flatten_order=chw");
  // Keras's Flatten of a channels-first map: permute to (H, W, C), then flatten; the Dense's
  // weight j multiplies position j of that order. Computed here in double.
  // Measured in units of sum |w_j x_j|, the scale of a float32 dot product's rounding (the output
  // itself may cancel to near 0).
  double sum = 0, terms = 0;
  for (int64_t c = 0; c < 4; ++c)
    for (int64_t i = 0; i < 9; ++i) {
      sum += double(weight.at(i * 4 + c)) * x.at(c * 9 + i);
      terms += std::fabs(double(weight.at(i * 4 + c)) * x.at(c * 9 + i));
    }
  CaseResult r;
  r.reporter = std::fabs(tfjs.at(0) - sum) / terms;
  r.flipped = std::fabs(net("tensorflow,flatten_order=hwc").at(0) - sum) / terms;
  std::ostringstream os;
  os << std::setprecision(7) << "  Flatten of a 4x3x3 feature map, then Dense(1), the same weights\n"
     << "  Keras (Flatten permutes to channels-last first; the product computed here in double): " << sum
     << "; driftlab's tensorflow preset " << keras.at(0) << "\n"
     << "  TF.js before tfjs#2346 (flattened as stored, channels first, as PyTorch's view): " << tfjs.at(0) << "\n"
     << "  (the thread: Keras 1.3110151, TF.js -1.028530240058899)\n";
  r.text = os.str();
  return r;
}

}  // namespace

namespace casebook_detail {

std::vector<CaseInfo> layer_cases() {
  std::vector<CaseInfo> v;
  v.push_back({"keras-same-padding-stride2", "layers", "keras-team/keras#19291",
               "I found certain issues with the value mismatch of the padded element of both of the models.",
               "a PyTorch Conv2d(3, 64, 3, stride=2, padding=1) ported to Keras Conv2D(64, 3, strides=2, padding='same'): "
               "torch preset vs tensorflow preset, the same weights",
               "conv_same_pad: half_strided (PyTorch's padding=1 on every side) -> after (TF's 'same': the odd pad bottom/right)",
               "max|y_pytorch - y_keras| / max|y_keras| of the convolution", 1e-2, 1e-6,
               "pad explicitly: in PyTorch padding=0 and F.pad(x, (0, 1, 0, 1)); in Keras ZeroPadding2D(1) then padding='valid'",
               conv_same_stride2});
  v.push_back({"keras-crossentropy-clip", "training", "keras-team/keras#7563",
               "when labels or pred values are large, the results of  categorical_crossentropy is different to the results of  "
               "tf.nn.softmax_cross_entropy_with_logits",
               "Keras categorical_crossentropy on softmax outputs (tensorflow preset) vs the loss on logits (torch preset, "
               "PyTorch's CrossEntropyLoss)",
               "ce_formulation: softmax_clip (probabilities clipped to [1e-7, 1-1e-7]) -> log_softmax",
               "|loss_keras - loss_logits| on the thread's logits", 1.0, 1e-6,
               "give the loss logits: Keras CategoricalCrossentropy(from_logits=True) without a final softmax (PyTorch's "
               "CrossEntropyLoss already takes logits)",
               ce_clip});
  v.push_back({"tf32-matmul-ampere", "layers", "pytorch/pytorch#58434",
               "The results from the last 3 were the same, whereas that from RTX 3090 were totally different.",
               "float32 matrix products on an Ampere GPU with torch.backends.cuda.matmul.allow_tf32 = True (PyTorch 1.7-1.11's "
               "default; TensorFlow >= 2.4's) against the same product on other GPUs and the CPU",
               "math_matmul: tf32 -> float32",
               "relative error of A @ x (A 50x1000) against float64", 1e-4, 1e-6,
               "torch.backends.cuda.matmul.allow_tf32 = False (tf.config.experimental.enable_tensor_float_32_execution(False))",
               tf32_matmul});
  v.push_back({"bn-momentum-port", "training", "huggingface/transformers#19454",
               "The momentum value for PyTorch and TensorFlow batch normalization layers is not equivalent",
               "a PyTorch BatchNorm2d(momentum=0.1, eps=1e-5) ported to Keras BatchNormalization(momentum=0.1, epsilon=1e-3): "
               "Keras's momentum is the fraction kept, PyTorch's the fraction taken from the batch",
               "bn_momentum: 0.1 -> 0.9 and bn_eps: 0.001 -> 1e-5 (the ported layer given PyTorch's meaning)",
               "max|y - y_pytorch| / max|y_pytorch| at inference after 10 training steps, y_pytorch PyTorch's update rule "
               "computed in double",
               // gone: float32 running statistics (288-element sums, 10 updates) against double: ~1e-7 relative, far
               // under the symptom; the bound leaves a factor 10 for other CPUs' summation orders
               1e-2, 1e-5,
               "Keras momentum = 1 - PyTorch momentum, and the same epsilon (the fix merged in transformers#19454)", bn_momentum});
  v.push_back({"gru-reset-after-cudnn", "layers", "keras-team/keras#9112",
               "Since GRU in CuDNN is based on a slightly different convention we can't directly load its weights in a similar way.",
               "GRU weights trained under CuDNN's convention (PyTorch's, Keras CuDNNGRU: the reset gate after the recurrent "
               "product) run by Keras 2.1's GRU (the reset gate before it)",
               "gru_reset_after: before -> after",
               "max|h - h_cudnn| / max|h_cudnn| of the last state, h_cudnn CuDNN's / PyTorch's GRU computed in double",
               // gone: 6 float32 steps of 24-term products, sigmoid and tanh against double: ~1e-7 relative
               1e-2, 1e-5,
               "Keras >= 2.1.3: GRU(reset_after=True, recurrent_activation='sigmoid') loads CuDNN / PyTorch GRU weights "
               "(both biases kept)",
               gru_reset_after});
  v.push_back({"keras3-hard-sigmoid", "layers", "tensorflow/tensorflow#65381",
               "In reality, it's not `-2.5` and `2.5`, but `-3.0` and `3.0` instead.",
               "tf.keras.activations.hard_sigmoid in TensorFlow 2.16 (Keras 3: relu6(x + 3) / 6, as PyTorch's Hardsigmoid) "
               "against the formula Keras 2 computed and its documentation still gave (clip(0.2 x + 0.5, 0, 1))",
               "hard_sigmoid_kind: linear_0p2 (Keras 2) -> relu6_div6 (Keras 3, PyTorch)",
               "largest |hard_sigmoid_keras2(x) - hard_sigmoid_keras3(x)| over the reporter's inputs", 1e-2, 0.0,
               "a model saved with Keras 2's hard_sigmoid (e.g. an LSTM's recurrent activation) needs clip(0.2x + 0.5) "
               "written out as its activation under Keras 3 or PyTorch",
               keras3_hard_sigmoid});
  v.push_back({"maxpool-gradient-ties", "training", "tensorflow/tensorflow#4886",
               "Although as subgradient they all seem to make sense, but is there a reason to justify the difference of "
               "reduce_max and max_pool?",
               "the gradient of a 2x2 max pool whose window holds a tie, TensorFlow's max_pool (and PyTorch's) against Theano's",
               "maxpool_grad_ties: all (Theano: every tied input) -> first (TensorFlow, PyTorch: the first in row-major order)",
               "sum |dL/dx_theano - dL/dx_tensorflow| over the window", 0.5, 0.0,
               "none needed for training (both are subgradients); a port that compares gradients must expect the tie rule "
               "to differ, or break ties in the data",
               maxpool_ties});
  v.push_back({"flatten-order-tfjs", "conversion", "tensorflow/tfjs#2205",
               "I tried a fixed input tensor by [1,1,18,5] into python and JS script to make a prediction, But I got diffent "
               "results",
               "a channels-first Keras 2.2.4 model converted with tensorflowjs_converter and run in TF.js 1.1, whose Flatten "
               "flattened the stored channels-first map where Keras permutes it to channels-last first",
               "flatten_order: chw (TF.js before the fix, PyTorch's view) -> hwc (Keras)",
               "|y - y_keras| / sum|w_j x_j| of the Dense after the Flatten, y_keras Keras's channels-last product in double",
               // gone: a 36-term float32 dot product is within 37 * 2^-24 of sum|w_j x_j| of the exact one (the
               // classic bound on n products summed in any order, one rounding each)
               1e-2, 37 * 0x1p-24,
               "TF.js >= the fix (tfjs#2346); porting to PyTorch, permute the Dense's input columns "
               "(keras.utils.conv_utils.convert_dense_weights_data_format) or permute before flattening",
               flatten_order_tfjs});
  return v;
}

}  // namespace casebook_detail
}  // namespace driftlab
