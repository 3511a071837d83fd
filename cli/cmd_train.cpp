// driftlab train and driftlab compare: one training run (resumable), or one per policy side by
// side (driftlab/train.h). Here: the options, the progress and epoch lines, the SIGINT/SIGTERM
// handling and the DRIFTLAB_TEST_KILL hook, the exit status of an interrupted run.
#include "cli/commands.h"
#include "cli/common.h"

#include <omp.h>
#include <signal.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>

#include "driftlab/train.h"
#include "report/compare.h"

namespace driftlab {
namespace cli {
namespace {

// The options set the request's fields directly; the data, device, --momentum and --no-convert
// are copied in by train_request.
struct TrainOptions {
  TrainRequest req;
  DataOptions data;
  DeviceOptions dev;
  double momentum = 0.9;
  CLI::Option* momentum_given = nullptr;  // --momentum's default (0.9) is SGD's; RMSprop's is 0
  bool no_progress = false, no_convert = false;
  int threads = 0;
  std::string resume;       // train only: --resume RUN_DIR
  CLI::App* cmd = nullptr;  // the subcommand, to see which options were given
};

TrainRequest train_request(const TrainOptions& o) {
  TrainRequest r = o.req;
  r.data = o.data;
  r.device = o.dev.device;
  r.init_convert = !o.no_convert;
  if (o.momentum_given && o.momentum_given->count() > 0) r.momentum = o.momentum;
  return r;
}

// DRIFTLAB_TEST_KILL, a test hook (tests/cli/test_cli_resume.cpp): the process kills itself with
// SIGKILL at a chosen point, read once when training starts:
//   step:N              after the run's step N (before any checkpoint at that step)
//   checkpoint:N        right after this process's N-th checkpoint is in place
//   checkpoint-write:N  halfway through writing this process's N-th checkpoint's temporary file
//   sigint:N, sigterm:N the process sends itself that signal after the run's step N instead (the
//                       handler's path: finish the step, checkpoint, exit 130 / 143)
void install_test_kill(TrainRunHooks& hooks) {
  const char* env = std::getenv("DRIFTLAB_TEST_KILL");
  if (!env || !*env) return;
  const std::string v = env;
  const std::size_t colon = v.find(':');
  const std::string what = v.substr(0, colon == std::string::npos ? v.size() : colon);
  int64_t n = 0;
  bool ok = colon != std::string::npos && colon + 1 < v.size() && v.size() - colon <= 18 &&
            v.find_first_not_of("0123456789", colon + 1) == std::string::npos;
  if (ok) n = std::stoll(v.substr(colon + 1));
  check(ok && n >= 1 &&
            (what == "step" || what == "checkpoint" || what == "checkpoint-write" || what == "sigint" ||
             what == "sigterm"),
        "DRIFTLAB_TEST_KILL='", v, "': expected step:N, checkpoint:N, checkpoint-write:N, sigint:N or sigterm:N "
        "with N >= 1");
  if (what == "sigint" || what == "sigterm") {
    const int sig = what == "sigint" ? SIGINT : SIGTERM;
    hooks.after_step = [n, sig](int64_t step) { if (step == n) std::raise(sig); };
  } else if (what == "step")
    hooks.after_step = [n](int64_t step) { if (step == n) std::raise(SIGKILL); };
  else if (what == "checkpoint")
    hooks.after_checkpoint = [n](int k) { if (k == n) std::raise(SIGKILL); };
  else
    hooks.checkpoint_halfway = [n](int k) { if (k == n) std::raise(SIGKILL); };
}

TrainRunHooks train_hooks(ProgressBar& bar) {
  TrainRunHooks hooks;
  hooks.on_start = [](const TrainRunStart& s) {
    std::cerr << "train " << s.model << " policy " << s.policy << " on " << s.dataset << " (" << s.images
              << " images), batch " << s.batch << ", " << s.runner << "\n";
  };
  hooks.progress = [&bar](const Progress& p) { bar(p); };
  hooks.on_epoch = [](const EpochStats& st) {
    std::cerr << "epoch " << st.epoch << ": train loss " << fmt(st.train_loss, 4) << " acc " << fmt(st.train_acc, 4)
              << " | val loss " << fmt(st.val_loss, 4) << " acc " << fmt(st.val_acc, 4) << " | "
              << fmt(st.seconds, 2) << " s (" << fmt(st.images_per_s, 0) << " img/s";
    if (st.images_per_s_after_first > 0)  // the first step builds each kernel and touches fresh memory
      std::cerr << "; first step " << fmt(st.first_step_seconds, 3) << " s, " << fmt(st.images_per_s_after_first, 0)
                << " img/s after it";
    std::cerr << ")\n";
    if (st.overflow_steps > 0)
      std::cerr << "epoch " << st.epoch << ": loss scaling skipped " << st.overflow_steps
                << " overflowing step(s); scale now " << st.loss_scale << "\n";
    if (st.skipped_steps > 0)
      std::cerr << "epoch " << st.epoch << ": skipped " << st.skipped_steps << " non-finite step(s); first: "
                << st.first_skip << "\n";
  };
  hooks.stop_requested = [] { return StopSignals::caught() != 0; };
  install_test_kill(hooks);
  return hooks;
}

// After a run: the interruption (exit 128+signal, as a shell reports a process the signal
// ended) or the files and the test accuracy.
void finish_train(const TrainRunResult& r, const std::string& model, uint64_t seed, Device device,
                  const std::string& out) {
  if (r.interrupted) {
    const int sig = StopSignals::caught() ? StopSignals::caught() : SIGINT;
    std::cerr << "\n";
    std::cout << "interrupted at epoch " << r.stopped_epoch << " step " << r.stopped_batch << " (step "
              << r.stopped_step << " of the run); ";
    if (r.checkpoint_path.empty())
      std::cout << "no checkpoint: a run without --out keeps none (pass --out RUN_DIR to be able to resume)\n";
    else
      std::cout << "checkpoint " << r.checkpoint_path << "; resume with: driftlab train --resume " << out << "\n";
    std::cout.flush();
    throw ExitStatus{128 + sig};
  }
  if (!r.model_path.empty())
    std::cerr << "wrote " << r.model_path << " (" << r.model_bytes << " bytes), metrics.json, metrics.csv"
              << (r.checkpoint_path.empty() ? "" : ", checkpoint.dlc") << "\n";
  print_tensor_memory_peak();
  std::cout << "test accuracy " << fmt(r.test.accuracy, 4) << " loss " << fmt(r.test.loss, 4) << " (" << model
            << ", " << r.policy << ", seed " << seed << ", " << device_name(device) << ")\n";
}

// train --resume RUN_DIR: everything comes from the checkpoint; any other option would either
// repeat it or contradict it, so only --no-progress (and --threads, when it is the checkpoint's) pass.
void resume_cmd(const TrainOptions& o) {
  Checkpoint ckpt = read_run_checkpoint(o.resume);
  for (const CLI::Option* opt : o.cmd->get_options()) {
    const std::string name = opt->get_name();
    if (opt->count() == 0 || name == "--resume" || name == "--no-progress" || name == "--help") continue;
    check(name == "--threads" && o.threads == ckpt.threads, "train --resume ", o.resume, ": ", name,
          " cannot be given with --resume: the run's settings come from ",
          (std::filesystem::path(o.resume) / kCheckpointFile).string(),
          name == "--threads" ? " (it computes with " + std::to_string(ckpt.threads) + " threads)" : std::string(),
          "; start a new run to change them");
  }
  set_threads(ckpt.threads);
  const EpochProgress& p = ckpt.state.progress;
  std::cerr << "resuming " << o.resume << " at epoch " << ckpt.state.epoch + (p.active ? 1 : 0) << " step "
            << (p.active ? p.next_batch : 0) << " (step " << ckpt.state.step_index << " of the run, "
            << ckpt.spec.train.epochs << " epochs)\n";
  ProgressBar bar(!o.no_progress);
  StopSignals signals;
  TrainRunResult r = resume(ckpt, o.resume, *o.data.loader, train_hooks(bar));
  for (const std::string& t : r.removed_temporaries)
    std::cerr << "removed " << t << " (the temporary of a write a kill interrupted)\n";
  finish_train(r, ckpt.spec.model, ckpt.spec.train.seed, ckpt.spec.device, o.resume);
}

void train_cmd(const TrainOptions& o) {
  set_threads(o.threads);
  const TrainRunSpec spec = train_spec(train_request(o));
  ProgressBar bar(!o.no_progress);
  StopSignals signals;
  const TrainRunResult r = train(spec, *o.data.loader, train_hooks(bar));
  finish_train(r, o.req.model, o.req.seed, spec.device, o.req.out);
}

void compare_cmd(const TrainOptions& o, const std::string& policies) {
  set_threads(o.threads);
  CompareRequest req;
  req.train = train_request(o);
  req.policies = policies;
  req.out = o.req.out;
  // Each run has its own progress bar and signal handlers, from just before it starts to the
  // line that ends it (an interrupted run ends the comparison: finish_train throws).
  std::unique_ptr<ProgressBar> bar;
  std::unique_ptr<StopSignals> signals;
  CompareHooks hooks;
  hooks.run_hooks = [&](const TrainRequest&) {
    bar = std::make_unique<ProgressBar>(!o.no_progress);
    signals = std::make_unique<StopSignals>();
    return train_hooks(*bar);
  };
  hooks.after_run = [&](const TrainRequest& run, const TrainRunResult& r) {
    finish_train(r, o.req.model, o.req.seed, parse_device(run.device), run.out);
    signals.reset();
  };
  const CompareResult c = compare(req, *o.data.loader, hooks);
  std::cout << "\n" << o.req.model << ", " << o.req.epochs << " epoch(s), batch " << o.req.batch << ", lr " << o.req.lr
            << ", momentum " << o.momentum << ", seed " << o.req.seed << ", "
            << (o.dev.parsed() == Device::cuda ? std::string("cuda") : std::to_string(omp_get_max_threads()) + " threads, cpu") << ", "
            << o.data.dataset << "\n";
  std::cout << std::left << std::setw(34) << "policy" << std::right << std::setw(11) << "train loss" << std::setw(10)
            << "train acc" << std::setw(10) << "test loss" << std::setw(10) << "test acc" << std::setw(12) << "s/epoch"
            << std::setw(12) << "model (B)" << "\n";
  for (const CompareRow& row : c.rows)
    std::cout << std::left << std::setw(34) << row.policy << std::right << std::setw(11) << fmt(row.train_loss, 4)
              << std::setw(10) << fmt(row.train_acc, 4) << std::setw(10) << fmt(row.test_loss, 4) << std::setw(10)
              << fmt(row.test_acc, 4) << std::setw(12) << fmt(row.seconds_per_epoch, 2) << std::setw(12)
              << row.model_bytes << "\n";
  // The kernels that differ between the runs: a policy's s/epoch is theirs, not its framework's.
  if (o.dev.parsed() != Device::cuda && !c.rows.empty()) {
    std::vector<std::vector<std::pair<std::string, std::string>>> ks;
    for (const CompareRow& row : c.rows) ks.push_back(report::cpu_kernels(row.policy));
    std::vector<std::size_t> differ;
    for (std::size_t i = 0; i < ks[0].size(); ++i)
      for (const auto& k : ks)
        if (k[i].second != ks[0][i].second) {
          differ.push_back(i);
          break;
        }
    if (!differ.empty()) {
      std::cout << "CPU kernels that differ between the runs (s/epoch is their time, not the framework's):\n";
      for (std::size_t r = 0; r < c.rows.size(); ++r) {
        std::cout << "  " << std::left << std::setw(32) << c.rows[r].policy << std::right;
        for (std::size_t i : differ) std::cout << " " << ks[r][i].first << "=" << ks[r][i].second;
        std::cout << "\n";
      }
    }
  }
  report::write_compare(c);
}

void add_train_options(CLI::App* c, TrainOptions& o) {
  c->add_option("--model", o.req.model, "lenet1 | lenet5 | resnet20 | resnet20b | resnet18 | vgg16 | lstm | gru | lstm-imdb | gru-imdb | graph (a graph model: its nodes and weights from --init FILE.dlm)")->capture_default_str();
  c->add_option("--epochs", o.req.epochs)->capture_default_str();
  c->add_option("--batch", o.req.batch)->capture_default_str();
  c->add_option("--optimizer", o.req.optimizer,
                 "sgd | adam | rmsprop, each in the policy's formula (adam_form, rmsprop_form...; docs/TRAINING.md)")
      ->capture_default_str();
  c->add_option("--lr", o.req.lr, "the base learning rate")->capture_default_str();
  o.momentum_given = c->add_option("--momentum", o.momentum, "SGD's momentum (default 0.9), RMSprop's (default 0)")
                         ->capture_default_str();
  c->add_flag("--nesterov", o.req.nesterov);
  c->add_option("--weight-decay", o.req.weight_decay, "in each framework's own terms (see weight_decay_mode)");
  c->add_option("--beta1", o.req.beta1, "Adam")->capture_default_str();
  c->add_option("--beta2", o.req.beta2, "Adam")->capture_default_str();
  c->add_option("--schedule", o.req.schedule,
                "learning-rate schedule: step:step=S,gamma=G | multistep:milestones=A;B,gamma=G | "
                "exponential:gamma=G | inverse_time:decay=D (per batch) | "
                "plateau:factor=F,patience=P,threshold=T,cooldown=C,min_lr=M (plateau_rule); "
                "step/multistep/exponential take every=batch");
  c->add_flag("--step-loss", o.req.step_loss, "record every step's loss (metrics.json steps, steps.csv)");
  c->add_option("--seed", o.req.seed)->capture_default_str()->check(CLI::NonNegativeNumber);
  add_threads_option(c, o.threads);
  c->add_flag("--no-progress", o.no_progress);
  c->add_flag("--normalize", o.req.normalize, "standardise inputs with the training set's mean/std (kept in the model file)");
  c->add_option("--on-nonfinite", o.req.on_nonfinite,
                "stop (error naming the step, layer and tensor) | skip-batch (no SGD step, counted in the report)")
      ->capture_default_str()
      ->check(CLI::IsMember({"stop", "skip-batch"}));
  c->add_option("--init", o.req.init,
                "start from these weights: a model file (.dlm) or a folder of .npy files as `weights export` "
                "writes them; converted from their policy's conventions to this run's (drift's conversion)");
  c->add_option("--init-policy", o.req.init_policy,
                "--init DIR: the policy the .npy files were exported under (default: the run's)");
  c->add_flag("--no-convert", o.no_convert, "--init: load the tensors raw instead of converting them");
  c->add_option("--shuffle", o.req.shuffle, "override the policy's shuffle knob (the data order; metrics.json "
                "records its hash per epoch)")
      ->check(CLI::IsMember({"none", "forward_modulo", "backward_rejection"}));
  add_data_options(c, o.data);
  add_device_options(c, o.dev);
}

}  // namespace

void register_train(CLI::App& app) {
  // train
  auto topt = std::make_shared<TrainOptions>();
  auto* tr = app.add_subcommand("train", "train a model under a policy; writes model.dlm, metrics.json, metrics.csv");
  add_train_options(tr, *topt);
  tr->add_option("--policy", topt->req.policy)->capture_default_str();
  tr->add_option("--out", topt->req.out, "output folder (runs/NAME); also where checkpoint.dlc goes");
  tr->add_option("--checkpoint-every", topt->req.checkpoint_every,
                 "also write RUN/checkpoint.dlc every N steps (one is written after every epoch)")
      ->check(CLI::NonNegativeNumber);
  tr->add_option("--resume", topt->resume,
                 "go on with the run in RUN_DIR from its checkpoint.dlc (after Ctrl-C, SIGTERM or a kill); "
                 "takes no other option");
  topt->cmd = tr;
  tr->callback([topt] {
    if (!topt->resume.empty())
      resume_cmd(*topt);
    else
      train_cmd(*topt);
  });

  // compare
  auto copt = std::make_shared<TrainOptions>();
  auto cpols = std::make_shared<std::string>("tensorflow,theano,torch");
  auto* cmp = app.add_subcommand("compare", "train under several policies and print a side-by-side table");
  add_train_options(cmp, *copt);
  cmp->add_option("--policies", *cpols, "comma-separated presets, or ';'-separated policy strings")->capture_default_str();
  cmp->add_option("--out", copt->req.out, "output folder (default runs/compare)");
  cmp->callback([copt, cpols] { compare_cmd(*copt, *cpols); });
}

}  // namespace cli
}  // namespace driftlab
