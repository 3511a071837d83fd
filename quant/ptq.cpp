#include "quant/ptq.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/error.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/global_avg_pool_layer.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "engine/random.h"
#include "quant/graph_ptq.h"
#include "quant/qlayers.h"

namespace driftlab {
namespace quant {

namespace {

enum class UnitKind { conv, dense, maxpool, flatten, relu, gap, residual, graph };

// A piece of the fp32 network that becomes one int8 layer: a conv takes the BatchNorm after it
// along (folded), a conv/dense/residual the ReLU after it when the scheme fuses it.
struct Unit {
  UnitKind kind;
  std::size_t first = 0, last = 0;   // fp32 layer indices it covers
  bool relu = false;                 // a fused ReLU (conv, dense, residual add)
  std::unique_ptr<Conv2dLayer> folded;  // conv + BatchNorm folded (fp32): what calibration runs
  std::vector<Unit> inner;           // residual: the units of its main path
  std::shared_ptr<GraphPlan> graph;  // graph: its units (quant/graph_ptq.h)
  int observer = -1;                 // the activation point of its output (conv, dense, residual)
  std::string name;                  // "<path>.<kind>" of the fp32 layer whose output is observed
};

bool is_relu(ActivationLayer& a) { return a.op_params().kind == ActKind::relu; }

}  // namespace

// torch.nn.utils.fusion.fuse_conv_bn_weights (PyTorch 1.13, used by fuse_modules for eval PTQ), in
// its float32 tensor order: rsq = 1/sqrt(var + eps) (torch.rsqrt: Vectorized rsqrt is 1/sqrt),
// w' = w * (gamma * rsq) per output channel, b' = ((b - mean) * rsq) * gamma + beta (b = 0 without a
// conv bias). Returns a conv with bias holding w', b'.
std::unique_ptr<Conv2dLayer> fold_conv_bn(Conv2dLayer& conv, BatchNormLayer& bn, const Shape& in, const Policy& policy,
                                          const std::string& where) {
  const Conv2dParams& g = conv.op_params();
  check(policy.bn_running_var != BnRunningVar::lasagne_inv_std, where,
        ": bn_running_var=lasagne_inv_std keeps 1/std, not the variance: folding it is not implemented");
  Conv2dSpec spec;
  spec.out_channels = g.k;
  spec.kernel_h = g.r;
  spec.kernel_w = g.s;
  spec.stride = g.stride_h;
  spec.stride_w = g.stride_w;
  spec.dilation = g.dil_h;
  spec.dilation_w = g.dil_w;
  spec.groups = g.groups;
  spec.pad = PadMode::explicit4;
  spec.pads4[0] = g.pad_t, spec.pads4[1] = g.pad_b, spec.pads4[2] = g.pad_l, spec.pads4[3] = g.pad_r;
  spec.bias = true;
  Rng rng(policy.rng_engine, 0);
  auto f = std::make_unique<Conv2dLayer>(spec, in, policy, rng);
  Conv2dParams got = f->op_params(), want = g;
  got.n = want.n = 1;  // the batch is set per call
  check(got.str() == want.str(), where, ": folded conv resolves to ", got.str(), ", not ", want.str());
  std::vector<Param*> cp = conv.params(), bp = bn.params(), bb = bn.running_state();
  const float* w = cp[0]->value.data<float>();
  const float* cb = cp.size() > 1 ? cp[1]->value.data<float>() : nullptr;
  const float* gamma = bp[0]->value.data<float>();
  const float* beta = bp[1]->value.data<float>();
  const float* mean = bb[0]->value.data<float>();
  const float* var = bb[1]->value.data<float>();
  const float eps = static_cast<float>(bn.op_params().eps);  // a Python float added to a float32 tensor
  std::vector<Param*> fp = f->params();
  float* fw = fp[0]->value.data<float>();
  float* fb = fp[1]->value.data<float>();
  const int64_t per = cp[0]->value.numel() / g.k;
  for (int64_t k = 0; k < g.k; ++k) {
    const float rsq = 1.0f / std::sqrt(var[k] + eps);
    const float scale = gamma[k] * rsq;
    for (int64_t i = 0; i < per; ++i) fw[k * per + i] = w[k * per + i] * scale;
    fb[k] = ((cb ? cb[k] : 0.0f) - mean[k]) * rsq * gamma[k] + beta[k];
  }
  return f;
}

namespace {

std::vector<Unit> plan_units(Sequential& net, bool relu_fused, const Policy& policy, const std::string& prefix);

// Which int8 unit each fp32 layer starts: one visit per kind. A conv takes the BatchNorm after it,
// and a conv, dense or residual the ReLU after it when the scheme fuses it (advancing i).
class Planner : public LayerVisitor {
 public:
  Planner(Sequential& net, bool relu_fused, const Policy& policy, const std::string& prefix)
      : net_(net), relu_fused_(relu_fused), policy_(policy), prefix_(prefix) {}

  std::vector<Unit> plan() {
    std::vector<Unit> units;
    for (i_ = 0; i_ < net_.size(); ++i_) {
      Layer& l = net_.layer(i_);
      where_ = "quantize: layer " + prefix_ + std::to_string(i_) + " (" + l.kind() + ")";
      u_ = Unit{};
      u_.first = u_.last = i_;
      l.accept(*this);
      u_.name = prefix_ + std::to_string(u_.last) + "." + net_.layer(u_.last).kind();
      units.push_back(std::move(u_));
    }
    return units;
  }

  void visit(Conv2dLayer& c) override {
    u_.kind = UnitKind::conv;
    const Shape in = i_ == 0 ? net_.input_shape() : net_.layer(i_ - 1).output_shape();
    if (i_ + 1 < net_.size())
      if (auto* bn = layer_as<BatchNormLayer>(net_.layer(i_ + 1))) {
        u_.folded = fold_conv_bn(c, *bn, in, policy_, where_);
        u_.last = ++i_;
      }
    take_relu();
  }
  void visit(DenseLayer&) override {
    u_.kind = UnitKind::dense;
    take_relu();
  }
  void visit(Pool2dLayer& p) override {
    check(p.pool_kind() == PoolKind::max, where_, ": average pooling with a window has no int8 form yet");
    u_.kind = UnitKind::maxpool;
  }
  void visit(FlattenLayer&) override { u_.kind = UnitKind::flatten; }
  void visit(GlobalAvgPoolLayer&) override { u_.kind = UnitKind::gap; }
  void visit(ResidualLayer& r) override {
    check(r.shortcut() != Shortcut::option_b, where_, ": the option-B (1x1 conv) shortcut has no int8 form yet");
    u_.kind = UnitKind::residual;
    u_.inner = plan_units(r.main(), relu_fused_, policy_, prefix_ + std::to_string(i_) + ".residual.main.");
    take_relu();
  }
  void visit(ActivationLayer& a) override {
    if (is_relu(a)) {
      u_.kind = UnitKind::relu;
      return;
    }
    refuse();
  }
  void visit(BatchNormLayer&) override { fail(where_, ": a BatchNorm not right after a convolution cannot be folded"); }
  void visit(DropoutLayer&) override { refuse(); }
  void visit(EmbeddingLayer&) override { refuse(); }
  void visit(RnnLayer&) override { refuse(); }
  void visit(GraphLayer& g) override {
    u_.kind = UnitKind::graph;
    u_.graph = plan_graph(g, relu_fused_, policy_, prefix_ + std::to_string(i_) + ".graph.");
  }
  void visit(ExternalLayer&) override { refuse(); }

  // The capability table's int8 static column.
  static Support support(Kind<Conv2dLayer>) { return Support::all("qconv2d (grouped too), a BatchNorm after it folded"); }
  static Support support(Kind<DenseLayer>) { return Support::all("qdense"); }
  static Support support(Kind<Pool2dLayer>) { return Support::some("qmaxpool2d; max pooling only"); }
  static Support support(Kind<FlattenLayer>) { return Support::all("flatten on int8"); }
  static Support support(Kind<GlobalAvgPoolLayer>) { return Support::all("qglobal_avg_pool"); }
  static Support support(Kind<ResidualLayer>) { return Support::some("qresidual; identity or option-A shortcut"); }
  static Support support(Kind<ActivationLayer>) { return Support::some("qrelu or fused; relu only"); }
  static Support support(Kind<BatchNormLayer>) { return Support::some("folded into the conv before it only"); }
  static Support support(Kind<DropoutLayer>) { return Support::some("the identity in a graph model; no int8 form in a Sequential yet"); }
  static Support support(Kind<EmbeddingLayer>) { return Support::none("no int8 form yet"); }
  static Support support(Kind<GraphLayer>) { return Support::some("an int8 graph: conv (+bn, +relu), dense, add (+relu), pools, flatten; quant/graph_ptq.h"); }
  static Support support(Kind<RnnLayer>) { return Support::none("dynamic quantization only"); }
  static Support support(Kind<ExternalLayer>) { return Support::none("int8 layers and mirrors: quantize the fp32 model"); }

 private:
  void take_relu() {
    if (relu_fused_ && i_ + 1 < net_.size()) {
      auto* a = layer_as<ActivationLayer>(net_.layer(i_ + 1));
      if (a && is_relu(*a)) {
        u_.relu = true;
        u_.last = ++i_;
      }
    }
  }
  void refuse() {
    fail(where_, " has no int8 form yet (supported: conv2d (+batchnorm), dense, relu, max pooling, flatten, global "
                 "average pooling, residual blocks with identity or option-A shortcuts)");
  }

  Sequential& net_;
  const bool relu_fused_;
  const Policy& policy_;
  const std::string prefix_;
  std::size_t i_ = 0;
  std::string where_;
  Unit u_;
};

std::vector<Unit> plan_units(Sequential& net, bool relu_fused, const Policy& policy, const std::string& prefix) {
  return Planner(net, relu_fused, policy, prefix).plan();
}

// Assigns observer indices in network order (pre-order: a residual's inner points before its own).
// A global average pool is a point of its own when the scheme requantizes its output (ORT).
void number_points(std::vector<Unit>& units, std::vector<std::string>& names, bool gap_point) {
  for (Unit& u : units) {
    if (u.kind == UnitKind::residual) number_points(u.inner, names, gap_point);
    if (u.kind == UnitKind::graph) number_graph_points(*u.graph, names, gap_point);
    if (u.kind == UnitKind::conv || u.kind == UnitKind::dense || u.kind == UnitKind::residual ||
        (u.kind == UnitKind::gap && gap_point)) {
      u.observer = static_cast<int>(names.size());
      names.push_back(u.name);
    }
  }
}

// option A's shortcut of x (N,C,H,W) for a block of output (Cout,Ho,Wo): x[:, :, ::s, ::s] with
// `before` zero channels before it and the rest after (fill: the real 0, `fill` in x's encoding).
template <typename T>
Tensor option_a(const Tensor& x, int64_t stride, int64_t before, const Shape& out, T fill) {
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  Tensor y({n, out[0], out[1], out[2]}, x.dtype());
  T* yd = y.data<T>();
  const T* xd = x.data<T>();
  std::fill(yd, yd + y.numel(), fill);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t oh = 0; oh < out[1]; ++oh)
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          const int64_t ih = oh * stride, iw = ow * stride;
          if (ih >= h || iw >= w) continue;
          yd[((b * out[0] + ci + before) * out[1] + oh) * out[2] + ow] = xd[((b * c + ci) * h + ih) * w + iw];
        }
  return y;
}

// Runs the fp32 units on x (folded convs, fused ReLUs), observing every point.
Tensor run_fp32(std::vector<Unit>& units, Sequential& net, Tensor x, RunContext& ctx,
                std::vector<std::unique_ptr<Observer>>& obs) {
  for (Unit& u : units) {
    Layer& l = net.layer(u.first);
    Tensor y;
    if (u.kind == UnitKind::residual) {
      auto& r = static_cast<ResidualLayer&>(l);
      Tensor main = run_fp32(u.inner, r.main(), x, ctx, obs);
      Tensor s = r.shortcut() == Shortcut::identity
                     ? x
                     : option_a<float>(x, r.stride(), r.pad_before(), r.output_shape(), 0.0f);
      y = main.clone();
      float* yd = y.data<float>();
      const float* sd = s.data<float>();
      for (int64_t i = 0; i < y.numel(); ++i) yd[i] += sd[i];
    } else if (u.kind == UnitKind::graph) {
      y = run_graph_fp32(*u.graph, static_cast<GraphLayer&>(l), x, ctx, obs);
    } else if (u.folded) {
      y = u.folded->forward(ctx, x);
    } else {
      y = l.forward(ctx, x);
    }
    if (u.relu) y = net.layer(u.last).forward(ctx, y);
    if (u.observer >= 0) obs[u.observer]->observe(y);
    x = y;
  }
  return x;
}

}  // namespace

Param* param_named(Layer& l, const std::string& name) {
  for (Param* p : l.params())
    if (p->name == name) return p;
  return nullptr;
}

// A Theano-flipped kernel (K,C,R,S) rotated 180 degrees: the int8 conv is always a correlation.
Tensor unflip(const Tensor& w) {
  Tensor out(w.shape(), DType::f32);
  const int64_t k = w.dim(0), c = w.dim(1), r = w.dim(2), s = w.dim(3);
  const float* a = w.data<float>();
  float* b = out.data<float>();
  for (int64_t i = 0; i < k * c; ++i)
    for (int64_t y = 0; y < r; ++y)
      for (int64_t x = 0; x < s; ++x) b[(i * r + y) * s + x] = a[(i * r + (r - 1 - y)) * s + (s - 1 - x)];
  return out;
}

namespace {

Tensor rows(const Tensor& x, int64_t start, int64_t count) {
  Shape s = x.shape();
  s[0] = count;
  Tensor out(s, x.dtype());
  const std::size_t row = x.nbytes() / static_cast<std::size_t>(x.dim(0));
  std::copy_n(static_cast<const unsigned char*>(x.raw()) + row * start, row * count,
              static_cast<unsigned char*>(out.raw()));
  return out;
}

// Builds the int8 layers of `units` into `out`; `cur` is the scale/zero point of their input.
void convert_units(std::vector<Unit>& units, Sequential& net, const QuantScheme& s, const Policy& policy,
                   const std::vector<ActQParams>& q, Sequential& out, ActQParams& cur) {
  for (Unit& u : units) {
    Layer& l = net.layer(u.first);
    const std::string where = "quantize: " + u.name;
    const Shape in = out.current_shape();
    switch (u.kind) {
      case UnitKind::conv:
      case UnitKind::dense: {
        QLinearSpec spec;
        spec.in = cur;
        spec.out = q.at(u.observer);
        spec.relu = u.relu;
        Layer& src = u.folded ? static_cast<Layer&>(*u.folded) : l;
        Tensor w = param_named(src, "weight")->value;
        Param* b = param_named(src, "bias");
        if (u.kind == UnitKind::conv) {
          Conv2dParams g = static_cast<Conv2dLayer&>(src).op_params();
          if (g.flip) {
            w = unflip(w);
            g.flip = false;
          }
          spec.weight = quantize_weight(s, w, s.conv_per_channel, where);
          spec.bias = quantize_bias(s, cur.scale, spec.weight, b ? b->value : Tensor(), where);
          out.add(std::make_unique<QConv2dLayer>(g, s, spec, policy.quant_backend));
        } else {
          spec.weight = quantize_weight(s, w, s.dense_per_channel, where);
          spec.bias = quantize_bias(s, cur.scale, spec.weight, b ? b->value : Tensor(), where);
          out.add(std::make_unique<QDenseLayer>(w.dim(1), w.dim(0), s, spec, policy.quant_backend));
        }
        cur = spec.out;
        break;
      }
      case UnitKind::maxpool:
        out.add(std::make_unique<QMaxPool2dLayer>(static_cast<Pool2dLayer&>(l).op_params(), s.act_dtype,
                                                  policy.quant_backend));
        break;
      case UnitKind::flatten:
        out.add(std::make_unique<FlattenLayer>(in, policy));
        break;
      case UnitKind::relu:  // quant_relu=separate: max(q, zp), the input's scale and zero point kept
        out.add(std::make_unique<QReluLayer>(in, s.act_dtype, cur.zero_point));
        break;
      case UnitKind::gap:
        if (s.avg_pool_own_qparams()) {
          const ActQParams o = q.at(u.observer);
          out.add(std::make_unique<QGlobalAvgPoolLayer>(in, s.act_dtype, cur, o, s.avg_pool_rule, policy.quant_backend));
          cur = o;
        } else {
          out.add(std::make_unique<QGlobalAvgPoolLayer>(in, s.act_dtype, cur.zero_point, policy.quant_backend));
        }
        break;
      case UnitKind::graph:
        out.add(convert_graph(*u.graph, static_cast<GraphLayer&>(l), s, policy, q, cur));
        break;
      case UnitKind::residual: {
        auto& r = static_cast<ResidualLayer&>(l);
        auto main = std::make_unique<Sequential>(in);
        ActQParams m = cur;
        convert_units(u.inner, r.main(), s, policy, q, *main, m);
        QResidualSpec rs;
        rs.main_out = m;
        rs.shortcut_in = cur;
        rs.out = q.at(u.observer);
        rs.relu = u.relu;
        rs.option_a = r.shortcut() == Shortcut::option_a;
        rs.stride = r.stride();
        rs.pad_before = r.pad_before();
        out.add(std::make_unique<QResidualLayer>(std::move(main), s, rs, policy.quant_backend));
        cur = rs.out;
        break;
      }
    }
  }
}

Model convert_model(Model& fp32, const Policy& policy, std::vector<Unit>& units, const std::vector<ActQParams>& q) {
  const QuantScheme s = QuantScheme::from_policy(policy);
  Model m;
  m.name = fp32.name;
  m.graph = fp32.graph;  // a graph model's spec: the file rebuilds the fp32 graph, then its int8 form
  m.policy = policy;
  m.input_shape = fp32.input_shape;
  m.num_classes = fp32.num_classes;
  m.num_ids = fp32.num_ids;
  m.net = std::make_unique<Sequential>(fp32.input_shape);
  m.net->add(std::make_unique<QuantizeLayer>(fp32.input_shape, act_quantize_params(s, q.at(0)), policy.quant_backend));
  ActQParams cur = q[0];
  convert_units(units, *fp32.net, s, policy, q, *m.net, cur);
  m.net->add(std::make_unique<DequantizeLayer>(m.net->current_shape(), act_quantize_params(s, cur), policy.quant_backend));
  return m;
}

}  // namespace

SupportColumn ptq_support() { return support_of<Planner>(); }

namespace {
// quantize_model with every point's scale and zero point given (PtqOptions::qparams).
PtqResult with_qparams(Model& fp32, const Policy& policy, const std::vector<ActQParams>& q) {
  const QuantScheme s = QuantScheme::from_policy(policy);
  std::vector<Unit> units = plan_units(*fp32.net, s.relu_fused, fp32.policy, "");
  std::vector<std::string> names{"input"};
  number_points(units, names, s.avg_pool_own_qparams());
  check(q.size() == names.size(), "quantize: ", q.size(), " given scale/zero point pairs for the model's ", names.size(),
        " activation points");
  PtqResult result;
  for (std::size_t i = 0; i < q.size(); ++i) {
    check(std::isfinite(q[i].scale) && q[i].scale > 0, "quantize: given scale of point ", names[i], " is ", q[i].scale);
    result.points.push_back({names[i], Range{0, 0}, q[i]});
  }
  result.model = convert_model(fp32, policy, units, q);
  return result;
}
}  // namespace

PtqResult quantize_model(Model& fp32, const Policy& policy, const Tensor& calib, const PtqOptions& o) {
  check(fp32.dtype() == DType::f32, "quantize: the fp32 model must be float32 (policy dtype=",
        fp32.policy.dtype == FloatType::float64 ? "float64" : "float32", ")");
  if (!o.qparams.empty()) return with_qparams(fp32, policy, o.qparams);
  check(calib.dtype() == DType::f32 && calib.rank() >= 1 && calib.dim(0) > 0, "quantize: calibration data must be "
        "float32 with at least one sample, got ", dtype_name(calib.dtype()), " ", shape_str(calib.shape()));
  Shape per_sample(calib.shape().begin() + 1, calib.shape().end());
  check(per_sample == fp32.input_shape, "quantize: calibration samples are ", shape_str(per_sample),
        ", the model takes ", shape_str(fp32.input_shape));
  check(o.calib_batch > 0, "quantize: calibration batch must be positive");
  const QuantScheme s = QuantScheme::from_policy(policy);
  std::vector<Unit> units = plan_units(*fp32.net, s.relu_fused, fp32.policy, "");
  std::vector<std::string> names{"input"};
  number_points(units, names, s.avg_pool_own_qparams());
  std::vector<std::unique_ptr<Observer>> obs;
  for (std::size_t i = 0; i < names.size(); ++i) obs.push_back(make_observer(s.observer));

  // Calibrate: the fp32 network as the toolchain runs it while observing (BatchNorm folded, ReLU
  // fused).
  ExecContext exec;
  for (int64_t start = 0; start < calib.dim(0); start += o.calib_batch) {
    const int64_t count = std::min(o.calib_batch, calib.dim(0) - start);
    Tensor x = rows(calib, start, count);
    obs[0]->observe(x);
    RunContext ctx = RunContext::inference(exec);
    run_fp32(units, *fp32.net, x, ctx, obs);
  }

  PtqResult result;
  std::vector<ActQParams> q(obs.size());
  for (std::size_t i = 0; i < obs.size(); ++i) {
    const Range r = obs[i]->range();
    q[i] = activation_qparams(s, r, "quantize: activation " + names[i]);
    result.points.push_back({names[i], r, q[i]});
  }
  result.model = convert_model(fp32, policy, units, q);
  return result;
}

namespace {
// Keeps what it is shown (fp32_activations).
class Recorder : public Observer {
 public:
  explicit Recorder(std::vector<Tensor>* out) : out_(out) {}
  void observe(const Tensor& x) override { out_->push_back(x.clone()); }
  Range range() const override { return {0, 0}; }
  bool empty() const override { return false; }
  ObserverKind kind() const override { return ObserverKind::minmax; }

 private:
  std::vector<Tensor>* out_;
};
}  // namespace

std::vector<Tensor> fp32_activations(Model& fp32, const Policy& policy, const Tensor& x) {
  const QuantScheme s = QuantScheme::from_policy(policy);
  std::vector<Unit> units = plan_units(*fp32.net, s.relu_fused, fp32.policy, "");
  std::vector<std::string> names{"input"};
  number_points(units, names, s.avg_pool_own_qparams());
  // Observers are indexed by point; a recorder per point appends in evaluation order, so collect
  // into one slot per point.
  std::vector<std::vector<Tensor>> per(names.size());
  std::vector<std::unique_ptr<Observer>> obs;
  for (std::size_t i = 0; i < names.size(); ++i) obs.push_back(std::make_unique<Recorder>(&per[i]));
  obs[0]->observe(x);
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  run_fp32(units, *fp32.net, x, ctx, obs);
  std::vector<Tensor> out;
  for (auto& v : per) out.push_back(v.at(0));
  return out;
}

Model build_quantized(Model& fp32, const Policy& policy) {
  const QuantScheme s = QuantScheme::from_policy(policy);
  std::vector<Unit> units = plan_units(*fp32.net, s.relu_fused, fp32.policy, "");
  std::vector<std::string> names{"input"};
  number_points(units, names, s.avg_pool_own_qparams());
  return convert_model(fp32, policy, units, std::vector<ActQParams>(names.size()));
}

}  // namespace quant
}  // namespace driftlab
