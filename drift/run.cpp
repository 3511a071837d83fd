#include "drift/run.h"

#include <filesystem>
#include <iomanip>
#include <sstream>

#include "engine/build_info.h"
#include "engine/data/transform.h"
#include "models/model_file.h"
#include "models/models.h"

namespace driftlab {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json epoch_json(const EpochStats& e) {
  return {{"epoch", e.epoch},           {"train_loss", e.train_loss}, {"train_acc", e.train_acc},
          {"val_loss", e.val_loss},     {"val_acc", e.val_acc},       {"seconds", e.seconds},
          {"images_per_s", e.images_per_s}, {"skipped_steps", e.skipped_steps}, {"lr", e.lr}};
}

}  // namespace

json run_stamp(const Policy& policy, const std::string& model, const std::string& dataset, uint64_t seed,
               Device device) {
  return {{"policy", policy.to_string()}, {"model", model},          {"dataset", dataset},
          {"seed", seed},                 {"device", device_name(device)}, {"commit", build_commit()}};
}

TrainRunResult run_training(const TrainRunSpec& spec, DatasetLoader& loader, const TrainRunHooks& hooks) {
  Dataset train = loader.load(spec.data, Split::train);
  Dataset test = loader.load(spec.data, Split::test);
  InputNorm norm;
  const bool imdb = spec.data.dataset == "imdb";
  check(!(imdb && spec.normalize), "train: --normalize would turn imdb's token ids into non-integers; drop it");
  if (spec.normalize) norm = compute_standardization(train);
  apply_norm(train, norm);
  apply_norm(test, norm);
  // Token models are built for the reader's vocabulary (V words + padding + OOV) and length.
  ModelArgs margs;
  if (imdb) {
    bool token_model = false;
    for (const auto& mi : model_table()) token_model |= mi.name == spec.model && mi.num_ids > 0;
    check(token_model, "train: --dataset imdb gives token ids; ", spec.model,
          " is not a token model (lstm-imdb, gru-imdb)");
    const ImdbOptions io = imdb_options(spec.data, nullptr);
    margs = {io.vocab_size + kFirstWordId, io.max_len};
  }
  Model model = build_model(spec.model, spec.policy, spec.train.seed, margs);
  Shape per_sample(train.images.shape().begin() + 1, train.images.shape().end());
  check(per_sample == model.input_shape, "train: model ", spec.model, " takes ", shape_str(model.input_shape),
        " inputs but ", train.name, " has ", shape_str(per_sample));
  std::unique_ptr<Runner> runner = open_runner(model, spec.device, spec.train);
  TrainRunResult out;
  out.policy = spec.policy.to_string();
  if (hooks.on_start)
    hooks.on_start({spec.model, out.policy, train.name, runner->describe(), train.images.dim(0), spec.train.batch});
  for (int e = 0; e < spec.train.epochs; ++e) {
    EpochStats st = runner->run_epoch(train, &test, hooks.progress);
    if (hooks.on_epoch) hooks.on_epoch(st);
    out.epochs.push_back(st);
  }
  out.test = runner->evaluate(test, 1000);
  runner->sync_to_model();
  if (spec.out.empty()) return out;

  const std::string device = device_name(spec.device);
  const OptimConfig& opt = spec.train.optim;
  fs::create_directories(spec.out);
  json meta = {{"dataset", spec.data.dataset}, {"epochs", spec.train.epochs}, {"batch", spec.train.batch},
               {"optimizer", optimizer_name(opt.kind)}, {"lr", opt.lr},
               {"schedule", schedule_string(spec.train.schedule)},
               {"device", device},
               {"momentum", opt.momentum},     {"nesterov", opt.nesterov},   {"weight_decay", opt.weight_decay},
               {"seed", spec.train.seed},      {"threads", default_threads()}, {"train_samples", train.images.dim(0)},
               {"test_accuracy", out.test.accuracy}, {"test_loss", out.test.loss},
               {"input_mean", norm.mean}, {"input_std", norm.std}};
  if (opt.kind == OptimizerKind::adam) meta["betas"] = {opt.beta1, opt.beta2};
  if (imdb) meta["imdb"] = imdb_json(imdb_options(spec.data, nullptr));
  out.model_path = (fs::path(spec.out) / "model.dlm").string();
  save_model(out.model_path, model, meta);
  out.model_bytes = static_cast<int64_t>(fs::file_size(out.model_path));
  out.report = {{"model", spec.model},  {"policy", out.policy}, {"policy_full", spec.policy.to_full_string()},
                {"device", device},     {"meta", meta},
                {"test", {{"loss", out.test.loss}, {"accuracy", out.test.accuracy}}},
                {"model_file", out.model_path}, {"model_bytes", out.model_bytes},
                {"stamp", run_stamp(spec.policy, spec.model, spec.data.dataset, spec.train.seed, spec.device)}};
  json eps = json::array();
  std::ostringstream csv;
  csv << "model,policy,seed,device,epoch,train_loss,train_acc,val_loss,val_acc,seconds,images_per_s\n";
  for (const auto& st : out.epochs) {
    eps.push_back(epoch_json(st));
    csv << spec.model << ",\"" << out.policy << "\"," << spec.train.seed << "," << device << "," << st.epoch << ","
        << std::setprecision(9) << st.train_loss << "," << st.train_acc << "," << st.val_loss << "," << st.val_acc
        << "," << st.seconds << "," << st.images_per_s << "\n";
  }
  out.report["epochs"] = eps;
  // --step-loss: every step's loss (NaN for a skipped one: null in the JSON), in steps.csv too.
  if (spec.train.step_losses) {
    std::ostringstream steps;
    steps << "epoch,step,loss\n" << std::setprecision(9);
    json all = json::array();
    int64_t k = 0;
    for (const auto& st : out.epochs)
      for (double l : st.step_losses) {
        steps << st.epoch << "," << ++k << "," << l << "\n";
        all.push_back(l);
      }
    out.report["step_losses"] = all;
    write_file_atomic((fs::path(spec.out) / "steps.csv").string(), steps.str());
  }
  // --on-nonfinite: the mode, the steps skipped over the run and what the first one found.
  int64_t skipped = 0;
  std::string first_skip;
  for (const auto& st : out.epochs) {
    if (first_skip.empty()) first_skip = st.first_skip;
    skipped += st.skipped_steps;
  }
  out.report["nonfinite"] = {{"on_nonfinite", on_nonfinite_name(spec.train.on_nonfinite)},
                             {"skipped_steps", skipped}, {"first_skipped", first_skip}};
  write_file_atomic((fs::path(spec.out) / "metrics.json").string(), out.report.dump(2) + "\n");
  write_file_atomic((fs::path(spec.out) / "metrics.csv").string(), csv.str());
  return out;
}

Dataset load_split_for(const LoadedModel& lm, DatasetLoader& loader, const DataSpec& spec, Split split) {
  Dataset d = loader.load(spec, split, &lm.metadata);
  apply_norm(d, input_norm_from_metadata(lm.metadata));
  return d;
}

void normalise_for(const LoadedModel& lm, Tensor& x) { apply_norm(x, input_norm_from_metadata(lm.metadata)); }

}  // namespace driftlab
