// driftlab's autocast=bfloat16 (engine/layers/math_mode.h) against PyTorch 1.13's CPU mixed
// precision, torch.autocast(device_type='cpu', dtype=torch.bfloat16) (tests/oracles/torch/
// autocast_oracle.py), on LeNet-5 and ResNet-20 with the same weights, BatchNorm state and inputs.
//
// What is compared, and why that way:
// - The op lists: the dtype of every LeNet-5 layer's output in PyTorch against the format driftlab
//   holds it in.
// - Each layer alone, given PyTorch's own input for it (so that no earlier difference carries
//   over): an exact op (ReLU, max-pool, flatten) must give PyTorch's bits; a convolution or dense
//   layer sums its bfloat16 products in float32 in an order neither library documents, then rounds
//   once, so its result must be PyTorch's bits except where the exact sum of the rounded operands
//   (float64, from a float64 model) lies within Higham's float32 accumulation bound of the midpoint
//   between two bfloat16 neighbours: a tie at float32 precision, where each library may round
//   either way; there the two results must be those neighbours. The same layers in float32 (no
//   autocast) must fail that comparison: the test tells the modes apart.
// - PyTorch's bfloat16 convolutions are float32 sums only where it runs them in oneDNN, which it
//   does on CPUs with AVX-512 BW, VL and DQ (aten/src/ATen/native/ConvUtils.h, use_mkldnn:
//   mkldnn_bf16_device_check); elsewhere (AMD Zen 3, for one) its fallback convolution is not
//   float32-accumulated (measured with oneDNN turned off: 4.3% error; docs/REDUCED_PRECISION.md),
//   so there the convolution layers are printed, not asserted.
// - Whole models (logits, loss, dL/dx, every parameter gradient; eval and train semantics): a tie
//   decided the other way changes one element by one bfloat16 step, and the layers after carry
//   that change, so whole-model results are compared in bfloat16 steps of PyTorch's value, against
//   the float32 model's distance from the same results.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/ops/reduced_precision.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/global_avg_pool_layer.h"
#include "engine/layers/math_mode.h"
#include "tests/oracles/oracle_util.h"
#include "tests/ops/reduced_precision_util.h"

namespace driftlab {
namespace {

using oracle::CaseDir;

constexpr uint64_t kSeed = 17;
constexpr int64_t kBatch = 8;

Tensor input_of(const std::string& arch) {
  if (arch == "lenet5") return random_tensor({kBatch, 1, 28, 28}, DType::f32, 41, 0.0, 1.0);
  return random_tensor({kBatch, 3, 32, 32}, DType::f32, 42);
}

void put_state(CaseDir& r, const std::string& n, Model& m, const std::string& arch, const char* kind) {
  const auto params = m.net->named_params();
  const auto stats = m.net->named_buffers();
  for (std::size_t i = 0; i < params.size(); ++i) r.input(n, "p" + std::to_string(i), params[i].second->value);
  for (std::size_t j = 0; j < stats.size(); ++j) r.input(n, "s" + std::to_string(j), stats[j].second->value);
  r.input(n, "x", input_of(arch));
  r.input(n, "labels", oracle::labels_tensor(oracle::random_labels(kBatch, 10, 43)));
  r.add_case({{"name", n}, {"kind", kind}, {"arch", arch}, {"num_params", params.size()}, {"num_stats", stats.size()}});
}

constexpr int64_t kOpsChannels = 16;
constexpr int64_t kMlpIn = 300, kMlpHidden = 48, kMlpOut = 10, kMlpBatch = 40;

// Linear(300, 48) -> ReLU -> Linear(48, 10) under `spec` (the oracle's autocast_mlp).
std::unique_ptr<Sequential> mlp(const Policy& p) {
  Rng rng(p.rng_engine, kSeed);
  auto net = std::make_unique<Sequential>(Shape{kMlpIn});
  net->add(std::make_unique<DenseLayer>(kMlpHidden, net->current_shape(), p, rng));
  net->add(std::make_unique<ActivationLayer>(ActKind::relu, net->current_shape(), p));
  net->add(std::make_unique<DenseLayer>(kMlpOut, net->current_shape(), p, rng));
  net->apply_input_cast(p);
  return net;
}

void fill(CaseDir& r) {
  {  // an MLP with oneDNN off (ATen's own bfloat16 GEMM) and on
    auto net = mlp(Policy::torch());
    const auto params = net->named_params();
    Tensor dy = random_tensor({kMlpBatch, kMlpOut}, DType::f32, 50, -1.0, 1.0);
    for (int64_t j = 0; j < dy.numel(); ++j) dy.data<float>()[j] = round_to_bf16(dy.data<float>()[j]);
    for (const char* n : {"mlp_aten", "mlp_onednn"}) {
      for (std::size_t i = 0; i < params.size(); ++i) r.input(n, "p" + std::to_string(i), params[i].second->value);
      r.input(n, "x", random_tensor({kMlpBatch, kMlpIn}, DType::f32, 49, -1.0, 1.0));
      r.input(n, "dy", dy);
      r.add_case({{"name", n}, {"kind", "autocast_mlp"}, {"mkldnn", std::string(n) == "mlp_onednn" ? 1 : 0}});
    }
  }
  {  // bfloat16 values: the inputs of ResNet-20's BatchNorms and pooling under autocast
    Tensor x = random_tensor({kBatch, kOpsChannels, 8, 8}, DType::f32, 44, -2.0, 2.0);
    for (int64_t j = 0; j < x.numel(); ++j) x.data<float>()[j] = round_to_bf16(x.data<float>()[j]);
    r.input("ops", "x", x);
    r.input("ops", "gamma", random_tensor({kOpsChannels}, DType::f32, 45, 0.5, 1.5));
    r.input("ops", "beta", random_tensor({kOpsChannels}, DType::f32, 46, -0.5, 0.5));
    r.input("ops", "mean", random_tensor({kOpsChannels}, DType::f32, 47, -0.5, 0.5));
    r.input("ops", "var", random_tensor({kOpsChannels}, DType::f32, 48, 0.5, 1.5));
    r.add_case({{"name", "ops"}, {"kind", "autocast_ops"}});
  }
  for (const char* arch : {"lenet5", "resnet20"}) {
    Model m = oracle::model_with_random_state(arch, Policy::torch(), kSeed);
    if (std::string(arch) == "lenet5") put_state(r, "lenet5_layers", m, arch, "autocast_layers");
    put_state(r, std::string(arch) + "_step", m, arch, "autocast_step");
  }
}

const CaseDir& autocast_run() {
  static const CaseDir run(oracle::torch_oracle("autocast_oracle.py"), "torch_autocast", fill);
  return run;
}

// The architecture under `spec` with the case's parameters and statistics (in the model's dtype).
Model with_state(const CaseDir& run, const std::string& arch, const std::string& spec, const std::string& n) {
  Model m = build_model(arch, Policy::parse(spec), kSeed);
  const auto params = m.net->named_params();
  const auto stats = m.net->named_buffers();
  for (std::size_t i = 0; i < params.size(); ++i) params[i].second->value = run.in(n, "p" + std::to_string(i)).to(m.dtype());
  for (std::size_t j = 0; j < stats.size(); ++j) stats[j].second->value = run.in(n, "s" + std::to_string(j)).to(m.dtype());
  return m;
}

// Replaces every conv2d / dense weight and bias by its bfloat16 rounding (autocast's operand cast),
// or by its magnitude after that (the terms of the accumulation bound).
void round_conv_dense_params(Model& m, bool magnitude) {
  for (std::size_t i = 0; i < m.net->size(); ++i) {
    Layer& l = m.net->layer(i);
    if (l.kind() != "conv2d" && l.kind() != "dense") continue;
    for (Param* p : l.params()) {
      Tensor& v = p->value;
      for (int64_t j = 0; j < v.numel(); ++j) {
        const double r = round_to_bf16(static_cast<float>(v.at(j)));
        v.data<double>()[j] = magnitude ? std::abs(r) : r;
      }
    }
  }
}

// Each layer's output when every layer i >= 1 is given PyTorch's input for it (`in<i>`, as
// `convert` makes it): out[i] is layer i's result.
std::vector<Tensor> layer_outputs(Model& m, const CaseDir& run, const std::string& n,
                                  const std::function<Tensor(const Tensor&)>& convert) {
  std::vector<Tensor> out(m.net->size());
  ExecContext exec;
  exec.channel_blocks = false;
  exec.replace_layer_input = [&](std::size_t i, const Tensor& h) {
    if (i > 0) out[i - 1] = h.clone();
    return convert(run.out(n, "in" + std::to_string(i)));
  };
  RunContext ctx = RunContext::inference(exec);
  out.back() = m.forward(ctx, convert(run.out(n, "in0")));
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream is(text);
  for (std::string l; std::getline(is, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

TEST(TorchAutocast, LeNet5EachLayersDtypeAndValueAsCpuBfloat16Autocast) {
  ORACLE_GROUP(run, autocast_run);
  const std::string n = "lenet5_layers";
  Model ac = with_state(run, "lenet5", "torch,autocast=bfloat16", n);
  // Unfused (conv_block_backend=reference), so that every layer's input can be replaced.
  Model f32 = with_state(run, "lenet5", "torch,conv_block_backend=reference", n);
  Model exact = with_state(run, "lenet5", "torch,conv_block_backend=reference,dtype=float64", n);
  Model absum = with_state(run, "lenet5", "torch,conv_block_backend=reference,dtype=float64", n);
  round_conv_dense_params(exact, false);
  round_conv_dense_params(absum, true);
  auto same = [](const Tensor& t) { return t; };
  // The float64 models take the inputs as autocast's operands: rounded to bfloat16 (a no-op after
  // the first layer, whose input is the float32 image), then as they are or their magnitudes.
  auto rounded64 = [](const Tensor& t, bool magnitude) {
    Tensor a = t.to(DType::f64);
    for (int64_t j = 0; j < a.numel(); ++j) {
      const double r = round_to_bf16(static_cast<float>(a.data<double>()[j]));
      a.data<double>()[j] = magnitude ? std::abs(r) : r;
    }
    return a;
  };
  auto f64 = [&](const Tensor& t) { return rounded64(t, false); };
  auto abs64 = [&](const Tensor& t) { return rounded64(t, true); };
  const std::vector<Tensor> own = layer_outputs(ac, run, n, same), plain = layer_outputs(f32, run, n, same),
                            ex = layer_outputs(exact, run, n, f64), ab = layer_outputs(absum, run, n, abs64);
  const std::vector<std::string> dtypes = lines_of(run.text_out(n, "dtypes"));
  ASSERT_EQ(dtypes.size(), ac.net->size()) << "one dtype per LeNet-5 layer";
  const bool conv_asserted = oracle::torch_bf16_convs_in_onednn();
  std::cout << "LeNet-5, batch " << kBatch << ", PyTorch 1.13 torch.autocast('cpu', bfloat16), eval; each layer "
            << "given PyTorch's input:\n"
            << "  layer        dtype     elements  bit-equal  ties (float32 precision)  float32 layers differ\n";
  for (std::size_t i = 0; i < ac.net->size(); ++i) {
    Layer& l = ac.net->layer(i);
    const std::string kind = l.kind();
    const bool summed = kind == "conv2d" || kind == "dense";
    EXPECT_EQ(dtypes[i], ac.net->output_format(i) == MathMode::bfloat16 ? "bfloat16" : "float32")
        << "layer " << i << " (" << kind << "): PyTorch's output dtype against driftlab's format";
    const Tensor t = run.out(n, "out" + std::to_string(i));
    ASSERT_EQ(t.numel(), own[i].numel()) << "layer " << i;
    const int64_t fan_in = summed ? l.params()[0]->value.numel() / l.params()[0]->value.dim(0) + 1 : 1;
    int64_t equal = 0, ties = 0, plain_differ = 0;
    for (int64_t j = 0; j < t.numel(); ++j) {
      const double tv = t.at(j), ov = own[i].at(j);
      plain_differ += plain[i].at(j) != tv;
      if (ov == tv) {
        ++equal;
        continue;
      }
      const bool neighbours = rp_test::bf16_neighbours(ov, tv);
      const double mid = (ov + tv) / 2;
      const double bound = rp_test::sum_bound_gamma(fan_in) * ab[i].at(j) + fan_in * std::ldexp(1.0, -126);
      const bool tie = summed && neighbours && std::abs(ex[i].at(j) - mid) <= bound;
      ties += tie;
      if (summed && kind == "conv2d" && !conv_asserted) continue;
      EXPECT_TRUE(tie) << "layer " << i << " (" << kind << ") element " << j << ": driftlab " << ov << ", PyTorch " << tv
                       << ", exact sum of the rounded operands " << ex[i].at(j) << " (midpoint " << mid << ", bound "
                       << bound << ")";
    }
    if (summed) EXPECT_GT(plain_differ, 0) << "layer " << i << ": the float32 layer gives autocast's bits everywhere";
    std::cout << "  " << std::left << std::setw(2) << i << " " << std::setw(9) << kind << " " << std::setw(9) << dtypes[i]
              << std::right << std::setw(9) << t.numel() << std::setw(11) << equal << std::setw(7) << ties
              << std::setw(28) << plain_differ
              << (summed && kind == "conv2d" && !conv_asserted ? "  (not asserted: no oneDNN bfloat16 on this CPU)" : "")
              << "\n";
  }
}

// Two results of the same float32 computation on the same bfloat16 inputs, each rounded once, may
// differ only where the exact value is near the midpoint of two bfloat16 neighbours: `band` says
// how near (the float32 computations' own error). Returns how many elements differ; each must be
// such a tie.
int64_t expect_equal_but_ties(const Tensor& own, const Tensor& torch, const std::function<double(int64_t)>& exact,
                              const std::function<double(int64_t)>& band, const std::string& what) {
  EXPECT_EQ(own.numel(), torch.numel()) << what;
  int64_t ties = 0;
  for (int64_t j = 0; j < torch.numel() && j < own.numel(); ++j) {
    const double o = own.at(j), t = torch.at(j);
    if (o == t) continue;
    const bool neighbours = rp_test::bf16_neighbours(o, t);
    const bool tie = neighbours && std::abs(exact(j) - (o + t) / 2) <= band(j);
    ties += tie;
    EXPECT_TRUE(tie) << what << " element " << j << ": driftlab " << o << ", PyTorch " << t << ", exact " << exact(j);
  }
  return ties;
}

// ResNet-20's other ops on bfloat16 inputs: BatchNorm under both semantics (and its running
// statistics) and global average pooling, each layer in a Sequential told that its input is
// bfloat16, as it is after a convolution under autocast.
TEST(TorchAutocast, BatchNormAndPoolingOnBfloat16InputsAsCpuAutocast) {
  ORACLE_GROUP(run, autocast_run);
  const Policy p = Policy::parse("torch,autocast=bfloat16");
  const Tensor x = run.in("ops", "x");
  const int64_t n = x.dim(0), c = x.dim(1), hw = x.dim(2) * x.dim(3);
  std::string dtypes = run.text_out("ops", "dtypes");
  EXPECT_EQ(dtypes, "bn_eval bfloat16\nbn_train bfloat16\nmean bfloat16\n");
  const double u = std::ldexp(1.0, -24);
  for (const Semantics s : {Semantics::inference, Semantics::train}) {
    Sequential net(Shape{c, 8, 8});
    net.set_input_format(MathMode::bfloat16);
    net.add(std::make_unique<BatchNormLayer>(net.current_shape(), p));
    ASSERT_EQ(net.output_format(0), MathMode::bfloat16);
    auto params = net.named_params();
    auto stats = net.named_buffers();
    params[0].second->value = run.in("ops", "gamma");
    params[1].second->value = run.in("ops", "beta");
    stats[0].second->value = run.in("ops", "mean");
    stats[1].second->value = run.in("ops", "var");
    ExecContext exec;
    RunContext ctx = s == Semantics::train ? RunContext::training(exec, nullptr) : RunContext::inference(exec);
    const Tensor y = net.forward(ctx, x);
    // The exact BatchNorm of the same inputs, in float64, with the statistics it normalises by.
    std::vector<double> mu(c), var(c);
    for (int64_t ch = 0; ch < c; ++ch) {
      if (s == Semantics::inference) {
        mu[ch] = run.in("ops", "mean").at(ch);
        var[ch] = run.in("ops", "var").at(ch);
        continue;
      }
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < hw; ++k) sum += x.at((i * c + ch) * hw + k);
      mu[ch] = sum / (n * hw);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < hw; ++k) sq += std::pow(x.at((i * c + ch) * hw + k) - mu[ch], 2);
      var[ch] = sq / (n * hw);
    }
    auto exact = [&](int64_t j) {
      const int64_t ch = (j / hw) % c;
      return (x.at(j) - mu[ch]) / std::sqrt(var[ch] + 1e-5) * run.in("ops", "gamma").at(ch) + run.in("ops", "beta").at(ch);
    };
    // Either library's float32 BatchNorm: a handful of roundings of the normalised term and the
    // shift (a few u of |x̂ gamma| + |beta|); under train semantics the batch mean and variance are
    // float32 sums of N*H*W = 512 terms (gamma_512 of the normalised magnitudes). 4x both.
    auto band = [&](int64_t j) {
      const int64_t ch = (j / hw) % c;
      const double xn = std::abs((x.at(j) - mu[ch]) / std::sqrt(var[ch] + 1e-5)) * run.in("ops", "gamma").at(ch);
      const double terms = xn + std::abs(run.in("ops", "beta").at(ch)) + (s == Semantics::train ? 1.0 : 0.0);
      return 4 * (8 * u + (s == Semantics::train ? rp_test::sum_bound_gamma(n * hw) : 0.0)) * terms;
    };
    const std::string what = std::string("batch_norm, ") + semantics_name(s);
    const int64_t ties = expect_equal_but_ties(y, run.out("ops", s == Semantics::train ? "bn_train" : "bn_eval"), exact,
                                               band, what);
    std::cout << what << ": " << y.numel() << " elements, " << ties << " ties at float32 precision, the rest bit-equal\n";
    if (s == Semantics::train) {
      // The running statistics move in float32 from the batch's (unbiased variance): float32 values.
      for (int64_t ch = 0; ch < c; ++ch) {
        EXPECT_NEAR(stats[0].second->value.at(ch), run.out("ops", "mean_after").at(ch), 8 * u) << "running_mean " << ch;
        EXPECT_NEAR(stats[1].second->value.at(ch), run.out("ops", "var_after").at(ch), 8 * u * 2) << "running_var " << ch;
      }
    }
  }
  {
    Sequential net(Shape{c, 8, 8});
    net.set_input_format(MathMode::bfloat16);
    net.add(std::make_unique<GlobalAvgPoolLayer>(net.current_shape(), p));
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    const Tensor y = net.forward(ctx, x);
    std::vector<double> sums(n * c, 0.0), abs_sums(n * c, 0.0);
    for (int64_t j = 0; j < x.numel(); ++j) {
      sums[j / hw] += x.at(j) / hw;
      abs_sums[j / hw] += std::abs(x.at(j)) / hw;
    }
    // A float32 sum of 64 terms in either library's order, divided by 64 (exact).
    const int64_t ties = expect_equal_but_ties(
        y, run.out("ops", "mean"), [&](int64_t j) { return sums[j]; },
        [&](int64_t j) { return rp_test::sum_bound_gamma(hw) * abs_sums[j]; }, "mean over H, W");
    std::cout << "global average pooling: " << y.numel() << " elements, " << ties
              << " ties at float32 precision, the rest bit-equal\n";
  }
}

// Logits, mean cross-entropy and its gradients, the loss in float64 from the logits (PyTorch's
// F.cross_entropy under autocast runs in float32: its fp32 list), dL/dlogits given to backward in
// float32, as autograd gives it to the cast back to the logits' format.
struct Step {
  Tensor logits, dx;
  double loss = 0;
  std::vector<Tensor> grads;
};
Step step_of(Model& m, const Tensor& x, const std::vector<int32_t>& labels, Semantics s) {
  ExecContext exec;
  RunContext ctx = RunContext::recorded(exec, s);
  Step r;
  r.logits = m.forward(ctx, x);
  const int64_t n = r.logits.dim(0), k = r.logits.dim(1);
  Tensor dl({n, k}, DType::f32);
  for (int64_t i = 0; i < n; ++i) {
    double mx = -INFINITY, z = 0;
    for (int64_t j = 0; j < k; ++j) mx = std::max(mx, r.logits.at(i * k + j));
    for (int64_t j = 0; j < k; ++j) z += std::exp(r.logits.at(i * k + j) - mx);
    r.loss += (std::log(z) + mx - r.logits.at(i * k + labels[i])) / n;
    for (int64_t j = 0; j < k; ++j)
      dl.data<float>()[i * k + j] = static_cast<float>((std::exp(r.logits.at(i * k + j) - mx) / z - (j == labels[i])) / n);
  }
  m.net->zero_grad();
  r.dx = m.net->backward(ctx, dl);
  for (auto& [name, p] : m.net->named_params()) r.grads.push_back(p->grad.clone());
  return r;
}

// PyTorch's bfloat16 GEMMs outside oneDNN (a CPU without AVX-512 BW/VL/DQ, a product of at most
// 4096 multiply-adds, or oneDNN disabled, as here) run in ATen's own GEMM: matmul_sum=per_term.
// Its forward is a float32 dot product in a fixed order and its gradients sum in bfloat16, term by
// term, so driftlab must give every bit of the output, dL/dx and each parameter's gradient; the
// float32 rule must not (its gradients are float32 sums rounded once).
TEST(TorchAutocast, MlpGradientsAsAtenGemmWithoutOneDnn) {
  ORACLE_GROUP(run, autocast_run);
  struct Pass {
    Tensor y, dx;
    std::vector<Tensor> grads;
  };
  auto pass = [&](const std::string& spec, const std::string& n) {
    auto net = mlp(Policy::parse(spec));
    const auto params = net->named_params();
    for (std::size_t i = 0; i < params.size(); ++i) params[i].second->value = run.in(n, "p" + std::to_string(i));
    ExecContext exec;
    RunContext ctx = RunContext::training(exec, nullptr);
    Pass r;
    r.y = net->forward(ctx, run.in(n, "x"));
    net->zero_grad();
    r.dx = net->backward(ctx, run.in(n, "dy"));
    for (auto& [name, p] : params) r.grads.push_back(p->grad.clone());
    return r;
  };
  const std::vector<std::string> keys = {"y", "dx", "g0", "g1", "g2", "g3"};
  auto row = [&](const Pass& p, std::size_t i) { return i == 0 ? &p.y : i == 1 ? &p.dx : &p.grads[i - 2]; };
  const Pass per_term = pass("torch,autocast=bfloat16,matmul_sum=per_term", "mlp_aten");
  const Pass f32 = pass("torch,autocast=bfloat16", "mlp_aten");
  std::cout << "Linear(300, 48) -> ReLU -> Linear(48, 10), batch 40, torch.autocast('cpu', bfloat16):\n"
            << "  tensor  elements  bit-equal to PyTorch without oneDNN: per_term, float32 sums;"
            << "  with oneDNN (this CPU): float32 sums\n";
  int64_t f32_differ = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const Tensor t = run.out("mlp_aten", keys[i]), o = run.out("mlp_onednn", keys[i]);
    ASSERT_EQ(row(per_term, i)->numel(), t.numel()) << keys[i];
    for (int64_t j = 0; j < t.numel(); ++j)
      ASSERT_EQ(row(per_term, i)->at(j), t.at(j)) << keys[i] << " element " << j << ": per_term against ATen's GEMM";
    const int64_t f32_equal = oracle::equal_elements(*row(f32, i), t);
    f32_differ += t.numel() - f32_equal;
    std::cout << "  " << std::left << std::setw(6) << keys[i] << std::right << std::setw(10) << t.numel() << std::setw(10)
              << t.numel() << std::setw(10) << f32_equal << std::setw(12) << oracle::equal_elements(*row(f32, i), o)
              << "\n";
  }
  // The rules part on this data: the test tells them apart (measured once, Zen 4: 20,958 of the
  // 27,338 elements differ, in dL/dx and every gradient but the last bias's; the outputs agree, a
  // float32 sum in another order rounded to bfloat16). The last column, printed only: on a CPU
  // with AVX-512 BW/VL/DQ PyTorch's oneDNN gave the float32 rule's bits on every element.
  EXPECT_GT(f32_differ, 0) << "the float32 rule gives ATen's bits everywhere: the comparison tells nothing";
}

TEST(TorchAutocast, LeNet5AndResNet20WholeModelsAsCpuBfloat16Autocast) {
  ORACLE_GROUP(run, autocast_run);
  for (const char* arch : {"lenet5", "resnet20"}) {
    const std::string n = std::string(arch) + "_step";
    const Tensor x = run.in(n, "x");
    const std::vector<int32_t> labels = oracle::labels_of(run.in(n, "labels"));
    for (const char* prefix : {"", "train."}) {
      const Semantics s = std::string(prefix).empty() ? Semantics::inference : Semantics::train;
      Model ac = with_state(run, arch, "torch,autocast=bfloat16", n);
      Model f32 = with_state(run, arch, "torch", n);
      const Step a = step_of(ac, x, labels, s), f = step_of(f32, x, labels, s);
      const std::string p = prefix;
      EXPECT_EQ(lines_of(run.text_out(n, p + "logits_dtype")), std::vector<std::string>{"bfloat16"});
      std::vector<std::pair<std::string, std::pair<const Tensor*, const Tensor*>>> rows = {
          {"logits", {&a.logits, &f.logits}}, {"dL/dx", {&a.dx, &f.dx}}};
      const auto names = ac.net->named_params();
      for (std::size_t i = 0; i < names.size(); ++i) rows.push_back({names[i].first, {&a.grads[i], &f.grads[i]}});
      std::cout << arch << ", " << semantics_name(s) << " semantics, batch " << kBatch
                << ": distance from PyTorch's autocast (max |diff| / max |PyTorch|)\n"
                << "  tensor                               autocast   float32    bit-equal (autocast)\n";
      const double torch_loss = run.out_scalar(n, p + "loss");
      std::cout << "  loss " << torch_loss << ": autocast " << a.loss << ", float32 " << f.loss << "\n";
      // The logits' bits: a float32 logit is a bfloat16 value by chance only (2^-16), autocast's are
      // PyTorch's where no tie on the way was decided the other way.
      const Tensor tl = run.out(n, p + "logits");
      EXPECT_GT(oracle::equal_elements(a.logits, tl), oracle::equal_elements(f.logits, tl)) << arch << ", " << semantics_name(s);
      EXPECT_GT(oracle::equal_elements(a.logits, tl), 0) << arch << ", " << semantics_name(s);
      for (std::size_t r = 0; r < rows.size(); ++r) {
        const std::string key = r == 0 ? "logits" : r == 1 ? "dx" : "g" + std::to_string(r - 2);
        const Tensor t = run.out(n, p + key);
        const double ea = oracle::rel_error(*rows[r].second.first, t), ef = oracle::rel_error(*rows[r].second.second, t);
        std::cout << "  " << std::left << std::setw(36) << rows[r].first << std::right << std::setw(10) << ea
                  << std::setw(11) << ef << std::setw(9) << oracle::equal_elements(*rows[r].second.first, t) << "/" << t.numel()
                  << "\n";
      }
    }
  }
}

}  // namespace
}  // namespace driftlab
