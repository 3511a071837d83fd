// Calibration observers for int8 post-training quantization: each one watches the float32
// values one tensor (an activation) takes over the calibration batches and returns the float
// range [min, max] its framework would quantize it to. Turning a range into a scale and zero
// point is the scheme code's job, not the observer's.
//
// Each kind reproduces one framework's observer bit for bit, with the framework's own
// precision for every intermediate (float32 where the framework computes in float32 tensors,
// double where it computes in numpy float64); quant/observer.cpp cites file and function for
// each step. The kinds:
//   minmax          torch.ao.quantization MinMaxObserver (running min of batch mins, max of maxes);
//                   (believed equal to ONNX Runtime's MinMaxCalibrater(moving_average=False) and
//                   TFLite's calibrator: UNCONFIRMED, neither read for this)
//   moving_average  torch MovingAverageMinMaxObserver (first batch sets, then m += c*(cur - m))
//   histogram       torch 1.13 HistogramObserver: 2048-bin histogram grown across batches,
//                   then _non_linear_param_search (L2 error against dst_nbins = 2^bits levels)
//   percentile      ONNX Runtime HistogramCalibrater, CalibrationMethod.Percentile
//   entropy         ONNX Runtime HistogramCalibrater, CalibrationMethod.Entropy (KL search)
//
// Empty batches: the torch kinds ignore them (torch returns early); percentile/entropy refuse them
// (ORT would record a [0, 0] range for them, silently widening the range to 0).
// Non-finite inputs: every observer throws "<kind> observer: ..." naming the first NaN/inf it
// meets, leaving its state as it was before that batch. (torch's min/max propagate NaN into the
// range and its histogram observer then produces a NaN or meaningless range; ORT's numpy
// histogram raises on NaN bounds. A silent garbage range is worse than an error.)
//
// To add an observer kind: 1) an enumerator in ObserverKind and its name in observer.cpp's
// kObserverNames; 2) its knobs in ObserverConfig, each with the framework behaviour it copies;
// 3) a class in observer.cpp and a case in make_observer; 4) hand cases in
// tests/quant/test_observer.cpp and, where the framework runs here, an oracle case.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace driftlab {
namespace quant {

enum class ObserverKind { minmax, moving_average, histogram, percentile, entropy };

const char* observer_name(ObserverKind kind);               // "minmax", "moving_average", ...
ObserverKind observer_from_name(const std::string& name);  // throws listing the known names

struct ObserverConfig {
  ObserverKind kind = ObserverKind::minmax;
  double averaging_constant = 0.01;  // moving_average: torch MovingAverageMinMaxObserver averaging_constant
  int64_t bins = 2048;               // histogram: torch HistogramObserver bins; percentile/entropy: ORT num_bins
                                     // (ORT's defaults: Percentile 2048; Entropy 128 — set it for entropy)
  int64_t upsample_rate = 128;       // histogram: torch HistogramObserver upsample_rate
  int quant_bits = 8;                // histogram: torch dst_nbins = 2^bits (256 even with reduce_range)
  bool histc_int_bounds = true;      // histogram: torch 1.13 passes int()-truncated bounds to torch.histc
  double percentile = 99.999;        // percentile: ORT percentile
  int64_t quantized_bins = 128;      // entropy: ORT num_quantized_bins
  bool symmetric = false;            // percentile/entropy: ORT symmetric (percentile of |x|; ±threshold)
};

struct Range {
  float min, max;
};

// One per tensor being calibrated.
class Observer {
 public:
  virtual ~Observer() = default;
  virtual void observe(const Tensor& x) = 0;  // one calibration batch, float32, any shape
  virtual Range range() const = 0;            // throws if nothing was observed
  virtual bool empty() const = 0;
  virtual ObserverKind kind() const = 0;
};

std::unique_ptr<Observer> make_observer(const ObserverConfig& config);

// Weight ranges, float32: per tensor, and per output channel (axis 0). torch MinMaxObserver /
// PerChannelMinMaxObserver(ch_axis=0) ranges (before the scheme includes 0 or symmetrises).
Range minmax_range(const Tensor& w);
std::vector<Range> per_channel_minmax(const Tensor& w);

}  // namespace quant
}  // namespace driftlab
