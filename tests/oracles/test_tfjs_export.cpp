// TF.js export (the web platform of Guo et al.'s study, docs/GLOSSARY.md): the zoo's models under
// each preset written by convert/tfjs_export.h, loaded by @tensorflow/tfjs 4.22 in node
// (tf.loadLayersModel through tf.io.fromMemory, pure-JS CPU backend;
// tests/oracles/tfjs/run_layers_model.js) and run on the same inputs as driftlab (VGG-16 on 2
// images: TF.js's pure-JS convolutions take seconds per image).
// Images are fed to TF.js channels-last (the script transposes
// driftlab's NCHW batch).
//
// Bound: 1e-5 of the largest |logit| (as the ONNX round trip: other summation orders, and the two
// PyTorch LSTM biases summed once) and the same predicted class everywhere. What TF.js cannot
// compute is refused by name: residual blocks (functional API) and PyTorch's reset-after GRU.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "convert/tfjs_export.h"
#include "engine/train/cpu_runner.h"
#include "engine/io/npy.h"
#include "models/models.h"
#include "tests/cli/cli_util.h"
#include "tests/oracles/oracle_util.h"

namespace driftlab {
namespace {

using oracle::CaseDir;

struct TfjsCase {
  const char* arch;
  const char* preset;
  Shape x;
};
const TfjsCase kCases[] = {
    {"lenet1", "torch", {64, 1, 28, 28}},   {"lenet1", "tensorflow", {64, 1, 28, 28}}, {"lenet1", "theano", {64, 1, 28, 28}},
    {"lenet5", "torch", {64, 1, 28, 28}},   {"lenet5", "tensorflow", {64, 1, 28, 28}}, {"lenet5", "theano", {64, 1, 28, 28}},
    {"resnet20", "torch", {4, 3, 32, 32}},  {"resnet20", "tensorflow", {4, 3, 32, 32}}, {"resnet20", "theano", {4, 3, 32, 32}},
    {"resnet20b", "torch", {4, 3, 32, 32}}, {"resnet20b", "tensorflow", {4, 3, 32, 32}},
    {"vgg16", "torch", {2, 3, 32, 32}},     {"vgg16", "tensorflow", {2, 3, 32, 32}},   {"vgg16", "theano", {2, 3, 32, 32}},
    {"lstm", "torch", {64, 28, 28}},        {"lstm", "tensorflow", {64, 28, 28}},      {"lstm", "theano", {64, 28, 28}},
    {"gru", "tensorflow", {64, 28, 28}},    {"gru", "theano", {64, 28, 28}},
    {"lstm-imdb", "torch", {8, 80}},        {"lstm-imdb", "tensorflow", {8, 80}},      {"gru-imdb", "tensorflow", {8, 80}}};

// Inputs: pixels/features in [0,1); token models get integer ids below the table's 20,002 rows.
Tensor input_of(const TfjsCase& c, uint64_t seed) {
  Tensor x = random_tensor(c.x, DType::f32, seed, 0.0, 1.0);
  if (c.x.size() == 2)
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::floor(x.data<float>()[i] * 20002.f);
  return x;
}

std::string name_of(const TfjsCase& c) { return std::string(c.arch) + "." + c.preset; }

Model model_of(const TfjsCase& c) { return oracle::model_with_random_state(c.arch, Policy::preset_named(c.preset), 41); }

const CaseDir& tfjs_export_run() {
  static const CaseDir run(oracle::tfjs_oracle("run_layers_model.js"), "tfjs_export", [](CaseDir& d) {
    uint64_t seed = 70;
    for (const TfjsCase& c : kCases) {
      Model m = model_of(c);
      const std::string n = name_of(c);
      convert::write_tfjs((d.dir() / n).string(), convert::export_tfjs(m));
      d.input(n, "x", input_of(c, ++seed));
      d.add_case({{"name", n}, {"kind", "layers_model"}, {"dir", n}, {"x", n + ".x.npy"}, {"nchw", c.x.size() == 4}});
    }
  });
  return run;
}

TEST(TfjsExport, LayersModelsLoadInTfjsAndComputeDriftlabsLogits) {
  ORACLE_GROUP(run, tfjs_export_run);
  std::cout << run.log();
  for (const TfjsCase& c : kCases) {
    SCOPED_TRACE(name_of(c));
    Model m = model_of(c);
    CpuRunner runner(m);
    const Tensor ours = runner.logits(run.in(name_of(c), "x"));
    const oracle::LogitAgreement g = oracle::logit_agreement(run.out(name_of(c), "y"), ours);
    std::cout << name_of(c) << ": max |d| / max |logit| = " << g.rel << ", " << g.flips << " of " << ours.dim(0)
              << " predictions differ\n";
    EXPECT_LE(g.rel, 1e-5);  // see the file comment
    EXPECT_EQ(g.flips, 0);
  }
}

TEST(TfjsExport, WhatTfjsCannotComputeIsRefusedByName) {
  Model gru = build_model("gru", Policy::torch(), 1);
  EXPECT_NE(error_of([&] { convert::export_tfjs(gru); }).find("GRUCell does not support reset_after"), std::string::npos);
  Model m = build_model("lenet1", Policy::torch(), 1);
  InputNorm norm;
  norm.mean = 0.286, norm.std = 0.353;
  const std::string e = error_of([&] { convert::export_tfjs(m, norm); });
  EXPECT_NE(e.find("standardises its inputs"), std::string::npos) << e;
}

}  // namespace
}  // namespace driftlab

// ---------------------------------------------------------------------------------------------
// In the browser (Guo et al.'s web platform): the exported LeNet-5 loaded and run by TF.js 4.22 in
// headless Chromium (Debian's chromium; tests/oracles/tfjs/browser.js serves the page, the model
// and the inputs), outputs against driftlab's, model.predict of 1,000 inputs timed, and a
// screenshot of the page.

namespace driftlab {
namespace {

TEST(TfjsBrowser, ExportedLeNet5RunsInHeadlessChromium) {
  DRIFTLAB_SKIP_UNLESS(oracle::tfjs_unavailable());
  const char* chromium_env = std::getenv("CHROMIUM");
  const std::string chromium = chromium_env && *chromium_env ? chromium_env : "/usr/bin/chromium";
  DRIFTLAB_SKIP_UNLESS(std::filesystem::exists(chromium) ? ""
                                                          : chromium + " not installed (apt-get install chromium)");
  const std::filesystem::path d = cli_test::fresh_dir("tfjs_browser");
  Model m = oracle::model_with_random_state("lenet5", Policy::tensorflow(), 43);
  convert::write_tfjs((d / "model").string(), convert::export_tfjs(m));
  const Tensor x = random_tensor({32, 1, 28, 28}, DType::f32, 44, 0.0, 1.0);
  write_npy((d / "x.npy").string(), x);
  int code = 0;
  const std::string out = oracle::run_command(
      "node " + oracle::quoted((oracle::tfjs_dir() / "browser.js").string()) + " " + oracle::quoted((d / "model").string()) +
          " " + oracle::quoted((d / "x.npy").string()) + " " + oracle::quoted((d / "out").string()) + " --nchw --sizes 1000",
      &code);
  ASSERT_EQ(code, 0) << out;
  std::cout << out;
  CpuRunner runner(m);
  const Tensor theirs = read_npy((d / "out" / "y.npy").string());
  ASSERT_EQ(theirs.shape(), Shape({32, 10}));
  const double rel = oracle::rel_error(theirs, runner.logits(x));
  std::cout << "Chromium vs driftlab: max |d| / max |logit| = " << rel << "\n";
  EXPECT_LE(rel, 1e-5);  // as in node: the same TF.js CPU kernels
  std::ifstream bj(d / "out" / "browser.json");
  const nlohmann::json j = nlohmann::json::parse(bj);
  EXPECT_NE(j["userAgent"].get<std::string>().find("HeadlessChrome"), std::string::npos);
  EXPECT_GT(j["ms"][0].get<double>(), 0);  // a real-time measurement, not a virtual one
  std::ifstream png(d / "out" / "screenshot.png", std::ios::binary);
  std::string sig(8, '\0');
  png.read(&sig[0], 8);
  EXPECT_EQ(sig, std::string("\x89PNG\r\n\x1a\n", 8));
}

}  // namespace
}  // namespace driftlab
