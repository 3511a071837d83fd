// What the command files share (cli/common.cpp): the data, thread and device options, the number
// formats of the printed tables, the progress bar. What a command
// computes lives in the library face (driftlab/).
#pragma once
#include <CLI/CLI.hpp>
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/data/datasets.h"
#include "engine/train/runner.h"
#include "driftlab/model.h"
#include "models/model_file.h"
#include "train/run.h"

namespace driftlab {
namespace cli {

// Shows the summary of an IMDb corpus when a command's loader reads one.
void print_imdb_read(const std::string& dir, const ImdbOptions& o, const ImdbData& d);

// A command's data options and the loader its splits come from. Copies share the loader:
// compare runs run_train on copies of one TrainOptions, and a command reads (and summarises)
// an IMDb corpus once for all its splits and runs.
struct DataOptions : DataSpec {
  std::shared_ptr<DatasetLoader> loader = std::make_shared<DatasetLoader>(print_imdb_read);
};

// SIGINT and SIGTERM while a command runs (train, compare, study run, study worker): the handler
// only records the signal (a handler can reach nothing but a global); the command asks caught()
// between steps, finishes its step, writes a checkpoint and returns. The previous handlers come
// back when the object goes. restart: SA_RESTART (interrupted calls go on; study run wants its
// wait for workers interrupted instead); second_kills: SA_RESETHAND (a second Ctrl-C kills at
// once; not for study run, whose workers would be left behind).
// The folder holding ONNX Runtime (ort_run.js and its node_modules, onnxruntime-node from npm):
// DRIFTLAB_ORT_DIR, else this source tree's tests/oracles/ort. `driftlab convert` runs it; a study's
// convert cells find it in DRIFTLAB_ORT_DIR, which `study run` and `study worker` set to this.
std::string ort_dir();

class StopSignals {
 public:
  explicit StopSignals(bool restart = true, bool second_kills = true);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  static int caught();  // the signal caught since the newest StopSignals, or 0

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

void add_data_options(CLI::App* c, DataOptions& o);
void set_threads(int threads);
void add_threads_option(CLI::App* c, int& threads);
// A number that is neither negative nor NaN nor infinite (CLI::NonNegativeNumber lets NaN through).
extern const CLI::Validator kFiniteNonNegative;

// The --device switch of train / compare / eval / predict / drift / attribute. The CUDA
// switches are the model's Policy knobs (cuda_kernels, tf32_matmul, tf32_conv,
// cuda_deterministic, cudnn_algo_search).
struct DeviceOptions {
  std::string device = "cpu";  // cpu | cuda
  Device parsed() const { return parse_device(device); }
};
void add_device_options(CLI::App* c, DeviceOptions& o);
// "cpu, 2 threads" or "cuda" for a command's header line.
std::string where(const DeviceOptions& dev);

// v with prec digits after the point; pct: 100 v with 2 and a %; sci: 2 significant digits, scientific.
std::string fmt(double v, int prec);
std::string pct(double v);
std::string sci(double v);

// The high-water mark of driftlab's tensor storage over the command (core/host_memory.h), as one
// line on stderr after stdout is flushed: "tensor memory: peak X MB ..." (bench/compare reads it).
void print_tensor_memory_peak();

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

}  // namespace cli
}  // namespace driftlab
