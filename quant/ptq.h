// Post-training static quantization (PTQ): calibrate, fold, convert. The fp32 model runs the
// calibration samples (inference semantics, in batches); an observer (quant/observer.h) watches
// the network input and the output of every conv/dense unit (after its ReLU when the ReLU is
// fused); then each unit becomes its int8 layer (quant/qlayers.h) with the scheme's numbers
// (quant/scheme.h), in an ordinary Sequential: quantize, int8 layers, dequantize.
//
// Layers supported: conv2d (+ BatchNorm, folded as torch.nn.utils.fusion does) (+ relu), dense
// (+ relu), max pooling, flatten, relu, global average pooling, residual blocks with identity or
// option-A shortcuts (+ relu, fused into the add): LeNet-1, LeNet-5, ResNet-20; and graph models
// (quant/graph_ptq.h: grouped convs, adds of two values). Any other layer is refused by name. Point names refer to the fp32 layer whose output is observed ("3.residual.main.2.relu").
#pragma once
#include <string>
#include <vector>

#include "engine/model.h"
#include "quant/scheme.h"

namespace driftlab {
namespace quant {

struct PtqOptions {
  int64_t calib_batch = 32;  // calibration samples per forward (the histogram observer depends on it)
  // When not empty: the scale and zero point of every point, in PtqResult::points' order, used
  // instead of calibrating (another toolchain's, to compare the integer arithmetic alone); the
  // calibration data may then be left undefined, and each point's range is reported as [0, 0].
  std::vector<ActQParams> qparams;
};

// One calibrated activation: where it is and the scale/zero point it was given.
struct ObservedPoint {
  std::string name;  // "input", or "<index>.<kind>" of the fp32 layer whose output was observed
  Range range;
  ActQParams q;
};

struct PtqResult {
  Model model;                        // the quantized model (policy: `policy`, with its quant knobs)
  std::vector<ObservedPoint> points;  // in network order
};

// Quantizes `fp32` (left unchanged) under the quant_* knobs of `policy`, calibrating on the rows
// of `calib` (N, input shape...) float32. Throws naming the layer that has no int8 form.
PtqResult quantize_model(Model& fp32, const Policy& policy, const Tensor& calib, const PtqOptions& options = {});

// The int8 network of `fp32` under `policy` with placeholder numbers (scale 1, zero point 0, fp32's
// own weights quantized): the shape a quantized model file's tensors are read into
// (quant/model_io.h), which then refreshes every layer from them.
Model build_quantized(Model& fp32, const Policy& policy);
// What static quantization makes of each fp32 layer kind (the capability table, driftlab model kinds).
SupportColumn ptq_support();

// The fp32 activations at the points a quantization under `policy` observes (PtqResult::points'
// order: the input, then each conv/dense/residual output, a residual's inner points first), for x.
std::vector<Tensor> fp32_activations(Model& fp32, const Policy& policy, const Tensor& x);

}  // namespace quant
}  // namespace driftlab
