// White-box gradients of an int8 model by the straight-through estimator (STE), as PyTorch's
// quantization-aware training defines it: the gradient is that of the FAKE-QUANTIZED float graph,
// in which every weight is its dequantized int8 value and every activation point of the int8 model
// is fake-quantized, y = (clamp(round(x op s) + zp, qmin, qmax) - zp) * s, whose derivative is taken
// as 1 where round(x op s) + zp lies in [qmin, qmax] and 0 where the clamp saturates
// (aten/src/ATen/native/quantized/FakeQuantPerTensorAffine.cpp,
// fake_quantize_per_tensor_affine_cachemask: mask = (qval >= quant_min) & (qval <= quant_max)).
// The int8 model itself has no gradient (its layers are integer kernels); its DECISIONS stay the
// integer model's: the STE runner (below) answers logits() with the int8 model and
// input_gradient() with the fake-quantized graph's dL/dx, the loss and logits included in it being
// the int8 model's own where they are reported.
//
// The fake-quantized graph mirrors the int8 layers one for one, in float32, with the int8 model's
// Policy (its loss, relu gradient at zero, pooling ties), convolution without flip (quant/ flipped
// the weights before quantizing them):
//   quantize            -> fake_quant(input scale, zero point)
//   qconv2d / qdense    -> conv2d / dense over w = s_w[k] * w_q, b = bias * s_in * s_w[k]
//                          (the int32 bias, or the float bias the requantization adds, both in
//                          accumulator units), relu when fused, fake_quant(output)
//   qmaxpool2d          -> max pool of the same geometry
//   flatten, qrelu      -> flatten, relu (the quantized relu keeps the scale: no fake_quant)
//   qglobal_avg_pool    -> global average pool, fake_quant onto the input's grid (PyTorch) or the
//                          pool's own (ONNX Runtime)
//   qresidual           -> residual (main path mirrored, identity or option-A shortcut), relu when
//                          fused, fake_quant(output): PyTorch QAT's FloatFunctional add_relu
//   dequantize          -> nothing (the last fake_quant already gives the dequantized values)
// Its forward approximates the int8 model's (float sums instead of exact integer ones, the float
// add instead of the scheme's integer add: logits can differ by an output step or a few where a
// sum lands near a rounding boundary). Other layers are refused by name.
#pragma once
#include <memory>

#include "engine/layers/layer.h"
#include "engine/model.h"
#include "core/ops/quantize.h"
#include "engine/train/runner.h"
#include "quant/visit.h"

namespace driftlab {
namespace quant {

// Fake quantization of a float32 tensor, per tensor (one scale and zero point), with the straight-
// through gradient: dx = dy where the unclamped quantized value lies in [qmin, qmax], else 0
// (NaN inputs: 0). The rounding and the scale operation (divide or multiply by the reciprocal) are
// the scheme's, as in its quantize kernel.
class FakeQuantLayer : public QuantLayer {
 public:
  DL_ACCEPT_QUANT_VISITOR(fake_quant)
  FakeQuantLayer(const Shape& in, const QuantizeParams& p);
  std::string kind() const override { return "fake_quant"; }
  std::string describe() const override;
  Shape output_shape() const override { return shape_; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  Tensor backward(RunContext& ctx, const Tensor& dy) override;
  const QuantizeParams& op_params() const { return p_; }

 private:
  Shape shape_;
  QuantizeParams p_;
  std::vector<uint8_t> mask_;  // recorded forward: which elements pass the gradient
};

// The fake-quantized float graph of `int8` (a model made by quant::quantize_model or read from an
// int8 model file). Throws naming the first layer it cannot mirror.
Model fake_quant_model(Model& int8);
// Which layers fake_quant_model mirrors (the capability table's ste column, driftlab model kinds).
SupportColumn ste_support();
QuantSupportColumn ste_quant_support();

// A Runner over an int8 model whose input_gradient is the STE gradient of `fake` (its
// fake_quant_model) and whose logits, and the loss and logits reported with a gradient, are the
// int8 model's. Inference only: train_step and the optimiser state are refused. Both models must
// outlive the runner.
std::unique_ptr<Runner> open_ste_runner(Model& int8, Model& fake, const ExecContext& exec = {});

}  // namespace quant
}  // namespace driftlab
