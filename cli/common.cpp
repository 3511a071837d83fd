// What the command files share: data, thread and device options, number formats, the progress
// bar.
#include "cli/common.h"

#include <omp.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "core/host_memory.h"
#include "driftlab/convert.h"
#include "engine/data/datasets.h"
#include "engine/data/idx.h"

namespace driftlab {
namespace cli {

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


namespace {
volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void record_stop_signal(int sig) { g_stop_signal = sig; }
}  // namespace

StopSignals::StopSignals(bool restart, bool second_kills) {
  g_stop_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = record_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = (restart ? SA_RESTART : 0) | (second_kills ? SA_RESETHAND : 0);
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

int StopSignals::caught() { return g_stop_signal; }

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


std::string fmt(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

void add_device_options(CLI::App* c, DeviceOptions& o) {
  c->add_option("--device", o.device,
                "cpu | cuda (device 0; kernels, TF32, determinism and cuDNN search follow the policy's cuda knobs)")
      ->capture_default_str();
}

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

void print_tensor_memory_peak() {
  std::cout.flush();
  std::cerr << "tensor memory: peak " << fmt(static_cast<double>(host_memory::stats().peak_bytes) / (1 << 20), 1)
            << " MB held by driftlab's tensors (the process's RSS adds the program and its libraries)\n";
}

std::string ort_dir() { return ort_dir_or(std::string(DRIFTLAB_SOURCE_DIR) + "/tests/oracles/ort"); }

}  // namespace cli
}  // namespace driftlab
