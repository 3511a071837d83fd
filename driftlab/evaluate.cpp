#include "driftlab/evaluate.h"

#include <omp.h>

#include <cmath>
#include <memory>

#include "core/error.h"
#include "driftlab/model.h"
#include "engine/io/npy.h"
#include "engine/data/transform.h"
#include "engine/train/nonfinite.h"
#include "train/run.h"

namespace driftlab {

std::string nonfinite_str(const Tensor& t, int64_t i) {
  const double v = t.dtype() == DType::f64 ? t.data<double>()[i] : t.data<float>()[i];
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

Evaluation evaluate(const EvalRequest& r, DatasetLoader& loader) {
  const Device device = parse_device(r.device);
  SavedModel m = open_model(r.weights);
  const Dataset test = load_data(m, loader, r.data, Split::test);
  Evaluation e;
  e.test = open_runner(m.model(), device)->evaluate(test, r.batch);
  e.model = m.model().name;
  e.policy = m.model().policy.to_string();
  return e;
}

namespace {

// The checks both predict paths make before any work, and the model.
SavedModel open_for_prediction(const PredictRequest& r, Device* device) {
  *device = parse_device(r.device);  // an unknown device is refused before any work
  check(r.max_batch >= 0, "predict: --max-batch ", r.max_batch, " must be >= 0");
  check(*device == Device::cuda || r.max_batch == 0,
        "predict: --max-batch is for --device cuda (the CPU runs each size as one batch)");
  return open_model(r.weights);
}

}  // namespace

Tensor predict_inputs(SavedModel& m, const Tensor& input, const std::string& what, Device device, int64_t max_batch) {
  const Model& model = m.model();
  check(input.dtype() == DType::f32 || input.dtype() == DType::f64, "predict: ", what, " holds ",
        dtype_name(input.dtype()), "; the model takes float32 or float64 inputs");
  check(input.rank() >= 1 && input.dim(0) >= 1, "predict: ", what, " has shape ", shape_str(input.shape()),
        ": no inputs to predict");
  if (const int64_t bad = first_nonfinite(input); bad >= 0)
    fail("predict: ", what, " holds ", nonfinite_str(input, bad), " at index ", bad,
         " (flat, C order); the inputs must be finite");
  Shape want{input.rank() ? input.dim(0) : 0};
  want.insert(want.end(), model.input_shape.begin(), model.input_shape.end());
  check(input.shape() == want, "predict: ", what, " has shape ", shape_str(input.shape()), ", model ", model.name,
        " takes ", shape_str(want));
  Tensor x = input;
  if (!input_norm_from_metadata(m.loaded.metadata).identity()) {  // standardised in a copy: input is not written
    x = input.clone();
    normalise_for(m.loaded, x);
  }
  return open_runner(m.model(), device)->logits(x, max_batch);
}

Tensor predict_logits(const PredictRequest& r) {
  Device device;
  SavedModel m = open_for_prediction(r, &device);
  return predict_inputs(m, read_npy(r.input), r.input, device, r.max_batch);
}

PredictTiming time_predictions(const PredictRequest& r, DatasetLoader& loader, const PredictTimingHooks& hooks) {
  Device device;
  SavedModel m = open_for_prediction(r, &device);
  const Dataset test = load_data(m, loader, r.data, Split::test);
  std::vector<int64_t> idx(static_cast<std::size_t>(test.images.dim(0)));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  std::unique_ptr<Runner> runner = open_runner(m.model(), device);
  PredictTiming t;
  t.model = m.model().name;
  t.policy = m.model().policy.to_string();
  t.runner = runner->describe();
  t.device = device;
  t.threads = omp_get_max_threads();
  t.max_batch = r.max_batch;
  if (hooks.on_start) hooks.on_start(t);
  for (int64_t n : r.sizes) {
    check(n >= 1 && n <= test.images.dim(0), "predict: size ", n, " is outside 1..", test.images.dim(0),
          " (the test set of ", test.name, ")");
    t.rows.push_back({n, runner->time_prediction(gather_batch(test, idx, 0, n, m.model().dtype()), r.max_batch)});
    if (hooks.on_row) hooks.on_row(t.rows.back());
  }
  return t;
}

}  // namespace driftlab
