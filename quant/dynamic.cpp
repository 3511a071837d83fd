#include "quant/dynamic.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/gru_layer.h"
#include "engine/random.h"
#include "engine/layers/rnn_layer.h"

namespace driftlab {
namespace quant {

namespace {

Tensor rows_of(const Tensor& w, int64_t start, int64_t count) {
  const int64_t cols = w.numel() / w.dim(0);
  Tensor out({count, cols}, w.dtype());
  const std::size_t es = w.nbytes() / static_cast<std::size_t>(w.numel());
  std::copy_n(static_cast<const unsigned char*>(w.raw()) + es * static_cast<std::size_t>(start * cols),
              es * static_cast<std::size_t>(count * cols), static_cast<unsigned char*>(out.raw()));
  return out;
}

Tensor scale_tensor(const std::vector<float>& s) {
  Tensor t({static_cast<int64_t>(s.size())}, DType::f32);
  for (std::size_t i = 0; i < s.size(); ++i) t.data<float>()[i] = s[i];
  return t;
}

// Scales per row for rows [start, start+count) of a weight whose scale tensor is one or per row.
Tensor scale_rows(const Tensor& s, int64_t start, int64_t count) {
  return s.numel() == 1 ? s : rows_of(s.reshape({s.numel(), 1}), start, count).reshape({count});
}

void check_f32_input(const std::string& what, const Tensor& x, const Shape& per_sample) {
  check(x.dtype() == DType::f32, what, ": input is ", dtype_name(x.dtype()), ", expected float32");
  check(x.rank() == static_cast<int>(per_sample.size()) + 1 && Shape(x.shape().begin() + 1, x.shape().end()) == per_sample,
        what, ": input is ", shape_str(x.shape()), ", expected (N, ", shape_str(per_sample), ")");
}

}  // namespace

QDenseDynamicParams dynamic_params(const Policy& policy) {
  QDenseDynamicParams p;
  const bool reduced = policy.quant_dyn_range == QuantActRange::reduced;
  switch (policy.quant_dyn_act) {
    case QuantDynAct::affine_double: p.act = DynActRule::affine_double; break;
    case QuantDynAct::affine_float: p.act = DynActRule::affine_float; break;
    case QuantDynAct::symmetric_per_row: p.act = DynActRule::symmetric_per_row; break;
    case QuantDynAct::affine_per_row: p.act = DynActRule::affine_per_row; break;
  }
  if (p.act == DynActRule::affine_per_row) {
    p.qmin = reduced ? -64 : -128;
    p.qmax = reduced ? 63 : 127;
  } else if (p.act == DynActRule::symmetric_per_row) {
    p.qmax = reduced ? 63 : 127;
    p.qmin = -p.qmax;
  } else {
    p.qmin = 0;
    p.qmax = reduced ? 127 : 255;  // torch calculate_qmin_qmax / ChooseQuantizationParams: qmax / 2
  }
  p.x_op = policy.quant_act_scale_op;
  p.x_round = policy.quant_round;
  p.out_rule = policy.quant_dyn_output == QuantDynOutput::prescaled_bias ? DynOutRule::prescaled_bias
                                                                         : DynOutRule::scale_then_bias;
  return p;
}

// ---------------- QDynDenseLayer ----------------

QDynDenseLayer::QDynDenseLayer(const QDenseDynamicParams& p, QuantizedWeight w, Tensor bias, KernelBackend backend)
    : p_(p), backend_(backend) {
  check(w.q.rank() == 2, "qdense_dynamic: weight must be (out, in), got ", shape_str(w.q.shape()));
  p_.out = w.q.dim(0);
  p_.in = w.q.dim(1);
  bufs_.push_back(buffer("weight", w.q));
  bufs_.push_back(buffer("weight_scale", scale_tensor(w.scale)));
  if (bias.defined()) bufs_.push_back(buffer("bias", bias));
  refresh();
}

void QDynDenseLayer::refresh() {
  check_shape("qdense_dynamic", "weight", buf("weight"), {p_.out, p_.in});
  const Tensor& s = buf("weight_scale");
  check(s.numel() == 1 || s.numel() == p_.out, "qdense_dynamic: ", s.numel(), " weight scales for ", p_.out, " outputs");
  for (int64_t i = 0; i < s.numel(); ++i)
    check(std::isfinite(s.data<float>()[i]) && s.data<float>()[i] > 0, "qdense_dynamic: weight scale ", i, " is ",
          s.data<float>()[i]);
  p_.has_bias = bufs_.size() > 2;
  if (p_.has_bias) check_shape("qdense_dynamic", "bias", buf("bias"), {p_.out});
  p_.validate();
}

std::string QDynDenseLayer::describe() const {
  std::ostringstream os;
  os << "qdense_dynamic " << p_.out << "x" << p_.in << " int8 weights (" << (buf("weight_scale").numel() == 1 ? "per-tensor" : "per-row")
     << "), input " << dyn_act_rule_name(p_.act) << " [" << p_.qmin << "," << p_.qmax << "], output "
     << dyn_out_rule_name(p_.out_rule);
  return os.str();
}

Tensor QDynDenseLayer::forward(RunContext& ctx, const Tensor& x) {
  check_f32_input("qdense_dynamic", x, {p_.in});
  QDenseDynamicParams p = p_;
  p.n = x.dim(0);
  Tensor y({p.n, p.out}, DType::f32);
  const Tensor* b = p.has_bias ? &buf("bias") : nullptr;
  ctx.exec.pick(ctx.exec.kernels.qdense_dynamic, backend_, p, DType::f32)
      .forward(p, x, buf("weight"), buf("weight_scale"), b, y);
  return y;
}

// ---------------- QDynRnnLayer ----------------

QDynRnnLayer::QDynRnnLayer(const RnnParams& cell, int64_t steps, bool return_sequences, const QDenseDynamicParams& dyn,
                           bool whole_sequence, QuantizedWeight w_ih, QuantizedWeight w_hh, Tensor b_ih, Tensor b_hh,
                           KernelBackend backend)
    : p_(cell), steps_(steps), return_sequences_(return_sequences), whole_sequence_(whole_sequence), dyn_(dyn),
      backend_(backend) {
  check(!p_.peepholes, "lstm_dynamic: peephole connections have no dynamic int8 form");
  check(p_.two_biases == b_hh.defined(), "rnn_dynamic: the cell has ", p_.two_biases ? 2 : 1, " biases, given ",
        b_hh.defined() ? 2 : 1);
  bufs_.push_back(buffer("weight_ih", w_ih.q));
  bufs_.push_back(buffer("weight_ih_scale", scale_tensor(w_ih.scale)));
  bufs_.push_back(buffer("weight_hh", w_hh.q));
  bufs_.push_back(buffer("weight_hh_scale", scale_tensor(w_hh.scale)));
  bufs_.push_back(buffer("bias_ih", b_ih));
  if (b_hh.defined()) bufs_.push_back(buffer("bias_hh", b_hh));
  refresh();
}

void QDynRnnLayer::refresh() {
  const int64_t G = rnn_gates(p_.cell), H = p_.hidden, F = p_.input;
  const std::string k = kind();
  check_shape(k.c_str(), "weight_ih", buf("weight_ih"), {G * H, F});
  check_shape(k.c_str(), "weight_hh", buf("weight_hh"), {G * H, H});
  check_shape(k.c_str(), "bias_ih", buf("bias_ih"), {G * H});
  for (const char* s : {"weight_ih_scale", "weight_hh_scale"}) {
    const Tensor& t = buf(s);
    check(t.numel() == 1 || t.numel() == G * H, k, ": ", t.numel(), " ", s, " values for ", G * H, " rows");
    for (int64_t i = 0; i < t.numel(); ++i)
      check(std::isfinite(t.data<float>()[i]) && t.data<float>()[i] > 0, k, ": ", s, " ", i, " is ", t.data<float>()[i]);
  }
  w_ih_ = buf("weight_ih");
  s_ih_ = buf("weight_ih_scale");
  b_ih_ = buf("bias_ih");
  w_hh_ = buf("weight_hh");
  s_hh_ = buf("weight_hh_scale");
  b_hh_ = p_.two_biases ? buf("bias_hh") : Tensor();
  if (p_.two_biases) check_shape(k.c_str(), "bias_hh", b_hh_, {G * H});
  if (p_.cell == RnnCell::gru && !p_.gru_reset_after) {
    w_hh_rz_ = rows_of(w_hh_, 0, 2 * H);
    w_hh_n_ = rows_of(w_hh_, 2 * H, H);
    if (b_hh_.defined()) {
      b_hh_rz_ = rows_of(b_hh_.reshape({G * H, 1}), 0, 2 * H).reshape({2 * H});
      b_hh_n_ = rows_of(b_hh_.reshape({G * H, 1}), 2 * H, H).reshape({H});
    }
  }
  QDenseDynamicParams probe = dyn_;
  probe.in = std::max(F, H);
  probe.validate();
}

Shape QDynRnnLayer::output_shape() const {
  return return_sequences_ ? Shape{steps_, p_.hidden} : Shape{p_.hidden};
}

std::string QDynRnnLayer::describe() const {
  std::ostringstream os;
  os << kind() << " " << p_.hidden << " units, int8 weights ("
     << (s_ih_.numel() == 1 ? "per-tensor" : "a scale per row") << "), input " << dyn_act_rule_name(dyn_.act) << " ["
     << dyn_.qmin << "," << dyn_.qmax << "] " << (whole_sequence_ ? "whole sequence" : "per step") << ", output "
     << dyn_out_rule_name(dyn_.out_rule);
  return os.str();
}

Tensor QDynRnnLayer::product(RunContext& ctx, const Tensor& x, const Tensor& w, const Tensor& w_scale,
                             const Tensor* bias) const {
  QDenseDynamicParams p = dyn_;
  p.n = x.dim(0);
  p.in = x.dim(1);
  p.out = w.dim(0);
  p.has_bias = bias != nullptr;
  Tensor y({p.n, p.out}, DType::f32);
  ctx.exec.pick(ctx.exec.kernels.qdense_dynamic, backend_, p, DType::f32).forward(p, x, w, w_scale, bias, y);
  return y;
}

Tensor QDynRnnLayer::forward(RunContext& ctx, const Tensor& x) {
  const std::string k = kind();
  check_f32_input(k, x, {steps_, p_.input});
  if (ctx.step_mask.defined())
    fail(k, ": a padding mask reached the layer (token input); dynamic int8 recurrent layers do not handle masks yet");
  const int64_t N = x.dim(0), T = steps_, F = p_.input, H = p_.hidden, G = rnn_gates(p_.cell), GH = G * H;
  // The input projection, rows n*T + t (x is batch-major).
  Tensor a_in;
  if (whole_sequence_) {
    a_in = product(ctx, x.reshape({N * T, F}), w_ih_, s_ih_, &b_ih_);
  } else {
    a_in = Tensor({N * T, GH}, DType::f32);
    Tensor xt({N, F}, DType::f32);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t n = 0; n < N; ++n)
        std::copy_n(x.data<float>() + (n * T + t) * F, F, xt.data<float>() + n * F);
      const Tensor at = product(ctx, xt, w_ih_, s_ih_, &b_ih_);
      for (int64_t n = 0; n < N; ++n)
        std::copy_n(at.data<float>() + n * GH, GH, a_in.data<float>() + (n * T + t) * GH);
    }
  }
  Tensor h({N, H}, DType::f32), c({N, H}, DType::f32), rh({N, H}, DType::f32);
  Tensor out = return_sequences_ ? Tensor({N, T, H}, DType::f32) : Tensor();
  float* hs = h.data<float>();
  float* cs = c.data<float>();
  const Tensor* bhh = b_hh_.defined() ? &b_hh_ : nullptr;
  for (int64_t t = 0; t < T; ++t) {
    if (p_.cell == RnnCell::lstm) {
      const Tensor a_rec = product(ctx, h, w_hh_, s_hh_, bhh);
      // rows are independent: threads change no bits
#pragma omp parallel for schedule(static)
      for (int64_t n = 0; n < N; ++n) {
        const float* ai = a_in.data<float>() + (n * T + t) * GH;
        const float* ar = a_rec.data<float>() + n * GH;
        for (int64_t j = 0; j < H; ++j) {
          const float i = rnn_gate(p_.gate_act, ai[j] + ar[j]);
          const float f = rnn_gate(p_.gate_act, ai[H + j] + ar[H + j]);
          const float g = std::tanh(ai[2 * H + j] + ar[2 * H + j]);
          const float o = rnn_gate(p_.gate_act, ai[3 * H + j] + ar[3 * H + j]);
          float& cj = cs[n * H + j];
          cj = f * cj + i * g;
          hs[n * H + j] = o * std::tanh(cj);
        }
      }
    } else if (p_.gru_reset_after) {
      const Tensor a_rec = product(ctx, h, w_hh_, s_hh_, bhh);
      // rows are independent: threads change no bits
#pragma omp parallel for schedule(static)
      for (int64_t n = 0; n < N; ++n) {
        const float* ai = a_in.data<float>() + (n * T + t) * GH;
        const float* ar = a_rec.data<float>() + n * GH;
        for (int64_t j = 0; j < H; ++j) {
          const float r = rnn_gate(p_.gate_act, ai[j] + ar[j]);
          const float z = rnn_gate(p_.gate_act, ai[H + j] + ar[H + j]);
          const float nv = std::tanh(ai[2 * H + j] + r * ar[2 * H + j]);
          float& hj = hs[n * H + j];
          hj = p_.gru_z_keeps_old ? z * hj + (1.0f - z) * nv : (1.0f - z) * hj + z * nv;
        }
      }
    } else {  // reset before: n's product takes r*h, quantized on its own
      const Tensor a_rz = product(ctx, h, w_hh_rz_, scale_rows(s_hh_, 0, 2 * H), bhh ? &b_hh_rz_ : nullptr);
      Tensor z({N, H}, DType::f32);
      // rows are independent: threads change no bits
#pragma omp parallel for schedule(static)
      for (int64_t n = 0; n < N; ++n) {
        const float* ai = a_in.data<float>() + (n * T + t) * GH;
        const float* ar = a_rz.data<float>() + n * 2 * H;
        for (int64_t j = 0; j < H; ++j) {
          const float r = rnn_gate(p_.gate_act, ai[j] + ar[j]);
          z.data<float>()[n * H + j] = rnn_gate(p_.gate_act, ai[H + j] + ar[H + j]);
          rh.data<float>()[n * H + j] = r * hs[n * H + j];
        }
      }
      const Tensor a_n = product(ctx, rh, w_hh_n_, scale_rows(s_hh_, 2 * H, H), bhh ? &b_hh_n_ : nullptr);
      // rows are independent: threads change no bits
#pragma omp parallel for schedule(static)
      for (int64_t n = 0; n < N; ++n) {
        const float* ai = a_in.data<float>() + (n * T + t) * GH;
        for (int64_t j = 0; j < H; ++j) {
          const float nv = std::tanh(ai[2 * H + j] + a_n.data<float>()[n * H + j]);
          const float zj = z.data<float>()[n * H + j];
          float& hj = hs[n * H + j];
          hj = p_.gru_z_keeps_old ? zj * hj + (1.0f - zj) * nv : (1.0f - zj) * hj + zj * nv;
        }
      }
    }
    if (return_sequences_)
      for (int64_t n = 0; n < N; ++n) std::copy_n(hs + n * H, H, out.data<float>() + (n * T + t) * H);
  }
  return return_sequences_ ? out : h;
}

// ---------------- the model ----------------

bool needs_dynamic(Model& m) {
  for (std::size_t i = 0; i < m.net->size(); ++i)
    if (layer_as<RnnLayer>(m.net->layer(i))) return true;
  return false;
}

namespace {

// The dynamic int8 layer of each fp32 layer: one visit per kind.
class DynamicQuantizer : public LayerVisitor {
 public:
  DynamicQuantizer(Model& fp32, Model& m, const Policy& policy) : fp32_(fp32), m_(m), policy_(policy) {}
  std::string where;  // the layer in messages

  void visit(DenseLayer& d) override {
    Tensor w, b;
    for (Param* p : d.params()) (p->name == "weight" ? w : b) = p->value;
    m_.net->add(std::make_unique<QDynDenseLayer>(dyn_, quantize_weight(s_, w, per_row_, where),
                                                 b.defined() ? b.clone() : Tensor(), policy_.quant_backend));
  }
  void visit(RnnLayer& r) override {
    const Shape cur = m_.net->current_shape();
    check(r.peephole_weights() == nullptr, where, ": peephole connections have no dynamic int8 form");
    const TorchRnnWeights tw = r.torch_weights();  // canonical gate order (i,f,g,o / r,z,n), (G*H, F|H)
    if (r.cell() == RnnCell::gru && policy_.quant_dyn_gru == QuantDynLayer::float32) {  // kept: a float copy
      Rng rng(RngEngine::mt19937_u24, 0);
      auto g = std::make_unique<GruLayer>(RnnSpec{r.units(), r.return_sequences()}, cur, fp32_.policy, rng);
      g->set_torch_weights(tw);
      m_.net->add(std::move(g));
      return;
    }
    m_.net->add(std::make_unique<QDynRnnLayer>(
        r.op_params(), r.steps(), r.return_sequences(), dyn_,
        policy_.quant_dyn_input_proj == QuantDynInputProj::whole_sequence,
        rnn_weight(tw.weight_ih, rnn_gates(r.cell()), where + " weight_ih"),
        rnn_weight(tw.weight_hh, rnn_gates(r.cell()), where + " weight_hh"), tw.bias_ih,
        r.two_biases() ? tw.bias_hh : Tensor(), policy_.quant_backend));
  }
  void visit(FlattenLayer&) override {
    m_.net->add(std::make_unique<FlattenLayer>(m_.net->current_shape(), fp32_.policy));
  }
  void visit(ActivationLayer& a) override {
    if (a.op_params().kind != ActKind::relu) refuse();
    m_.net->add(std::make_unique<ActivationLayer>(ActKind::relu, m_.net->current_shape(), fp32_.policy));
  }
  void visit(Conv2dLayer&) override { refuse(); }
  void visit(Pool2dLayer&) override { refuse(); }
  void visit(BatchNormLayer&) override { refuse(); }
  void visit(DropoutLayer&) override { refuse(); }
  void visit(GlobalAvgPoolLayer&) override { refuse(); }
  void visit(EmbeddingLayer&) override { refuse(); }
  void visit(ResidualLayer&) override { refuse(); }
  void visit(GraphLayer&) override { refuse(); }
  void visit(ExternalLayer&) override { refuse(); }

  // The capability table's int8 dynamic column.
  static Support support(Kind<DenseLayer>) { return Support::all("qdyn_dense"); }
  static Support support(Kind<RnnLayer>) { return Support::some("qdyn_rnn (GRU kept float on request); no peepholes"); }
  static Support support(Kind<FlattenLayer>) { return Support::all("flatten"); }
  static Support support(Kind<ActivationLayer>) { return Support::some("relu only"); }
  static Support support(Kind<Conv2dLayer>) { return Support::none("static quantization only"); }
  static Support support(Kind<Pool2dLayer>) { return Support::none("static quantization only"); }
  static Support support(Kind<BatchNormLayer>) { return Support::none("static quantization only"); }
  static Support support(Kind<DropoutLayer>) { return Support::none("no dynamic int8 form"); }
  static Support support(Kind<GlobalAvgPoolLayer>) { return Support::none("static quantization only"); }
  static Support support(Kind<EmbeddingLayer>) { return Support::none("no dynamic int8 form"); }
  static Support support(Kind<ResidualLayer>) { return Support::none("static quantization only"); }
  static Support support(Kind<GraphLayer>) { return Support::none("graph models: not yet"); }
  static Support support(Kind<ExternalLayer>) { return Support::none("int8 layers and mirrors: quantize the fp32 model"); }

 private:
  void refuse() { fail(where, " has no dynamic int8 form (supported: dense, lstm, gru, flatten, relu)"); }
  // An LSTM/GRU weight under per_gate: each gate block of H rows quantized as its own tensor, its
  // scale repeated for the block's rows (the kernels take a scale per row).
  QuantizedWeight rnn_weight(const Tensor& w, int64_t gates, const std::string& what) const {
    if (policy_.quant_dyn_weights != QuantDynWeights::per_gate) return quantize_weight(s_, w, per_row_, what);
    const int64_t rows = w.dim(0) / gates, cols = w.dim(1);
    QuantizedWeight out;
    out.q = Tensor(w.shape(), DType::i8);
    for (int64_t g = 0; g < gates; ++g) {
      Tensor block({rows, cols}, DType::f32);
      std::copy_n(w.data<float>() + g * rows * cols, rows * cols, block.data<float>());
      const QuantizedWeight qb = quantize_weight(s_, block, false, what + " gate " + std::to_string(g));
      std::copy_n(qb.q.data<int8_t>(), rows * cols, out.q.data<int8_t>() + g * rows * cols);
      out.scale.insert(out.scale.end(), static_cast<std::size_t>(rows), qb.scale[0]);
    }
    return out;
  }

  Model& fp32_;
  Model& m_;
  const Policy& policy_;
  const QuantScheme s_ = QuantScheme::from_policy(policy_);
  const QDenseDynamicParams dyn_ = dynamic_params(policy_);
  const bool per_row_ = policy_.quant_dyn_weights == QuantDynWeights::per_channel;
};

}  // namespace

SupportColumn dynamic_support() { return support_of<DynamicQuantizer>(); }

Model quantize_dynamic(Model& fp32, const Policy& policy) {
  check(fp32.dtype() == DType::f32, "quantize: the fp32 model must be float32 (policy dtype=float64)");
  Model m;
  m.name = fp32.name;
  m.policy = policy;
  m.input_shape = fp32.input_shape;
  m.num_classes = fp32.num_classes;
  m.num_ids = fp32.num_ids;
  m.net = std::make_unique<Sequential>(fp32.input_shape);
  DynamicQuantizer q(fp32, m, policy);
  for (std::size_t i = 0; i < fp32.net->size(); ++i) {
    Layer& l = fp32.net->layer(i);
    q.where = "quantize (dynamic): layer " + std::to_string(i) + " (" + l.kind() + ")";
    l.accept(q);
  }
  return m;
}

}  // namespace quant
}  // namespace driftlab
