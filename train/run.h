// One training run with its stamped report: the library function behind `driftlab train` and
// `compare`, and what the study runner calls for each of its training cells. It loads the data
// by name, builds the model under the Policy, trains through the model face (engine/train/
// runner.h) on the CPU or the device, evaluates, and (when `out` is set) writes model.dlm,
// metrics.json and metrics.csv atomically. Every report carries the stamp: Policy string (and
// every knob), model, dataset, seed, device, and the commit the binary was built from.
// The function prints nothing: the caller sees the run through the hooks.
// With `out` set, RUN/checkpoint.dlc (train/checkpoint.h) is written atomically after every epoch
// and every `checkpoint_every` steps; resume_training goes on from it and ends with the bytes an
// uninterrupted run would have written to model.dlm (on the CPU at the same thread count; on
// CUDA with cuda_deterministic).
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
  // The weights to start from instead of the Policy's initialisers: a model file (.dlm, its
  // BatchNorm statistics too) or a folder of .npy files as `weights export` writes them, in
  // init_policy's framework layout ("": the run's Policy). Converted from that Policy's
  // conventions to the run's (models/reparam.h) unless init_convert is false (raw tensors).
  std::string init;
  bool init_convert = true;
  std::string init_policy;
  int64_t checkpoint_every = 0;  // a checkpoint every N steps besides each epoch's (0: epochs only)
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
  // Asked after every step and every epoch: true ends the run there, with a checkpoint when `out`
  // is set (TrainRunResult::interrupted). The CLI's SIGINT/SIGTERM flag.
  std::function<bool()> stop_requested;
  // Test hooks (the CLI's DRIFTLAB_TEST_KILL): after each step, with the run's step count (before
  // any checkpoint at that step); halfway through writing this process's n-th checkpoint (n from
  // 1), and right after it is in place.
  std::function<void(int64_t step)> after_step;
  std::function<void(int n)> checkpoint_halfway;
  std::function<void(int n)> after_checkpoint;
};

struct TrainRunResult {
  std::string policy;               // canonical Policy string
  std::vector<EpochStats> epochs;
  EvalResult test;                  // on the test split, after the last epoch
  std::string model_path;           // "" when spec.out is empty
  int64_t model_bytes = 0;
  nlohmann::json report;            // metrics.json's content
  // stop_requested ended the run: after `stopped_batch` batches of epoch `stopped_epoch` (1-based;
  // stopped_batch 0: between epochs), `stopped_step` steps in all. Nothing but the checkpoint written.
  bool interrupted = false;
  int stopped_epoch = 0;
  int64_t stopped_batch = 0, stopped_step = 0;
  std::string checkpoint_path;      // the last checkpoint written ("" when none)
  std::vector<std::string> removed_temporaries;  // resume: temporaries of killed writers removed
};

// The stamp every report carries (metrics.json "stamp"; also the study runner's rows).
nlohmann::json run_stamp(const Policy& policy, const std::string& model, const std::string& dataset, uint64_t seed,
                         Device device);

TrainRunResult run_training(const TrainRunSpec& spec, DatasetLoader& loader, const TrainRunHooks& hooks = {});

struct Checkpoint;
// Goes on with the run whose checkpoint `ckpt` was read from run_dir/checkpoint.dlc: the same data,
// model, weights, optimiser, schedule, RNG streams and position in the epoch. The process must
// compute with the checkpoint's thread count (refused otherwise: the bits depend on it).
// Temporaries a killed writer left in run_dir (NAME.tmp.PID of a process no longer running) are
// removed and listed in the result.
TrainRunResult resume_training(const Checkpoint& ckpt, const std::string& run_dir, DatasetLoader& loader,
                               const TrainRunHooks& hooks = {});

// A trained model's data: the split of spec's dataset under the options the model file records
// (IMDb vocabulary and length unless spec overrides them), standardised with the file's
// input_mean/input_std, as the model was trained. What eval, predict, drift, attribute and the
// study runner evaluate a saved model on.
Dataset load_split_for(const LoadedModel& lm, DatasetLoader& loader, const DataSpec& spec, Split split);
// An input batch of a saved model standardised as its training data was.
void normalise_for(const LoadedModel& lm, Tensor& x);

}  // namespace driftlab
