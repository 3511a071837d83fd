#include "driftlab/train.h"

#include <filesystem>

#include "core/error.h"
#include "driftlab/policy.h"
#include "engine/train/nonfinite.h"
#include "engine/train/optimizer.h"
#include "engine/train/schedule.h"

namespace driftlab {

namespace fs = std::filesystem;

TrainRunSpec train_spec(const TrainRequest& r) {
  TrainRunSpec spec;
  spec.model = r.model;
  spec.policy = Policy::parse(r.policy);
  if (!r.shuffle.empty()) spec.policy.set("shuffle", r.shuffle);  // the knob, by its short name
  spec.data = r.data;
  spec.train.epochs = r.epochs;
  spec.train.batch = r.batch;
  OptimConfig& c = spec.train.optim;
  c.kind = parse_optimizer(r.optimizer);
  c.lr = r.lr;
  // 0.9 is SGD's default momentum; RMSprop's is 0 (and Adam has none).
  c.momentum = r.momentum ? *r.momentum : (c.kind == OptimizerKind::sgd ? 0.9 : 0.0);
  c.nesterov = r.nesterov;
  c.weight_decay = r.weight_decay;
  c.beta1 = r.beta1;
  c.beta2 = r.beta2;
  spec.train.schedule = parse_schedule(r.schedule);
  spec.train.step_losses = r.step_loss;
  spec.train.seed = r.seed;
  spec.train.on_nonfinite = parse_on_nonfinite(r.on_nonfinite);
  spec.normalize = r.normalize;
  spec.device = parse_device(r.device);
  spec.out = r.out;
  spec.init = r.init;
  spec.init_convert = r.init_convert;
  spec.init_policy = r.init_policy;
  spec.checkpoint_every = r.checkpoint_every;
  check(r.init_convert || !r.init.empty(), "train: --no-convert is for --init (how the given weights are loaded)");
  check(r.init_policy.empty() || !r.init.empty(), "train: --init-policy is for --init DIR (the policy the .npy files "
        "were exported under)");
  return spec;
}

TrainRunResult train(const TrainRunSpec& spec, DatasetLoader& loader, const TrainRunHooks& hooks) {
  return run_training(spec, loader, hooks);
}

TrainRunResult train(const TrainRequest& r, DatasetLoader& loader, const TrainRunHooks& hooks) {
  return run_training(train_spec(r), loader, hooks);
}

Checkpoint read_run_checkpoint(const std::string& run_dir) {
  const std::string path = (fs::path(run_dir) / kCheckpointFile).string();
  std::error_code ec;
  check(fs::is_directory(run_dir, ec), "train --resume ", run_dir, ": no such run folder");
  check(fs::exists(path, ec), "train --resume ", run_dir, ": no ", kCheckpointFile,
        " in it (a run writes one after each epoch, and every N steps with --checkpoint-every N, when it has --out)");
  return read_checkpoint(path);
}

TrainRunResult resume(const Checkpoint& ckpt, const std::string& run_dir, DatasetLoader& loader,
                      const TrainRunHooks& hooks) {
  return resume_training(ckpt, run_dir, loader, hooks);
}

CompareRow compare_row(const TrainRunResult& run) {
  CompareRow row;
  const EpochStats& last = run.epochs.back();
  double secs = 0;
  for (const auto& e : run.epochs) secs += e.seconds;
  secs /= static_cast<double>(run.epochs.size());
  row.policy = run.policy;
  row.train_loss = last.train_loss;
  row.train_acc = last.train_acc;
  row.test_loss = run.test.loss;
  row.test_acc = run.test.accuracy;
  row.seconds_per_epoch = secs;
  row.model_bytes = run.model_bytes;
  return row;
}

CompareResult compare(const CompareRequest& r, DatasetLoader& loader, const CompareHooks& hooks) {
  const std::vector<std::string> policies = split_policies(r.policies);
  CompareResult res;
  res.out = r.out.empty() ? "runs/compare" : r.out;
  res.model = r.train.model;
  res.device = r.train.device;
  res.dataset = r.train.data.dataset;
  res.seed = r.train.seed;
  for (const std::string& policy : policies) {
    TrainRequest run = r.train;
    run.policy = policy;
    run.out = (fs::path(res.out) / Policy::parse(policy).preset).string();
    const TrainRunSpec spec = train_spec(run);
    res.runs.push_back(train(spec, loader, hooks.run_hooks ? hooks.run_hooks(run) : TrainRunHooks{}));
    if (hooks.after_run) hooks.after_run(run, res.runs.back());
    if (res.runs.back().interrupted) break;  // a run stopped by its hooks ends the comparison, without a row
    res.rows.push_back(compare_row(res.runs.back()));
  }
  return res;
}

}  // namespace driftlab
