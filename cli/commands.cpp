#include "cli/commands.h"
#include "cli/options.h"

#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <set>

#include <nlohmann/json.hpp>

#include "attacks/boundary.h"
#include "attacks/convention.h"
#include "attacks/gradient.h"
#include "attacks/images.h"
#include "attacks/robustness.h"
#include "attacks/single_pixel.h"
#include "runs/checkpoint.h"
#include "models/reparam.h"
#include "drift/drift.h"
#include "drift/explain.h"
#include "engine/build_info.h"
#include "engine/data/datasets.h"
#include "engine/data/idx.h"
#include "engine/data/transform.h"
#include "engine/io/npy.h"
#include "runs/run.h"
#include "engine/train/runner.h"
#include "kernels/cuda/device.h"
#include "models/model_file.h"
#include "models/models.h"
#include "models/weights_npy.h"
#include "quant/dynamic.h"
#include "quant/model_io.h"
#include "quant/ptq.h"
#include "quant/ste.h"
#include "quant/report.h"

namespace driftlab {
namespace cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ---------- shared options and helpers ----------

}  // namespace

// Shared with the other command files (cli/options.h).

std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string run_capture(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  check(p != nullptr, "could not run ", cmd);
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  *rc = pclose(p);
  return out;
}

// Shows the summary of an IMDb corpus when a command's loader reads one.
void print_imdb_read(const std::string& dir, const ImdbOptions& o, const ImdbData& d) {
  std::cerr << imdb_summary(dir, o, d) << "\n";
}


void add_data_options(CLI::App* c, DataOptions& o) {
  c->add_option("--dataset", o.dataset,
                "fashion-mnist | mnist (IDX files) | seq-fashion-mnist | seq-mnist (images as 28 steps of 28 "
                "features, for lstm/gru) | cifar10 (binary version) | synthetic-cifar10 | imdb (aclImdb folders, "
                "token ids, for lstm-imdb/gru-imdb)")
      ->capture_default_str();
  c->add_option("--data-dir", o.data_dir, "folder with the IDX files (default for fashion-mnist: " +
                                              std::string(kDefaultFashionMnistDir) + ")");
  c->add_option("--limit", o.limit, "use only the first N samples of each split (0: all)")->check(CLI::NonNegativeNumber);
  c->add_option("--vocab-size", o.vocab_size, "imdb: words kept, ids 2..V+1 (default: the model file's, else 20000)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--maxlen", o.max_len, "imdb: tokens per review (default: the model file's, else 80)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--seq-pad", o.seq_pad, "imdb: pad with id 0 'pre' or 'post' (default: the model file's, else pre)");
  c->add_option("--seq-truncate", o.seq_truncate, "imdb: cut 'pre' (keep the end) or 'post' (default: the model file's, else pre)");
}


void set_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
}

// A number that is neither negative nor NaN nor infinite (CLI::NonNegativeNumber lets NaN through).
const CLI::Validator kFiniteNonNegative(
    [](std::string& s) {
      double v = 0;
      return CLI::detail::lexical_cast(s, v) && std::isfinite(v) && v >= 0
                 ? std::string()
                 : "Value " + s + " must be a finite number >= 0";
    },
    "NONNEGATIVE");

// --threads of every command. A negative count is refused, not read as "all cores".
void add_threads_option(CLI::App* c, int& threads) {
  c->add_option("--threads", threads, "CPU threads (0: all cores); results are reproducible per count")
      ->check(CLI::NonNegativeNumber);
}

// A saved model's data must have its input shape: say so naming the file, before any layer
// refuses the batch in its own terms.
void check_data_fits(const LoadedModel& lm, const std::string& weights, const Dataset& data) {
  const Shape& s = data.images.shape();
  const Shape per_sample(s.begin() + (s.empty() ? 0 : 1), s.end());
  check(per_sample == lm.model.input_shape, "data: ", weights, " holds ", lm.model.name, ", which takes ",
        shape_str(lm.model.input_shape), " inputs, but ", data.name, " has ", shape_str(per_sample));
}

namespace {

std::string value_at(const Tensor& t, int64_t i) {
  const double v = t.dtype() == DType::f64 ? t.data<double>()[i] : t.data<float>()[i];
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

std::string fmt(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

// A progress bar on stderr: redrawn in place on a terminal, a line per ~10% otherwise.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled), tty_(::isatty(2)) {}
  void operator()(const Progress& p) {
    if (!enabled_) return;
    int decile = static_cast<int>(10 * p.batch / p.batches);
    if (!tty_ && decile == last_decile_ && p.batch != p.batches) return;
    last_decile_ = decile;
    const int width = 30;
    int filled = static_cast<int>(width * p.batch / p.batches);
    std::string bar(static_cast<std::size_t>(filled), '=');
    if (filled < width) bar += '>' + std::string(static_cast<std::size_t>(width - filled - 1), ' ');
    std::fprintf(stderr, "%sepoch %d/%d [%s] %lld/%lld loss %.4f  %.0f img/s  ETA %.1fs%s", tty_ ? "\r" : "", p.epoch,
                 p.epochs, bar.c_str(), static_cast<long long>(p.batch), static_cast<long long>(p.batches), p.loss,
                 p.images_per_s, p.eta_s, tty_ ? (p.batch == p.batches ? "\n" : "") : "\n");
    std::fflush(stderr);
  }

 private:
  bool enabled_, tty_;
  int last_decile_ = -1;
};

// ---------- policy ----------

void policy_show(const std::string& spec) {
  Policy p = Policy::parse(spec);
  std::cout << "policy " << p.to_string() << "\n";
  std::string group;
  for (const auto& k : knob_table()) {
    if (k.group != group) {
      group = k.group;
      std::cout << "\n[" << group << "]\n";
    }
    std::string copies = p.preset == "tensorflow" ? k.tensorflow : (p.preset == "theano" ? k.theano : k.torch);
    std::cout << "  " << std::left << std::setw(24) << k.name << " = " << std::setw(22) << p.get(k.name) << " "
              << k.what << "\n"
              << "  " << std::setw(24) << "" << "   " << p.preset << ": " << copies << "\n";
  }
}

void policy_diff(const std::string& a, const std::string& b) {
  Policy pa = Policy::parse(a), pb = Policy::parse(b);
  auto d = diff(pa, pb);
  std::cout << "policy diff " << pa.to_string() << " vs " << pb.to_string() << ": " << d.size() << " of "
            << knob_table().size() << " knobs differ\n";
  for (const auto& k : d) {
    const KnobInfo& info = knob_info(k.knob);
    std::cout << "  " << std::left << std::setw(24) << k.knob << std::setw(22) << k.a << std::setw(22) << k.b
              << info.what << "\n";
  }
}

// ---------- model ----------

void model_show(const std::string& name, const std::string& spec) {
  Policy p = Policy::parse(spec);
  Model m = build_model(name, p, 1);
  std::cout << "model " << name << " under policy " << p.to_string() << "\n";
  std::cout << std::left << std::setw(4) << "#" << std::setw(54) << "layer" << std::setw(16) << "output"
            << "params\n";
  std::cout << std::setw(4) << "" << std::setw(54) << "input" << std::setw(16) << shape_str(m.input_shape) << "\n";
  for (std::size_t i = 0; i < m.net->size(); ++i) {
    Layer& l = m.net->layer(i);
    int64_t n = 0;
    for (Param* prm : l.params()) n += prm->value.numel();
    std::cout << std::setw(4) << i << std::setw(54) << l.describe() << std::setw(16) << shape_str(l.output_shape())
              << n << "\n";
  }
  std::cout << "trainable parameters: " << m.num_params() << "\n";
}

// ---------- train ----------

// The --device switch of train / compare / eval / predict / drift / attribute. The CUDA
// switches are the model's Policy knobs (cuda_kernels, tf32_matmul, tf32_conv,
// cuda_deterministic, cudnn_algo_search).
struct DeviceOptions {
  std::string device = "cpu";  // cpu | cuda
  Device parsed() const { return parse_device(device); }
};

void add_device_options(CLI::App* c, DeviceOptions& o) {
  c->add_option("--device", o.device,
                "cpu | cuda (device 0; kernels, TF32, determinism and cuDNN search follow the policy's cuda knobs)")
      ->capture_default_str();
}

struct TrainOptions {
  std::string model = "lenet5", policy = "torch", out;
  DataOptions data;
  int epochs = 1;
  int64_t batch = 128;
  double lr = 0.01, momentum = 0.9, weight_decay = 0.0, beta1 = 0.9, beta2 = 0.999;
  CLI::Option* momentum_given = nullptr;  // --momentum's default (0.9) is SGD's; RMSprop's is 0
  bool nesterov = false, no_progress = false, normalize = false, step_loss = false;
  std::string optimizer = "sgd", schedule;
  uint64_t seed = 1;
  int threads = 0;
  std::string on_nonfinite = "stop";
  DeviceOptions dev;
  std::string init, init_policy, shuffle;  // --init FILE|DIR, --init-policy P, --shuffle ALGO
  bool no_convert = false;
  int64_t checkpoint_every = 0;  // train only
  std::string resume;            // train only: --resume RUN_DIR
  CLI::App* cmd = nullptr;       // the subcommand, to see which options were given
};

OptimConfig optim_config(const TrainOptions& o) {
  OptimConfig c;
  c.kind = parse_optimizer(o.optimizer);
  const bool momentum_given = o.momentum_given && o.momentum_given->count() > 0;
  c.lr = o.lr;
  c.momentum = c.kind == OptimizerKind::sgd || momentum_given ? o.momentum : 0.0;
  c.nesterov = o.nesterov;
  c.weight_decay = o.weight_decay;
  c.beta1 = o.beta1;
  c.beta2 = o.beta2;
  return c;
}

// SIGINT and SIGTERM while training: the handler only records the signal; the run finishes its
// step, writes a checkpoint and returns (TrainRunHooks::stop_requested). A signal handler can
// reach nothing but a global. SA_RESETHAND: a second Ctrl-C kills at once.
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void record_stop_signal(int sig) { g_stop_signal = sig; }

class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = record_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  static int caught() { return g_stop_signal; }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

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
              << fmt(st.seconds, 2) << " s (" << fmt(st.images_per_s, 0) << " img/s)\n";
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
TrainRunResult finish_train(const TrainRunResult& r, const std::string& model, uint64_t seed, Device device,
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
  std::cout << "test accuracy " << fmt(r.test.accuracy, 4) << " loss " << fmt(r.test.loss, 4) << " (" << model
            << ", " << r.policy << ", seed " << seed << ", " << device_name(device) << ")\n";
  return r;
}

// train --resume RUN_DIR: everything comes from the checkpoint; any other option would either
// repeat it or contradict it, so only --no-progress (and --threads, when it is the checkpoint's) pass.
void resume_train(const TrainOptions& o) {
  const std::string path = (fs::path(o.resume) / kCheckpointFile).string();
  std::error_code ec;
  check(fs::is_directory(o.resume, ec), "train --resume ", o.resume, ": no such run folder");
  check(fs::exists(path, ec), "train --resume ", o.resume, ": no ", kCheckpointFile,
        " in it (a run writes one after each epoch, and every N steps with --checkpoint-every N, when it has --out)");
  Checkpoint ckpt = read_checkpoint(path);
  for (const CLI::Option* opt : o.cmd->get_options()) {
    const std::string name = opt->get_name();
    if (opt->count() == 0 || name == "--resume" || name == "--no-progress" || name == "--help") continue;
    check(name == "--threads" && o.threads == ckpt.threads, "train --resume ", o.resume, ": ", name,
          " cannot be given with --resume: the run's settings come from ", path,
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
  TrainRunResult r = resume_training(ckpt, o.resume, *o.data.loader, train_hooks(bar));
  for (const std::string& t : r.removed_temporaries)
    std::cerr << "removed " << t << " (the temporary of a write a kill interrupted)\n";
  finish_train(r, ckpt.spec.model, ckpt.spec.train.seed, ckpt.spec.device, o.resume);
}

TrainRunResult run_train(const TrainOptions& o) {
  set_threads(o.threads);
  TrainRunSpec spec;
  spec.model = o.model;
  spec.policy = Policy::parse(o.policy);
  if (!o.shuffle.empty()) spec.policy.set("shuffle", o.shuffle);  // --shuffle: the knob, by its short name
  spec.data = o.data;
  spec.train.epochs = o.epochs;
  spec.train.batch = o.batch;
  spec.train.optim = optim_config(o);
  spec.train.schedule = parse_schedule(o.schedule);
  spec.train.step_losses = o.step_loss;
  spec.train.seed = o.seed;
  spec.train.on_nonfinite = parse_on_nonfinite(o.on_nonfinite);
  spec.normalize = o.normalize;
  spec.device = o.dev.parsed();
  spec.out = o.out;
  spec.init = o.init;
  spec.init_convert = !o.no_convert;
  spec.init_policy = o.init_policy;
  spec.checkpoint_every = o.checkpoint_every;
  check(!o.no_convert || !o.init.empty(), "train: --no-convert is for --init (how the given weights are loaded)");
  check(o.init_policy.empty() || !o.init.empty(), "train: --init-policy is for --init DIR (the policy the .npy files "
        "were exported under)");
  ProgressBar bar(!o.no_progress);
  StopSignals signals;
  TrainRunResult r = run_training(spec, *o.data.loader, train_hooks(bar));
  return finish_train(r, o.model, o.seed, spec.device, o.out);
}

void add_train_options(CLI::App* c, TrainOptions& o) {
  c->add_option("--model", o.model, "lenet1 | lenet5 | resnet20 | resnet20b | resnet18 | vgg16 | lstm | gru | lstm-imdb | gru-imdb")->capture_default_str();
  c->add_option("--epochs", o.epochs)->capture_default_str();
  c->add_option("--batch", o.batch)->capture_default_str();
  c->add_option("--optimizer", o.optimizer,
                 "sgd | adam | rmsprop, each in the policy's formula (adam_form, rmsprop_form...; docs/TRAINING.md)")
      ->capture_default_str();
  c->add_option("--lr", o.lr, "the base learning rate")->capture_default_str();
  o.momentum_given = c->add_option("--momentum", o.momentum, "SGD's momentum (default 0.9), RMSprop's (default 0)")
                         ->capture_default_str();
  c->add_flag("--nesterov", o.nesterov);
  c->add_option("--weight-decay", o.weight_decay, "in each framework's own terms (see weight_decay_mode)");
  c->add_option("--beta1", o.beta1, "Adam")->capture_default_str();
  c->add_option("--beta2", o.beta2, "Adam")->capture_default_str();
  c->add_option("--schedule", o.schedule,
                "learning-rate schedule: step:step=S,gamma=G | multistep:milestones=A;B,gamma=G | "
                "exponential:gamma=G | inverse_time:decay=D (per batch) | "
                "plateau:factor=F,patience=P,threshold=T,cooldown=C,min_lr=M (plateau_rule); "
                "step/multistep/exponential take every=batch");
  c->add_flag("--step-loss", o.step_loss, "record every step's loss (metrics.json steps, steps.csv)");
  c->add_option("--seed", o.seed)->capture_default_str()->check(CLI::NonNegativeNumber);
  add_threads_option(c, o.threads);
  c->add_flag("--no-progress", o.no_progress);
  c->add_flag("--normalize", o.normalize, "standardise inputs with the training set's mean/std (kept in the model file)");
  c->add_option("--on-nonfinite", o.on_nonfinite,
                "stop (error naming the step, layer and tensor) | skip-batch (no SGD step, counted in the report)")
      ->capture_default_str()
      ->check(CLI::IsMember({"stop", "skip-batch"}));
  c->add_option("--init", o.init,
                "start from these weights: a model file (.dlm) or a folder of .npy files as `weights export` "
                "writes them; converted from their policy's conventions to this run's (drift's conversion)");
  c->add_option("--init-policy", o.init_policy,
                "--init DIR: the policy the .npy files were exported under (default: the run's)");
  c->add_flag("--no-convert", o.no_convert, "--init: load the tensors raw instead of converting them");
  c->add_option("--shuffle", o.shuffle, "override the policy's shuffle knob (the data order; metrics.json "
                "records its hash per epoch)")
      ->check(CLI::IsMember({"none", "forward_modulo", "backward_rejection"}));
  add_data_options(c, o.data);
  add_device_options(c, o.dev);
}

// ---------- eval / predict ----------

void eval_cmd(const std::string& weights, const DataOptions& d, int64_t batch, int threads, const DeviceOptions& dev) {
  set_threads(threads);
  const Device device = dev.parsed();
  LoadedModel lm = quant::load_any_model(weights);
  Dataset test = load_split_for(lm, *d.loader, d, Split::test);
  check_data_fits(lm, weights, test);
  EvalResult r = open_runner(lm.model, device)->evaluate(test, batch);
  std::cout << "test accuracy " << fmt(r.accuracy, 4) << " loss " << fmt(r.loss, 4) << " on " << r.n << " images ("
            << lm.model.name << ", " << lm.model.policy.to_string() << ", " << dev.device << ")\n";
}

void predict_cmd(const std::string& weights, const DataOptions& d, const std::vector<int64_t>& sizes,
                 const std::string& input, const std::string& output, int threads, const DeviceOptions& dev,
                 int64_t max_batch) {
  set_threads(threads);
  const Device device = dev.parsed();  // rejects an unknown --device before any work
  check(max_batch >= 0, "predict: --max-batch ", max_batch, " must be >= 0");
  check(device == Device::cuda || max_batch == 0,
        "predict: --max-batch is for --device cuda (the CPU runs each size as one batch)");
  LoadedModel lm = quant::load_any_model(weights);
  if (!input.empty()) {
    Tensor x = read_npy(input);
    check(x.dtype() == DType::f32 || x.dtype() == DType::f64, "predict: ", input, " holds ", dtype_name(x.dtype()),
          "; the model takes float32 or float64 inputs");
    check(x.rank() >= 1 && x.dim(0) >= 1, "predict: ", input, " has shape ", shape_str(x.shape()),
          ": no inputs to predict");
    if (const int64_t bad = first_nonfinite(x); bad >= 0)
      fail("predict: ", input, " holds ", value_at(x, bad), " at index ", bad, " (flat, C order); the inputs must be finite");
    Shape want{x.rank() ? x.dim(0) : 0};
    want.insert(want.end(), lm.model.input_shape.begin(), lm.model.input_shape.end());
    check(x.shape() == want, "predict: ", input, " has shape ", shape_str(x.shape()), ", model ", lm.model.name,
          " takes ", shape_str(want));
    normalise_for(lm, x);
    Tensor y = open_runner(lm.model, device)->logits(x, max_batch);
    check(!output.empty(), "predict: --input needs --output FILE.npy");
    write_npy(output, y);
    std::cout << "wrote logits " << shape_str(y.shape()) << " to " << output << "\n";
    return;
  }
  Dataset test = load_split_for(lm, *d.loader, d, Split::test);
  check_data_fits(lm, weights, test);
  std::vector<int64_t> idx(static_cast<std::size_t>(test.images.dim(0)));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  std::unique_ptr<Runner> runner = open_runner(lm.model, device);
  if (device == Device::cuda)
    std::cout << "prediction time (" << lm.model.name << ", " << lm.model.policy.to_string() << ", "
              << runner->describe()
              << (max_batch > 0 ? ", at most " + std::to_string(max_batch) + " inputs at a time" : std::string(", one batch"))
              << ")\n";
  else
    std::cout << "prediction time, one batch, best of 3 (" << lm.model.name << ", " << lm.model.policy.to_string()
              << ", " << omp_get_max_threads() << " threads, cpu)\n";
  for (int64_t n : sizes) {
    check(n >= 1 && n <= test.images.dim(0), "predict: size ", n, " is outside 1..", test.images.dim(0),
          " (the test set of ", test.name, ")");
    const PredictTime t = runner->time_prediction(gather_batch(test, idx, 0, n, lm.model.dtype()), max_batch);
    const double s = t.host_to_host_s;
    std::cout << "  " << std::setw(6) << n << " inputs: " << fmt(s, 6) << " s (" << fmt(n / s, 0) << " img/s)";
    if (device == Device::cuda) std::cout << " host to host";
    if (t.device_forward_s >= 0)
      std::cout << "; " << fmt(t.device_forward_s, 6) << " s (" << fmt(n / t.device_forward_s, 0)
                << " img/s) forward on device-resident input";
    std::cout << "\n";
  }
}

// ---------- quantize ----------

// The first n training samples of a model's data in file order (calibration); *from describes them.
Tensor first_training_samples(const LoadedModel& lm, const DataOptions& data, int64_t n, std::string* from) {
  check(n > 0, "calibration: ", n, " samples requested, need at least 1");
  Dataset train = load_split_for(lm, *data.loader, data, Split::train);
  n = std::min<int64_t>(n, train.images.dim(0));
  std::vector<int64_t> idx(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = i;
  *from = "first " + std::to_string(n) + " of " + train.name;
  return gather_batch(train, idx, 0, n, DType::f32);
}

struct QuantizeOptions {
  std::string weights, scheme = "torch_qnnpack", knobs, observer, calib_data, out, report, mode = "auto";
  int64_t calib = 1000, calib_batch = 32, report_n = 1000;
  int threads = 0;
  DataOptions data;
};

std::string json_number(double v) { return std::isfinite(v) ? fmt(v, 2) : std::string("inf"); }

void quantize_cmd(const QuantizeOptions& o) {
  set_threads(o.threads);
  check(!o.out.empty(), "quantize: --out Q.dlm is required");
  LoadedModel lm = quant::load_any_model(o.weights);
  check(!quant::is_quantized(lm), "quantize: ", o.weights, " is already an int8 model");
  // The policy: the model's, with the toolchain's quant group, then --quant knobs, then --observer.
  Policy policy = lm.model.policy;
  policy.set("quant_scheme", o.scheme);
  if (!o.knobs.empty()) policy = Policy::parse(policy.to_string() + "," + o.knobs);
  if (!o.observer.empty()) policy.set("quant_observer", o.observer);
  check(o.mode == "auto" || o.mode == "static" || o.mode == "dynamic", "quantize: --mode ", o.mode,
        " (allowed: auto, static, dynamic)");
  const bool dynamic = o.mode == "dynamic" || (o.mode == "auto" && quant::needs_dynamic(lm.model));
  check(!(o.mode == "static" && quant::needs_dynamic(lm.model)), "quantize: ", lm.model.name, " has LSTM/GRU layers, "
        "which have no static int8 form here; use --mode dynamic (weights-only, PyTorch quantize_dynamic)");
  // Calibration samples: --calib-data, or the first N training samples in file order (static only).
  Tensor calib;
  std::string calib_from;
  quant::PtqResult r;
  if (dynamic) {
    check(o.calib_data.empty(), "quantize: --calib-data is for static quantization; dynamic quantization "
          "chooses each input's scale at run time");
    r.model = quant::quantize_dynamic(lm.model, policy);
    nlohmann::json quantized = {{"scheme", o.scheme}, {"mode", "dynamic"}, {"from", o.weights}};
    quant::save_quantized_model(o.out, r.model, lm.metadata, quantized);
    std::cout << "wrote " << o.out << " (" << lm.model.name << ", dynamic int8 (weights only), scheme " << o.scheme
              << ", " << policy.to_string() << ")\n";
    for (std::size_t i = 0; i < r.model.net->size(); ++i)
      std::cout << "  " << i << " " << r.model.net->layer(i).describe() << "\n";
  } else if (!o.calib_data.empty()) {
    calib = read_npy(o.calib_data);
    check(calib.dtype() == DType::f32, "quantize: ", o.calib_data, " holds ", dtype_name(calib.dtype()),
          ", calibration data must be float32");
    normalise_for(lm, calib);
    calib_from = o.calib_data;
  } else {
    check(o.calib > 0, "quantize: --calib ", o.calib, " must be positive");
    calib = first_training_samples(lm, o.data, o.calib, &calib_from);
  }
  if (!dynamic) {
    quant::PtqOptions po;
    po.calib_batch = o.calib_batch;
    r = quant::quantize_model(lm.model, policy, calib, po);
    nlohmann::json quantized = {{"scheme", o.scheme},
                                {"observer", policy.get("quant_observer")},
                                {"calibration", calib_from},
                                {"calibration_samples", calib.dim(0)},
                                {"calibration_batch", o.calib_batch},
                                {"from", o.weights}};
    nlohmann::json meta = lm.metadata;
    quant::save_quantized_model(o.out, r.model, meta, quantized);
    std::cout << "wrote " << o.out << " (" << lm.model.name << ", int8 scheme " << o.scheme << ", " << policy.to_string()
              << "; calibrated on "
              << calib_from << ")\n";
    for (const auto& p : r.points)
      std::cout << "  " << std::left << std::setw(12) << p.name << std::right << " range [" << p.range.min << ", "
                << p.range.max << "] scale " << p.q.scale << " zero point " << p.q.zero_point << "\n";
  }
  if (o.report.empty()) return;

  // --report: sizes, accuracy, per-layer SQNR, time and agreement, on the test set.
  Dataset test = load_split_for(lm, *o.data.loader, o.data, Split::test);
  check_data_fits(lm, o.weights, test);
  Model& fp = lm.model;
  LoadedModel qm = quant::load_any_model(o.out);  // what was written is what is reported
  std::unique_ptr<Runner> run_fp = open_runner(fp, Device::cpu), run_q = open_runner(qm.model, Device::cpu);
  const EvalResult efp = run_fp->evaluate(test, 256), eq = run_q->evaluate(test, 256);
  const int64_t n = std::min<int64_t>(o.report_n, test.images.dim(0));
  std::vector<int64_t> idx(static_cast<std::size_t>(test.images.dim(0)));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  const Tensor x = gather_batch(test, idx, 0, n, DType::f32);
  const std::vector<quant::LayerSqnr> sq = dynamic ? quant::layer_sqnr_dynamic(fp, qm.model, x) : quant::layer_sqnr(fp, r, x);
  const Tensor all = gather_batch(test, idx, 0, test.images.dim(0), DType::f32);
  const std::vector<int32_t> pf = quant::predictions(run_fp->logits(all)), pq = quant::predictions(run_q->logits(all));
  int64_t disagree = 0;
  for (std::size_t i = 0; i < pf.size(); ++i) disagree += pf[i] != pq[i];
  const PredictTime tf = run_fp->time_prediction(x), tq = run_q->time_prediction(x);
  const auto fsize = std::filesystem::file_size(o.weights), qsize = std::filesystem::file_size(o.out);
  nlohmann::json rep = {
      {"model", fp.name},
      {"fp32_policy", fp.policy.to_string()},
      {"int8_policy", policy.to_string()},
      {"scheme", o.scheme},
      {"mode", dynamic ? "dynamic" : "static"},
      {"calibration", dynamic ? std::string("none (dynamic: per-call input scales)") : calib_from},
      {"test_set", test.name},
      {"file_bytes", {{"fp32", fsize}, {"int8", qsize}, {"ratio", double(qsize) / double(fsize)}}},
      {"accuracy", {{"fp32", efp.accuracy}, {"int8", eq.accuracy}, {"n", efp.n}}},
      {"disagreement_with_fp32", {{"count", disagree}, {"rate", double(disagree) / double(pf.size())}}},
      {"inference_s", {{"inputs", n}, {"threads", omp_get_max_threads()}, {"fp32", tf.host_to_host_s},
                       {"int8", tq.host_to_host_s}, {"speedup", tf.host_to_host_s / tq.host_to_host_s}}}};
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : sq) layers.push_back({{"point", l.point}, {"sqnr_db", json_number(l.sqnr_db)}, {"n", l.n}});
  rep["sqnr"] = layers;
  std::ostringstream md;
  md << "| quantity | fp32 | int8 (" << o.scheme << ") |\n|---|---|---|\n"
     << "| file bytes | " << fsize << " | " << qsize << " |\n"
     << "| test accuracy (" << test.name << ", " << efp.n << ") | " << fmt(efp.accuracy, 4) << " | " << fmt(eq.accuracy, 4)
     << " |\n| inference of " << n << " inputs, " << omp_get_max_threads() << " threads (s) | " << fmt(tf.host_to_host_s, 5)
     << " | " << fmt(tq.host_to_host_s, 5) << " |\n"
     << "| predictions that differ from fp32 | | " << disagree << " (" << fmt(100.0 * disagree / pf.size(), 2) << "%) |\n\n"
     << "| point | SQNR (dB) |\n|---|---|\n";
  for (const auto& l : sq) md << "| " << l.point << " | " << json_number(l.sqnr_db) << " |\n";
  std::string text;
  const auto ends = [&](const char* e) {
    const std::string ext(e);
    return o.report.size() >= ext.size() && o.report.compare(o.report.size() - ext.size(), ext.size(), ext) == 0;
  };
  if (ends(".md")) {
    text = md.str();
  } else if (ends(".csv")) {
    std::ostringstream cs;
    cs << "quantity,fp32,int8\nfile_bytes," << fsize << "," << qsize << "\naccuracy," << efp.accuracy << "," << eq.accuracy
       << "\ninference_s," << tf.host_to_host_s << "," << tq.host_to_host_s << "\ndisagreement,," << disagree << "\n";
    for (const auto& l : sq) cs << "sqnr_db:" << l.point << ",," << json_number(l.sqnr_db) << "\n";
    text = cs.str();
  } else {
    check(ends(".json"), "quantize: --report ", o.report, " must end in .json, .csv or .md");
    text = rep.dump(2) + "\n";
  }
  write_file_atomic(o.report, text);
  std::cout << md.str() << "wrote " << o.report << "\n";
}

// ---------- weights import/export (.npy, in the policy's framework layout) ----------

void weights_export(const std::string& weights, const std::string& dir, NpyLayout layout) {
  LoadedModel lm = quant::load_any_model(weights);
  for (const NpyFile& f : export_weights_npy(lm.model, dir, layout))
    std::cout << f.path << " " << shape_str(f.shape) << "\n";
}

void weights_import(const std::string& model_name, const std::string& spec, const std::string& dir,
                    const std::string& out, NpyLayout layout) {
  Model m = build_model(model_name, Policy::parse(spec), 1);
  import_weights_npy(m, dir, layout);
  // The files passed their shape checks; a NaN or infinity in them would be a model that
  // trains and predicts NaN, so it is refused here naming the file and the index in it.
  for (const auto& np : m.net->named_params()) {
    const std::string path = (fs::path(dir) / (np.first + ".npy")).string();
    const Tensor t = read_npy(path);
    if (t.dtype() != DType::f32 && t.dtype() != DType::f64) continue;
    if (const int64_t bad = first_nonfinite(t); bad >= 0)
      fail("weights import: ", path, " holds ", value_at(t, bad), " at index ", bad, " (flat, C order, shape ",
           shape_str(t.shape()), "); nothing written to ", out);
    // Finite in the file, but not in the model's dtype: a float64 beyond float32's range.
    if (const int64_t bad = first_nonfinite(np.second->value); bad >= 0)
      fail("weights import: ", path, " holds a value beyond the range of the model's ", dtype_name(m.dtype()),
           " (", np.first, "[", bad, "] would be ", value_at(np.second->value, bad), "); nothing written to ", out);
  }
  save_model(out, m, {{"imported_from", dir}});
  std::cout << "wrote " << out << "\n";
}

// ---------- compare: the README's main job ----------

// "tensorflow,theano,torch" (presets) or "torch;torch,relu_grad_at_zero=0.5" (policy strings).
std::vector<std::string> split_policies(const std::string& policies) {
  char sep = policies.find(';') != std::string::npos || policies.find('=') != std::string::npos ? ';' : ',';
  std::vector<std::string> names;
  std::stringstream ss(policies);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) names.push_back(item);
  check(!names.empty(), "policies: '", policies, "' names no policy");
  return names;
}

void compare_cmd(TrainOptions o, const std::string& policies) {
  std::vector<std::string> names = split_policies(policies);
  std::string base_out = o.out.empty() ? "runs/compare" : o.out;
  struct Row {
    std::string policy;
    TrainRunResult r;
  };
  std::vector<Row> rows;
  for (const auto& n : names) {
    o.policy = n;
    o.out = (fs::path(base_out) / Policy::parse(n).preset).string();
    rows.push_back({n, run_train(o)});
  }
  std::cout << "\n" << o.model << ", " << o.epochs << " epoch(s), batch " << o.batch << ", lr " << o.lr
            << ", momentum " << o.momentum << ", seed " << o.seed << ", "
            << (o.dev.parsed() == Device::cuda ? std::string("cuda") : std::to_string(omp_get_max_threads()) + " threads, cpu") << ", "
            << o.data.dataset << "\n";
  std::cout << std::left << std::setw(34) << "policy" << std::right << std::setw(11) << "train loss" << std::setw(10)
            << "train acc" << std::setw(10) << "test loss" << std::setw(10) << "test acc" << std::setw(12) << "s/epoch"
            << std::setw(12) << "model (B)" << "\n";
  json all = json::array();
  for (const auto& row : rows) {
    const EpochStats& last = row.r.epochs.back();
    double secs = 0;
    for (const auto& e : row.r.epochs) secs += e.seconds;
    secs /= static_cast<double>(row.r.epochs.size());
    std::cout << std::left << std::setw(34) << row.r.policy << std::right << std::setw(11) << fmt(last.train_loss, 4)
              << std::setw(10) << fmt(last.train_acc, 4) << std::setw(10) << fmt(row.r.test.loss, 4) << std::setw(10)
              << fmt(row.r.test.accuracy, 4) << std::setw(12) << fmt(secs, 2) << std::setw(12) << row.r.model_bytes
              << "\n";
    all.push_back({{"policy", row.r.policy}, {"train_loss", last.train_loss}, {"train_acc", last.train_acc},
                   {"test_loss", row.r.test.loss}, {"test_acc", row.r.test.accuracy}, {"seconds_per_epoch", secs},
                   {"model_bytes", row.r.model_bytes}, {"seed", o.seed}, {"device", o.dev.device}, {"model", o.model}});
  }
  fs::create_directories(base_out);
  write_file_atomic((fs::path(base_out) / "compare.json").string(), all.dump(2) + "\n");
}

// ---------- drift / attribute / explain ----------

struct DriftOptions {
  std::string model, weights, policies = "tensorflow,theano,torch", json;
  DataOptions data;
  bool no_convert = false;
  double tol = 1e-5;
  int64_t localise_batch = 100;
  int threads = 0;
  DeviceOptions dev;
  int64_t quantize = 0, calib_batch = 32;  // > 0: fp32 and each policy's int8 model
};

// "cpu, 2 threads" or "cuda" for a command's header line.
std::string where(const DeviceOptions& dev) {
  return dev.parsed() == Device::cuda ? std::string("cuda") : "cpu, " + std::to_string(omp_get_max_threads()) + " threads";
}

std::string pct(double v) { return fmt(100.0 * v, 2) + "%"; }
std::string sci(double v) {
  std::ostringstream os;
  os << std::scientific << std::setprecision(2) << v;
  return os.str();
}

void check_model_name(const std::string& asked, const LoadedModel& lm, const std::string& path) {
  check(asked.empty() || asked == lm.model.name, "model: --model ", asked, " does not match ", path, ", which holds ",
        lm.model.name);
}

void print_localisation(const Localisation& loc) {
  std::cout << "  " << std::left << std::setw(4) << "#" << std::setw(58) << "layer (under the first policy)"
            << std::right << std::setw(11) << "max|d|" << std::setw(11) << "max rel" << "\n";
  for (std::size_t i = 0; i < loc.layers.size(); ++i) {
    const auto& l = loc.layers[i];
    std::cout << "  " << std::left << std::setw(4) << l.index << std::setw(58) << l.layer << std::right << std::setw(11)
              << sci(l.max_abs) << std::setw(11) << sci(l.max_rel)
              << (static_cast<int>(i) == loc.first_divergent ? "  <- first beyond tolerance" : "") << "\n";
  }
}

void drift_cmd(const DriftOptions& o) {
  set_threads(o.threads);
  LoadedModel lm = quant::load_any_model(o.weights);
  check(!quant::is_quantized(lm), "drift: ", o.weights, " is an int8 model; give the fp32 model and --quantize N to "
        "compare its int8 forms");
  check_model_name(o.model, lm, o.weights);
  Dataset test = load_split_for(lm, *o.data.loader, o.data, Split::test);
  check_data_fits(lm, o.weights, test);
  ExecContext exec;
  std::cout << "drift: " << lm.model.name << " weights " << o.weights << " (trained under "
            << lm.model.policy.to_string() << "), " << test.images.dim(0) << " images of " << test.name << ", weights "
            << (o.no_convert ? "loaded as raw tensors" : "converted between conventions (flip, flatten order)")
            << ", " << where(o.dev) << "\n\n";
  std::cout << std::left << std::setw(40) << "policy" << std::right << std::setw(10) << "accuracy" << "\n";
  // Every policy is parsed before the first is run, so a misspelt knob costs no evaluation.
  std::vector<Policy> policies;
  for (const auto& n : split_policies(o.policies)) policies.push_back(Policy::parse(n));
  CrossPolicyOptions opt;
  opt.convert = !o.no_convert;
  opt.tolerance = o.tol;
  opt.localise_batch = o.localise_batch;
  opt.device = o.dev.parsed();
  Tensor calib;
  if (o.quantize > 0) {
    std::string from;
    calib = first_training_samples(lm, o.data, o.quantize, &from);
    opt.calib = &calib;
    opt.calib_batch = o.calib_batch;
    std::cout << "int8: the fp32 model under the first policy, then each policy's int8 model (its quant_* knobs), "
              << "calibrated on the " << from << "\n";
  }
  const CrossPolicyDrift d = cross_policy_drift(lm.model, policies, test, exec, opt, [](const PolicyAccuracy& a) {
    std::cout << std::left << std::setw(40) << a.label << std::right << std::setw(10) << pct(a.accuracy) << "\n";
  });
  std::cout << "\nlast-layer outputs (softmax probabilities), a against b as the reference (S3's y_c vs y_o):\n";
  std::cout << std::left << std::setw(30) << "a vs b" << std::right << std::setw(14) << "abs err mean" << std::setw(14)
            << "rel err mean" << std::setw(12) << "mean|d|" << std::setw(12) << "max|d|" << std::setw(12)
            << "misclass." << "\n";
  for (const PolicyPair& p : d.pairs)
    std::cout << std::left << std::setw(30)
              << (o.quantize > 0 ? p.a_label.substr(0, p.a_label.find(' ', 5)) + " vs " + p.b_label.substr(0, p.b_label.find(' ', 5))
                                 : p.a.preset + " vs " + p.b.preset)
              << std::right << std::setw(14)
              << sci(p.outputs.abs_err_mean) << std::setw(14) << sci(p.outputs.rel_err_mean) << std::setw(12)
              << sci(p.outputs.mean_abs) << std::setw(12) << sci(p.outputs.max_abs) << std::setw(12)
              << pct(p.outputs.misclassification) << "\n";
  for (const PolicyPair& p : d.pairs) {
    std::cout << "\nlocalisation, " << p.a_label << " vs " << p.b_label << " (first " << d.localised
              << " images; tolerance max|d|/max|b| > " << p.localisation.tolerance << "):\n";
    print_localisation(p.localisation);
    if (p.localisation.first_divergent < 0) std::cout << "  no layer diverges beyond the tolerance\n";
  }
  if (o.json.empty()) return;
  json out = {{"model", lm.model.name}, {"weights", o.weights}, {"weights_policy", lm.model.policy.to_string()},
              {"dataset", test.name}, {"n", test.images.dim(0)}, {"converted", !o.no_convert}, {"device", o.dev.device}};
  out.update(to_json(d));
  write_file_atomic(o.json, out.dump(2) + "\n");
}

struct AttributeCliOptions {
  std::string model, weights, from = "tensorflow", to = "torch", json;
  DataOptions data;
  bool no_convert = false;
  int train = 0;
  int64_t batch = 128;
  double lr = 0.01, momentum = 0.9;
  uint64_t seed = 1;
  int threads = 0;
  DeviceOptions dev;
  int64_t quantize = 0, calib_batch = 32;  // > 0: int8 models calibrated on the first N training samples
};

void attribute_cmd(const AttributeCliOptions& o) {
  set_threads(o.threads);
  LoadedModel lm = quant::load_any_model(o.weights);
  check(!quant::is_quantized(lm), "attribute: ", o.weights, " is an int8 model; give the fp32 model and --quantize N");
  check_model_name(o.model, lm, o.weights);
  Dataset test = load_split_for(lm, *o.data.loader, o.data, Split::test);
  check_data_fits(lm, o.weights, test);
  Dataset train;
  if (o.train > 0) train = load_split_for(lm, *o.data.loader, o.data, Split::train);
  ExecContext exec;
  AttributeOptions opt;
  opt.convert = !o.no_convert;
  opt.train_epochs = o.train;
  opt.train.batch = o.batch;
  opt.train.optim = {o.lr, o.momentum, false, 0.0};
  opt.train.seed = o.seed;
  opt.device = o.dev.parsed();
  Policy from = Policy::parse(o.from), to = Policy::parse(o.to);
  Tensor calib;
  if (o.quantize > 0) {
    std::string from;
    calib = first_training_samples(lm, o.data, o.quantize, &from);
    opt.calib = &calib;
    opt.calib_batch = o.calib_batch;
    std::cout << "int8: each policy's model quantized under its quant_* knobs, calibrated on the " << from
              << " (batches of " << o.calib_batch << ")\n";
  }
  Attribution a = attribute(lm.model, from, to, test, o.train > 0 ? &train : nullptr, exec, opt);
  std::cout << "attribute: " << lm.model.name << " weights " << o.weights << ", from " << a.from << " to " << a.to
            << ", " << test.images.dim(0) << " images of " << test.name << ", weights "
            << (o.no_convert ? "raw" : "converted") << ", " << where(o.dev) << "\n";
  if (a.trained)
    std::cout << "training " << o.train << " epoch(s) of " << train.images.dim(0) << " images from the same initial weights,"
              << " batch " << o.batch << ", lr " << o.lr << ", momentum " << o.momentum << ", seed " << o.seed << "\n";
  std::cout << "\ntotal: accuracy " << pct(a.from_accuracy) << " (from) vs " << pct(a.to_accuracy) << " (to); outputs mean|d| "
            << sci(a.total.mean_abs) << ", max|d| " << sci(a.total.max_abs) << ", misclassification "
            << pct(a.total.misclassification) << "\n";
  std::cout << "\neach knob flipped alone (from -> to), against the `from` policy:\n";
  std::cout << std::left << std::setw(24) << "knob" << std::setw(42) << "from -> to" << std::right << std::setw(11)
            << "mean|d|" << std::setw(11) << "max|d|" << std::setw(10) << "misclass" << std::setw(10) << "accuracy";
  if (a.trained) std::cout << std::setw(12) << "train loss" << std::setw(12) << "|dW|";
  std::cout << "\n";
  for (const auto& e : a.single) {
    std::cout << std::left << std::setw(24) << e.knob << std::setw(42) << (e.from_value + " -> " + e.to_value)
              << std::right << std::setw(11) << sci(e.vs_from.mean_abs) << std::setw(11) << sci(e.vs_from.max_abs)
              << std::setw(10) << pct(e.vs_from.misclassification) << std::setw(10) << pct(e.accuracy);
    if (a.trained) std::cout << std::setw(12) << fmt(e.train_loss, 4) << std::setw(12) << sci(e.weight_distance);
    std::cout << (e.changes_nothing ? "   changes nothing on this model" : "") << "\n";
  }
  std::cout << "\ncumulative path (knobs flipped one after another), distance to `to` "
            << (a.trained ? "(weight distance after training)" : "(mean|d| of the outputs)") << ":\n";
  std::cout << std::left << std::setw(24) << "after flipping" << std::right << std::setw(12) << "distance" << std::setw(10)
            << "explains" << std::setw(10) << "accuracy" << "\n";
  for (const auto& s : a.path)
    std::cout << std::left << std::setw(24) << s.knob << std::right << std::setw(12) << sci(s.distance_to_to)
              << std::setw(10) << pct(s.share) << std::setw(10) << pct(s.accuracy) << "\n";
  if (!o.json.empty()) write_file_atomic(o.json, to_json(a).dump(2) + "\n");
}

}  // namespace

// ---------- attack ----------

struct AttackOptions {
  std::string weights, attack = "fgsm", input, labels, out, eps_units = "absolute", labels_from = "true";
  std::string convention = "driftlab", eps_schedule = "single", step_units = "eps", success = "label", eight_bit = "off";
  std::string boundary_rules;  // empty: the convention's
  std::string projection = "clip-delta";
  std::vector<std::string> judges;
  double eps = 0.1, step = 0.01, lo = NAN, hi = NAN, max_epsilon = 1.0;
  int steps = 10, threads = 0, iterations = 5000, max_directions = 25, epsilons = 1000;
  int64_t max_pixels = 1000;
  bool random_start = false, early_stop = false, transposed_index = false, png = false;
  uint64_t seed = 1;
  int64_t batch = 128;
  DataOptions data;
  DeviceOptions dev;
  std::set<std::string> given;  // the flags given on the command line (a convention fills the others)
};

namespace {

// The convention's value for every attack setting the command line did not give.
void apply_convention(AttackOptions& o, attacks::AttackKind kind, bool decision) {
  const attacks::Convention c = attacks::convention(o.convention);
  if (c.name == "driftlab") return;
  if (decision) {  // Boundary's rules come from the convention in boundary_spec
    check(o.attack == "boundary" || c.name == "foolbox2", "attack: --convention ", c.name, ": single-pixel is "
          "Foolbox 2's attack (Foolbox 3 has none; ART's and torchattacks' pixel attacks are differential evolution, "
          "not reproduced)");
    return;
  }
  auto unless = [&](const char* flag, auto& field, auto value) {
    if (!o.given.count(flag)) field = value;
  };
  unless("--eps-units", o.eps_units, std::string(c.units == attacks::EpsUnits::absolute ? "absolute" : "fraction"));
  unless("--labels-from", o.labels_from, std::string(c.labels == attacks::LabelSource::true_label ? "true" : "prediction"));
  unless("--success", o.success, std::string(attacks::success_rule_name(c.success)));
  if (kind == attacks::AttackKind::fgsm) {
    unless("--eps-schedule", o.eps_schedule,
           std::string(c.fgsm_schedule == attacks::EpsSchedule::single ? "single" : "foolbox2-sweep"));
    unless("--epsilons", o.epsilons, c.sweep_epsilons);
    unless("--max-epsilon", o.max_epsilon, c.max_epsilon);
  } else {
    // a step's units are BIM's and PGD's (FGSM's one step is eps itself)
    unless("--eps-schedule", o.eps_schedule,
           std::string(c.iterative_schedule == attacks::EpsSchedule::single ? "single" : "foolbox2-search"));
    unless("--step-units", o.step_units, std::string(c.step_units == attacks::StepUnits::like_eps ? "eps" : "of-eps"));
    unless("--early-stop", o.early_stop, c.early_stop);
    if (kind == attacks::AttackKind::pgd) unless("--random-start", o.random_start, c.pgd_random_start);
    if (kind == attacks::AttackKind::bim)
      unless("--projection", o.projection, std::string(attacks::projection_name(c.bim_projection)));
    const bool bim = kind == attacks::AttackKind::bim;
    if (bim ? c.bim_step > 0 : c.pgd_step > 0) unless("--step", o.step, bim ? c.bim_step : c.pgd_step);
    if (bim ? c.bim_steps > 0 : c.pgd_steps > 0) unless("--steps", o.steps, bim ? c.bim_steps : c.pgd_steps);
  }
  if (o.eps_schedule != "foolbox2-sweep") {  // one eps, or the search's starting eps
    check(c.eps > 0 || o.given.count("--eps"), "attack: --convention ", c.name, " has no default eps: give --eps");
    unless("--eps", o.eps, c.eps);
  }
}

// The Boundary attack's spec: the rules of --boundary-rules, else of the convention (driftlab:
// Foolbox 2's), with that library's defaults for every flag not given.
attacks::BoundarySpec boundary_spec(const AttackOptions& o, double lo, double hi) {
  std::string rules = o.boundary_rules;
  if (rules.empty()) {
    const attacks::Convention c = attacks::convention(o.convention);
    check(c.name != "torchattacks", "attack: --convention torchattacks: torchattacks has no Boundary attack "
          "(give --boundary-rules foolbox2 | foolbox3 | art)");
    rules = c.name == "driftlab" ? "foolbox2" : c.name;
  }
  attacks::BoundarySpec bs = attacks::boundary_defaults(attacks::parse_boundary_rules(rules));
  if (o.given.count("--iterations")) bs.steps = o.iterations;
  if (o.given.count("--max-directions")) bs.max_directions = o.max_directions;
  if (bs.rules == attacks::BoundaryRules::foolbox3) {
    check(o.batch >= 1 && o.batch <= (1 << 20), "attack: --batch ", o.batch, " must be in [1, 2^20]");
    bs.batch = static_cast<int>(o.batch);
  }
  bs.lo = lo, bs.hi = hi, bs.seed = o.seed;
  bs.validate();
  return bs;
}

// The input space's images (the model's normalisation undone), and back.
Tensor to_input_space(const Tensor& x, const InputNorm& norm) {
  Tensor adv = x.clone();
  if (!norm.identity())
    dispatch_dtype(adv.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* d = adv.data<T>();
      for (int64_t i = 0; i < adv.numel(); ++i) d[i] = d[i] * static_cast<T>(norm.std) + static_cast<T>(norm.mean);
    });
  return adv;
}

std::vector<int32_t> predict_all(Runner& runner, const Tensor& x) {
  return predictions(runner.logits(x));  // the CPU runner runs any size as one batch
}

}  // namespace

// The white-box spec of the options (after the convention filled what was not given); lo/hi
// are the caller's.
attacks::GradientAttackSpec gradient_spec(AttackOptions& o, attacks::AttackKind kind, bool decision) {
  apply_convention(o, kind, decision);
  attacks::GradientAttackSpec spec;
  spec.kind = kind;
  spec.eps = o.eps, spec.step = o.step, spec.steps = o.steps;
  spec.random_start = o.random_start, spec.early_stop = o.early_stop;
  spec.seed = o.seed, spec.batch = o.batch;
  check(o.eps_units == "absolute" || o.eps_units == "fraction", "attack: --eps-units '", o.eps_units,
        "' (absolute: input units; fraction: of hi - lo, Foolbox 2's)");
  spec.units = o.eps_units == "absolute" ? attacks::EpsUnits::absolute : attacks::EpsUnits::fraction_of_range;
  check(o.step_units == "eps" || o.step_units == "of-eps", "attack: --step-units '", o.step_units,
        "' (eps: in eps's units; of-eps: a fraction of eps, Foolbox 3's rel_stepsize)");
  spec.step_units = o.step_units == "eps" ? attacks::StepUnits::like_eps : attacks::StepUnits::fraction_of_eps;
  check(o.labels_from == "true" || o.labels_from == "prediction", "attack: --labels-from '", o.labels_from,
        "' (true | prediction)");
  spec.labels = o.labels_from == "true" ? attacks::LabelSource::true_label : attacks::LabelSource::clean_prediction;
  check(o.eps_schedule == "single" || o.eps_schedule == "foolbox2-sweep" || o.eps_schedule == "foolbox2-search",
        "attack: --eps-schedule '", o.eps_schedule, "' (single | foolbox2-sweep: FGSM | foolbox2-search: BIM, PGD)");
  spec.schedule = o.eps_schedule == "single"           ? attacks::EpsSchedule::single
                  : o.eps_schedule == "foolbox2-sweep" ? attacks::EpsSchedule::foolbox2_sweep
                                                       : attacks::EpsSchedule::foolbox2_search;
  spec.sweep_epsilons = o.epsilons, spec.max_epsilon = o.max_epsilon;
  spec.success = attacks::parse_success_rule(o.success);
  spec.projection = attacks::parse_projection(o.projection);
  return spec;
}

void attack_cmd(AttackOptions o) {
  set_threads(o.threads);
  check(!o.out.empty(), "attack: --out DIR is required");
  const bool decision = o.attack == "boundary" || o.attack == "single-pixel";
  const attacks::AttackKind kind = decision ? attacks::AttackKind::fgsm : attacks::parse_attack_kind(o.attack);
  attacks::GradientAttackSpec spec = gradient_spec(o, kind, decision);
  const attacks::EightBit eight_bit = attacks::parse_eight_bit(o.eight_bit);
  LoadedModel lm = quant::load_any_model(o.weights);
  const InputNorm norm = input_norm_from_metadata(lm.metadata);
  // The valid range in the model's input space: the images' [0, 1] through the model's own
  // normalisation (the same float ops as apply_norm), unless --lo/--hi say otherwise.
  Tensor bounds = Tensor::from<float>({2}, {0.f, 1.f});
  apply_norm(bounds, norm);
  spec.lo = std::isnan(o.lo) ? bounds.at(0) : o.lo;
  spec.hi = std::isnan(o.hi) ? bounds.at(1) : o.hi;
  Tensor x;
  std::vector<int32_t> y;
  std::string from;
  if (!o.input.empty()) {
    check(!o.labels.empty(), "attack: --input needs --labels Y.npy (one class per input)");
    x = read_npy(o.input);
    check(x.dtype() == DType::f32 || x.dtype() == DType::f64, "attack: ", o.input, " holds ", dtype_name(x.dtype()),
          "; the model takes float32 or float64 inputs");
    Shape want{x.rank() ? x.dim(0) : 0};
    want.insert(want.end(), lm.model.input_shape.begin(), lm.model.input_shape.end());
    check(x.shape() == want && x.dim(0) >= 1, "attack: ", o.input, " has shape ", shape_str(x.shape()), ", model ",
          lm.model.name, " takes ", shape_str(want));
    x = x.to(lm.model.dtype());
    normalise_for(lm, x);
    const Tensor yl = read_npy(o.labels);
    check(yl.rank() == 1 && yl.dim(0) == x.dim(0), "attack: ", o.labels, " has shape ", shape_str(yl.shape()),
          ", expected [", x.dim(0), "]");
    for (int64_t i = 0; i < yl.numel(); ++i) {
      const double v = yl.at(i);
      check(v == std::floor(v) && v >= 0 && v < 1e6, "attack: ", o.labels, " element ", i, " is ", v,
            ", not a class index");
      y.push_back(static_cast<int32_t>(v));
    }
    from = o.input;
  } else {
    Dataset test = load_split_for(lm, *o.data.loader, o.data, Split::test);
    check_data_fits(lm, o.weights, test);
    std::vector<int64_t> idx(static_cast<std::size_t>(test.images.dim(0)));
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
    x = gather_batch(test, idx, 0, test.images.dim(0), lm.model.dtype());
    y = test.labels;
    from = test.name;
  }
  // The judges (transfer: the examples crafted here, judged by other models, e.g. the int8
  // version): loaded and checked before the attack runs.
  std::vector<LoadedModel> judges;
  for (const std::string& path : o.judges) {
    judges.push_back(quant::load_any_model(path));
    check(judges.back().model.input_shape == lm.model.input_shape, "attack: --judge ", path, " (",
          judges.back().model.name, ") takes ", shape_str(judges.back().model.input_shape), ", ", o.weights,
          " takes ", shape_str(lm.model.input_shape));
  }
  // White-box attacks on an int8 model: the straight-through gradient of its fake-quantized float
  // graph, the decisions the int8 model's own (quant/ste.h).
  // With --device cuda the gradients and decisions come from the device's kernels (the attack's own
  // arithmetic, sign/clamp/projection and the judging, stays on the host: the same code for both).
  const Device device = o.dev.parsed();
  Model fake;
  std::unique_ptr<Runner> runner;
  if (quant::is_quantized(lm) && !decision) {
    check(device == Device::cpu, "attack: ", o.attack, " on the int8 model ", o.weights,
          " differentiates its fake-quantized graph (quant/ste.h), which has no device layers: run it with "
          "--device cpu (boundary and single-pixel run int8 models on the device)");
    fake = quant::fake_quant_model(lm.model);
    runner = quant::open_ste_runner(lm.model, fake);
  } else {
    runner = open_runner(lm.model, device);
  }
  attacks::AttackResult r;
  attacks::BoundarySpec bs;
  if (o.attack == "single-pixel") {
    attacks::SinglePixelSpec sp;
    sp.max_pixels = o.max_pixels, sp.lo = spec.lo, sp.hi = spec.hi, sp.seed = o.seed;
    sp.transposed_index = o.transposed_index;
    check(x.rank() == 4, "attack: single-pixel takes images (N, C, H, W); ", lm.model.name, " takes ",
          shape_str(lm.model.input_shape));
    attacks::SinglePixelResult d = attacks::run_single_pixel(*runner, x, y, sp);
    r.x_adv = d.x_adv, r.clean_pred = d.clean_pred, r.adv_pred = d.adv_pred, r.queries = d.queries;
    attacks::finish_result(x, y, r);
  } else if (o.attack == "boundary") {
    bs = boundary_spec(o, spec.lo, spec.hi);
    attacks::BoundaryResult d = attacks::run_boundary(*runner, x, y, bs);
    r.x_adv = d.x_adv, r.clean_pred = d.clean_pred, r.adv_pred = d.adv_pred, r.queries = d.queries;
    attacks::finish_result(x, y, r);
  } else {
    r = attacks::run_gradient_attack(*runner, x, y, spec);
  }
  const attacks::SuccessRule rule = decision ? attacks::SuccessRule::differs_from_label : spec.success;
  // the adversarial examples in the input's space (the model's normalisation undone)
  Tensor adv = to_input_space(r.x_adv, norm);
  // S2's round trip: the examples as 8-bit images, judged again
  int64_t successes_before_8bit = 0;
  if (eight_bit != attacks::EightBit::off) {
    for (uint8_t v : r.success) successes_before_8bit += v;
    try {
      adv = attacks::to_8bit(adv, eight_bit);
    } catch (const Error& e) {
      fail("attack: --uint8 ", o.eight_bit, " takes images in [0, 1] (the input space): ", e.what());
    }
    r.x_adv = adv.clone();
    normalise_for(lm, r.x_adv);
    r.adv_pred = predict_all(*runner, r.x_adv);
    attacks::finish_result(x, y, r, rule);
  }
  std::vector<uint8_t> correct(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) correct[i] = r.clean_pred[i] == y[i];
  // Transfer: each judge's predictions on the clean and the adversarial inputs (in its own normalisation).
  struct Judged {
    std::vector<int32_t> clean, adv;
  };
  std::vector<Judged> judged;
  std::vector<uint8_t> all_correct = correct;  // correct under every compared model
  const Tensor clean_in = to_input_space(x, norm);
  for (LoadedModel& jm : judges) {
    std::unique_ptr<Runner> jr = open_runner(jm.model, device);
    Tensor xc = clean_in.to(jm.model.dtype()), xa = adv.to(jm.model.dtype());
    normalise_for(jm, xc);
    normalise_for(jm, xa);
    judged.push_back({predict_all(*jr, xc), predict_all(*jr, xa)});
    for (std::size_t i = 0; i < y.size(); ++i) all_correct[i] = all_correct[i] && judged.back().clean[i] == y[i];
  }
  const attacks::AttackSummary all = attacks::summarize(r), on_correct = attacks::summarize(r, correct);
  std::filesystem::create_directories(o.out);
  write_npy(o.out + "/adversarial.npy", adv);
  if (o.png) {
    std::filesystem::create_directories(o.out + "/png");
    attacks::write_pngs(o.out + "/png", "adv_", adv);
  }
  auto summary_json = [](const attacks::AttackSummary& s) {
    return json{{"samples", s.samples}, {"successes", s.successes}, {"success_rate", s.success_rate},
                {"zero_gradients", s.zero_gradients}, {"mean_l0", s.mean_l0}, {"mean_l2", s.mean_l2},
                {"mean_linf", s.mean_linf}, {"median_l2", s.median_l2}, {"median_linf", s.median_linf},
                {"mean_queries", s.mean_queries}};
  };
  json j{{"attack", o.attack},
         {"model", lm.model.name},
         {"weights", o.weights},
         {"int8", quant::is_quantized(lm)},
         {"gradient", decision ? "none (decision-based)"
                      : quant::is_quantized(lm) ? "straight-through: the fake-quantized float graph (quant/ste.h)"
                                                : "the model's own backward"},
         {"policy", lm.model.policy.to_string()},
         {"device", o.dev.device},
         {"inputs", from},
         {"convention", o.convention},
         {"eps", spec.eps},
         {"eps_units", o.eps_units},
         {"eps_schedule", o.eps_schedule},
         {"step", spec.step},
         {"step_units", o.step_units},
         {"steps", spec.kind == attacks::AttackKind::fgsm ? 1 : spec.steps},
         {"random_start", spec.random_start},
         {"projection", attacks::projection_name(spec.projection)},
         {"early_stop", spec.early_stop},
         {"labels_from", o.labels_from},
         {"success", attacks::success_rule_name(rule)},
         {"uint8", o.eight_bit},
         {"seed", spec.seed},
         {"bounds", {spec.lo, spec.hi}},
         {"input_norm", {{"mean", norm.mean}, {"std", norm.std}}},
         {"gradient_calls", r.gradient_calls},
         {"clean_accuracy", static_cast<double>(on_correct.samples) / static_cast<double>(y.size())},
         {"over_correctly_classified", summary_json(on_correct)},
         {"over_all", summary_json(all)},
         {"commit", build_commit()}};
  if ((spec.schedule == attacks::EpsSchedule::foolbox2_sweep || spec.schedule == attacks::EpsSchedule::foolbox2_search) &&
      !decision) {
    if (spec.schedule == attacks::EpsSchedule::foolbox2_sweep)
      j["epsilons"] = o.epsilons, j["max_epsilon"] = o.max_epsilon;
    else
      j["start_eps"] = o.eps;  // the search's first eps; each sample's own is in samples.csv (eps_found)
    j.erase("eps");
    std::vector<double> found;
    for (std::size_t i = 0; i < y.size(); ++i)
      if (correct[i] && r.success[i]) found.push_back(r.eps_found[i]);
    double mean = 0;
    for (double v : found) mean += v;
    j["mean_eps_found"] = found.empty() ? 0.0 : mean / static_cast<double>(found.size());
  }
  if (eight_bit != attacks::EightBit::off) j["successes_before_uint8"] = successes_before_8bit;
  if (decision) {  // no gradient, no eps-ball: the decision-based attacks' own settings
    j["gradient_calls"] = 0;
    for (const char* k : {"eps", "eps_units", "eps_schedule", "step", "step_units", "steps", "random_start",
                          "early_stop", "labels_from", "convention", "projection"})
      j.erase(k);
  }
  if (o.attack == "boundary") {
    j["boundary_rules"] = attacks::boundary_rules_name(bs.rules);
    j["iterations"] = bs.steps, j["max_directions"] = bs.max_directions;
    if (bs.rules == attacks::BoundaryRules::foolbox3) j["boundary_batch"] = bs.batch;
  }
  if (o.attack == "single-pixel") j["max_pixels"] = o.max_pixels, j["transposed_index"] = o.transposed_index;
  // Transfer: success on each judge over the samples every compared model classifies correctly
  // (S2's denominator), and over those the judge classifies correctly.
  json tj = json::array();
  std::vector<double> judge_rates;
  for (std::size_t k = 0; k < judged.size(); ++k) {
    int64_t n_all = 0, s_all = 0, n_own = 0, s_own = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      const int32_t ref = rule == attacks::SuccessRule::differs_from_label ? y[i] : judged[k].clean[i];
      const bool success = judged[k].adv[i] != ref, own = judged[k].clean[i] == y[i];
      n_own += own, s_own += own && success;
      n_all += all_correct[i], s_all += all_correct[i] && success;
    }
    auto rate = [](int64_t s, int64_t n) { return n ? static_cast<double>(s) / static_cast<double>(n) : 0.0; };
    judge_rates.push_back(rate(s_all, n_all));
    tj.push_back({{"weights", o.judges[k]},
                  {"model", judges[k].model.name},
                  {"int8", quant::is_quantized(judges[k])},
                  {"clean_accuracy", rate(n_own, static_cast<int64_t>(y.size()))},
                  {"over_correct_by_all", {{"samples", n_all}, {"successes", s_all}, {"success_rate", rate(s_all, n_all)}}},
                  {"over_correct_by_judge", {{"samples", n_own}, {"successes", s_own}, {"success_rate", rate(s_own, n_own)}}}});
  }
  if (!judged.empty()) {
    const attacks::AttackSummary src = attacks::summarize(r, all_correct);
    j["over_correct_by_all"] = summary_json(src);
    j["transfer"] = tj;
  }
  {
    std::ofstream f(o.out + "/result.json");
    f << j.dump(1) << "\n";
    check(static_cast<bool>(f), "attack: could not write ", o.out, "/result.json");
    std::ofstream c(o.out + "/samples.csv");
    c << "index,label,clean_pred,adv_pred,success,zero_gradient,l0,l2,linf,queries";
    if (!r.eps_found.empty()) c << ",eps_found";
    for (std::size_t k = 0; k < judged.size(); ++k) c << ",judge" << k << "_clean_pred,judge" << k << "_adv_pred";
    c << "\n";
    for (std::size_t i = 0; i < y.size(); ++i) {
      c << i << "," << y[i] << "," << r.clean_pred[i] << "," << r.adv_pred[i] << "," << int(r.success[i]) << ","
        << int(r.zero_gradient[i]) << "," << r.l0[i] << "," << fmt(r.l2[i], 6) << "," << fmt(r.linf[i], 6) << ","
        << (r.queries.empty() ? 0 : r.queries[i]);
      if (!r.eps_found.empty()) c << "," << (std::isnan(r.eps_found[i]) ? std::string("nan") : fmt(r.eps_found[i], 6));
      for (const Judged& jd : judged) c << "," << jd.clean[i] << "," << jd.adv[i];
      c << "\n";
    }
    check(static_cast<bool>(c), "attack: could not write ", o.out, "/samples.csv");
  }
  std::cout << o.attack;
  if (!decision) {
    if (spec.schedule == attacks::EpsSchedule::foolbox2_sweep)
      std::cout << " sweep of " << o.epsilons << " eps up to " << o.max_epsilon << " (" << o.eps_units << ")";
    else
      std::cout << " eps " << spec.eps << " (" << o.eps_units << ")";
    if (o.convention != "driftlab") std::cout << ", " << o.convention << "'s conventions";
  }
  std::cout << " on " << y.size()
            << " inputs of " << from << " (" << lm.model.name << (quant::is_quantized(lm) ? " int8" : "") << ", "
            << lm.model.policy.to_string() << (device == Device::cuda ? ", cuda" : "") << ")\n"
            << "  clean accuracy " << fmt(static_cast<double>(on_correct.samples) / static_cast<double>(y.size()), 4)
            << "; success rate " << fmt(on_correct.success_rate, 4) << " over the " << on_correct.samples
            << " classified correctly (" << fmt(all.success_rate, 4) << " over all)\n"
            << "  per success: mean L2 " << fmt(on_correct.mean_l2, 4) << ", mean Linf " << fmt(on_correct.mean_linf, 4)
            << (decision ? "; mean queries " + fmt(on_correct.mean_queries, 1) : "; zero gradients " +
                                                                                   std::to_string(all.zero_gradients))
            << "\n";
  if (eight_bit != attacks::EightBit::off)
    std::cout << "  as 8-bit images (" << o.eight_bit << "): " << all.successes << " successes of "
              << successes_before_8bit << " before\n";
  for (std::size_t k = 0; k < judged.size(); ++k)
    std::cout << "  judged by " << o.judges[k] << ": success rate " << fmt(judge_rates[k], 4)
              << " over the " << tj[k]["over_correct_by_all"]["samples"].get<int64_t>()
              << " classified correctly by every model\n";
  std::cout << "  wrote " << o.out << "/adversarial.npy, result.json, samples.csv" << (o.png ? ", png/" : "") << "\n";
}

// ---------- robustness ----------

std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);) {
    check(!item.empty(), "robustness: an empty item in '", s, "'");
    out.push_back(item);
  }
  return out;
}

std::string join_list(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

struct RobustnessOptions {
  std::vector<std::string> models, crafts;  // NAME=FILE; NAME=SOURCE
  std::string attacks = "fgsm,boundary", out;
  int repeats = 1;
  int64_t samples = 0;
  bool no_chart = false;
  AttackOptions attack;  // the attacks' settings (the attack command's flags)
};

// The chart: grouped bars (one group per attack, one bar per model, the repeats' standard deviation
// as error bars), R(m) in the legend; matplotlib's Agg backend, PNG and SVG.
const char* kRobustnessChart = R"PY(# written by driftlab robustness: python3 chart.py robustness.json OUT_PREFIX
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
r = json.load(open(sys.argv[1]))
models, attacks = r["models"], r["attacks"]
width = 0.8 / len(models)
fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(attacks) + 1), 3.6))
for m, name in enumerate(models):
    cells = r["cells"][m]
    xs = [a + (m - (len(models) - 1) / 2) * width for a in range(len(attacks))]
    ax.bar(xs, [100 * c["mean"] for c in cells], width, yerr=[100 * c["std"] for c in cells], capsize=3,
           label="%s (R = %.3f)" % (name, r["R"][m]))
ax.set_xticks(range(len(attacks)))
ax.set_xticklabels(attacks)
ax.set_ylabel("success rate (%)")
ax.set_ylim(0, 105)
ax.set_title("%d samples correct under every model, %d repeat(s)" % (len(r["common"]), len(r["seeds"])))
ax.legend(fontsize="small")
fig.tight_layout()
fig.savefig(sys.argv[2] + ".png", dpi=120)
fig.savefig(sys.argv[2] + ".svg")
)PY";

void robustness_cmd(RobustnessOptions o) {
  set_threads(o.attack.threads);
  check(!o.out.empty(), "robustness: --out DIR is required");
  check(!o.models.empty(), "robustness: give at least one --model NAME=FILE");
  std::vector<std::string> names, files;
  std::vector<LoadedModel> lms;
  for (const std::string& m : o.models) {
    const auto eq = m.find('=');
    check(eq != std::string::npos && eq > 0 && eq + 1 < m.size(), "robustness: --model '", m, "' is not NAME=FILE");
    check(std::find(names.begin(), names.end(), m.substr(0, eq)) == names.end(), "robustness: model name '",
          m.substr(0, eq), "' given twice");
    names.push_back(m.substr(0, eq)), files.push_back(m.substr(eq + 1));
    lms.push_back(quant::load_any_model(files.back()));
  }
  auto index_of = [&](const std::string& n) {
    const auto it = std::find(names.begin(), names.end(), n);
    check(it != names.end(), "robustness: no model named '", n, "' (models: ", join_list(names, ", "), ")");
    return static_cast<int>(it - names.begin());
  };
  std::vector<int> craft(names.size(), -1);
  for (const std::string& c : o.crafts) {
    const auto eq = c.find('=');
    check(eq != std::string::npos, "robustness: --craft '", c, "' is not NAME=SOURCE");
    craft[static_cast<std::size_t>(index_of(c.substr(0, eq)))] = index_of(c.substr(eq + 1));
  }
  const InputNorm norm = input_norm_from_metadata(lms[0].metadata);
  for (std::size_t m = 0; m < lms.size(); ++m) {
    check(lms[m].model.input_shape == lms[0].model.input_shape, "robustness: ", files[m], " takes ",
          shape_str(lms[m].model.input_shape), ", ", files[0], " takes ", shape_str(lms[0].model.input_shape));
    const InputNorm nm = input_norm_from_metadata(lms[m].metadata);
    check(nm.mean == norm.mean && nm.std == norm.std, "robustness: ", files[m], " normalises its inputs with mean ",
          nm.mean, ", std ", nm.std, "; ", files[0], " with ", norm.mean, ", ", norm.std,
          ": the models must share their input space");
  }
  // The attacks and their settings (the attack command's flags and conventions).
  std::vector<attacks::RobustnessAttack> atts;
  Tensor bounds = Tensor::from<float>({2}, {0.f, 1.f});
  apply_norm(bounds, norm);
  const double lo = std::isnan(o.attack.lo) ? bounds.at(0) : o.attack.lo;
  const double hi = std::isnan(o.attack.hi) ? bounds.at(1) : o.attack.hi;
  for (const std::string& name : split_list(o.attacks, ',')) {
    attacks::RobustnessAttack a;
    a.name = name;
    const bool decision = name == "boundary" || name == "single-pixel";
    AttackOptions ao = o.attack;
    ao.attack = name;
    if (!decision) {
      a.gradient = gradient_spec(ao, attacks::parse_attack_kind(name), false);
      a.gradient.lo = lo, a.gradient.hi = hi;
    } else {
      check(name == "boundary" || name == "single-pixel", "robustness: unknown attack '", name, "'");
      if (name == "boundary") a.boundary = boundary_spec(ao, lo, hi);
      if (name == "single-pixel") apply_convention(ao, attacks::AttackKind::fgsm, true);  // refuses what is not Foolbox 2's
      a.pixel.max_pixels = ao.max_pixels, a.pixel.lo = lo, a.pixel.hi = hi;
      a.pixel.transposed_index = ao.transposed_index;
    }
    atts.push_back(a);
  }
  Dataset test = load_split_for(lms[0], *o.attack.data.loader, o.attack.data, Split::test);
  check_data_fits(lms[0], files[0], test);
  std::vector<int64_t> idx(static_cast<std::size_t>(test.images.dim(0)));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  const Tensor x = gather_batch(test, idx, 0, test.images.dim(0), lms[0].model.dtype());
  std::vector<std::unique_ptr<Runner>> runners;
  std::vector<attacks::RobustnessModel> rm;
  // An int8 model attacked white-box on itself (no --craft): straight-through gradients of its
  // fake-quantized graph, its own decisions (quant/ste.h).
  std::vector<std::unique_ptr<Model>> fakes;
  const Device device = o.attack.dev.parsed();
  for (std::size_t m = 0; m < lms.size(); ++m) {
    check(lms[m].model.dtype() == lms[0].model.dtype(), "robustness: ", files[m], " computes in ",
          dtype_name(lms[m].model.dtype()), ", ", files[0], " in ", dtype_name(lms[0].model.dtype()));
    if (quant::is_quantized(lms[m]) && craft[m] < 0) {
      check(device == Device::cpu, "robustness: ", names[m], " (", files[m], ") is an int8 model attacked through the "
            "straight-through gradient of its fake-quantized graph (quant/ste.h), which has no device layers: run with "
            "--device cpu, or craft its examples on another model (--craft ", names[m], "=SOURCE)");
      fakes.push_back(std::make_unique<Model>(quant::fake_quant_model(lms[m].model)));
      runners.push_back(quant::open_ste_runner(lms[m].model, *fakes.back()));
    } else {
      runners.push_back(open_runner(lms[m].model, device));
    }
    rm.push_back({names[m], runners.back().get(), craft[m]});
  }
  const attacks::RobustnessTable t =
      attacks::run_robustness(rm, atts, x, test.labels, o.repeats, o.attack.seed, o.samples);

  // Outputs: JSON (everything), CSV (one row per model x attack x repeat), Markdown table, chart.
  std::filesystem::create_directories(o.out);
  json cells = json::array();
  for (std::size_t m = 0; m < names.size(); ++m) {
    json row = json::array();
    for (std::size_t a = 0; a < atts.size(); ++a) {
      const attacks::RobustnessCell& c = t.cell[m][a];
      row.push_back({{"rates", c.rates}, {"successes", c.successes}, {"mean", c.mean}, {"std", c.std},
                     {"mean_l2", c.mean_l2}, {"mean_linf", c.mean_linf}, {"mean_queries", c.mean_queries}});
    }
    cells.push_back(row);
  }
  json pairs = json::array();
  for (const auto& p : t.pairs)
    pairs.push_back({{"a", names[0]}, {"b", names[static_cast<std::size_t>(p.k)]}, {"wilcoxon_statistic", p.wilcoxon.statistic},
                     {"pvalue", p.wilcoxon.pvalue}, {"method", p.wilcoxon.method}, {"zeros", p.wilcoxon.zeros},
                     {"ties", p.wilcoxon.ties}, {"a12", p.a12}});
  json mj = json::array();
  for (std::size_t m = 0; m < names.size(); ++m)
    mj.push_back({{"name", names[m]}, {"weights", files[m]}, {"int8", quant::is_quantized(lms[m])},
                  {"crafted_on", craft[m] < 0 ? json(nullptr) : json(names[static_cast<std::size_t>(craft[m])])},
                  {"gradient", craft[m] >= 0            ? "the crafting model's"
                               : quant::is_quantized(lms[m]) ? "straight-through (fake-quantized graph)"
                                                             : "the model's own backward"},
                  {"clean_accuracy", t.clean_accuracy[m]}});
  json settings = json::array();  // what each attack ran with (after the convention filled the defaults)
  for (const attacks::RobustnessAttack& a : atts) {
    if (a.name == "boundary")
      settings.push_back({{"attack", a.name}, {"boundary_rules", attacks::boundary_rules_name(a.boundary.rules)},
                          {"iterations", a.boundary.steps}, {"max_directions", a.boundary.max_directions},
                          {"batch", a.boundary.batch}});
    else if (a.name == "single-pixel")
      settings.push_back({{"attack", a.name}, {"max_pixels", a.pixel.max_pixels}});
    else
      settings.push_back({{"attack", a.name}, {"convention", o.attack.convention}, {"eps", a.gradient.eps},
                          {"step", a.gradient.step}, {"steps", a.gradient.steps}});
  }
  const json j{{"models", names},       {"model_files", mj}, {"attacks", t.attacks}, {"settings", settings}, {"common", t.common},
               {"inputs", test.name},   {"seeds", t.seeds},  {"cells", cells},       {"R", t.r},
               {"pairs", pairs},        {"device", o.attack.dev.device}, {"commit", build_commit()}};
  {
    std::ofstream f(o.out + "/robustness.json");
    f << j.dump(1) << "\n";
    check(static_cast<bool>(f), "robustness: could not write ", o.out, "/robustness.json");
    std::ofstream c(o.out + "/robustness.csv");
    c << "model,attack,repeat,seed,samples,successes,success_rate\n";
    for (std::size_t m = 0; m < names.size(); ++m)
      for (std::size_t a = 0; a < atts.size(); ++a)
        for (std::size_t r = 0; r < t.seeds.size(); ++r)
          c << names[m] << "," << t.attacks[a] << "," << r << "," << t.seeds[r] << "," << t.common.size() << ","
            << t.cell[m][a].successes[r] << "," << fmt(t.cell[m][a].rates[r], 6) << "\n";
    check(static_cast<bool>(c), "robustness: could not write ", o.out, "/robustness.csv");
  }
  std::ostringstream md;
  md << "| model | clean acc. |";
  for (const std::string& a : t.attacks) md << " " << a << " success % |";
  md << " R(m) |\n|---|---|";
  for (std::size_t a = 0; a < atts.size(); ++a) md << "---|";
  md << "---|\n";
  for (std::size_t m = 0; m < names.size(); ++m) {
    md << "| " << names[m] << (quant::is_quantized(lms[m]) ? " (int8)" : "")
       << (craft[m] >= 0 ? ", crafted on " + names[static_cast<std::size_t>(craft[m])] : std::string()) << " | "
       << fmt(100 * t.clean_accuracy[m], 2) << " |";
    for (std::size_t a = 0; a < atts.size(); ++a) {
      md << " " << fmt(100 * t.cell[m][a].mean, 2);
      if (t.seeds.size() > 1) md << " ± " << fmt(100 * t.cell[m][a].std, 2);
      md << " |";
    }
    md << " " << fmt(t.r[m], 3) << " |\n";
  }
  for (const auto& p : t.pairs)
    md << "\n" << names[0] << " vs " << names[static_cast<std::size_t>(p.k)] << ": Wilcoxon signed-rank p = "
       << fmt(p.wilcoxon.pvalue, 4) << " (" << p.wilcoxon.method << ", over " << atts.size() * t.seeds.size()
       << " paired (attack, repeat) rates), A12 = " << fmt(p.a12, 3);
  if (!t.pairs.empty()) md << "\n";
  {
    std::ofstream f(o.out + "/table.md");
    f << md.str();
    check(static_cast<bool>(f), "robustness: could not write ", o.out, "/table.md");
  }
  std::cout << "robustness: " << names.size() << " models x " << atts.size() << " attacks x " << t.seeds.size()
            << " repeat(s) on the " << t.common.size() << " inputs of " << test.name
            << " that every model classifies correctly\n\n"
            << md.str() << "\n";
  if (!o.no_chart) {
    const std::string script = o.out + "/chart.py";
    {
      std::ofstream f(script);
      f << kRobustnessChart;
      check(static_cast<bool>(f), "robustness: could not write ", script);
    }
    const char* py = std::getenv("DRIFTLAB_PYTHON");
    const std::string cmd = std::string(py && *py ? py : "/usr/bin/python3") + " " + shell_quoted(script) + " " +
                            shell_quoted(o.out + "/robustness.json") + " " + shell_quoted(o.out + "/chart") + " 2>&1";
    int rc = 0;
    const std::string out = run_capture(cmd, &rc);
    check(rc == 0, "robustness: the chart needs Python 3 with matplotlib (apt-get install python3-matplotlib; "
          "or --no-chart): ", cmd, " said: ", out);
  }
  std::cout << "  wrote " << o.out << "/robustness.json, robustness.csv, table.md"
            << (o.no_chart ? "" : ", chart.png, chart.svg") << "\n";
}

void register_commands(CLI::App& app) {
  register_convert_commands(app);
  // policy
  auto* pol = app.add_subcommand("policy", "show a policy's knobs, or diff two policies");
  pol->require_subcommand(1);
  auto* show = pol->add_subcommand("show", "print every knob of a policy and the framework behaviour it copies");
  auto spec = std::make_shared<std::string>();
  show->add_option("policy", *spec, "e.g. torch or tensorflow,relu_grad_at_zero=0.5")->required();
  show->callback([spec] { policy_show(*spec); });
  auto* pdiff = pol->add_subcommand("diff", "knob-by-knob difference of two policies");
  auto a = std::make_shared<std::string>(), b = std::make_shared<std::string>();
  pdiff->add_option("a", *a)->required();
  pdiff->add_option("b", *b)->required();
  pdiff->callback([a, b] { policy_diff(*a, *b); });

  // model
  auto* mod = app.add_subcommand("model", "inspect models");
  mod->require_subcommand(1);
  auto* mshow = mod->add_subcommand("show", "layers, output shapes and trainable-parameter count");
  auto mname = std::make_shared<std::string>(), mpol = std::make_shared<std::string>("torch");
  mshow->add_option("name", *mname, "see `driftlab model list`")->required();
  mshow->add_option("--policy", *mpol)->capture_default_str();
  mshow->callback([mname, mpol] { model_show(*mname, *mpol); });
  auto* mlist = mod->add_subcommand("list", "the models driftlab can build");
  mlist->callback([] {
    for (const auto& m : model_table()) std::cout << std::left << std::setw(10) << m.name << m.description << "\n";
  });

  // train
  auto topt = std::make_shared<TrainOptions>();
  auto* tr = app.add_subcommand("train", "train a model under a policy; writes model.dlm, metrics.json, metrics.csv");
  add_train_options(tr, *topt);
  tr->add_option("--policy", topt->policy)->capture_default_str();
  tr->add_option("--out", topt->out, "output folder (runs/NAME); also where checkpoint.dlc goes");
  tr->add_option("--checkpoint-every", topt->checkpoint_every,
                 "also write RUN/checkpoint.dlc every N steps (one is written after every epoch)")
      ->check(CLI::NonNegativeNumber);
  tr->add_option("--resume", topt->resume,
                 "go on with the run in RUN_DIR from its checkpoint.dlc (after Ctrl-C, SIGTERM or a kill); "
                 "takes no other option");
  topt->cmd = tr;
  tr->callback([topt] {
    if (!topt->resume.empty())
      resume_train(*topt);
    else
      run_train(*topt);
  });

  // compare
  auto copt = std::make_shared<TrainOptions>();
  auto cpols = std::make_shared<std::string>("tensorflow,theano,torch");
  auto* cmp = app.add_subcommand("compare", "train under several policies and print a side-by-side table");
  add_train_options(cmp, *copt);
  cmp->add_option("--policies", *cpols, "comma-separated presets, or ';'-separated policy strings")->capture_default_str();
  cmp->add_option("--out", copt->out, "output folder (default runs/compare)");
  cmp->callback([copt, cpols] { compare_cmd(*copt, *cpols); });

  // eval
  auto ew = std::make_shared<std::string>();
  auto ed = std::make_shared<DataOptions>();
  auto eb = std::make_shared<int64_t>(1000);
  auto et = std::make_shared<int>(0);
  auto* ev = app.add_subcommand("eval", "test accuracy of a saved model");
  ev->add_option("--weights", *ew, "model file (.dlm)")->required();
  ev->add_option("--batch", *eb)->capture_default_str();
  add_threads_option(ev, *et);
  add_data_options(ev, *ed);
  auto edev = std::make_shared<DeviceOptions>();
  add_device_options(ev, *edev);
  ev->callback([ew, ed, eb, et, edev] { eval_cmd(*ew, *ed, *eb, *et, *edev); });

  // predict
  auto pw = std::make_shared<std::string>(), pin = std::make_shared<std::string>(), pout = std::make_shared<std::string>();
  auto pd = std::make_shared<DataOptions>();
  auto psizes = std::make_shared<std::vector<int64_t>>(std::vector<int64_t>{1000, 10000});
  auto pt = std::make_shared<int>(0);
  auto* pr = app.add_subcommand("predict", "prediction time for N inputs in one batch, or logits of an .npy input");
  pr->add_option("--weights", *pw, "model file (.dlm)")->required();
  pr->add_option("--sizes", *psizes, "batch sizes to time")->delimiter(',')->capture_default_str();
  pr->add_option("--input", *pin, "an .npy array (N,C,H,W) to predict instead of timing");
  pr->add_option("--output", *pout, "where --input's logits go (.npy)");
  add_threads_option(pr, *pt);
  add_data_options(pr, *pd);
  auto pdev = std::make_shared<DeviceOptions>();
  auto pmax = std::make_shared<int64_t>(0);
  add_device_options(pr, *pdev);
  pr->add_option("--max-batch", *pmax, "cuda: run at most N inputs at a time and join the logits (0: all at once)");
  pr->callback([pw, pd, psizes, pin, pout, pt, pdev, pmax] {
    predict_cmd(*pw, *pd, *psizes, *pin, *pout, *pt, *pdev, *pmax);
  });

  // quantize
  auto qo = std::make_shared<QuantizeOptions>();
  auto* qz = app.add_subcommand("quantize", "int8 post-training quantization of a saved fp32 model (writes Q.dlm)");
  qz->add_option("--weights", qo->weights, "fp32 model file (.dlm)")->required();
  qz->add_option("--scheme", qo->scheme, "tflite | torch_qnnpack | torch_onednn | torch_fbgemm | ort")
      ->capture_default_str();
  qz->add_option("--quant", qo->knobs, "quant knobs over the scheme's, e.g. quant_round=half_away,quant_relu=separate");
  qz->add_option("--observer", qo->observer, "minmax | moving_average | histogram | percentile | entropy");
  qz->add_option("--mode", qo->mode, "static (calibrated int8 activations) | dynamic (int8 weights, each input's "
                 "scale chosen at run time: PyTorch quantize_dynamic) | auto (dynamic for models with LSTM/GRU layers)")
      ->capture_default_str();
  qz->add_option("--calib", qo->calib, "calibrate on the first N training samples in file order")->capture_default_str();
  qz->add_option("--calib-data", qo->calib_data, "calibrate on this float32 .npy (N, input shape) instead");
  qz->add_option("--calib-batch", qo->calib_batch, "calibration samples per forward")->capture_default_str();
  qz->add_option("--out", qo->out, "the int8 model file to write")->required();
  qz->add_option("--report", qo->report, "write a report (.json, .csv or .md): sizes, accuracy, SQNR, time");
  qz->add_option("--report-inputs", qo->report_n, "inputs for the SQNR and timing")->capture_default_str();
  add_threads_option(qz, qo->threads);
  add_data_options(qz, qo->data);
  qz->callback([qo] { quantize_cmd(*qo); });

  // weights
  auto* wt = app.add_subcommand("weights", "exchange weights with Python as .npy files");
  wt->require_subcommand(1);
  auto xw = std::make_shared<std::string>(), xdir = std::make_shared<std::string>();
  auto xdl = std::make_shared<bool>(false);
  auto* wex = wt->add_subcommand("export", "write each parameter as DIR/<name>.npy");
  wex->add_option("--weights", *xw)->required();
  wex->add_option("--out", *xdir)->required();
  wex->add_flag("--driftlab-layout", *xdl, "OIHW/(out,in) instead of the policy's framework layout");
  wex->callback([xw, xdir, xdl] {
    weights_export(*xw, *xdir, *xdl ? NpyLayout::driftlab : NpyLayout::framework);
  });
  auto im = std::make_shared<std::string>(), ip = std::make_shared<std::string>("torch"),
       idir = std::make_shared<std::string>(), iout = std::make_shared<std::string>();
  auto idl = std::make_shared<bool>(false);
  auto* wim = wt->add_subcommand("import", "build a model file from DIR/<name>.npy files");
  wim->add_option("--model", *im)->required();
  wim->add_option("--policy", *ip)->capture_default_str();
  wim->add_option("--from", *idir)->required();
  wim->add_option("--out", *iout)->required();
  wim->add_flag("--driftlab-layout", *idl, "the files are OIHW/(out,in) rather than the policy's framework layout");
  wim->callback([im, ip, idir, iout, idl] {
    weights_import(*im, *ip, *idir, *iout, *idl ? NpyLayout::driftlab : NpyLayout::framework);
  });

  // drift
  auto dopt = std::make_shared<DriftOptions>();
  auto* dr = app.add_subcommand("drift", "the same weights under several policies: output errors, misclassification, localisation");
  dr->add_option("--weights", dopt->weights, "model file (.dlm)")->required();
  dr->add_option("--model", dopt->model, "checked against the model the file holds");
  dr->add_option("--policies", dopt->policies)->capture_default_str();
  dr->add_flag("--no-convert", dopt->no_convert, "load the tensors raw under each policy instead of converting them");
  dr->add_option("--tol", dopt->tol, "localisation tolerance on max|d|/max|b| per layer")
      ->capture_default_str()
      ->check(kFiniteNonNegative);
  dr->add_option("--localise-batch", dopt->localise_batch)->capture_default_str()->check(CLI::PositiveNumber);
  dr->add_option("--quantize", dopt->quantize,
                 "compare the fp32 model and each policy's int8 model (quantized under its quant_* knobs, calibrated on "
                 "the first N training samples); localisation by activation point")
      ->check(CLI::NonNegativeNumber);
  dr->add_option("--calib-batch", dopt->calib_batch, "calibration samples per forward (--quantize)")->capture_default_str();
  dr->add_option("--json", dopt->json, "also write the report as JSON");
  add_threads_option(dr, dopt->threads);
  add_data_options(dr, dopt->data);
  add_device_options(dr, dopt->dev);
  dr->callback([dopt] { drift_cmd(*dopt); });

  // attribute
  auto aopt = std::make_shared<AttributeCliOptions>();
  auto* at = app.add_subcommand("attribute", "flip the knobs between two policies one at a time: what explains the difference");
  at->add_option("--weights", aopt->weights, "model file (.dlm)")->required();
  at->add_option("--model", aopt->model, "checked against the model the file holds");
  at->add_option("--from", aopt->from)->capture_default_str();
  at->add_option("--to", aopt->to)->capture_default_str();
  at->add_option("--train", aopt->train, "also train N epochs from the same initial weights under each policy")
      ->check(CLI::NonNegativeNumber);
  at->add_option("--batch", aopt->batch)->capture_default_str();
  at->add_option("--lr", aopt->lr)->capture_default_str();
  at->add_option("--momentum", aopt->momentum)->capture_default_str();
  at->add_option("--seed", aopt->seed)->capture_default_str()->check(CLI::NonNegativeNumber);
  at->add_flag("--no-convert", aopt->no_convert);
  at->add_option("--quantize", aopt->quantize,
                 "compare int8 models: quantize under each policy's quant_* knobs, calibrated on the first N training "
                 "samples")
      ->check(CLI::NonNegativeNumber);
  at->add_option("--calib-batch", aopt->calib_batch, "calibration samples per forward (--quantize)")->capture_default_str();
  at->add_option("--json", aopt->json);
  add_threads_option(at, aopt->threads);
  add_data_options(at, aopt->data);
  add_device_options(at, aopt->dev);
  at->callback([aopt] { attribute_cmd(*aopt); });

  // explain
  auto knob = std::make_shared<std::string>();
  // attack
  auto ao = std::make_shared<AttackOptions>();
  auto* ak = app.add_subcommand("attack", "attack a saved model (fgsm, bim, pgd; boundary and single-pixel on int8 "
                                           "models too): "
                                           "adversarial examples (.npy), result.json, samples.csv");
  ak->add_option("--weights", ao->weights, "model file (.dlm); int8: white-box attacks on straight-through gradients (quant/ste.h)")->required();
  ak->add_option("--attack", ao->attack, "fgsm | bim | pgd | boundary | single-pixel")->capture_default_str();
  ak->add_option("--iterations", ao->iterations, "boundary: steps (Foolbox 2's iterations; default the rules' own: "
                 "5000 Foolbox 2, 25000 Foolbox 3)");
  ak->add_option("--max-directions", ao->max_directions, "boundary: candidates per step (Foolbox 2's; Foolbox 3: 1; ART: sample_size)")
      ->capture_default_str();
  ak->add_option("--boundary-rules", ao->boundary_rules, "boundary: foolbox2 | foolbox3 | art (default: the convention's; "
                 "driftlab: foolbox2). foolbox3 steps --batch samples together");
  ak->add_option("--max-pixels", ao->max_pixels, "single-pixel: positions tried")->capture_default_str();
  ak->add_flag("--transposed-index", ao->transposed_index, "single-pixel: Foolbox 2's (x = p % w) reading of a position");
  ak->add_option("--eps", ao->eps, "L-inf budget (--eps-units)")->check(kFiniteNonNegative)->capture_default_str();
  ak->add_option("--step", ao->step, "bim/pgd step size (--eps-units)")->check(kFiniteNonNegative)->capture_default_str();
  ak->add_option("--steps", ao->steps, "bim/pgd iterations")->capture_default_str();
  ak->add_flag("--random-start", ao->random_start, "pgd: start from a uniform point of the eps-ball (--seed)");
  ak->add_flag("--early-stop", ao->early_stop, "bim/pgd: a sample stops once misclassified (Foolbox 2's return_early)");
  ak->add_option("--projection", ao->projection, "bim/pgd: clip-delta (x0 + clamp(x - x0, -eps, eps), then the "
                 "bounds) | max-min (torchattacks' BIM)")->capture_default_str();
  ak->add_option("--eps-units", ao->eps_units, "absolute (input units) | fraction (of the input range: Foolbox 2)")
      ->capture_default_str();
  ak->add_option("--labels-from", ao->labels_from, "the loss's labels: true | prediction (ART's default)")
      ->capture_default_str();
  ak->add_option("--lo", ao->lo, "lowest valid input (default: 0 through the model's normalisation)");
  ak->add_option("--hi", ao->hi, "highest valid input (default: 1 through the model's normalisation)");
  ak->add_option("--seed", ao->seed, "pgd's random start")->capture_default_str();
  ak->add_option("--batch", ao->batch, "inputs per gradient call")->capture_default_str();
  ak->add_option("--input", ao->input, "attack these inputs (.npy, the model's input shape) instead of the test split");
  ak->add_option("--labels", ao->labels, "their classes (.npy, N integers)");
  ak->add_option("--convention", ao->convention,
                 "driftlab | foolbox2 | foolbox3 | art | torchattacks: the library's units, step rule, labels, "
                 "success rule, schedule and defaults for every flag not given")
      ->capture_default_str();
  ak->add_option("--eps-schedule", ao->eps_schedule, "fgsm: single | foolbox2-sweep (--epsilons, --max-epsilon); bim, pgd: single | foolbox2-search "
                  "(Foolbox 2's eps search from --eps, step/eps ratio kept)")
      ->capture_default_str();
  ak->add_option("--epsilons", ao->epsilons, "foolbox2-sweep: grid size (Foolbox 2's epsilons)")->capture_default_str();
  ak->add_option("--max-epsilon", ao->max_epsilon, "foolbox2-sweep: its end (--eps-units)")->capture_default_str();
  ak->add_option("--step-units", ao->step_units, "bim/pgd: eps (the step in eps's units) | of-eps (a fraction of "
                 "eps: Foolbox 3)")->capture_default_str();
  ak->add_option("--success", ao->success, "label (prediction != label) | clean-prediction (the prediction "
                 "changed: ART)")->capture_default_str();
  ak->add_option("--uint8", ao->eight_bit, "off | round | truncate: judge the examples as 8-bit images (S2's PNG)")
      ->capture_default_str();
  ak->add_flag("--png", ao->png, "also write each adversarial example as OUT/png/adv_<i>.png");
  ak->add_option("--judge", ao->judges, "judge the examples on this model too (transfer; e.g. its int8 version); "
                 "repeatable");
  ak->add_option("--out", ao->out, "output folder")->required();
  add_threads_option(ak, ao->threads);
  add_data_options(ak, ao->data);
  add_device_options(ak, ao->dev);
  ak->callback([ao, ak] {
    AttackOptions o = *ao;
    for (const CLI::Option* opt : ak->get_options())
      if (opt->count() > 0) o.given.insert(opt->get_name());
    attack_cmd(o);
  });

  // robustness
  auto ro = std::make_shared<RobustnessOptions>();
  auto* rb = app.add_subcommand("robustness", "several models (fp32, int8, presets) under several attacks: success "
                                              "rates over the inputs every model classifies correctly, R(m), "
                                              "Wilcoxon/A12, a table and a bar chart");
  rb->add_option("--model", ro->models, "NAME=FILE (.dlm, fp32 or int8); repeatable, the first is the baseline")
      ->required();
  rb->add_option("--craft", ro->crafts, "NAME=SOURCE: NAME's white-box examples are crafted on model SOURCE "
                                        "(transfer, e.g. an int8 model from its fp32 one; without it an int8 model is attacked on its "
                                        "straight-through gradients); repeatable");
  rb->add_option("--attacks", ro->attacks, "comma-separated: fgsm, bim, pgd, boundary, single-pixel")
      ->capture_default_str();
  rb->add_option("--repeats", ro->repeats, "runs per attack, seeds --seed, --seed + 1, ...")->capture_default_str();
  rb->add_option("--samples", ro->samples, "at most this many of the inputs every model gets right (0: all; "
                                           "S1: 1000)")->capture_default_str();
  rb->add_flag("--no-chart", ro->no_chart, "skip the chart (it needs python3-matplotlib)");
  rb->add_option("--out", ro->out, "output folder")->required();
  rb->add_option("--convention", ro->attack.convention, "driftlab | foolbox2 | foolbox3 | art | torchattacks")
      ->capture_default_str();
  rb->add_option("--eps", ro->attack.eps, "white-box L-inf budget")->check(kFiniteNonNegative)->capture_default_str();
  rb->add_option("--eps-units", ro->attack.eps_units, "absolute | fraction")->capture_default_str();
  rb->add_option("--eps-schedule", ro->attack.eps_schedule, "fgsm: single | foolbox2-sweep")->capture_default_str();
  rb->add_option("--epsilons", ro->attack.epsilons, "foolbox2-sweep: grid size")->capture_default_str();
  rb->add_option("--max-epsilon", ro->attack.max_epsilon, "foolbox2-sweep: its end")->capture_default_str();
  rb->add_option("--step", ro->attack.step, "bim/pgd step")->check(kFiniteNonNegative)->capture_default_str();
  rb->add_option("--steps", ro->attack.steps, "bim/pgd iterations")->capture_default_str();
  rb->add_flag("--random-start", ro->attack.random_start, "pgd: uniform start in the ball");
  rb->add_flag("--early-stop", ro->attack.early_stop, "bim/pgd: stop a sample once misclassified");
  rb->add_option("--projection", ro->attack.projection, "bim/pgd: clip-delta | max-min (torchattacks' BIM)")
      ->capture_default_str();
  rb->add_option("--iterations", ro->attack.iterations, "boundary: steps (default the rules' own)");
  rb->add_option("--max-directions", ro->attack.max_directions, "boundary: candidates per step (Foolbox 2's)")
      ->capture_default_str();
  rb->add_option("--boundary-rules", ro->attack.boundary_rules, "boundary: foolbox2 | foolbox3 | art (default: the "
                 "convention's)");
  rb->add_option("--max-pixels", ro->attack.max_pixels, "single-pixel: positions tried")->capture_default_str();
  rb->add_option("--seed", ro->attack.seed, "the first repeat's seed")->capture_default_str();
  rb->add_option("--batch", ro->attack.batch, "inputs per gradient call")->capture_default_str();
  add_threads_option(rb, ro->attack.threads);
  add_data_options(rb, ro->attack.data);
  add_device_options(rb, ro->attack.dev);
  rb->callback([ro, rb] {
    RobustnessOptions o = *ro;
    for (const CLI::Option* opt : rb->get_options())
      if (opt->count() > 0) o.attack.given.insert(opt->get_name());
    robustness_cmd(o);
  });

  auto* ex = app.add_subcommand("explain", "what a knob does, its value per framework, its source, a live example");
  ex->add_option("knob", *knob)->required();
  ex->callback([knob] { std::cout << explain_knob(*knob); });

  // device
  auto* dev = app.add_subcommand("device", "list CUDA devices (or say why there are none)");
  dev->callback([] {
    std::string why;
    int n = cuda::device_count(&why);
    if (n == 0) {
      std::cout << "no CUDA device: " << why << "\n";
      return;
    }
    for (int i = 0; i < n; ++i) {
      cuda::DeviceInfo d = cuda::device_info(i);
      std::cout << "cuda:" << i << " " << d.name << " sm_" << d.cc_major << d.cc_minor << ", " << d.sm_count
                << " SMs, " << d.total_memory / (1 << 20) << " MiB (" << d.free_memory / (1 << 20)
                << " free), driver " << d.driver_version << ", runtime " << d.runtime_version << "\n";
    }
  });
}

}  // namespace cli
}  // namespace driftlab
