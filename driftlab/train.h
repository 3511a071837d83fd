// The library face (driftlab/model.h says what the face is): training. A TrainRequest holds what
// `driftlab train` and `compare` take, as plain values; train() runs it through train/run.h and
// returns its TrainRunResult (the files it wrote, every epoch's numbers, the test accuracy).
// What the caller sees while a run goes on (start line, progress, epochs) and how it asks a run to
// stop (a signal, a deadline) are its own TrainRunHooks. resume() goes on with a run folder's
// checkpoint. compare() runs one request under several policies and returns a row per run.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/datasets.h"
#include "train/checkpoint.h"
#include "train/run.h"

namespace driftlab {

struct TrainRequest {
  std::string model = "lenet5";
  std::string policy = "torch";  // a policy string
  DataSpec data;
  int epochs = 1;
  int64_t batch = 128;
  std::string optimizer = "sgd";  // sgd | adam | rmsprop, each in the policy's formula
  double lr = 0.01;
  std::optional<double> momentum;  // unset: SGD's 0.9; every other optimiser's 0
  bool nesterov = false;
  double weight_decay = 0.0, beta1 = 0.9, beta2 = 0.999;
  std::string schedule;             // engine/train/schedule.h's syntax; "": a constant rate
  bool step_loss = false;           // keep every step's loss
  uint64_t seed = 1;
  std::string on_nonfinite = "stop";  // stop | skip-batch
  bool normalize = false;           // standardise inputs with the training set's mean/std
  std::string device = "cpu";       // cpu | cuda
  std::string out;                  // the run folder; "": nothing written
  std::string init;                 // start from these weights (.dlm or a folder of .npy files)
  std::string init_policy;          // init DIR: the policy the files were exported under
  bool init_convert = true;         // init: convert between conventions (false: raw tensors)
  std::string shuffle;              // "": the policy's shuffle knob; else that knob's value
  int64_t checkpoint_every = 0;     // a checkpoint every N steps besides each epoch's
};

// The request as train/run.h's spec: the policy parsed (with `shuffle` over its knob), the
// optimiser, schedule, non-finite rule and device parsed; throws on the first bad value, in the
// order above.
TrainRunSpec train_spec(const TrainRequest& r);

// One training run (train/run.h run_training): the caller's hooks see it go on and can stop it.
TrainRunResult train(const TrainRunSpec& spec, DatasetLoader& loader, const TrainRunHooks& hooks = {});
TrainRunResult train(const TrainRequest& r, DatasetLoader& loader, const TrainRunHooks& hooks = {});

// The checkpoint of the run in run_dir (train/checkpoint.h), read; throws when run_dir is not a
// folder or holds no checkpoint. The process must then compute with its `threads`.
Checkpoint read_run_checkpoint(const std::string& run_dir);
// Goes on with that run to its end (train/run.h resume_training): the final files are the bytes
// the uninterrupted run would have written.
TrainRunResult resume(const Checkpoint& ckpt, const std::string& run_dir, DatasetLoader& loader,
                      const TrainRunHooks& hooks = {});

// ---- several policies, one run each ----

struct CompareRequest {
  TrainRequest train;                 // everything but the policy and the folder
  std::string policies = "tensorflow,theano,torch";  // split_policies' syntax (driftlab/policy.h)
  std::string out;                    // "": runs/compare; each run in OUT/<its preset>
};
struct CompareRow {
  std::string policy;                 // the run's canonical policy string
  double train_loss = 0, train_acc = 0;  // the last epoch's
  double test_loss = 0, test_acc = 0;
  double seconds_per_epoch = 0;       // mean over the epochs
  int64_t model_bytes = 0;
};
struct CompareResult {
  std::string out;  // the folder (compare.json goes there)
  std::string model, device, dataset;
  uint64_t seed = 0;
  std::vector<TrainRunResult> runs;  // in the order of the policies
  std::vector<CompareRow> rows;      // one per run
};
struct CompareHooks {
  // The hooks of each run, asked just before it starts (its request already checked).
  std::function<TrainRunHooks(const TrainRequest& run)> run_hooks;
  // Each run's result, before the next run starts; throwing ends the comparison there.
  std::function<void(const TrainRequest& run, const TrainRunResult& result)> after_run;
};
// Runs r.train under each policy in turn, into OUT/<preset> (a policy is parsed when its turn
// comes), and returns the runs and their rows. Writes nothing else (report/compare.h writes
// compare.json).
CompareResult compare(const CompareRequest& r, DatasetLoader& loader, const CompareHooks& hooks = {});
CompareRow compare_row(const TrainRunResult& run);

}  // namespace driftlab
