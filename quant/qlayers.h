// The layers of a quantized model: they sit in an ordinary Sequential (engine/layers/sequential.h)
// between a QuantizeLayer (float32 in) and a DequantizeLayer (float32 out), carry int8/uint8
// tensors between them, and hold every number they compute with as buffers (saved in the model
// file): int8 weights, their scales, the bias as int32 (or float32 where the scheme adds a float
// bias inside the requantization), the input and output scale and zero point. Each resolves its
// numbers once, in its constructor, into the explicit op params of core/ops/quant.h; the
// kernels come from the registry (KernelBackend `backend`, reference by default).
// Quantized models are inference-only: backward throws.
#pragma once
#include "engine/layers/graph_layer.h"
#include "engine/layers/layer.h"
#include "engine/layers/sequential.h"
#include "core/ops/qadd.h"
#include "core/ops/qconv2d.h"
#include "core/ops/qdense.h"
#include "core/ops/qpool.h"
#include "core/ops/quantize.h"
#include "quant/scheme.h"
#include "quant/visit.h"

namespace driftlab {
namespace quant {

// A buffer Param over a tensor (saved with the model, never trained).
Param buffer(const std::string& name, Tensor t);

class QuantLayerBase : public QuantLayer {
 public:
  Tensor backward(RunContext&, const Tensor&) override;  // throws: int8 layers have no gradient
  std::vector<Param*> buffers() override;

 protected:
  const Tensor& buf(const std::string& name) const;  // throws naming the layer and buffer
  std::vector<Param> bufs_;
};

class QuantizeLayer : public QuantLayerBase {
 public:
  DL_ACCEPT_QUANT_VISITOR(quantize)
  QuantizeLayer(const Shape& in, const QuantizeParams& p, KernelBackend backend = KernelBackend::reference);
  std::string kind() const override { return "quantize"; }
  std::string device_unsupported() const override;  // quant/device_qlayers.cpp
  std::unique_ptr<DeviceLayer> make_device(cuda::CudaContext& ctx) override;
  std::string describe() const override;
  Shape output_shape() const override { return shape_; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  void refresh() override;
  const QuantizeParams& op_params() const { return p_; }

 private:
  Shape shape_;
  QuantizeParams p_;
  KernelBackend backend_;
};

class DequantizeLayer : public QuantLayerBase {
 public:
  DL_ACCEPT_QUANT_VISITOR(dequantize)
  DequantizeLayer(const Shape& in, const QuantizeParams& p, KernelBackend backend = KernelBackend::reference);
  std::string kind() const override { return "dequantize"; }
  std::string device_unsupported() const override;  // quant/device_qlayers.cpp
  std::unique_ptr<DeviceLayer> make_device(cuda::CudaContext& ctx) override;
  std::string describe() const override;
  Shape output_shape() const override { return shape_; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  void refresh() override;
  const QuantizeParams& op_params() const { return p_; }

 private:
  Shape shape_;
  QuantizeParams p_;
  KernelBackend backend_;
};

// What a quantized conv or dense layer is built from.
struct QLinearSpec {
  ActQParams in, out;
  QuantizedWeight weight;
  Tensor bias;  // int32 or float32 (quantize_bias), or undefined
  bool relu = false;
};

class QConv2dLayer : public QuantLayerBase {
 public:
  DL_ACCEPT_QUANT_VISITOR(qconv2d)
  QConv2dLayer(const Conv2dParams& geometry, const QuantScheme& s, QLinearSpec spec,
               KernelBackend backend = KernelBackend::reference);
  std::string kind() const override { return "qconv2d"; }
  std::string device_unsupported() const override;  // quant/device_qlayers.cpp
  std::unique_ptr<DeviceLayer> make_device(cuda::CudaContext& ctx) override;
  std::string describe() const override;
  Shape output_shape() const override { return {p_.g.k, p_.g.out_h(), p_.g.out_w()}; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  const QConv2dParams& op_params() const { return p_; }
  const QuantScheme& scheme() const { return scheme_; }
  bool fused_relu() const { return relu_; }
  const Tensor& int_weight() const { return w_; }  // what the kernel multiplies: (K,C,R,S) int8
  const Tensor* int_bias() const { return p_.has_bias ? &int_bias_ : nullptr; }  // (K) int32
  QLinearSpec spec() const;  // the numbers its buffers hold now (weights, scales, bias, in/out, relu)
  void refresh() override;

 private:
  QConv2dParams p_;
  QuantScheme scheme_;
  bool relu_;
  Tensor w_, int_bias_;
  KernelBackend backend_;
};

class QDenseLayer : public QuantLayerBase {
 public:
  DL_ACCEPT_QUANT_VISITOR(qdense)
  QDenseLayer(int64_t in, int64_t out, const QuantScheme& s, QLinearSpec spec,
              KernelBackend backend = KernelBackend::reference);
  std::string kind() const override { return "qdense"; }
  std::string device_unsupported() const override;  // quant/device_qlayers.cpp
  std::unique_ptr<DeviceLayer> make_device(cuda::CudaContext& ctx) override;
  std::string describe() const override;
  Shape output_shape() const override { return {p_.out}; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  const QDenseParams& op_params() const { return p_; }
  const QuantScheme& scheme() const { return scheme_; }
  bool fused_relu() const { return relu_; }
  const Tensor& int_weight() const { return w_; }  // (out,in) int8
  const Tensor* int_bias() const { return p_.has_bias ? &int_bias_ : nullptr; }  // (out) int32
  QLinearSpec spec() const;
  void refresh() override;

 private:
  QDenseParams p_;
  QuantScheme scheme_;
  bool relu_;
  Tensor w_, int_bias_;
  KernelBackend backend_;
};

class QMaxPool2dLayer : public QuantLayerBase {
 public:
  DL_ACCEPT_QUANT_VISITOR(qmaxpool2d)
  QMaxPool2dLayer(const Pool2dParams& geometry, DType dtype, KernelBackend backend = KernelBackend::reference);
  std::string kind() const override { return "qmaxpool2d"; }
  std::string device_unsupported() const override;  // quant/device_qlayers.cpp
  std::unique_ptr<DeviceLayer> make_device(cuda::CudaContext& ctx) override;
  std::string describe() const override;
  Shape output_shape() const override { return {p_.g.c, p_.g.out_h(), p_.g.out_w()}; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  const QPool2dParams& op_params() const { return p_; }

 private:
  QPool2dParams p_;
  KernelBackend backend_;
};

// Global average pooling (N,C,H,W) -> (N,C): the input's scale and zero point kept (PyTorch), or,
// under the other rules (ONNX Runtime's scale_ratio, TFLite's MEAN), requantized into the output's own `out`.
class QGlobalAvgPoolLayer : public QuantLayerBase {
 public:
  DL_ACCEPT_QUANT_VISITOR(qglobal_avg_pool)
  QGlobalAvgPoolLayer(const Shape& in, DType dtype, int32_t zero_point, KernelBackend backend = KernelBackend::reference);
  QGlobalAvgPoolLayer(const Shape& in, DType dtype, ActQParams input, ActQParams out, QAvgPoolRule rule,
                      KernelBackend backend = KernelBackend::reference);  // a rule with own_qparams()
  std::string kind() const override { return "qglobal_avg_pool"; }
  std::string device_unsupported() const override;  // quant/device_qlayers.cpp
  std::unique_ptr<DeviceLayer> make_device(cuda::CudaContext& ctx) override;
  bool own_qparams() const { return p_.own_qparams(); }  // an activation point of its own
  std::string describe() const override;
  Shape output_shape() const override { return {in_[0]}; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  void refresh() override;
  const QGlobalAvgPoolParams& op_params() const { return p_; }

 private:
  Shape in_;
  QGlobalAvgPoolParams p_;
  KernelBackend backend_;
};

// A residual block in int8: main(x) and the shortcut (identity, or option A: x[:, :, ::s, ::s] with
// zero channels, i.e. the zero point, padded before and after) added by the scheme's quantized add
// into the output's scale and zero point, the ReLU after it fused as the clamp (PyTorch add_relu).
struct QResidualSpec {
  ActQParams main_out, shortcut_in, out;
  bool relu = false, option_a = false;
  int64_t stride = 1, pad_before = 0;
};

class QResidualLayer : public QuantLayerBase {
 public:
  DL_ACCEPT_QUANT_VISITOR(qresidual)
  QResidualLayer(std::unique_ptr<Sequential> main, const QuantScheme& s, const QResidualSpec& spec,
                 KernelBackend backend = KernelBackend::reference);
  std::string kind() const override { return "qresidual"; }
  std::string device_unsupported() const override;  // quant/device_qlayers.cpp
  std::unique_ptr<DeviceLayer> make_device(cuda::CudaContext& ctx) override;
  std::string describe() const override;
  Shape output_shape() const override { return main_->current_shape(); }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  void refresh() override;
  void collect(const std::string& prefix, bool buffers, std::vector<std::pair<std::string, Param*>>& out) override;
  Sequential& main() { return *main_; }
  const QResidualSpec& spec() const { return spec_; }
  const Shape& input_shape() const { return in_; }
  const QAddParams& add_params() const { return p_; }
  const QuantScheme& scheme() const { return scheme_; }
  // forward with the main path computed by `run_main` (the report's walker: it sees inside).
  template <typename F>
  Tensor forward_with(RunContext& ctx, const Tensor& x, F&& run_main) {
    return add(ctx, x, run_main(*main_, x));
  }

 private:
  Tensor add(RunContext& ctx, const Tensor& x, const Tensor& main_y);
  std::unique_ptr<Sequential> main_;
  QuantScheme scheme_;
  QResidualSpec spec_;
  Shape in_;
  QAddParams p_;
  KernelBackend backend_;
};

// The quantized add of two values of an int8 graph (GraphLayer::add_multi; torch's
// FloatFunctional.add / add_relu, ONNX Runtime's QLinearAdd): a and b of one shape, each with
// its own scale and zero point, added by the scheme's rule (core/ops/qadd.h) into the output's,
// a ReLU after it fused as the clamp. Input order is the graph's (a rule may not be symmetric).
struct QAddSpec {
  ActQParams a, b, out;
  bool relu = false;
};

class QAddLayer : public QuantLayerBase, public MultiInputLayer {
 public:
  DL_ACCEPT_QUANT_VISITOR(qadd)
  QAddLayer(const Shape& shape, const QuantScheme& s, const QAddSpec& spec,
            KernelBackend backend = KernelBackend::reference);
  std::string kind() const override { return "qadd"; }
  std::string device_unsupported() const override;  // quant/device_qlayers.cpp
  std::unique_ptr<DeviceLayer> make_device(cuda::CudaContext& ctx) override;
  std::string describe() const override;
  Shape output_shape() const override { return shape_; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;  // throws: it reads two values
  Shape output_shape_for(const std::vector<Shape>& inputs, const std::string& who) const override;
  Tensor forward_all(RunContext& ctx, const std::vector<const Tensor*>& xs) override;
  void refresh() override;
  const QAddSpec& spec() const { return spec_; }
  const QAddParams& add_params() const { return p_; }

 private:
  Shape shape_;
  QuantScheme scheme_;
  QAddSpec spec_;
  QAddParams p_;
  KernelBackend backend_;
};

// ReLU on quantized values: max(q, zero_point) (PyTorch's quantized relu), same scale and zero point.
class QReluLayer : public QuantLayerBase {
 public:
  DL_ACCEPT_QUANT_VISITOR(qrelu)
  QReluLayer(const Shape& in, DType dtype, int32_t zero_point);
  std::string kind() const override { return "qrelu"; }
  std::string device_unsupported() const override;  // quant/device_qlayers.cpp
  std::unique_ptr<DeviceLayer> make_device(cuda::CudaContext& ctx) override;
  std::string describe() const override;
  Shape output_shape() const override { return shape_; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  void refresh() override;
  int32_t zero_point() const { return zp_; }
  DType dtype() const { return dtype_; }
  const Shape& input_shape() const { return shape_; }

 private:
  Shape shape_;
  DType dtype_;
  int32_t zp_;
};

// Which int8 kinds run on a CUDA device (quant/device_qlayers.cpp; the capability table, driftlab
// model kinds).
QuantSupportColumn device_quant_support();

}  // namespace quant
}  // namespace driftlab
