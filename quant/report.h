// What quantization did to a model (driftlab quantize --report): per-layer SQNR between the fp32
// activations and the dequantized int8 ones, agreement of predictions. Timing and file sizes are
// measured by the CLI around these.
#pragma once
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/train/runner.h"
#include "quant/ptq.h"

namespace driftlab {
namespace quant {

struct LayerSqnr {
  std::string point;  // the observed point ("input", "<index>.<kind>" of the fp32 layer)
  double sqnr_db;     // 10 log10(sum x^2 / sum (x - dequant(q))^2); +inf when exact
  int64_t n;
};

// Runs fp32 and the quantized model side by side on x (float32, a batch) and compares each observed
// point's activation: the fp32 layer's output there vs the int8 layer's output dequantized with its
// scale and zero point. `q` is the PtqResult of fp32 (its points name where to look).
std::vector<LayerSqnr> layer_sqnr(Model& fp32, PtqResult& q, const Tensor& x);

// A dynamically quantized model (quant/dynamic.h) has the fp32 model's layers one for one: each
// layer's output (float in both) compared, named "<index>.<kind>" of the fp32 layer.
std::vector<LayerSqnr> layer_sqnr_dynamic(Model& fp32, Model& q, const Tensor& x);

// The int8 model's integer activations at the PTQ's points for x, in PtqResult::points' order (the
// quantized input, each qconv/qdense output, a residual's inner points then its add), and the layer
// that produced each (oracle tests compare them one by one).
std::vector<Tensor> int8_activations(Model& q, const Tensor& x, std::vector<Layer*>* producers = nullptr);

// Argmax of each row of logits (N,K), the first maximum on ties: the engine's (runner.h).
using driftlab::predictions;

}  // namespace quant
}  // namespace driftlab
