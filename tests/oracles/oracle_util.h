// Helpers for oracle tests: each test writes weights and inputs as .npy into a fresh folder,
// runs the real framework on them (PyTorch through /usr/bin/python3, TensorFlow.js through
// node), and reads its outputs back. A missing oracle makes the test SKIP with the reason,
// never pass silently; .ci/run installs both so that in CI they always run.
//
// To add an oracle test: 1) write inputs with write_npy into oracle_dir(name); 2) run the
// framework script with run_oracle(); 3) compare with all_close (tests/test_util.h) at a
// tolerance whose comment says why; 4) print the error into the per-run table with record().
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace driftlab {
namespace oracle {

namespace fs = std::filesystem;

inline fs::path oracle_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("driftlab_oracle_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Runs a shell command, merging stderr into the returned output; *code gets the exit status.
inline std::string run_command(const std::string& cmd, int* code) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) {
    *code = -1;
    return "popen failed";
  }
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  int status = pclose(p);
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return out;
}

// The Debian Python with python3-torch (not a pyenv python on PATH).
inline const char* kPython = "/usr/bin/python3";

// "" when PyTorch can be imported, else the reason (for GTEST_SKIP).
inline std::string torch_unavailable() {
  int code = 0;
  std::string out = run_command(std::string(kPython) + " -c 'import torch, numpy; print(torch.__version__)'", &code);
  return code == 0 ? "" : "PyTorch oracle not installed (apt-get install python3-torch python3-numpy): " + out;
}

// Folder holding node_modules/@tensorflow/tfjs (installed by scripts/install-deps.sh).
inline fs::path tfjs_dir() { return fs::path(DRIFTLAB_SOURCE_DIR) / "tests" / "oracles" / "tfjs"; }

inline std::string tfjs_unavailable() {
  if (!fs::exists(tfjs_dir() / "node_modules" / "@tensorflow" / "tfjs"))
    return "TensorFlow.js oracle not installed (npm install in tests/oracles/tfjs, see scripts/install-deps.sh)";
  int code = 0;
  std::string out = run_command("node --version", &code);
  return code == 0 ? "" : "node not found: " + out;
}

// Two-sample Kolmogorov-Smirnov statistic sup |F_a - F_b| (initialiser distribution tests).
inline double ks_statistic(std::vector<double> a, std::vector<double> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  const double n = static_cast<double>(a.size()), m = static_cast<double>(b.size());
  std::size_t i = 0, j = 0;
  double d = 0;
  while (i < a.size() && j < b.size()) {
    const double v = std::min(a[i], b[j]);
    while (i < a.size() && a[i] == v) ++i;
    while (j < b.size() && b[j] == v) ++j;
    d = std::max(d, std::fabs(static_cast<double>(i) / n - static_cast<double>(j) / m));
  }
  return d;
}

// Rejection threshold at alpha = 0.001: c(alpha) * sqrt((n+m)/(n*m)), c(0.001) = 1.949.
inline double ks_threshold(std::size_t n, std::size_t m) {
  return 1.949 * std::sqrt(static_cast<double>(n + m) / (static_cast<double>(n) * static_cast<double>(m)));
}

#define DRIFTLAB_SKIP_UNLESS(reason_expr)          \
  do {                                             \
    std::string why_ = (reason_expr);              \
    if (!why_.empty()) GTEST_SKIP() << why_;       \
  } while (0)

}  // namespace oracle
}  // namespace driftlab
