// The device counterparts of the int8 layers (quant/qlayers.h), for `eval` / `predict --device
// cuda` of a quantized model: driftlab's own CUDA int8 kernels (kernels/cuda/quant.cu), which give
// the reference kernels' bytes (every integer sum is exact; the roundings are the shared
// functions of core/ops/quant.h). Each is made from the op params its CPU layer resolved (so the
// scheme is resolved once for both devices) and device copies of its int8 weights and int32 bias,
// uploaded once. Inference only, like the CPU layers.
//
// An int8 ResNet (qresidual: its main path's device layers, the option-A shortcut and the
// quantized add under every QAddRule; qglobal_avg_pool; qrelu) runs on the device too. Not on the
// device (refused by name when a model holds them): qconv2d / qdense under a scheme whose dot
// product is x86's int16 product pairs (DotRule::int16_pairs_*: the onednn and ort schemes as they
// run on CPUs without VNNI), which the dp4a kernels do not emulate.
#include "engine/cuda/device_layer.h"
#include "kernels/cuda/ops.h"
#include "quant/qlayers.h"

namespace driftlab {
namespace quant {

using cuda::CudaContext;
using cuda::DeviceTensor;

namespace {

[[noreturn]] void no_backward(const char* kind) {
  fail(kind, ": int8 layers are inference-only (no backward on the device either)");
}

class DeviceQuantize : public DeviceLayer {
 public:
  DeviceQuantize(const Shape& in, const QuantizeParams& p, bool to_int) : in_(in), p_(p), to_int_(to_int) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input(to_int_ ? "quantize" : "dequantize", *x, in_);
    DeviceValue y = make_value(run.ctx, x->shape(), to_int_ ? p_.dtype : DType::f32);
    if (to_int_)
      cuda::quantize_own(run.ctx, p_, *x, *y);
    else
      cuda::dequantize_own(run.ctx, p_, *x, *y);
    return y;
  }
  DeviceValue backward(DeviceRunContext&, const DeviceValue&) override {
    no_backward(to_int_ ? "quantize" : "dequantize");
  }

 private:
  Shape in_;
  QuantizeParams p_;
  bool to_int_;
};

class DeviceQConv2d : public DeviceLayer {
 public:
  DeviceQConv2d(CudaContext& ctx, const QConv2dLayer& l)
      : p_(l.op_params()), w_(cuda::to_device(ctx, l.int_weight())) {
    if (const Tensor* b = l.int_bias()) b_ = cuda::to_device(ctx, *b);
  }
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("qconv2d", *x, {p_.g.c, p_.g.h, p_.g.w});
    p_.g.n = x->dim(0);
    DeviceValue y = make_value(run.ctx, p_.g.y_shape(), p_.y_dtype);
    cuda::qconv2d_forward_own(run.ctx, p_, *x, w_, p_.has_bias ? &b_ : nullptr, *y);
    return y;
  }
  DeviceValue backward(DeviceRunContext&, const DeviceValue&) override { no_backward("qconv2d"); }

 private:
  QConv2dParams p_;
  DeviceTensor w_, b_;
};

class DeviceQDense : public DeviceLayer {
 public:
  DeviceQDense(CudaContext& ctx, const QDenseLayer& l) : p_(l.op_params()), w_(cuda::to_device(ctx, l.int_weight())) {
    if (const Tensor* b = l.int_bias()) b_ = cuda::to_device(ctx, *b);
  }
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("qdense", *x, {p_.in});
    p_.n = x->dim(0);
    DeviceValue y = make_value(run.ctx, {p_.n, p_.out}, p_.y_dtype);
    cuda::qdense_forward_own(run.ctx, p_, *x, w_, p_.has_bias ? &b_ : nullptr, *y);
    return y;
  }
  DeviceValue backward(DeviceRunContext&, const DeviceValue&) override { no_backward("qdense"); }

 private:
  QDenseParams p_;
  DeviceTensor w_, b_;
};

class DeviceQMaxPool2d : public DeviceLayer {
 public:
  explicit DeviceQMaxPool2d(const QPool2dParams& p) : p_(p) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("qmaxpool2d", *x, {p_.g.c, p_.g.h, p_.g.w});
    p_.g.n = x->dim(0);
    DeviceValue y = make_value(run.ctx, p_.g.y_shape(), p_.dtype);
    cuda::qmaxpool2d_forward_own(run.ctx, p_, *x, *y);
    return y;
  }
  DeviceValue backward(DeviceRunContext&, const DeviceValue&) override { no_backward("qmaxpool2d"); }

 private:
  QPool2dParams p_;
};

class DeviceQRelu : public DeviceLayer {
 public:
  explicit DeviceQRelu(const QReluLayer& l) : in_(l.input_shape()), dtype_(l.dtype()), zp_(l.zero_point()) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("qrelu", *x, in_);
    DeviceValue y = make_value(run.ctx, x->shape(), dtype_);
    cuda::qrelu_own(run.ctx, dtype_, zp_, *x, *y);
    return y;
  }
  DeviceValue backward(DeviceRunContext&, const DeviceValue&) override { no_backward("qrelu"); }

 private:
  Shape in_;
  DType dtype_;
  int32_t zp_;
};

class DeviceQGlobalAvgPool : public DeviceLayer {
 public:
  explicit DeviceQGlobalAvgPool(const QGlobalAvgPoolParams& p) : p_(p) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("qglobal_avg_pool", *x, {p_.c, p_.h, p_.w});
    p_.n = x->dim(0);
    DeviceValue y = make_value(run.ctx, {p_.n, p_.c}, p_.dtype);
    cuda::qglobal_avg_pool_own(run.ctx, p_, *x, *y);
    return y;
  }
  DeviceValue backward(DeviceRunContext&, const DeviceValue&) override { no_backward("qglobal_avg_pool"); }

 private:
  QGlobalAvgPoolParams p_;
};

// The main path's layers on the device (each an int8 layer making its own), named main.<i> in
// errors; the shortcut (identity or option A) and the add as the CPU layer's add().
class DeviceQResidual : public DeviceLayer {
 public:
  DeviceQResidual(CudaContext& ctx, QResidualLayer& l)
      : in_(l.input_shape()), spec_(l.spec()), p_(l.add_params()) {
    std::vector<DeviceSequential::Entry> entries;
    for (std::size_t i = 0; i < l.main().size(); ++i) {
      Layer& m = l.main().layer(i);
      QuantLayer* q = as_quant_layer(m);  // device_unsupported() said every one is
      check(q != nullptr, "cuda: qresidual main.", i, " (", m.kind(), "): no CUDA implementation yet");
      entries.push_back({"main." + std::to_string(i), m.kind(), q->make_device(ctx)});
    }
    main_ = std::make_unique<DeviceSequential>(std::move(entries));
  }
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("qresidual", *x, in_);
    DeviceValue y = main_->forward(run, x);
    DeviceValue s = x;
    if (spec_.option_a) {
      s = make_value(run.ctx, y->shape(), x->dtype());
      cuda::qshortcut_option_a_own(run.ctx, x->dtype(), spec_.shortcut_in.zero_point, spec_.stride, spec_.pad_before,
                                   *x, *s);
    }
    check(s->shape() == y->shape(), "qresidual: shortcut ", shape_str(s->shape()), " vs main ", shape_str(y->shape()));
    QAddParams p = p_;
    p.n = y->dim(0), p.c = y->dim(1), p.h = y->dim(2), p.w = y->dim(3);  // channels-last positions, as the CPU's
    DeviceValue out = make_value(run.ctx, y->shape(), y->dtype());
    cuda::qadd_own(run.ctx, p, *y, *s, *out);
    return out;
  }
  DeviceValue backward(DeviceRunContext&, const DeviceValue&) override { no_backward("qresidual"); }

 private:
  Shape in_;
  QResidualSpec spec_;
  QAddParams p_;
  std::unique_ptr<DeviceSequential> main_;
};

std::string dot_unsupported(DotRule dot) {
  if (dot == DotRule::exact) return "";
  return std::string("its dot product is x86's int16 product pairs (quant_u8s8_dot=") +
         (dot == DotRule::int16_pairs_channels ? "int16_pairs_channels" : "int16_pairs_hwc") +
         "), which the CUDA int8 kernels (dp4a, exact int32 sums) do not emulate";
}

}  // namespace

std::string QuantizeLayer::device_unsupported() const { return ""; }
std::unique_ptr<DeviceLayer> QuantizeLayer::make_device(CudaContext&) {
  return std::make_unique<DeviceQuantize>(shape_, p_, true);
}

std::string DequantizeLayer::device_unsupported() const { return ""; }
std::unique_ptr<DeviceLayer> DequantizeLayer::make_device(CudaContext&) {
  return std::make_unique<DeviceQuantize>(shape_, p_, false);
}

std::string QConv2dLayer::device_unsupported() const {
  if (p_.g.groups != 1) return "grouped qconv2d (groups " + std::to_string(p_.g.groups) + ") has no CUDA kernel yet";
  return dot_unsupported(p_.dot);
}
std::unique_ptr<DeviceLayer> QConv2dLayer::make_device(CudaContext& ctx) {
  return std::make_unique<DeviceQConv2d>(ctx, *this);
}

std::string QDenseLayer::device_unsupported() const { return dot_unsupported(p_.dot); }
std::unique_ptr<DeviceLayer> QDenseLayer::make_device(CudaContext& ctx) {
  return std::make_unique<DeviceQDense>(ctx, *this);
}

std::string QMaxPool2dLayer::device_unsupported() const { return ""; }
std::unique_ptr<DeviceLayer> QMaxPool2dLayer::make_device(CudaContext&) {
  return std::make_unique<DeviceQMaxPool2d>(p_);
}

std::string QReluLayer::device_unsupported() const { return ""; }
std::unique_ptr<DeviceLayer> QReluLayer::make_device(CudaContext&) { return std::make_unique<DeviceQRelu>(*this); }

std::string QAddLayer::device_unsupported() const {
  return "qadd runs in int8 graphs, which have no CUDA path yet (graph models run on the CPU)";
}
std::unique_ptr<DeviceLayer> QAddLayer::make_device(CudaContext&) {
  fail("qadd: ", device_unsupported());
}

std::string QGlobalAvgPoolLayer::device_unsupported() const { return ""; }
std::unique_ptr<DeviceLayer> QGlobalAvgPoolLayer::make_device(CudaContext&) {
  return std::make_unique<DeviceQGlobalAvgPool>(p_);
}

// The first main-path layer without a device counterpart, by its place in the block.
std::string QResidualLayer::device_unsupported() const {
  for (std::size_t i = 0; i < main_->size(); ++i) {
    Layer& m = main_->layer(i);
    QuantLayer* q = as_quant_layer(m);  // an engine layer here has no int8 device form
    const std::string why = q ? q->device_unsupported() : "no CUDA implementation yet";
    if (!why.empty()) return "main." + std::to_string(i) + " (" + m.kind() + "): " + why;
  }
  return "";
}
std::unique_ptr<DeviceLayer> QResidualLayer::make_device(CudaContext& ctx) {
  return std::make_unique<DeviceQResidual>(ctx, *this);
}

namespace {

// Which int8 kinds have a device counterpart (the capability table's cuda column; each layer's
// device_unsupported() above says it for an instance).
struct DeviceQuantSupport {
  static Support support(Kind<QuantizeLayer>) { return Support::all("own kernel"); }
  static Support support(Kind<DequantizeLayer>) { return Support::all("own kernel"); }
  static Support support(Kind<QConv2dLayer>) { return Support::some("__dp4a kernels; the dot rules they have; one group"); }
  static Support support(Kind<QDenseLayer>) { return Support::some("__dp4a kernels; the dot rules they have"); }
  static Support support(Kind<QMaxPool2dLayer>) { return Support::all("own kernel"); }
  static Support support(Kind<QGlobalAvgPoolLayer>) { return Support::all("own kernel"); }
  static Support support(Kind<QResidualLayer>) { return Support::some("where its main path's layers are"); }
  static Support support(Kind<QReluLayer>) { return Support::all("own kernel"); }
  static Support support(Kind<QDynDenseLayer>) { return Support::none("no CUDA implementation yet"); }
  static Support support(Kind<QDynRnnLayer>) { return Support::none("no CUDA implementation yet"); }
  static Support support(Kind<QAddLayer>) { return Support::none("int8 graphs: no CUDA path yet"); }
  static Support support(Kind<FakeQuantLayer>) { return Support::none("no CUDA implementation yet"); }
};

}  // namespace

QuantSupportColumn device_quant_support() { return quant_support_of<DeviceQuantSupport>(); }

}  // namespace quant
}  // namespace driftlab
