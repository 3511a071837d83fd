// Outside models through the ONNX graph importer against PyTorch: torchvision's MobileNetV2 and
// ResNet-50 (random weights, BatchNorm statistics drawn; tests/oracles/torch/torchvision_models.py)
// exported by torch.onnx.export, imported as graph models under the torch preset, and their logits
// compared with PyTorch's forward in float32.
#include <gtest/gtest.h>

#include "convert/onnx_graph_import.h"
#include "engine/io/npy.h"
#include "tests/oracles/oracle_util.h"

namespace driftlab {
namespace {

using namespace oracle;

// The models exported once per test binary: {folder, why not}.
const std::pair<fs::path, std::string>& torchvision_models() {
  static const std::pair<fs::path, std::string> r = []() -> std::pair<fs::path, std::string> {
    if (!torch_unavailable().empty()) return {{}, torch_unavailable()};
    int code = 0;
    std::string out = run_command(std::string(kPython) + " -c 'import torchvision'", &code);
    if (code != 0) return {{}, "torchvision not installed (apt-get install python3-torchvision): " + out};
    fs::path dir = fs::temp_directory_path() / ("dl_torchvision_" + std::to_string(getpid()));
    fs::create_directories(dir);
    out = run_command(std::string(kPython) + " " + quoted((torch_dir() / "torchvision_models.py").string()) + " " +
                          quoted(dir.string()) + " 2 mobilenet_v2 resnet50",
                      &code);
    static const RemoveAtExit cleanup{dir};
    if (code != 0) return {{}, "FAILED: torchvision_models.py: " + out};
    return {dir, ""};
  }();
  return r;
}

struct Compared {
  double max_abs = 0, max_ref = 0;
  bool same_argmax = true;
};

Compared compare_logits(const std::string& name, const std::string& policy) {
  const auto& [dir, why] = torchvision_models();
  convert::OnnxGraph g = convert::import_onnx_graph((dir / (name + ".onnx")).string(), {policy});
  Model m = convert::onnx_graph_model(std::move(g), policy);
  const Tensor x = read_npy((dir / (name + ".x.npy")).string());
  const Tensor ref = read_npy((dir / (name + ".logits.npy")).string());
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  const Tensor y = m.forward(ctx, x);
  EXPECT_EQ(y.shape(), ref.shape());
  Compared c;
  for (int64_t n = 0; n < y.dim(0); ++n) {
    int64_t ay = 0, ar = 0;
    for (int64_t k = 0; k < y.dim(1); ++k) {
      const int64_t i = n * y.dim(1) + k;
      c.max_abs = std::max(c.max_abs, std::abs(y.at(i) - ref.at(i)));
      c.max_ref = std::max(c.max_ref, std::abs(ref.at(i)));
      if (y.at(i) > y.at(n * y.dim(1) + ay)) ay = k;
      if (ref.at(i) > ref.at(n * y.dim(1) + ar)) ar = k;
    }
    c.same_argmax = c.same_argmax && ay == ar;
  }
  std::printf("%-14s %-10s max |driftlab - torch| %.3g, max |logit| %.3g, relative %.3g\n", name.c_str(),
              policy.c_str(), c.max_abs, c.max_ref, c.max_abs / c.max_ref);
  return c;
}

// 1e-5 of the largest logit: float32 sums over ~10^3-10^4 products per output and 50+ layers in
// another order than PyTorch's kernels (oneDNN's and MKL's blockings, folded BatchNorm as the
// exporter wrote it) drift by a few ulps per layer; measured 2026-11-29 (AMD EPYC Zen 3): see
// docs/GRAPH_MODELS.md
TEST(TorchGraph, TorchvisionMobileNetV2AndResNet50LogitsWithin1e5Relative) {
  const auto& [dir, why] = torchvision_models();
  if (!why.empty()) {
    if (why.rfind("FAILED", 0) == 0) FAIL() << why;
    DRIFTLAB_SKIP_OR_REQUIRE(why);
  }
  for (const char* name : {"mobilenet_v2", "resnet50"}) {
    const Compared c = compare_logits(name, "torch");
    EXPECT_LE(c.max_abs, 1e-5 * c.max_ref) << name;
    EXPECT_TRUE(c.same_argmax) << name;
  }
}

}  // namespace
}  // namespace driftlab

namespace driftlab {
namespace {

// The command a user runs: `driftlab import` falls back to a graph where no zoo model matches
// (--as zoo names the node it could not map), writes a model file, and `driftlab predict` on it
// gives PyTorch's logits (the same bound as above).
TEST(TorchGraph, CliImportsMobileNetV2AsAGraphAndPredictsTorchsLogits) {
  const auto& [dir, why] = torchvision_models();
  if (!why.empty()) {
    if (why.rfind("FAILED", 0) == 0) FAIL() << why;
    DRIFTLAB_SKIP_OR_REQUIRE(why);
  }
  const std::string cli = DRIFTLAB_CLI_PATH, onnx = (dir / "mobilenet_v2.onnx").string();
  int code = 0;
  std::string out = run_command(cli + " import " + quoted(onnx) + " --as zoo --out " + quoted((dir / "z.dlm").string()), &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("(Clip) cannot be mapped onto a driftlab layer"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir / "z.dlm"));
  out = run_command(cli + " import " + quoted(onnx) + " --out " + quoted((dir / "g.dlm").string()), &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("maps onto no zoo model; imported as a graph"), std::string::npos) << out;
  EXPECT_NE(out.find("as a graph model of 100 nodes under torch"), std::string::npos) << out;
  out = run_command(cli + " predict --weights " + quoted((dir / "g.dlm").string()) + " --input " +
                        quoted((dir / "mobilenet_v2.x.npy").string()) + " --output " + quoted((dir / "g.npy").string()),
                    &code);
  ASSERT_EQ(code, 0) << out;
  const Tensor y = read_npy((dir / "g.npy").string()), ref = read_npy((dir / "mobilenet_v2.logits.npy").string());
  ASSERT_EQ(y.shape(), ref.shape());
  double max_abs = 0, max_ref = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    max_abs = std::max(max_abs, std::abs(y.at(i) - ref.at(i)));
    max_ref = std::max(max_ref, std::abs(ref.at(i)));
  }
  EXPECT_LE(max_abs, 1e-5 * max_ref);  // as the test above
}

}  // namespace
}  // namespace driftlab
