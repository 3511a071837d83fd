// PyTorch 1.13 oracle tests of the `torch` preset, and negative tests of the `tensorflow`
// preset against the same PyTorch.
//
// Each group of cases is written as .npy files plus a cases.json into a fresh folder and
// tests/oracles/torch/oracle.py runs on it once (importing torch costs about a second); the
// tests read PyTorch's results back and compare (the harness of tests/oracles/oracle_util.h). Weights are always
// driftlab's, copied into PyTorch, so only the formula under test can differ. Backward passes
// use loss = sum(y * R) with a fixed random R, so every dy is a non-trivial tensor.
//
//   TorchOracleLayers.*   every layer / op: forward, dX, dW, db (torch preset, onednn + reference);
//                         BatchNorm1d/2d (training, running statistics after 3 steps, eval) and
//                         ResNet basic blocks (identity, option A, option B): forward, dX, every
//                         parameter gradient
//   TorchOracleLeNet/*    LeNet-1 / LeNet-5: every layer's forward and dX, loss, every dW/db,
//                         weights after 20 SGD steps (momentum, Nesterov, weight decay); prints
//                         the layer x quantity error table
//   TorchOracleModels.*   VGG-16 (33.6M parameters, batch 2 of 32x32): every layer's forward, dX,
//                         dW, db and the loss
//   TorchOracle/TorchOracleInputGradient.*  LeNet-5 and ResNet-20 (BatchNorm running statistics
//                         random): CpuRunner::input_gradient at inference semantics (loss, logits,
//                         dL/dx) vs autograd in eval(), moving nothing; vs train() it differs, and
//                         train semantics match train()
//   TorchOracleInit.*     default initialisation: bit for bit vs torch.manual_seed(S), bounds,
//                         two-sample Kolmogorov-Smirnov test against PyTorch's samples
//   TorchOracleNan.*      NaN inputs through ReLU, max pooling (windows with one and two NaNs)
//                         and an LSTM: which outputs and gradients are NaN, and the rest's values
//   TorchNegative.*       the tensorflow preset differs from PyTorch where a knob differs, and
//                         flipping that knob to torch's value restores the match
//
// Comparison: err = max|a - r| / max|r| (through all_close with atol = tol * max|r|, rtol = 0),
// tol 1e-5 for float32 unless a comment at the tolerance says why it is another number.
//
// To add a case: 1) write its inputs with run.input(case, key, tensor) and run.add_case(json)
// in the group's fill_* function; 2) give oracle.py a kind for it if none fits; 3) compare in a
// TEST starting with ORACLE_GROUP, with ErrorTable::check at a commented tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iostream>
#include <iomanip>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "engine/layers/sequential.h"
#include "core/ops/pool2d.h"
#include "core/ops/softmax_xent.h"
#include "engine/policy.h"
#include "engine/random.h"
#include "engine/train/optimizer.h"
#include "tests/oracles/optim_cases.h"
#include "engine/train/cpu_runner.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "models/models.h"
#include "tests/cases/rnn_cases.h"
#include "tests/oracles/oracle_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

using json = nlohmann::json;

// float32 forward tolerance: a few ulps of the largest output, room for a different summation
// order (oneDNN / PyTorch's blocked kernels vs ascending loops) over up to a few hundred terms.
constexpr double kTol = 1e-5;
// A negative test's difference must be one no rounding explains: 100x the match tolerance.
constexpr double kMismatch = 100 * kTol;

// ---------------------------------------------------------------------------------------------
// Harness (tests/oracles/oracle_util.h): each group below is one case folder and one oracle.py run

using oracle::CaseDir;
using oracle::ErrorTable;
using oracle::ends_with;
using oracle::labels_of;
using oracle::labels_tensor;
using oracle::max_abs;
using oracle::random_labels;
using oracle::rel_error;
using oracle::slice0;
using oracle::values_of;

oracle::Oracle torch_script() { return oracle::torch_oracle("oracle.py"); }

// The torch preset with conv and gemm on backend b; b = reference runs every op on its
// reference kernel (the all-reference engine).
Policy torch_with_backends(KernelBackend b) {
  Policy p = Policy::torch();
  if (b == KernelBackend::reference) use_reference_kernels(p);
  p.conv_backend = b;
  p.gemm_backend = b;
  return p;
}

// The preset default (onednn) and the reference kernels.
const KernelBackend kBackends[] = {KernelBackend::onednn, KernelBackend::reference};

// Small integers lo..hi as float: maxima tie often and every max is exact.
Tensor integer_tensor(Shape shape, uint64_t seed, int lo, int hi) {
  Tensor t = random_tensor(std::move(shape), DType::f32, seed, 0.0, 1.0);
  float* d = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = static_cast<float>(lo + std::floor(d[i] * (hi - lo + 1)));
  return t;
}
// Fashion-MNIST-like: values in [0,1], about a third of the pixels exactly 0 (background).
Tensor image_tensor(Shape shape, uint64_t seed) {
  Tensor t = random_tensor(std::move(shape), DType::f32, seed, -0.5, 1.0);
  float* d = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = std::max(d[i], 0.0f);
  return t;
}
// "3.conv2d.weight" -> "3.weight": PyTorch's nn.Sequential parameter name.
std::string torch_name(const std::string& driftlab_name) {
  return driftlab_name.substr(0, driftlab_name.find('.')) + driftlab_name.substr(driftlab_name.rfind('.'));
}

void set_params(Layer& layer, const std::vector<Tensor>& values) {
  std::vector<Param*> ps = layer.params();
  ASSERT_EQ(ps.size(), values.size());
  for (std::size_t i = 0; i < ps.size(); ++i) {
    ASSERT_EQ(ps[i]->value.shape(), values[i].shape());
    ps[i]->value = values[i].clone();
    ps[i]->grad.zero();
  }
}

// Copies the weights the oracle got (case `name`, keys p.<torch name>) into the model.
void load_model_weights(Model& m, const CaseDir& run, const std::string& name) {
  for (auto& np : m.net->named_params()) {
    Tensor w = run.in(name, "p." + torch_name(np.first));
    ASSERT_EQ(w.shape(), np.second->value.shape()) << np.first;
    np.second->value = w.to(np.second->value.dtype());  // to() copies
  }
}
void write_model_weights(CaseDir& run, const std::string& name, Model& m) {
  for (auto& np : m.net->named_params()) run.input(name, "p." + torch_name(np.first), np.second->value);
}

struct LayerResult {
  Tensor y, dx;
  std::vector<Tensor> grads;  // dW, db
};

// forward (training), then backward of loss = sum(y * r).
LayerResult run_layer(Layer& layer, const Tensor& x, const Tensor& r) {
  ExecContext exec;
  RunContext ctx = RunContext::training(exec, nullptr);
  LayerResult res;
  res.y = layer.forward(ctx, x);
  res.dx = layer.backward(ctx, r);
  for (Param* p : layer.params()) res.grads.push_back(p->grad.clone());
  return res;
}

// ---------------------------------------------------------------------------------------------
// Group 1: layers and ops

struct ConvCase {
  const char* name;
  int64_t n, c, h, w, k, r, s, stride, dilation, pad_h, pad_w;
};
const ConvCase kConvCases[] = {
    {"valid", 2, 3, 9, 9, 4, 3, 3, 1, 1, 0, 0},          {"pad1", 2, 3, 8, 8, 5, 3, 3, 1, 1, 1, 1},
    {"pad2_k5", 2, 2, 9, 9, 3, 5, 5, 1, 1, 2, 2},        {"stride2_odd", 2, 3, 11, 11, 4, 3, 3, 2, 1, 1, 1},
    {"stride2_even", 2, 2, 8, 8, 3, 3, 3, 2, 1, 0, 0},   {"dilation2", 2, 3, 10, 10, 4, 3, 3, 1, 2, 2, 2},
    {"odd_sizes_3x5", 3, 3, 7, 10, 5, 3, 5, 1, 1, 1, 2}, {"batch1_lenet", 1, 1, 28, 28, 6, 5, 5, 1, 1, 0, 0},
};

struct PoolCase {
  const char* name;
  bool max;
  int64_t n, c, h, w, k, stride, pad;
  bool count_include_pad;
  bool layer;  // also through Pool2dLayer (which builds no padding)
  int lo, hi;  // integer inputs lo..hi for ties; lo > hi: random floats
};
const PoolCase kPoolCases[] = {
    {"max2x2_ties", true, 2, 3, 8, 8, 2, 2, 0, true, true, 0, 2},
    {"max2x2_odd", true, 2, 2, 7, 9, 2, 2, 0, true, true, 1, 0},
    {"max3x3s2_ties", true, 2, 3, 9, 9, 3, 2, 0, true, true, 0, 3},
    {"max3x3s2_pad1_negative", true, 2, 2, 8, 8, 3, 2, 1, true, false, -4, -1},
    {"max2x2_pad1_negative", true, 2, 2, 7, 7, 2, 2, 1, true, false, -3, -1},
    {"avg2x2", false, 2, 3, 8, 8, 2, 2, 0, true, true, 1, 0},
    {"avg3x3s2_pad1_incl", false, 2, 2, 9, 9, 3, 2, 1, true, false, 1, 0},
    {"avg3x3s1_pad1_excl", false, 2, 2, 6, 7, 3, 1, 1, false, false, 1, 0},
};

Pool2dParams pool_params(const PoolCase& pc) {
  Pool2dParams p;
  p.n = pc.n;
  p.c = pc.c;
  p.h = pc.h;
  p.w = pc.w;
  p.kh = p.kw = pc.k;
  p.stride_h = p.stride_w = pc.stride;
  p.pad_t = p.pad_b = p.pad_l = p.pad_r = pc.pad;
  p.ties = PoolTies::first;  // the torch preset's maxpool_grad_ties
  p.count_include_pad = pc.count_include_pad;
  return p;
}

struct LinearCase {
  const char* name;
  int64_t n, in, out;
};
const LinearCase kLinearCases[] = {{"small", 5, 37, 13}, {"batch1_lenet5_fc1", 1, 256, 120}, {"wide", 16, 120, 84}};

const char* const kModules[] = {"relu", "tanh", "sigmoid", "hardsigmoid", "flatten"};
const Shape kActShape = {2, 3, 4, 5};

// Activation inputs in [-4,4) with the exact points each function treats specially.
Tensor activation_input(const std::string& module) {
  Tensor x = random_tensor(kActShape, DType::f32, 300, -4.0, 4.0);
  float* d = x.data<float>();
  const std::vector<float> special = module == "relu"          ? std::vector<float>{0, 0, 0, -0.0f, 1e-30f, -1e-30f}
                                     : module == "hardsigmoid" ? std::vector<float>{3, -3, 0, 2.5f, -2.5f, 6, -6}
                                                               : std::vector<float>{0, 20, -20, 9, -9, 1e-4f};
  for (std::size_t i = 0; i < special.size(); ++i) d[7 * i + 1] = special[i];
  return x;
}

void fill_layers(CaseDir& r) {
  uint64_t seed = 1000;
  for (const ConvCase& cc : kConvCases) {
    const std::string n = std::string("conv_") + cc.name;
    r.input(n, "x", random_tensor({cc.n, cc.c, cc.h, cc.w}, DType::f32, ++seed));
    r.input(n, "w", random_tensor({cc.k, cc.c, cc.r, cc.s}, DType::f32, ++seed, -0.5, 0.5));
    r.input(n, "b", random_tensor({cc.k}, DType::f32, ++seed, -0.5, 0.5));
    Conv2dParams p;
    p.n = cc.n, p.c = cc.c, p.h = cc.h, p.w = cc.w, p.k = cc.k, p.r = cc.r, p.s = cc.s;
    p.stride_h = p.stride_w = cc.stride;
    p.dil_h = p.dil_w = cc.dilation;
    p.pad_t = p.pad_b = cc.pad_h;
    p.pad_l = p.pad_r = cc.pad_w;
    r.input(n, "r", random_tensor(p.y_shape(), DType::f32, ++seed));
    r.add_case({{"name", n},
                {"kind", "conv2d"},
                {"stride", cc.stride},
                {"dilation", cc.dilation},
                {"padding", {cc.pad_h, cc.pad_h, cc.pad_w, cc.pad_w}}});
  }
  for (const PoolCase& pc : kPoolCases) {
    const std::string n = std::string("pool_") + pc.name;
    const Shape xs{pc.n, pc.c, pc.h, pc.w};
    r.input(n, "x", pc.lo <= pc.hi ? integer_tensor(xs, ++seed, pc.lo, pc.hi) : random_tensor(xs, DType::f32, ++seed));
    r.input(n, "r", random_tensor(pool_params(pc).y_shape(), DType::f32, ++seed));
    r.add_case({{"name", n},
                {"kind", "pool2d"},
                {"pool", pc.max ? "max" : "avg"},
                {"kernel", pc.k},
                {"stride", pc.stride},
                {"padding", pc.pad},
                {"count_include_pad", pc.count_include_pad}});
  }
  for (const LinearCase& lc : kLinearCases) {
    const std::string n = std::string("linear_") + lc.name;
    r.input(n, "x", random_tensor({lc.n, lc.in}, DType::f32, ++seed));
    r.input(n, "w", random_tensor({lc.out, lc.in}, DType::f32, ++seed, -0.3, 0.3));
    r.input(n, "b", random_tensor({lc.out}, DType::f32, ++seed, -0.3, 0.3));
    r.input(n, "r", random_tensor({lc.n, lc.out}, DType::f32, ++seed));
    r.add_case({{"name", n}, {"kind", "linear"}});
  }
  for (const char* m : kModules) {
    const std::string n = std::string("module_") + m;
    r.input(n, "x", activation_input(m));
    const Shape ys =
        std::string(m) == "flatten" ? Shape{kActShape[0], shape_numel(kActShape) / kActShape[0]} : kActShape;
    r.input(n, "r", random_tensor(ys, DType::f32, ++seed));
    r.add_case({{"name", n}, {"kind", "module"}, {"module", m}});
  }
  // Cross-entropy: 6 ordinary samples, one confident and right (gap 30: softmax of the
  // others ~9.4e-14, not 0), one confident and wrong (loss ~30, gradient ~+-1/N).
  Tensor z = random_tensor({8, 10}, DType::f32, ++seed, -3.0, 3.0);
  std::vector<int32_t> y = random_labels(8, 10, ++seed);
  float* zd = z.data<float>();
  for (int j = 0; j < 10; ++j) zd[6 * 10 + j] = zd[7 * 10 + j] = 0.0f;
  zd[6 * 10 + 3] = 30.0f;
  y[6] = 3;
  zd[7 * 10 + 5] = 30.0f;
  y[7] = 2;
  r.input("xent", "z", z);
  r.input("xent", "labels", labels_tensor(y));
  r.add_case({{"name", "xent"}, {"kind", "xent"}});
}
const CaseDir& layers_run() {
  static const CaseDir run(torch_script(), "torch_layers", fill_layers);
  return run;
}

TEST(TorchOracleLayers, Conv2d) {
  ORACLE_GROUP(run, layers_run);
  ErrorTable table("Conv2d (torch preset) vs torch.nn.functional.conv2d", "pytorch");
  for (const ConvCase& cc : kConvCases) {
    const std::string n = std::string("conv_") + cc.name;
    for (KernelBackend be : kBackends) {
      const Policy pol = torch_with_backends(be);
      Conv2dSpec spec;
      spec.out_channels = cc.k;
      spec.kernel_h = cc.r;
      spec.kernel_w = cc.s;
      spec.stride = cc.stride;
      spec.dilation = cc.dilation;
      spec.pad = cc.pad_h || cc.pad_w ? PadMode::explicit_pad : PadMode::valid;
      spec.pad_h = cc.pad_h;
      spec.pad_w = cc.pad_w;
      Rng rng(pol.rng_engine, 1);
      Conv2dLayer layer(spec, {cc.c, cc.h, cc.w}, pol, rng);
      set_params(layer, {run.in(n, "w"), run.in(n, "b")});
      const ExecContext exec;
      const std::string kernel = exec.kernels.conv2d.select(be, layer.op_params(), DType::f32).name;
      LayerResult res = run_layer(layer, run.in(n, "x"), run.in(n, "r"));
      const std::string what = std::string(cc.name) + " [" + kernel + "]";
      // Backward: dX sums K*R*S terms and dW sums N*P*Q (up to ~1500) products of values in
      // [-1,1]; the float32 rounding of either order stays below 1e-5 of the largest entry.
      EXPECT_TRUE(table.check(what, "forward", res.y, run.out(n, "y"), kTol));
      EXPECT_TRUE(table.check(what, "dX", res.dx, run.out(n, "dx"), kTol));
      EXPECT_TRUE(table.check(what, "dW", res.grads[0], run.out(n, "dw"), kTol));
      EXPECT_TRUE(table.check(what, "db", res.grads[1], run.out(n, "db"), kTol));
    }
  }
  table.print();
}

TEST(TorchOracleLayers, Pool2d) {
  ORACLE_GROUP(run, layers_run);
  ErrorTable table("MaxPool2d / AvgPool2d (torch preset) vs F.max_pool2d / F.avg_pool2d", "pytorch");
  for (const PoolCase& pc : kPoolCases) {
    const std::string n = std::string("pool_") + pc.name;
    const Tensor x = run.in(n, "x"), r = run.in(n, "r");
    const Tensor ty = run.out(n, "y"), tdx = run.out(n, "dx");
    const Pool2dParams p = pool_params(pc);
    // Max pooling involves no rounding at all (a max, and dX is a sum of at most 4 R values
    // per input for these windows); average pooling divides once: 1e-5 covers both.
    {
      Tensor y = Tensor::empty(p.y_shape(), DType::f32), dx = Tensor::empty(p.x_shape(), DType::f32);
      if (pc.max) {
        maxpool2d_forward_ref(p, x, y);
        maxpool2d_backward_ref(p, x, r, dx);
      } else {
        avgpool2d_forward_ref(p, x, y);
        avgpool2d_backward_ref(p, r, dx);
      }
      EXPECT_TRUE(table.check(std::string(pc.name) + " [op ref]", "forward", y, ty, kTol));
      EXPECT_TRUE(table.check(std::string(pc.name) + " [op ref]", "dX", dx, tdx, kTol));
    }
    {
      const KernelRegistry reg = make_cpu_registry();
      const Pool2dKernel& fast = (pc.max ? reg.maxpool2d : reg.avgpool2d).at(KernelBackend::fast);
      Tensor y = Tensor::empty(p.y_shape(), DType::f32), dx = Tensor::empty(p.x_shape(), DType::f32);
      fast.forward(p, x, y);
      fast.backward(p, x, r, dx);
      EXPECT_TRUE(table.check(std::string(pc.name) + " [op fast]", "forward", y, ty, kTol));
      EXPECT_TRUE(table.check(std::string(pc.name) + " [op fast]", "dX", dx, tdx, kTol));
    }
    if (pc.layer) {
      Pool2dSpec spec;
      spec.kind = pc.max ? PoolKind::max : PoolKind::avg;
      spec.window = pc.k;
      spec.stride = pc.stride;
      Pool2dLayer layer(spec, {pc.c, pc.h, pc.w}, Policy::torch());
      LayerResult res = run_layer(layer, x, r);
      EXPECT_TRUE(table.check(std::string(pc.name) + " [layer]", "forward", res.y, ty, kTol));
      EXPECT_TRUE(table.check(std::string(pc.name) + " [layer]", "dX", res.dx, tdx, kTol));
    }
    if (pc.max && pc.lo <= pc.hi) {
      // Ties: with small-integer inputs the 'first' rule must give PyTorch's dX exactly.
      Tensor dx = Tensor::empty(p.x_shape(), DType::f32);
      maxpool2d_backward_ref(p, x, r, dx);
      if (pc.stride == pc.k) {
        EXPECT_TRUE(bitwise_equal(dx, tdx)) << pc.name << ": tie rule";
      }
    }
  }
  table.print();
}

TEST(TorchOracleLayers, MaxPoolPadsWithMinusInfinity) {
  ORACLE_GROUP(run, layers_run);
  // All inputs negative: a zero-padded pool would output 0 at the borders; PyTorch (and the
  // op) never let the padding win.
  for (const char* name : {"pool_max3x3s2_pad1_negative", "pool_max2x2_pad1_negative"}) {
    const Tensor ty = run.out(name, "y");
    EXPECT_LT(*std::max_element(ty.data<float>(), ty.data<float>() + ty.numel()), 0.0f)
        << name << ": PyTorch's output is all negative";
    const PoolCase& pc = *std::find_if(std::begin(kPoolCases), std::end(kPoolCases),
                                       [&](const PoolCase& c) { return "pool_" + std::string(c.name) == name; });
    const Pool2dParams p = pool_params(pc);
    Tensor y = Tensor::empty(p.y_shape(), DType::f32);
    make_cpu_registry().maxpool2d.at(KernelBackend::fast).forward(p, run.in(name, "x"), y);
    EXPECT_TRUE(bitwise_equal(y, ty)) << name;  // a max involves no rounding
  }
}

TEST(TorchOracleLayers, Linear) {
  ORACLE_GROUP(run, layers_run);
  ErrorTable table("Dense (torch preset) vs F.linear", "pytorch");
  for (const LinearCase& lc : kLinearCases) {
    const std::string n = std::string("linear_") + lc.name;
    for (KernelBackend be : kBackends) {
      const Policy pol = torch_with_backends(be);
      Rng rng(pol.rng_engine, 1);
      DenseLayer layer(lc.out, {lc.in}, pol, rng);
      set_params(layer, {run.in(n, "w"), run.in(n, "b")});
      LayerResult res = run_layer(layer, run.in(n, "x"), run.in(n, "r"));
      const std::string what = std::string(lc.name) + " [" + backend_name(be) + "]";
      EXPECT_TRUE(table.check(what, "forward", res.y, run.out(n, "y"), kTol));
      EXPECT_TRUE(table.check(what, "dX", res.dx, run.out(n, "dx"), kTol));
      EXPECT_TRUE(table.check(what, "dW", res.grads[0], run.out(n, "dw"), kTol));
      EXPECT_TRUE(table.check(what, "db", res.grads[1], run.out(n, "db"), kTol));
    }
  }
  table.print();
}

TEST(TorchOracleLayers, ActivationsAndFlatten) {
  ORACLE_GROUP(run, layers_run);
  ErrorTable table("ReLU / Tanh / Sigmoid / Hardsigmoid / Flatten (torch preset) vs torch.nn", "pytorch");
  const Policy pol = Policy::torch();
  const Shape per_sample(kActShape.begin() + 1, kActShape.end());
  for (const char* m : kModules) {
    const std::string n = std::string("module_") + m, mod = m;
    std::unique_ptr<Layer> layer;
    if (mod == "flatten")
      layer = std::make_unique<FlattenLayer>(per_sample, pol);
    else
      layer = std::make_unique<ActivationLayer>(mod == "relu"      ? ActKind::relu
                                                : mod == "tanh"    ? ActKind::tanh
                                                : mod == "sigmoid" ? ActKind::sigmoid
                                                                   : ActKind::hard_sigmoid,
                                                per_sample, pol);
    const Tensor x = run.in(n, "x");
    LayerResult res = run_layer(*layer, x, run.in(n, "r"));
    const Tensor ty = run.out(n, "y"), tdx = run.out(n, "dx");
    // Elementwise: one libm/Sleef evaluation each, a few ulps apart at most.
    EXPECT_TRUE(table.check(mod, "forward", res.y, ty, kTol));
    EXPECT_TRUE(table.check(mod, "dX", res.dx, tdx, kTol));
    if (mod == "relu" || mod == "flatten") {
      // No arithmetic at all: exact in value, including dReLU/dx = 0 at x == 0. The sign of
      // a zero is not compared (all_close treats -0 == +0): PyTorch's relu is clamp_min, which
      // keeps x = -0.0 (driftlab writes +0.0), and its threshold_backward writes +0.0 where
      // driftlab's 0*dy gives -0.0 for dy < 0. No later operation here can tell them apart.
      EXPECT_TRUE(all_close(res.y, ty, 0.0, 0.0)) << mod;
      EXPECT_TRUE(all_close(res.dx, tdx, 0.0, 0.0)) << mod;
      int64_t signed_zeros = 0;
      for (const auto& [a, b] : {std::make_pair(res.y, ty), std::make_pair(res.dx, tdx)})
        for (int64_t i = 0; i < a.numel(); ++i)
          signed_zeros += a.at(i) == 0 && std::signbit(a.at(i)) != std::signbit(b.at(i));
      table.note(mod, "zeros of opposite sign (count)", static_cast<double>(signed_zeros), 0);
    }
    if (mod == "hardsigmoid") {
      // One shift, clamp and division forward (min(max(x + 3, 0), 6) / 6, as ATen's kernel) and
      // one multiply by float(1/6) backward: PyTorch's bits exactly. (Until 2026-11-30 driftlab
      // computed x/6 + 0.5, which differs in the last bit on about a third of inputs.)
      EXPECT_TRUE(all_close(res.y, ty, 0.0, 0.0)) << mod;
      EXPECT_TRUE(all_close(res.dx, tdx, 0.0, 0.0)) << mod;
      // PyTorch's hardsigmoid_backward is 0 at exactly x = +-3 (exclusive edges).
      for (int64_t i = 0; i < x.numel(); ++i)
        if (std::fabs(x.at(i)) == 3.0) {
          EXPECT_EQ(tdx.at(i), 0.0) << "PyTorch at x=" << x.at(i);
          EXPECT_EQ(res.dx.at(i), 0.0) << "driftlab at x=" << x.at(i);
        }
    }
  }
  table.print();
}

TEST(TorchOracleLayers, CrossEntropyMeanFromLogits) {
  ORACLE_GROUP(run, layers_run);
  ErrorTable table("CrossEntropyLoss(mean) (torch preset) vs nn.CrossEntropyLoss", "pytorch");
  const Tensor z = run.in("xent", "z");
  const std::vector<int32_t> y = labels_of(run.in("xent", "labels"));
  const SoftmaxXentParams lp = resolve_loss(Policy::torch());
  const double loss = softmax_xent_forward_ref(lp, z, y);
  Tensor dz(z.shape(), DType::f32);
  softmax_xent_backward_ref(lp, z, y, dz);
  const Tensor tdz = run.out("xent", "dz");
  EXPECT_TRUE(table.check_scalar("xent", "loss", loss, run.out_scalar("xent", "loss"), kTol));
  EXPECT_TRUE(table.check("xent", "dZ", dz, tdz, kTol));
  // The confident, right sample: its gradient is ~9.4e-14/N, far below the tolerance above,
  // so check that row relatively, element by element: non-zero and PyTorch's value.
  const Tensor row = slice0(dz.reshape({8, 10}), 6), trow = slice0(tdz.reshape({8, 10}), 6);
  EXPECT_TRUE(all_close(row, trow, 0.0, 1e-5)) << "confident sample's gradient";  // two exp/divisions
  EXPECT_NE(row.at(0), 0.0) << "log_softmax keeps a non-zero gradient for a confident sample";
  table.check("confident sample (gap 30)", "dZ row, elementwise", row, trow, kTol);
  table.print();
}

// ---------------------------------------------------------------------------------------------
// Group 1b: BatchNorm and ResNet basic blocks (training mode)

struct BnCase {
  const char* name;
  Shape x;  // (N,C,H,W): nn.BatchNorm2d; (N,F): nn.BatchNorm1d
};
const BnCase kBnCases[] = {{"bn2d", {4, 3, 5, 5}}, {"bn1d", {6, 4}}};

struct BlockCase {
  const char* name;
  Shortcut shortcut;
  const char* torch_shortcut;  // oracle.py ResBlock's name for it
  int64_t n, cin, planes, stride, hw;
};
const BlockCase kBlockCases[] = {
    {"optionA_16to32_s2", Shortcut::option_a, "A", 4, 16, 32, 2, 8},
    {"optionB_16to32_s2", Shortcut::option_b, "B", 4, 16, 32, 2, 8},
    {"identity_16", Shortcut::identity, "identity", 4, 16, 16, 1, 8},
};

// models/cifar.cpp basic_block: conv3x3(stride)-BN-relu-conv3x3-BN plus the shortcut, then
// relu. Parameters in the order of oracle.py's ResBlock.parameters(): c1, b1, c2, b2[, sc].
std::unique_ptr<Sequential> basic_block(const BlockCase& bc, const Policy& p) {
  Rng rng(p.rng_engine, 1);
  auto net = std::make_unique<Sequential>(Shape{bc.cin, bc.hw, bc.hw});
  add_basic_block(*net, p, rng, bc.planes, bc.stride, bc.shortcut);  // as models/cifar.cpp builds it
  return net;
}

void fill_blocks(CaseDir& r) {
  uint64_t seed = 5000;
  for (const BnCase& bc : kBnCases) {
    const std::string n = bc.name;
    const int64_t c = bc.x[1];
    // Batches with a non-zero mean that moves from batch to batch, so the running statistics
    // after three steps are neither their initial values nor one batch's.
    r.input(n, "x0", random_tensor(bc.x, DType::f32, ++seed, -1.0, 3.0));
    r.input(n, "x1", random_tensor(bc.x, DType::f32, ++seed, -2.0, 1.0));
    r.input(n, "x2", random_tensor(bc.x, DType::f32, ++seed, 0.0, 5.0));
    r.input(n, "xe", random_tensor(bc.x, DType::f32, ++seed, -1.0, 3.0));
    r.input(n, "gamma", random_tensor({c}, DType::f32, ++seed, 0.5, 1.5));
    r.input(n, "beta", random_tensor({c}, DType::f32, ++seed, -0.5, 0.5));
    r.input(n, "r", random_tensor(bc.x, DType::f32, ++seed));
    r.add_case({{"name", n}, {"kind", "batchnorm"}});
  }
  for (const BlockCase& bc : kBlockCases) {
    const std::string n = std::string("block_") + bc.name;
    std::unique_ptr<Sequential> net = basic_block(bc, Policy::torch());
    // Conv weights: driftlab's own (kaiming) init; gamma/beta: non-trivial values, so that a
    // swapped or ignored affine parameter shows.
    const auto params = net->named_params();
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto& [name, prm] = params[i];
      Tensor v = ends_with(name, "gamma")  ? random_tensor(prm->value.shape(), DType::f32, ++seed, 0.5, 1.5)
                 : ends_with(name, "beta") ? random_tensor(prm->value.shape(), DType::f32, ++seed, -0.5, 0.5)
                                           : prm->value;
      r.input(n, "p" + std::to_string(i), v);
    }
    const int64_t oh = bc.hw / bc.stride;
    r.input(n, "x", random_tensor({bc.n, bc.cin, bc.hw, bc.hw}, DType::f32, ++seed));
    r.input(n, "r", random_tensor({bc.n, bc.planes, oh, oh}, DType::f32, ++seed));
    r.add_case({{"name", n},
                {"kind", "resblock"},
                {"cin", bc.cin},
                {"planes", bc.planes},
                {"stride", bc.stride},
                {"shortcut", bc.torch_shortcut},
                {"num_params", params.size()}});
  }
}
const CaseDir& blocks_run() {
  static const CaseDir run(torch_script(), "torch_blocks", fill_blocks);
  return run;
}

TEST(TorchOracleLayers, BatchNormTrainingRunningStatsAndInference) {
  ORACLE_GROUP(run, blocks_run);
  ErrorTable table("BatchNorm (torch preset) vs nn.BatchNorm1d/2d(eps 1e-5, momentum 0.1)", "pytorch");
  const Policy pol = Policy::torch();
  for (const BnCase& bc : kBnCases) {
    const std::string n = bc.name;
    BatchNormLayer layer(Shape(bc.x.begin() + 1, bc.x.end()), pol);
    set_params(layer, {run.in(n, "gamma"), run.in(n, "beta")});
    // Training step on x0: y, dX, dgamma, dbeta. Each is a sum over the N*H*W (<= 100) values
    // of a channel and a division by the batch standard deviation: float32 rounding of
    // either summation order stays a few ulps of the largest entry, below 1e-5 of it.
    LayerResult res = run_layer(layer, run.in(n, "x0"), run.in(n, "r"));
    EXPECT_TRUE(table.check(n, "forward (train)", res.y, run.out(n, "y"), kTol));
    EXPECT_TRUE(table.check(n, "dX", res.dx, run.out(n, "dx"), kTol));
    EXPECT_TRUE(table.check(n, "dgamma", res.grads[0], run.out(n, "dgamma"), kTol));
    EXPECT_TRUE(table.check(n, "dbeta", res.grads[1], run.out(n, "dbeta"), kTol));
    // Two more training batches: running <- 0.9*running + 0.1*batch stat, the variance
    // unbiased (n/(n-1)); three mixes of per-channel means, same rounding budget.
    ExecContext exec;
    RunContext train = RunContext::training(exec, nullptr);
    layer.forward(train, run.in(n, "x1"));
    layer.forward(train, run.in(n, "x2"));
    const std::vector<Param*> bufs = layer.buffers();
    ASSERT_GE(bufs.size(), 2u);
    EXPECT_TRUE(table.check(n, "running_mean after 3 steps", bufs[0]->value, run.out(n, "running_mean"), kTol));
    EXPECT_TRUE(table.check(n, "running_var after 3 steps", bufs[1]->value, run.out(n, "running_var"), kTol));
    // Inference with those statistics: one affine map per element.
    RunContext infer = RunContext::inference(exec);
    const Tensor ye = layer.forward(infer, run.in(n, "xe"));
    EXPECT_TRUE(table.check(n, "forward (eval, running stats)", ye, run.out(n, "y_eval"), kTol));
  }
  table.print();
}

TEST(TorchOracleLayers, ResidualBasicBlocks) {
  ORACLE_GROUP(run, blocks_run);
  ErrorTable table("ResNet basic block + relu (torch preset, training mode) vs PyTorch block", "pytorch");
  for (const BlockCase& bc : kBlockCases) {
    const std::string n = std::string("block_") + bc.name;
    for (KernelBackend be : kBackends) {
      const Policy pol = torch_with_backends(be);
      std::unique_ptr<Sequential> net = basic_block(bc, pol);
      auto params = net->named_params();
      for (std::size_t i = 0; i < params.size(); ++i) {
        const Tensor v = run.in(n, "p" + std::to_string(i));
        ASSERT_EQ(v.shape(), params[i].second->value.shape()) << params[i].first;
        params[i].second->value = v.clone();
        params[i].second->grad.zero();
      }
      ExecContext exec;
      RunContext ctx = RunContext::training(exec, nullptr);
      const Tensor y = net->forward(ctx, run.in(n, "x"));
      const Tensor dx = net->backward(ctx, run.in(n, "r"));
      const std::string what = std::string(bc.name) + " [" + backend_name(be) + "]";
      // Two 3x3 convolutions (<= 288 products per output, 2304 per weight gradient) each
      // followed by a BatchNorm that divides by the batch standard deviation: float32
      // rounding of either order stays below 1e-5 of the largest entry of each tensor.
      EXPECT_TRUE(table.check(what, "forward", y, run.out(n, "y"), kTol));
      EXPECT_TRUE(table.check(what, "dX", dx, run.out(n, "dx"), kTol));
      for (std::size_t i = 0; i < params.size(); ++i) {
        const std::string name = params[i].first.substr(params[i].first.find('.') + 1);  // drop "0."
        EXPECT_TRUE(table.check(what, "grad " + name, params[i].second->grad, run.out(n, "g" + std::to_string(i)),
                                kTol));
      }
    }
  }
  table.print();
}

// ---------------------------------------------------------------------------------------------
// Group 2: LeNet-1 and LeNet-5 whole

constexpr uint64_t kModelSeed = 7;
constexpr int kSteps = 20;
constexpr int64_t kBatch = 8;

struct TrainVariant {
  const char* name;
  bool nesterov;
  double weight_decay;
};
const TrainVariant kTrainVariants[] = {
    {"momentum", false, 0.0}, {"nesterov", true, 0.0}, {"weight_decay", false, 1e-3}};

void fill_lenet(CaseDir& r) {
  for (const char* arch : {"lenet1", "lenet5"}) {
    Model m = build_model(arch, Policy::torch(), kModelSeed);
    const std::string n = std::string(arch) + "_grad";
    write_model_weights(r, n, m);
    r.input(n, "x", image_tensor({kBatch, 1, 28, 28}, 11));
    r.input(n, "labels", labels_tensor(random_labels(kBatch, 10, 12)));
    r.add_case({{"name", n}, {"kind", "model"}, {"arch", arch}});
    for (const TrainVariant& v : kTrainVariants) {
      const std::string t = std::string(arch) + "_train_" + v.name;
      write_model_weights(r, t, m);
      r.input(t, "xs", image_tensor({kSteps, kBatch, 1, 28, 28}, 21));
      r.input(t, "labels", labels_tensor(random_labels(kSteps * kBatch, 10, 22)).reshape({kSteps, kBatch}));
      r.add_case({{"name", t},
                  {"kind", "train"},
                  {"arch", arch},
                  {"steps", kSteps},
                  {"lr", 0.05},
                  {"momentum", 0.9},
                  {"nesterov", v.nesterov},
                  {"weight_decay", v.weight_decay}});
    }
  }
  // Adam and RMSprop on LeNet-5 (tests/oracles/optim_cases.h), the same weights and batches.
  Model m = build_model("lenet5", Policy::torch(), kModelSeed);
  for (const OptimVariant& v : kOptimVariants) {
    const std::string t = std::string("lenet5_optim_") + v.name;
    write_model_weights(r, t, m);
    r.input(t, "xs", image_tensor({kSteps, kBatch, 1, 28, 28}, 31));
    r.input(t, "labels", labels_tensor(random_labels(kSteps * kBatch, 10, 32)).reshape({kSteps, kBatch}));
    nlohmann::json c = optim_case_json(v, Policy::torch());
    c["name"] = t, c["kind"] = "train", c["arch"] = "lenet5", c["steps"] = kSteps;
    r.add_case(c);
  }
}
const CaseDir& lenet_run() {
  static const CaseDir run(torch_script(), "torch_lenet", fill_lenet);
  return run;
}

// A ReLU or max-pool decision two runs of the same model take differently on one step's batch (a
// float32 run and a float64 run from the same weights): for a ReLU the unit's pre-activation in
// each, for a max pool the gap between the two winners in each; and the float64 value's size
// relative to the largest input of that layer on that batch.
struct DecisionFlip {
  int step;
  std::size_t layer;  // the ReLU layer's index
  int64_t index;      // the element of its input (N, ...)
  double z32, z64, margin;
};
// A float32 pre-activation is a sum of up to 256 rounded products (LeNet's dense and conv fan-ins)
// and carries the rounding of the trajectory so far (~1e-7 of the largest weight after a few
// steps): a decision whose float64 margin is within 1e-6 of the layer's largest value is a tie at
// float32 precision, one float32 summation order may take either side. The case seen: 1.1e-8
// (lenet5 / nesterov, step 13, dense 7's unit 69 on one sample).
constexpr double kTieMargin = 1e-6;

// The ReLU and max-pool decisions of one training step that the float32 run takes otherwise than
// the float64 one: the inputs of `net`'s ReLU and max-pool layers as each run's step computed them
// (ExecContext::layer_inputs, the fused conv blocks' z included), compared element by element and
// window by window.
// A max pool's input as a step computed it: tapped, or (inside a fused conv block, which never
// materialises it) the ReLU of the block's tapped pre-activation.
Tensor pool_input(Sequential& net, const std::map<std::size_t, Tensor>& in, std::size_t layer) {
  if (auto it = in.find(layer); it != in.end()) return it->second;
  auto z = in.find(layer - 1);
  if (layer == 0 || z == in.end() || net.layer(layer - 1).kind() != "relu") return Tensor();
  Tensor a = z->second.clone();
  for (int64_t i = 0; i < a.numel(); ++i) a.data<double>()[i] = std::max(0.0, a.data<double>()[i]);
  return a;
}

void append_decision_flips(Sequential& net, const std::map<std::size_t, Tensor>& z32s,
                       const std::map<std::size_t, Tensor>& z64s, int step, std::vector<DecisionFlip>* flips) {
  for (const auto& [layer, z32] : z32s) {
    if (net.layer(layer).kind() != "relu") continue;
    const Tensor& z64 = z64s.at(layer);
    const double scale = max_abs(z64);
    for (int64_t i = 0; i < z32.numel(); ++i)
      if ((z32.at(i) > 0) != (z64.at(i) > 0))
        flips->push_back({step, layer, i, z32.at(i), z64.at(i), scale > 0 ? std::fabs(z64.at(i)) / scale : 0.0});
  }
  // Max pooling's decisions: each window's winner (the first largest). A differing winner is
  // recorded with the two candidates' gap in each run; its margin is the float64 gap relative to
  // the layer's largest input.
  for (std::size_t layer = 0; layer < net.size(); ++layer) {
    if (net.layer(layer).kind() != "maxpool2d") continue;
    const Tensor a = pool_input(net, z32s, layer), b = pool_input(net, z64s, layer);
    if (!a.defined() || !b.defined()) continue;
    Pool2dParams p = static_cast<Pool2dLayer&>(net.layer(layer)).op_params();
    p.n = a.dim(0), p.c = a.dim(1), p.h = a.dim(2), p.w = a.dim(3);
    const double scale = max_abs(b);
    for (int64_t nc = 0; nc < p.n * p.c; ++nc)
      for (int64_t oy = 0; oy < p.out_h(); ++oy)
        for (int64_t ox = 0; ox < p.out_w(); ++ox) {
          int64_t wa = -1, wb = -1;
          for (int64_t ky = 0; ky < p.kh; ++ky)
            for (int64_t kx = 0; kx < p.kw; ++kx) {
              const int64_t y = oy * p.stride_h - p.pad_t + ky, x = ox * p.stride_w - p.pad_l + kx;
              if (y < 0 || y >= p.h || x < 0 || x >= p.w) continue;
              const int64_t i = (nc * p.h + y) * p.w + x;
              if (wa < 0 || a.at(i) > a.at(wa)) wa = i;
              if (wb < 0 || b.at(i) > b.at(wb)) wb = i;
            }
          if (wa == wb) continue;
          const double gap64 = b.at(wb) - b.at(wa);
          flips->push_back({step, layer, (nc * p.out_h() + oy) * p.out_w() + ox, a.at(wa) - a.at(wb), gap64,
                            scale > 0 ? gap64 / scale : 0.0});
        }
  }
}

// A parameter element's gradient that differs between the float32 and float64 runs by more than
// 1e-3 of the float64 value (float32 rounding of an ordinary gradient: ~1e-6) and that an adaptive
// optimiser (Adam, RMSprop) turns into a step of at least 1% of lr. Such a gradient is the trace of
// an activation near 0 (no sign flip: a value that carries a large relative error in float32).
// SGD moves the element by lr*g, as small as g, so its error is negligible; Adam and RMSprop move
// it by about lr*g/(d + eps), d the root of the second-moment estimate, which can be of order lr
// however small g is (its first nonzero gradient: |g|/d = 1/sqrt(1 - rho), 10 for RMSprop; or a
// small gradient after a few slightly larger ones): the step then carries the gradient's relative
// error at the size of lr. A magnitude the optimiser amplifies, not a decision. Recorded with d
// (bias-corrected for Adam) and the step's size in units of lr, |g|/(d + eps).
struct AmplifiedStep {
  int step;
  std::string param;  // the driftlab parameter name
  int64_t index;
  double g32, g64, d, size;
  double parted = 0;  // |float32 run's step - float64 run's step| of the element on this step
};
constexpr double kAmplifiedRel = 1e-3, kAmplifiedSize = 0.01;

// Whether the optimiser normalises by sqrt(second moment) + eps.
bool adaptive(const TrainConfig& cfg) {
  return cfg.optim.kind == OptimizerKind::adam || cfg.optim.kind == OptimizerKind::rmsprop;
}
// d for a second-moment estimate v after step t (1-based): RMSprop's sqrt(v), Adam's bias-corrected.
double second_moment_root(const TrainConfig& cfg, double v, int t) {
  if (cfg.optim.kind == OptimizerKind::rmsprop) return std::sqrt(v);
  return std::sqrt(v / (1 - std::pow(cfg.optim.beta2, t)));
}

// Which of PyTorch's runs of a training case the driftlab float32 results are nearest to
// (largest max|a-r|/max|r| over all of them): its default float32 run, with convolutions through
// mkldnn = oneDNN (key prefix ""), its float32 run with the native convolution,
// torch.backends.mkldnn.enabled = False ("native."), or, where the case has one, its float64 run
// ("f64."), the trajectory an exactly rounded float32 run would follow. Why several: a ReLU or
// max-pool decision that lies within float32 rounding of its threshold goes either way depending
// on summation order, and one such flip moves a 20-step trajectory by ~1e-2. PyTorch does this to
// itself: for lenet5 / weight_decay its mkldnn and native float32 runs part at step 11 and end
// 2.3e-2 apart (the "PyTorch mkldnn vs native" row), its float64 run siding with the native one.
// And on an AVX2 CPU (Zen 3, 2026-11-26) lenet5 / nesterov has a sample whose dense-7 unit 69
// sits 9.5e-9 from zero at step 13 in PyTorch's float64 run (1.1e-8 in float32): both PyTorch
// float32 runs take one side, driftlab's oneDNN run (its AVX2 sgemm sums in another order) takes
// the float64 run's, and ends 1.4e-5 (2e-4 of the largest) from PyTorch's float32 runs in 7.bias
// and 5e-9 from its float64 run. A float32 trajectory is therefore only defined up to such
// flips: the test asks that driftlab's be one of PyTorch's, within rounding, and checks the
// formulas tightly in float64.
std::string nearest_torch32(const CaseDir& run, const std::string& cas,
                            const std::vector<std::tuple<std::string, std::string, Tensor>>& results) {
  std::vector<std::string> prefixes = {"", "native."};
  if (!results.empty() && run.has_out(cas, "f64." + std::get<1>(results.front()))) prefixes.push_back("f64.");
  std::string best;
  double best_err = std::numeric_limits<double>::infinity();
  for (const std::string& prefix : prefixes) {
    double e = 0;
    for (const auto& [what, key, got] : results) e = std::max(e, rel_error(got, run.out(cas, prefix + key)));
    if (e < best_err) best_err = e, best = prefix;
  }
  return best;
}

// Where a float32 run parted from its float64 twin at step `first` (a flipped decision or an
// amplified step): its losses up to that step must be PyTorch's within 1e-4 (the trajectory
// check's tolerance), and every result after it is printed, not judged.
void check_until_parted(const CaseDir& run, const std::string& t, const std::string& prefix, const std::string& qty,
                        const std::vector<double>& losses, int first, const std::string& event,
                        const std::vector<std::tuple<std::string, std::string, Tensor>>& results, ErrorTable& table) {
  const Tensor theirs = run.out(t, prefix + "losses");
  std::vector<double> before(losses.begin(), losses.begin() + first + 1), ref;
  for (int k = 0; k <= first; ++k) ref.push_back(theirs.at(k));
  EXPECT_TRUE(table.check("loss of steps 1.." + std::to_string(first + 1) + " (to " + event + ")", qty,
                          Tensor::from<double>({first + 1}, before), Tensor::from<double>({first + 1}, ref), 1e-4));
  for (const auto& [what, key, got] : results)
    table.note(what, qty + " (after " + event + ": information)", got, run.out(t, prefix + key));
}

// A float32 trajectory beyond rounding of PyTorch's nearest run with no ReLU or max-pool decision
// of its own: explained only by amplified steps (AmplifiedStep), which must exist, and only
// if every tensor beyond the tolerance has its largest difference from PyTorch's run at an element
// whose first gradient was amplified, and the losses up to the first such step are PyTorch's
// within 1e-4 (the runs agree until the optimiser amplifies). The parameters are then printed, not
// judged. Seen: plain RMSprop where OpenBLAS takes its SkylakeX kernels and oneDNN its AVX2 ones
// (docs/RELIABILITY.md, "Oracle trajectories across CPUs").
void check_amplified(const CaseDir& run, const std::string& t, Model& m,
                     const std::vector<std::tuple<std::string, std::string, Tensor>>& results, const std::string& prefix,
                     const std::string& qty, const std::function<double(const std::string&)>& tol,
                     const std::vector<AmplifiedStep>& amplified, const std::vector<double>& losses, ErrorTable& table) {
  ASSERT_FALSE(amplified.empty()) << qty << ": beyond rounding of PyTorch's nearest run (" << prefix
                                  << ") with every ReLU and max-pool decision the float64 run's and no amplified step";
  std::cout << "  " << qty << ": " << amplified.size() << " amplified steps (gradients " << kAmplifiedRel
            << " apart between the runs, stepped by at least " << kAmplifiedSize << " lr)\n";
  const auto params = m.net->named_params();
  for (std::size_t j = 0; j < params.size(); ++j) {
    const auto& [what, key, got] = results[j];
    const Tensor ref = run.out(t, prefix + key);
    if (rel_error(got, ref) <= tol(key)) continue;
    int64_t worst = 0;
    for (int64_t i = 0; i < got.numel(); ++i)
      if (std::fabs(got.at(i) - ref.at(i)) > std::fabs(got.at(worst) - ref.at(worst))) worst = i;
    const auto hit = std::find_if(amplified.begin(), amplified.end(), [&](const AmplifiedStep& a) {
      return a.param == params[j].first && a.index == worst;
    });
    EXPECT_NE(hit, amplified.end()) << qty << ": " << what << " is " << rel_error(got, ref)
                                    << " of its largest value from PyTorch's run, largest at [" << worst
                                    << "], where no adaptive step amplified a gradient's error";
    // the element's amplified steps account for its deviation: how far the two driftlab runs'
    // steps parted on those steps, summed, against how far the element ends from PyTorch's run
    double parted = 0;
    for (const AmplifiedStep& a : amplified)
      if (a.param == params[j].first && a.index == worst) parted += a.parted;
    const double off = std::fabs(got.at(worst) - ref.at(worst));
    EXPECT_GE(parted, 0.5 * off) << qty << ": " << what << " [" << worst << "] ends " << off
                                 << " from PyTorch's run; its amplified steps parted the runs by " << parted << " only";
    if (hit != amplified.end()) {
      std::ostringstream z;
      z << std::setprecision(4) << "g32 " << hit->g32 << ", g64 " << hit->g64 << ", d " << hit->d << ", step "
        << hit->size << " lr; the runs' steps parted by " << parted << ", the element ends " << off << " off";
      table.note("amplified step: step " + std::to_string(hit->step + 1) + ", " + what + " [" +
                     std::to_string(worst) + "]",
                 qty + " (" + z.str() + "): |g64|, |g32-g64|/|g64|", std::fabs(hit->g64),
                 std::fabs(hit->g32 - hit->g64) / std::fabs(hit->g64));
    }
  }
  check_until_parted(run, t, prefix, qty, losses, amplified.front().step, "the first amplified step", results, table);
}

// How a table row names the PyTorch run nearest_torch32 chose.
std::string torch32_label(const std::string& prefix) {
  return prefix.empty() ? " (mkldnn)" : prefix == "native." ? " (native)" : " (nearest: PyTorch's float64 run)";
}

// Forward layer by layer, loss, backward layer by layer (dX of every layer's input) of the
// case `n` (op "model": weights p.*, input x, labels) against PyTorch's per-layer results.
// Gradients pass through up to 12 (LeNet) or 38 (VGG-16) layers, each a sum of up to 4,608
// float32 products; the rounding of different summation orders compounds a little per layer:
// 1e-5 of the largest entry still holds (measured ~1e-6). dX of layer 0 is the input gradient
// an attack uses.
void check_every_layer(const CaseDir& run, const std::string& n, Model& m, ErrorTable& table) {
  const Policy& pol = m.policy;
  load_model_weights(m, run, n);
  ExecContext exec;
  RunContext ctx = RunContext::training(exec, nullptr);
  ctx.input_grad = true;
  Sequential& net = *m.net;
  net.zero_grad();
  std::vector<Tensor> ys;
  Tensor h = run.in(n, "x");
  for (std::size_t i = 0; i < net.size(); ++i) ys.push_back(h = net.layer(i).forward(ctx, h));
  const std::vector<int32_t> labels = labels_of(run.in(n, "labels"));
  const SoftmaxXentParams lp = resolve_loss(pol);
  const double loss = softmax_xent_forward_ref(lp, h, labels);
  Tensor g(h.shape(), DType::f32);
  softmax_xent_backward_ref(lp, h, labels, g);
  std::vector<Tensor> dxs(net.size());
  for (std::size_t i = net.size(); i-- > 0;) dxs[i] = g = net.layer(i).backward(ctx, g);
  for (std::size_t i = 0; i < net.size(); ++i) {
    const std::string what = std::to_string(i) + " " + net.layer(i).kind();
    EXPECT_TRUE(table.check(what, "forward", ys[i], run.out(n, "y" + std::to_string(i)), kTol));
    EXPECT_TRUE(table.check(what, "dX (of its input)", dxs[i], run.out(n, "dx" + std::to_string(i)), kTol));
    for (Param* p : net.layer(i).params())
      EXPECT_TRUE(table.check(what, p->is_bias ? "db" : "dW", p->grad,
                              run.out(n, "g." + std::to_string(i) + "." + p->name), kTol));
  }
  EXPECT_TRUE(table.check_scalar("loss", "CrossEntropyLoss", loss, run.out_scalar(n, "loss"), kTol));
}

struct ModelCase {
  const char* arch;
  KernelBackend backend;
};
void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.arch << " with " << backend_name(c.backend); }
std::string model_case_name(const ::testing::TestParamInfo<ModelCase>& info) {
  return std::string(info.param.arch) + "_" + backend_name(info.param.backend);
}

class TorchOracleLeNet : public ::testing::TestWithParam<ModelCase> {};

// kSteps training steps of `arch` from case t's weights, in float32 and float64 in lockstep,
// against PyTorch's runs of the case. float64: PyTorch's float64 run to 1e-10 (rounding 1e-16
// grown over 20 steps stays far below, measured < 1e-15, and no decision flips: the tight check
// of the optimiser's formulas). float32: the nearer of PyTorch's float32 runs (or its float64 run,
// nearest_torch32) to 1e-4 of the largest value: away from a ReLU/max-pool flip, 20 steps grow the
// per-step rounding differences (~1e-7 relative) about tenfold (measured up to ~5e-7). With
// `spread_tol`, PyTorch's own spread on a tensor where that is larger (its mkldnn and native runs
// apart: Adam and RMSprop amplify rounding): driftlab's run no farther from PyTorch's than
// PyTorch's two runs are apart.
//
// Where the float32 run is farther than that from every PyTorch run, decisions are compared as
// decisions: the deviation is explained only by a ReLU or max-pool decision that driftlab's float32 step
// takes otherwise than its float64 step (which equals PyTorch's float64 run to 1e-10) where the
// float64 pre-activation is a tie within float32 rounding (kTieMargin), and up to that step the
// trajectory must be PyTorch's (its losses within 1e-4). After it the two driftlab runs have
// parted (by the flipped unit's gradient), so later differing decisions are not ties of one state
// and are not judged. Seen: lenet5 / nesterov where OpenBLAS takes its SkylakeX kernels (Intel
// AVX-512; OPENBLAS_CORETYPE=SkylakeX elsewhere), and RMSprop with momentum and weight decay,
// whose conv2 channel 8 lives or dies each step within rounding (docs/RELIABILITY.md, "Oracle
// trajectories across CPUs").
void check_trajectory(const CaseDir& run, const std::string& t, const std::string& arch, const Policy& pol,
                      const TrainConfig& cfg, const std::string& label, bool spread_tol, ErrorTable& table) {
  constexpr double kTrainTol = 1e-4, kTrainTol64 = 1e-10;
  struct Run {
    Model m;
    ExecContext exec;
    std::unique_ptr<CpuRunner> trainer;
    std::vector<double> losses;
    std::map<std::size_t, Tensor> inputs;  // each layer's input in the last step's forward pass
  };
  std::array<Run, 2> runs;  // float32, float64
  for (const bool f64 : {false, true}) {
    Policy tp = pol;
    if (f64) tp.dtype = FloatType::float64;
    Run& r = runs[f64];
    r.m = build_model(arch, tp, kModelSeed);
    load_model_weights(r.m, run, t);
    r.exec.layer_inputs = [&r](std::size_t layer, const Tensor& in) {
      r.inputs[layer] = (in.channel_block() ? to_plain(in) : in).to(DType::f64);
    };
    r.trainer = std::make_unique<CpuRunner>(r.m, cfg, r.exec);
  }
  const Tensor xs = run.in(t, "xs"), ls = run.in(t, "labels");
  std::vector<DecisionFlip> flips;  // the ReLU and max-pool decisions driftlab's float32 run takes otherwise than its float64 run
  std::vector<AmplifiedStep> amplified;  // first gradients an adaptive optimiser amplified (adaptive(cfg) only)
  std::vector<std::vector<double>> v;    // per parameter element: the float64 run's second-moment estimate
  const double eps = cfg.optim.kind == OptimizerKind::rmsprop ? pol.rmsprop_eps : pol.adam_eps;
  for (int k = 0; k < kSteps; ++k) {
    const Tensor x = slice0(xs, k);
    std::array<std::vector<Tensor>, 2> before;  // the parameters before the step (adaptive optimisers: what it moved)
    if (adaptive(cfg))
      for (int f = 0; f < 2; ++f)
        for (auto& np : runs[f].m.net->named_params()) before[f].push_back(np.second->value.to(DType::f64));
    for (Run& r : runs) r.losses.push_back(r.trainer->train_step(x, labels_of(slice0(ls, k))));
    append_decision_flips(*runs[0].m.net, runs[0].inputs, runs[1].inputs, k, &flips);
    if (!adaptive(cfg)) continue;
    const auto p32 = runs[0].m.net->named_params(), p64 = runs[1].m.net->named_params();
    const double keep = cfg.optim.kind == OptimizerKind::rmsprop ? pol.rmsprop_rho : cfg.optim.beta2;
    v.resize(p32.size());
    for (std::size_t j = 0; j < p32.size(); ++j) {
      const Tensor &g32 = p32[j].second->grad, &g64 = p64[j].second->grad;
      v[j].resize(static_cast<std::size_t>(g64.numel()), 0.0);
      for (int64_t i = 0; i < g64.numel(); ++i) {
        const double a = g32.at(i), b = g64.at(i);
        double& vi = v[j][static_cast<std::size_t>(i)];
        vi = keep * vi + (1 - keep) * b * b;
        if (b == 0 || std::fabs(a - b) <= kAmplifiedRel * std::fabs(b)) continue;
        const double d = second_moment_root(cfg, vi, k + 1), size = std::fabs(b) / (d + eps);
        if (size <= kAmplifiedSize) continue;
        const double step32 = p32[j].second->value.at(i) - before[0][j].at(i),
                     step64 = p64[j].second->value.at(i) - before[1][j].at(i);
        amplified.push_back({k, p32[j].first, i, a, b, d, size, std::fabs(step32 - step64)});
      }
    }
  }
  for (const bool f64 : {false, true}) {
    Run& r = runs[f64];
    // (label, oracle key, driftlab's value) for every parameter and the per-step losses.
    std::vector<std::tuple<std::string, std::string, Tensor>> results;
    for (auto& np : r.m.net->named_params())
      results.emplace_back(torch_name(np.first) + " (" + r.m.net->layer(std::stoul(np.first)).kind() + ")",
                           "p." + torch_name(np.first), np.second->value);
    results.emplace_back("loss of each step", "losses", Tensor::from<double>({kSteps}, r.losses));
    const std::string prefix = f64 ? "f64." : nearest_torch32(run, t, results);
    const std::string qty = label + (f64 ? ", f64" : torch32_label(prefix));
    auto tol = [&](const std::string& key) {
      if (f64) return kTrainTol64;
      return spread_tol ? std::max(kTrainTol, rel_error(run.out(t, key), run.out(t, "native." + key))) : kTrainTol;
    };
    bool within = true;
    for (const auto& [what, key, got] : results) within = within && rel_error(got, run.out(t, prefix + key)) <= tol(key);
    if (f64 || within) {
      for (const auto& [what, key, got] : results) EXPECT_TRUE(table.check(what, qty, got, run.out(t, prefix + key), tol(key)));
      continue;
    }
    if (flips.empty()) {
      check_amplified(run, t, r.m, results, prefix, qty, tol, amplified, r.losses, table);
      continue;
    }
    const int first = flips.front().step;
    for (const DecisionFlip& f : flips) {
      if (f.step != first) break;
      EXPECT_LT(f.margin, kTieMargin) << "step " << f.step + 1 << ", layer " << f.layer << " [" << f.index
                                      << "]: float32 z = " << f.z32 << ", float64 z = " << f.z64 << " is no tie ("
                                      << f.margin << " of the layer's largest)";
      std::ostringstream z;
      z << std::setprecision(3) << "f32 " << f.z32 << ", f64 " << f.z64;
      table.note(r.m.net->layer(f.layer).kind() + " flip: step " + std::to_string(f.step + 1) + ", layer " + std::to_string(f.layer) + " [" +
                     std::to_string(f.index) + "]",
                 qty + " (" + z.str() + "): |z64|, / max|z64|", std::fabs(f.z64), f.margin);
    }
    check_until_parted(run, t, prefix, qty, r.losses, first, "the first flip", results, table);
  }
}

TEST_P(TorchOracleLeNet, EveryLayerGradientsAndSgdSteps) {
  ORACLE_GROUP(run, lenet_run);
  const ModelCase mc = GetParam();
  const Policy pol = torch_with_backends(mc.backend);
  ErrorTable table(std::string(mc.arch) + ", torch preset, conv/gemm backend " + backend_name(mc.backend) +
                   ", vs PyTorch 1.13 nn.Sequential with the same weights", "pytorch");
  const std::string n = std::string(mc.arch) + "_grad";

  Model m = build_model(mc.arch, pol, kModelSeed);
  check_every_layer(run, n, m, table);

  // 20 SGD steps (lr 0.05, momentum 0.9) through Trainer::step vs torch.optim.SGD, in float32
  // with this backend and in float64 (oracle.py runs PyTorch three ways, see run_train).
  for (const TrainVariant& v : kTrainVariants) {
    const std::string t = std::string(mc.arch) + "_train_" + v.name;
    TrainConfig cfg;
    cfg.batch = kBatch;
    cfg.optim.lr = 0.05;
    cfg.optim.momentum = 0.9;
    cfg.optim.nesterov = v.nesterov;
    cfg.optim.weight_decay = v.weight_decay;
    check_trajectory(run, t, mc.arch, pol, cfg, std::string("after 20 steps, ") + v.name, false, table);
    // PyTorch against itself: how far apart its own float32 runs end (information only).
    double spread = 0, spread_abs = 0;
    for (auto& np : m.net->named_params()) {
      const Tensor a = run.out(t, "p." + torch_name(np.first)), b = run.out(t, "native.p." + torch_name(np.first));
      double e = 0;
      for (int64_t i = 0; i < a.numel(); ++i) e = std::max(e, std::fabs(a.at(i) - b.at(i)));
      spread_abs = std::max(spread_abs, e);
      spread = std::max(spread, e / max_abs(b));
    }
    table.note("PyTorch mkldnn vs native (f32)", std::string("after 20 steps, ") + v.name, spread_abs, spread);
  }
  table.print();
}

// 20 steps of Adam / AdamW / RMSprop (tests/oracles/optim_cases.h) on LeNet-5 against torch.optim
// from the same weights, in float32 (against the nearer of PyTorch's two float32 runs, as for
// SGD) and float64. Tolerances as for SGD above, for the same reasons; in float32 Adam's step is
// about lr per element whatever the gradient's size (m/sqrt(v) ~ 1), so a gradient element that
// is rounding noise in both frameworks (|g| << eps) moves by up to lr*|g|/eps: eps = 1e-8 keeps
// that below lr.
// ---------------------------------------------------------------------------------------------
// The optimisers alone on fixed gradients (4096 float32 parameters, 20 steps): SGD and the
// adaptive cases of tests/oracles/optim_cases.h, run by PyTorch with its default CPU dispatch
// (AVX2 here: add(alpha) and addcmul fused into one fma) and forced to its portable kernels
// (ATEN_CPU_CAPABILITY=default: every operation rounded).
struct SgdAloneCase {
  const char* name;
  double momentum, weight_decay;
  bool nesterov;
};
const SgdAloneCase kSgdAlone[] = {{"sgd", 0.0, 1e-3, false}, {"sgd_momentum", 0.9, 0.0, false},
                                  {"sgd_nesterov_wd", 0.9, 1e-3, true}};
constexpr int64_t kAloneN = 4096;

void fill_optim_alone(CaseDir& r) {
  const Tensor p = random_tensor({kAloneN}, DType::f32, 81, -1.0, 1.0);
  const Tensor g = random_tensor({kSteps, kAloneN}, DType::f32, 82, -1.0, 1.0);
  for (const SgdAloneCase& c : kSgdAlone) {
    const std::string n = std::string("alone_") + c.name;
    r.input(n, "p", p), r.input(n, "grads", g);
    r.add_case({{"name", n}, {"kind", "optim"}, {"optimizer", "sgd"}, {"lr", 0.05}, {"momentum", c.momentum},
                {"nesterov", c.nesterov}, {"weight_decay", c.weight_decay}, {"schedule", nullptr}});
  }
  for (const OptimVariant& v : kOptimVariants) {
    const std::string n = std::string("alone_") + v.name;
    r.input(n, "p", p), r.input(n, "grads", g);
    nlohmann::json c = optim_case_json(v, Policy::torch());
    c["name"] = n, c["kind"] = "optim";
    r.add_case(c);
  }
}
const CaseDir& optim_alone_run() {
  static const CaseDir run(torch_script(), "torch_optim_alone", fill_optim_alone);
  return run;
}
const CaseDir& optim_alone_portable_run() {
  static const CaseDir run(torch_script(), "torch_optim_alone_portable", fill_optim_alone,
                           {1, "ATEN_CPU_CAPABILITY=default"});
  return run;
}

// driftlab's trajectory of a case under `policy`.
Tensor optim_alone_trajectory(const OptimConfig& oc, const ScheduleSpec& sched_spec, const Policy& policy) {
  Optimizer opt(oc, resolve_optim(policy));
  LrSchedule sched(sched_spec, oc.lr, policy);
  Param prm{"weight", random_tensor({kAloneN}, DType::f32, 81, -1.0, 1.0), Tensor({kAloneN}, DType::f32), false};
  const Tensor g = random_tensor({kSteps, kAloneN}, DType::f32, 82, -1.0, 1.0);
  Tensor traj({kSteps, kAloneN}, DType::f32);
  for (int s = 0; s < kSteps; ++s) {
    for (int64_t i = 0; i < kAloneN; ++i) prm.grad.data<float>()[i] = g.data<float>()[s * kAloneN + i];
    opt.step(ExecContext{}, {{"w", &prm}}, sched.lr());
    sched.after_step();
    for (int64_t i = 0; i < kAloneN; ++i) traj.data<float>()[s * kAloneN + i] = prm.value.data<float>()[i];
  }
  return traj;
}

int64_t count_differing(const Tensor& a, const Tensor& b) {
  int64_t n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) n += a.at(i) != b.at(i);
  return n;
}

// The torch preset (optim_fma=aten) gives PyTorch's default trajectory bit for bit, and
// optim_fma=none its portable one: the one rounding of ATen's fused add is the whole difference.
TEST(TorchOracleOptimizers, FormulasAloneBitForBitWithAndWithoutFma) {
  ORACLE_GROUP(run, optim_alone_run);
  const CaseDir& portable = optim_alone_portable_run();
  ASSERT_EQ(portable.error(), "") << "PyTorch oracle (portable kernels) failed";
  ErrorTable t("torch.optim alone, 20 steps of fixed gradients, 4096 float32 params", "pytorch");
  std::vector<std::tuple<std::string, OptimConfig, ScheduleSpec, Policy>> cases;
  for (const SgdAloneCase& c : kSgdAlone) {
    OptimConfig oc;
    oc.lr = 0.05, oc.momentum = c.momentum, oc.weight_decay = c.weight_decay, oc.nesterov = c.nesterov;
    cases.emplace_back(c.name, oc, ScheduleSpec{}, Policy::torch());
  }
  for (const OptimVariant& v : kOptimVariants) {
    const TrainConfig tc = optim_train_config(v, 1);
    cases.emplace_back(v.name, tc.optim, tc.schedule, optim_policy(v, Policy::torch()));
  }
  for (const auto& [name, oc, spec, pol] : cases) {
    const std::string n = std::string("alone_") + name;
    Policy none = pol;
    none.optim_fma = OptimFma::none;
    const Tensor fused = optim_alone_trajectory(oc, spec, pol), plain = optim_alone_trajectory(oc, spec, none);
    const Tensor ref = run.out(n, "traj"), ref_portable = portable.out(n, "traj");
    EXPECT_TRUE(bitwise_equal(fused, ref)) << name << ": torch preset vs PyTorch's default dispatch";
    EXPECT_TRUE(bitwise_equal(plain, ref_portable)) << name << ": optim_fma=none vs ATEN_CPU_CAPABILITY=default";
    EXPECT_TRUE(t.check(name, "torch preset (aten) vs default dispatch", fused, ref, 0.0));
    EXPECT_TRUE(t.check(name, "optim_fma=none vs portable kernels", plain, ref_portable, 0.0));
    t.note(name, "optim_fma=none vs default dispatch", plain, ref);
    std::cout << "  " << name << ": optim_fma=none differs from PyTorch's default dispatch in "
              << count_differing(plain, ref) << " of " << ref.numel() << " trajectory values\n";
  }
  t.print();
}

// RMSprop with momentum 0.9 and weight decay at lr 1e-3 drives conv2's channel 8 to the edge of
// death: PyTorch's own float64 run shows its bias gradient exactly 0 at steps 3-9, 13-14 and 16-20
// and ~1e-4 in between (a ReLU decision on the whole channel each step), and each decision is
// amplified by RMSprop's normalisation (a step of about 10*lr whatever |g|). Which steps the
// channel is dead at in float32 is decided within rounding: check_trajectory's decisions compared
// as decisions (the first differing ReLU decision a tie, the trajectory PyTorch's up to it). The
// optimiser step itself is PyTorch's bit for bit (FormulasAlone... above).
TEST(TorchOracleOptimizers, AdamAndRmspropTwentyStepsOnLeNet5) {
  ORACLE_GROUP(run, lenet_run);
  ErrorTable table("lenet5, torch preset, 20 steps of torch.optim.Adam/AdamW/RMSprop (+StepLR) from the same weights",
                   "pytorch");
  for (const OptimVariant& v : kOptimVariants)
    check_trajectory(run, std::string("lenet5_optim_") + v.name, "lenet5", optim_policy(v, Policy::torch()),
                     optim_train_config(v, kBatch), v.name, /*spread_tol=*/true, table);
  table.print();
}

INSTANTIATE_TEST_SUITE_P(TorchOracle, TorchOracleLeNet,
                         ::testing::Values(ModelCase{"lenet1", KernelBackend::onednn},
                                           ModelCase{"lenet1", KernelBackend::reference},
                                           ModelCase{"lenet5", KernelBackend::onednn},
                                           ModelCase{"lenet5", KernelBackend::reference}),
                         model_case_name);

// VGG-16 (33.6M parameters, 32x32 input): every layer's forward, dX and parameter gradients
// for one batch of 2 against the PyTorch definition the speed peer times (cifar_torch.vgg16).
void fill_vgg(CaseDir& r) {
  Model m = build_model("vgg16", Policy::torch(), kModelSeed);
  write_model_weights(r, "vgg16_grad", m);
  r.input("vgg16_grad", "x", random_tensor({2, 3, 32, 32}, DType::f32, 41, 0.0, 1.0));
  r.input("vgg16_grad", "labels", labels_tensor(random_labels(2, 10, 42)));
  r.add_case({{"name", "vgg16_grad"}, {"kind", "model"}, {"arch", "vgg16"}});
}
const CaseDir& vgg_run() {
  static const CaseDir run(torch_script(), "torch_vgg", fill_vgg);
  return run;
}

TEST(TorchOracleModels, Vgg16EveryLayerForwardAndGradients) {
  ORACLE_GROUP(run, vgg_run);
  ErrorTable table("VGG-16, torch preset (oneDNN conv, default gemm), vs PyTorch 1.13 nn.Sequential, batch 2",
                   "pytorch");
  Model m = build_model("vgg16", Policy::torch(), kModelSeed);
  check_every_layer(run, "vgg16_grad", m, table);
  table.print();
}

// ---------------------------------------------------------------------------------------------
// Group 2b: the input gradient of whole models at inference semantics (what an attack on the
// deployed model differentiates): CpuRunner::input_gradient(x, y, Semantics::inference) against
// PyTorch autograd in eval() mode, and the training-mode gradient against train()

struct InputGradCase {
  const char* arch;
  KernelBackend backend;
};
void PrintTo(const InputGradCase& c, std::ostream* os) { *os << c.arch << " with " << backend_name(c.backend); }
constexpr uint64_t kInputGradSeed = 13;
constexpr int64_t kInputGradBatch = 4;

// The case's input: LeNet-5 Fashion-MNIST-like images, ResNet-20 CIFAR-shaped U(-1,1) (a
// normalised image's range).
Tensor input_grad_x(const std::string& arch) {
  if (arch == "lenet5") return image_tensor({kInputGradBatch, 1, 28, 28}, 31);
  return random_tensor({kInputGradBatch, 3, 32, 32}, DType::f32, 32);
}

void fill_input_grad(CaseDir& r) {
  for (const char* arch : {"lenet5", "resnet20"}) {
    Model m = oracle::model_with_random_state(arch, Policy::torch(), kInputGradSeed);
    const std::string n = std::string(arch) + "_input_grad";
    const auto params = m.net->named_params();
    const auto stats = m.net->named_buffers();  // running_mean, running_var of each BatchNorm
    for (std::size_t i = 0; i < params.size(); ++i) r.input(n, "p" + std::to_string(i), params[i].second->value);
    for (std::size_t j = 0; j < stats.size(); ++j) r.input(n, "s" + std::to_string(j), stats[j].second->value);
    r.input(n, "x", input_grad_x(arch));
    r.input(n, "labels", labels_tensor(random_labels(kInputGradBatch, 10, 33)));
    r.add_case({{"name", n},
                {"kind", "model_input_grad"},
                {"arch", arch},
                {"num_params", params.size()},
                {"num_stats", stats.size()}});
  }
}
const CaseDir& input_grad_run() {
  static const CaseDir run(torch_script(), "torch_input_grad", fill_input_grad);
  return run;
}

class TorchOracleInputGradient : public ::testing::TestWithParam<InputGradCase> {};

TEST_P(TorchOracleInputGradient, InferenceSemanticsEqualEvalModeAutograd) {
  ORACLE_GROUP(run, input_grad_run);
  const InputGradCase c = GetParam();
  const std::string arch = c.arch, n = arch + "_input_grad";
  ErrorTable table(arch + " (torch preset, conv/gemm " + backend_name(c.backend) + "), batch " +
                       std::to_string(kInputGradBatch) + ", BatchNorm running statistics random: " +
                       "input_gradient vs PyTorch autograd, F.cross_entropy",
                   "pytorch");
  Model m = build_model(arch, torch_with_backends(c.backend), kInputGradSeed);
  auto params = m.net->named_params();
  auto stats = m.net->named_buffers();
  for (std::size_t i = 0; i < params.size(); ++i) params[i].second->value = run.in(n, "p" + std::to_string(i));
  for (std::size_t j = 0; j < stats.size(); ++j) stats[j].second->value = run.in(n, "s" + std::to_string(j));
  const Tensor x = run.in(n, "x");
  const std::vector<int32_t> y = labels_of(run.in(n, "labels"));
  const auto before = oracle::model_state(m);
  CpuRunner runner(m);

  // Inference semantics vs eval(), kTol. LeNet-5: the argument of check_every_layer (measured
  // here <= 3.8e-7). ResNet-20: 20 convolutions, each output or dX element a float32 sum of
  // 9*C <= 576 products: ~sqrt(576) * 2^-24 ~ 1.4e-6 of the largest term at worst per layer,
  // and the layers' differences are independent, not coherent; its BatchNorms are one affine
  // map per channel (running statistics: no batch reduction), the option-A shortcuts copy
  // exactly. Measured <= 6.1e-7 (dL/dx, reference kernels): 16x headroom, while the batch
  // statistics instead of the running ones are off by ~1 (the train() row below).
  const InputGradient g = runner.input_gradient(x, y, Semantics::inference);
  EXPECT_TRUE(table.check_scalar("eval() / inference", "loss", g.loss, run.out_scalar(n, "loss"), kTol));
  EXPECT_TRUE(table.check("eval() / inference", "logits", g.logits, run.out(n, "logits"), kTol));
  EXPECT_TRUE(table.check("eval() / inference", "dL/dx", g.dx, run.out(n, "dx"), kTol));
  // Nothing moved: neither the weights nor any BatchNorm running statistic (PyTorch's eval()
  // pass moved none either).
  EXPECT_TRUE(oracle::state_unchanged(before, m)) << "input_gradient(inference) must move nothing";
  for (std::size_t j = 0; j < stats.size(); ++j)
    EXPECT_TRUE(bitwise_equal(run.out(n, "stats_after_eval.s" + std::to_string(j)), run.in(n, "s" + std::to_string(j))))
        << "PyTorch eval() moved " << stats[j].first;

  // The semantics matter: PyTorch's train() gradient (batch statistics) is another function of x.
  const double e = table.note("inference vs PyTorch train()", "dL/dx", g.dx, run.out(n, "train.dx"));
  if (!stats.empty()) {
    EXPECT_GT(e, kMismatch) << "a BatchNorm model's train-mode gradient should differ from its inference gradient";
  } else {
    // No BatchNorm or dropout in LeNet-5: the two modes are one function.
    EXPECT_TRUE(table.check("eval() vs train() (PyTorch)", "dL/dx", run.out(n, "dx"), run.out(n, "train.dx"), 0.0));
  }
  // ... and train semantics give train()'s gradient: the same convolutions, plus BatchNorms that
  // reduce over N*H*W = 256..4096 values per channel and divide by the batch standard deviation,
  // forward and backward, as in the training-mode block tests (kTol there too). Measured <= 3.0e-6.
  const InputGradient gt = runner.input_gradient(x, y, Semantics::train);
  EXPECT_TRUE(table.check_scalar("train() / train", "loss", gt.loss, run.out_scalar(n, "train.loss"), kTol));
  EXPECT_TRUE(table.check("train() / train", "logits", gt.logits, run.out(n, "train.logits"), kTol));
  EXPECT_TRUE(table.check("train() / train", "dL/dx", gt.dx, run.out(n, "train.dx"), kTol));
  table.print();
}

INSTANTIATE_TEST_SUITE_P(TorchOracle, TorchOracleInputGradient,
                         ::testing::Values(InputGradCase{"lenet5", KernelBackend::onednn},
                                           InputGradCase{"lenet5", KernelBackend::reference},
                                           InputGradCase{"resnet20", KernelBackend::onednn},
                                           InputGradCase{"resnet20", KernelBackend::reference}),
                         [](const ::testing::TestParamInfo<InputGradCase>& i) {
                           return std::string(i.param.arch) + "_" + backend_name(i.param.backend);
                         });

// ---------------------------------------------------------------------------------------------
// Group 3: initialisers

const uint64_t kInitSeeds[] = {0, 42};
constexpr uint64_t kKsTorchSeed = 7, kKsDriftlabSeed = 2024;
constexpr int64_t kKsIn = 100, kKsOut = 200;  // 20,000 weights, bound 1/sqrt(100) = 0.1

void fill_init(CaseDir& r) {
  for (const char* arch : {"lenet1", "lenet5"})
    for (uint64_t s : kInitSeeds)
      r.add_case(
          {{"name", std::string(arch) + "_" + std::to_string(s)}, {"kind", "init_model"}, {"arch", arch}, {"seed", s}});
  r.add_case({{"name", "linear"},
              {"kind", "init_linear"},
              {"seed", kKsTorchSeed},
              {"in_features", kKsIn},
              {"out_features", kKsOut}});
}
// PyTorch as it runs on this machine (its best CPU kernels: AVX2 / AVX-512 where present).
const CaseDir& init_run() {
  static const CaseDir run(torch_script(), "torch_init", fill_init);
  return run;
}
// PyTorch forced to its portable kernels (what it runs on a CPU without AVX2).
const CaseDir& init_run_default_capability() {
  static const CaseDir run(torch_script(), "torch_init_default_cpu", fill_init, {1, "ATEN_CPU_CAPABILITY=default"});
  return run;
}

// The float uniform PyTorch 1.13 draws, reproduced here from the same MT19937 stream:
// u = (r & 0xFFFFFF) * 2^-24, then from + u*(to-from) either rounded twice (ATen's
// TransformationHelper.h uniform_real as written, dist_acctype<float> = float) or once,
// as the fmaf GCC contracts it into in ATen's AVX2/AVX-512 builds of uniform_kernel.
struct UniformReplay {
  std::vector<float> two_roundings, fused;
};
UniformReplay replay_torch_init(Model& m, uint64_t seed) {
  Rng rng(RngEngine::mt19937_u24, seed);
  UniformReplay out;
  int64_t fan_in = 1;
  for (auto& np : m.net->named_params()) {
    const Tensor& v = np.second->value;
    if (!np.second->is_bias) fan_in = v.numel() / v.dim(0);  // C*R*S or in_features
    const float hi = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in))), lo = -hi;
    for (int64_t i = 0; i < v.numel(); ++i) {
      const float u = rng.uniform_f32();
      out.two_roundings.push_back(u * (hi - lo) + lo);
      out.fused.push_back(std::fma(u, hi - lo, lo));
    }
  }
  return out;
}

// Elements that differ, and the largest absolute difference. (A rounding of u*(hi-lo) at the
// magnitude of the bound, before "+ lo" cancels most of it, so a small weight can be many of
// its own ulps off while the absolute difference stays below ulp(hi-lo).)
struct BitDiff {
  int64_t count = 0, total = 0;
  double max_abs = 0;
};
void add_diff(BitDiff& d, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    ++d.total;
    if (std::memcmp(&a[i], &b[i], 4) != 0) {
      ++d.count;
      d.max_abs = std::max(d.max_abs, std::fabs(static_cast<double>(a[i]) - b[i]));
    }
  }
}

// build_model(arch, torch, S) against torch.manual_seed(S); ARCH() bit for bit, with the
// diagnosis of any difference: which of the two float formulas PyTorch's weights follow.
// fused: PyTorch's weights must equal driftlab's (which uses one fused multiply-add like
// PyTorch's AVX2/AVX-512 kernels); otherwise they must equal the two-rounding replay.
void expect_init_bitwise(const CaseDir& run, const std::string& label, bool fused) {
  for (const char* arch : {"lenet1", "lenet5"})
    for (uint64_t s : kInitSeeds) {
      const std::string n = std::string(arch) + "_" + std::to_string(s);
      Model m = build_model(arch, Policy::torch(), s);
      const UniformReplay rep = replay_torch_init(m, s);
      BitDiff vs_driftlab, vs_two, vs_fused;
      std::string first_param;
      std::size_t off = 0;
      for (auto& np : m.net->named_params()) {
        const Tensor t = run.out(n, "p." + torch_name(np.first));
        const Tensor& d = np.second->value;
        ASSERT_EQ(t.shape(), d.shape()) << n << " " << np.first;
        if (first_param.empty() && !bitwise_equal(d, t)) first_param = np.first + ": " + bitwise_equal(d, t).message();
        add_diff(vs_driftlab, d.data<float>(), t.data<float>(), t.numel());
        add_diff(vs_two, rep.two_roundings.data() + off, t.data<float>(), t.numel());
        add_diff(vs_fused, rep.fused.data() + off, t.data<float>(), t.numel());
        off += static_cast<std::size_t>(t.numel());
      }
      std::ostringstream diagnosis;
      diagnosis << label << " " << n << ": driftlab differs from PyTorch in " << vs_driftlab.count << " of "
                << vs_driftlab.total << " weights (max |diff| " << vs_driftlab.max_abs
                << "); PyTorch's weights vs u*(hi-lo)+lo rounded twice: " << vs_two.count
                << " differ; vs fmaf(u, hi-lo, lo): " << vs_fused.count << " differ";
      std::cout << diagnosis.str() << "\n";
      if (fused) {
        EXPECT_EQ(vs_driftlab.count, 0) << "build_model(\"" << arch << "\", torch, " << s
                                        << ") vs torch.manual_seed(" << s << "); " << arch
                                        << "(): first difference in " << first_param << "\n"
                                        << diagnosis.str();
      } else {
        EXPECT_EQ(vs_two.count, 0) << diagnosis.str();
      }
    }
}

TEST(TorchOracleInit, LeNetWeightsBitwiseEqualTorchManualSeed) {
  ORACLE_GROUP(run, init_run);
  // ATen 1.13's uniform_kernel (native/cpu/DistributionTemplates.h) is compiled once per CPU
  // capability, and GCC contracts `x * (to - from) + from` of core/TransformationHelper.h
  // uniform_real (dist_acctype<float> is float) into one fmaf in the AVX2 / AVX-512 builds,
  // which PyTorch dispatches to on these machines. driftlab's mt19937_u24 engine does the same
  // fused multiply-add (engine/random.h), so the weights are equal bit for bit. (Before that
  // fix: one rounding of u*(hi-lo), <= 1.5e-8, in 15-52% of the weights.)
  expect_init_bitwise(run, "PyTorch (native CPU capability)", true);
}

TEST(TorchOracleInit, LeNetWeightsBitwiseEqualTorchPortableKernels) {
  ORACLE_GROUP(run, init_run_default_capability);
  // ATEN_CPU_CAPABILITY=default: PyTorch's portable build of the same kernel rounds twice, and
  // its weights equal the two-rounding replay of driftlab's stream bit for bit: the stream, the
  // u24 conversion, the bounds and the draw order are PyTorch's; only the FMA differs.
  expect_init_bitwise(run, "PyTorch (ATEN_CPU_CAPABILITY=default)", false);
}

// A (kKsOut x kKsIn) dense layer's weights and bias drawn by driftlab under `pol`.
std::pair<Tensor, Tensor> driftlab_dense_init(const Policy& pol, uint64_t seed) {
  Rng rng(pol.rng_engine, seed);
  DenseLayer d(kKsOut, {kKsIn}, pol, rng);
  return {d.params()[0]->value.clone(), d.params()[1]->value.clone()};
}

TEST(TorchOracleInit, DefaultInitHasTorchBoundsAndPassesKsTest) {
  ORACLE_GROUP(run, init_run);
  // Different seeds on purpose: a distribution test, not a stream comparison.
  const auto [w, b] = driftlab_dense_init(Policy::torch(), kKsDriftlabSeed);
  const Tensor tw = run.out("linear", "weight"), tb = run.out("linear", "bias");
  const double bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kKsIn)));
  const double d = oracle::ks_statistic(values_of(w), values_of(tw));
  const double crit = oracle::ks_threshold(static_cast<std::size_t>(w.numel()), static_cast<std::size_t>(tw.numel()));
  std::cout << "KS driftlab torch preset (seed " << kKsDriftlabSeed << ") vs nn.Linear(" << kKsIn << "," << kKsOut
            << ") (seed " << kKsTorchSeed << "): D = " << d << ", critical value (alpha 0.001) = " << crit
            << "; max|w| driftlab " << max_abs(w) << ", PyTorch " << max_abs(tw) << ", bound " << bound << "\n";
  EXPECT_LT(d, crit) << "driftlab's kaiming_uniform(a=sqrt 5) sample is not PyTorch's distribution";
  // 20,000 uniform draws on [-b, b]: max|w| < b(1 - 1e-3) has probability (1-1e-3)^20000 ~ 2e-9.
  EXPECT_LE(max_abs(w), bound);
  EXPECT_GE(max_abs(w), bound * (1 - 1e-3));
  EXPECT_LE(max_abs(tw), bound);
  EXPECT_LE(max_abs(b), bound);
  EXPECT_LE(max_abs(tb), bound);
  // 200 biases: max|b| < 0.95b has probability 0.95^200 ~ 4e-5.
  EXPECT_GE(max_abs(b), bound * 0.95);
  const double db = oracle::ks_statistic(values_of(b), values_of(tb));
  EXPECT_LT(db, oracle::ks_threshold(200, 200)) << "bias distribution";
}

// ---------------------------------------------------------------------------------------------
// Group 4: negative tests, the tensorflow preset against PyTorch

// The tensorflow preset with the reference kernels (removes backend rounding noise).
Policy tensorflow_ref(const std::string& overrides = "") {
  return Policy::parse("tensorflow,conv_backend=reference,gemm_backend=reference" +
                       (overrides.empty() ? "" : "," + overrides));
}

void fill_negative(CaseDir& r) {
  // (a) 3x3 stride-2 conv on an even 8x8 input: PyTorch's symmetric padding=1 vs the TF
  // SAME emulation F.pad(x, (0,1,0,1)).
  const Tensor x = random_tensor({2, 3, 8, 8}, DType::f32, 501),
               w = random_tensor({4, 3, 3, 3}, DType::f32, 502, -0.5, 0.5);
  const Tensor b = random_tensor({4}, DType::f32, 503, -0.5, 0.5), rr = random_tensor({2, 4, 4, 4}, DType::f32, 504);
  for (const char* n : {"same_sym", "same_tfpad"}) {
    r.input(n, "x", x);
    r.input(n, "w", w);
    r.input(n, "b", b);
    r.input(n, "r", rr);
  }
  r.add_case({{"name", "same_sym"}, {"kind", "conv2d"}, {"stride", 2}, {"dilation", 1}, {"padding", {1, 1, 1, 1}}});
  r.add_case({{"name", "same_tfpad"}, {"kind", "conv2d"}, {"stride", 2}, {"dilation", 1}, {"padding", {0, 1, 0, 1}}});
  // (b) LeNet-1 forward with the same weights (chw flatten in PyTorch).
  Model m = build_model("lenet1", Policy::torch(), kModelSeed);
  write_model_weights(r, "flatten_lenet1", m);
  r.input("flatten_lenet1", "x", image_tensor({kBatch, 1, 28, 28}, 511));
  r.input("flatten_lenet1", "labels", labels_tensor(random_labels(kBatch, 10, 512)));
  r.add_case({{"name", "flatten_lenet1"}, {"kind", "model"}, {"arch", "lenet1"}});
  // (c) confident samples: wrong (the label's logit 30 below another: PyTorch loss ~30) and
  // right (gap 30: PyTorch gradient ~9.4e-14).
  for (const char* n : {"xent_confident_wrong", "xent_confident_right"}) {
    std::vector<float> z(10, 0.0f);
    z[4] = 30.0f;
    r.input(n, "z", Tensor::from<float>({1, 10}, z));
    r.input(n, "labels", labels_tensor({std::string(n) == "xent_confident_wrong" ? 1 : 4}));
    r.add_case({{"name", n}, {"kind", "xent"}});
  }
  // (d) 20 SGD steps on LeNet-1, constant lr and lr 0.05 -> 0.01 at step 10.
  // (f) the same with weight decay 1e-3.
  for (const char* n : {"sgd_const", "sgd_lr_change", "sgd_weight_decay"}) {
    write_model_weights(r, n, m);
    r.input(n, "xs", image_tensor({kSteps, kBatch, 1, 28, 28}, 521));
    r.input(n, "labels", labels_tensor(random_labels(kSteps * kBatch, 10, 522)).reshape({kSteps, kBatch}));
    json c{{"name", n},         {"kind", "train"},
           {"arch", "lenet1"},  {"steps", kSteps},
           {"lr", 0.05},        {"momentum", 0.9},
           {"nesterov", false}, {"weight_decay", n == std::string("sgd_weight_decay") ? 1e-3 : 0.0}};
    if (std::string(n) == "sgd_lr_change") c["lr_at"] = {{"10", 0.01}};
    r.add_case(c);
  }
  // (e) PyTorch's nn.Linear init.
  r.add_case({{"name", "linear"},
              {"kind", "init_linear"},
              {"seed", kKsTorchSeed},
              {"in_features", kKsIn},
              {"out_features", kKsOut}});
}
const CaseDir& negative_run() {
  static const CaseDir run(torch_script(), "torch_negative", fill_negative);
  return run;
}

std::string join_diff(const Policy& a, const Policy& b) {
  std::string s;
  for (const KnobDiff& d : diff(a, b)) s += (s.empty() ? "" : ", ") + d.knob + "=" + d.a + " (torch: " + d.b + ")";
  return s.empty() ? "(none)" : s;
}

TEST(TorchNegative, StridedSamePaddingOnEvenInput) {
  ORACLE_GROUP(run, negative_run);
  ErrorTable table("(a) conv 3x3 stride 2 'same' on 8x8: tensorflow preset vs PyTorch", "pytorch");
  Conv2dSpec spec;
  spec.out_channels = 4;
  spec.stride = 2;
  spec.pad = PadMode::same;
  // conv_same_pad=after_stride1 refuses 'same' with stride 2, as nn.Conv2d(padding='same', stride=2) does.
  {
    Rng rng(RngEngine::mt19937_u24, 1);
    try {
      Conv2dLayer refused(spec, {3, 8, 8}, Policy::parse("torch,conv_same_pad=after_stride1"), rng);
      ADD_FAILURE() << "torch preset accepted padding='same' with stride 2";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not supported for strided convolutions"), std::string::npos) << e.what();
    }
  }
  auto conv_with = [&](const Policy& pol, const Conv2dSpec& s) {
    Rng rng(pol.rng_engine, 1);
    Conv2dLayer layer(s, {3, 8, 8}, pol, rng);
    const Conv2dParams& p = layer.op_params();
    std::cout << "  " << pol.to_string() << ": pads t/b/l/r " << p.pad_t << "/" << p.pad_b << "/" << p.pad_l << "/"
              << p.pad_r << "\n";
    set_params(layer, {run.in("same_sym", "w"), run.in("same_sym", "b")});
    return run_layer(layer, run.in("same_sym", "x"), run.in("same_sym", "r"));
  };
  const LayerResult tf = conv_with(tensorflow_ref(), spec);
  // TF SAME puts the odd pixel after (pads 0/1): PyTorch's symmetric padding=1 is off by one
  // pixel, every output differs.
  EXPECT_FALSE(table.check("tf SAME vs torch padding=1", "forward", tf.y, run.out("same_sym", "y"), kTol));
  EXPECT_FALSE(table.check("tf SAME vs torch padding=1", "dX", tf.dx, run.out("same_sym", "dx"), kTol));
  EXPECT_FALSE(table.check("tf SAME vs torch padding=1", "dW", tf.grads[0], run.out("same_sym", "dw"), kTol));
  // ... and PyTorch's own emulation of TF SAME, F.pad(x, (0,1,0,1)), matches it.
  EXPECT_TRUE(table.check("tf SAME vs torch F.pad(0,1,0,1)", "forward", tf.y, run.out("same_tfpad", "y"), kTol));
  EXPECT_TRUE(table.check("tf SAME vs torch F.pad(0,1,0,1)", "dX", tf.dx, run.out("same_tfpad", "dx"), kTol));
  EXPECT_TRUE(table.check("tf SAME vs torch F.pad(0,1,0,1)", "dW", tf.grads[0], run.out("same_tfpad", "dw"), kTol));
  EXPECT_TRUE(table.check("tf SAME vs torch F.pad(0,1,0,1)", "db", tf.grads[1], run.out("same_tfpad", "db"), kTol));
  // The padding placement is the whole difference: the same preset with explicit symmetric
  // padding 1 matches PyTorch's padding=1.
  Conv2dSpec sym = spec;
  sym.pad = PadMode::explicit_pad;
  sym.pad_h = sym.pad_w = 1;
  const LayerResult tf_sym = conv_with(tensorflow_ref(), sym);
  EXPECT_TRUE(table.check("tf explicit pad 1 vs torch padding=1", "forward", tf_sym.y, run.out("same_sym", "y"), kTol));
  EXPECT_TRUE(table.check("tf explicit pad 1 vs torch padding=1", "dX", tf_sym.dx, run.out("same_sym", "dx"), kTol));
  // The torch preset's 'same' at stride 2 (conv_same_pad=half_strided) is that padding=1: what
  // PyTorch code writes for it, computed by PyTorch.
  Policy torch_ref = Policy::torch();
  torch_ref.set("conv_backend", "reference");
  const LayerResult ts = conv_with(torch_ref, spec);
  EXPECT_TRUE(table.check("torch preset 'same' vs torch padding=1", "forward", ts.y, run.out("same_sym", "y"), kTol));
  EXPECT_TRUE(table.check("torch preset 'same' vs torch padding=1", "dX", ts.dx, run.out("same_sym", "dx"), kTol));
  EXPECT_TRUE(table.check("torch preset 'same' vs torch padding=1", "dW", ts.grads[0], run.out("same_sym", "dw"), kTol));
  table.print();
}

TEST(TorchNegative, FlattenOrder) {
  ORACLE_GROUP(run, negative_run);
  ErrorTable table("(b) LeNet-1 logits with PyTorch's weights: flatten_order", "pytorch");
  auto logits = [&](const Policy& pol) {
    Model m = build_model("lenet1", pol, kModelSeed);
    load_model_weights(m, run, "flatten_lenet1");
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    return m.forward(ctx, run.in("flatten_lenet1", "x"));
  };
  const Tensor ref = run.out("flatten_lenet1", "y7");
  const Policy tf = tensorflow_ref(), tf_chw = tensorflow_ref("flatten_order=chw");
  std::cout << "tensorflow preset differs from torch (reference kernels) in: "
            << join_diff(tf, torch_with_backends(KernelBackend::reference)) << "\n";
  EXPECT_FALSE(table.check("tensorflow (hwc)", "logits", logits(tf), ref, kTol));
  EXPECT_TRUE(table.check("tensorflow,flatten_order=chw", "logits", logits(tf_chw), ref, kTol));
  table.print();
}

TEST(TorchNegative, CrossEntropyOnConfidentSamples) {
  ORACLE_GROUP(run, negative_run);
  ErrorTable table("(c) cross-entropy on confident samples (logit gap 30)", "pytorch");
  for (const char* n : {"xent_confident_wrong", "xent_confident_right"}) {
    const Tensor z = run.in(n, "z");
    const std::vector<int32_t> y = labels_of(run.in(n, "labels"));
    const double tloss = run.out_scalar(n, "loss");
    const Tensor tdz = run.out(n, "dz");
    for (const std::string form : {"softmax_clip", "log_softmax"}) {
      const Policy pol = tensorflow_ref(form == "log_softmax" ? "ce_formulation=log_softmax" : "");
      const SoftmaxXentParams lp = resolve_loss(pol);
      const double loss = softmax_xent_forward_ref(lp, z, y);
      Tensor dz(z.shape(), DType::f32);
      softmax_xent_backward_ref(lp, z, y, dz);
      std::cout << n << ", " << pol.to_string() << ": loss " << loss << " (PyTorch " << tloss << "), max|dz| "
                << max_abs(dz) << " (PyTorch " << max_abs(tdz) << ")\n";
      const std::string what = std::string(n).substr(5) + " " + form;
      if (form == "softmax_clip") {
        // Keras 2.2.4's clip: the sample stops learning, PyTorch's does not.
        EXPECT_EQ(max_abs(dz), 0.0) << n;
        EXPECT_GT(max_abs(tdz), 0.0) << n;
        EXPECT_FALSE(table.check(what, "dZ", dz, tdz, kTol));
        if (std::string(n) == "xent_confident_wrong") {
          EXPECT_NEAR(loss, -std::log(1e-7), 1e-3);  // 16.118
          EXPECT_NEAR(tloss, 30.0, 1e-4);
          EXPECT_FALSE(table.check_scalar(what, "loss", loss, tloss, kTol));
        }
      } else {
        EXPECT_TRUE(table.check_scalar(what, "loss", loss, tloss, kTol));
        // Relative per element: the right sample's gradient is ~9.4e-14 and must match too.
        EXPECT_TRUE(all_close(dz, tdz, 0.0, 1e-5)) << n;
        table.check(what, "dZ", dz, tdz, kTol);
      }
    }
  }
  table.print();
}

// Plain SGD loop (Trainer::step's, with Optimizer exposed so the lr can change mid-way).
Model train_lenet1(const CaseDir& run, const std::string& n, const Policy& pol, const std::map<int, double>& lr_at,
                   double weight_decay = 0.0) {
  Model m = build_model("lenet1", pol, kModelSeed);
  load_model_weights(m, run, n);
  OptimConfig sc;
  sc.lr = 0.05;
  sc.momentum = 0.9;
  sc.weight_decay = weight_decay;
  Optimizer sgd(sc, resolve_optim(pol));
  const SoftmaxXentParams lp = resolve_loss(pol);
  ExecContext exec;
  RunContext ctx = RunContext::training(exec, nullptr);
  ctx.input_grad = false;
  const Tensor xs = run.in(n, "xs"), ls = run.in(n, "labels");
  for (int k = 0; k < kSteps; ++k) {
    if (lr_at.count(k)) sgd.set_lr(lr_at.at(k));
    auto params = m.net->named_params();
    m.net->zero_grad();
    const std::vector<int32_t> y = labels_of(slice0(ls, k));
    Tensor z = m.forward(ctx, slice0(xs, k));
    softmax_xent_forward_ref(lp, z, y);
    Tensor dz(z.shape(), z.dtype());
    softmax_xent_backward_ref(lp, z, y, dz);
    m.net->backward(ctx, dz);
    sgd.step(ExecContext{}, params);
  }
  return m;
}

// Largest max|a-r|/max|r| over the model's parameters against the oracle's weights.
double max_weight_error(Model& m, const CaseDir& run, const std::string& n, ErrorTable& table, const std::string& what,
                        double tol, bool expect_match) {
  std::vector<std::tuple<std::string, std::string, Tensor>> results;
  for (auto& np : m.net->named_params())
    results.emplace_back(torch_name(np.first), "p." + torch_name(np.first), np.second->value);
  const std::string prefix = nearest_torch32(run, n, results);
  double worst = 0;
  for (const auto& [name, key, got] : results) {
    const Tensor ref = run.out(n, prefix + key);
    const bool ok = table.check(what + torch32_label(prefix), name, got, ref, tol);
    if (expect_match) {
      EXPECT_TRUE(ok) << what << " " << name;
    }
    worst = std::max(worst, rel_error(got, ref));
  }
  return worst;
}

TEST(TorchNegative, SgdFormulaKerasVelocityVsTorchBuffer) {
  ORACLE_GROUP(run, negative_run);
  ErrorTable table("(d) LeNet-1 after 20 SGD steps (lr 0.05, momentum 0.9): sgd_form", "pytorch");
  // The tensorflow preset with the two other knobs a LeNet training step reads set to torch's
  // (flatten order, cross-entropy formulation), so that sgd_form is the only difference left
  // that matters (init knobs do not: the weights are PyTorch's; weight decay is 0).
  const Policy keras = tensorflow_ref("flatten_order=chw,ce_formulation=log_softmax");
  Policy torch_form = keras;
  torch_form.set("sgd_form", "torch_buffer");
  std::cout << "policy under test differs from torch (reference kernels) in: "
            << join_diff(keras, torch_with_backends(KernelBackend::reference)) << "\n";
  // Same tolerance and reason as the LeNet training oracle (20 steps amplify rounding).
  constexpr double kTrainTol = 1e-4;
  Model k_const = train_lenet1(run, "sgd_const", keras, {});
  const double e_const =
      max_weight_error(k_const, run, "sgd_const", table, "keras_velocity, const lr", kTrainTol, true);
  Model t_const = train_lenet1(run, "sgd_const", torch_form, {});
  const double e_tconst = max_weight_error(t_const, run, "sgd_const", table, "torch_buffer, const lr", kTrainTol, true);
  // Bitwise difference between the two forms in driftlab (same kernels, same data).
  double form_gap = 0, form_gap_rel = 0;
  auto pk = k_const.net->named_params(), pt = t_const.net->named_params();
  for (std::size_t i = 0; i < pk.size(); ++i) {
    for (int64_t j = 0; j < pk[i].second->value.numel(); ++j)
      form_gap = std::max(form_gap, std::fabs(pk[i].second->value.at(j) - pt[i].second->value.at(j)));
    form_gap_rel = std::max(form_gap_rel, rel_error(pk[i].second->value, pt[i].second->value));
  }
  table.note("keras_velocity vs torch_buffer", "driftlab only, const lr", form_gap, form_gap_rel);
  std::cout << "constant lr: keras_velocity vs PyTorch max rel err " << e_const << ", torch_buffer vs PyTorch "
            << e_tconst << ", keras_velocity vs torch_buffer (driftlab) max abs diff " << form_gap
            << " (equal in exact arithmetic; float rounding only)\n";

  const std::map<int, double> lr_at{{10, 0.01}};
  Model k_lr = train_lenet1(run, "sgd_lr_change", keras, lr_at);
  const double e_lr =
      max_weight_error(k_lr, run, "sgd_lr_change", table, "keras_velocity, lr->0.01@10", kTrainTol, false);
  Model t_lr = train_lenet1(run, "sgd_lr_change", torch_form, lr_at);
  const double e_tlr =
      max_weight_error(t_lr, run, "sgd_lr_change", table, "torch_buffer, lr->0.01@10", kTrainTol, true);
  std::cout << "lr 0.05 -> 0.01 at step 10: keras_velocity vs PyTorch max rel err " << e_lr
            << ", torch_buffer vs PyTorch " << e_tlr << "\n";
  // Keras keeps velocity built with lr 0.05 (decaying by 0.9 per step); torch's buffer holds
  // raw gradients, rescaled by the new lr at once: a difference far above rounding.
  EXPECT_GT(e_lr, 100 * kTrainTol) << "keras_velocity should differ from PyTorch after an lr change";
  table.print();
}

TEST(TorchNegative, WeightDecayModeAndBiases) {
  ORACLE_GROUP(run, negative_run);
  ErrorTable table("(f) LeNet-1 after 20 SGD steps with weight decay 1e-3, float64: weight_decay_mode / _on_bias",
                   "pytorch");
  // float64 (reference kernels), against PyTorch's float64 run: rounding and ReLU/max-pool
  // flips are out of the way, so 1e-10 separates "same formula" from "different formula".
  constexpr double kTol64 = 1e-10;
  const std::string base = "flatten_order=chw,ce_formulation=log_softmax,sgd_form=torch_buffer,dtype=float64";
  const Policy keras = tensorflow_ref(base);  // l2_loss (g += 2*D*w), kernels only
  const Policy mode_flipped = tensorflow_ref(base + ",weight_decay_mode=grad_add");
  const Policy bias_flipped = tensorflow_ref(base + ",weight_decay_on_bias=true");
  const Policy both_flipped = tensorflow_ref(base + ",weight_decay_mode=grad_add,weight_decay_on_bias=true");
  std::cout << "policy under test differs from torch (reference kernels, float64) in: " << join_diff(keras, [] {
    Policy p = torch_with_backends(KernelBackend::reference);
    p.dtype = FloatType::float64;
    return p;
  }()) << "\n";
  auto errors = [&](const Policy& pol, const std::string& label) {
    Model m = train_lenet1(run, "sgd_weight_decay", pol, {}, 1e-3);
    double w_err = 0, b_err = 0;
    for (auto& np : m.net->named_params()) {
      const Tensor ref = run.out("sgd_weight_decay", "f64.p." + torch_name(np.first));
      table.check(label, torch_name(np.first), np.second->value, ref, kTol64);
      (np.second->is_bias ? b_err : w_err) =
          std::max(np.second->is_bias ? b_err : w_err, rel_error(np.second->value, ref));
    }
    std::cout << label << ": max rel err weights " << w_err << ", biases " << b_err << "\n";
    return std::make_pair(w_err, b_err);
  };
  // Two knobs differ; each alone leaves a mismatch (biases feed the forward pass, so after 20
  // steps an undecayed bias moves the weights too), and the two together restore the match.
  const auto [kw, kb] = errors(keras, "l2_loss, not on bias");
  EXPECT_GT(std::max(kw, kb), 1e3 * kTol64) << "tensorflow's weight decay should differ from PyTorch's";
  const auto [mw, mb] = errors(mode_flipped, "grad_add, not on bias");
  EXPECT_GT(mb, 1e3 * kTol64) << "biases still undecayed";
  const auto [ow, ob] = errors(bias_flipped, "l2_loss, on bias");
  EXPECT_GT(std::max(ow, ob), 1e3 * kTol64) << "l2_loss decays by 2*D*w";
  const auto [bw, bb] = errors(both_flipped, "grad_add, on bias");
  EXPECT_LE(bw, kTol64) << "weight_decay_mode=grad_add is torch's g += D*w";
  EXPECT_LE(bb, kTol64) << "torch.optim.SGD decays biases too";
  table.print();
}

TEST(TorchNegative, InitGlorotVsKaiming) {
  ORACLE_GROUP(run, negative_run);
  const Tensor tw = run.out("linear", "weight"), tb = run.out("linear", "bias");
  const double kaiming = static_cast<float>(1.0 / std::sqrt(static_cast<double>(kKsIn)));
  const double glorot = static_cast<float>(std::sqrt(6.0 / static_cast<double>(kKsIn + kKsOut)));
  std::cout << "Dense " << kKsIn << "->" << kKsOut << ": glorot_uniform bound sqrt(6/(fan_in+fan_out)) = " << glorot
            << ", PyTorch kaiming_uniform(a=sqrt 5) bound 1/sqrt(fan_in) = " << kaiming << "\n";
  struct Fans {
    const char* name;
    int fan_in, fan_out;
  };
  for (const Fans& f : {Fans{"LeNet-5 conv1", 25, 150}, Fans{"LeNet-5 conv2", 150, 400}, Fans{"LeNet-5 fc1", 256, 120},
                        Fans{"LeNet-5 fc3", 84, 10}})
    std::cout << "  " << f.name << ": glorot " << std::sqrt(6.0 / (f.fan_in + f.fan_out)) << " vs kaiming "
              << 1.0 / std::sqrt(static_cast<double>(f.fan_in)) << "\n";
  const std::size_t n = static_cast<std::size_t>(tw.numel());
  const double crit = oracle::ks_threshold(n, n);

  const auto [w_tf, b_tf] = driftlab_dense_init(tensorflow_ref(), kKsDriftlabSeed);
  const double d_tf = oracle::ks_statistic(values_of(w_tf), values_of(tw));
  std::cout << "tensorflow preset: max|w| " << max_abs(w_tf) << ", KS D vs PyTorch " << d_tf << " (critical " << crit
            << "), max|b| " << max_abs(b_tf) << " (PyTorch " << max_abs(tb) << ")\n";
  EXPECT_GT(max_abs(w_tf), kaiming) << "glorot's bound is wider here";
  EXPECT_LE(max_abs(w_tf), glorot);
  EXPECT_GT(d_tf, crit) << "the KS test should tell glorot_uniform from PyTorch's init";
  EXPECT_EQ(max_abs(b_tf), 0.0) << "Keras biases start at zero";

  const Policy flipped = tensorflow_ref("init_weight=kaiming_uniform_sqrt5");
  const auto [w_k, b_k] = driftlab_dense_init(flipped, kKsDriftlabSeed);
  const double d_k = oracle::ks_statistic(values_of(w_k), values_of(tw));
  std::cout << flipped.to_string() << ": max|w| " << max_abs(w_k) << ", KS D vs PyTorch " << d_k << "\n";
  EXPECT_LE(max_abs(w_k), kaiming);
  EXPECT_GE(max_abs(w_k), kaiming * (1 - 1e-3));
  EXPECT_LT(d_k, crit) << "init_weight=kaiming_uniform_sqrt5 should give PyTorch's weight distribution";
  const auto [w_b, b_b] = driftlab_dense_init(tensorflow_ref("init_bias=uniform_fan_in"), kKsDriftlabSeed);
  EXPECT_LE(max_abs(b_b), kaiming);
  EXPECT_GT(max_abs(b_b), 0.9 * kaiming) << "init_bias=uniform_fan_in draws PyTorch's bias range";
}

// ---------------------------------------------------------------------------------------------
// Group: NaN inputs (docs/POLICIES.md "NaN semantics"). PyTorch keeps a NaN: relu(NaN) = NaN and
// its gradient passes dy (threshold_backward tests the output, `y <= 0`); a max-pool window
// holding a NaN outputs NaN and sends dy to its last NaN (`val > maxval || isnan(val)`); an LSTM
// turns the NaN sample's states NaN from that step on. NaN must match NaN exactly and the finite
// values as every other case (all_close treats NaN as equal only to NaN).

const Shape kNanActShape = {2, 3, 4, 4};
const RnnShape kNanLstm = {3, 5, 4, 6};

// (2,2,8,8) planes, k x k windows, stride 2, no padding; ties=first (the torch preset's).
Pool2dParams nan_pool_params(int k) {
  Pool2dParams p;
  p.n = p.c = 2;
  p.h = p.w = 8;
  p.kh = p.kw = k;
  p.stride_h = p.stride_w = 2;
  return p;
}

Tensor with_nans(Tensor x, std::initializer_list<int64_t> at) {
  for (int64_t i : at) x.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  return x;
}

void fill_nan(CaseDir& r) {
  // relu: NaNs among values of both signs and an exact 0.
  Tensor xr = with_nans(random_tensor(kNanActShape, DType::f32, 900, -2.0, 2.0), {0, 5, 17, 40, 95});
  xr.data<float>()[6] = 0.0f;
  r.input("nan_relu", "x", xr);
  r.input("nan_relu", "r", random_tensor(kNanActShape, DType::f32, 901));
  r.add_case({{"name", "nan_relu"}, {"kind", "module"}, {"module", "relu"}});
  // max pool 2x2 (the fast kernel's AVX-512 path) and 3x3 stride 2 (its general scan), planes 8x8:
  // windows with one NaN, two NaNs (indices 0,1 and 8,9 share window (0,0) of the 2x2 pool), none.
  const Tensor xp = with_nans(random_tensor({2, 2, 8, 8}, DType::f32, 902), {0, 1, 8, 9, 20, 27, 64 + 36, 64 + 45,
                                                                              128 + 63, 192 + 18, 192 + 19});
  for (int k : {2, 3}) {
    const std::string n = "nan_maxpool" + std::to_string(k);
    const Pool2dParams p = nan_pool_params(k);
    r.input(n, "x", xp);
    r.input(n, "r", random_tensor(p.y_shape(), DType::f32, 903 + k));
    r.add_case({{"name", n}, {"kind", "pool2d"}, {"pool", "max"}, {"kernel", k}, {"stride", 2}, {"padding", 0}});
  }
  // LSTM: sample 1 gets a NaN at step 2.
  const RnnShape s = kNanLstm;
  const int64_t G = 4 * s.hidden;
  r.input("nan_lstm", "x", with_nans(random_tensor({s.batch, s.steps, s.input}, DType::f32, 910),
                                     {(1 * s.steps + 2) * s.input + 1}));
  r.input("nan_lstm", "weight_ih_l0", random_tensor({G, s.input}, DType::f32, 911, -0.5, 0.5));
  r.input("nan_lstm", "weight_hh_l0", random_tensor({G, s.hidden}, DType::f32, 912, -0.5, 0.5));
  r.input("nan_lstm", "bias_ih_l0", random_tensor({G}, DType::f32, 913, -0.5, 0.5));
  r.input("nan_lstm", "bias_hh_l0", random_tensor({G}, DType::f32, 914, -0.5, 0.5));
  r.input("nan_lstm", "r", random_tensor({s.batch, s.steps, s.hidden}, DType::f32, 915));
  r.add_case({{"name", "nan_lstm"}, {"kind", "lstm"}, {"input", s.input}, {"hidden", s.hidden}});
}
const CaseDir& nan_run() {
  static const CaseDir run(torch_script(), "torch_nan", fill_nan);
  return run;
}

int64_t count_nan(const Tensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) n += std::isnan(t.at(i));
  return n;
}

// The finite part of `ref` sets the scale of the float32 tolerance (max_abs would see the NaNs).
double finite_max(const Tensor& ref) {
  double m = 0;
  for (int64_t i = 0; i < ref.numel(); ++i)
    if (std::isfinite(ref.at(i))) m = std::max(m, std::fabs(ref.at(i)));
  return m;
}

TEST(TorchOracleNan, ReluKeepsNanAndPassesItsGradient) {
  ORACLE_GROUP(run, nan_run);
  const Shape per_sample(kNanActShape.begin() + 1, kNanActShape.end());
  for (KernelBackend b : {KernelBackend::reference, KernelBackend::fast}) {
    Policy pol = Policy::torch();
    pol.act_backend = b;
    ActivationLayer l(ActKind::relu, per_sample, pol);
    LayerResult res = run_layer(l, run.in("nan_relu", "x"), run.in("nan_relu", "r"));
    const Tensor ty = run.out("nan_relu", "y"), tdx = run.out("nan_relu", "dx");
    ASSERT_EQ(count_nan(ty), 5) << "PyTorch's relu keeps the 5 NaNs";
    ASSERT_EQ(count_nan(tdx), 0) << "PyTorch's relu gradient at NaN is dy";
    // No arithmetic: exact (up to the sign of zero, as in ActivationsAndFlatten).
    EXPECT_TRUE(all_close(res.y, ty, 0.0, 0.0)) << backend_name(pol.act_backend);
    EXPECT_TRUE(all_close(res.dx, tdx, 0.0, 0.0)) << backend_name(pol.act_backend);
  }
}

TEST(TorchOracleNan, MaxPoolOutputsNanAndSendsDyToTheLastNan) {
  ORACLE_GROUP(run, nan_run);
  const KernelRegistry reg = make_cpu_registry();
  for (int k : {2, 3}) {
    const std::string n = "nan_maxpool" + std::to_string(k);
    const Pool2dParams p = nan_pool_params(k);
    const Tensor x = run.in(n, "x"), r = run.in(n, "r"), ty = run.out(n, "y"), tdx = run.out(n, "dx");
    ASSERT_GT(count_nan(ty), 0) << n;
    for (KernelBackend b : {KernelBackend::reference, KernelBackend::fast}) {
      Tensor y = Tensor::empty(p.y_shape(), DType::f32), dx = Tensor::empty(p.x_shape(), DType::f32);
      reg.maxpool2d.at(b).forward(p, x, y);
      reg.maxpool2d.at(b).backward(p, x, r, dx);
      // A max rounds nothing and each dX here is one R value or a sum of at most 4 (3x3, stride 2
      // overlaps), added in window order as PyTorch's scatter does: exact.
      EXPECT_TRUE(all_close(y, ty, 0.0, 0.0)) << n << " " << backend_name(b);
      EXPECT_TRUE(all_close(dx, tdx, 0.0, 0.0)) << n << " " << backend_name(b);
    }
  }
  // Through the layer (torch preset, 2x2).
  Pool2dSpec spec;
  spec.kind = PoolKind::max;
  spec.window = 2;
  spec.stride = 2;
  Pool2dLayer layer(spec, {2, 8, 8}, Policy::torch());
  LayerResult res = run_layer(layer, run.in("nan_maxpool2", "x"), run.in("nan_maxpool2", "r"));
  EXPECT_TRUE(all_close(res.y, run.out("nan_maxpool2", "y"), 0.0, 0.0));
  EXPECT_TRUE(all_close(res.dx, run.out("nan_maxpool2", "dx"), 0.0, 0.0));
}

TEST(TorchOracleNan, LstmNanSampleGoesNanTheOthersMatch) {
  ORACLE_GROUP(run, nan_run);
  const RnnCase& torch_cell = kRnnCases[0];
  ASSERT_STREQ(torch_cell.name, "lstm_torch");
  const RnnParams p = rnn_case_params(torch_cell, kNanLstm);
  const Tensor x = run.in("nan_lstm", "x"), r = run.in("nan_lstm", "r");
  const Tensor w_ih = run.in("nan_lstm", "weight_ih_l0"), w_hh = run.in("nan_lstm", "weight_hh_l0");
  const Tensor b_ih = run.in("nan_lstm", "bias_ih_l0"), b_hh = run.in("nan_lstm", "bias_hh_l0");
  const Tensor ty = run.out("nan_lstm", "y"), tdx = run.out("nan_lstm", "dx");
  ASSERT_EQ(count_nan(ty), (p.steps - 2) * p.hidden) << "PyTorch: sample 1's states from step 2 on";
  const KernelRegistry reg = make_cpu_registry();
  for (KernelBackend b : {KernelBackend::reference, KernelBackend::fast}) {
    const RnnKernel& k = reg.rnn.at(b);
    Tensor h({p.batch, p.steps, p.hidden}, DType::f32), dx(x.shape(), DType::f32);
    Tensor dw_ih(w_ih.shape(), DType::f32), dw_hh(w_hh.shape(), DType::f32), db_ih(b_ih.shape(), DType::f32),
        db_hh(b_hh.shape(), DType::f32), ws({rnn_workspace_size(p)}, DType::f32);
    for (Tensor* t : {&dw_ih, &dw_hh, &db_ih, &db_hh}) std::fill(t->data<float>(), t->data<float>() + t->numel(), 0.f);
    RnnExec ex{1};
    const RnnWeights<float> w{w_ih.data<float>(), w_hh.data<float>(), b_ih.data<float>(), b_hh.data<float>(), nullptr};
    k.forward_f32(p, ex, x.data<float>(), nullptr, w, h.data<float>(), ws.data<float>());
    k.backward_f32(p, ex, x.data<float>(), nullptr, w, h.data<float>(), ws.data<float>(), r.data<float>(),
                   dx.data<float>(),
                   {dw_ih.data<float>(), dw_hh.data<float>(), db_ih.data<float>(), db_hh.data<float>(), nullptr});
    // The finite values: a few libm/Sleef exp/tanh evaluations and sums of 10 terms per gate, 5
    // steps deep; the fast kernel's polynomial exp/tanh (1.3 ulp) on top: 1e-5 of the largest.
    EXPECT_TRUE(all_close(h, ty, 1e-5 * finite_max(ty), 0.0)) << backend_name(b);
    EXPECT_TRUE(all_close(dx, tdx, 1e-5 * finite_max(tdx), 0.0)) << backend_name(b);
  }
}

}  // namespace
}  // namespace driftlab
