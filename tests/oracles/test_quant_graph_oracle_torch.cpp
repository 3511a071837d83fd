// int8 graph models against PyTorch's quantized engines: torchvision's quantizable MobileNetV2 and
// ResNet-50 (torchvision.models.quantization, random weights and BatchNorm state; ReLU6 replaced by ReLU as
// torchvision does for its quantizable models) quantized by eager-mode static PTQ on qnnpack and
// onednn (tests/oracles/torch/quant_graph_oracle.py), and the same float model exported to ONNX,
// imported as a graph and quantized by driftlab (quant/graph_ptq.h) under the torch_qnnpack and
// torch_onednn schemes.
//
// Two questions, answered apart:
//  1. The integer arithmetic. Given PyTorch's scales and zero points (PtqOptions::qparams), driftlab
//     folds and quantizes the weights itself and must give PyTorch's int8 weights and weight scales,
//     every point's integer output and the logits, bit for bit.
//  2. The calibration. driftlab's observer shown PyTorch's own fp32 calibration tensors must give
//     PyTorch's scale and zero point exactly; from driftlab's own fp32 tensors (summed in another
//     order: a few ulps apart) the scales differ by a few ulps, and at a few points by more (the
//     histogram observer's search is discontinuous: see below), counted and bounded.
// Inputs CIFAR-shaped (3x32x32, U(-1, 1)), 10 classes.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iomanip>
#include <map>
#include <memory>

#include "convert/onnx_graph_import.h"
#include "engine/io/npy.h"
#include "quant/observer.h"
#include "quant/qlayers.h"
#include "quant/ptq.h"
#include "quant/report.h"
#include "quant/scheme.h"
#include "tests/oracles/oracle_util.h"

namespace driftlab {
namespace {

using namespace oracle;

constexpr int kCalibBatches = 2, kCalibRows = 8, kTestRows = 4;

// The oracle's folder, or why there is none ("FAILED: ..." when the script failed).
std::pair<fs::path, std::string> run_oracle(const std::string& name) {
  if (!torch_unavailable().empty()) return {{}, torch_unavailable()};
  int code = 0;
  std::string out = run_command(std::string(kPython) + " -c 'import torchvision'", &code);
  if (code != 0) return {{}, "torchvision not installed (apt-get install python3-torchvision): " + out};
  fs::path dir = fs::temp_directory_path() / ("dl_quant_graph_" + name + "_" + std::to_string(getpid()));
  fs::create_directories(dir);
  static std::vector<std::unique_ptr<RemoveAtExit>> cleanup;
  cleanup.push_back(std::make_unique<RemoveAtExit>());
  cleanup.back()->dir = dir;
  out = run_command(std::string(kPython) + " " + quoted((torch_dir() / "quant_graph_oracle.py").string()) + " " +
                        quoted(dir.string()) + " " + name + " 32 " + std::to_string(kCalibBatches) + " " +
                        std::to_string(kCalibRows) + " " + std::to_string(kTestRows) + " qnnpack onednn",
                    &code);
  if (code != 0) return {{}, "FAILED: quant_graph_oracle.py: " + out};
  return {dir, ""};
}
const std::pair<fs::path, std::string>& oracle_run(const std::string& name) {
  static std::map<std::string, std::pair<fs::path, std::string>> runs;
  auto it = runs.find(name);
  if (it == runs.end()) it = runs.emplace(name, run_oracle(name)).first;
  return it->second;
}

// Elements that differ and the largest difference.
int64_t count_diff(const Tensor& a, const Tensor& b, double* worst) {
  int64_t n = 0;
  *worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.at(i) != b.at(i)) {
      ++n;
      *worst = std::max(*worst, std::fabs(a.at(i) - b.at(i)));
    }
  return n;
}

std::string scheme_of(const std::string& engine) {  // as tests/oracles/test_quant_oracle_torch.cpp
  return "torch,quant_scheme=torch_" + engine +
         (engine == "onednn" && !cpu_has_u8s8_vnni() ? ",quant_u8s8_dot=int16_pairs_channels" : "");
}

struct GraphCase {
  std::string name;
  int points, depthwise, adds;  // what torchvision's model has: 1 + convs + linears + adds points
};

void check_model(const GraphCase& c) {
  const auto& run = oracle_run(c.name);
  const fs::path& dir = run.first;  // not a structured binding: the lambdas below capture it (C++17)
  const std::string& why = run.second;
  if (!why.empty()) {
    if (why.rfind("FAILED", 0) == 0) FAIL() << why;
    DRIFTLAB_SKIP_OR_REQUIRE(why);
  }
  convert::OnnxGraph imported = convert::import_onnx_graph((dir / (c.name + ".onnx")).string());
  Model m = convert::onnx_graph_model(std::move(imported), "torch");
  std::vector<Tensor> batches;
  for (int k = 0; k < kCalibBatches; ++k) batches.push_back(read_npy((dir / ("calib" + std::to_string(k) + ".npy")).string()));
  Shape cs = batches[0].shape();
  cs[0] *= kCalibBatches;
  Tensor calib(cs, DType::f32);
  for (int k = 0; k < kCalibBatches; ++k)
    std::copy_n(batches[k].data<float>(), batches[k].numel(), calib.data<float>() + k * batches[k].numel());
  const Tensor x = read_npy((dir / "x.npy").string());

  for (const std::string engine : {"qnnpack", "onednn"}) {
    SCOPED_TRACE(engine);
    const Policy policy = Policy::parse(scheme_of(engine));
    std::cout << c.name << " " << engine << ": driftlab under " << policy.to_string() << "\n";
    auto out = [&](const std::string& f) { return read_npy((dir / (engine + "." + f + ".npy")).string()); };
    const Tensor qp = out("qparams");
    std::vector<std::string> torch_names;
    {
      std::ifstream f(dir / (engine + ".names.txt"));
      for (std::string line; std::getline(f, line);) torch_names.push_back(line);
    }
    // 1. PyTorch's scales and zero points given: the integers
    quant::PtqOptions given;
    for (int64_t i = 0; i < qp.dim(0); ++i)
      given.qparams.push_back({static_cast<float>(qp.at(2 * i)), static_cast<int32_t>(qp.at(2 * i + 1))});
    quant::PtqResult r = quant::quantize_model(m, policy, Tensor(), given);
    ASSERT_EQ(r.points.size(), torch_names.size());
    EXPECT_EQ(static_cast<int>(r.points.size()), c.points);
    std::vector<Layer*> by;
    const std::vector<Tensor> acts = quant::int8_activations(r.model, x, &by);
    ASSERT_EQ(acts.size(), r.points.size());
    int li = 0, depthwise = 0, adds = 0;
    int64_t total = 0, differ = 0, wdiffer = 0;
    for (std::size_t i = 1; i < acts.size(); ++i) {
      Layer& l = *by[i];
      const Tensor theirs = out("y" + std::to_string(i - 1));
      ASSERT_EQ(theirs.shape(), acts[i].shape()) << r.points[i].name << " vs torch's " << torch_names[i];
      double worst = 0;
      const int64_t n = count_diff(acts[i], theirs, &worst);
      total += acts[i].numel(), differ += n;
      if (n)
        std::cout << engine << " " << r.points[i].name << " (" << l.kind() << ", torch's " << torch_names[i]
                  << "): " << n << " of " << acts[i].numel() << " differ (max " << worst << ")\n";
      EXPECT_EQ(n, 0) << r.points[i].name;
      adds += l.kind() == "qadd";
      if (l.kind() != "qconv2d" && l.kind() != "qdense") continue;
      if (auto* c = quant::quant_layer_as<quant::QConv2dLayer>(l)) depthwise += c->op_params().g.groups > 1;
      const std::string k = std::to_string(li++);
      Tensor w, ws;
      for (Param* p : l.buffers()) {
        if (p->name == "weight") w = p->value;
        if (p->name == "weight_scale") ws = p->value;
      }
      double wworst = 0, sworst = 0;
      const int64_t nw = count_diff(w, out("w" + k), &wworst), ns = count_diff(ws, out("ws" + k), &sworst);
      if (nw || ns) std::cout << engine << " " << r.points[i].name << " weights: " << nw << " differ; scales: " << ns << "\n";
      wdiffer += nw + ns;
      EXPECT_EQ(nw, 0) << r.points[i].name;
      EXPECT_EQ(ns, 0) << r.points[i].name;
    }
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    const Tensor y = r.model.forward(ctx, x);
    double lworst = 0;
    const int64_t nl = count_diff(y, out("logits"), &lworst);
    std::cout << c.name << " " << engine << " (PyTorch's qparams): " << r.points.size() << " points (" << li
              << " convs and linears, " << depthwise << " depthwise, " << adds << " adds); integer outputs " << differ
              << " of " << total << " differ; weights and scales " << wdiffer << " differ; logits " << nl << " of "
              << y.numel() << " differ\n";
    EXPECT_EQ(depthwise, c.depthwise);
    EXPECT_EQ(adds, c.adds);
    EXPECT_EQ(nl, 0);

    // 2. driftlab's own calibration
    quant::PtqOptions o;
    o.calib_batch = kCalibRows;  // the oracle's batches, one forward each
    quant::PtqResult own = quant::quantize_model(m, policy, calib, o);
    ASSERT_EQ(own.points.size(), r.points.size());
    const quant::QuantScheme scheme = quant::QuantScheme::from_policy(policy);
    std::vector<std::vector<Tensor>> ours_seen(own.points.size());
    for (const Tensor& b : batches) {
      std::vector<Tensor> a = quant::fp32_activations(m, policy, b);
      ASSERT_EQ(a.size(), own.points.size());
      for (std::size_t i = 0; i < a.size(); ++i) ours_seen[i].push_back(a[i]);
    }
    int exact = 0, ulp_close = 0, jumped = 0, fed_exact = 0, inputs_differ = 0;
    double max_rel = 0;
    for (std::size_t i = 0; i < own.points.size(); ++i) {
      const float ts = static_cast<float>(qp.at(2 * i));
      const int32_t tz = static_cast<int32_t>(qp.at(2 * i + 1));
      const Tensor theirs = out("a" + std::to_string(i));
      const int64_t reps = theirs.dim(0) / calib.dim(0);  // a fused ConvReLU2d's observer sees each batch twice
      ASSERT_TRUE(reps >= 1 && theirs.dim(0) == reps * calib.dim(0)) << own.points[i].name;
      const int64_t per = theirs.numel() / theirs.dim(0);
      auto fed = quant::make_observer(scheme.observer);
      bool equal = true;
      double gap = 0, big = 0;  // the largest |driftlab's - torch's| calibration value, and |value|
      for (int k = 0; k < kCalibBatches; ++k) {
        const Tensor& o_k = ours_seen[i][static_cast<std::size_t>(k)];
        ASSERT_EQ(o_k.numel(), kCalibRows * per) << own.points[i].name;
        Shape bs = theirs.shape();
        bs[0] = kCalibRows;
        Tensor t(bs, DType::f32);
        for (int64_t rep = 0; rep < reps; ++rep) {
          std::copy_n(theirs.data<float>() + (k * reps + rep) * kCalibRows * per, t.numel(), t.data<float>());
          fed->observe(t);
        }
        equal = equal && std::memcmp(o_k.data<float>(), t.data<float>(), t.nbytes()) == 0;
        for (int64_t e = 0; e < t.numel(); ++e) {
          gap = std::max(gap, std::fabs(double(o_k.data<float>()[e]) - t.data<float>()[e]));
          big = std::max(big, std::fabs(double(t.data<float>()[e])));
        }
      }
      inputs_differ += !equal;
      const quant::ActQParams tq = quant::activation_qparams(scheme, fed->range(), own.points[i].name);
      const bool fed_same = tq.scale == ts && tq.zero_point == tz;
      fed_exact += fed_same;
      EXPECT_TRUE(fed_same) << own.points[i].name << ": driftlab's observer on torch's tensors gives scale " << tq.scale
                            << " zp " << tq.zero_point << ", torch " << ts << " " << tz;
      int32_t a, b;
      std::memcpy(&a, &own.points[i].q.scale, 4);
      std::memcpy(&b, &ts, 4);
      const int32_t ulps = std::abs(a - b);
      if (own.points[i].q.scale == ts && own.points[i].q.zero_point == tz) {
        ++exact;
      } else {
        const double rel = std::fabs(double(own.points[i].q.scale) - ts) / ts;
        if (ulps > 4 || own.points[i].q.zero_point != tz)
          std::cout << std::setprecision(9) << engine << " " << own.points[i].name << ": own scale "
                    << own.points[i].q.scale << " zp " << own.points[i].q.zero_point << " | torch " << ts << " " << tz
                    << " (" << ulps << " ulps, " << rel * 100 << "%); calibration values " << gap << " apart at most (of "
                    << big << ")\n";
        // Only where driftlab's fp32 tensors are not torch's (summed in another order). Mostly a few
        // ulps of scale; but the histogram observer's search (an L2 norm minimised over candidate bin
        // ranges) is discontinuous in its input: values an ulp apart that cross a bin edge change the
        // counts, and on a flat norm the best range moves by many bins. Measured once (Zen 3, both
        // engines): MobileNetV2 5 of 64 points 0.01% to 0.8% of scale apart, one zero point 1 apart, with
        // the calibration values at most ~1e-6 apart; ResNet-50 18 of 71 points, at most 0.05%. Bounded at 2% and 2: a wrong fold, scheme or observer
        // is tens of percent away; the arithmetic itself is checked exactly above (fed torch's tensors).
        EXPECT_FALSE(equal) << own.points[i].name;
        EXPECT_LE(std::abs(own.points[i].q.zero_point - tz), 2) << own.points[i].name;
        EXPECT_LE(rel, 0.02) << own.points[i].name;
        ulps <= 4 ? ++ulp_close : ++jumped;
        max_rel = std::max(max_rel, rel);
      }
    }
    const Tensor yo = own.model.forward(ctx, x);
    double oworst = 0;
    const int64_t no = count_diff(yo, out("logits"), &oworst);
    std::cout << c.name << " " << engine << " (own calibration): " << own.points.size() << " points: " << exact
              << " scale and zero point equal to torch's, " << ulp_close << " 1-4 ulps of scale apart, " << jumped
              << " further (at most " << max_rel * 100 << "%); fp32 calibration tensors differ at " << inputs_differ
              << "; fed torch's tensors, "
              << fed_exact << " equal; logits " << no << " of " << yo.numel() << " differ (max " << oworst
              << " of max |logit| " << max_abs(out("logits")) << ")\n";
  }
}

// MobileNetV2: 52 convs (17 depthwise) + 10 inverted-residual adds + the classifier; ResNet-50: 53
// convs (4 downsampling shortcuts) + 16 bottleneck add_relu + fc; each with the input's point.
TEST(TorchQuantGraph, MobileNetV2Int8BitExactWithQnnpackAndOnednn) { check_model({"mobilenet_v2", 64, 17, 10}); }
TEST(TorchQuantGraph, ResNet50Int8BitExactWithQnnpackAndOnednn) { check_model({"resnet50", 71, 0, 16}); }

}  // namespace
}  // namespace driftlab
