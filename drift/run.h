// One training run with its stamped report: the library function behind `driftlab train` and
// `compare`, and what the study runner calls for each of its training cells. It loads the data
// by name, builds the model under the Policy, trains through the model face (engine/train/
// runner.h) on the CPU or the device, evaluates, and (when `out` is set) writes model.dlm,
// metrics.json and metrics.csv atomically. Every report carries the stamp: Policy string (and
// every knob), model, dataset, seed, device, and the commit the binary was built from.
// The function prints nothing: the caller sees the run through the hooks.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/data/datasets.h"
#include "engine/train/runner.h"
#include "models/model_file.h"

namespace driftlab {

struct TrainRunSpec {
  std::string model = "lenet5";
  Policy policy = Policy::torch();
  DataSpec data;
  TrainConfig train;        // epochs, batch, SGD hyperparameters, seed
  bool normalize = false;   // standardise inputs with the training set's mean/std (kept in the file)
  Device device = Device::cpu;
  std::string out;          // folder for model.dlm, metrics.json, metrics.csv; "" writes nothing
};

// What a run says before its first epoch: "train MODEL policy P on DATA (N images), batch B, RUNNER".
struct TrainRunStart {
  std::string model, policy, dataset, runner;
  int64_t images = 0, batch = 0;
};

struct TrainRunHooks {
  std::function<void(const TrainRunStart&)> on_start;
  ProgressFn progress;                              // after every step
  std::function<void(const EpochStats&)> on_epoch;  // after every epoch (validation included)
};

struct TrainRunResult {
  std::string policy;               // canonical Policy string
  std::vector<EpochStats> epochs;
  EvalResult test;                  // on the test split, after the last epoch
  std::string model_path;           // "" when spec.out is empty
  int64_t model_bytes = 0;
  nlohmann::json report;            // metrics.json's content
};

// The stamp every report carries (metrics.json "stamp"; also the study runner's rows).
nlohmann::json run_stamp(const Policy& policy, const std::string& model, const std::string& dataset, uint64_t seed,
                         Device device);

TrainRunResult run_training(const TrainRunSpec& spec, DatasetLoader& loader, const TrainRunHooks& hooks = {});

// A trained model's data: the split of spec's dataset under the options the model file records
// (IMDb vocabulary and length unless spec overrides them), standardised with the file's
// input_mean/input_std, as the model was trained. What eval, predict, drift, attribute and the
// study runner evaluate a saved model on.
Dataset load_split_for(const LoadedModel& lm, DatasetLoader& loader, const DataSpec& spec, Split split);
// An input batch of a saved model standardised as its training data was.
void normalise_for(const LoadedModel& lm, Tensor& x);

}  // namespace driftlab
