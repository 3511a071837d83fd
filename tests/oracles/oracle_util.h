// The harness every oracle test uses (test_torch_oracle.cpp, test_tfjs_oracle.cpp,
// test_rnn_oracle_torch.cpp, test_rnn_oracle_tfjs.cpp): a group of cases is written into one
// case folder (inputs as .npy, a cases.json), the framework's script runs once on the folder
// (PyTorch through /usr/bin/python3, TensorFlow.js through node; N processes side by side where
// the group is sharded), and the tests read its outputs back and compare them in an ErrorTable.
// A missing oracle makes the tests SKIP with the reason, never pass silently (FAIL where
// DRIFTLAB_REQUIRE_ORACLES=1, as in CI: tests/require_util.h); a failing script makes them FAIL
// with its command and output.
//
// The protocol both script families share (torch/oracle.py run_cases, tfjs/cases.js runCases):
//   SCRIPT CASE_DIR [K/N]
// reads CASE_DIR/cases.json {"threads": 1, "cases": [{"name", "kind", "shard"?, ...}]}, runs each
// case whose shard (default 0) is K modulo N through the handler named by its kind, reads inputs
// CASE_DIR/<file>.npy and writes outputs CASE_DIR/out/<case name>.<key>.npy.
//
// To add an oracle test: 1) in the group's fill function, write inputs with CaseDir::input and
// describe each case with CaseDir::add_case (or add a group: a function returning a static
// CaseDir); 2) start the TEST with ORACLE_GROUP(run, group) and read results with run.out(case,
// key); 3) compare with ErrorTable::check at a tolerance whose comment says why; 4) print the
// table, which docs/ORACLE_RUN.md records.
#pragma once
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "engine/io/npy.h"
#include "engine/model.h"
#include "engine/train/runner.h"
#include "models/models.h"
#include "tests/require_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace oracle {

namespace fs = std::filesystem;
using json = nlohmann::json;

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

// Removes a scratch folder when the test binary exits.
struct RemoveAtExit {
  fs::path dir;
  ~RemoveAtExit() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

inline std::string quoted(const std::string& s) {  // for the shell, single-quoted
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// ---------------------------------------------------------------------------------------------
// The frameworks

// The Debian Python with python3-torch (not a pyenv python on PATH).
inline const char* kPython = "/usr/bin/python3";

// Folder holding node_modules/@tensorflow/tfjs (installed by scripts/install-deps.sh).
inline fs::path tfjs_dir() { return fs::path(DRIFTLAB_SOURCE_DIR) / "tests" / "oracles" / "tfjs"; }
inline fs::path torch_dir() { return fs::path(DRIFTLAB_SOURCE_DIR) / "tests" / "oracles" / "torch"; }

// "" when PyTorch can be imported, else the reason (for GTEST_SKIP). Probed once per test
// binary: importing torch takes about a second.
inline const std::string& torch_unavailable() {
  static const std::string why = [] {
    int code = 0;
    std::string out = run_command(std::string(kPython) + " -c 'import torch, numpy; print(torch.__version__)'", &code);
    return code == 0 ? std::string()
                     : "PyTorch oracle not installed (apt-get install python3-torch python3-numpy): " + out;
  }();
  return why;
}

inline const std::string& tfjs_unavailable() {
  static const std::string why = []() -> std::string {
    if (!fs::exists(tfjs_dir() / "node_modules" / "@tensorflow" / "tfjs"))
      return "TensorFlow.js oracle not installed (npm install in tests/oracles/tfjs, see scripts/install-deps.sh)";
    int code = 0;
    std::string out = run_command("node --version", &code);
    return code == 0 ? "" : "node not found: " + out;
  }();
  return why;
}

// ONNX Runtime (onnxruntime-node from npm, tests/oracles/ort) with Debian's python3-onnx (the
// model writer of the int8 oracle, the checker of the exported models).
inline fs::path ort_dir() { return fs::path(DRIFTLAB_SOURCE_DIR) / "tests" / "oracles" / "ort"; }
inline const std::string& ort_unavailable() {
  static const std::string why = []() -> std::string {
    if (!fs::exists(ort_dir() / "node_modules" / "onnxruntime-node"))
      return "ONNX Runtime oracle not installed (npm ci --ignore-scripts in tests/oracles/ort, see "
             "scripts/install-deps.sh)";
    int code = 0;
    std::string out = run_command("node --version", &code);
    if (code != 0) return "node not found: " + out;
    out = run_command(std::string(kPython) + " -c 'import onnx, numpy'", &code);
    if (code != 0) return "python3-onnx not installed (apt-get install python3-onnx python3-numpy): " + out;
    return "";
  }();
  return why;
}

inline fs::path scipy_dir() { return fs::path(DRIFTLAB_SOURCE_DIR) / "tests" / "oracles" / "scipy"; }
inline const std::string& scipy_unavailable() {
  static const std::string why = [] {
    int code = 0;
    std::string out = run_command(std::string(kPython) + " -c 'import scipy, numpy; print(scipy.__version__)'", &code);
    return code == 0 ? std::string() : "SciPy oracle not installed (apt-get install python3-scipy): " + out;
  }();
  return why;
}

// One framework script: how to start it, and whether it can run here.
struct Oracle {
  std::string name;                   // "pytorch", "tfjs": the tables' reference, failure messages
  std::string command;                // the script's command line, without its arguments
  const std::string& (*unavailable)();  // "" when it can run, else why
};
inline Oracle torch_oracle(const std::string& script) {
  return {"pytorch", std::string(kPython) + " " + quoted((torch_dir() / script).string()), torch_unavailable};
}
inline Oracle scipy_oracle(const std::string& script) {
  return {"scipy", std::string(kPython) + " " + quoted((scipy_dir() / script).string()), scipy_unavailable};
}
inline Oracle ort_oracle(const std::string& script) {
  return {"onnxruntime", "bash " + quoted((ort_dir() / script).string()), ort_unavailable};
}
inline Oracle tfjs_oracle(const std::string& script) {
  return {"tfjs", "node " + quoted((tfjs_dir() / script).string()), tfjs_unavailable};
}

// ---------------------------------------------------------------------------------------------
// The case folder

struct RunOptions {
  int shards = 1;   // N processes side by side, process K running the cases whose shard is K mod N
  std::string env;  // assignments put before each command, e.g. "ATEN_CPU_CAPABILITY=default"
};

// One folder, one cases.json, one run of the oracle script (N processes when sharded) for a
// group of cases, built in the constructor. The folder is removed when the object dies unless
// DRIFTLAB_KEEP_ORACLE_DIRS is set or a test failed (then its path is printed, for a look).
class CaseDir {
 public:
  using Fill = std::function<void(CaseDir&)>;
  // Without the oracle only skip() is set; otherwise a fresh folder, fill(*this), the run.
  CaseDir(Oracle oracle, const std::string& name, const Fill& fill, RunOptions opts = {}) : oracle_(std::move(oracle)) {
    skip_ = oracle_.unavailable();
    if (!skip_.empty()) return;
    dir_ = fs::temp_directory_path() / ("driftlab_oracle_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fill(*this);
    std::ofstream f(dir_ / "cases.json");
    f << json{{"threads", 1}, {"cases", cases_}}.dump(1);
    f.close();
    if (!f) {
      error_ = "could not write " + (dir_ / "cases.json").string();
      return;
    }
    run(opts);
  }
  ~CaseDir() {
    if (dir_.empty()) return;
    if (std::getenv("DRIFTLAB_KEEP_ORACLE_DIRS")) return;
    if (::testing::UnitTest::GetInstance()->failed_test_count() > 0) {
      std::cout << oracle_.name << " oracle cases and results kept in " << dir_.string() << "\n";
      return;
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  CaseDir(const CaseDir&) = delete;
  CaseDir& operator=(const CaseDir&) = delete;

  // Writes DIR/<file>.npy and returns "<file>.npy", the name cases.json gives the scripts.
  std::string input(const std::string& file, const Tensor& t) const {
    write_npy((dir_ / (file + ".npy")).string(), t);
    return file + ".npy";
  }
  // The PyTorch scripts' convention: a case's inputs are <case>.<key>.npy.
  std::string input(const std::string& case_name, const std::string& key, const Tensor& t) const {
    return input(case_name + "." + key, t);
  }
  void add_case(json c) { cases_.push_back(std::move(c)); }

  Tensor in(const std::string& file) const { return read_npy((dir_ / (file + ".npy")).string()); }
  Tensor in(const std::string& case_name, const std::string& key) const { return in(case_name + "." + key); }
  Tensor out(const std::string& case_name, const std::string& key) const {
    return read_npy((dir_ / "out" / (case_name + "." + key + ".npy")).string());
  }
  // A text result, out/<case>.<key>.txt (dtype names and the like); "" where the script wrote none.
  std::string text_out(const std::string& case_name, const std::string& key) const {
    std::ifstream f(dir_ / "out" / (case_name + "." + key + ".txt"));
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  bool has_out(const std::string& case_name, const std::string& key) const {
    return fs::exists(dir_ / "out" / (case_name + "." + key + ".npy"));
  }
  double out_scalar(const std::string& case_name, const std::string& key) const { return out(case_name, key).at(0); }

  const std::string& skip() const { return skip_; }    // non-empty: the oracle is missing
  const std::string& error() const { return error_; }  // non-empty: the script failed, with its output
  const std::string& log() const { return log_; }      // the script's output
  const std::string& oracle_name() const { return oracle_.name; }
  const fs::path& dir() const { return dir_; }

 private:
  void run(const RunOptions& opts) {
    const std::string env = opts.env.empty() ? "" : opts.env + " ";
    const std::string one = env + oracle_.command + " " + quoted(dir_.string());
    std::string cmd = one;
    if (opts.shards > 1) {
      // All processes side by side; the run fails if any does.
      cmd = "(";
      for (int k = 0; k < opts.shards; ++k)
        cmd += one + " " + std::to_string(k) + "/" + std::to_string(opts.shards) + " & p" + std::to_string(k) + "=$!; ";
      cmd += "rc=0; ";
      for (int k = 0; k < opts.shards; ++k) cmd += "wait $p" + std::to_string(k) + " || rc=1; ";
      cmd += "exit $rc)";
    }
    int code = 0;
    log_ = run_command(cmd, &code);
    if (code != 0) error_ = "`" + cmd + "` exited with " + std::to_string(code) + ":\n" + log_;
  }

  Oracle oracle_;
  fs::path dir_;
  json cases_ = json::array();
  std::string skip_, error_, log_;
};

// Skips (fails where DRIFTLAB_REQUIRE_ORACLES is set: tests/require_util.h) with the reason
// when there is one.
#define DRIFTLAB_SKIP_UNLESS(reason_expr)                   \
  do {                                                      \
    std::string why_ = (reason_expr);                       \
    if (!why_.empty()) DRIFTLAB_SKIP_OR_REQUIRE(why_);      \
  } while (0)

// Every oracle test starts with this: the group `maker()` returns (built on first use), skipped
// without the oracle, failed with the script's output if it failed; and driftlab on one OpenMP
// thread, like the oracles' side (cases.json threads: 1): results do not depend on the machine,
// and on a busy 2-core machine idle OpenMP workers waiting for a core at every parallel region
// made 20 LeNet-1 steps take 4 s instead of 34 ms.
#define ORACLE_GROUP(var, maker)                         \
  ThreadCountGuard one_thread_(1);                       \
  const ::driftlab::oracle::CaseDir& var = maker();      \
  DRIFTLAB_SKIP_UNLESS(var.skip());                      \
  ASSERT_EQ(var.error(), "") << var.oracle_name() << " oracle failed"

// ---------------------------------------------------------------------------------------------
// Errors

// Whether PyTorch (1.13) runs its bfloat16 convolutions in oneDNN on this CPU, which needs AVX-512
// BW, VL and DQ (aten/src/ATen/native/ConvUtils.h, use_mkldnn: mkldnn_bf16_device_check): only
// there are they float32 sums rounded once, as driftlab's autocast emulates; elsewhere (AMD Zen 3)
// its fallback convolution is not float32-accumulated (docs/REDUCED_PRECISION.md).
inline bool torch_bf16_convs_in_onednn() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

// Whether this CPU multiplies u8 x s8 with VNNI (AVX-512 VNNI or AVX-VNNI). Where it does, oneDNN and
// ONNX Runtime compute the integer sum; where it does not, both run VPMADDUBSW, whose pairs of
// products saturate at int16 (quant_u8s8_dot: int16_pairs_channels for oneDNN, int16_pairs_hwc for
// ONNX Runtime's MLAS; docs/QUANT_SOURCES.md section S2.9), and the oracles ask driftlab for that rule.
inline bool cpu_has_u8s8_vnni() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512vnni")) return true;
  // AVX-VNNI (CPUID.(EAX=7, ECX=1):EAX bit 4), read directly: clang 14 does not know the
  // "avxvnni" feature name
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __builtin_cpu_supports("avx2") && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;
#else
  return true;  // ARM and others: the integer sum (the rule's pairs are an x86 instruction's)
#endif
}

// The knobs that make driftlab compute what ORT's run computed on this CPU. With VNNI every path is
// the integer sum. Without it (docs/QUANT_SOURCES.md section S2.9) MLAS's u8 x s8 kernels add each pair of
// stored-value products into an int16 with saturation (quant_u8s8_dot=int16_pairs_hwc): uint8
// activations in every fused QLinearConv/QGemm (QDQ at 'all', QOperator at any level); int8
// activations only where ORT's x86 QDQ rewrite runs them as uint8 + 128 (QDQ at 'all'), while
// all_s8 and the QOperator model keep int8 and take MLAS's exact S8S8 kernel. QDQ at 'disabled'
// computes in float (information only). variant: 'qdq...' or 'qop'; level: ORT's 'all', 'all_s8', 'disabled'.
inline std::string ort_dot_knobs(DType act, const std::string& variant, const std::string& level) {
  if (cpu_has_u8s8_vnni()) return "";
  const bool qdq = variant.rfind("qdq", 0) == 0;
  const bool pairs = act == DType::u8 ? !(qdq && level == "disabled") : (qdq && level == "all");
  return pairs ? ",quant_u8s8_dot=int16_pairs_hwc" : "";
}

inline double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.at(i)));
  return m;
}
// max|a - r| (infinite when the shapes differ).
inline double max_abs_diff(const Tensor& a, const Tensor& r) {
  if (a.shape() != r.shape()) return INFINITY;
  double m = 0;
  for (int64_t i = 0; i < r.numel(); ++i) m = std::max(m, std::fabs(a.at(i) - r.at(i)));
  return m;
}
// The normwise error every table reports: max|a - r| / max|r| (max|a - r| when r is all zero).
inline double rel_error(const Tensor& a, const Tensor& r) {
  const double e = max_abs_diff(a, r), m = max_abs(r);
  return m > 0 ? e / m : e;
}

// How many elements of a equal r's (bit for bit, as values).
inline int64_t equal_elements(const Tensor& a, const Tensor& r) {
  int64_t e = 0;
  for (int64_t j = 0; j < r.numel() && j < a.numel(); ++j) e += a.at(j) == r.at(j);
  return e;
}

// Another runtime's logits (N,K) against driftlab's on the same inputs: rel_error (max |d| over
// max |logit|) and the inputs whose predicted class differs (predictions(): the first largest
// logit on both sides). A shape mismatch fails the test.
struct LogitAgreement {
  double rel = 0;
  int64_t flips = 0;
};
inline LogitAgreement logit_agreement(const Tensor& theirs, const Tensor& ours) {
  EXPECT_EQ(theirs.shape(), ours.shape());
  if (theirs.shape() != ours.shape()) return {INFINITY, ours.rank() ? ours.dim(0) : 0};
  const std::vector<int32_t> a = predictions(theirs), b = predictions(ours);
  LogitAgreement g{rel_error(theirs, ours), 0};
  for (std::size_t i = 0; i < a.size(); ++i) g.flips += a[i] != b[i];
  return g;
}

// The error table of one test: err = max|a - r| / max|r| per tensor (normwise: gradients hold
// elements that are pure cancellation noise), checked as all_close(a, r, tol * max|r|, 0).
class ErrorTable {
 public:
  ErrorTable(std::string title, std::string oracle) : title_(std::move(title)), oracle_(std::move(oracle)) {}

  // driftlab `a` against the oracle's `ref`: passes when max|a - ref| <= tol * max|ref|. Adds a row.
  ::testing::AssertionResult check(const std::string& what, const std::string& qty, const Tensor& a,
                                   const Tensor& ref, double tol) {
    ::testing::AssertionResult res = all_close(a, ref, tol * max_abs(ref), 0.0);
    rows_.push_back(row(what, qty, a, ref, tol));
    rows_.back().ok = static_cast<bool>(res);
    if (!res) res << " [" << title_ << ": " << what << " " << qty << ", tolerance " << tol << " * max|ref|]";
    return res;
  }
  ::testing::AssertionResult check_scalar(const std::string& what, const std::string& qty, double a, double ref,
                                          double tol) {
    return check(what, qty, Tensor::from<double>({1}, {a}), Tensor::from<double>({1}, {ref}), tol);
  }
  // A row the test reports without a tolerance (a negative test's error size); returns rel err.
  double note(const std::string& what, const std::string& qty, const Tensor& a, const Tensor& ref) {
    rows_.push_back(row(what, qty, a, ref, -1));
    return rows_.back().rel;
  }
  // The same for a difference the test computed itself.
  void note(const std::string& what, const std::string& qty, double abs_err, double rel) {
    rows_.push_back({what, qty, "", abs_err, rel, -1, true});
  }

  // what | quantity | shape | max abs err | max rel err | tol | ok ("-  (info)" for a note).
  void print() const {
    std::size_t ww = 4, wq = 8, ws = 5;
    for (const Row& r : rows_) {
      ww = std::max(ww, r.what.size());
      wq = std::max(wq, r.qty.size());
      ws = std::max(ws, r.shape.size());
    }
    std::ostringstream os;
    os << "\n  " << title_ << "\n";
    os << "  " << std::left << std::setw(static_cast<int>(ww)) << "case" << "  " << std::setw(static_cast<int>(wq))
       << "quantity" << "  " << std::setw(static_cast<int>(ws)) << "shape" << std::right << std::setw(13)
       << "max abs err" << std::setw(13) << "max rel err" << std::setw(10) << "tol" << "  ok\n";
    for (const Row& r : rows_) {
      os << "  " << std::left << std::setw(static_cast<int>(ww)) << r.what << "  " << std::setw(static_cast<int>(wq))
         << r.qty << "  " << std::setw(static_cast<int>(ws)) << r.shape << std::right << std::scientific
         << std::setprecision(3) << std::setw(13) << r.abs_err << std::setw(13) << r.rel << std::defaultfloat;
      if (r.tol >= 0)
        os << std::setw(10) << r.tol << (r.ok ? "  yes" : "  NO");
      else
        os << std::setw(10) << "-" << "  (info)";
      os << "\n";
    }
    os << "  (max rel err = max|driftlab - " << oracle_ << "| / max|" << oracle_ << "| over the tensor)\n";
    std::cout << os.str() << std::flush;
  }

 private:
  struct Row {
    std::string what, qty, shape;
    double abs_err, rel, tol;
    bool ok;
  };
  static Row row(const std::string& what, const std::string& qty, const Tensor& a, const Tensor& ref, double tol) {
    const double abs_err = max_abs_diff(a, ref), scale = max_abs(ref);
    const double rel = scale > 0 ? abs_err / scale : (abs_err == 0 ? 0.0 : INFINITY);
    const std::string shape = a.shape() == ref.shape() ? shape_str(a.shape())
                                                       : shape_str(a.shape()) + " vs " + shape_str(ref.shape());
    return {what, qty, shape, abs_err, rel, tol, true};
  }
  std::string title_, oracle_;
  std::vector<Row> rows_;
};

// ---------------------------------------------------------------------------------------------
// Initialiser distributions

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

inline std::vector<double> values_of(const Tensor& t) {
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = t.at(i);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Small tensor helpers the suites share

// Element k along the first axis of t, as its own tensor.
inline Tensor slice0(const Tensor& t, int64_t k) {
  Shape s(t.shape().begin() + 1, t.shape().end());
  Tensor out(s, t.dtype());
  std::memcpy(out.raw(), static_cast<const unsigned char*>(t.raw()) + k * out.nbytes(), out.nbytes());
  return out;
}

// Class labels as a float64 vector (how the PyTorch scripts read them) and back.
inline Tensor labels_tensor(const std::vector<int32_t>& labels) {
  std::vector<double> v(labels.begin(), labels.end());
  return Tensor::from<double>({static_cast<int64_t>(v.size())}, v);
}
// Distance in units in the last place between two finite floats (-0 and +0 adjacent): how far an
// attack's example element is from the peer's.
inline int64_t ulps_between(float a, float b) {
  auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? int64_t{INT32_MIN} - i : int64_t{i};  // monotone in f
  };
  return std::llabs(key(a) - key(b));
}

inline std::vector<int32_t> labels_of(const Tensor& t) {
  std::vector<int32_t> v(static_cast<std::size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<std::size_t>(i)] = static_cast<int32_t>(t.at(i));
  return v;
}
// n labels in [0, classes) from MT19937(seed), one draw each (g() mod classes).
inline std::vector<int32_t> random_labels(int64_t n, int64_t classes, uint64_t seed) {
  std::mt19937 g(static_cast<uint32_t>(seed));
  std::vector<int32_t> v(static_cast<std::size_t>(n));
  for (auto& l : v) l = static_cast<int32_t>(g() % static_cast<uint32_t>(classes));
  return v;
}
// One-hot (N, k) float32 labels (how the TF.js scripts read them).
inline Tensor one_hot(const std::vector<int32_t>& labels, int64_t k) {
  Tensor t({static_cast<int64_t>(labels.size()), k}, DType::f32);
  for (std::size_t i = 0; i < labels.size(); ++i) t.data<float>()[static_cast<int64_t>(i) * k + labels[i]] = 1.0f;
  return t;
}

inline bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}


// ---------------------------------------------------------------------------------------------
// Whole models with non-trivial state (the input-gradient cases of both oracles)

// build_model(arch, policy, seed) with every bias U(-0.1, 0.1), every BatchNorm gamma
// U(0.5, 1.5) and beta U(-0.5, 0.5), running mean U(-0.5, 0.5) and running variance U(0.5, 2):
// with the initial 0 / 1 statistics an inference BatchNorm is the identity up to eps, and a
// swapped, ignored or batch-recomputed statistic could match by accident.
inline Model model_with_random_state(const std::string& arch, const Policy& policy, uint64_t seed) {
  Model m = build_model(arch, policy, seed);
  uint64_t s = seed * 1000;
  auto draw = [&](Param& p, double lo, double hi) {
    p.value = random_tensor(p.value.shape(), p.value.dtype(), ++s, lo, hi);
  };
  for (auto& [name, p] : m.net->named_params()) {
    if (ends_with(name, ".gamma"))
      draw(*p, 0.5, 1.5);
    else if (ends_with(name, ".beta"))
      draw(*p, -0.5, 0.5);
    else if (p->is_bias)
      draw(*p, -0.1, 0.1);
  }
  for (auto& [name, b] : m.net->named_buffers()) {
    if (ends_with(name, ".running_mean")) draw(*b, -0.5, 0.5);
    if (ends_with(name, ".running_var")) draw(*b, 0.5, 2.0);
  }
  return m;
}

// Every parameter and buffer of the model by name, copied.
inline std::vector<std::pair<std::string, Tensor>> model_state(Model& m) {
  std::vector<std::pair<std::string, Tensor>> s;
  for (auto& [name, p] : m.net->named_params()) s.emplace_back(name, p->value.clone());
  for (auto& [name, b] : m.net->named_buffers()) s.emplace_back(name, b->value.clone());
  return s;
}
// The model's state is bit for bit `before` (model_state); else names what moved.
inline ::testing::AssertionResult state_unchanged(const std::vector<std::pair<std::string, Tensor>>& before,
                                                  Model& m) {
  const auto now = model_state(m);
  if (now.size() != before.size()) return ::testing::AssertionFailure() << "the model's state changed its size";
  std::string moved;
  for (std::size_t i = 0; i < now.size(); ++i)
    if (!bitwise_equal(now[i].second, before[i].second)) moved += (moved.empty() ? "" : ", ") + now[i].first;
  if (!moved.empty()) return ::testing::AssertionFailure() << "moved: " << moved;
  return ::testing::AssertionSuccess() << now.size() << " tensors bit for bit unchanged";
}

}  // namespace oracle
}  // namespace driftlab
