// driftlab's LSTM / GRU under autocast=bfloat16 (rnn_autocast_rule=ops; the reference rnn kernel's
// rounding points, kernels/cpu/ref/rnn_ref_autocast.cpp) against nn.LSTM / nn.GRU under PyTorch
// 1.13's torch.autocast('cpu', torch.bfloat16) (tests/oracles/torch/autocast_oracle.py, kind
// rnn_autocast), both input layouts: batch_first=True is rnn_input_bias_rounding=twice, a time-major
// input once.
//
// What is compared, and why that way:
// - Each step alone, given PyTorch's state before it (h_{t-1}, c_{t-1}: the kernel's initial state),
//   so that no earlier difference carries over. A sum of bfloat16 products is a float32 sum in an
//   order neither library documents, rounded once: its result must be PyTorch's bits except where
//   the exact sum of the rounded operands (float64) lies within Higham's float32 accumulation bound
//   of a midpoint between two bfloat16 neighbours (a tie at float32 precision), and there the two
//   results must be those neighbours. A gate activation is a float32 sigmoid / tanh (each library's
//   own, within a few ulps) rounded once: the same, with the float64 activation of the same input
//   within 8 float32 ulps of the midpoint. The exact ops after (bfloat16 adds and products, the cell
//   state's float32 update, the GRU's new state) must give PyTorch's bits where their inputs did;
//   the LSTM's h = o * tanh(c) within 4 float32 ulps (two tanh implementations, each within 2 ulps,
//   and one rounding each). Whatever a tie changed is not compared further in that step.
// - The same steps with the other input-bias rule must fail that comparison: the test tells the two
//   layouts' roundings apart.
// - Whole sequences and the backward (y, dx, every weight and bias gradient, through the layer as a
//   model runs it): a tie decided the other way moves one value by one bfloat16 step and the steps
//   after carry it, so these are compared as distances from PyTorch's values, against the float32
//   layer's distance from the same values: autocast's must be the smaller, with more bits equal.
// - Which GEMMs PyTorch 1.13 sums in float32 (measured here: a bfloat16 mm of ones, 1024 terms):
//   oneDNN's, used where the CPU has AVX-512 BW, VL and DQ (mkldnn_bf16_device_check) and m*k*n >
//   4096; otherwise ATen's own gemm, which sums x W^T (every product of the forward) in float32 too
//   but a plain or a^T b product (the backward's dgates W_hh, dgates^T h, dgates^T x) in bfloat16,
//   one rounding per term. Every GEMM here has m*k*n > 4096; the gradients are asserted only on a
//   CPU where oneDNN runs them, printed elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/ops/reduced_precision.h"
#include "core/ops/rnn.h"
#include "engine/layers/gru_layer.h"
#include "engine/layers/lstm_layer.h"
#include "engine/random.h"
#include "kernels/cpu/ref/ref.h"
#include "tests/oracles/oracle_util.h"
#include "tests/ops/reduced_precision_util.h"

namespace driftlab {
namespace {

using oracle::CaseDir;

constexpr int64_t kN = 5, kT = 7, kF = 28, kH = 32;

struct RnnCase {
  std::string name, cell;
  bool batch_first;
};

std::vector<RnnCase> cases() {
  std::vector<RnnCase> out;
  for (const char* cell : {"lstm", "gru"})
    for (const bool bf : {true, false})
      for (int seed = 0; seed < 3; ++seed)
        out.push_back({std::string(cell) + (bf ? "_batch_first_" : "_time_major_") + std::to_string(seed), cell, bf});
  return out;
}

void fill(CaseDir& r) {
  uint64_t seed = 300;
  const double k = 1.0 / std::sqrt(static_cast<double>(kH));  // nn.LSTM's own init range
  for (const RnnCase& c : cases()) {
    const int64_t gh = (c.cell == "lstm" ? 4 : 3) * kH;
    r.input(c.name, "w_ih", random_tensor({gh, kF}, DType::f32, ++seed, -k, k));
    r.input(c.name, "w_hh", random_tensor({gh, kH}, DType::f32, ++seed, -k, k));
    r.input(c.name, "b_ih", random_tensor({gh}, DType::f32, ++seed, -k, k));
    r.input(c.name, "b_hh", random_tensor({gh}, DType::f32, ++seed, -k, k));
    r.input(c.name, "x", random_tensor({kN, kT, kF}, DType::f32, ++seed, -2.0, 2.0));
    r.input(c.name, "dy", random_tensor({kN, kT, kH}, DType::f32, ++seed, -1.0, 1.0));
    r.add_case({{"name", c.name}, {"kind", "rnn_autocast"}, {"cell", c.cell}, {"batch_first", c.batch_first ? 1 : 0}});
  }
}

bool oneDnnRunsTorchsBf16Matmuls() {
  return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

const CaseDir& rnn_autocast_run() {
  static const CaseDir run(oracle::torch_oracle("autocast_oracle.py"), "torch_rnn_autocast", fill);
  return run;
}

double bf(double v) { return round_to_bf16(static_cast<float>(v)); }

// The two bfloat16 values around v (equal when v is one).
std::pair<double, double> bracket(double v) {
  const double r = bf(v);
  if (r == v) return {r, r};
  const uint32_t bits = float_bits(static_cast<float>(r));
  const double other = bits_float(std::abs(r) > std::abs(v) ? bits - 0x10000u : bits + 0x10000u);  // one step in
  return {std::min(r, other), std::max(r, other)};
}

// One step's comparison: how many values were compared, how many differed as ties, and the
// differences no tie explains (each a message).
struct StepCheck {
  int64_t compared = 0, ties = 0;
  std::vector<std::string> unexplained;
  void bad(const std::string& what, int64_t t, int64_t n, int64_t j, double own, double torch, double exact) {
    std::ostringstream os;
    os << std::setprecision(9) << what << " step " << t << " sample " << n << " element " << j << ": driftlab " << own
       << ", PyTorch " << torch << ", exact " << exact;
    unexplained.push_back(os.str());
  }
};

// The per-step comparison of one case (see the file's comment), driftlab's step computed with
// input_bias_twice as given.
StepCheck check_steps(const CaseDir& run, const RnnCase& c, bool input_bias_twice) {
  const std::string& n = c.name;
  const bool lstm = c.cell == "lstm";
  const int64_t G = lstm ? 4 : 3, GH = G * kH;
  const Tensor w_ih = run.in(n, "w_ih"), w_hh = run.in(n, "w_hh"), b_ih = run.in(n, "b_ih"), b_hh = run.in(n, "b_hh");
  const Tensor x = run.in(n, "x");
  const Tensor t_xs = run.out(n, "xs"), t_hr = run.out(n, "hr"), t_a = run.out(n, "a"), t_act = run.out(n, "act"),
               t_h = run.out(n, "h");
  const Tensor t_c = lstm ? run.out(n, "c") : Tensor();
  RnnParams p;
  p.cell = lstm ? RnnCell::lstm : RnnCell::gru;
  p.batch = kN;
  p.steps = 1;
  p.input = kF;
  p.hidden = kH;
  p.autocast = MathMode::bfloat16;
  p.input_bias_twice = input_bias_twice;
  p.initial_state = true;
  StepCheck sc;
  const double u = std::ldexp(1.0, -24), tiny = std::ldexp(1.0, -126);
  std::vector<float> xt(kN * kF), h0(kN * kH), c0(kN * kH), h(kN * kH), ws(static_cast<std::size_t>(rnn_workspace_size(p)));
  for (int64_t t = 0; t < kT; ++t) {
    for (int64_t b = 0; b < kN; ++b) {
      for (int64_t f = 0; f < kF; ++f) xt[b * kF + f] = x.data<float>()[(b * kT + t) * kF + f];
      for (int64_t j = 0; j < kH; ++j) {
        h0[b * kH + j] = t > 0 ? t_h.data<float>()[(b * kT + t - 1) * kH + j] : 0.0f;
        c0[b * kH + j] = t > 0 && lstm ? t_c.data<float>()[(b * kT + t - 1) * kH + j] : 0.0f;
      }
    }
    RnnWeights<float> w{w_ih.data<float>(), w_hh.data<float>(), b_ih.data<float>(), b_hh.data<float>(), nullptr,
                        h0.data(), c0.data()};
    rnn_forward_ref<float>(p, RnnExec{}, xt.data(), nullptr, w, h.data(), ws.data());
    const float* pre = ws.data();
    const float* act = pre + kN * GH;
    const float* aux = act + kN * GH;
    const float* xin = aux + kN * kH;
    const float* rec = xin + kN * GH;
    for (int64_t b = 0; b < kN; ++b) {
      const int64_t trow = b * kT + t;
      std::vector<bool> taint(static_cast<std::size_t>(GH), false);  // a tie changed this gate's inputs
      // The two products: each a float32 sum of exact terms, one rounding (twice: a second after b_ih).
      for (int64_t g = 0; g < GH; ++g) {
        double ex_in = 0, abs_in = 0, ex_rec = 0, abs_rec = 0;
        for (int64_t f = 0; f < kF; ++f) {
          const double term = bf(xt[b * kF + f]) * bf(w_ih.at(g * kF + f));
          ex_in += term;
          abs_in += std::abs(term);
        }
        for (int64_t k = 0; k < kH; ++k) {
          const double term = bf(h0[b * kH + k]) * bf(w_hh.at(g * kH + k));
          ex_rec += term;
          abs_rec += std::abs(term);
        }
        const double bi = bf(b_ih.at(g)), bh = bf(b_hh.at(g));
        ex_rec += bh;
        abs_rec += std::abs(bh);
        sc.compared += 2;
        const double o_in = xin[b * GH + g], t_in = t_xs.at(trow * GH + g);
        if (o_in != t_in) {
          bool tie;
          if (input_bias_twice) {  // the product's rounding a tie, and each neighbour + b_ih gives one side
            const double bound = rp_test::sum_bound_gamma(kF) * abs_in + kF * tiny;
            const auto [lo, hi] = bracket(ex_in);
            const double a1 = bf(static_cast<float>(lo) + static_cast<float>(bi)),
                         a2 = bf(static_cast<float>(hi) + static_cast<float>(bi));
            tie = std::abs(ex_in - (lo + hi) / 2) <= bound &&
                  ((a1 == o_in && a2 == t_in) || (a1 == t_in && a2 == o_in));
          } else {
            const double bound = rp_test::sum_bound_gamma(kF + 1) * (abs_in + std::abs(bi)) + kF * tiny;
            tie = rp_test::bf16_neighbours(o_in, t_in) && std::abs(ex_in + bi - (o_in + t_in) / 2) <= bound;
          }
          if (tie) ++sc.ties; else sc.bad("input projection", t, b, g, o_in, t_in, ex_in);
          taint[g] = true;
        }
        const double o_rec = rec[b * GH + g], t_rec = t_hr.at(trow * GH + g);
        if (o_rec != t_rec) {
          const double bound = rp_test::sum_bound_gamma(kH + 1) * abs_rec + kH * tiny;
          const bool tie = rp_test::bf16_neighbours(o_rec, t_rec) && std::abs(ex_rec - (o_rec + t_rec) / 2) <= bound;
          if (tie) ++sc.ties; else sc.bad("recurrent product", t, b, g, o_rec, t_rec, ex_rec);
          taint[g] = true;
        }
      }
      // Sums, then activations: exact ops where the inputs agree, activations equal or a tie.
      auto check_act = [&](int64_t g) {
        if (taint[g]) return;
        sc.compared += 2;
        const double o_a = pre[b * GH + g], t_a_v = t_a.at(trow * GH + g);
        if (o_a != t_a_v) {
          sc.bad("gate sum (exact given its inputs)", t, b, g, o_a, t_a_v, o_a);
          taint[g] = true;
          return;
        }
        const bool is_tanh = g / kH == 2;  // LSTM g, GRU n
        const double ex = is_tanh ? std::tanh(o_a) : 1.0 / (1.0 + std::exp(-o_a));
        const double o_y = act[b * GH + g], t_y = t_act.at(trow * GH + g);
        if (o_y != t_y) {
          // Each library's float32 sigmoid / tanh is within a few ulps (glibc, Sleef u10): 8 ulps.
          const bool tie = rp_test::bf16_neighbours(o_y, t_y) && std::abs(ex - (o_y + t_y) / 2) <= 8 * u * std::abs(ex);
          if (tie) ++sc.ties; else sc.bad("gate activation", t, b, g, o_y, t_y, ex);
          taint[g] = true;
        }
      };
      if (lstm) {
        for (int64_t g = 0; g < GH; ++g) check_act(g);
      } else {
        for (int64_t g = 0; g < 2 * kH; ++g) check_act(g);
        for (int64_t j = 0; j < kH; ++j)  // n's argument uses r: a tie there reaches it
          if (taint[j]) taint[2 * kH + j] = true;
        for (int64_t j = 0; j < kH; ++j) check_act(2 * kH + j);
      }
      // The new state.
      for (int64_t j = 0; j < kH; ++j) {
        const double o_h = h[b * kH + j], t_hv = t_h.at(trow * kH + j);
        if (lstm) {
          if (taint[j] || taint[kH + j] || taint[2 * kH + j]) continue;
          ++sc.compared;
          const double o_c = aux[b * kH + j], t_cv = t_c.at(trow * kH + j);
          if (o_c != t_cv) {
            sc.bad("cell state (exact given its inputs)", t, b, j, o_c, t_cv, o_c);
            continue;
          }
          if (taint[3 * kH + j]) continue;
          ++sc.compared;
          // h = o * tanh(c): two float32 tanh within 2 ulps each, one rounding each: 4 ulps.
          if (std::abs(o_h - t_hv) > 4 * 2 * u * std::abs(t_hv)) sc.bad("h = o tanh(c)", t, b, j, o_h, t_hv, t_hv);
        } else {
          if (taint[kH + j] || taint[2 * kH + j]) continue;
          ++sc.compared;
          if (o_h != t_hv) sc.bad("h (exact given z, n)", t, b, j, o_h, t_hv, t_hv);
        }
      }
    }
  }
  return sc;
}

TEST(TorchRnnAutocast, EachStepGivenPyTorchsStateAsCpuBfloat16Autocast) {
  ORACLE_GROUP(run, rnn_autocast_run);
  std::cout << "nn.LSTM / nn.GRU (F " << kF << ", H " << kH << ", N " << kN << ", T " << kT
            << ") under torch.autocast('cpu', bfloat16), each step given PyTorch's state:\n"
            << "  case                      compared  ties  | other input-bias rule: unexplained\n";
  for (const RnnCase& c : cases()) {
    const StepCheck own = check_steps(run, c, c.batch_first);
    for (const std::string& m : own.unexplained) ADD_FAILURE() << c.name << ": " << m;
    const StepCheck other = check_steps(run, c, !c.batch_first);
    EXPECT_GT(other.unexplained.size(), 0u) << c.name << ": the other input-bias rule gives PyTorch's steps too";
    std::cout << "  " << std::left << std::setw(26) << c.name << std::right << std::setw(8) << own.compared
              << std::setw(6) << own.ties << "  | " << other.unexplained.size() << "\n";
  }
}

struct LayerRun {
  Tensor y, dx;
  std::vector<Tensor> grads;  // w_ih, w_hh, b_ih, b_hh
};

LayerRun run_layer(const CaseDir& run, const RnnCase& c, const std::string& spec) {
  const Policy p = Policy::parse(spec);
  Rng rng(p.rng_engine, 1);
  RnnSpec s;
  s.units = kH;
  s.return_sequences = true;
  std::unique_ptr<RnnLayer> l;
  if (c.cell == "lstm")
    l = std::make_unique<LstmLayer>(s, Shape{kT, kF}, p, rng);
  else
    l = std::make_unique<GruLayer>(s, Shape{kT, kF}, p, rng);
  l->set_torch_weights({run.in(c.name, "w_ih"), run.in(c.name, "w_hh"), run.in(c.name, "b_ih"), run.in(c.name, "b_hh")});
  ExecContext exec;
  RunContext ctx = RunContext::recorded(exec, Semantics::train);
  LayerRun r;
  r.y = l->forward(ctx, run.in(c.name, "x"));
  for (Param* q : l->params()) q->grad = Tensor(q->value.shape(), q->value.dtype());
  r.dx = l->backward(ctx, run.in(c.name, "dy"));
  for (Param* q : l->params()) r.grads.push_back(q->grad.clone());
  return r;
}

TEST(TorchRnnAutocast, WholeSequencesAndGradientsAsCpuBfloat16Autocast) {
  ORACLE_GROUP(run, rnn_autocast_run);
  const bool grads_asserted = oneDnnRunsTorchsBf16Matmuls();
  std::cout << "whole sequences: distance from PyTorch's autocast (max |diff| / max |PyTorch|), bits equal"
            << (grads_asserted ? "" : " (gradients not asserted: PyTorch sums their GEMMs in bfloat16 on this CPU)")
            << "\n"
            << "  case                      tensor  autocast    float32     equal (autocast / float32)\n";
  for (const RnnCase& c : cases()) {
    const std::string rule = std::string(",rnn_input_bias_rounding=") + (c.batch_first ? "twice" : "once");
    const LayerRun a = run_layer(run, c, "torch,autocast=bfloat16" + rule), f = run_layer(run, c, "torch");
    const std::vector<std::string> keys{"y", "dx", "g.w_ih", "g.w_hh", "g.b_ih", "g.b_hh"};
    for (std::size_t k = 0; k < keys.size(); ++k) {
      const Tensor& ta = k == 0 ? a.y : k == 1 ? a.dx : a.grads[k - 2];
      const Tensor& tf = k == 0 ? f.y : k == 1 ? f.dx : f.grads[k - 2];
      const Tensor t = run.out(c.name, keys[k]);
      ASSERT_EQ(ta.numel(), t.numel()) << c.name << " " << keys[k];
      const double ea = oracle::rel_error(ta, t), ef = oracle::rel_error(tf, t);
      const int64_t qa = oracle::equal_elements(ta, t), qf = oracle::equal_elements(tf, t);
      if (k == 0 || grads_asserted) {
        EXPECT_LT(ea, ef) << c.name << " " << keys[k] << ": the float32 layer is as close to PyTorch's autocast";
        EXPECT_GT(qa, qf) << c.name << " " << keys[k];
      }
      std::cout << "  " << std::left << std::setw(26) << c.name << std::setw(7) << keys[k] << std::right
                << std::setw(10) << std::setprecision(3) << ea << std::setw(11) << ef << std::setw(8) << qa << " / "
                << qf << " of " << t.numel() << "\n";
    }
  }
}

}  // namespace
}  // namespace driftlab
