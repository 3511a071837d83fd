#include "quant/ste.h"

#include <sstream>

#include "engine/layers/all.h"
#include "engine/random.h"
#include "engine/train/cpu_runner.h"
#include "quant/dynamic.h"
#include "quant/qlayers.h"

namespace driftlab {
namespace quant {

// ---------------------------------------------------------------- FakeQuantLayer

FakeQuantLayer::FakeQuantLayer(const Shape& in, const QuantizeParams& p) : shape_(in), p_(p) {
  p_.validate("fake_quant");
  check(p_.scale.size() == 1 && p_.zero_point.size() == 1, "fake_quant: per-tensor parameters expected, got ",
        p_.scale.size(), " scales");
}

std::string FakeQuantLayer::describe() const {
  std::ostringstream os;
  os << "fake_quant scale " << p_.scale[0] << " zero point " << p_.zero_point[0] << " [" << p_.qmin << ","
     << p_.qmax << "] (straight-through gradient inside the range)";
  return os.str();
}

Tensor FakeQuantLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input("fake_quant", x, shape_);
  check(x.dtype() == DType::f32, "fake_quant: float32 input expected, got ", dtype_name(x.dtype()));
  const float s = p_.scale[0], inv = 1.0f / s;
  const int32_t zp = p_.zero_point[0];
  // The unclamped value round(x op s) lies in [qmin - zp, qmax - zp] exactly when quantize_one's
  // clamp leaves it alone: the straight-through mask.
  const float flo = static_cast<float>(p_.qmin) - static_cast<float>(zp);
  const float fhi = static_cast<float>(p_.qmax) - static_cast<float>(zp);
  Tensor y = Tensor::empty(x.shape(), DType::f32);
  const float* xd = x.data<float>();
  float* yd = y.data<float>();
  const int64_t n = x.numel();
  if (ctx.record) mask_.assign(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t q = quantize_one(xd[i], s, inv, zp, p_.op, p_.round, p_.qmin, p_.qmax);
    yd[i] = dequantize_one(q, zp, s);
    if (ctx.record) {
      const float v = round_with(p_.op == ScaleOp::divide ? xd[i] / s : xd[i] * inv, p_.round);
      mask_[static_cast<size_t>(i)] = v >= flo && v <= fhi;  // NaN: false
    }
  }
  if (!ctx.record) mask_.clear();
  return y;
}

Tensor FakeQuantLayer::backward(RunContext&, const Tensor& dy) {
  check(static_cast<int64_t>(mask_.size()) == dy.numel() && dy.numel() > 0,
        "fake_quant: backward without a recorded forward of this batch");
  Tensor dx = Tensor::empty(dy.shape(), DType::f32);
  const float* g = dy.data<float>();
  float* d = dx.data<float>();
  for (int64_t i = 0; i < dy.numel(); ++i) d[i] = mask_[static_cast<size_t>(i)] ? g[i] : 0.0f;
  mask_.clear();
  return dx;
}

// ---------------------------------------------------------------- the fake-quantized graph

namespace {

// w = s_w[k] * w_q (float32 products: dequantize_one), b = bias * s_in * s_w[k].
void set_linear(Param& weight, Param* bias, const QLinearSpec& spec, int64_t out) {
  const Tensor& q = spec.weight.q;
  check(q.dtype() == DType::i8 && q.numel() == weight.value.numel(), "fake_quant_model: weight of ", q.numel(),
        " int8 values for a float weight of ", weight.value.numel());
  const int64_t per = q.numel() / out;
  const int8_t* wq = q.data<int8_t>();
  float* w = weight.value.data<float>();
  for (int64_t k = 0; k < out; ++k)
    for (int64_t i = 0; i < per; ++i) w[k * per + i] = dequantize_one(wq[k * per + i], 0, spec.weight.scale_of(k));
  if (!bias) return;
  float* b = bias->value.data<float>();
  for (int64_t k = 0; k < out; ++k) {
    double acc_units = 0;  // the bias in accumulator units (int32 or the requantization's float)
    if (spec.bias.defined())
      acc_units = spec.bias.dtype() == DType::i32 ? spec.bias.data<int32_t>()[k] : spec.bias.data<float>()[k];
    b[k] = static_cast<float>(acc_units * static_cast<double>(spec.in.scale) *
                              static_cast<double>(spec.weight.scale_of(k)));
  }
}

class Mirror : public LayerVisitor, public QuantLayerVisitor {
 public:
  Policy policy;  // the int8 model's, float32, no flip
  Rng rng{RngEngine::mt19937_u24, 1};  // the float layers' initial weights, all overwritten

  QuantizeParams cur;  // the grid of the last fake_quant added (an average pool rounds onto it)

  void add_fake_quant(Sequential& out, const QuantizeParams& p) {
    out.add(std::make_unique<FakeQuantLayer>(out.current_shape(), p));
    cur = p;
  }
  void add_output(Sequential& out, const QuantScheme& s, ActQParams q, bool relu) {
    if (relu) out.add(std::make_unique<ActivationLayer>(ActKind::relu, out.current_shape(), policy));
    add_fake_quant(out, act_quantize_params(s, q));
  }

  // Adds l's float mirror to out: one visit per kind. path names l in messages.
  void layer(Layer& l, const std::string& path, Sequential& out) {
    const std::string saved_path = path_;
    Sequential* saved_out = out_;
    path_ = path;
    out_ = &out;
    l.accept(static_cast<LayerVisitor&>(*this));
    path_ = saved_path;
    out_ = saved_out;
  }

  void visit(QuantizeLayer& q) override { add_fake_quant(*out_, q.op_params()); }
  void visit(DequantizeLayer&) override {}  // the last fake_quant's output is already the dequantized value
  void visit(QConv2dLayer& c) override {
    const std::string& path = path_;
    Sequential& out = *out_;
    const Shape in = out.current_shape();
    const Conv2dParams& g = c.op_params().g;
    check(g.stride_h == g.stride_w && g.dil_h == g.dil_w && g.pad_t == g.pad_b && g.pad_l == g.pad_r,
          "fake_quant_model: layer ", path, " (qconv2d) has asymmetric padding, stride or dilation (",
          g.str(), "), which the float mirror does not build yet");
    Conv2dSpec cs;
    cs.out_channels = g.k, cs.kernel_h = g.r, cs.kernel_w = g.s, cs.stride = g.stride_h, cs.dilation = g.dil_h;
    cs.pad = PadMode::explicit_pad, cs.pad_h = g.pad_t, cs.pad_w = g.pad_l, cs.bias = true;
    auto conv = std::make_unique<Conv2dLayer>(cs, in, policy, rng);
    Conv2dParams want = g, got = conv->op_params();
    want.n = got.n = 1;
    check(got.str() == want.str(), "fake_quant_model: layer ", path, " (qconv2d ", want.str(),
          ") mirrored as ", got.str());
    const QLinearSpec spec = c.spec();
    set_linear(conv->weight(), &conv->bias(), spec, g.k);
    out.add(std::move(conv));
    add_output(out, c.scheme(), spec.out, c.fused_relu());
  }
  void visit(QDenseLayer& d) override {
    Sequential& out = *out_;
    const Shape in = out.current_shape();
    const QDenseParams& p = d.op_params();
    auto dense = std::make_unique<DenseLayer>(p.out, in, policy, rng, true);
    auto ps = dense->params();
    const QLinearSpec spec = d.spec();
    set_linear(*ps[0], ps[1], spec, p.out);
    out.add(std::move(dense));
    add_output(out, d.scheme(), spec.out, d.fused_relu());
  }
  void visit(QMaxPool2dLayer& m) override {
    const std::string& path = path_;
    Sequential& out = *out_;
    const Shape in = out.current_shape();
    const Pool2dParams& g = m.op_params().g;
    check(g.kh == g.kw && g.stride_h == g.stride_w, "fake_quant_model: layer ", path,
          " (qmaxpool2d) has a non-square window or stride");
    Pool2dSpec ps;
    ps.kind = PoolKind::max, ps.window = g.kh, ps.stride = g.stride_h;
    auto pool = std::make_unique<Pool2dLayer>(ps, in, policy);
    const Pool2dParams& got = pool->op_params();
    check(got.out_h() == g.out_h() && got.out_w() == g.out_w() && got.pad_t == g.pad_t && got.pad_l == g.pad_l,
          "fake_quant_model: layer ", path, " (qmaxpool2d) mirrored with another geometry");
    out.add(std::move(pool));
  }
  void visit(FlattenLayer&) override { out_->add(std::make_unique<FlattenLayer>(out_->current_shape(), policy)); }
  void visit(QReluLayer&) override {
    out_->add(std::make_unique<ActivationLayer>(ActKind::relu, out_->current_shape(), policy));
  }
  void visit(QGlobalAvgPoolLayer& g) override {
    // the mean, then the int8 pool's rounding: onto the input's grid (PyTorch's rule) or the
    // pool's own (ONNX Runtime's)
    out_->add(std::make_unique<GlobalAvgPoolLayer>(out_->current_shape(), policy));
    QuantizeParams p = cur;
    if (g.own_qparams()) p.scale = {g.op_params().out_scale}, p.zero_point = {g.op_params().out_zero_point};
    add_fake_quant(*out_, p);
  }
  void visit(QResidualLayer& r) override {
    // PyTorch QAT's FloatFunctional add_relu: main(x) + shortcut(x), relu, one fake_quant
    const std::string path = path_;
    Sequential& out = *out_;
    const Shape in = out.current_shape();
    const QResidualSpec& sp = r.spec();
    auto main = std::make_unique<Sequential>(in);
    for (std::size_t i = 0; i < r.main().size(); ++i)
      layer(r.main().layer(i), path + ".qresidual.main." + std::to_string(i), *main);
    auto res = std::make_unique<ResidualLayer>(std::move(main), sp.option_a ? Shortcut::option_a : Shortcut::identity,
                                               policy, rng);
    check(!sp.option_a || (res->stride() == sp.stride && res->pad_before() == sp.pad_before),
          "fake_quant_model: layer ", path, " (qresidual): option A mirrored with stride ", res->stride(),
          " and ", res->pad_before(), " channels before, the int8 block has ", sp.stride, " and ", sp.pad_before);
    out.add(std::move(res));
    add_output(out, r.scheme(), sp.out, sp.relu);
  }
  void visit(ExternalLayer& l) override { visit_quant(l, *this, "fake_quant_model"); }
  // Every other kind: refused by name.
  void visit(Conv2dLayer& l) override { refuse(l); }
  void visit(Pool2dLayer& l) override { refuse(l); }
  void visit(DenseLayer& l) override { refuse(l); }
  void visit(ActivationLayer& l) override { refuse(l); }
  void visit(BatchNormLayer& l) override { refuse(l); }
  void visit(DropoutLayer& l) override { refuse(l); }
  void visit(GlobalAvgPoolLayer& l) override { refuse(l); }
  void visit(EmbeddingLayer& l) override { refuse(l); }
  void visit(RnnLayer& l) override { refuse(l); }
  void visit(ResidualLayer& l) override { refuse(l); }
  void visit(GraphLayer& l) override { refuse(l); }
  void visit(QDynDenseLayer& l) override { refuse(l); }
  void visit(QDynRnnLayer& l) override { refuse(l); }
  void visit(QAddLayer& l) override { refuse(l); }
  void visit(FakeQuantLayer& l) override { refuse(l); }
  void refuse(Layer& l) {
    fail("fake_quant_model: layer ", path_, " (", l.kind(), ") has no fake-quantized float mirror yet (the STE "
         "gradient covers quantize, qconv2d, qdense, qmaxpool2d, flatten, qrelu, qglobal_avg_pool, qresidual, "
         "dequantize)");
  }

  // The capability table's ste column: which layers of an int8 model have a float mirror.
  static Support support(Kind<QuantizeLayer>) { return Support::all("fake_quant"); }
  static Support support(Kind<DequantizeLayer>) { return Support::all("nothing (the value is already float)"); }
  static Support support(Kind<QConv2dLayer>) { return Support::some("conv2d + fake_quant; symmetric pads, stride"); }
  static Support support(Kind<QDenseLayer>) { return Support::all("dense + fake_quant"); }
  static Support support(Kind<QMaxPool2dLayer>) { return Support::some("maxpool2d; square window and stride"); }
  static Support support(Kind<QGlobalAvgPoolLayer>) { return Support::all("global_avg_pool + fake_quant"); }
  static Support support(Kind<QResidualLayer>) { return Support::some("residual + fake_quant; identity or option A"); }
  static Support support(Kind<QReluLayer>) { return Support::all("relu"); }
  static Support support(Kind<QDynDenseLayer>) { return Support::none("dynamic int8: no mirror yet"); }
  static Support support(Kind<QDynRnnLayer>) { return Support::none("dynamic int8: no mirror yet"); }
  static Support support(Kind<QAddLayer>) { return Support::none("int8 graphs: no mirror yet"); }
  static Support support(Kind<FakeQuantLayer>) { return Support::none("already a mirror"); }
  static Support support(Kind<FlattenLayer>) { return Support::all("flatten"); }
  static Support support(Kind<Conv2dLayer>) { return Support::none("not in int8 models"); }
  static Support support(Kind<Pool2dLayer>) { return Support::none("not in int8 models"); }
  static Support support(Kind<DenseLayer>) { return Support::none("not in int8 models"); }
  static Support support(Kind<ActivationLayer>) { return Support::none("not in int8 models"); }
  static Support support(Kind<BatchNormLayer>) { return Support::none("not in int8 models"); }
  static Support support(Kind<DropoutLayer>) { return Support::none("not in int8 models"); }
  static Support support(Kind<GlobalAvgPoolLayer>) { return Support::none("not in int8 models"); }
  static Support support(Kind<EmbeddingLayer>) { return Support::none("not in int8 models"); }
  static Support support(Kind<RnnLayer>) { return Support::none("not in int8 models"); }
  static Support support(Kind<ResidualLayer>) { return Support::none("not in int8 models"); }
  static Support support(Kind<GraphLayer>) { return Support::none("int8 graphs: no mirror yet"); }
  static Support support(Kind<ExternalLayer>) { return Support::some("quant/'s kinds, as their rows say"); }

 private:
  std::string path_;
  Sequential* out_ = nullptr;
};

}  // namespace

SupportColumn ste_support() { return support_of<Mirror>(); }
QuantSupportColumn ste_quant_support() { return quant_support_of<Mirror>(); }

Model fake_quant_model(Model& int8) {
  Mirror mirror;
  mirror.policy = int8.policy;
  mirror.policy.dtype = FloatType::float32;
  mirror.policy.conv_kernel_flip = false;  // quant/ flipped the weights before quantizing them
  Model m;
  m.name = int8.name + "-fake-quant";
  m.policy = mirror.policy;
  m.input_shape = int8.input_shape;
  m.num_classes = int8.num_classes;
  m.num_ids = int8.num_ids;
  m.net = std::make_unique<Sequential>(int8.input_shape);
  for (std::size_t i = 0; i < int8.net->size(); ++i) mirror.layer(int8.net->layer(i), std::to_string(i), *m.net);
  check(m.net->current_shape() == int8.net->current_shape(), "fake_quant_model: the mirror ends in ",
        shape_str(m.net->current_shape()), ", the int8 model in ", shape_str(int8.net->current_shape()));
  return m;
}

// ---------------------------------------------------------------- the STE runner

namespace {

class SteRunner : public Runner {
 public:
  SteRunner(Model& int8, Model& fake, const ExecContext& exec)
      : Runner(int8, TrainConfig{}), int8_(int8, TrainConfig{}, exec), fake_(fake, TrainConfig{}, exec) {
    exec_ = exec;
  }
  Device device() const override { return Device::cpu; }
  std::string describe() const override {
    return int8_.describe() + ", STE gradients through the fake-quantized graph";
  }
  Tensor logits(const Tensor& x, int64_t max_batch) override { return int8_.logits(x, max_batch); }
  InputGradient input_gradient(const Tensor& x, const std::vector<int32_t>& labels, Semantics s) override {
    InputGradient g = fake_.input_gradient(x, labels, s);
    // what the attack sees of the model besides the gradient: the int8 model's own answers
    g.logits = int8_.logits(x, 0);
    const SoftmaxXentKernel& k = exec_.pick(exec_.kernels.softmax_xent, loss_backend_, loss_, g.logits.dtype());
    g.loss = k.forward(loss_, g.logits, labels);
    return g;
  }
  double train_step(const Tensor&, const std::vector<int32_t>&, int64_t*) override {
    fail("train: ", model_.name, " is an int8 model (inference only; its STE gradient serves attacks)");
  }
  PredictTime time_prediction(const Tensor& x, int64_t max_batch) override {
    return int8_.time_prediction(x, max_batch);
  }
  OptimState optimizer_state() override { return {}; }
  void set_optimizer_state(const OptimState&) override {
    fail("resume: ", model_.name, " is an int8 model (no optimiser state)");
  }

 private:
  CpuRunner int8_, fake_;
};

}  // namespace

std::unique_ptr<Runner> open_ste_runner(Model& int8, Model& fake, const ExecContext& exec) {
  return std::make_unique<SteRunner>(int8, fake, exec);
}

}  // namespace quant
}  // namespace driftlab
