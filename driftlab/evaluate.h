// The library face (driftlab/model.h says what the face is): a saved model's test accuracy, the
// logits of given inputs, and its prediction time for batches of given sizes. Each takes a request
// of plain values and returns the numbers; the caller prints them (prediction timing shows each
// row through a hook as soon as it is measured, since a later size can still be refused).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "driftlab/model.h"
#include "engine/data/datasets.h"
#include "engine/train/runner.h"

namespace driftlab {

struct EvalRequest {
  std::string weights;      // model file (.dlm), fp32 or int8
  DataSpec data;            // the model file's data settings where this leaves them open
  int64_t batch = 1000;
  std::string device = "cpu";  // cpu | cuda
};
struct Evaluation {
  EvalResult test;          // loss, accuracy and count on the test split
  std::string model, policy;  // the model's name and canonical policy string
};
Evaluation evaluate(const EvalRequest& r, DatasetLoader& loader);

struct PredictRequest {
  std::string weights;
  std::string device = "cpu";
  int64_t max_batch = 0;    // cuda: at most N inputs per forward, logits joined (0: all at once)
  std::string input;        // predict_logits: an .npy of inputs (N, the model's input shape), f32 or f64
  DataSpec data;            // time_predictions: the test split the batches come from
  std::vector<int64_t> sizes = {1000, 10000};  // time_predictions: batch sizes, each timed as one batch
};

// The logits of r.input's inputs (standardised as the model's training data was). Throws naming
// the file when it holds no inputs, another dtype, a non-finite value or another shape.
Tensor predict_logits(const PredictRequest& r);
// The logits of `x` (N, the model's input shape), float32 or float64, standardised as the model's
// training data was (in a copy: x is never written). The checks and errors of predict_logits,
// naming `what` (a file, or an argument: the Python module's "x").
Tensor predict_inputs(SavedModel& m, const Tensor& x, const std::string& what, Device device = Device::cpu,
                      int64_t max_batch = 0);

struct PredictTimingRow {
  int64_t inputs = 0;
  PredictTime time;         // host to host; on CUDA also the forward on device-resident input
};
struct PredictTiming {
  std::string model, policy;  // the model's name and canonical policy string
  std::string runner;         // the runner's description (device, kernels)
  Device device = Device::cpu;
  int threads = 0;            // CPU threads the timing ran with
  int64_t max_batch = 0;
  std::vector<PredictTimingRow> rows;  // in the order of r.sizes
};
struct PredictTimingHooks {
  std::function<void(const PredictTiming&)> on_start;     // before the first size (no rows yet)
  std::function<void(const PredictTimingRow&)> on_row;    // after each size
};
// The first n test inputs in file order as one batch, for each n in r.sizes (1..test size, else
// it throws when that size's turn comes).
PredictTiming time_predictions(const PredictRequest& r, DatasetLoader& loader, const PredictTimingHooks& hooks = {});

// A non-finite element of a float tensor as the errors name it: "nan", "inf", "-inf".
std::string nonfinite_str(const Tensor& t, int64_t i);

}  // namespace driftlab
