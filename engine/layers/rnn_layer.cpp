#include "engine/layers/rnn_layer.h"

#include <cmath>
#include <sstream>
#include <type_traits>

#include "core/eigen.h"
#include "core/ops/rnn_autocast.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/math_mode.h"
#include "engine/layers/weight_layout.h"
#include "engine/random.h"

namespace driftlab {
namespace {

// Framework block b holds canonical block perm[b]. Canonical: LSTM i,f,g,o; GRU r,z,n.
// Keras's GRU z,r,h swaps the first two; every LSTM order here is the canonical one.
std::vector<int64_t> gate_perm(RnnCell cell, GruGateOrder order) {
  if (cell == RnnCell::lstm) return {0, 1, 2, 3};
  return order == GruGateOrder::zrh ? std::vector<int64_t>{1, 0, 2} : std::vector<int64_t>{0, 1, 2};
}

// Canonical (G*u, K) weight or (G*u) bias -> the framework's: gate blocks re-ordered, and a
// weight transposed to (K, G*u) for gate_cols. And back.
Tensor canonical_to(const Tensor& w, RnnWeightLayout layout, const std::vector<int64_t>& perm) {
  Tensor t = permute_blocks(w, perm, false);
  return w.rank() == 2 && layout == RnnWeightLayout::gate_cols ? transpose2d(t) : t;
}
Tensor canonical_from(const Tensor& fw, RnnWeightLayout layout, const std::vector<int64_t>& perm) {
  Tensor t = fw.rank() == 2 && layout == RnnWeightLayout::gate_cols ? transpose2d(fw) : fw;
  return permute_blocks(t, perm, true);
}

template <typename T>
void fill_uniform(Tensor& t, double bound, Rng& rng) {
  T* d = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = rng.uniform<T>(static_cast<T>(-bound), static_cast<T>(bound));
}

// Keras Orthogonal on a (rows, cols) tensor: orthonormal rows when rows <= cols, orthonormal
// columns otherwise; from the QR of a standard Gaussian matrix (Box-Muller on the Policy's
// engine) with the signs of R's diagonal folded in, which makes it Haar-distributed.
void fill_orthogonal(Tensor& t, Rng& rng) {
  const int64_t rows = t.dim(0), cols = t.dim(1);
  const int64_t tall = std::max(rows, cols), narrow = std::min(rows, cols);
  Eigen::MatrixXd a(tall, narrow);
  for (int64_t i = 0; i < tall; ++i)
    for (int64_t j = 0; j < narrow; ++j) {
      const double u1 = 1.0 - rng.uniform_f64(), u2 = rng.uniform_f64();
      a(i, j) = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
    }
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(a);
  Eigen::MatrixXd q = qr.householderQ() * Eigen::MatrixXd::Identity(tall, narrow);
  Eigen::MatrixXd r = qr.matrixQR().topRows(narrow).triangularView<Eigen::Upper>();
  for (int64_t j = 0; j < narrow; ++j)
    if (r(j, j) < 0) q.col(j) *= -1.0;
  dispatch_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = t.data<T>();
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) d[i * cols + j] = static_cast<T>(rows >= cols ? q(i, j) : q(j, i));
  });
}

bool all_zero(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.at(i) != 0.0) return false;
  return true;
}

}  // namespace

RnnParams resolve_rnn(const Policy& policy, RnnCell cell, int64_t input, int64_t hidden) {
  RnnParams p;
  p.cell = cell;
  p.input = input;
  p.hidden = hidden;
  p.gate_act = resolve_activation(
      policy, policy.rnn_recurrent_activation == RnnGateAct::hard_sigmoid ? ActKind::hard_sigmoid : ActKind::sigmoid);
  p.two_biases = policy.rnn_num_bias == RnnNumBias::two;
  p.gru_reset_after = policy.gru_reset_after == GruReset::after;
  p.gru_z_keeps_old = policy.gru_update_convention == GruUpdate::z_keeps_old;
  p.peepholes = cell == RnnCell::lstm && policy.lstm_peepholes == LstmPeepholes::lasagne;
  p.sum_order = policy.acc_order;
  p.math = policy.math_rnn;
  p.tf32_rule = policy.tf32_rounding;
  p.autocast = autocast_format(policy);
  p.input_bias_twice = policy.rnn_input_bias_rounding == BiasRounding::twice;
  return p;
}

namespace {
// Autocast on a recurrent layer: PyTorch's CPU rule (rnn_autocast_rule=ops) on PyTorch's cell, in
// float32; each other choice refused naming its knob.
void check_rnn_autocast(const Policy& policy, const RnnParams& p) {
  if (policy.autocast == Autocast::off) return;
  const char* name = rnn_cell_name(p.cell);
  const std::string head = std::string(name) + ": autocast=" + policy.get("autocast") + " with ";
  check(policy.rnn_autocast_rule == RnnAutocastRule::ops, head, "rnn_autocast_rule=layer (the whole layer in the "
        "format, its states too: cuDNN's RNN under CUDA autocast, Keras's mixed policies) is not built; "
        "rnn_autocast_rule=ops is PyTorch's CPU autocast (docs/REDUCED_PRECISION.md, \"Recurrent layers under autocast\")");
  const char* knob = nullptr;
  const std::string math = "math_rnn=" + policy.get("math_rnn");
  switch (rnn_autocast_gap(p)) {
    case RnnAutocastGap::none: knob = policy.dtype != FloatType::float32 ? "dtype=float64" : nullptr; break;
    case RnnAutocastGap::hard_sigmoid: knob = "rnn_recurrent_activation=hard_sigmoid"; break;
    case RnnAutocastGap::one_bias: knob = "rnn_num_bias=1"; break;
    case RnnAutocastGap::peepholes: knob = "lstm_peepholes=lasagne"; break;
    case RnnAutocastGap::reset_before: knob = "gru_reset_after=before"; break;
    case RnnAutocastGap::z_takes_new: knob = "gru_update_convention=z_takes_new"; break;
    case RnnAutocastGap::math_mode: knob = math.c_str(); break;
  }
  check(knob == nullptr, head, knob, ": rnn_autocast_rule=ops emulates PyTorch's cell (sigmoid gates, two biases, "
        "GRU reset after, z keeping the old state, no peepholes) in float32 only");
}
}  // namespace

RnnLayer::RnnLayer(RnnCell cell, const RnnSpec& spec, const Shape& in, const Policy& policy, Rng& rng)
    : p_(resolve_rnn(policy, cell, in.size() == 2 ? in[1] : -1, spec.units)),
      steps_(in.size() == 2 ? in[0] : -1),
      return_sequences_(spec.return_sequences),
      layout_(policy.rnn_weight_layout),
      gru_order_(policy.gru_gate_order),
      backend_(policy.rnn_backend),
      mask_mode_(policy.rnn_mask) {
  const char* name = rnn_cell_name(cell);
  check_rnn_autocast(policy, p_);
  check(policy.math_rnn == MathMode::float32 || policy.dtype == FloatType::float32, name, ": math_rnn=",
        policy.get("math_rnn"), " rounds float32 operands: it needs dtype=float32 (the policy has dtype=float64)");
  check(in.size() == 2, name, ": input must be (steps, features) per sample, got ", shape_str(in));
  check(in[0] >= 1 && in[1] >= 1, name, ": input ", shape_str(in), " has an empty axis");
  check(spec.units >= 1, name, ": units=", spec.units, " must be >= 1");
  const DType dt = policy.dtype == FloatType::float64 ? DType::f64 : DType::f32;
  const int64_t H = p_.hidden, F = p_.input, GH = rnn_gates(cell) * H;
  auto make = [&](const char* n, Shape s, bool bias) { return Param{n, Tensor(s, dt), Tensor(s, dt), bias}; };
  w_ih_ = make("weight_ih", {GH, F}, false);
  w_hh_ = make("weight_hh", {GH, H}, false);
  b_ih_ = make("bias_ih", {GH}, true);
  if (p_.two_biases) b_hh_ = make("bias_hh", {GH}, true);

  // Draw in the framework's order and layout: kernel, recurrent kernel, then each bias
  // block by block (so Keras's unit forget bias draws nothing for the forget block).
  const std::vector<int64_t> perm = gate_perm(cell, gru_order_);
  const double inv_sqrt_h = 1.0 / std::sqrt(static_cast<double>(H));
  Tensor k = canonical_to(w_ih_.value, layout_, perm);
  dispatch_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    fill_uniform<T>(k, policy.rnn_kernel_init == RnnKernelInit::glorot_uniform
                           ? std::sqrt(6.0 / static_cast<double>(F + GH))
                           : inv_sqrt_h,
                    rng);
  });
  w_ih_.value = canonical_from(k, layout_, perm);
  Tensor rk = canonical_to(w_hh_.value, layout_, perm);
  if (policy.rnn_recurrent_init == RnnRecurrentInit::orthogonal)
    fill_orthogonal(rk, rng);
  else
    dispatch_dtype(dt, [&](auto tag) { fill_uniform<decltype(tag)>(rk, inv_sqrt_h, rng); });
  w_hh_.value = canonical_from(rk, layout_, perm);
  auto init_bias_vec = [&](Param& b, bool first) {
    Tensor fb = canonical_to(b.value, layout_, perm);
    dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      T* d = fb.data<T>();
      for (int64_t blk = 0; blk < rnn_gates(cell); ++blk) {
        const bool forget = cell == RnnCell::lstm && perm[blk] == 1;
        for (int64_t j = 0; j < H; ++j) {
          T& v = d[blk * H + j];
          if (forget && first && policy.lstm_forget_bias_init == LstmForgetBias::one)
            v = T(1);
          else if (policy.rnn_bias_init == RnnBiasInit::uniform_inv_sqrt_hidden)
            v = rng.uniform<T>(static_cast<T>(-inv_sqrt_h), static_cast<T>(inv_sqrt_h));
          else
            v = T(0);
        }
      }
    });
    b.value = canonical_from(fb, layout_, perm);
  };
  init_bias_vec(b_ih_, true);
  if (p_.two_biases) init_bias_vec(b_hh_, false);
  if (p_.peepholes) {  // Lasagne's Gate(W_cell=init.Normal(0.1)): N(0, 0.1^2), Box-Muller on the Policy's engine
    w_peep_ = make("weight_peephole", {3, H}, false);
    dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      T* d = w_peep_.value.data<T>();
      for (int64_t i = 0; i < 3 * H; ++i) {
        const double u1 = 1.0 - rng.uniform_f64(), u2 = rng.uniform_f64();
        d[i] = static_cast<T>(0.1 * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
      }
    });
  }
}

std::string RnnLayer::describe() const {
  std::ostringstream os;
  os << rnn_cell_name(p_.cell) << " " << steps_ << "x" << p_.input << "->" << p_.hidden
     << (return_sequences_ ? " (sequence)" : " (last step)") << " gates " << act_name(p_.gate_act.kind);
  if (p_.gate_act.kind == ActKind::hard_sigmoid)
    os << " clip(" << p_.gate_act.hs_slope << "x+" << p_.gate_act.hs_offset << ")";
  os << ", " << (p_.two_biases ? 2 : 1) << " bias" << (p_.two_biases ? "es" : "");
  if (p_.cell == RnnCell::gru)
    os << ", reset " << (p_.gru_reset_after ? "after" : "before") << ", h'="
       << (p_.gru_z_keeps_old ? "z*h+(1-z)*n" : "(1-z)*h+z*n");
  if (p_.peepholes) os << ", peepholes";
  if (mask_mode_ != RnnMask::none) os << ", padding " << (mask_mode_ == RnnMask::carry ? "carries" : "carries, output 0");
  os << " [" << backend_name(backend_) << "]";
  return os.str();
}

Shape RnnLayer::output_shape() const {
  if (return_sequences_) return {steps_, p_.hidden};
  return {p_.hidden};
}

Tensor RnnLayer::forward(RunContext& ctx, const Tensor& x) {
  const char* name = rnn_cell_name(p_.cell);
  check_input(name, x, {steps_, p_.input});
  check(x.dtype() == w_ih_.value.dtype(), name, ": input is ", dtype_name(x.dtype()), ", weights are ",
        dtype_name(w_ih_.value.dtype()));
  RnnParams p = p_;
  p.batch = x.dim(0);
  p.steps = steps_;
  const int64_t N = p.batch, H = p.hidden;
  std::vector<uint8_t> mask;
  if (ctx.step_mask.defined()) {
    check(ctx.step_mask.batch == N && ctx.step_mask.steps == steps_, name, ": the padding mask is (",
          ctx.step_mask.batch, ",", ctx.step_mask.steps, ") but the input ", shape_str(x.shape()));
    if (mask_mode_ != RnnMask::none) mask = ctx.step_mask.keep;
    if (!return_sequences_) ctx.step_mask = StepMask{};  // the last step carries no per-step mask
  }
  const uint8_t* mk = mask.empty() ? nullptr : mask.data();
  check(mk == nullptr || p.autocast == MathMode::float32, name, ": autocast with a padding mask (rnn_mask=",
        mask_mode_ == RnnMask::carry ? "carry" : "zero", ") is not emulated: PyTorch's packed sequences under "
        "autocast were not traced; set rnn_mask=none or autocast=off");
  Tensor h_seq = Tensor::empty({N, steps_, H}, x.dtype());
  // The workspace is kept for the backward only; inference runs without one. The previous
  // step's is freed first, so that the allocator hands its memory back (a fresh 16 MB costs a
  // first touch of every page: ~25 ms, two slow training steps instead of one, measured).
  ws_ = Tensor();
  Tensor ws = ctx.record ? Tensor::empty({rnn_workspace_size(p)}, x.dtype()) : Tensor();
  const RnnKernel& k = ctx.exec.pick(ctx.exec.kernels.rnn, backend_, p, x.dtype());
  RnnExec ex{ctx.exec.threads};
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    RnnForwardFn<T> f;
    if constexpr (std::is_same_v<T, float>) f = k.forward_f32; else f = k.forward_f64;
    f(p, ex, x.data<T>(), mk, weights<T>(), h_seq.data<T>(), ws.defined() ? ws.data<T>() : nullptr);
  });
  if (ctx.record) {
    x_ = x;
    h_seq_ = h_seq;
    ws_ = ws;
    mask_ = mask;
  } else {
    x_ = h_seq_ = Tensor();
    mask_.clear();
  }
  if (return_sequences_) return zero_masked_rows(h_seq, mask);
  Tensor y = Tensor::empty({N, H}, x.dtype());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* s = h_seq.data<T>();
    T* d = y.data<T>();
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < H; ++j) d[n * H + j] = s[(n * steps_ + steps_ - 1) * H + j];
  });
  return y;
}

Tensor RnnLayer::backward(RunContext& ctx, const Tensor& dy) {
  const char* name = rnn_cell_name(p_.cell);
  check(x_.defined(), name, ": backward without a recorded forward");
  RnnParams p = p_;
  p.batch = x_.dim(0);
  p.steps = steps_;
  const int64_t N = p.batch, H = p.hidden;
  Tensor dh_seq;
  if (return_sequences_) {
    check_shape(name, "dy", dy, {N, steps_, H});
    dh_seq = zero_masked_rows(dy, mask_);  // padded outputs are constant 0 under rnn_mask=zero
  } else {
    check_shape(name, "dy", dy, {N, H});
    dh_seq = dy;  // h_T's gradient only
    p.dh_last_step = true;
  }
  Tensor dx = ctx.need_dx ? Tensor::empty(x_.shape(), x_.dtype()) : Tensor();
  const RnnKernel& k = ctx.exec.pick(ctx.exec.kernels.rnn, backend_, p, x_.dtype());
  RnnExec ex{ctx.exec.threads};
  dispatch_dtype(x_.dtype(), [&](auto tag) {
    using T = decltype(tag);
    RnnBackwardFn<T> f;
    if constexpr (std::is_same_v<T, float>) f = k.backward_f32; else f = k.backward_f64;
    RnnGrads<T> g{w_ih_.grad.data<T>(), w_hh_.grad.data<T>(), b_ih_.grad.data<T>(),
                  p.two_biases ? b_hh_.grad.data<T>() : nullptr, p.peepholes ? w_peep_.grad.data<T>() : nullptr};
    f(p, ex, x_.data<T>(), mask_.empty() ? nullptr : mask_.data(), weights<T>(), h_seq_.data<T>(), ws_.data<T>(),
      dh_seq.data<T>(), ctx.need_dx ? dx.data<T>() : nullptr, g);
  });
  x_ = h_seq_ = ws_ = Tensor();  // the backward takes the recording (engine/layers/layer.h)
  mask_.clear();
  return dx;
}

Tensor RnnLayer::zero_masked_rows(const Tensor& seq, const std::vector<uint8_t>& mask) const {
  if (mask_mode_ != RnnMask::zero || mask.empty()) return seq;
  Tensor out = seq.clone();
  const int64_t H = p_.hidden;
  dispatch_dtype(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = out.data<T>();
    for (std::size_t r = 0; r < mask.size(); ++r)
      if (!mask[r]) std::fill(d + static_cast<int64_t>(r) * H, d + static_cast<int64_t>(r + 1) * H, T(0));
  });
  return out;
}

std::vector<Param*> RnnLayer::params() {
  std::vector<Param*> ps{&w_ih_, &w_hh_, &b_ih_};
  if (p_.two_biases) ps.push_back(&b_hh_);
  if (p_.peepholes) ps.push_back(&w_peep_);
  return ps;
}

template <typename T>
RnnWeights<T> RnnLayer::weights() const {
  return {w_ih_.value.data<T>(), w_hh_.value.data<T>(), b_ih_.value.data<T>(),
          p_.two_biases ? b_hh_.value.data<T>() : nullptr, p_.peepholes ? w_peep_.value.data<T>() : nullptr};
}

// ---- the frameworks' own layouts ----

TorchRnnWeights RnnLayer::torch_weights() const {
  const auto perm = gate_perm(p_.cell, GruGateOrder::rzn);
  TorchRnnWeights w;
  w.weight_ih = canonical_to(w_ih_.value, RnnWeightLayout::gate_rows, perm);
  w.weight_hh = canonical_to(w_hh_.value, RnnWeightLayout::gate_rows, perm);
  w.bias_ih = b_ih_.value.clone();
  w.bias_hh = p_.two_biases ? b_hh_.value.clone() : Tensor({b_ih_.value.dim(0)}, b_ih_.value.dtype());
  return w;
}

namespace {
// Two framework bias vectors into a layer: kept as they are, or summed into its one bias.
void set_biases(const char* name, const RnnParams& p, const Tensor& bi, const Tensor& bh, Param& b_ih,
                Param& b_hh) {
  const int64_t H = p.hidden;
  if (p.two_biases) {
    b_ih.value = bi.to(b_ih.value.dtype());
    b_hh.value = bh.defined() ? bh.to(b_ih.value.dtype()) : Tensor(b_ih.value.shape(), b_ih.value.dtype());
    return;
  }
  Tensor sum = bi.to(DType::f64);
  if (bh.defined()) {
    Tensor h = bh.to(DType::f64);
    if (p.cell == RnnCell::gru && p.gru_reset_after) {
      // b_hn sits inside r*(...) in the source; a one-bias reset-after GRU has no place for it.
      Tensor hn({H}, DType::f64);
      for (int64_t j = 0; j < H; ++j) hn.data<double>()[j] = h.at(2 * H + j);
      check(all_zero(hn), name, ": two biases with a non-zero recurrent n-gate bias cannot be folded into the "
            "one bias of a reset-after GRU (rnn_num_bias=1); use rnn_num_bias=2");
    }
    for (int64_t i = 0; i < sum.numel(); ++i) sum.data<double>()[i] += h.at(i);
  }
  b_ih.value = sum.to(b_ih.value.dtype());
}
}  // namespace

void RnnLayer::set_torch_weights(const TorchRnnWeights& w) {
  const char* name = rnn_cell_name(p_.cell);
  const int64_t GH = rnn_gates(p_.cell) * p_.hidden;
  check_shape(name, "weight_ih_l0", w.weight_ih, {GH, p_.input});
  check_shape(name, "weight_hh_l0", w.weight_hh, {GH, p_.hidden});
  check_shape(name, "bias_ih_l0", w.bias_ih, {GH});
  if (w.bias_hh.defined()) check_shape(name, "bias_hh_l0", w.bias_hh, {GH});
  const auto perm = gate_perm(p_.cell, GruGateOrder::rzn);
  const DType dt = w_ih_.value.dtype();
  w_ih_.value = canonical_from(w.weight_ih.to(dt), RnnWeightLayout::gate_rows, perm);
  w_hh_.value = canonical_from(w.weight_hh.to(dt), RnnWeightLayout::gate_rows, perm);
  set_biases(name, p_, w.bias_ih, w.bias_hh, b_ih_, b_hh_);
}

void RnnLayer::set_peephole_weights(const Tensor* w) {
  const char* name = rnn_cell_name(p_.cell);
  if (!p_.peepholes) {
    check(w == nullptr, name, ": the source has peepholes (lstm_peepholes=lasagne), this layer has none "
                              "(lstm_peepholes=none) to hold them");
    return;
  }
  if (!w) {
    w_peep_.value = Tensor(w_peep_.value.shape(), w_peep_.value.dtype());
    return;
  }
  check_shape(name, "weight_peephole", *w, w_peep_.value.shape());
  w_peep_.value = w->to(w_peep_.value.dtype());
}

KerasRnnWeights RnnLayer::keras_weights() const {
  const auto perm = gate_perm(p_.cell, GruGateOrder::zrh);
  KerasRnnWeights w;
  w.kernel = canonical_to(w_ih_.value, RnnWeightLayout::gate_cols, perm);
  w.recurrent_kernel = canonical_to(w_hh_.value, RnnWeightLayout::gate_cols, perm);
  Tensor bi = canonical_to(b_ih_.value, RnnWeightLayout::gate_cols, perm);
  if (!p_.two_biases) {
    w.bias = bi;
  } else {
    Tensor bh = canonical_to(b_hh_.value, RnnWeightLayout::gate_cols, perm);
    const int64_t GH = bi.numel();
    w.bias = Tensor({2, GH}, bi.dtype());
    dispatch_dtype(bi.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* d = w.bias.data<T>();
      for (int64_t i = 0; i < GH; ++i) {
        d[i] = bi.data<T>()[i];
        d[GH + i] = bh.data<T>()[i];
      }
    });
  }
  return w;
}

void RnnLayer::set_keras_weights(const KerasRnnWeights& w) {
  const char* name = rnn_cell_name(p_.cell);
  const int64_t GH = rnn_gates(p_.cell) * p_.hidden;
  check_shape(name, "kernel", w.kernel, {p_.input, GH});
  check_shape(name, "recurrent_kernel", w.recurrent_kernel, {p_.hidden, GH});
  check(w.bias.shape() == Shape{GH} || w.bias.shape() == Shape{2, GH}, name, ": bias has shape ",
        shape_str(w.bias.shape()), ", expected [", GH, "] or [2,", GH, "]");
  const auto perm = gate_perm(p_.cell, GruGateOrder::zrh);
  const DType dt = w_ih_.value.dtype();
  w_ih_.value = canonical_from(w.kernel.to(dt), RnnWeightLayout::gate_cols, perm);
  w_hh_.value = canonical_from(w.recurrent_kernel.to(dt), RnnWeightLayout::gate_cols, perm);
  Tensor b = w.bias.to(dt);
  Tensor bi = b, bh;
  if (b.rank() == 2) {
    Tensor flat = b.clone().reshape({2 * GH});
    bi = Tensor({GH}, dt);
    bh = Tensor({GH}, dt);
    dispatch_dtype(dt, [&](auto tag) {
      using T = decltype(tag);
      for (int64_t i = 0; i < GH; ++i) {
        bi.data<T>()[i] = flat.data<T>()[i];
        bh.data<T>()[i] = flat.data<T>()[GH + i];
      }
    });
    bh = canonical_from(bh, RnnWeightLayout::gate_cols, perm);
  }
  bi = canonical_from(bi, RnnWeightLayout::gate_cols, perm);
  set_biases(name, p_, bi, bh, b_ih_, b_hh_);
}

Tensor RnnLayer::export_param(const Param& p) const {
  if (&p == &w_peep_) return p.value.clone();  // (3, H): w_ci, w_cf, w_co, Lasagne's three vectors
  return canonical_to(p.value, layout_, gate_perm(p_.cell, gru_order_));
}

Tensor RnnLayer::import_param(const Param& p, const Tensor& framework) const {
  check_shape(rnn_cell_name(p_.cell), p.name.c_str(), framework, export_param(p).shape());
  if (&p == &w_peep_) return framework.to(p.value.dtype());
  Tensor c = canonical_from(framework.to(p.value.dtype()), layout_, gate_perm(p_.cell, gru_order_));
  check_shape(rnn_cell_name(p_.cell), p.name.c_str(), c, p.value.shape());
  return c;
}

}  // namespace driftlab
