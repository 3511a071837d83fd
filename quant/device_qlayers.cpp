// The device counterparts of the int8 layers (quant/qlayers.h), for `eval` / `predict --device
// cuda` of a quantized model: driftlab's own CUDA int8 kernels (kernels/cuda/quant.cu), which give
// the reference kernels' bytes (every integer sum is exact; the roundings are the shared
// functions of engine/ops/quant.h). Each is made from the op params its CPU layer resolved (so the
// scheme is resolved once for both devices) and device copies of its int8 weights and int32 bias,
// uploaded once. Inference only, like the CPU layers.
//
// Not on the device yet (refused by name when a model holds them): qrelu, qglobal_avg_pool and
// qresidual (no CUDA kernels for the quantized add and average), and qconv2d / qdense under a
// scheme whose dot product is x86's int16 product pairs (DotRule::int16_pairs_*: the onednn and
// ort schemes as they run on CPUs without VNNI), which the dp4a kernels do not emulate.
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

std::string QConv2dLayer::device_unsupported() const { return dot_unsupported(p_.dot); }
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

}  // namespace quant
}  // namespace driftlab
