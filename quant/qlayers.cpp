#include "quant/qlayers.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"
#include "core/ops/quantize.h"

namespace driftlab {
namespace quant {

Param buffer(const std::string& name, Tensor t) {
  Param p;
  p.name = name;
  p.value = std::move(t);
  return p;
}

namespace {

Tensor scalar_f32(float v) { return Tensor::from<float>({1}, {v}); }
Tensor scalar_i32(int32_t v) { return Tensor::from<int32_t>({1}, {v}); }
Tensor vec_f32(const std::vector<float>& v) { return Tensor::from<float>({static_cast<int64_t>(v.size())}, v); }

std::string qdesc(float scale, int32_t zp) {
  std::ostringstream os;
  os << "s=" << scale << " zp=" << zp;
  return os.str();
}

// The resolved params of the scheme's add of a and b into out (a fused ReLU: the clamp from out's
// zero point); QAddLayer's and QResidualLayer's.
QAddParams qadd_params(const QuantScheme& s, const ActQParams& a, const ActQParams& b, const ActQParams& out, bool relu) {
  QAddParams p;
  p.rule = s.add_rule;
  p.a_scale = a.scale, p.a_zero_point = a.zero_point;
  p.b_scale = b.scale, p.b_zero_point = b.zero_point;
  p.y_scale = out.scale, p.y_zero_point = out.zero_point;
  p.dtype = s.act_dtype;
  p.offset = s.add_offset;
  p.lo = relu ? std::max(s.act_type_min, out.zero_point) : s.act_type_min;
  p.hi = s.act_type_max;
  p.resolve();
  return p;
}

// a + b by the registry's qadd kernel under p; a (N,C,H,W) value's elements at their channels-last
// positions (onednn's scalar tail, core/ops/qadd.h).
Tensor run_qadd(RunContext& ctx, KernelBackend backend, QAddParams p, const Tensor& a, const Tensor& b) {
  if (a.rank() == 4) p.n = a.dim(0), p.c = a.dim(1), p.h = a.dim(2), p.w = a.dim(3);
  Tensor out = Tensor::empty(a.shape(), a.dtype());
  ctx.exec.pick(ctx.exec.kernels.qadd, backend, p, a.dtype()).forward(p, a, b, out);
  return out;
}

}  // namespace

Tensor QuantLayerBase::backward(RunContext&, const Tensor&) {
  fail(kind(), ": a quantized model is inference-only (no gradient through int8 ops); attack the fp32 model "
               "or use a straight-through surrogate");
}

const Tensor& QuantLayerBase::buf(const std::string& name) const {
  for (const Param& p : bufs_)
    if (p.name == name) return p.value;
  fail(kind(), ": no buffer '", name, "'");
}

std::vector<Param*> QuantLayerBase::buffers() {
  std::vector<Param*> v;
  for (Param& p : bufs_) v.push_back(&p);
  return v;
}

QuantizeLayer::QuantizeLayer(const Shape& in, const QuantizeParams& p, KernelBackend backend)
    : shape_(in), p_(p), backend_(backend) {
  p_.validate("quantize");
  check(p_.scale.size() == 1, "quantize: an activation is quantized per tensor");
  bufs_.push_back(buffer("scale", scalar_f32(p_.scale[0])));
  bufs_.push_back(buffer("zero_point", scalar_i32(p_.zero_point[0])));
}

void QuantizeLayer::refresh() {
  p_.scale = {buf("scale").data<float>()[0]};
  p_.zero_point = {buf("zero_point").data<int32_t>()[0]};
  p_.validate("quantize");
}

std::string QuantizeLayer::describe() const {
  return std::string("quantize to ") + dtype_name(p_.dtype) + " " + qdesc(p_.scale[0], p_.zero_point[0]) + " (" +
         scale_op_name(p_.op) + ", " + round_rule_name(p_.round) + ")";
}

Tensor QuantizeLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input("quantize", x, shape_);
  Tensor q = Tensor::empty(x.shape(), p_.dtype);
  ctx.exec.pick(ctx.exec.kernels.quantize, backend_, p_, x.dtype()).quantize(p_, x, q);
  return q;
}

DequantizeLayer::DequantizeLayer(const Shape& in, const QuantizeParams& p, KernelBackend backend)
    : shape_(in), p_(p), backend_(backend) {
  p_.validate("dequantize");
  bufs_.push_back(buffer("scale", scalar_f32(p_.scale[0])));
  bufs_.push_back(buffer("zero_point", scalar_i32(p_.zero_point[0])));
}

void DequantizeLayer::refresh() {
  p_.scale = {buf("scale").data<float>()[0]};
  p_.zero_point = {buf("zero_point").data<int32_t>()[0]};
  p_.validate("dequantize");
}

std::string DequantizeLayer::describe() const {
  return std::string("dequantize from ") + dtype_name(p_.dtype) + " " + qdesc(p_.scale[0], p_.zero_point[0]);
}

Tensor DequantizeLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input("dequantize", x, shape_);
  Tensor y = Tensor::empty(x.shape(), DType::f32);
  ctx.exec.pick(ctx.exec.kernels.quantize, backend_, p_, x.dtype()).dequantize(p_, x, y);
  return y;
}

namespace {

// The buffers every quantized conv/dense keeps, and the int32 bias the kernel adds (undefined when
// the bias is absent or a float inside the requantization).
void linear_buffers(std::vector<Param>& bufs, const QLinearSpec& spec, Tensor& int_bias) {
  bufs.push_back(buffer("weight", spec.weight.q));
  bufs.push_back(buffer("weight_scale", vec_f32(spec.weight.scale)));
  if (spec.bias.defined()) bufs.push_back(buffer("bias", spec.bias));
  bufs.push_back(buffer("in_scale", scalar_f32(spec.in.scale)));
  bufs.push_back(buffer("in_zero_point", scalar_i32(spec.in.zero_point)));
  bufs.push_back(buffer("out_scale", scalar_f32(spec.out.scale)));
  bufs.push_back(buffer("out_zero_point", scalar_i32(spec.out.zero_point)));
  int_bias = spec.bias.defined() && spec.bias.dtype() == DType::i32 ? spec.bias : Tensor();
}

Tensor float_bias_of(const QLinearSpec& spec) {
  return spec.bias.defined() && spec.bias.dtype() == DType::f32 ? spec.bias : Tensor();
}

}  // namespace

QConv2dLayer::QConv2dLayer(const Conv2dParams& geometry, const QuantScheme& s, QLinearSpec spec,
                           KernelBackend backend)
    : scheme_(s), relu_(spec.relu), backend_(backend) {
  p_.g = geometry;
  p_.g.n = 1;
  check(!p_.g.flip, "qconv2d: flip the float weights before quantizing them");
  check_shape("qconv2d", "weight", spec.weight.q, p_.g.w_shape());
  p_.x_dtype = p_.y_dtype = s.act_dtype;
  p_.dot = s.dot;
  linear_buffers(bufs_, spec, int_bias_);
  refresh();
}

namespace {

// An int32 bias the accumulator can hold beside the products (core/ops/requant.h check_acc_fits
// bounds those by INT32_MAX / 2 when a bias is added): |b| <= INT32_MAX / 2.
void check_int_bias(const char* op, const Tensor& bias) {
  if (!bias.defined()) return;
  const int32_t* b = bias.data<int32_t>();
  for (int64_t i = 0; i < bias.numel(); ++i)
    check(b[i] >= -(INT32_MAX / 2) && b[i] <= INT32_MAX / 2, op, ": int32 bias[", i, "] = ", b[i],
          " could overflow the accumulator (|bias| <= ", INT32_MAX / 2, ")");
}

// The spec a conv/dense layer's buffers hold now.
QLinearSpec spec_from(const QuantLayerBase& l, const std::vector<Param>& bufs, bool relu) {
  QLinearSpec s;
  auto get = [&](const std::string& n) -> const Tensor* {
    for (const Param& p : bufs)
      if (p.name == n) return &p.value;
    return nullptr;
  };
  auto need = [&](const std::string& n) -> const Tensor& {
    const Tensor* t = get(n);
    check(t != nullptr, l.kind(), ": no buffer '", n, "'");
    return *t;
  };
  s.weight.q = need("weight");
  const Tensor& ws = need("weight_scale");
  s.weight.scale.assign(ws.data<float>(), ws.data<float>() + ws.numel());
  if (const Tensor* b = get("bias")) s.bias = *b;
  s.in = {need("in_scale").data<float>()[0], need("in_zero_point").data<int32_t>()[0]};
  s.out = {need("out_scale").data<float>()[0], need("out_zero_point").data<int32_t>()[0]};
  s.relu = relu;
  return s;
}

}  // namespace

QLinearSpec QConv2dLayer::spec() const { return spec_from(*this, bufs_, relu_); }
QLinearSpec QDenseLayer::spec() const { return spec_from(*this, bufs_, relu_); }

void QConv2dLayer::refresh() {
  const QLinearSpec spec = spec_from(*this, bufs_, relu_);
  check(spec.weight.scale.size() == 1 || static_cast<int64_t>(spec.weight.scale.size()) == p_.g.k,
        "qconv2d: ", spec.weight.scale.size(), " weight scales for ", p_.g.k, " output channels");
  p_.x_zero_point = spec.in.zero_point;
  int_bias_ = spec.bias.defined() && spec.bias.dtype() == DType::i32 ? spec.bias : Tensor();
  p_.has_bias = int_bias_.defined();
  check_int_bias("qconv2d", int_bias_);
  // the zero points before the requantization is formed from them (its clamp would name the symptom)
  check_zero_point("qconv2d", "input", spec.in.zero_point, p_.x_dtype);
  check_zero_point("qconv2d", "output", spec.out.zero_point, p_.y_dtype);
  w_ = spec.weight.q;
  p_.rq = make_requant(scheme_, spec.in.scale, spec.weight, p_.g.k, float_bias_of(spec), spec.out, relu_, "qconv2d");
  p_.validate();
}

std::string QConv2dLayer::describe() const {
  std::ostringstream os;
  os << "qconv2d " << p_.g.k << "x" << p_.g.c << "x" << p_.g.r << "x" << p_.g.s << " x_zp=" << p_.x_zero_point
     << " requant " << requant_rule_name(p_.rq.rule) << " zp_out=" << p_.rq.zero_point << " clamp [" << p_.rq.lo << ","
     << p_.rq.hi << "]" << (p_.rq.channels.size() > 1 ? " per-channel" : " per-tensor")
     << (p_.dot == DotRule::exact ? "" : " int16 product pairs");
  return os.str();
}

Tensor QConv2dLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input("qconv2d", x, {p_.g.c, p_.g.h, p_.g.w});
  p_.g.n = x.dim(0);
  Tensor y = Tensor::empty(p_.g.y_shape(), p_.y_dtype);
  ctx.exec.pick(ctx.exec.kernels.qconv2d, backend_, p_, x.dtype())
      .forward(p_, x, w_, p_.has_bias ? &int_bias_ : nullptr, y);
  return y;
}

QDenseLayer::QDenseLayer(int64_t in, int64_t out, const QuantScheme& s, QLinearSpec spec, KernelBackend backend)
    : scheme_(s), relu_(spec.relu), backend_(backend) {
  p_.in = in;
  p_.out = out;
  check_shape("qdense", "weight", spec.weight.q, {out, in});
  p_.x_dtype = p_.y_dtype = s.act_dtype;
  p_.dot = s.dot;
  linear_buffers(bufs_, spec, int_bias_);
  refresh();
}

void QDenseLayer::refresh() {
  const QLinearSpec spec = spec_from(*this, bufs_, relu_);
  check(spec.weight.scale.size() == 1 || static_cast<int64_t>(spec.weight.scale.size()) == p_.out, "qdense: ",
        spec.weight.scale.size(), " weight scales for ", p_.out, " outputs");
  p_.x_zero_point = spec.in.zero_point;
  int_bias_ = spec.bias.defined() && spec.bias.dtype() == DType::i32 ? spec.bias : Tensor();
  p_.has_bias = int_bias_.defined();
  check_int_bias("qdense", int_bias_);
  // the zero points before the requantization is formed from them (its clamp would name the symptom)
  check_zero_point("qdense", "input", spec.in.zero_point, p_.x_dtype);
  check_zero_point("qdense", "output", spec.out.zero_point, p_.y_dtype);
  w_ = spec.weight.q;
  p_.rq = make_requant(scheme_, spec.in.scale, spec.weight, p_.out, float_bias_of(spec), spec.out, relu_, "qdense");
  p_.validate();
}

std::string QDenseLayer::describe() const {
  std::ostringstream os;
  os << "qdense " << p_.out << "x" << p_.in << " x_zp=" << p_.x_zero_point << " requant "
     << requant_rule_name(p_.rq.rule) << " zp_out=" << p_.rq.zero_point << " clamp [" << p_.rq.lo << "," << p_.rq.hi
     << "]" << (p_.rq.channels.size() > 1 ? " per-channel" : " per-tensor")
     << (p_.dot == DotRule::exact ? "" : " int16 product pairs");
  return os.str();
}

Tensor QDenseLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input("qdense", x, {p_.in});
  p_.n = x.dim(0);
  Tensor y = Tensor::empty({p_.n, p_.out}, p_.y_dtype);
  ctx.exec.pick(ctx.exec.kernels.qdense, backend_, p_, x.dtype()).forward(p_, x, w_, p_.has_bias ? &int_bias_ : nullptr, y);
  return y;
}

QMaxPool2dLayer::QMaxPool2dLayer(const Pool2dParams& geometry, DType dtype, KernelBackend backend) : backend_(backend) {
  p_.g = geometry;
  p_.g.n = 1;
  p_.dtype = dtype;
}

std::string QMaxPool2dLayer::describe() const {
  std::ostringstream os;
  os << "qmaxpool2d " << p_.g.kh << "x" << p_.g.kw << " stride " << p_.g.stride_h << " " << dtype_name(p_.dtype);
  return os.str();
}

Tensor QMaxPool2dLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input("qmaxpool2d", x, {p_.g.c, p_.g.h, p_.g.w});
  p_.g.n = x.dim(0);
  Tensor y = Tensor::empty(p_.g.y_shape(), p_.dtype);
  ctx.exec.pick(ctx.exec.kernels.qmaxpool2d, backend_, p_, x.dtype()).forward(p_, x, y);
  return y;
}

QReluLayer::QReluLayer(const Shape& in, DType dtype, int32_t zero_point) : shape_(in), dtype_(dtype), zp_(zero_point) {
  bufs_.push_back(buffer("zero_point", scalar_i32(zp_)));
}

void QReluLayer::refresh() { zp_ = buf("zero_point").data<int32_t>()[0]; }

std::string QReluLayer::describe() const { return "qrelu max(q, " + std::to_string(zp_) + ")"; }

Tensor QReluLayer::forward(RunContext&, const Tensor& x) {
  check_input("qrelu", x, shape_);
  check(x.dtype() == dtype_, "qrelu: input is ", dtype_name(x.dtype()), ", expected ", dtype_name(dtype_));
  Tensor y = Tensor::empty(x.shape(), dtype_);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* s = x.data<T>();
    T* d = y.data<T>();
    const T z = static_cast<T>(zp_);
    for (int64_t i = 0; i < x.numel(); ++i) d[i] = s[i] < z ? z : s[i];
  };
  if (dtype_ == DType::u8)
    run(uint8_t{});
  else
    run(int8_t{});
  return y;
}

QGlobalAvgPoolLayer::QGlobalAvgPoolLayer(const Shape& in, DType dtype, int32_t zero_point, KernelBackend backend)
    : in_(in), backend_(backend) {
  check(in.size() == 3, "qglobal_avg_pool: input ", shape_str(in), " is not (C,H,W)");
  p_.c = in[0], p_.h = in[1], p_.w = in[2];
  p_.dtype = dtype;
  bufs_.push_back(buffer("zero_point", scalar_i32(zero_point)));
  refresh();
}

QGlobalAvgPoolLayer::QGlobalAvgPoolLayer(const Shape& in, DType dtype, ActQParams input, ActQParams out,
                                         QAvgPoolRule rule, KernelBackend backend)
    : in_(in), backend_(backend) {
  check(in.size() == 3, "qglobal_avg_pool: input ", shape_str(in), " is not (C,H,W)");
  check(rule != QAvgPoolRule::shared_qparams, "qglobal_avg_pool: ", qavg_pool_rule_name(rule),
        " keeps the input's scale and zero point (no output parameters of its own)");
  p_.c = in[0], p_.h = in[1], p_.w = in[2];
  p_.dtype = dtype;
  p_.rule = rule;
  bufs_.push_back(buffer("zero_point", scalar_i32(input.zero_point)));
  bufs_.push_back(buffer("in_scale", scalar_f32(input.scale)));
  bufs_.push_back(buffer("out_scale", scalar_f32(out.scale)));
  bufs_.push_back(buffer("out_zero_point", scalar_i32(out.zero_point)));
  refresh();
}

void QGlobalAvgPoolLayer::refresh() {
  p_.zero_point = buf("zero_point").data<int32_t>()[0];
  if (p_.own_qparams()) {
    p_.in_scale = buf("in_scale").data<float>()[0];
    p_.out_scale = buf("out_scale").data<float>()[0];
    p_.out_zero_point = buf("out_zero_point").data<int32_t>()[0];
  }
}

std::string QGlobalAvgPoolLayer::describe() const {
  std::string d = "qglobal_avg_pool " + std::to_string(p_.h) + "x" + std::to_string(p_.w) + " zp=" +
                  std::to_string(p_.zero_point);
  if (p_.own_qparams()) d += " " + std::string(qavg_pool_rule_name(p_.rule)) + " -> out " + qdesc(p_.out_scale, p_.out_zero_point);
  return d;
}

Tensor QGlobalAvgPoolLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input("qglobal_avg_pool", x, in_);
  p_.n = x.dim(0);
  Tensor y = Tensor::empty({p_.n, p_.c}, p_.dtype);
  ctx.exec.pick(ctx.exec.kernels.qglobal_avg_pool, backend_, p_, x.dtype()).forward(p_, x, y);
  return y;
}

QAddLayer::QAddLayer(const Shape& shape, const QuantScheme& s, const QAddSpec& spec, KernelBackend backend)
    : shape_(shape), scheme_(s), spec_(spec), backend_(backend) {
  bufs_.push_back(buffer("a_scale", scalar_f32(spec.a.scale)));
  bufs_.push_back(buffer("a_zero_point", scalar_i32(spec.a.zero_point)));
  bufs_.push_back(buffer("b_scale", scalar_f32(spec.b.scale)));
  bufs_.push_back(buffer("b_zero_point", scalar_i32(spec.b.zero_point)));
  bufs_.push_back(buffer("out_scale", scalar_f32(spec.out.scale)));
  bufs_.push_back(buffer("out_zero_point", scalar_i32(spec.out.zero_point)));
  refresh();
}

void QAddLayer::refresh() {
  spec_.a = {buf("a_scale").data<float>()[0], buf("a_zero_point").data<int32_t>()[0]};
  spec_.b = {buf("b_scale").data<float>()[0], buf("b_zero_point").data<int32_t>()[0]};
  spec_.out = {buf("out_scale").data<float>()[0], buf("out_zero_point").data<int32_t>()[0]};
  check_zero_point("qadd", "a", spec_.a.zero_point, scheme_.act_dtype);
  check_zero_point("qadd", "b", spec_.b.zero_point, scheme_.act_dtype);
  check_zero_point("qadd", "output", spec_.out.zero_point, scheme_.act_dtype);
  p_ = qadd_params(scheme_, spec_.a, spec_.b, spec_.out, spec_.relu);
}

std::string QAddLayer::describe() const {
  std::ostringstream os;
  os << "qadd " << qadd_rule_name(p_.rule) << (spec_.relu ? " + relu" : "") << " a " << qdesc(spec_.a.scale, spec_.a.zero_point)
     << " b " << qdesc(spec_.b.scale, spec_.b.zero_point) << " out " << qdesc(spec_.out.scale, spec_.out.zero_point);
  return os.str();
}

Tensor QAddLayer::forward(RunContext&, const Tensor&) {
  fail("qadd: reads two values; it runs as a node of an int8 graph (GraphLayer::add_multi)");
}

Shape QAddLayer::output_shape_for(const std::vector<Shape>& in, const std::string& who) const {
  check(in.size() == 2, who, ": adds two values, given ", in.size());
  check(in[0] == shape_ && in[1] == shape_, who, ": inputs ", shape_str(in[0]), " and ", shape_str(in[1]),
        " (the int8 add takes two values of shape ", shape_str(shape_), ", no broadcasting)");
  return shape_;
}

Tensor QAddLayer::forward_all(RunContext& ctx, const std::vector<const Tensor*>& xs) {
  check(xs.size() == 2, "qadd: adds two values, given ", xs.size());
  const Tensor &a = *xs[0], &b = *xs[1];
  check_input("qadd", a, shape_);
  check(b.shape() == a.shape() && b.dtype() == a.dtype(), "qadd: inputs ", shape_str(a.shape()), " ",
        dtype_name(a.dtype()), " and ", shape_str(b.shape()), " ", dtype_name(b.dtype()));
  return run_qadd(ctx, backend_, p_, a, b);
}

QResidualLayer::QResidualLayer(std::unique_ptr<Sequential> main, const QuantScheme& s, const QResidualSpec& spec,
                               KernelBackend backend)
    : main_(std::move(main)), scheme_(s), spec_(spec), in_(main_->input_shape()), backend_(backend) {
  check(in_.size() == 3 && main_->current_shape().size() == 3, "qresidual: shapes ", shape_str(in_), " -> ",
        shape_str(main_->current_shape()), " are not (C,H,W)");
  bufs_.push_back(buffer("main_scale", scalar_f32(spec.main_out.scale)));
  bufs_.push_back(buffer("main_zero_point", scalar_i32(spec.main_out.zero_point)));
  bufs_.push_back(buffer("shortcut_scale", scalar_f32(spec.shortcut_in.scale)));
  bufs_.push_back(buffer("shortcut_zero_point", scalar_i32(spec.shortcut_in.zero_point)));
  bufs_.push_back(buffer("out_scale", scalar_f32(spec.out.scale)));
  bufs_.push_back(buffer("out_zero_point", scalar_i32(spec.out.zero_point)));
  refresh();
}

void QResidualLayer::refresh() {
  for (std::size_t i = 0; i < main_->size(); ++i)  // the main path's layers first (a file wrote them too)
    if (QuantLayer* q = as_quant_layer(main_->layer(i))) q->refresh();
  spec_.main_out = {buf("main_scale").data<float>()[0], buf("main_zero_point").data<int32_t>()[0]};
  spec_.shortcut_in = {buf("shortcut_scale").data<float>()[0], buf("shortcut_zero_point").data<int32_t>()[0]};
  spec_.out = {buf("out_scale").data<float>()[0], buf("out_zero_point").data<int32_t>()[0]};
  p_ = qadd_params(scheme_, spec_.main_out, spec_.shortcut_in, spec_.out, spec_.relu);
}

std::string QResidualLayer::describe() const {
  std::ostringstream os;
  os << "qresidual (" << (spec_.option_a ? "option A" : "identity") << " shortcut) add " << qadd_rule_name(p_.rule)
     << (spec_.relu ? " + relu" : "") << " out " << qdesc(spec_.out.scale, spec_.out.zero_point);
  return os.str();
}

void QResidualLayer::collect(const std::string& prefix, bool want_buffers,
                             std::vector<std::pair<std::string, Param*>>& out) {
  if (want_buffers)
    for (Param& p : bufs_) out.emplace_back(prefix + ".qresidual." + p.name, &p);
  for (auto& np : want_buffers ? main_->named_buffers() : main_->named_params())
    out.emplace_back(prefix + ".qresidual.main." + np.first, np.second);
}

Tensor QResidualLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input("qresidual", x, in_);
  return add(ctx, x, main_->forward(ctx, x));
}

Tensor QResidualLayer::add(RunContext& ctx, const Tensor& x, const Tensor& y) {
  Tensor s = x;
  if (spec_.option_a) {  // x[:, :, ::s, ::s] with zero-point channels around it
    const Shape out = main_->current_shape();
    s = Tensor::empty(y.shape(), x.dtype());
    // Sizes as locals and one row pointer per row: the byte stores below may alias any field (a
    // char type), which kept every loop bound and index term reloaded per element (the two
    // option-A adds cost 3-5x an identity block's add).
    const int64_t n = x.dim(0), c = in_[0], h = in_[1], w = in_[2], oc = out[0], oh_n = out[1], ow_n = out[2];
    const int64_t stride = spec_.stride, pad_before = spec_.pad_before;
    const int64_t rows = std::min(oh_n, (h + stride - 1) / stride), cols = std::min(ow_n, (w + stride - 1) / stride);
    const int32_t zp = spec_.shortcut_in.zero_point;
    auto fill = [&](auto tag) {
      using T = decltype(tag);
      const T* xd = x.data<T>();
      T* sd = s.data<T>();
      const T z = static_cast<T>(zp);
      const int64_t plane = oh_n * ow_n;
      for (int64_t b = 0; b < n; ++b) {
        T* sb = sd + b * oc * plane;
        std::fill(sb, sb + pad_before * plane, z);  // the zero-point channels before and after x's
        std::fill(sb + (pad_before + c) * plane, sb + oc * plane, z);
        for (int64_t ci = 0; ci < c; ++ci) {
          T* dp = sb + (ci + pad_before) * plane;
          if (rows < oh_n || cols < ow_n) std::fill(dp, dp + plane, z);
          for (int64_t oh = 0; oh < rows; ++oh) {
            const T* src = xd + ((b * c + ci) * h + oh * stride) * w;
            T* dst = dp + oh * ow_n;
            if (stride == 2) {
              for (int64_t ow = 0; ow < cols; ++ow) dst[ow] = src[2 * ow];
            } else {
              for (int64_t ow = 0; ow < cols; ++ow) dst[ow] = src[ow * stride];
            }
          }
        }
      }
    };
    if (x.dtype() == DType::u8)
      fill(uint8_t{});
    else
      fill(int8_t{});
  }
  check(s.shape() == y.shape(), "qresidual: shortcut ", shape_str(s.shape()), " vs main ", shape_str(y.shape()));
  return run_qadd(ctx, backend_, p_, y, s);
}

}  // namespace quant
}  // namespace driftlab
