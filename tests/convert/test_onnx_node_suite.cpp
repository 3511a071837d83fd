// The ONNX backend node tests (a conformance suite written by the ONNX project; Debian's
// python3-onnx ships its case generators, tests/onnx_node/generate.sh writes the cases) run
// through the graph importer under the torch preset: every case whose ops are all among the
// importer's runs, its first input as the data and the others bound as constants, and its output
// is compared with the case's at ONNX's own tolerances (rtol 1e-3, atol 1e-7:
// onnx/backend/test/runner/__init__.py) and, separately, counted where driftlab is exact.
// Cases out of scope are listed with the reason (an op not supported, several outputs, or the
// importer's refusal of an attribute or shape, which names it).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "convert/onnx_graph_import.h"
#include "tests/oracles/oracle_util.h"

namespace driftlab {
namespace {

namespace fs = std::filesystem;
using oracle::kPython;
using oracle::quoted;
using oracle::run_command;

// The node cases, generated once per test binary: {folder, why not}.
const std::pair<fs::path, std::string>& node_cases() {
  static const std::pair<fs::path, std::string> r = []() -> std::pair<fs::path, std::string> {
    if (const char* d = std::getenv("DRIFTLAB_ONNX_NODE_DIR")) return {fs::path(d), ""};
    fs::path dir = fs::temp_directory_path() / ("dl_onnx_node_" + std::to_string(getpid()));
    int code = 0;
    const std::string out = run_command("bash " + quoted((fs::path(DRIFTLAB_SOURCE_DIR) / "tests" / "onnx_node" /
                                                          "generate.sh").string()) + " " + quoted(dir.string()),
                                        &code);
    if (code == 77) return {{}, "python3-onnx not installed (apt-get install python3-onnx): " + out};
    if (code != 0) return {{}, "FAILED: tests/onnx_node/generate.sh: " + out};
    static const oracle::RemoveAtExit cleanup{dir};
    return {dir / "node", ""};
  }();
  return r;
}

struct Outcome {
  std::string status;  // "pass", "fail", or the out-of-scope reason
  double max_err = 0;  // max |driftlab - onnx| over the output
  bool exact = false;
};

// The reason an import refused a case: the last clause of its message (after the node).
std::string reason_of(const std::string& what) {
  const std::size_t p = what.rfind("): ");
  std::string r = p == std::string::npos ? what : what.substr(p + 3);
  if (r.rfind("op ", 0) == 0) r = r.substr(0, r.find(" is not supported")) + " not supported";
  return "refused: " + r.substr(0, 90);
}

Outcome run_case(const fs::path& dir) {
  const std::vector<std::string>& supported = convert::onnx_graph_op_types();
  for (const std::string& op : convert::onnx_op_types((dir / "model.onnx").string()))
    if (std::find(supported.begin(), supported.end(), op) == supported.end()) return {"op " + op + " not supported"};
  const fs::path data = dir / "test_data_set_0";
  if (fs::exists(data / "output_1.pb")) return {"several outputs"};
  std::vector<std::string> bind;
  for (int i = 1; fs::exists(data / ("input_" + std::to_string(i) + ".pb")); ++i)
    bind.push_back((data / ("input_" + std::to_string(i) + ".pb")).string());
  Tensor x, want, y;
  try {
    x = convert::read_tensor_pb((data / "input_0.pb").string());
    want = convert::read_tensor_pb((data / "output_0.pb").string());
  } catch (const Error& e) {
    return {"refused: a non-float32 input or output"};
  }
  try {
    convert::OnnxGraphOptions o;
    o.bind_files = bind;
    convert::OnnxGraph g = convert::import_onnx_graph((dir / "model.onnx").string(), o);
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    y = g.graph->forward(ctx, x);
  } catch (const Error& e) {
    return {reason_of(e.what())};
  }
  if (y.shape() != want.shape()) return {"fail: output " + shape_str(y.shape()) + ", expected " + shape_str(want.shape())};
  Outcome o{"pass"};
  o.exact = true;
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double a = y.at(i), b = want.at(i), d = std::abs(a - b);
    o.max_err = std::max(o.max_err, d);
    o.exact = o.exact && a == b;
    // ONNX's runner: np.testing.assert_allclose(rtol=1e-3, atol=1e-7)
    if (!(d <= 1e-7 + 1e-3 * std::abs(b))) o.status = "fail";
  }
  return o;
}

// Cases that must run and pass (a regression in the importer or a kernel shows here by name):
// one or more per supported op and attribute family.
const std::vector<std::string> kMustPass = {
    "test_conv_with_strides_padding", "test_conv_with_strides_no_padding", "test_conv_with_autopad_same",
    "test_basic_conv_with_padding", "test_conv_with_strides_and_asymmetric_padding", "test_relu", "test_sigmoid",
    "test_tanh", "test_clip_default_min", "test_clip_inbounds", "test_maxpool_2d_pads", "test_maxpool_2d_strides",
    "test_maxpool_2d_same_upper", "test_maxpool_2d_same_lower", "test_averagepool_2d_pads",
    "test_averagepool_2d_pads_count_include_pad", "test_globalaveragepool", "test_flatten_axis1",
    "test_gemm_default_no_bias", "test_gemm_transposeB", "test_add", "test_add_bcast", "test_sub_bcast",
    "test_mul_bcast", "test_concat_3d_axis_1", "test_batchnorm_example", "test_batchnorm_epsilon",
    "test_reshape_reordered_last_dims", "test_hardsigmoid", "test_hardsigmoid_default", "test_hardswish"};

TEST(OnnxNodeSuite, EveryCaseInScopeMatchesOnnxsOutputs) {
  const auto& [dir, why] = node_cases();
  if (!why.empty()) {
    if (why.rfind("FAILED", 0) == 0) FAIL() << why;
    DRIFTLAB_SKIP_OR_REQUIRE(why);
  }
  std::map<std::string, Outcome> results;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx")) results[e.path().filename().string()] = run_case(e.path());
  ASSERT_GT(results.size(), 500u) << "the generator wrote " << results.size() << " cases into " << dir;
  int pass = 0, exact = 0, fail = 0;
  std::map<std::string, int> reasons;
  for (const auto& [name, o] : results) {
    if (o.status == "pass") {
      ++pass;
      exact += o.exact;
    } else if (o.status.rfind("fail", 0) == 0) {
      ++fail;
      ADD_FAILURE() << name << ": " << o.status << " (max |error| " << o.max_err << ")";
    } else {
      ++reasons[o.status.rfind("op ", 0) == 0 ? "op not supported" : o.status];
    }
  }
  std::printf("ONNX node cases: %zu; ran and passed %d (%d bit-exact), failed %d, out of scope %zu\n", results.size(),
              pass, exact, fail, results.size() - pass - fail);
  for (const auto& [r, n] : reasons) std::printf("  %4d  %s\n", n, r.c_str());
  std::printf("passed:");
  for (const auto& [name, o] : results)
    if (o.status == "pass") std::printf(" %s%s", name.substr(5).c_str(), o.exact ? "" : "*");
  std::printf("\n(* within ONNX's tolerance, not bit-exact)\n");
  for (const std::string& c : kMustPass) {
    auto it = results.find(c);
    ASSERT_NE(it, results.end()) << c << " was not generated";
    EXPECT_EQ(it->second.status, "pass") << c;
  }
}

}  // namespace
}  // namespace driftlab
