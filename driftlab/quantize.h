// The library face (driftlab/model.h says what the face is): int8 post-training quantization of a
// saved fp32 model (quant/: static with calibration, or dynamic, weights only), the int8 model
// file written, and the numbers of `driftlab quantize --report` (file sizes, accuracy, per-point
// SQNR, inference time, predictions that change) as one plain struct; report/quantize.h writes it
// as JSON, CSV or Markdown.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "driftlab/model.h"
#include "engine/data/datasets.h"
#include "quant/ptq.h"
#include "quant/report.h"

namespace driftlab {

struct QuantizeRequest {
  std::string weights;                 // the fp32 model file
  std::string out;                     // the int8 model file to write
  std::string scheme = "torch_qnnpack";  // the toolchain whose quant_* knobs the policy takes
  std::string knobs;                   // quant knobs over the scheme's: "quant_round=half_away,..."
  std::string observer;                // over quant_observer ("": the scheme's)
  std::string mode = "auto";           // static | dynamic | auto (dynamic for LSTM/GRU models)
  // Static: calibrate on this float32 .npy (N, input shape), else on the first `calib` training
  // samples in file order, `calib_batch` per forward.
  std::string calib_data;
  int64_t calib = 1000, calib_batch = 32;
  DataSpec data;
};

struct QuantizeResult {
  std::string model;       // the model's name
  std::string policy;      // the int8 model's canonical policy string
  bool dynamic = false;
  std::string calibration;  // static: where the calibration samples came from ("first N of ...", or the file)
  int64_t calibration_samples = 0;
  // What was made: static: every activation point (range observed, scale, zero point); both: the
  // int8 network (dynamic: its layers one for one with the fp32 model's).
  quant::PtqResult int8;
  SavedModel fp32;         // the model it was made from (quantize_report compares the two)
};

// Quantizes r.weights under its policy with the scheme's quant group, then r.knobs, then
// r.observer, and writes r.out (with where the calibration came from in its metadata).
QuantizeResult quantize(const QuantizeRequest& r, DatasetLoader& loader);

struct QuantizeReport {
  std::string model, fp32_policy, int8_policy, scheme;
  std::string mode;         // static | dynamic
  std::string calibration;  // where the calibration samples came from, or why there were none
  std::string test_set;     // the test split's name
  uint64_t fp32_bytes = 0, int8_bytes = 0;  // the two files
  EvalResult fp32, int8;    // on the whole test split
  int64_t disagree = 0, compared = 0;  // test predictions of the int8 model that differ from fp32's
  int64_t inputs = 0;       // the first N test inputs: SQNR, and the inference time of one batch
  int threads = 0;          // CPU threads the time was measured with
  double fp32_s = 0, int8_s = 0;
  std::vector<quant::LayerSqnr> sqnr;  // per activation point (dynamic: per layer)
};
// What quantize() did to the model, measured on the CPU on r.data's test split: the int8 model as
// read back from r.out (what was written is what is reported), `inputs` test inputs for the SQNR
// and the timing (at most the test set).
QuantizeReport quantize_report(const QuantizeRequest& r, QuantizeResult& q, DatasetLoader& loader, int64_t inputs);

}  // namespace driftlab
