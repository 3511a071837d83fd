#include "train/run.h"

#include "models/graph.h"

#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "train/checkpoint.h"
#include "models/reparam.h"
#include "engine/build_info.h"
#include "engine/data/transform.h"
#include "engine/random.h"
#include "models/model_file.h"
#include "models/models.h"
#include "models/weights_npy.h"

namespace driftlab {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json epoch_json(const EpochStats& e) {
  return {{"epoch", e.epoch},           {"train_loss", e.train_loss}, {"train_acc", e.train_acc},
          {"val_loss", e.val_loss},     {"val_acc", e.val_acc},       {"seconds", e.seconds},
          {"images_per_s", e.images_per_s}, {"first_step_seconds", e.first_step_seconds},
          {"images_per_s_after_first", e.images_per_s_after_first}, {"skipped_steps", e.skipped_steps}, {"lr", e.lr},
          {"overflow_steps", e.overflow_steps}, {"loss_scale", e.loss_scale}};
}

}  // namespace

json run_stamp(const Policy& policy, const std::string& model, const std::string& dataset, uint64_t seed,
               Device device) {
  return {{"policy", policy.to_string()}, {"model", model},          {"dataset", dataset},
          {"seed", seed},                 {"device", device_name(device)}, {"commit", build_commit()}};
}

namespace {

// FNV-1a 64 over a file's bytes, continuing from h.
uint64_t fnv1a64_file(const std::string& path, uint64_t h) {
  std::ifstream f(path, std::ios::binary);
  check(f.good(), "train: --init: cannot read ", path);
  std::vector<char> buf(1 << 16);
  while (f) {
    f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = fnv1a64(buf.data(), static_cast<std::size_t>(f.gcount()), h);
  }
  return h;
}

std::string hex64(uint64_t v) {
  std::ostringstream os;
  os << std::hex << std::setw(16) << std::setfill('0') << v;
  return os.str();
}

// Loads spec.init into the freshly built model; returns what metrics.json records of it.
json apply_init(const TrainRunSpec& spec, Model& model) {
  const std::string& path = spec.init;
  std::error_code ec;
  check(fs::exists(path, ec), "train: --init ", path, ": no such file or folder");
  auto from_init = [&](auto&& f) {
    try {
      return f();
    } catch (const Error& e) {
      fail("train: --init ", path, ": ", e.what());
    }
  };
  Policy from = model.policy;
  uint64_t hash = kFnv1a64Basis;
  json rec;
  if (fs::is_directory(path, ec)) {
    if (!spec.init_policy.empty()) from = from_init([&] { return Policy::parse(spec.init_policy); });
    // The files are in `from`'s framework layout, as `weights export` of a model under it wrote them.
    Model src = build_model(model.name, from, spec.train.seed, model_args(model));
    from_init([&] {
      import_weights_npy(src, path, NpyLayout::framework);
      return 0;
    });
    for (auto& [name, p] : src.net->named_params()) {
      const std::string file = (fs::path(path) / (name + ".npy")).string();
      if (const int64_t bad = first_nonfinite(p->value); bad >= 0)
        fail("train: --init ", file, ": element ", bad, " of ", name, " is not finite (in the model's ",
             dtype_name(src.dtype()), ")");
      const std::string file_name = name + ".npy";
      hash = fnv1a64(file_name.data(), file_name.size(), hash);
      hash = fnv1a64_file(file, hash);
    }
    from_init([&] {
      transfer_weights(src, model, spec.init_convert);
      return 0;
    });
    rec["kind"] = "npy";
  } else {
    check(spec.init_policy.empty(), "train: --init-policy is for a folder of .npy files; ", path,
          " is a model file, which names its own policy");
    LoadedModel lm = load_model(path);
    check(lm.model.name == model.name, "train: --init ", path, " holds ", lm.model.name, ", this run trains ",
          model.name);
    from = lm.model.policy;
    from_init([&] {
      transfer_weights(lm.model, model, spec.init_convert);
      return 0;
    });
    hash = fnv1a64_file(path, hash);
    rec["kind"] = "model";
  }
  rec["path"] = path;
  rec["fnv1a64"] = hex64(hash);
  rec["from_policy"] = from.to_string();
  rec["converted"] = spec.init_convert;
  return rec;
}

// Removes NAME.tmp.PID files in dir whose writer (PID) is no longer running: what a kill during
// write_file_atomic leaves. A temporary is never read as the file it was to become.
std::vector<std::string> remove_dead_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const std::size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || at + 5 >= name.size()) continue;
    const std::string pid = name.substr(at + 5);
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) == 0 || errno != ESRCH) continue;  // still running
    if (fs::remove(e.path(), ec)) removed.push_back(e.path().string());
  }
  return removed;
}

// The data order of a run as metrics.json records it.
json data_order_json(const TrainRunSpec& spec, const std::vector<EpochStats>& epochs) {
  json hashes = json::array();
  for (const auto& e : epochs) hashes.push_back(hex64(e.order_hash));
  return {{"shuffle", spec.policy.get("shuffle")}, {"shuffle_seed", spec.train.seed & 0xffffffffu},
          {"order_hash", "fnv1a64 of each epoch's sample indices as int64 little-endian"}, {"epochs", hashes}};
}

TrainRunResult train_from(const TrainRunSpec& spec, DatasetLoader& loader, const TrainRunHooks& hooks,
                          const Checkpoint* from, const std::string& from_path) {
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
    margs.num_ids = io.vocab_size + kFirstWordId;
    margs.steps = io.max_len;
  }
  // A graph model's nodes come from --init's model file (on a resume too: the file must still be
  // there), its weights as well unless a checkpoint gives them.
  if (spec.model == kGraphModelName) {
    std::error_code gec;
    check(!spec.init.empty() && !fs::is_directory(spec.init, gec), "train: --model graph needs --init FILE.dlm, a graph "
          "model file (driftlab import writes one): the graph's nodes and weights come from it");
    try {
      margs.graph = load_model(spec.init).model.graph;
    } catch (const Error& e) {
      fail("train: --init ", spec.init, ": ", e.what());
    }
    check(!margs.graph.empty(), "train: --init ", spec.init, " holds a zoo model, not a graph model");
  }
  Model model = build_model(spec.model, spec.policy, spec.train.seed, margs);
  Shape per_sample(train.images.shape().begin() + 1, train.images.shape().end());
  check(per_sample == model.input_shape, "train: model ", spec.model, " takes ", shape_str(model.input_shape),
        " inputs but ", train.name, " has ", shape_str(per_sample));
  check(spec.checkpoint_every >= 0, "train: --checkpoint-every ", spec.checkpoint_every, " must be >= 0");
  check(spec.checkpoint_every == 0 || !spec.out.empty(), "train: --checkpoint-every needs --out (the run folder "
        "the checkpoint goes to)");
  TrainRunResult out;
  json init_record;  // null: the Policy's initialisers
  json resumed = json::array();
  if (from) {
    auto tensors = model.net->named_params();
    for (auto& nb : model.net->named_buffers()) tensors.push_back(nb);
    check(from->tensors.size() == tensors.size(), "checkpoint: ", from_path, ": ", from->tensors.size(),
          " model tensors, ", spec.model, " has ", tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const auto& [name, t] = from->tensors[i];
      Tensor& v = tensors[i].second->value;
      check(name == tensors[i].first && t.dtype() == v.dtype() && t.shape() == v.shape(), "checkpoint: ", from_path,
            ": tensor ", i, " is '", name, "' ", shape_str(t.shape()), " ", dtype_name(t.dtype()), ", ", spec.model,
            " has '", tensors[i].first, "' ", shape_str(v.shape()), " ", dtype_name(v.dtype()));
      v = t.clone();
    }
    init_record = from->init;
    resumed = from->resumed;
    const EpochProgress& p = from->state.progress;
    resumed.push_back({{"epoch", from->state.epoch + (p.active ? 1 : 0)},
                       {"batch_in_epoch", p.active ? p.next_batch : 0},
                       {"step", from->state.step_index}});
    out.epochs = from->epochs;
  } else if (!spec.init.empty()) {
    init_record = apply_init(spec, model);
  }
  std::unique_ptr<Runner> runner = open_runner(model, spec.device, spec.train);
  if (from) {
    try {
      runner->set_train_state(from->state);
    } catch (const Error& e) {
      fail("checkpoint: ", from_path, ": ", e.what());
    }
  }
  out.policy = spec.policy.to_string();
  if (hooks.on_start)
    hooks.on_start({spec.model, out.policy, train.name, runner->describe(), train.images.dim(0), spec.train.batch});

  const std::string ckpt_path = spec.out.empty() ? "" : (fs::path(spec.out) / kCheckpointFile).string();
  const int64_t batches = (train.images.dim(0) + spec.train.batch - 1) / spec.train.batch;
  int writes = 0;
  int64_t saved_step = -1;
  auto save = [&] {
    Checkpoint c;
    c.spec = spec;
    c.threads = default_threads();
    c.init = init_record;
    runner->sync_to_model();
    for (auto& np : model.net->named_params()) c.tensors.emplace_back(np.first, np.second->value);
    for (auto& nb : model.net->named_buffers()) c.tensors.emplace_back(nb.first, nb.second->value);
    c.state = runner->train_state();
    c.epochs = out.epochs;
    c.resumed = resumed;
    const int n = ++writes;
    if (n == 1) fs::create_directories(spec.out);  // not before: a run that fails at once leaves no folder
    std::function<void()> halfway;
    if (hooks.checkpoint_halfway) halfway = [&] { hooks.checkpoint_halfway(n); };
    write_checkpoint(ckpt_path, c, halfway);
    out.checkpoint_path = ckpt_path;
    saved_step = runner->step_index();
    if (hooks.after_checkpoint) hooks.after_checkpoint(n);
  };
  auto stop_here = [&] {
    if (!ckpt_path.empty() && saved_step != runner->step_index()) save();
    const EpochProgress& p = runner->epoch_progress();
    out.interrupted = true;
    out.stopped_epoch = runner->epoch() + (p.active ? 1 : 0);
    out.stopped_batch = p.active ? p.next_batch : 0;
    out.stopped_step = runner->step_index();
    return out;
  };
  auto between_steps = [&] {
    const int64_t step = runner->step_index();
    if (hooks.after_step) hooks.after_step(step);
    if (spec.checkpoint_every > 0 && step % spec.checkpoint_every == 0 &&
        runner->epoch_progress().next_batch < batches)  // the epoch's end writes its own
      save();
    return !(hooks.stop_requested && hooks.stop_requested());
  };
  while (runner->epoch() < spec.train.epochs) {
    EpochStats st;
    if (!runner->run_epoch(train, &test, hooks.progress, between_steps, &st)) return stop_here();
    if (hooks.on_epoch) hooks.on_epoch(st);
    out.epochs.push_back(st);
    if (!ckpt_path.empty()) save();
    if (hooks.stop_requested && hooks.stop_requested() && runner->epoch() < spec.train.epochs) return stop_here();
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
  if (!init_record.is_null()) meta["init"] = init_record;
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
  csv << "model,policy,seed,device,epoch,train_loss,train_acc,val_loss,val_acc,seconds,images_per_s,"
         "skipped_steps,overflow_steps,loss_scale\n";
  for (const auto& st : out.epochs) {
    eps.push_back(epoch_json(st));
    csv << spec.model << ",\"" << out.policy << "\"," << spec.train.seed << "," << device << "," << st.epoch << ","
        << std::setprecision(9) << st.train_loss << "," << st.train_acc << "," << st.val_loss << "," << st.val_acc
        << "," << st.seconds << "," << st.images_per_s << "," << st.skipped_steps << "," << st.overflow_steps << ","
        << st.loss_scale << "\n";
  }
  out.report["epochs"] = eps;
  out.report["data_order"] = data_order_json(spec, out.epochs);
  out.report["init"] = init_record;
  out.report["checkpoint"] = {{"file", ckpt_path}, {"every_steps", spec.checkpoint_every}};
  out.report["resumed"] = resumed;
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

}  // namespace

TrainRunResult run_training(const TrainRunSpec& spec, DatasetLoader& loader, const TrainRunHooks& hooks) {
  return train_from(spec, loader, hooks, nullptr, "");
}

TrainRunResult resume_training(const Checkpoint& ckpt, const std::string& run_dir, DatasetLoader& loader,
                               const TrainRunHooks& hooks) {
  const std::string path = (fs::path(run_dir) / kCheckpointFile).string();
  check(ckpt.threads == default_threads(), "train --resume: ", path, " was written by a run computing with ",
        ckpt.threads, " threads, this process has ", default_threads(),
        " (results are reproducible per thread count; run with --threads ", ckpt.threads, ")");
  std::vector<std::string> removed = remove_dead_temporaries(run_dir);
  TrainRunSpec spec = ckpt.spec;
  spec.out = run_dir;
  TrainRunResult r = train_from(spec, loader, hooks, &ckpt, path);
  r.removed_temporaries = std::move(removed);
  return r;
}

Dataset load_split_for(const LoadedModel& lm, DatasetLoader& loader, const DataSpec& spec, Split split) {
  Dataset d = loader.load(spec, split, &lm.metadata);
  apply_norm(d, input_norm_from_metadata(lm.metadata));
  return d;
}

void normalise_for(const LoadedModel& lm, Tensor& x) { apply_norm(x, input_norm_from_metadata(lm.metadata)); }

}  // namespace driftlab
