// The int8 half of the ONNX exporter (convert/onnx_export.h): a quantized model's layer sequence
// (quant/qlayers.h) written as a QDQ or a QOperator graph with the model's own integers and scales.
// The graph shapes follow what ONNX Runtime's quantize_static writes and what its optimizer fuses
// (the same graphs as tests/oracles/ort/make_models.py, which the ORT int8 oracle ran bit for bit).
#include <limits>
#include <sstream>

#include "convert/onnx_graph.h"
#include "engine/layers/all.h"
#include "engine/layers/sequential.h"
#include "quant/dynamic.h"
#include "quant/qlayers.h"
#include "quant/scheme.h"
#include "quant/ste.h"
#include "quant/visit.h"

namespace driftlab {
namespace convert {
namespace detail {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;
using quant::QLinearSpec;
using Form = OnnxExportOptions::QuantForm;

// An integer tensor of the graph with the initializers of its scale and zero point.
struct QValue {
  std::string q, scale, zp;
};

struct QCtx {
  Graph& g;
  const OnnxExportOptions& o;
  OnnxExport& r;
  DType act;  // int8 or uint8 activations
  int64_t point = 0;
  bool qdq() const { return o.quant_form == Form::qdq; }
};

int32_t type_min(DType d) { return d == DType::i8 ? -128 : 0; }
int32_t type_max(DType d) { return d == DType::i8 ? 127 : 255; }

std::string act_scale(QCtx& c, const std::string& name, float s) { return c.g.scalar(name + ".scale", s); }
std::string act_zp(QCtx& c, const std::string& name, int32_t zp) {
  return c.g.zero_points(name + ".zero_point", c.act, zp);
}

std::string dq(QCtx& c, const QValue& v, const std::string& name) {
  return c.g.op("DequantizeLinear", {v.q, v.scale, v.zp}, name + "_dq");
}
QValue q(QCtx& c, const std::string& y, const std::string& scale, const std::string& zp, const std::string& name) {
  return {c.g.op("QuantizeLinear", {y, scale, zp}, name + "_q"), scale, zp};
}

// An activation point's integer tensor as the graph output 'point_<k>' (QOperator only).
void point(QCtx& c, const QValue& v, const Shape& per_sample) {
  if (!c.o.expose_points) return;
  const std::string name = "point_" + std::to_string(c.point++);
  c.g.node("Identity", {v.q}, {name}, name);
  c.g.output(name, Graph::onnx_type(c.act, name), per_sample);
  ++c.r.num_points;
}

// The clamp a conv/dense/add applies must be the type's range, or a fused ReLU's [max(min, zp), max]:
// what ONNX's integer ops and a QuantizeLinear (saturating) give, plus a Relu / Max node.
void check_clamp(const QCtx& c, const std::string& name, int32_t lo, int32_t hi, bool relu, int32_t zp) {
  const int32_t want_lo = relu ? std::max(type_min(c.act), zp) : type_min(c.act);
  check(lo == want_lo && hi == type_max(c.act), "export onnx: ", name, ": output clamp [", lo, ", ", hi,
        "] is neither the ", dtype_name(c.act), " range nor a fused ReLU's [", want_lo, ", ", type_max(c.act),
        "]: ONNX's integer ops cannot state it");
}

// QOperator: a fused ReLU whose zero point is above the type's minimum becomes Max(q, zp).
QValue relu_clamp(QCtx& c, QValue v, bool relu, int32_t zp, const std::string& name) {
  if (!relu || zp <= type_min(c.act)) return v;
  v.q = c.g.op("Max", {v.q, v.zp}, name + "_relu");
  return v;
}

void conv_attrs(NodeProto* n, const Conv2dParams& p) { attr_conv(n, p, {p.pad_t, p.pad_l, p.pad_b, p.pad_r}); }

// A quantized conv (conv != nullptr) or dense layer.
QValue emit_linear(QCtx& c, const QValue& x, const QLinearSpec& s, const Requant& rq, const Conv2dParams* conv,
                   int64_t out_channels, const std::string& name, const Shape& out_shape) {
  check(!s.bias.defined() || s.bias.dtype() == DType::i32, "export onnx: ", name,
        ": the bias is a float added inside the requantization (quant_bias=float_in_requant, the onednn/fbgemm "
        "schemes); ONNX's QLinearConv/QGemm and a fused QDQ group take an int32 bias: quantize with "
        "quant_bias=int32_divide_f64 or int32_mul_reciprocal to export");
  check_clamp(c, name, rq.lo, rq.hi, s.relu, s.out.zero_point);
  const bool per_channel = s.weight.scale.size() > 1;
  const int64_t K = out_channels;
  const Tensor& w = s.weight.q;
  const std::string wq = c.g.integers(name + ".weight_quantized", w, w.shape());
  const std::string ws = per_channel ? c.g.floats(name + ".weight_scale", {K}, s.weight.scale.data())
                                     : c.g.scalar(name + ".weight_scale", s.weight.scale[0]);
  const std::string wz = c.g.zero_points(name + ".weight_zero_point", DType::i8, 0, per_channel ? K : -1);
  const std::string ys = act_scale(c, name + ".y", s.out.scale), yz = act_zp(c, name + ".y", s.out.zero_point);
  std::string bq;
  if (s.bias.defined()) bq = c.g.integers(name + ".bias_quantized", s.bias, {K});
  std::ostringstream os;
  os << name << ": ";
  QValue y;
  if (c.qdq()) {
    NodeProto* n;
    std::vector<std::string> in{dq(c, x, name + "_x")};
    in.push_back(c.g.op("DequantizeLinear", {wq, ws, wz}, name + "_weight_dq", &n));
    if (per_channel) attr_int(n, "axis", 0);
    if (!bq.empty()) {
      // bias scale s_in * s_w[k] (float32), zero point 0: how quantize_static dequantizes an int32 bias
      std::vector<float> bs(per_channel ? K : 1);
      for (std::size_t k = 0; k < bs.size(); ++k) bs[k] = s.in.scale * s.weight.scale[k];
      const std::string bss = per_channel ? c.g.floats(name + ".bias_scale", {K}, bs.data())
                                          : c.g.scalar(name + ".bias_scale", bs[0]);
      in.push_back(c.g.op("DequantizeLinear", {bq, bss, c.g.zero_points(name + ".bias_zero_point", DType::i32, 0,
                                                                         per_channel ? K : -1)},
                          name + "_bias_dq", &n));
      if (per_channel) attr_int(n, "axis", 0);
    }
    std::string f;
    if (conv) {
      f = c.g.op("Conv", in, name, &n);
      conv_attrs(n, *conv);
    } else {
      f = c.g.op("Gemm", in, name, &n);
      attr_int(n, "transB", 1);
    }
    if (s.relu) f = c.g.op("Relu", {f}, name + "_relu");
    y = q(c, f, ys, yz, name);
    os << "DequantizeLinear -> " << (conv ? "Conv" : "Gemm transB=1") << (s.relu ? " -> Relu" : "")
       << " -> QuantizeLinear";
  } else {
    NodeProto* n;
    if (conv) {
      std::vector<std::string> in{x.q, x.scale, x.zp, wq, ws, wz, ys, yz};
      if (!bq.empty()) in.push_back(bq);
      y = {c.g.op("QLinearConv", in, name, &n), ys, yz};
      conv_attrs(n, *conv);
    } else {
      y = {c.g.op("QGemm", {x.q, x.scale, x.zp, wq, ws, wz, bq, ys, yz}, name, &n), ys, yz};
      n->set_domain("com.microsoft");
      attr_int(n, "transB", 1);
    }
    y = relu_clamp(c, y, s.relu, s.out.zero_point, name);
    os << (conv ? "QLinearConv" : "com.microsoft.QGemm transB=1")
       << (s.relu && s.out.zero_point > type_min(c.act) ? " -> Max(zero point) (ReLU)" : s.relu ? " (ReLU as the output clamp: zero point = type minimum)" : "");
  }
  os << ", int8 weights " << (per_channel ? "per channel (axis 0)" : "per tensor") << (bq.empty() ? "" : ", int32 bias")
     << ", y scale " << s.out.scale << " zero point " << s.out.zero_point;
  if (conv)
    os << ", pads [" << conv->pad_t << "," << conv->pad_l << "," << conv->pad_b << "," << conv->pad_r << "] stride "
       << conv->stride_h;
  c.r.nodes.push_back(os.str());
  if (!c.qdq()) point(c, y, out_shape);
  return y;
}

// The float value of x after `f` (float in, float out), quantized again with x's own scale and zero
// point (QDQ); or `f` applied to the integers (QOperator). For the ops that move values without
// arithmetic: MaxPool, Reshape, Transpose, Slice.
template <typename F>
QValue same_qparams(QCtx& c, const QValue& x, const std::string& name, F&& f) {
  if (!c.qdq()) return {f(x.q), x.scale, x.zp};
  return q(c, f(dq(c, x, name)), x.scale, x.zp, name);
}

QValue emit_seq(QCtx& c, Sequential& net, QValue x, const std::string& prefix);

QValue emit_residual(QCtx& c, quant::QResidualLayer& l, const QValue& x, const std::string& name) {
  const quant::QResidualSpec& sp = l.spec();
  check_clamp(c, name, l.add_params().lo, l.add_params().hi, sp.relu, sp.out.zero_point);
  const QValue main = emit_seq(c, l.main(), x, name + ".main");
  QValue sc = x;
  std::string shortcut = "identity";
  if (sp.option_a) {
    const int64_t s = sp.stride, before = sp.pad_before;
    const int64_t after = l.output_shape()[0] - l.input_shape()[0] - before;
    const int64_t big = std::numeric_limits<int64_t>::max();
    sc = same_qparams(c, sc, name + "_subsample", [&](const std::string& v) {
      return c.g.op("Slice",
                    {v, c.g.ints(c.g.fresh(name + "_starts"), {0, 0}), c.g.ints(c.g.fresh(name + "_ends"), {big, big}),
                     c.g.ints(c.g.fresh(name + "_axes"), {2, 3}), c.g.ints(c.g.fresh(name + "_steps"), {s, s})},
                    name + "_subsample");
    });
    const std::string pads = c.g.ints(c.g.fresh(name + "_pads"), {0, before, 0, 0, 0, after, 0, 0});
    if (c.qdq()) {
      sc = q(c, c.g.op("Pad", {dq(c, sc, name + "_pad"), pads, c.g.scalar(c.g.fresh(name + "_pad_value"), 0.f)},
                       name + "_pad_channels"),
             sc.scale, sc.zp, name + "_pad");
    } else {
      sc.q = c.g.op("Pad", {sc.q, pads, sc.zp}, name + "_pad_channels");  // the zero point is the real 0
    }
    shortcut = "option A (Slice step " + std::to_string(s) + ", Pad channels " + std::to_string(before) + " before, " +
               std::to_string(after) + " after" + (c.qdq() ? " with 0.0)" : " with the zero point)");
  }
  const std::string ys = act_scale(c, name + ".y", sp.out.scale), yz = act_zp(c, name + ".y", sp.out.zero_point);
  QValue y;
  if (c.qdq()) {
    std::string f = c.g.op("Add", {dq(c, main, name + "_main"), dq(c, sc, name + "_shortcut")}, name + "_add");
    if (sp.relu) f = c.g.op("Relu", {f}, name + "_relu");
    y = q(c, f, ys, yz, name);
  } else {
    NodeProto* n;
    y = {c.g.op("QLinearAdd", {main.q, main.scale, main.zp, sc.q, sc.scale, sc.zp, ys, yz}, name + "_add", &n), ys, yz};
    n->set_domain("com.microsoft");
    y = relu_clamp(c, y, sp.relu, sp.out.zero_point, name);
    point(c, y, l.output_shape());
  }
  c.r.nodes.push_back(name + ": residual, shortcut " + shortcut + ", " +
                      (c.qdq() ? "DequantizeLinear x2 -> Add" + std::string(sp.relu ? " -> Relu" : "") + " -> QuantizeLinear"
                               : "com.microsoft.QLinearAdd" + std::string(sp.relu ? " (+ ReLU clamp)" : "")));
  return y;
}

// One layer of an int8 model as ONNX nodes reading the integer value x, one visit per kind; y is
// the value it outputs. Between the quantize and the dequantize layer an int8 model holds quant/'s
// static int8 kinds and the engine's flatten; every other kind is refused by name.
class QuantOnnxEmit : public LayerVisitor, public quant::QuantLayerVisitor {
 public:
  QuantOnnxEmit(QCtx& c, const QValue& x, const std::string& name) : c_(c), x_(x), name_(name) {}
  QValue y;

  void visit(quant::QConv2dLayer& l) override {
    const QConv2dParams& p = l.op_params();
    y = emit_linear(c_, x_, l.spec(), p.rq, &p.g, p.g.k, name_, l.output_shape());
  }
  void visit(quant::QDenseLayer& l) override {
    const QDenseParams& p = l.op_params();
    y = emit_linear(c_, x_, l.spec(), p.rq, nullptr, p.out, name_, l.output_shape());
  }
  void visit(quant::QMaxPool2dLayer& l) override {
    const Pool2dParams& p = l.op_params().g;
    c_.r.nodes.push_back(name_ + ": MaxPool " + std::to_string(p.kh) + "x" + std::to_string(p.kw) + " stride " +
                         std::to_string(p.stride_h) +
                         (c_.qdq() ? " between the input's DequantizeLinear/QuantizeLinear" : " on the integers"));
    y = same_qparams(c_, x_, name_, [&](const std::string& v) {
      NodeProto* n;
      const std::string out = c_.g.op("MaxPool", {v}, name_, &n);
      attr_ints(n, "kernel_shape", {p.kh, p.kw});
      attr_ints(n, "strides", {p.stride_h, p.stride_w});
      attr_ints(n, "pads", {p.pad_t, p.pad_l, p.pad_b, p.pad_r});
      return out;
    });
  }
  void visit(FlattenLayer& l) override {
    const bool hwc = l.order() == FlattenOrder::hwc && l.input_shape().size() == 3;
    c_.r.nodes.push_back(name_ + (hwc ? ": Transpose(0,2,3,1) + Reshape [0,-1] (channels-last feature order)"
                                      : ": Reshape [0,-1]"));
    y = same_qparams(c_, x_, name_, [&](const std::string& v) {
      std::string out = v;
      if (hwc) {
        NodeProto* n;
        out = c_.g.op("Transpose", {out}, name_ + "_channels_last", &n);
        attr_ints(n, "perm", {0, 2, 3, 1});
      }
      return c_.g.op("Reshape", {out, c_.g.ints(c_.g.fresh(name_ + "_shape"), {0, -1})}, name_);
    });
  }
  void visit(quant::QGlobalAvgPoolLayer& l) override {
    const QGlobalAvgPoolParams& p = l.op_params();
    const bool own = l.own_qparams();
    const std::string ys = own ? act_scale(c_, name_ + ".y", p.out_scale) : x_.scale;
    const std::string yz = own ? act_zp(c_, name_ + ".y", p.out_zero_point) : x_.zp;
    const std::string shape = c_.g.ints(c_.g.fresh(name_ + "_shape"), {0, -1});
    if (c_.qdq()) {
      y = q(c_, c_.g.op("GlobalAveragePool", {dq(c_, x_, name_)}, name_), ys, yz, name_);
      y = same_qparams(c_, y, name_ + "_flatten",
                       [&](const std::string& v) { return c_.g.op("Reshape", {v, shape}, name_ + "_flatten"); });
    } else {
      NodeProto* n;
      const std::string g = c_.g.op("QLinearGlobalAveragePool", {x_.q, x_.scale, x_.zp, ys, yz}, name_, &n);
      n->set_domain("com.microsoft");
      attr_int(n, "channels_last", 0);
      y = {c_.g.op("Reshape", {g, shape}, name_ + "_flatten"), ys, yz};
      if (own) point(c_, y, l.output_shape());
    }
    c_.r.nodes.push_back(name_ + ": " + (c_.qdq() ? "GlobalAveragePool between DequantizeLinear/QuantizeLinear"
                                                  : "com.microsoft.QLinearGlobalAveragePool") +
                         " + Reshape [0,-1], " + (own ? "its own output scale" : "the input's scale and zero point"));
  }
  void visit(quant::QReluLayer&) override {  // max(q, zp) on its input's scale and zero point
    c_.r.nodes.push_back(name_ + (c_.qdq() ? ": Relu between DequantizeLinear/QuantizeLinear" : ": Max(q, zero point)"));
    if (c_.qdq())
      y = same_qparams(c_, x_, name_, [&](const std::string& v) { return c_.g.op("Relu", {v}, name_); });
    else
      y = {c_.g.op("Max", {x_.q, x_.zp}, name_), x_.scale, x_.zp};
  }
  void visit(quant::QResidualLayer& l) override { y = emit_residual(c_, l, x_, name_); }

  // Refused: a quantize/dequantize layer anywhere but the model's ends (emit_int8 writes those),
  // the dynamic and fake-quant kinds, and every engine kind but the flatten.
  void visit(quant::QuantizeLayer& l) override { refuse(l); }
  void visit(quant::DequantizeLayer& l) override { refuse(l); }
  void visit(quant::QDynDenseLayer& l) override { refuse(l); }
  void visit(quant::QDynRnnLayer& l) override { refuse(l); }
  void visit(quant::QAddLayer& l) override { refuse(l); }
  void visit(quant::FakeQuantLayer& l) override { refuse(l); }
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
  void visit(ExternalLayer& l) override { quant::visit_quant(l, *this, "export onnx"); }

  static Support support(Kind<quant::QuantizeLayer>) { return Support::some("first layer only: QuantizeLinear, per tensor"); }
  static Support support(Kind<quant::DequantizeLayer>) { return Support::some("last layer only: DequantizeLinear to logits"); }
  static Support support(Kind<quant::QConv2dLayer>) {
    return Support::some("QLinearConv / QDQ Conv; int32 bias, range or ReLU clamp");
  }
  static Support support(Kind<quant::QDenseLayer>) {
    return Support::some("QGemm / QDQ Gemm; int32 bias, range or ReLU clamp");
  }
  static Support support(Kind<quant::QMaxPool2dLayer>) { return Support::all("MaxPool on the integers / between DQ and Q"); }
  static Support support(Kind<quant::QGlobalAvgPoolLayer>) {
    return Support::all("QLinearGlobalAveragePool / QDQ, + Reshape [0,-1]");
  }
  static Support support(Kind<quant::QResidualLayer>) { return Support::some("QLinearAdd / QDQ Add; range or ReLU clamp only"); }
  static Support support(Kind<quant::QReluLayer>) { return Support::all("Max(q, zero point) / QDQ Relu"); }
  static Support support(Kind<quant::QDynDenseLayer>) { return Support::none("dynamic int8: no ONNX mapping here"); }
  static Support support(Kind<quant::QDynRnnLayer>) { return Support::none("dynamic int8: no ONNX mapping here"); }
  static Support support(Kind<quant::QAddLayer>) { return Support::none("int8 graphs: not exported yet"); }
  static Support support(Kind<quant::FakeQuantLayer>) { return Support::none("training-time fake quantization"); }
  static Support support(Kind<Conv2dLayer>) { return Support::none("not in an int8 model (qconv2d is)"); }
  static Support support(Kind<Pool2dLayer>) { return Support::none("not in an int8 model (qmaxpool2d is)"); }
  static Support support(Kind<DenseLayer>) { return Support::none("not in an int8 model (qdense is)"); }
  static Support support(Kind<ActivationLayer>) { return Support::none("not in an int8 model (qrelu is)"); }
  static Support support(Kind<BatchNormLayer>) { return Support::none("not in an int8 model (folded into qconv2d)"); }
  static Support support(Kind<DropoutLayer>) { return Support::none("not in an int8 model"); }
  static Support support(Kind<FlattenLayer>) { return Support::all("Reshape [0,-1] (Transpose first if channels-last)"); }
  static Support support(Kind<GlobalAvgPoolLayer>) { return Support::none("not in an int8 model (qglobal_avg_pool is)"); }
  static Support support(Kind<EmbeddingLayer>) { return Support::none("not in a static int8 model"); }
  static Support support(Kind<RnnLayer>) { return Support::none("not in a static int8 model"); }
  static Support support(Kind<ResidualLayer>) { return Support::none("not in an int8 model (qresidual is)"); }
  static Support support(Kind<GraphLayer>) { return Support::none("int8 graphs: not exported yet"); }
  static Support support(Kind<ExternalLayer>) { return Support::some("quant/'s kinds, each as its own row says"); }

 private:
  void refuse(Layer& l) {
    fail("export onnx: layer ", name_, " (", l.kind(), ") of the int8 model has no ONNX mapping");
  }

  QCtx& c_;
  const QValue& x_;
  const std::string& name_;
};

QValue emit_layer(QCtx& c, Layer& layer, const QValue& x, const std::string& name) {
  QuantOnnxEmit e(c, x, name);
  layer.accept(e);
  return e.y;
}

QValue emit_seq(QCtx& c, Sequential& net, QValue x, const std::string& prefix) {
  for (std::size_t i = 0; i < net.size(); ++i) {
    Layer& l = net.layer(i);
    x = emit_layer(c, l, x, prefix + (prefix.empty() ? "" : ".") + std::to_string(i) + "." + l.kind());
  }
  return x;
}

// Where ONNX Runtime's arithmetic (the quant_scheme=ort preset's choices, confirmed against ORT
// 1.23: docs/QUANT_SOURCES.md) differs from the model's scheme: one line per knob.
std::vector<std::string> ort_differences(const Policy& p, bool has_add, bool has_avg_pool) {
  const quant::QuantScheme s = quant::QuantScheme::from_policy(p);
  const quant::QuantScheme ort = quant::QuantScheme::from_policy(Policy::parse("torch,quant_scheme=ort"));
  std::vector<std::string> d;
  if (s.act_op != ort.act_op || s.round != ort.round)
    d.push_back(std::string("quantize: QuantizeLinear computes x / scale rounded half to even; the model ") +
                scale_op_name(s.act_op) + ", rounds " + round_rule_name(s.round) +
                " (quant_act_scale_op, quant_round)");
  if (s.requant != ort.requant || s.round != ort.round)
    d.push_back(std::string("requantization: ORT multiplies in float and rounds half to even; the model uses ") +
                requant_rule_name(s.requant) + " (quant_requant)");
  if (s.multiplier != ort.multiplier)
    d.push_back("requantization multiplier: ORT forms float32(float32(s_in*s_w)/s_out); the model forms it "
                "otherwise (quant_multiplier)");
  if (has_add && s.add_rule != ort.add_rule)
    d.push_back(std::string("residual add: ORT's QLinearAdd (float ratios, fma on the stored integers); the model's is ") +
                qadd_rule_name(s.add_rule) + " (quant_add)");
  if (has_avg_pool && s.avg_pool_rule != ort.avg_pool_rule)
    d.push_back(std::string("global average pool: ORT's M = s_in/(s_out*N) with its own output scale; the model's is ") +
                qavg_pool_rule_name(s.avg_pool_rule) + " (quant_avg_pool)");
  if (s.dot != DotRule::exact)
    d.push_back("products: the model sums them in int16 pairs (quant_u8s8_dot), as ORT's MLAS does on x86 without "
                "VNNI; on a CPU with VNNI, ORT sums exactly");
  return d;
}

bool contains_kind(Sequential& net, const std::string& kind) {
  for (std::size_t i = 0; i < net.size(); ++i) {
    Layer& l = net.layer(i);
    if (l.kind() == kind) return true;
    if (auto* r = quant::quant_layer_as<quant::QResidualLayer>(l); r && contains_kind(r->main(), kind)) return true;
  }
  return false;
}

}  // namespace

bool is_int8_model(Model& m) { return m.net->size() > 0 && m.net->layer(0).kind() == "quantize"; }

std::string emit_int8(Graph& g, Model& m, const std::string& x, const OnnxExportOptions& o, OnnxExport& r) {
  Sequential& net = *m.net;
  auto* in = quant::quant_layer_as<quant::QuantizeLayer>(net.layer(0));
  auto* out = quant::quant_layer_as<quant::DequantizeLayer>(net.layer(net.size() - 1));
  check(in && out, "export onnx: int8 model '", m.name, "' does not run from a quantize to a dequantize layer");
  const QuantizeParams& qp = in->op_params();
  check(qp.scale.size() == 1 && (qp.dtype == DType::i8 || qp.dtype == DType::u8), "export onnx: int8 model '", m.name,
        "': the input quantization is not per tensor int8/uint8");
  check(!o.expose_points || o.quant_form == OnnxExportOptions::QuantForm::qoperator,
        "export onnx: the activation points can be graph outputs in the QOperator form only (in QDQ form an "
        "interior QuantizeLinear output would keep ONNX Runtime from fusing the group it belongs to)");
  QCtx c{g, o, r, qp.dtype};
  QValue v{"", act_scale(c, "input", qp.scale[0]), act_zp(c, "input", qp.zero_point[0])};
  v.q = g.op("QuantizeLinear", {x, v.scale, v.zp}, "input_q");
  r.nodes.push_back("0.quantize: QuantizeLinear scale " + std::to_string(qp.scale[0]) + " zero point " +
                    std::to_string(qp.zero_point[0]) + " (" + dtype_name(qp.dtype) + ")");
  point(c, v, in->output_shape());
  // layers 1 .. n-2 (between the quantize and the dequantize)
  for (std::size_t i = 1; i + 1 < net.size(); ++i) {
    Layer& l = net.layer(i);
    v = emit_layer(c, l, v, std::to_string(i) + "." + l.kind());
  }
  const QuantizeParams& dp = out->op_params();
  r.nodes.push_back(std::to_string(net.size() - 1) + ".dequantize: DequantizeLinear to the float logits");
  r.notes = ort_differences(m.policy, contains_kind(net, "qresidual"), contains_kind(net, "qglobal_avg_pool"));
  return g.op("DequantizeLinear", {v.q, act_scale(c, "output", dp.scale[0]), act_zp(c, "output", dp.zero_point[0])},
              "output_dq");
}

}  // namespace detail

quant::QuantSupportColumn onnx_quant_export_support() { return quant::quant_support_of<detail::QuantOnnxEmit>(); }

}  // namespace convert
}  // namespace driftlab
