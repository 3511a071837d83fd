// The `tensorflow` preset against TensorFlow.js 4.22 (pure-JS CPU backend), which implements
// the Keras-2.2-era layer formulas on TF's operator semantics (SAME padding with the extra pad
// bottom/right, first-max pooling gradient, clip-inclusive gradients, crossentropy clip 1e-7,
// tf.train.momentum = TF1 ApplyMomentum). And the `torch` preset against the same oracle, to show
// that it does NOT match where a knob differs and that flipping that knob restores the match.
//
// How it runs (the harness of tests/oracles/oracle_util.h): fill_tfjs() writes every case below
// (weights, inputs, labels as .npy; cases.json) into one folder, `node tests/oracles/tfjs/oracle.js
// DIR K/3` runs once per shard, the three shards side by side (node + tfjs start in ~1 s, more
// than most cases take; the LeNet training cases and ResNet-20's input gradient are split
// between two of them, VGG-16's gradients, ~80 s of pure-JS convolution, take the third), and
// each test reads its case's results back.
// Covered: every layer, softmax + Keras crossentropy, BatchNorm (training step, moving
// statistics, inference), ResNet basic blocks (identity, option A, option B), LeNet-1/5 and
// VGG-16 whole (every layer's output and gradients), 20 SGD steps, optimiser formulas,
// glorot_uniform's distribution; negative tests with the torch preset; the input gradient of
// LeNet-5 and ResNet-20 at inference semantics against tf.grad with training=false. Weights are
// always passed explicitly (TF.js's default kernel initialiser is glorotNormal, not Keras's
// glorot_uniform). Layouts are converted here: driftlab NCHW / OIHW / dense (out,in) versus
// TF.js NHWC / HWIO / (in,out); the tensorflow preset's Flatten is (h,w,c), so dense weights
// transfer as a plain transpose. Without node or tfjs the tests SKIP saying so; a failing
// node run makes them FAIL with its output.
//
// Comparisons: max|a-r| <= tol * max|r| per tensor (all_close with atol = tol*max|r|, rtol 0),
// normwise because gradients contain elements that are pure cancellation noise. Every test
// prints a table (oracle::ErrorTable): case x quantity x shape x max abs err x max|a-r|/max|r|.
//
// To add a case: 1) a row in layer_cases() (or a kind of its own written in fill_tfjs());
// 2) a tolerance with a comment saying why; 3) the run writes and computes it with the others.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "attacks/gradient.h"
#include "core/error.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/init.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "engine/layers/sequential.h"
#include "core/ops/softmax_xent.h"
#include "engine/policy.h"
#include "engine/random.h"
#include "engine/train/optimizer.h"
#include "engine/train/cpu_runner.h"
#include "kernels/cpu/ref/ref.h"
#include "models/models.h"
#include "tests/oracles/oracle_util.h"
#include "tests/oracles/tfjs_optim_cases.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Tolerances (normwise: max|a-r| / max|r|)

// Forward of one layer or a whole LeNet: each output element is one float32 sum of at most
// 5*5*16 = 400 products (conv) or 256 (dense). TF.js's CPU backend accumulates conv in float32
// and matMul in float64; driftlab's Eigen kernels in float32 in another order. The rounding
// difference is ~sqrt(400) * 2^-24 ~ 1e-6 of the largest term: 1e-5 leaves 10x headroom
// (observed <= 3.4e-7) and is still 100x below any formula difference checked here (the
// smallest, one pad row or a flipped hard-sigmoid slope, changes outputs by > 1e-3).
constexpr double kFwdTol = 1e-5;
// Gradients (dX, dW, db), single layers and whole LeNets: float32 sums over the other
// operand's positions, the longest being dW of LeNet conv1, N*24*24 = 4,608 terms: rounding
// noise ~ sqrt(4608) * 2^-24 ~ 4e-6 of the largest term, plus the upstream forward
// differences above. Observed <= 4.5e-7; 1e-5 is 2.5x the estimate. A wrong formula (pad
// side, flatten order, clip, tie rule) is off by > 1e-2.
constexpr double kGradTol = 1e-5;
// Loss values: a mean of per-sample -log q, each a few float32 roundings: 1e-6 relative.
constexpr double kLossTol = 1e-6;

// ---------------------------------------------------------------------------------------------
// Layouts

// Permutes the axes of a contiguous tensor: out.shape[i] = t.shape[perm[i]].
Tensor permute(const Tensor& t, const std::vector<int>& perm) {
  const Shape& s = t.shape();
  const std::size_t r = s.size();
  Shape os(r);
  for (std::size_t i = 0; i < r; ++i) os[i] = s[static_cast<std::size_t>(perm[i])];
  std::vector<int64_t> stride(r, 1);
  for (std::size_t i = r; i-- > 1;) stride[i - 1] = stride[i] * s[i];
  Tensor out(os, t.dtype());
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = t.data<T>();
    T* dst = out.data<T>();
    std::vector<int64_t> idx(r, 0);
    for (int64_t o = 0; o < out.numel(); ++o) {
      int64_t off = 0;
      for (std::size_t i = 0; i < r; ++i) off += idx[i] * stride[static_cast<std::size_t>(perm[i])];
      dst[o] = src[off];
      for (std::size_t i = r; i-- > 0;) {
        if (++idx[i] < os[i]) break;
        idx[i] = 0;
      }
    }
  });
  return out;
}
// Activations: driftlab NCHW -> TF.js NHWC and back; other ranks are the same in both.
Tensor to_tfjs(const Tensor& x) { return x.rank() == 4 ? permute(x, {0, 2, 3, 1}) : x.clone(); }
Tensor from_tfjs(const Tensor& y) { return y.rank() == 4 ? permute(y, {0, 3, 1, 2}) : y.clone(); }
// Weights: kernels HWIO / (in,out) -> OIHW / (out,in) (engine/layers/init.h); biases as they are.
Tensor weight_to_tfjs(const Tensor& w) { return w.rank() >= 2 ? to_framework_layout(w, WeightLayout::hwio) : w; }
Tensor weight_from_tfjs(const Tensor& w) { return w.rank() >= 2 ? from_framework_layout(w, WeightLayout::hwio) : w; }

// ---------------------------------------------------------------------------------------------
// Harness (tests/oracles/oracle_util.h): one case folder, oracle.js run in three shards

using oracle::CaseDir;
using oracle::ErrorTable;
using oracle::ends_with;
using oracle::max_abs_diff;
using oracle::one_hot;
using oracle::rel_error;

// ---------------------------------------------------------------------------------------------
// Layer descriptions: one list builds the driftlab Sequential and the TF.js layers.

enum class LKind { conv, maxpool, avgpool, dense, act, flatten };
struct LayerDesc {
  LKind kind = LKind::conv;
  Conv2dSpec conv{};
  int64_t window = 2;  // pools: window = stride, 'valid'
  int64_t units = 0;   // dense
  ActKind act = ActKind::relu;
};
LayerDesc conv(int64_t out, int64_t k, int64_t stride, PadMode pad) {
  LayerDesc d;
  d.kind = LKind::conv;
  d.conv.out_channels = out;
  d.conv.kernel_h = d.conv.kernel_w = k;
  d.conv.stride = stride;
  d.conv.pad = pad;
  return d;
}
LayerDesc pool(LKind kind, int64_t window) {
  LayerDesc d;
  d.kind = kind;
  d.window = window;
  return d;
}
LayerDesc dense(int64_t units) {
  LayerDesc d;
  d.kind = LKind::dense;
  d.units = units;
  return d;
}
LayerDesc act(ActKind a) {
  LayerDesc d;
  d.kind = LKind::act;
  d.act = a;
  return d;
}
LayerDesc flatten() {
  LayerDesc d;
  d.kind = LKind::flatten;
  return d;
}

std::unique_ptr<Layer> make_layer(const LayerDesc& d, const Shape& in, const Policy& policy, Rng& rng) {
  switch (d.kind) {
    case LKind::conv: return std::make_unique<Conv2dLayer>(d.conv, in, policy, rng);
    case LKind::maxpool:
    case LKind::avgpool: {
      Pool2dSpec s;
      s.kind = d.kind == LKind::maxpool ? PoolKind::max : PoolKind::avg;
      s.window = d.window;
      return std::make_unique<Pool2dLayer>(s, in, policy);
    }
    case LKind::dense: return std::make_unique<DenseLayer>(d.units, in, policy, rng);
    case LKind::act: return std::make_unique<ActivationLayer>(d.act, in, policy);
    case LKind::flatten: return std::make_unique<FlattenLayer>(in, policy);
  }
  fail("make_layer: unknown kind");
}

std::unique_ptr<Sequential> build_net(const std::vector<LayerDesc>& descs, const Shape& in, const Policy& policy) {
  auto net = std::make_unique<Sequential>(in);
  Rng rng(policy.rng_engine, 1);  // the weights are overwritten by set_weights
  for (const LayerDesc& d : descs) net->add(make_layer(d, net->current_shape(), policy, rng));
  return net;
}

// Weights per layer in driftlab's layout (OIHW / (out,in), bias), in params() order.
using Weights = std::vector<std::vector<Tensor>>;
Weights get_weights(Sequential& net) {
  Weights w(net.size());
  for (std::size_t i = 0; i < net.size(); ++i)
    for (Param* p : net.layer(i).params()) w[i].push_back(p->value.clone());
  return w;
}
void set_weights(Sequential& net, const Weights& w) {
  for (std::size_t i = 0; i < net.size(); ++i) {
    auto ps = net.layer(i).params();
    check(ps.size() == w[i].size(), "set_weights: layer ", i, " has ", ps.size(), " params, given ", w[i].size());
    for (std::size_t j = 0; j < ps.size(); ++j) {
      check(ps[j]->value.shape() == w[i][j].shape(), "set_weights: layer ", i, " param ", j, " shape ",
            shape_str(ps[j]->value.shape()), " given ", shape_str(w[i][j].shape()));
      ps[j]->value = w[i][j].clone();
    }
  }
}

const char* tfjs_activation(ActKind a) {
  switch (a) {
    case ActKind::relu: return "relu";
    case ActKind::tanh: return "tanh";
    case ActKind::sigmoid: return "sigmoid";
    case ActKind::hard_sigmoid: return "hardSigmoid";
    case ActKind::clip: return "relu6";  // TF.js's only clipping activation (clip(0, 6))
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// The TF.js descriptions of layers (oracle.js makeLayer); their weights are written into the folder
// converted to HWIO / (in,out).

json layer_json(const CaseDir& w, const std::string& prefix, const LayerDesc& d, const std::vector<Tensor>& wts) {
  json files = json::array();
  for (std::size_t j = 0; j < wts.size(); ++j)
    files.push_back(w.input(prefix + ".w" + std::to_string(j), weight_to_tfjs(wts[j])));
  switch (d.kind) {
    case LKind::conv:
      check(d.conv.pad != PadMode::explicit_pad, "TF.js layers take 'valid' or 'same' only");
      return {{"type", "conv2d"},
              {"filters", d.conv.out_channels},
              {"kernel", json::array({d.conv.kernel_h, d.conv.kernel_w})},
              {"strides", d.conv.stride},
              {"padding", d.conv.pad == PadMode::same ? "same" : "valid"},
              {"weights", files}};
    case LKind::maxpool:
    case LKind::avgpool:
      return {{"type", d.kind == LKind::maxpool ? "maxPooling2d" : "averagePooling2d"},
              {"pool", d.window},
              {"strides", d.window},
              {"padding", "valid"}};
    case LKind::dense: return {{"type", "dense"}, {"units", d.units}, {"weights", files}};
    case LKind::act: return {{"type", "activation"}, {"activation", tfjs_activation(d.act)}};
    case LKind::flatten: return {{"type", "flatten"}};
  }
  fail("layer_json: unknown kind");
}
json layers_json(const CaseDir& w, const std::string& prefix, const std::vector<LayerDesc>& descs, const Weights& wts,
                 bool softmax) {
  json layers = json::array();
  for (std::size_t i = 0; i < descs.size(); ++i)
    layers.push_back(layer_json(w, prefix + ".L" + std::to_string(i), descs[i], wts[i]));
  if (softmax) layers.push_back({{"type", "activation"}, {"activation", "softmax"}});
  return layers;
}

// The tfjs suite's own label stream (uniform floats floored; the other suites draw MT19937).
std::vector<int32_t> random_labels(int64_t n, int64_t k, uint64_t seed) {
  Tensor u = random_tensor({n}, DType::f64, seed, 0.0, static_cast<double>(k));
  std::vector<int32_t> y(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<std::size_t>(i)] = static_cast<int32_t>(std::floor(u.at(i)));
  return y;
}

// ---------------------------------------------------------------------------------------------
// Layer cases: one layer (or a short stack) with loss sum(y*R), or softmax + Keras crossentropy.

enum class Input { uniform, relu_zeros, pool_ties, hs_edges, hs_round_edge, cce_confident };
struct LayerCase {
  std::string name;
  Shape in;  // per sample
  int64_t batch;
  std::vector<LayerDesc> layers;
  Input input = Input::uniform;
  bool cce = false;  // softmax + categoricalCrossentropy instead of sum(y*R)
};

const std::vector<LayerCase>& layer_cases() {
  static const std::vector<LayerCase> kCases = {
      {"conv_valid_k3", {3, 7, 9}, 2, {conv(4, 3, 1, PadMode::valid)}},
      {"conv_valid_k5_s2", {2, 11, 10}, 2, {conv(3, 5, 2, PadMode::valid)}},
      // 7x7, k=3, s=1: P=2, symmetric (1,1).
      {"conv_same_k3_s1", {3, 7, 7}, 2, {conv(4, 3, 1, PadMode::same)}},
      // k=2, s=1: P=1 on any size: TF pads (0,1), the extra row/column bottom/right.
      {"conv_same_k2_s1_even", {2, 6, 6}, 2, {conv(3, 2, 1, PadMode::same)}},
      {"conv_same_k2_s1_odd", {2, 7, 5}, 2, {conv(3, 2, 1, PadMode::same)}},
      // s=2, k=3 on 8x8: out 4, P=(4-1)*2+3-8=1: (0,1). On 7x7: P=2: (1,1).
      {"conv_same_k3_s2_even", {3, 8, 8}, 2, {conv(4, 3, 2, PadMode::same)}},
      {"conv_same_k3_s2_odd", {3, 7, 7}, 2, {conv(4, 3, 2, PadMode::same)}},
      // H=8 (P=1: (0,1)) and W=7 (P=2: (1,1)) in one tensor: catches an H/W mix-up.
      {"conv_same_k3_s2_8x7", {2, 8, 7}, 2, {conv(3, 3, 2, PadMode::same)}},
      // k=2, s=2 on 7x9: P=1 both axes: (0,1). k=5, s=2 on 10x10: P=3: (1,2).
      {"conv_same_k2_s2_odd", {2, 7, 9}, 2, {conv(3, 2, 2, PadMode::same)}},
      {"conv_same_k5_s2_even", {2, 10, 10}, 2, {conv(3, 5, 2, PadMode::same)}},
      {"maxpool_2x2", {3, 8, 8}, 2, {pool(LKind::maxpool, 2)}},
      {"maxpool_2x2_odd", {2, 7, 9}, 2, {pool(LKind::maxpool, 2)}},
      // Values in {0,1,2}: most windows hold ties; TF CPU sends the gradient to the first max.
      {"maxpool_2x2_ties", {3, 6, 6}, 2, {pool(LKind::maxpool, 2)}, Input::pool_ties},
      {"avgpool_2x2", {3, 8, 8}, 2, {pool(LKind::avgpool, 2)}},
      {"avgpool_2x2_odd", {2, 7, 9}, 2, {pool(LKind::avgpool, 2)}},
      {"dense", {20}, 4, {dense(7)}},
      {"relu_exact_zeros", {3, 4, 5}, 2, {act(ActKind::relu)}, Input::relu_zeros},
      {"tanh", {3, 4, 5}, 2, {act(ActKind::tanh)}},
      {"sigmoid", {3, 4, 5}, 2, {act(ActKind::sigmoid)}},
      // x = +-2.5 exactly (0.2x+0.5 = 1 or 0 exactly, the clip's inclusive edge), +-3, 0, ...
      {"hard_sigmoid_edges", {24}, 2, {act(ActKind::hard_sigmoid)}, Input::hs_edges},
      // float32 neighbours of +-2.5. At x = nextafter(2.5f, 3) = 2.50000024, Keras/TF compute
      // v = 0.2f*x + 0.5f = 1 + 2^-24 before rounding, a tie that rounds to even: v = 1.0
      // exactly, so clip_by_value's inclusive mask (v <= 1) passes the gradient 0.2*dy; TF.js
      // does the same. driftlab's hard_sigmoid backward once tested x <= 2.5 instead of v <= 1 and
      // gave 0 there (this case found it); it now tests the clipped value v as the forward
      // computes it (core/ops/activation.h hard_sigmoid_grad), and all eight elements must agree.
      {"hard_sigmoid_rounding_edge", {8}, 1, {act(ActKind::hard_sigmoid)}, Input::hs_round_edge},
      {"flatten", {3, 4, 5}, 2, {flatten()}},
      {"conv_relu_pool_flatten_dense", {2, 9, 9}, 2,
       {conv(3, 3, 1, PadMode::same), act(ActKind::relu), pool(LKind::maxpool, 2), flatten(), dense(5)}},
      // Softmax + Keras categorical crossentropy, with confident samples (see cce_logits).
      {"categorical_crossentropy", {10}, 8, {}, Input::cce_confident, true},
  };
  return kCases;
}

// gtest prints a parameter with this (instead of its bytes) in test lists and failures.
void PrintTo(const LayerCase& c, std::ostream* os) { *os << c.name; }

const LayerCase& layer_case(const std::string& name) {
  for (const LayerCase& c : layer_cases())
    if (c.name == name) return c;
  fail("no layer case '", name, "'");
}

uint64_t name_seed(const std::string& s) {  // FNV-1a: a stable seed per case name
  uint64_t h = 1469598103934665603ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// Logits (N,10) for the crossentropy cases, with the label each row is scored against:
// row 0: label logit 20 above the rest: q_y = 1/(1+9e^-20) rounds to 1 > 1-1e-7: clipped, grad 0
// row 1: another class at +30: q_y ~ 9e-14 < 1e-7: clipped to eps, loss -log(1e-7)=16.118, grad 0
// row 2: label logit 16 above: q_y = 1-1.0e-6, inside the clip: full gradient
// rows 3..: random in [-3,3).
Tensor cce_logits(int64_t n, std::vector<int32_t>* labels) {
  Tensor z = random_tensor({n, 10}, DType::f32, 404, -3.0, 3.0);
  *labels = random_labels(n, 10, 405);
  float* d = z.data<float>();
  auto row = [&](int64_t i, int32_t y, int32_t hot, float v) {
    for (int64_t j = 0; j < 10; ++j) d[i * 10 + j] = 0.0f;
    d[i * 10 + hot] = v;
    (*labels)[static_cast<std::size_t>(i)] = y;
  };
  row(0, 3, 3, 20.0f);
  row(1, 3, 7, 30.0f);
  row(2, 5, 5, 16.0f);
  return z;
}

// The case's input, weights and R (or labels), the same on every call.
struct CaseData {
  Tensor x;
  Weights w;
  Tensor r;                     // dL/dy of the last layer for sum(y*R), driftlab layout
  std::vector<int32_t> labels;  // crossentropy cases
};

CaseData case_data(const LayerCase& c, Sequential& net) {
  const uint64_t seed = name_seed(c.name);
  Shape xs{c.batch};
  xs.insert(xs.end(), c.in.begin(), c.in.end());
  CaseData d;
  d.x = random_tensor(xs, DType::f32, seed, -1.0, 1.0);
  float* x = d.x.data<float>();
  switch (c.input) {
    case Input::uniform: break;
    case Input::relu_zeros:  // every third element +0, every seventh -0: dReLU/dx(0) = 0 in TF
      for (int64_t i = 0; i < d.x.numel(); ++i) {
        if (i % 3 == 0) x[i] = 0.0f;
        if (i % 7 == 0) x[i] = -0.0f;
      }
      break;
    case Input::pool_ties:
      for (int64_t i = 0; i < d.x.numel(); ++i) x[i] = std::floor(1.5f * (x[i] + 1.0f));  // {0,1,2}
      break;
    case Input::hs_edges: {
      const float v[] = {-2.5f, 2.5f, -3.0f, 3.0f, 0.0f, 1.0f, -1.0f, 7.0f, -7.0f, 2.4f, -2.4f,
                         std::nextafter(2.5f, 0.0f), std::nextafter(-2.5f, 0.0f), std::nextafter(-2.5f, -3.0f)};
      for (int64_t i = 0; i < d.x.numel(); ++i)
        if (i % 2 == 0) x[i] = v[(i / 2) % (sizeof(v) / sizeof(v[0]))];  // odd elements stay random
      break;
    }
    case Input::hs_round_edge: {
      const float v[] = {std::nextafter(2.5f, 3.0f), std::nextafter(std::nextafter(2.5f, 3.0f), 3.0f), 2.5f,
                         std::nextafter(2.5f, 0.0f), std::nextafter(-2.5f, -3.0f), -2.5f,
                         std::nextafter(-2.5f, 0.0f), 0.0f};
      for (int64_t i = 0; i < d.x.numel(); ++i) x[i] = v[i % 8];
      break;
    }
    case Input::cce_confident: d.x = cce_logits(c.batch, &d.labels); break;
  }
  // Weights U(-0.5,0.5), biases U(-0.5,0.5): every term and the bias addition matter.
  d.w = get_weights(net);
  for (std::size_t i = 0; i < d.w.size(); ++i)
    for (std::size_t j = 0; j < d.w[i].size(); ++j)
      d.w[i][j] = random_tensor(d.w[i][j].shape(), DType::f32, seed + 100 * (i + 1) + j, -0.5, 0.5);
  Shape ys{c.batch};
  const Shape& per = net.current_shape();
  ys.insert(ys.end(), per.begin(), per.end());
  if (!c.cce) d.r = random_tensor(ys, DType::f32, seed + 7, -1.0, 1.0);
  return d;
}

// driftlab forward (every layer's output), loss, backward: dx and every parameter gradient.
struct NetResult {
  std::vector<Tensor> ys;
  double loss = 0;
  Tensor dlogits;  // crossentropy cases: dL/dz
  Tensor dx;
  Weights dw;
};

NetResult run_driftlab(Sequential& net, const Tensor& x, const Tensor& r, const std::vector<int32_t>& labels,
                       const Policy& policy) {
  ExecContext exec;
  RunContext ctx = RunContext::training(exec, nullptr);
  ctx.input_grad = true;
  net.zero_grad();
  NetResult out;
  Tensor h = x;
  for (std::size_t i = 0; i < net.size(); ++i) {
    h = net.layer(i).forward(ctx, h);
    out.ys.push_back(h);
  }
  Tensor dy;
  if (r.defined()) {
    for (int64_t i = 0; i < h.numel(); ++i) out.loss += h.at(i) * r.at(i);
    dy = r;
  } else {
    const SoftmaxXentParams lp = resolve_loss(policy);
    out.loss = softmax_xent_forward_ref(lp, h, labels);
    dy = Tensor(h.shape(), h.dtype());
    softmax_xent_backward_ref(lp, h, labels, dy);
    out.dlogits = dy;
  }
  out.dx = net.size() ? net.backward(ctx, dy) : dy;
  for (std::size_t i = 0; i < net.size(); ++i) {
    out.dw.emplace_back();
    for (Param* p : net.layer(i).params()) out.dw.back().push_back(p->grad.clone());
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Whole models: LeNet-1 and LeNet-5 as models/lenet.cpp builds them.

std::vector<LayerDesc> lenet_descs(const std::string& name) {
  if (name == "lenet1")
    return {conv(4, 5, 1, PadMode::valid), act(ActKind::relu), pool(LKind::maxpool, 2),
            conv(12, 5, 1, PadMode::valid), act(ActKind::relu), pool(LKind::maxpool, 2), flatten(), dense(10)};
  return {conv(6, 5, 1, PadMode::valid), act(ActKind::relu), pool(LKind::maxpool, 2), conv(16, 5, 1, PadMode::valid),
          act(ActKind::relu), pool(LKind::maxpool, 2), flatten(), dense(120), act(ActKind::relu), dense(84),
          act(ActKind::relu), dense(10)};
}

// VGG-16 as models/cifar.cpp builds it: 13 'same' 3x3 convs with relu, 5 max pools, the
// 4096-4096-10 head.
std::vector<LayerDesc> vgg16_descs() {
  std::vector<LayerDesc> d;
  for (int64_t c : {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0}) {
    if (c == 0) {
      d.push_back(pool(LKind::maxpool, 2));
    } else {
      d.push_back(conv(c, 3, 1, PadMode::same));
      d.push_back(act(ActKind::relu));
    }
  }
  d.push_back(flatten());
  for (int64_t units : {4096, 4096}) {
    d.push_back(dense(units));
    d.push_back(act(ActKind::relu));
  }
  d.push_back(dense(10));
  return d;
}
std::vector<LayerDesc> model_descs(const std::string& name) {
  return name == "vgg16" ? vgg16_descs() : lenet_descs(name);
}
// A batch of inputs for the model: LeNet 1x28x28, VGG-16 3x32x32, pixels in [0,1).
Tensor model_images(const std::string& name, int64_t n, uint64_t seed) {
  if (name == "vgg16") return random_tensor({n, 3, 32, 32}, DType::f32, seed, 0.0, 1.0);
  return random_tensor({n, 1, 28, 28}, DType::f32, seed, 0.0, 1.0);
}
// VGG-16's batch: TF.js's pure-JS CPU backend needs ~40 s per image for its gradients.
constexpr int64_t kVggBatch = 2;

constexpr uint64_t kModelSeed = 20190601;
constexpr int64_t kGradBatch = 8;
constexpr int64_t kTrainBatch = 8;  // tfjs's pure-JS conv2DBackpropFilter costs ~25 ms per LeNet-5 image
constexpr int kTrainSteps = 20;
constexpr double kLr = 0.05, kMomentum = 0.9;

// The zoo model under `policy` with driftlab's own tensorflow-preset weights (glorot_uniform
// from its Philox stream) and biases U(-0.1,0.1) (instead of zeros, so that bias gradients
// and additions are checked on non-trivial values).
Model zoo_model(const std::string& name, const Policy& policy) {
  Model tf = build_model(name, Policy::tensorflow(), kModelSeed);
  Model m = build_model(name, policy, kModelSeed);
  auto src = tf.net->named_params();
  auto dst = m.net->named_params();
  for (std::size_t i = 0; i < src.size(); ++i) {
    Tensor v = src[i].second->value.clone();
    if (src[i].second->is_bias) v = random_tensor(v.shape(), DType::f32, kModelSeed + i, -0.1, 0.1);
    dst[i].second->value = v;
  }
  return m;
}
Model lenet(const std::string& name, const Policy& policy) { return zoo_model(name, policy); }

Tensor lenet_images(int64_t n, uint64_t seed) { return random_tensor({n, 1, 28, 28}, DType::f32, seed, 0.0, 1.0); }

// ---------------------------------------------------------------------------------------------
// Optimiser-only and initialiser cases

constexpr int64_t kOptimN = 4096;
Tensor optim_params() { return random_tensor({kOptimN}, DType::f32, 77, -1.0, 1.0); }
Tensor optim_grads() { return random_tensor({kTrainSteps, kOptimN}, DType::f32, 78, -1.0, 1.0); }

constexpr int64_t kGlorotIn = 256, kGlorotOut = 120;
constexpr int kGlorotSeed = 7;

// ---------------------------------------------------------------------------------------------
// BatchNorm and ResNet basic blocks

struct BnCase {
  const char* name;
  Shape x;  // (N,C,H,W): BatchNorm over N,H,W per channel (NHWC axis -1 in TF.js); (N,F)
};
const BnCase kBnCases[] = {{"bn2d", {4, 3, 5, 5}}, {"bn1d", {6, 4}}};

struct BlockCase {
  const char* name;
  Shortcut shortcut;
  const char* tfjs_shortcut;  // oracle.js runBlock's name for it
  int64_t n, cin, planes, stride, hw;
};
const BlockCase kBlockCases[] = {
    {"block_optionA_16to32_s2", Shortcut::option_a, "A", 4, 16, 32, 2, 8},
    {"block_optionB_16to32_s2", Shortcut::option_b, "B", 4, 16, 32, 2, 8},
    {"block_identity_16", Shortcut::identity, "identity", 4, 16, 16, 1, 8},
};

// Inputs of a BatchNorm case: three training batches whose means move from batch to batch
// (so the moving statistics are neither their initial values nor one batch's), an inference
// batch, gamma, beta and R.
struct BnData {
  Tensor x[3], xe, gamma, beta, r;
};
BnData bn_data(const BnCase& bc) {
  uint64_t seed = name_seed(bc.name);
  const int64_t c = bc.x[1];
  BnData d;
  d.x[0] = random_tensor(bc.x, DType::f32, ++seed, -1.0, 3.0);
  d.x[1] = random_tensor(bc.x, DType::f32, ++seed, -2.0, 1.0);
  d.x[2] = random_tensor(bc.x, DType::f32, ++seed, 0.0, 5.0);
  d.xe = random_tensor(bc.x, DType::f32, ++seed, -1.0, 3.0);
  d.gamma = random_tensor({c}, DType::f32, ++seed, 0.5, 1.5);
  d.beta = random_tensor({c}, DType::f32, ++seed, -0.5, 0.5);
  d.r = random_tensor(bc.x, DType::f32, ++seed, -1.0, 1.0);
  return d;
}

// TF.js's batchNormalization: moving_mean <- m*moving_mean + (1-m)*batch_mean and the same
// for the variance, with the BIASED batch variance (tf.moments) and no zero-debias
// (tfjs-layers normalization.js). Keras 2.2.4 on TF1 -- the tensorflow preset -- instead
// averages the variance times n/(n-1-eps) and debiases (moving_averages.py zero_debias=True):
// this policy is the tensorflow preset with TF.js's two BatchNorm choices.
Policy tfjs_batchnorm_policy() { return Policy::parse("tensorflow,bn_running_var=biased,bn_zero_debias=false"); }

// The block with the layers models/cifar.cpp uses (add_basic_block), weights overwritten.
std::unique_ptr<Sequential> basic_block(const BlockCase& bc, const Policy& p) {
  Rng rng(p.rng_engine, 1);
  auto net = std::make_unique<Sequential>(Shape{bc.cin, bc.hw, bc.hw});
  add_basic_block(*net, p, rng, bc.planes, bc.stride, bc.shortcut);
  return net;
}

Tensor ones(const Shape& shape) {
  Tensor t(shape, DType::f32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 1.0f;
  return t;
}

// The block's parameters: convs from driftlab's glorot init, gamma U(0.5,1.5), beta U(-0.5,0.5).
std::vector<Tensor> block_params(const BlockCase& bc) {
  std::unique_ptr<Sequential> net = basic_block(bc, Policy::tensorflow());
  uint64_t seed = name_seed(bc.name);
  std::vector<Tensor> out;
  for (auto& [name, prm] : net->named_params())
    out.push_back(ends_with(name, "gamma")  ? random_tensor(prm->value.shape(), DType::f32, ++seed, 0.5, 1.5)
                  : ends_with(name, "beta") ? random_tensor(prm->value.shape(), DType::f32, ++seed, -0.5, 0.5)
                                            : prm->value.clone());
  return out;
}
Tensor block_input(const BlockCase& bc) {
  return random_tensor({bc.n, bc.cin, bc.hw, bc.hw}, DType::f32, name_seed(bc.name) + 100, -1.0, 1.0);
}
Tensor block_r(const BlockCase& bc) {
  const int64_t oh = bc.hw / bc.stride;
  return random_tensor({bc.n, bc.planes, oh, oh}, DType::f32, name_seed(bc.name) + 101, -1.0, 1.0);
}

// ---------------------------------------------------------------------------------------------
// Input gradients of whole models at inference semantics: LeNet-5 and ResNet-20 (option A) with
// random BatchNorm moving statistics, CpuRunner::input_gradient(x, y, Semantics::inference)
// against tf.grad of the Keras loss through the layers applied with {training: false}.

// The TF.js description (oracle.js makeLayer) of a built driftlab network, layer by layer;
// weights and BatchNorm moving statistics are written into the folder in TF.js's layouts.
json net_json(const CaseDir& w, const std::string& prefix, Sequential& net) {
  json layers = json::array();
  for (std::size_t i = 0; i < net.size(); ++i) {
    Layer& l = net.layer(i);
    const std::string p = prefix + "." + std::to_string(i);
    auto weights = [&] {
      json files = json::array();
      const std::vector<Param*> ps = l.params();
      for (std::size_t j = 0; j < ps.size(); ++j)
        files.push_back(w.input(p + ".w" + std::to_string(j), weight_to_tfjs(ps[j]->value)));
      return files;
    };
    if (auto* conv = layer_as<Conv2dLayer>(l)) {
      const Conv2dParams& c = conv->op_params();
      // TF.js takes 'valid' or 'same' (TF's split, the odd pad after): the pads driftlab
      // resolved must be one of them.
      const AxisPad ph = same_padding(c.h, c.r, c.stride_h, c.dil_h, true);
      const AxisPad pw = same_padding(c.w, c.s, c.stride_w, c.dil_w, true);
      const bool valid = c.pad_t == 0 && c.pad_b == 0 && c.pad_l == 0 && c.pad_r == 0;
      const bool same = c.pad_t == ph.before && c.pad_b == ph.after && c.pad_l == pw.before && c.pad_r == pw.after;
      check(valid || same, "net_json: ", p, " pads ", c.pad_t, "/", c.pad_b, "/", c.pad_l, "/", c.pad_r,
            " are neither 'valid' nor TF's 'same'");
      check(c.dil_h == 1 && c.dil_w == 1 && !c.flip && c.stride_h == c.stride_w, "net_json: ", p, " ", c.str());
      layers.push_back({{"type", "conv2d"},
                        {"filters", c.k},
                        {"kernel", json::array({c.r, c.s})},
                        {"strides", c.stride_h},
                        {"padding", valid ? "valid" : "same"},
                        {"weights", weights()}});
    } else if (auto* bn = layer_as<BatchNormLayer>(l)) {
      json files = weights();  // gamma, beta
      const std::vector<Param*> st = bn->running_state();
      files.push_back(w.input(p + ".moving_mean", st[0]->value));
      files.push_back(w.input(p + ".moving_variance", st[1]->value));
      layers.push_back({{"type", "batchNormalization"},
                        {"epsilon", bn->op_params().eps},
                        {"momentum", bn->op_params().keep},
                        {"weights", files}});
    } else if (auto* pool = layer_as<Pool2dLayer>(l)) {
      const Pool2dParams& q = pool->op_params();
      check(q.pad_t == 0 && q.pad_b == 0 && q.pad_l == 0 && q.pad_r == 0, "net_json: ", p, " padded pooling");
      layers.push_back({{"type", l.kind() == "maxpool2d" ? "maxPooling2d" : "averagePooling2d"},
                        {"pool", json::array({q.kh, q.kw})},
                        {"strides", json::array({q.stride_h, q.stride_w})},
                        {"padding", "valid"}});
    } else if (auto* res = layer_as<ResidualLayer>(l)) {
      json r = {{"type", "residual"},
                {"main", net_json(w, p + ".main", res->main())},
                {"stride", res->stride()},
                {"pad_channels", res->pad_before()}};
      r["shortcut"] = res->shortcut() == Shortcut::option_a   ? "A"
                      : res->shortcut() == Shortcut::option_b ? "B"
                                                              : "identity";
      if (res->projection()) r["projection"] = net_json(w, p + ".projection", *res->projection());
      layers.push_back(r);
    } else if (l.kind() == "dense") {
      layers.push_back({{"type", "dense"}, {"units", l.output_shape()[0]}, {"weights", weights()}});
    } else if (l.kind() == "flatten") {
      layers.push_back({{"type", "flatten"}});
    } else if (l.kind() == "global_avg_pool") {
      layers.push_back({{"type", "globalAveragePooling2d"}});
    } else if (l.kind() == "relu") {
      layers.push_back({{"type", "activation"}, {"activation", "relu"}});
    } else {
      fail("net_json: no TF.js description of ", p, " (", l.kind(), ")");
    }
  }
  return layers;
}

struct InputGradCase {
  const char* arch;
  int64_t batch;
};
void PrintTo(const InputGradCase& c, std::ostream* os) { *os << c.arch; }
const InputGradCase kInputGradCases[] = {{"lenet5", 4}, {"resnet20", 4}};
constexpr uint64_t kInputGradSeed = 20260102;

std::string input_grad_case_name(const InputGradCase& c) { return std::string(c.arch) + "_input_grad"; }
// LeNet-5: pixels in [0,1); ResNet-20: CIFAR-shaped U(-1,1) (a normalised image's range).
Tensor input_grad_x(const InputGradCase& c) {
  if (std::string(c.arch) == "lenet5") return lenet_images(c.batch, 41);
  return random_tensor({c.batch, 3, 32, 32}, DType::f32, 42, -1.0, 1.0);
}
std::vector<int32_t> input_grad_labels(const InputGradCase& c) { return random_labels(c.batch, 10, 43); }

void fill_input_gradient_cases(CaseDir& w) {
  for (const InputGradCase& c : kInputGradCases) {
    Model m = oracle::model_with_random_state(c.arch, Policy::tensorflow(), kInputGradSeed);
    const std::string n = input_grad_case_name(c);
    // ResNet-20's tf.grad takes ~20 s of pure-JS convolution: shard 1, beside two LeNet
    // training runs, as shard 0 has the other two.
    w.add_case({{"name", n},
                {"kind", "input_grad"},
                {"shard", std::string(c.arch) == "resnet20" ? 1 : 0},
                {"training", false},
                {"input", w.input(n + ".x", to_tfjs(input_grad_x(c)))},
                {"layers", net_json(w, n, *m.net)},
                {"labels", w.input(n + ".labels", one_hot(input_grad_labels(c), 10))}});
  }
}

// ---------------------------------------------------------------------------------------------
// Attacks under the tensorflow preset: FGSM and BIM (attacks/gradient.h) against the same attacks
// written with tf.grad of the Keras loss in TF.js: LeNet-5 (random weights), and the same LeNet-5
// with its last layer scaled 50x so that the model is sure of some of its predictions: there Keras's
// probability clip (1e-7) makes the gradient exactly zero on both sides (2 of the 6 samples; the
// others keep a gradient, so one batch holds both kinds).

struct AttackCase {
  const char* name;
  float scale_last;  // the last dense layer's weights and bias times this
};
const AttackCase kAttackCases[] = {{"lenet5_attack", 1.f}, {"lenet5_confident_attack", 50.f}};
constexpr double kAttackEps = 0.03, kAttackStep = 0.01;
constexpr int kAttackSteps = 10;

Model attack_model(const AttackCase& c) {
  Model m = oracle::model_with_random_state("lenet5", Policy::tensorflow(), kInputGradSeed + 1);
  auto params = m.net->named_params();
  for (std::size_t k = params.size() - 2; k < params.size(); ++k) {
    Tensor& t = params[k].second->value;
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] *= c.scale_last;
  }
  return m;
}
Tensor attack_x() { return lenet_images(6, 51); }
std::vector<int32_t> attack_labels() { return random_labels(6, 10, 52); }

void fill_attack_cases(CaseDir& w) {
  for (const AttackCase& c : kAttackCases) {
    Model m = attack_model(c);
    const std::string n = c.name;
    w.add_case({{"name", n},
                {"kind", "attack"},
                {"input", w.input(n + ".x", to_tfjs(attack_x()))},
                {"layers", net_json(w, n, *m.net)},
                {"labels", w.input(n + ".labels", one_hot(attack_labels(), 10))},
                {"eps", kAttackEps},
                {"step", kAttackStep},
                {"steps", kAttackSteps},
                {"lo", 0.0},
                {"hi", 1.0}});
  }
}

// ---------------------------------------------------------------------------------------------
// The case folder: every case below, computed by oracle.js in three node processes side by side
// (node + tfjs start in ~1 s, more than most cases take): shards 0 and 1 share the four LeNet
// training runs, shard 1 also takes ResNet-20's input gradient, shard 2 VGG-16's gradients
// (~80 s of pure-JS convolution); the rest go to shard 0.

std::string train_case_name(const std::string& model, bool nesterov) {
  return model + (nesterov ? "_train_nesterov" : "_train_momentum");
}

void fill_tfjs(CaseDir& w) {
  const Policy tf = Policy::tensorflow();

  for (const LayerCase& c : layer_cases()) {
    auto net = build_net(c.layers, c.in, tf);
    CaseData d = case_data(c, *net);
    json j = {{"name", c.name},
              {"kind", "grad"},
              {"input", w.input(c.name + ".x", to_tfjs(d.x))},
              {"layers", layers_json(w, c.name, c.layers, d.w, c.cce)}};
    if (c.cce)
      j["loss"] = {{"type", "cce"}, {"labels", w.input(c.name + ".labels", one_hot(d.labels, 10))}};
    else
      j["loss"] = {{"type", "sum_r"}, {"r", w.input(c.name + ".r", to_tfjs(d.r))}};
    w.add_case(j);
  }

  // The 20 training batches, shared by the four training cases.
  json batches = json::array();
  for (int s = 0; s < kTrainSteps; ++s) {
    const std::string b = "batch" + std::to_string(s);
    batches.push_back({{"x", w.input(b + ".x", to_tfjs(lenet_images(kTrainBatch, 1000 + s)))},
                       {"labels", w.input(b + ".labels", one_hot(random_labels(kTrainBatch, 10, 2000 + s), 10))}});
  }
  for (const std::string name : {"lenet1", "lenet5"}) {
    Model m = lenet(name, tf);
    const json layers = layers_json(w, name, lenet_descs(name), get_weights(*m.net), true);
    w.add_case({{"name", name},
                {"kind", "grad"},
                {"input", w.input(name + ".x", to_tfjs(lenet_images(kGradBatch, 11)))},
                {"layers", layers},
                {"loss",
                 {{"type", "cce"},
                  {"labels", w.input(name + ".labels", one_hot(random_labels(kGradBatch, 10, 12), 10))}}}});
    // LeNet-5 trained with tf.train.adam (with a step schedule) and tf.train.rmsprop.
    for (int k = 0; name == "lenet5" && k < 2; ++k) {
      const TfjsOptimCase& oc = kTfjsOptimCases[k == 0 ? kTfjsAdamStep : kTfjsRmsprop];
      json c = {{"name", "lenet5_train_" + std::string(oc.name)}, {"kind", "train"}, {"shard", k},
                {"layers", layers}, {"batches", batches}, {"nesterov", false}};
      const json oj = tfjs_optimizer_json(oc, kTrainSteps);
      for (auto& [key, v] : oj.items()) c[key] = v;
      w.add_case(c);
    }
    for (bool nesterov : {false, true}) {
      // The four training runs are most of the node time besides VGG-16: two on each of the two
      // other processes.
      const int shard = (name == "lenet1") == nesterov ? 0 : 1;
      w.add_case({{"name", train_case_name(name, nesterov)},
                  {"kind", "train"},
                  {"shard", shard},
                  {"layers", layers},
                  {"batches", batches},
                  {"lr", kLr},
                  {"momentum", kMomentum},
                  {"nesterov", nesterov}});
    }
  }

  // BatchNorm: one training step with gradients, and the moving statistics after three.
  for (const BnCase& bc : kBnCases) {
    const std::string n = bc.name;
    const BnData d = bn_data(bc);
    const int64_t c = bc.x[1];
    const json layer = {{"type", "batchNormalization"},
                        {"epsilon", tf.bn_eps},
                        {"momentum", tf.bn_momentum},
                        {"weights",
                         {w.input(n + ".gamma", d.gamma), w.input(n + ".beta", d.beta),
                          w.input(n + ".mean0", Tensor::zeros({c}, DType::f32)), w.input(n + ".var0", ones({c}))}}};
    w.add_case({{"name", n},
                {"kind", "grad"},
                {"training", true},
                {"input", w.input(n + ".x0", to_tfjs(d.x[0]))},
                {"layers", json::array({layer})},
                {"loss", {{"type", "sum_r"}, {"r", w.input(n + ".r", to_tfjs(d.r))}}}});
    w.add_case({{"name", n + "_stats"},
                {"kind", "bnstats"},
                {"layer", layer},
                {"xs",
                 {w.input(n + ".x0s", to_tfjs(d.x[0])), w.input(n + ".x1", to_tfjs(d.x[1])),
                  w.input(n + ".x2", to_tfjs(d.x[2]))}},
                {"xe", w.input(n + ".xe", to_tfjs(d.xe))}});
  }
  // ResNet basic blocks (training mode).
  for (const BlockCase& bc : kBlockCases) {
    const std::string n = bc.name;
    const std::vector<Tensor> prm = block_params(bc);
    auto bn_files = [&](const std::string& key, std::size_t i) {  // gamma prm[i], beta prm[i+1]
      const int64_t c = prm[i].numel();
      return json::array({w.input(n + "." + key + ".gamma", prm[i]), w.input(n + "." + key + ".beta", prm[i + 1]),
                          w.input(n + "." + key + ".mean", Tensor::zeros({c}, DType::f32)),
                          w.input(n + "." + key + ".var", ones({c}))});
    };
    json wj = {{"c1", w.input(n + ".c1", weight_to_tfjs(prm[0]))},
               {"b1", bn_files("b1", 1)},
               {"c2", w.input(n + ".c2", weight_to_tfjs(prm[3]))},
               {"b2", bn_files("b2", 4)}};
    if (bc.shortcut == Shortcut::option_b) {
      wj["sc"] = w.input(n + ".sc", weight_to_tfjs(prm[6]));
      wj["scbn"] = bn_files("scbn", 7);
    }
    w.add_case({{"name", n},
                {"kind", "block"},
                {"input", w.input(n + ".x", to_tfjs(block_input(bc)))},
                {"r", w.input(n + ".r", to_tfjs(block_r(bc)))},
                {"stride", bc.stride},
                {"pad_channels", (bc.planes - bc.cin) / 2},
                {"shortcut", bc.tfjs_shortcut},
                {"epsilon", tf.bn_eps},
                {"momentum", tf.bn_momentum},
                {"weights", wj}});
  }
  // VGG-16 forward and gradients: its own node process (shard 2), ~80 s of pure-JS convolution.
  {
    Model m = zoo_model("vgg16", tf);
    w.add_case({{"name", "vgg16"},
                {"kind", "grad"},
                {"shard", 2},
                {"input", w.input("vgg16.x", to_tfjs(model_images("vgg16", kVggBatch, 11)))},
                {"layers", layers_json(w, "vgg16", vgg16_descs(), get_weights(*m.net), true)},
                {"loss",
                 {{"type", "cce"},
                  {"labels", w.input("vgg16.labels", one_hot(random_labels(kVggBatch, 10, 12), 10))}}}});
  }

  const std::string p = w.input("optim.p", optim_params()), g = w.input("optim.g", optim_grads());
  for (bool nesterov : {false, true})
    w.add_case({{"name", nesterov ? "optim_nesterov" : "optim_momentum"},
                {"kind", "optim"},
                {"params", p},
                {"grads", g},
                {"lr", kLr},
                {"momentum", kMomentum},
                {"nesterov", nesterov}});
  // Adam and RMSprop alone on the same fixed gradients (tests: TfjsOracleOptimizers below).
  for (const TfjsOptimCase& oc : kTfjsOptimCases) {
    json c = {{"name", std::string("optim_") + oc.name}, {"kind", "optim"}, {"params", p}, {"grads", g}};
    const json oj = tfjs_optimizer_json(oc, kTrainSteps);
    for (auto& [k, v] : oj.items()) c[k] = v;
    w.add_case(c);
  }
  w.add_case({{"name", "glorot"},
              {"kind", "init"},
              {"initializer", "glorotUniform"},
              {"shape", json::array({kGlorotIn, kGlorotOut})},
              {"seed", kGlorotSeed}});
  fill_input_gradient_cases(w);
  fill_attack_cases(w);
}

const CaseDir& tfjs_run() {
  static const CaseDir run(oracle::tfjs_oracle("oracle.js"), "tfjs", fill_tfjs, {3, ""});
  return run;
}

// ---------------------------------------------------------------------------------------------
// Layer cases: forward, dX, dW, db of each, tensorflow preset

// Compares one layer case computed by driftlab under `policy` with the TF.js results.
void check_layer_case(const CaseDir& run, const LayerCase& c, const Policy& policy, ErrorTable& t, double fwd_tol,
                      double grad_tol) {
  auto net = build_net(c.layers, c.in, policy);
  auto ref_net = build_net(c.layers, c.in, Policy::tensorflow());
  CaseData d = case_data(c, *ref_net);
  set_weights(*net, d.w);
  NetResult r = run_driftlab(*net, d.x, d.r, d.labels, policy);
  for (std::size_t i = 0; i < net->size(); ++i) {
    const std::string where = std::to_string(i) + " " + net->layer(i).kind();
    EXPECT_TRUE(t.check(where, "forward y", r.ys[i], from_tfjs(run.out(c.name, "y" + std::to_string(i))), fwd_tol));
    for (std::size_t j = 0; j < r.dw[i].size(); ++j)
      EXPECT_TRUE(t.check(where, j == 0 ? "dW" : "db", r.dw[i][j],
                          weight_from_tfjs(run.out(c.name, "dw" + std::to_string(i) + "_" + std::to_string(j))),
                          grad_tol));
  }
  if (c.cce) {
    Tensor loss = Tensor::from<double>({1}, {r.loss});
    EXPECT_TRUE(t.check("loss", "mean CE", loss, run.out(c.name, "loss"), kLossTol));
  }
  EXPECT_TRUE(t.check("input", "dX", r.dx, from_tfjs(run.out(c.name, "dx")), grad_tol));
}

class TfjsOracleLayer : public ::testing::TestWithParam<LayerCase> {};

TEST_P(TfjsOracleLayer, ForwardAndGradientsMatch) {
  ORACLE_GROUP(run, tfjs_run);
  const LayerCase& c = GetParam();
  ErrorTable t("tensorflow preset vs TF.js: " + c.name, "tfjs");
  check_layer_case(run, c, Policy::tensorflow(), t, kFwdTol, kGradTol);
  t.print();
}

INSTANTIATE_TEST_SUITE_P(TfjsOracle, TfjsOracleLayer, ::testing::ValuesIn(layer_cases()),
                         [](const ::testing::TestParamInfo<LayerCase>& i) { return i.param.name; });

// The SAME pads driftlab resolves are the ones TF's GetWindowedOutputSize gives; the layer
// cases above show the numbers agree, this pins the asymmetric split they rely on.
TEST(TfjsOracle, SamePaddingIsAsymmetricWhereTheCasesNeedIt) {
  auto pads = [](const std::string& name) {
    const LayerCase& c = layer_case(name);
    Conv2dParams p = resolve_conv2d(Policy::tensorflow(), c.in, c.layers[0].conv);
    return std::vector<int64_t>{p.pad_t, p.pad_b, p.pad_l, p.pad_r};
  };
  EXPECT_EQ(pads("conv_same_k2_s1_even"), (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(pads("conv_same_k3_s2_even"), (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(pads("conv_same_k3_s2_odd"), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(pads("conv_same_k3_s2_8x7"), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(pads("conv_same_k5_s2_even"), (std::vector<int64_t>{1, 2, 1, 2}));
}

// Crossentropy: the clip zeroes the gradient of the confident rows 0 and 1 in both.
TEST(TfjsOracle, CrossentropyClipZeroesConfidentGradients) {
  ORACLE_GROUP(run, tfjs_run);
  const Tensor dz = run.out("categorical_crossentropy", "dx");
  for (int64_t row : {0, 1})
    for (int64_t j = 0; j < 10; ++j) EXPECT_EQ(dz.at(row * 10 + j), 0.0) << "TF.js row " << row << " class " << j;
  bool row2_nonzero = false;
  for (int64_t j = 0; j < 10; ++j) row2_nonzero |= dz.at(20 + j) != 0.0;
  EXPECT_TRUE(row2_nonzero) << "row 2 (q_y = 1-1e-6) is inside the clip and must learn";
  const LayerCase& c = layer_case("categorical_crossentropy");
  auto net = build_net(c.layers, c.in, Policy::tensorflow());
  CaseData d = case_data(c, *net);
  NetResult r = run_driftlab(*net, d.x, d.r, d.labels, Policy::tensorflow());
  for (int64_t row : {0, 1})
    for (int64_t j = 0; j < 10; ++j) EXPECT_EQ(r.dlogits.at(row * 10 + j), 0.0) << "driftlab row " << row;
}

// Max-pool ties: TF.js's maxPoolBackprop (tfjs-backend-cpu MaxPoolGrad.js with
// maxPoolPositions' strict `pixel > maxValue`) sends the gradient to the first max in
// row-major order, as TF's CPU MaxPoolGrad does and as the tensorflow preset does (the layer
// case maxpool_2x2_ties matches exactly). Sending it to every tie (theano's rule) does not:
// this shows the case really has ties, and by how much the rules differ.
TEST(TfjsOracle, MaxPoolTiesGoToTheFirstMax) {
  ORACLE_GROUP(run, tfjs_run);
  const LayerCase& c = layer_case("maxpool_2x2_ties");
  const Tensor ref = from_tfjs(run.out(c.name, "dx"));
  auto dx_for = [&](const Policy& p) {
    auto net = build_net(c.layers, c.in, p);
    CaseData d = case_data(c, *net);
    return run_driftlab(*net, d.x, d.r, d.labels, p).dx;
  };
  auto ref_net = build_net(c.layers, c.in, Policy::tensorflow());
  const CaseData d = case_data(c, *ref_net);
  int64_t tied = 0, windows = 0;
  for (int64_t nc = 0; nc < d.x.dim(0) * d.x.dim(1); ++nc)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 3; ++j) {
        const float* p = d.x.data<float>() + nc * 36 + (2 * i) * 6 + 2 * j;
        const float v[4] = {p[0], p[1], p[6], p[7]};
        const float m = *std::max_element(v, v + 4);
        tied += std::count(v, v + 4, m) > 1;
        ++windows;
      }
  const Tensor first = dx_for(Policy::tensorflow());
  const Tensor all = dx_for(Policy::parse("tensorflow,maxpool_grad_ties=all"));
  std::cout << "  " << tied << " of " << windows << " 2x2 windows have a tied max; ties=first vs TF.js max abs diff "
            << max_abs_diff(first, ref) << ", ties=all vs TF.js " << max_abs_diff(all, ref) << "\n";
  EXPECT_GT(tied, windows / 4);
  EXPECT_TRUE(bitwise_equal(first, ref)) << "a max-pool gradient only routes dy: it must be exact";
  EXPECT_GT(max_abs_diff(all, ref), 0.1);
}

// ---------------------------------------------------------------------------------------------
// LeNet-1 and LeNet-5 whole

void check_model(const CaseDir& run, const std::string& name) {
  const Policy tf = Policy::tensorflow();
  Model m = zoo_model(name, tf);
  // The description sent to TF.js must be the zoo model: same layer kinds and shapes.
  auto ref = build_net(model_descs(name), m.input_shape, tf);
  ASSERT_EQ(ref->size(), m.net->size());
  for (std::size_t i = 0; i < ref->size(); ++i) {
    ASSERT_EQ(ref->layer(i).kind(), m.net->layer(i).kind()) << "layer " << i;
    ASSERT_EQ(ref->layer(i).output_shape(), m.net->layer(i).output_shape()) << "layer " << i;
  }
  const int64_t batch = name == "vgg16" ? kVggBatch : kGradBatch;
  const Tensor x = model_images(name, batch, 11);
  const std::vector<int32_t> y = random_labels(batch, 10, 12);
  NetResult r = run_driftlab(*m.net, x, Tensor(), y, tf);
  ErrorTable t(name + " (tensorflow preset) vs TF.js, batch " + std::to_string(batch) +
               ", loss = mean Keras categorical crossentropy", "tfjs");
  for (std::size_t i = 0; i < m.net->size(); ++i) {
    const std::string where = std::to_string(i) + " " + m.net->layer(i).kind();
    EXPECT_TRUE(t.check(where, "forward y", r.ys[i], from_tfjs(run.out(name, "y" + std::to_string(i))), kFwdTol));
    for (std::size_t j = 0; j < r.dw[i].size(); ++j)
      EXPECT_TRUE(t.check(where, j == 0 ? "dW" : "db", r.dw[i][j],
                          weight_from_tfjs(run.out(name, "dw" + std::to_string(i) + "_" + std::to_string(j))),
                          kGradTol));
  }
  EXPECT_TRUE(t.check("loss", "mean CE", Tensor::from<double>({1}, {r.loss}), run.out(name, "loss"), kLossTol));
  EXPECT_TRUE(t.check("input", "dX", r.dx, from_tfjs(run.out(name, "dx")), kGradTol));
  t.print();
}

TEST(TfjsOracle, LeNet1ForwardLossGradients) {
  ORACLE_GROUP(run, tfjs_run);
  check_model(run, "lenet1");
}
TEST(TfjsOracle, LeNet5ForwardLossGradients) {
  ORACLE_GROUP(run, tfjs_run);
  check_model(run, "lenet5");
}
// VGG-16: 38 layers, sums of up to 4,608 products (conv) and 4,096 (dense) per output; the
// same normwise tolerances hold (see kFwdTol, kGradTol: the rounding grows with sqrt(terms)).
TEST(TfjsOracle, Vgg16ForwardLossGradients) {
  ORACLE_GROUP(run, tfjs_run);
  check_model(run, "vgg16");
}

// ---------------------------------------------------------------------------------------------
// BatchNorm (training step, moving statistics, inference) and ResNet basic blocks

void set_params(Layer& l, const std::vector<Tensor>& values) {
  auto ps = l.params();
  ASSERT_EQ(ps.size(), values.size());
  for (std::size_t i = 0; i < ps.size(); ++i) {
    ps[i]->value = values[i].clone();
    ps[i]->grad.zero();
  }
}

TEST(TfjsOracle, BatchNormTrainingMovingStatisticsInference) {
  ORACLE_GROUP(run, tfjs_run);
  const Policy tf = Policy::tensorflow();
  ErrorTable t("BatchNorm (tensorflow preset: eps 1e-3, momentum 0.99) vs tf.layers.batchNormalization", "tfjs");
  for (const BnCase& bc : kBnCases) {
    const std::string n = bc.name;
    const BnData d = bn_data(bc);
    const Shape per(bc.x.begin() + 1, bc.x.end());
    ExecContext exec;
    // One training step: y, dX, dgamma, dbeta. Each is a sum over the N*H*W (<= 100) values of
    // a channel and a division by the batch standard deviation; float32 rounding of either
    // order stays a few ulps of the largest entry, below kGradTol of it.
    {
      BatchNormLayer layer(per, tf);
      set_params(layer, {d.gamma, d.beta});
      RunContext ctx = RunContext::training(exec, nullptr);
      const Tensor y = layer.forward(ctx, d.x[0]);
      const Tensor dx = layer.backward(ctx, d.r);
      EXPECT_TRUE(t.check(n, "forward (train)", y, from_tfjs(run.out(n, "y0")), kFwdTol));
      EXPECT_TRUE(t.check(n, "dX", dx, from_tfjs(run.out(n, "dx")), kGradTol));
      EXPECT_TRUE(t.check(n, "dgamma", layer.params()[0]->grad, run.out(n, "dw0_0"), kGradTol));
      EXPECT_TRUE(t.check(n, "dbeta", layer.params()[1]->grad, run.out(n, "dw0_1"), kGradTol));
    }
    // Moving statistics after three training batches, then inference with them. TF.js
    // averages the biased batch variance without debiasing (tfjs_batchnorm_policy): three
    // mixes of per-channel means, rounding only. The tensorflow preset (Keras 2.2.4 on TF1)
    // averages n/(n-1-eps) times the variance and debiases: reported, and required to differ.
    const Tensor ref_mean = run.out(n + "_stats", "moving_mean"), ref_var = run.out(n + "_stats", "moving_variance");
    const Tensor ref_eval = from_tfjs(run.out(n + "_stats", "y_eval"));
    for (const bool tfjs_rule : {true, false}) {
      BatchNormLayer layer(per, tfjs_rule ? tfjs_batchnorm_policy() : tf);
      set_params(layer, {d.gamma, d.beta});
      RunContext train = RunContext::training(exec, nullptr);
      for (const Tensor& x : d.x) layer.forward(train, x);
      RunContext infer = RunContext::inference(exec);
      const Tensor ye = layer.forward(infer, d.xe);
      const std::vector<Param*> bufs = layer.buffers();
      ASSERT_GE(bufs.size(), 2u);
      if (tfjs_rule) {
        const std::string q = " (biased, no debias)";
        EXPECT_TRUE(t.check(n, "moving_mean" + q, bufs[0]->value, ref_mean, kFwdTol));
        EXPECT_TRUE(t.check(n, "moving_variance" + q, bufs[1]->value, ref_var, kFwdTol));
        EXPECT_TRUE(t.check(n, "forward (inference)" + q, ye, ref_eval, kFwdTol));
      } else {
        t.note(n, "moving_mean (preset)", max_abs_diff(bufs[0]->value, ref_mean), rel_error(bufs[0]->value, ref_mean));
        t.note(n, "moving_variance (preset)", max_abs_diff(bufs[1]->value, ref_var),
               rel_error(bufs[1]->value, ref_var));
        t.note(n, "inference (preset)", max_abs_diff(ye, ref_eval), rel_error(ye, ref_eval));
        // Debiasing after 3 steps at momentum 0.99 divides by 1-0.99^3 = 0.0297: the statistics
        // are the batches' own scale instead of 97% of their initial values.
        EXPECT_GT(rel_error(bufs[1]->value, ref_var), 0.1) << "the preset's Keras 2.2.4 rule should differ from TF.js";
      }
    }
  }
  t.print();
}

TEST(TfjsOracle, ResidualBasicBlocks) {
  ORACLE_GROUP(run, tfjs_run);
  ErrorTable t("ResNet basic block + relu (tensorflow preset, training mode) vs TF.js layers", "tfjs");
  for (const BlockCase& bc : kBlockCases) {
    const std::string n = bc.name;
    std::unique_ptr<Sequential> net = basic_block(bc, Policy::tensorflow());
    const std::vector<Tensor> prm = block_params(bc);
    auto named = net->named_params();
    ASSERT_EQ(named.size(), prm.size());
    for (std::size_t i = 0; i < prm.size(); ++i) {
      named[i].second->value = prm[i].clone();
      named[i].second->grad.zero();
    }
    ExecContext exec;
    RunContext ctx = RunContext::training(exec, nullptr);
    const Tensor y = net->forward(ctx, block_input(bc));
    const Tensor dx = net->backward(ctx, block_r(bc));
    // Two 3x3 convolutions (<= 288 products per output, 2,304 per weight gradient), each
    // followed by a BatchNorm that divides by the batch standard deviation: float32 rounding
    // of either order stays below kGradTol of the largest entry of each tensor.
    EXPECT_TRUE(t.check(n, "forward", y, from_tfjs(run.out(n, "y")), kFwdTol));
    EXPECT_TRUE(t.check(n, "dX", dx, from_tfjs(run.out(n, "dx")), kGradTol));
    for (std::size_t i = 0; i < named.size(); ++i) {
      const std::string pname = named[i].first.substr(named[i].first.find('.') + 1);
      EXPECT_TRUE(t.check(n, "grad " + pname, named[i].second->grad,
                          weight_from_tfjs(run.out(n, "g" + std::to_string(i))), kGradTol));
    }
  }
  t.print();
}

// ---------------------------------------------------------------------------------------------
// 20 SGD steps with momentum 0.9 / Nesterov: driftlab's keras_velocity (the preset) and
// torch_buffer (TF1 ApplyMomentum's algebra) against tf.train.momentum.

// driftlab's weights after the 20 steps (driftlab layout), per param in named_params order.
std::vector<Tensor> train_driftlab(const std::string& name, const Policy& policy, bool nesterov,
                                   std::vector<double>* losses) {
  Model m = lenet(name, policy);
  ExecContext exec;
  TrainConfig cfg;
  cfg.batch = kTrainBatch;
  cfg.optim.lr = kLr;
  cfg.optim.momentum = kMomentum;
  cfg.optim.nesterov = nesterov;
  CpuRunner tr(m, cfg, exec);
  for (int s = 0; s < kTrainSteps; ++s)
    losses->push_back(tr.train_step(lenet_images(kTrainBatch, 1000 + s), random_labels(kTrainBatch, 10, 2000 + s)));
  std::vector<Tensor> out;
  for (auto& np : m.net->named_params()) out.push_back(np.second->value.clone());
  return out;
}

// Displacement tolerance: the trained weights are compared as w20 - w0 (what training did)
// relative to max|w20 - w0| of TF.js. Each step's gradients differ by up to kGradTol (the
// engines' rounding); the displacement is -lr * a positively weighted sum of the 20 gradients,
// so its relative error is kGradTol times the cancellation across steps (observed 10x at
// most: 2.8e-6). 1e-4 allows that; using the wrong rule (Nesterov for plain momentum, a
// missing step, lr or mu applied twice) moves the displacement by > 5%.
constexpr double kTrainDispTol = 1e-4;
// The per-step losses come from forwards on slightly different weights: kFwdTol.
constexpr double kTrainLossTol = kFwdTol;

void check_training(const CaseDir& run, const std::string& name, bool nesterov) {
  const std::string cn = train_case_name(name, nesterov);
  Model m0 = lenet(name, Policy::tensorflow());
  auto named = m0.net->named_params();
  // TF.js weights by layer: named_params are in layer order, weight before bias.
  std::vector<Tensor> ref;
  for (std::size_t i = 0, k = 0; i < m0.net->size(); ++i)
    for (std::size_t j = 0; j < m0.net->layer(i).params().size(); ++j, ++k)
      ref.push_back(weight_from_tfjs(run.out(cn, "w" + std::to_string(i) + "_" + std::to_string(j))));
  ASSERT_EQ(ref.size(), named.size());
  std::ostringstream title;
  title << name << ": weights after " << kTrainSteps << " steps, lr " << kLr << ", momentum " << kMomentum
        << (nesterov ? ", Nesterov" : "") << ", batch " << kTrainBatch << " vs tf.train.momentum";
  ErrorTable t(title.str(), "tfjs");
  Tensor tf_losses = run.out(cn, "losses");
  double worst[2] = {0, 0};
  const char* forms[2] = {"keras_velocity", "torch_buffer"};
  for (int f = 0; f < 2; ++f) {
    Policy p = Policy::tensorflow();
    p.set("sgd_form", forms[f]);
    std::vector<double> losses;
    std::vector<Tensor> got = train_driftlab(name, p, nesterov, &losses);
    EXPECT_TRUE(t.check("losses", std::string("20 losses ") + forms[f], Tensor::from<double>({kTrainSteps}, losses),
                        tf_losses, kTrainLossTol));
    for (std::size_t k = 0; k < named.size(); ++k) {
      const Tensor& w0 = named[k].second->value;
      Tensor da(w0.shape(), DType::f32), dr(w0.shape(), DType::f32);
      for (int64_t e = 0; e < w0.numel(); ++e) {
        da.data<float>()[e] = got[k].data<float>()[e] - w0.data<float>()[e];
        dr.data<float>()[e] = ref[k].data<float>()[e] - w0.data<float>()[e];
      }
      EXPECT_TRUE(t.check(named[k].first, std::string("w20-w0 ") + forms[f], da, dr, kTrainDispTol));
      double mx = 0;
      for (int64_t e = 0; e < w0.numel(); ++e) mx = std::max(mx, std::fabs(got[k].at(e) - ref[k].at(e)));
      worst[f] = std::max(worst[f], mx);
    }
  }
  t.print();
  std::cout << "  " << name << (nesterov ? " Nesterov" : " momentum") << ": max |w_driftlab - w_tfjs| after "
            << kTrainSteps << " steps: keras_velocity " << worst[0] << ", torch_buffer " << worst[1] << " ("
            << (worst[1] < worst[0] ? "torch_buffer" : worst[1] > worst[0] ? "keras_velocity" : "neither")
            << " closer, ratio " << (worst[1] > 0 ? worst[0] / worst[1] : 0.0) << ")\n";
  ::testing::Test::RecordProperty(name + (nesterov ? "_nesterov" : "_momentum") + "_keras_velocity_max_abs",
                                  std::to_string(worst[0]));
  ::testing::Test::RecordProperty(name + (nesterov ? "_nesterov" : "_momentum") + "_torch_buffer_max_abs",
                                  std::to_string(worst[1]));
}

TEST(TfjsOracle, LeNet1TwentyMomentumSteps) {
  ORACLE_GROUP(run, tfjs_run);
  check_training(run, "lenet1", false);
}
TEST(TfjsOracle, LeNet1TwentyNesterovSteps) {
  ORACLE_GROUP(run, tfjs_run);
  check_training(run, "lenet1", true);
}
TEST(TfjsOracle, LeNet5TwentyMomentumSteps) {
  ORACLE_GROUP(run, tfjs_run);
  check_training(run, "lenet5", false);
}
TEST(TfjsOracle, LeNet5TwentyNesterovSteps) {
  ORACLE_GROUP(run, tfjs_run);
  check_training(run, "lenet5", true);
}

// The optimiser alone, on fixed gradients, so that only the update formula differs.
// IEEE float32 operations written so that no compiler can fuse them into an FMA: a float
// product or sum is exact in double, and rounding that double to float once is the float op.
float f32_mul(float a, float b) { return static_cast<float>(static_cast<double>(a) * static_cast<double>(b)); }
float f32_add(float a, float b) { return static_cast<float>(static_cast<double>(a) + static_cast<double>(b)); }

// TF1 ApplyMomentum as tfjs-core 4.22 optimizers/momentum_optimizer.js writes it, with
// c = -lr (sgd_optimizer.js): a = m*a + g; p = c*a + p; Nesterov p = c*(g + a*m) + p.
Tensor apply_momentum_by_hand(bool nesterov) {
  Tensor p = optim_params(), g = optim_grads();
  Tensor a({kOptimN}, DType::f32), traj({kTrainSteps, kOptimN}, DType::f32);
  const float m = static_cast<float>(kMomentum), c = static_cast<float>(-kLr);
  for (int s = 0; s < kTrainSteps; ++s)
    for (int64_t i = 0; i < kOptimN; ++i) {
      float& ai = a.data<float>()[i];
      float& pi = p.data<float>()[i];
      const float gi = g.data<float>()[s * kOptimN + i];
      ai = f32_add(f32_mul(m, ai), gi);
      pi = f32_add(f32_mul(c, nesterov ? f32_add(gi, f32_mul(ai, m)) : ai), pi);
      traj.data<float>()[s * kOptimN + i] = pi;
    }
  return traj;
}

Tensor sgd_driftlab(const std::string& form, bool nesterov) {
  Policy pol = Policy::tensorflow();
  pol.set("sgd_form", form);
  OptimConfig cfg;
  cfg.lr = kLr;
  cfg.momentum = kMomentum;
  cfg.nesterov = nesterov;
  Optimizer sgd(cfg, resolve_optim(pol));
  Param prm{"weight", optim_params(), Tensor({kOptimN}, DType::f32), false};
  const Tensor g = optim_grads();
  Tensor traj({kTrainSteps, kOptimN}, DType::f32);
  for (int s = 0; s < kTrainSteps; ++s) {
    for (int64_t i = 0; i < kOptimN; ++i) prm.grad.data<float>()[i] = g.data<float>()[s * kOptimN + i];
    sgd.step(ExecContext{}, {{"p", &prm}});
    for (int64_t i = 0; i < kOptimN; ++i) traj.data<float>()[s * kOptimN + i] = prm.value.data<float>()[i];
  }
  return traj;
}

// Bound on |keras_velocity - ApplyMomentum| after t steps in float32 (the two are equal in
// exact arithmetic): the velocities v = -lr*a differ by the roundings of mu*v, lr*g (Keras)
// and mu*a, +g, c*a (TF): <= ~3 eps |v| per step, and earlier differences decay by mu, so
// <= 3 eps |v|max / (1-mu) = 30 eps |v|max; p differs additionally by one rounding of p+v per
// step. Summed over t steps: t * eps * (|p|max + 30 |v|max), with |p|max and |v|max = the
// largest step |p_t - p_t-1| read from TF.js's trajectory.
double momentum_form_bound(const Tensor& traj) {
  const double eps = std::numeric_limits<float>::epsilon();
  const int64_t steps = traj.dim(0), n = traj.dim(1);
  const Tensor p0 = optim_params();
  double pmax = 0, vmax = 0;
  for (int64_t s = 0; s < steps; ++s)
    for (int64_t i = 0; i < n; ++i) {
      const double p = traj.at(s * n + i), prev = s ? traj.at((s - 1) * n + i) : p0.at(i);
      pmax = std::max(pmax, std::fabs(p));
      vmax = std::max(vmax, std::fabs(p - prev));
    }
  return static_cast<double>(steps) * eps * (pmax + 30 * vmax);
}

void check_momentum_formula(const CaseDir& run, bool nesterov) {
  const std::string cn = nesterov ? "optim_nesterov" : "optim_momentum";
  const Tensor tfjs = run.out(cn, "traj");
  // 1) TF.js is ApplyMomentum: bit for bit the hand-written TF1 formula above.
  EXPECT_TRUE(bitwise_equal(tfjs, apply_momentum_by_hand(nesterov)))
      << "tf.train.momentum is not a = m*a + g; p += -lr*a" << (nesterov ? " (Nesterov -lr*(g + m*a))" : "");
  std::ostringstream title;
  title << "SGD formula alone, " << kTrainSteps << " steps of fixed gradients, " << kOptimN << " params, lr " << kLr
        << ", momentum " << kMomentum << (nesterov ? ", Nesterov" : "") << ", vs tf.train.momentum";
  ErrorTable t(title.str(), "tfjs");
  const double bound = momentum_form_bound(tfjs);
  double worst[2] = {0, 0};
  const char* forms[2] = {"keras_velocity", "torch_buffer"};
  for (int f = 0; f < 2; ++f) {
    Tensor got = sgd_driftlab(forms[f], nesterov);
    // All 20 steps against the bound (atol; rtol 0): see momentum_form_bound.
    auto res = all_close(got, tfjs, bound, 0.0);
    EXPECT_TRUE(res) << forms[f] << ": " << res.message();
    double mx = 0, mr = 0;
    int64_t differing = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      mx = std::max(mx, std::fabs(got.at(i) - tfjs.at(i)));
      mr = std::max(mr, std::fabs(tfjs.at(i)));
      differing += got.at(i) != tfjs.at(i);
    }
    worst[f] = mx;
    t.note("trajectory", forms[f], mx, mx / mr);
    std::cout << "  " << forms[f] << ": " << differing << " of " << got.numel()
              << " trajectory values differ from TF.js in float32 (bound used " << bound << ")\n";
    // 2) torch_buffer is ApplyMomentum's algebra with the same float32 operations in the same
    //    order (b = mu*b + g; p -= lr*b; Nesterov p -= lr*(g + mu*b)), and the library is built
    //    with -ffp-contract=off, so it must agree bit for bit, at every step.
    if (std::string(forms[f]) == "torch_buffer") {
      EXPECT_TRUE(bitwise_equal(got, tfjs)) << "torch_buffer";
    }
  }
  t.print();
  std::cout << "  " << (worst[1] < worst[0] ? "torch_buffer" : worst[1] > worst[0] ? "keras_velocity" : "neither")
            << " is closer to tf.train.momentum: max abs " << worst[0] << " (keras_velocity) vs " << worst[1]
            << " (torch_buffer)\n";
  ::testing::Test::RecordProperty(std::string(nesterov ? "nesterov" : "momentum") + "_keras_velocity_max_abs",
                                  std::to_string(worst[0]));
}

// The optimiser alone on fixed gradients: driftlab's Optimizer under the tensorflow preset with
// the TF.js knobs must give TF.js's trajectory bit for bit (both round every operation to float32
// in the same order; l2 = Keras's regularizer, whose gradient 2*D*p TF.js's autodiff forms); the
// preset itself (Keras 2.2.4's formulas) is shown beside it: the size of the formula difference.
Tensor optimizer_trajectory(const TfjsOptimCase& oc, bool as_tfjs) {
  Optimizer opt(tfjs_optim_config(oc, kTrainBatch).optim, resolve_optim(tfjs_optim_policy(oc, as_tfjs)));
  LrSchedule sched(tfjs_optim_config(oc, kTrainBatch).schedule, oc.lr, tfjs_optim_policy(oc, as_tfjs));
  Param prm{"weight", optim_params(), Tensor({kOptimN}, DType::f32), false};
  const Tensor g = optim_grads();
  Tensor traj({kTrainSteps, kOptimN}, DType::f32);
  for (int s = 0; s < kTrainSteps; ++s) {
    for (int64_t i = 0; i < kOptimN; ++i) prm.grad.data<float>()[i] = g.data<float>()[s * kOptimN + i];
    opt.step(ExecContext{}, {{"p", &prm}}, sched.lr());
    sched.after_step();
    for (int64_t i = 0; i < kOptimN; ++i) traj.data<float>()[s * kOptimN + i] = prm.value.data<float>()[i];
  }
  return traj;
}

TEST(TfjsOracleOptimizers, AdamAndRmspropFormulasAloneBitForBit) {
  ORACLE_GROUP(run, tfjs_run);
  ErrorTable t("Adam / RMSprop alone, 20 steps of fixed gradients, 4096 params, vs tf.train.adam / tf.train.rmsprop",
               "tfjs");
  for (const TfjsOptimCase& oc : kTfjsOptimCases) {
    const Tensor tfjs = run.out(std::string("optim_") + oc.name, "traj");
    const Tensor as_tfjs = optimizer_trajectory(oc, true), keras = optimizer_trajectory(oc, false);
    EXPECT_TRUE(bitwise_equal(as_tfjs, tfjs)) << oc.name << " with "
                                              << (oc.kind == OptimizerKind::adam ? kTfjsAdamKnobs : kTfjsRmspropKnobs);
    EXPECT_TRUE(t.check(oc.name, "tensorflow + TF.js knobs", as_tfjs, tfjs, 0.0));
    // The Keras 2.2.4 formulas of the preset differ visibly (> 1e-6 of the largest value).
    EXPECT_GT(t.note(oc.name, "tensorflow preset (Keras 2.2.4 formula)", keras, tfjs), 1e-6) << oc.name;
  }
  t.print();
}

// LeNet-5 trained 20 steps with tf.train.adam (+ step schedule) and tf.train.rmsprop from the same
// weights and batches, against driftlab with the TF.js knobs (displacement and losses), and the
// preset's Keras formulas shown beside. The losses as for SGD. The displacement tolerance is
// wider than SGD's: SGD's displacement is linear in the gradients, so an element's error is
// bounded by kGradTol of the tensor's largest gradient; Adam and RMSprop normalise each element
// (m/(sqrt(v)+eps)), so an element whose gradient is comparable to eps (1e-7) moves by
// ~lr*g/(|g|+eps), and the relative error of that small gradient (up to ~1e-3 for a sum that
// cancels to ~1e-7) passes into its step: <= lr*1e-3/4 per step, 20 steps at lr 1e-3: 5e-6,
// against a largest displacement of ~1e-2 (lr*20 at most; measured 8e-3): 5e-4 -> 1e-3.
constexpr double kAdaptiveDispTol = 1e-3;
TEST(TfjsOracleOptimizers, LeNet5TwentyAdamAndRmspropSteps) {
  ORACLE_GROUP(run, tfjs_run);
  ErrorTable t("lenet5: weights after 20 steps of tf.train.adam / tf.train.rmsprop (w20 - w0)", "tfjs");
  for (int k = 0; k < 2; ++k) {
    const TfjsOptimCase& oc = kTfjsOptimCases[k == 0 ? kTfjsAdamStep : kTfjsRmsprop];
    const std::string cn = "lenet5_train_" + std::string(oc.name);
    Model m0 = lenet("lenet5", Policy::tensorflow());
    auto named = m0.net->named_params();
    std::vector<Tensor> ref;
    for (std::size_t i = 0; i < m0.net->size(); ++i)
      for (std::size_t j = 0; j < m0.net->layer(i).params().size(); ++j)
        ref.push_back(weight_from_tfjs(run.out(cn, "w" + std::to_string(i) + "_" + std::to_string(j))));
    ASSERT_EQ(ref.size(), named.size());
    for (const bool as_tfjs : {true, false}) {
      Model m = lenet("lenet5", tfjs_optim_policy(oc, as_tfjs));
      ExecContext exec;
      CpuRunner tr(m, tfjs_optim_config(oc, kTrainBatch), exec);
      std::vector<double> losses;
      for (int s = 0; s < kTrainSteps; ++s)
        losses.push_back(tr.train_step(lenet_images(kTrainBatch, 1000 + s), random_labels(kTrainBatch, 10, 2000 + s)));
      const std::string qty = std::string(oc.name) + (as_tfjs ? " + TF.js knobs" : " (Keras 2.2.4 formula)");
      auto got = m.net->named_params();
      for (std::size_t q = 0; q < named.size(); ++q) {
        const Tensor& w0 = named[q].second->value;
        Tensor da(w0.shape(), DType::f32), dr(w0.shape(), DType::f32);
        for (int64_t e = 0; e < w0.numel(); ++e) {
          da.data<float>()[e] = got[q].second->value.data<float>()[e] - w0.data<float>()[e];
          dr.data<float>()[e] = ref[q].data<float>()[e] - w0.data<float>()[e];
        }
        if (as_tfjs) {
          EXPECT_TRUE(t.check(named[q].first, "w20-w0 " + qty, da, dr, kAdaptiveDispTol));
        } else {
          t.note(named[q].first, "w20-w0 " + qty, da, dr);
        }
      }
      if (as_tfjs) {
        EXPECT_TRUE(t.check("losses", "20 losses " + qty, Tensor::from<double>({kTrainSteps}, losses),
                            run.out(cn, "losses"), kTrainLossTol));
      }
    }
  }
  t.print();
}

TEST(TfjsOracle, MomentumFormulaAlone) {
  ORACLE_GROUP(run, tfjs_run);
  check_momentum_formula(run, false);
}
TEST(TfjsOracle, NesterovFormulaAlone) {
  ORACLE_GROUP(run, tfjs_run);
  check_momentum_formula(run, true);
}

// ---------------------------------------------------------------------------------------------
// glorot_uniform against tf.initializers.glorotUniform: two-sample Kolmogorov-Smirnov


// A 256 -> 120 dense kernel drawn by driftlab's DenseLayer under `policy`.
Tensor dense_kernel(const Policy& policy) {
  Rng rng(policy.rng_engine, 12345);
  DenseLayer layer(kGlorotOut, {kGlorotIn}, policy, rng);
  return layer.params()[0]->value.clone();
}

struct KsResult {
  double d, crit, max_abs_driftlab;
};
KsResult ks_against_tfjs(const CaseDir& run, const Policy& policy) {
  const Tensor ref = run.out("glorot", "w");
  const Tensor got = dense_kernel(policy);
  KsResult r{oracle::ks_statistic(oracle::values_of(got), oracle::values_of(ref)),
             oracle::ks_threshold(static_cast<std::size_t>(got.numel()), static_cast<std::size_t>(ref.numel())), 0};
  for (int64_t i = 0; i < got.numel(); ++i) r.max_abs_driftlab = std::max(r.max_abs_driftlab, std::fabs(got.at(i)));
  return r;
}

TEST(TfjsOracle, GlorotUniformKolmogorovSmirnov) {
  ORACLE_GROUP(run, tfjs_run);
  const Tensor ref = run.out("glorot", "w");
  ASSERT_EQ(ref.shape(), (Shape{kGlorotIn, kGlorotOut}));
  const double bound = std::sqrt(6.0 / static_cast<double>(kGlorotIn + kGlorotOut));
  double max_ref = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) max_ref = std::max(max_ref, std::fabs(ref.at(i)));
  // Both within the bound; with 30,720 uniform draws the largest |w| is above 0.999*bound
  // unless the bound is wrong (P(all below) = 0.999^30720 ~ 5e-14).
  const KsResult r = ks_against_tfjs(run, Policy::tensorflow());
  std::cout << "  glorot_uniform 256x120: bound sqrt(6/376) = " << bound << ", max|w| driftlab " << r.max_abs_driftlab
            << ", TF.js " << max_ref << "; KS D = " << r.d << " vs critical " << r.crit << " (alpha 0.001, n = m = "
            << ref.numel() << ")\n";
  ::testing::Test::RecordProperty("ks_d", std::to_string(r.d));
  EXPECT_LE(max_ref, bound * (1 + 1e-7));  // float32 rounding of the bound itself
  EXPECT_GT(max_ref, 0.999 * bound);
  EXPECT_LE(r.max_abs_driftlab, bound * (1 + 1e-7));
  EXPECT_GT(r.max_abs_driftlab, 0.999 * bound);
  EXPECT_LT(r.d, r.crit) << "driftlab's glorot_uniform and tf.initializers.glorotUniform differ in distribution";
}

// ---------------------------------------------------------------------------------------------
// Negative tests: the torch preset does not match TF.js where a knob differs, and flipping
// that knob to the tensorflow value restores the match.

// A difference counts as "does not match" when it exceeds the match tolerance 100-fold.
constexpr double kMismatchFactor = 100;

TEST(TfjsNegative, StridedSamePadding) {
  ORACLE_GROUP(run, tfjs_run);
  const LayerCase& c = layer_case("conv_same_k3_s2_even");  // 8x8, k=3, s=2: TF pads (0,1)
  // 1) conv_same_pad=after_stride1 refuses strided 'same', as PyTorch does.
  try {
    build_net(c.layers, c.in, Policy::parse("torch,conv_same_pad=after_stride1"));
    ADD_FAILURE() << "conv_same_pad=after_stride1 accepted padding='same' with stride 2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("refused under conv_same_pad=after_stride1"), std::string::npos) << e.what();
    std::cout << "  conv_same_pad=after_stride1: " << e.what() << "\n";
  }
  // 2) torch with conv_same_pad=after: matches TF.js.
  ErrorTable t("torch,conv_same_pad=after vs TF.js: " + c.name, "tfjs");
  check_layer_case(run, c, Policy::parse("torch,conv_same_pad=after"), t, kFwdTol, kGradTol);
  t.print();
  // 3) torch with the usual PyTorch substitute, explicit symmetric padding 1: same output
  //    shape (4x4), different numbers (the window grid is shifted by one pixel).
  LayerCase sym = c;
  sym.layers[0].conv.pad = PadMode::explicit_pad;
  sym.layers[0].conv.pad_h = sym.layers[0].conv.pad_w = 1;
  auto ref_net = build_net(c.layers, c.in, Policy::tensorflow());
  CaseData d = case_data(c, *ref_net);
  auto net = build_net(sym.layers, sym.in, Policy::torch());
  set_weights(*net, d.w);
  NetResult r = run_driftlab(*net, d.x, d.r, d.labels, Policy::torch());
  const Tensor y = from_tfjs(run.out(c.name, "y0"));
  ASSERT_EQ(r.ys[0].shape(), y.shape());
  const double rel = rel_error(r.ys[0], y);
  std::cout << "  torch, explicit padding 1 vs TF SAME (0,1): forward max abs diff " << max_abs_diff(r.ys[0], y)
            << ", max rel " << rel << "\n";
  ::testing::Test::RecordProperty("symmetric_pad_rel_diff", std::to_string(rel));
  EXPECT_GT(rel, kMismatchFactor * kFwdTol);
}

Tensor lenet5_logits(const Policy& policy, const Tensor& x) {
  Model m = lenet("lenet5", policy);
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  return m.forward(ctx, x);
}

TEST(TfjsNegative, FlattenOrder) {
  ORACLE_GROUP(run, tfjs_run);
  const Tensor x = lenet_images(kGradBatch, 11);
  const Tensor ref = run.out("lenet5", "y" + std::to_string(lenet_descs("lenet5").size() - 1));  // logits
  const Tensor torch = lenet5_logits(Policy::torch(), x);
  const Tensor fixed = lenet5_logits(Policy::parse("torch,flatten_order=hwc"), x);
  const double rel = rel_error(torch, ref);
  std::cout << "  LeNet-5 logits, same weights: torch (flatten chw) vs TF.js max abs diff " << max_abs_diff(torch, ref)
            << ", max rel " << rel << "; torch,flatten_order=hwc max rel " << rel_error(fixed, ref) << "\n";
  ::testing::Test::RecordProperty("flatten_rel_diff", std::to_string(rel));
  EXPECT_GT(rel, kMismatchFactor * kFwdTol);
  ErrorTable t("torch,flatten_order=hwc vs TF.js: LeNet-5 logits", "tfjs");
  EXPECT_TRUE(t.check("11 dense", "logits", fixed, ref, kFwdTol));
  t.print();
}

TEST(TfjsNegative, CrossentropyOnConfidentSamples) {
  ORACLE_GROUP(run, tfjs_run);
  const LayerCase& c = layer_case("categorical_crossentropy");
  const Tensor ref_loss = run.out(c.name, "loss"), ref_dz = run.out(c.name, "dx");
  auto net = build_net(c.layers, c.in, Policy::torch());
  CaseData d = case_data(c, *net);
  NetResult torch = run_driftlab(*net, d.x, d.r, d.labels, Policy::torch());
  const Tensor torch_loss = Tensor::from<double>({1}, {torch.loss});
  std::cout << "  torch (log_softmax) vs TF.js (Keras clip): loss " << torch.loss << " vs " << ref_loss.at(0)
            << " (diff " << torch.loss - ref_loss.at(0) << "), gradient max abs diff "
            << max_abs_diff(torch.dlogits, ref_dz) << "\n";
  // Row 1 alone: log_softmax gives loss 30 and gradient -1 at the label; the clip 16.118 and 0.
  double row1 = 0;
  for (int64_t j = 0; j < 10; ++j) row1 = std::max(row1, std::fabs(torch.dlogits.at(10 + j) - ref_dz.at(10 + j)));
  std::cout << "  confident wrong row (logit +30 on another class): gradient max abs diff " << row1
            << " (TF.js clips it to 0)\n";
  ::testing::Test::RecordProperty("ce_loss_diff", std::to_string(torch.loss - ref_loss.at(0)));
  EXPECT_GT(rel_error(torch_loss, ref_loss), kMismatchFactor * kLossTol);
  EXPECT_GT(rel_error(torch.dlogits, ref_dz), kMismatchFactor * kGradTol);
  ErrorTable t("torch,ce_formulation=softmax_clip vs TF.js: " + c.name, "tfjs");
  check_layer_case(run, c, Policy::parse("torch,ce_formulation=softmax_clip"), t, kFwdTol, kGradTol);
  t.print();
}

TEST(TfjsNegative, HardSigmoid) {
  ORACLE_GROUP(run, tfjs_run);
  const LayerCase& c = layer_case("hard_sigmoid_edges");
  const Tensor ref_y = run.out(c.name, "y0"), ref_dx = run.out(c.name, "dx");
  auto run_policy = [&](const Policy& p) {
    auto net = build_net(c.layers, c.in, p);
    CaseData d = case_data(c, *net);
    return run_driftlab(*net, d.x, d.r, d.labels, p);
  };
  NetResult torch = run_policy(Policy::torch());
  const double fwd = rel_error(torch.ys[0], ref_y), grad = rel_error(torch.dx, ref_dx);
  std::cout << "  torch (relu6/6, edges exclusive) vs TF.js (0.2x+0.5): forward max abs diff "
            << max_abs_diff(torch.ys[0], ref_y) << ", gradient max abs diff " << max_abs_diff(torch.dx, ref_dx)
            << "\n";
  ::testing::Test::RecordProperty("hard_sigmoid_forward_diff", std::to_string(max_abs_diff(torch.ys[0], ref_y)));
  EXPECT_GT(fwd, kMismatchFactor * kFwdTol);
  EXPECT_GT(grad, kMismatchFactor * kGradTol);
  // hard_sigmoid_kind=linear_0p2 restores the formula; at x = +-2.5 exactly the torch preset's
  // exclusive edges still zero the gradient TF passes, which is the second knob.
  NetResult kind_only = run_policy(Policy::parse("torch,hard_sigmoid_kind=linear_0p2"));
  int64_t edge_diffs = 0;
  for (int64_t i = 0; i < ref_dx.numel(); ++i) edge_diffs += kind_only.dx.at(i) != ref_dx.at(i);
  std::cout << "  torch,hard_sigmoid_kind=linear_0p2: forward max rel " << rel_error(kind_only.ys[0], ref_y) << "; "
            << edge_diffs << " gradient elements differ (x = +-2.5 exactly: exclusive edges)\n";
  EXPECT_LE(rel_error(kind_only.ys[0], ref_y), kFwdTol);
  EXPECT_GT(edge_diffs, 0);
  ErrorTable t("torch,hard_sigmoid_kind=linear_0p2,hard_sigmoid_grad_edges=inclusive vs TF.js: " + c.name, "tfjs");
  check_layer_case(run, c, Policy::parse("torch,hard_sigmoid_kind=linear_0p2,hard_sigmoid_grad_edges=inclusive"), t,
                   kFwdTol, kGradTol);
  t.print();
}

TEST(TfjsNegative, InitialiserDistribution) {
  ORACLE_GROUP(run, tfjs_run);
  const KsResult torch = ks_against_tfjs(run, Policy::torch());
  const KsResult fixed = ks_against_tfjs(run, Policy::parse("torch,init_weight=glorot_uniform"));
  std::cout << "  torch kaiming_uniform(a=sqrt5) vs tf glorotUniform, 256x120: KS D = " << torch.d << " (critical "
            << torch.crit << "), max|w| " << torch.max_abs_driftlab << "; torch,init_weight=glorot_uniform: D = "
            << fixed.d << "\n";
  EXPECT_GT(torch.d, torch.crit);
  EXPECT_LT(fixed.d, fixed.crit);
}

// ---------------------------------------------------------------------------------------------
// Input gradients of whole models at inference semantics (cases: fill_input_gradient_cases)

class TfjsOracleInputGradient : public ::testing::TestWithParam<InputGradCase> {};

// The clean gradient's signs must agree wherever TF.js's gradient is not within rounding of zero
// (the gradients agree to ~3e-7 of the largest, TfjsOracleInputGradient), and the adversarial
// examples within 1 ulp except where a sign went the other way at some step (counted, bounded).
// On the confident model the Keras clip zeroes whole samples' gradients on both sides: the same
// samples, and FGSM leaves them where they are.
TEST(TfjsAttackOracle, FgsmBimEqualTfGradUnderTheKerasLoss) {
  ORACLE_GROUP(run, tfjs_run);
  for (const AttackCase& c : kAttackCases) {
    SCOPED_TRACE(c.name);
    Model m = attack_model(c);
    CpuRunner runner(m);
    const Tensor x = attack_x();
    const std::vector<int32_t> y = attack_labels();
    const Tensor g = runner.input_gradient(x, y, Semantics::inference).dx, gt = from_tfjs(run.out(c.name, "g0"));
    const double gmax = std::max(oracle::max_abs(gt), 1e-30);
    const int64_t per = x.numel() / x.dim(0);
    int64_t flips_small = 0, flips_large = 0, zero_samples_tfjs = 0;
    for (int64_t i = 0; i < g.numel(); ++i) {
      const float a = g.data<float>()[i], b = gt.data<float>()[i];
      if (((a > 0) - (a < 0)) != ((b > 0) - (b < 0))) (std::fabs(b) < 1e-5 * gmax ? flips_small : flips_large) += 1;
    }
    std::vector<uint8_t> zero_tfjs(static_cast<std::size_t>(x.dim(0)));
    for (int64_t s = 0; s < x.dim(0); ++s) {
      bool z = true;
      for (int64_t e = 0; e < per && z; ++e) z = gt.data<float>()[s * per + e] == 0.f;
      zero_tfjs[s] = z;
      zero_samples_tfjs += z;
    }
    std::cout << c.name << ": gradient signs differing from TF.js's: " << flips_large << " where |g| >= 1e-5 of "
              << "the largest, " << flips_small << " below; samples with an exactly zero gradient in TF.js: "
              << zero_samples_tfjs << " of " << x.dim(0) << "\n";
    EXPECT_EQ(flips_large, 0);
    for (const char* kind : {"fgsm", "bim"}) {
      attacks::GradientAttackSpec spec;
      spec.kind = attacks::parse_attack_kind(kind);
      spec.eps = kAttackEps, spec.step = kAttackStep, spec.steps = kAttackSteps;
      const attacks::AttackResult r = attacks::run_gradient_attack(runner, x, y, spec);
      const Tensor want = from_tfjs(run.out(c.name, kind));
      int64_t off = 0, worst = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        const int64_t u = oracle::ulps_between(r.x_adv.data<float>()[i], want.data<float>()[i]);
        off += u > 1;
        worst = std::max(worst, u);
      }
      std::cout << c.name << " " << kind << ": " << want.numel() - off << " of " << want.numel()
                << " elements within 1 ulp of TF.js's, " << off << " beyond (largest " << worst << " ulps)\n";
      // FGSM: an element may differ only where the clean gradient's sign did (near zero). BIM also
      // takes 9 more gradients that are not compared one by one: at each, an element whose gradient
      // is within rounding of zero may step the other way; up to 8 such per step (seen: none).
      EXPECT_LE(off, std::string(kind) == "fgsm" ? flips_small : flips_small + 8 * kAttackSteps) << kind;
      if (std::string(kind) == "fgsm") {
        for (int64_t s = 0; s < x.dim(0); ++s) {
          EXPECT_EQ(r.zero_gradient[s], zero_tfjs[s]) << "sample " << s;
          if (zero_tfjs[s]) {
            EXPECT_EQ(r.linf[s], 0.0) << "a zero gradient moves nothing, sample " << s;
          }
        }
      }
    }
    if (c.scale_last > 1) {
      EXPECT_GT(zero_samples_tfjs, 0) << "the confident model should hit the Keras clip";
      EXPECT_LT(zero_samples_tfjs, x.dim(0)) << "and keep a gradient for some samples";
    }
  }
}

TEST_P(TfjsOracleInputGradient, InferenceSemanticsEqualTfGradTrainingFalse) {
  ORACLE_GROUP(run, tfjs_run);
  const InputGradCase& c = GetParam();
  const std::string n = input_grad_case_name(c);
  Model m = oracle::model_with_random_state(c.arch, Policy::tensorflow(), kInputGradSeed);
  const Tensor x = input_grad_x(c);
  const std::vector<int32_t> y = input_grad_labels(c);
  const auto before = oracle::model_state(m);
  CpuRunner runner(m);
  const InputGradient g = runner.input_gradient(x, y, Semantics::inference);
  ErrorTable t(std::string(c.arch) + " (tensorflow preset), batch " + std::to_string(c.batch) +
                   ", BatchNorm moving statistics random: input_gradient(inference) vs tf.grad, training=false, " +
                   "mean Keras categorical crossentropy",
               "tfjs");
  // The tolerances of the LeNet cases (kFwdTol, kGradTol, kLossTol). ResNet-20 is deeper (20
  // convolutions) but its sums are shorter (<= 9*64 = 576 terms per output or dX element, ~1.4e-6
  // of the largest term at worst), its BatchNorms are one affine map per channel at inference (no
  // batch reduction) and the layers' rounding differences are independent, not coherent.
  // Measured: logits <= 6.6e-7, dL/dx <= 3.0e-7, loss <= 1.1e-7 (LeNet-5 and ResNet-20).
  EXPECT_TRUE(t.check("loss", "mean CE", Tensor::from<double>({1}, {g.loss}), run.out(n, "loss"), kLossTol));
  EXPECT_TRUE(t.check("logits", "forward", g.logits, run.out(n, "logits"), kFwdTol));
  EXPECT_TRUE(t.check("input", "dL/dx", g.dx, from_tfjs(run.out(n, "dx")), kGradTol));
  // Nothing moved: no weight, no BatchNorm statistic (driftlab's debiasing state included),
  // bit for bit; TF.js's moving statistics are still the ones it was given.
  EXPECT_TRUE(oracle::state_unchanged(before, m)) << "input_gradient(inference) must move nothing";
  std::size_t k = 0;
  for (auto& [name, b] : m.net->named_buffers())
    if (oracle::ends_with(name, ".running_mean") || oracle::ends_with(name, ".running_var")) {
      EXPECT_TRUE(bitwise_equal(b->value, run.out(n, "moving" + std::to_string(k)))) << "TF.js moved " << name;
      ++k;
    }
  // The semantics matter: driftlab's train-semantics gradient (batch statistics) is another
  // function of x for ResNet-20; LeNet-5 (no BatchNorm, no dropout) has one function only.
  Model mt = oracle::model_with_random_state(c.arch, Policy::tensorflow(), kInputGradSeed);
  CpuRunner train_runner(mt);
  const Tensor dx_train = train_runner.input_gradient(x, y, Semantics::train).dx;
  const double e = t.note("input", "train semantics vs TF.js training=false", dx_train, from_tfjs(run.out(n, "dx")));
  if (k > 0) {
    EXPECT_GT(e, kMismatchFactor * kGradTol) << "batch statistics should give another gradient";
  } else {
    EXPECT_TRUE(bitwise_equal(dx_train, g.dx)) << "without BatchNorm or dropout the semantics are one function";
  }
  t.print();
}

INSTANTIATE_TEST_SUITE_P(TfjsOracle, TfjsOracleInputGradient, ::testing::ValuesIn(kInputGradCases),
                         [](const ::testing::TestParamInfo<InputGradCase>& i) { return std::string(i.param.arch); });

}  // namespace
}  // namespace driftlab
