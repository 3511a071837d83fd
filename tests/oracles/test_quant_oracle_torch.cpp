// The calibration observers (quant/observer.h) against torch.ao.quantization 1.13 observers run
// on the same float32 batches (tests/oracles/torch/quant_oracle.py): MinMaxObserver,
// MovingAverageMinMaxObserver, HistogramObserver (its _non_linear_param_search() result, and
// its histogram and min/max state after the last batch) and PerChannelMinMaxObserver. Every
// comparison is bit for bit (tolerance 0): the observers copy torch's float32 arithmetic step
// by step, so any difference is a bug, not rounding noise.
//
// Percentile and entropy (ONNX Runtime's calibrators) have no oracle here: ORT's Python package
// is not installed; tests/quant/test_observer.cpp checks them on hand-computed cases.
#include <gtest/gtest.h>

#include <random>

#include "models/models.h"
#include "quant/observer.h"
#include "quant/ptq.h"
#include "tests/oracles/oracle_util.h"

namespace driftlab {
namespace {

using oracle::CaseDir;
using oracle::ErrorTable;
using json = nlohmann::json;

// One case: a name and its batches (float32, shape (4, 3, 8, 8) unless a case says otherwise).
struct ObsCase {
  std::string name;
  std::vector<Tensor> batches;
};

Tensor batch_from(const std::vector<float>& v) { return Tensor::from<float>({4, 3, static_cast<int64_t>(v.size()) / 12}, v); }

// n values drawn by `draw` from MT19937(seed).
template <typename Draw>
Tensor make_batch(uint32_t seed, int64_t n, Draw draw) {
  std::mt19937 g(seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = draw(g);
  return batch_from(v);
}

std::vector<ObsCase> obs_cases() {
  std::vector<ObsCase> cs;
  const int64_t n = 768;
  auto normal = [](float mean, float sd) {
    return [=](std::mt19937& g) { return std::normal_distribution<float>(mean, sd)(g); };
  };
  auto uniform = [](float lo, float hi) {
    return [=](std::mt19937& g) { return std::uniform_real_distribution<float>(lo, hi)(g); };
  };
  // Within (-1, 1): int(min) == int(max) == 0, so torch 1.13's histc falls back to the data range.
  cs.push_back({"small_range", {}});
  for (uint32_t k = 0; k < 3; ++k)
    cs.back().batches.push_back(make_batch(10 + k, n, [&](std::mt19937& g) {
      return std::clamp(normal(0.0f, 0.3f)(g), -0.99f, 0.99f);
    }));
  // Crossing integers: the int-truncated histc bounds drop the values beyond them.
  cs.push_back({"crossing_integers",
                {make_batch(20, n, uniform(-2.7f, 4.2f)), make_batch(21, n, uniform(-3.5f, 5.1f)),
                 make_batch(22, n, uniform(-1.2f, 2.3f)), make_batch(23, n, normal(0.5f, 1.7f))}});
  // Post-ReLU: min stays 0 (the combined histogram relaxes only the max).
  cs.push_back({"relu", {}});
  for (uint32_t k = 0; k < 4; ++k)
    cs.back().batches.push_back(make_batch(30 + k, n, [&, k](std::mt19937& g) {
      return std::max(0.0f, normal(0.1f, 0.8f + 0.6f * static_cast<float>(k))(g));
    }));
  // A constant tensor, alone and followed by real data (torch restarts after a one-value range).
  cs.push_back({"constant", {Tensor::from<float>({2, 3}, std::vector<float>(6, 0.5f)),
                             Tensor::from<float>({2, 3}, std::vector<float>(6, 0.5f))}});
  cs.push_back({"constant_then_data", {Tensor::from<float>({2, 3}, std::vector<float>(6, 1.25f)),
                                       make_batch(40, n, normal(0.0f, 1.0f)), make_batch(41, n, normal(0.2f, 1.5f))}});
  // Range growing by decades: large downsample rates in the combine step.
  cs.push_back({"growing", {make_batch(50, n, uniform(-0.1f, 0.1f)), make_batch(51, n, uniform(-1.0f, 1.0f)),
                            make_batch(52, n, uniform(-10.0f, 10.0f)), make_batch(53, n, uniform(-3.0f, 3.0f))}});
  // Outliers: the L2 search should cut them off.
  cs.push_back({"outliers", {}});
  for (uint32_t k = 0; k < 3; ++k) {
    Tensor b = make_batch(60 + k, n, normal(0.0f, 1.0f));
    b.data<float>()[7 * (k + 1)] = 40.0f + 3.0f * static_cast<float>(k);
    b.data<float>()[100] = -25.0f;
    cs.back().batches.push_back(b);
  }
  // Two clusters (0.25 and 0.75, 100 each): the search ends one bin below the upper cluster
  // (tests/quant/test_observer.cpp HistogramTwoClustersEndsOneBinShort walks it by hand).
  {
    std::vector<float> v(200, 0.25f);
    std::fill(v.begin() + 100, v.end(), 0.75f);
    cs.push_back({"two_values", {Tensor::from<float>({200}, v)}});
  }
  // Many batches with drifting centre and scale: several combines, fractional counts, sums
  // whose float32 order matters.
  cs.push_back({"many_batches", {}});
  for (uint32_t k = 0; k < 8; ++k)
    cs.back().batches.push_back(make_batch(90 + k, 12 * 256, normal(0.3f * static_cast<float>(k) - 1.0f,
                                                                       0.5f + 0.4f * static_cast<float>(k % 5))));
  // One big batch, negative-only data.
  cs.push_back({"negative_single", {make_batch(70, 12 * 512, normal(-5.0f, 0.7f))}});
  return cs;
}

const char* kObservers[] = {"minmax", "moving_average", "histogram"};
constexpr double kAveragingConstant = 0.01;

std::string case_name(const ObsCase& c, const std::string& obs) { return c.name + "." + obs; }

void fill_observers(CaseDir& d) {
  for (const ObsCase& c : obs_cases()) {
    for (const char* obs : kObservers) {
      const std::string name = case_name(c, obs);
      for (std::size_t k = 0; k < c.batches.size(); ++k) d.input(name, "b" + std::to_string(k), c.batches[k]);
      d.add_case({{"name", name},
                  {"kind", "observer"},
                  {"observer", obs},
                  {"batches", c.batches.size()},
                  {"averaging_constant", kAveragingConstant},
                  {"bins", 2048},
                  {"upsample_rate", 128}});
    }
  }
  d.input("per_channel", "w", random_tensor({6, 3, 3, 3}, DType::f32, 81, -0.7, 0.9));
  d.add_case({{"name", "per_channel"}, {"kind", "per_channel"}});
}

const CaseDir& observer_run() {
  static const CaseDir d(oracle::torch_oracle("quant_oracle.py"), "torch_quant_observers", fill_observers);
  return d;
}

Tensor range_tensor(quant::Range r) { return Tensor::from<float>({2}, {r.min, r.max}); }

TEST(TorchQuantObserver, RangesBitExactWithTorchObservers) {
  ORACLE_GROUP(run, observer_run);
  ErrorTable table("calibration observers vs torch.ao.quantization 1.13 (ranges, bit for bit)", "torch");
  for (const ObsCase& c : obs_cases()) {
    for (const char* obs : kObservers) {
      const std::string name = case_name(c, obs);
      quant::ObserverConfig cfg;
      cfg.kind = quant::observer_from_name(obs);
      cfg.averaging_constant = kAveragingConstant;
      auto o = quant::make_observer(cfg);
      for (const Tensor& b : c.batches) o->observe(b);
      // Tolerance 0: the same float32 operations in the same order as torch.
      EXPECT_TRUE(table.check(name, "range", range_tensor(o->range()), run.out(name, "range"), 0.0));
    }
  }
  // Negative control: without 1.13's int-truncated histc bounds the crossing-integer case must
  // differ from torch, or the comparison above could not see that knob.
  for (const ObsCase& c : obs_cases()) {
    if (c.name != "crossing_integers") continue;
    quant::ObserverConfig cfg;
    cfg.kind = quant::ObserverKind::histogram;
    cfg.histc_int_bounds = false;
    auto o = quant::make_observer(cfg);
    for (const Tensor& b : c.batches) o->observe(b);
    const Tensor ref = run.out(case_name(c, "histogram"), "range");
    const double rel = table.note(c.name + ".histogram float bounds", "range", range_tensor(o->range()), ref);
    EXPECT_GT(rel, 0.0) << "float histc bounds give torch 1.13's range too: the knob is not exercised";
  }
  table.print();
}

TEST(TorchQuantObserver, PerChannelMinMaxBitExact) {
  ORACLE_GROUP(run, observer_run);
  const Tensor w = run.in("per_channel", "w");
  const auto ranges = quant::per_channel_minmax(w);
  std::vector<float> mn, mx;
  for (const auto& r : ranges) {
    mn.push_back(r.min);
    mx.push_back(r.max);
  }
  const int64_t c = static_cast<int64_t>(ranges.size());
  // Exact: a min and a max pick elements, they compute nothing.
  EXPECT_TRUE(bitwise_equal(Tensor::from<float>({c}, mn), run.out("per_channel", "min")));
  EXPECT_TRUE(bitwise_equal(Tensor::from<float>({c}, mx), run.out("per_channel", "max")));
  const quant::Range all = quant::minmax_range(w);
  EXPECT_EQ(all.min, *std::min_element(mn.begin(), mn.end()));
  EXPECT_EQ(all.max, *std::max_element(mx.begin(), mx.end()));
}

// ---------------------------------------------------------------------------------------------
// Static PTQ of LeNet-1 and LeNet-5 against PyTorch 1.13 eager mode (QuantStub, fuse_modules,
// get_default_qconfig(engine), prepare, calibration, convert) on its two engines here, qnnpack and
// onednn: the same float32 weights and calibration batches. Compared bit for bit: every scale and
// zero point the observers gave, every int8 weight and weight scale, every conv/linear's integer
// output on a test batch, and the dequantized logits. A difference is a count of elements and
// their largest distance in integer steps, printed; the tolerance is 0 (the formulas were pinned
// against these engines: docs/QUANT_SOURCES.md), so any count fails.
namespace ptq {

constexpr int kCalibBatches = 4, kCalibRows = 32, kTestRows = 64;

std::string torch_param(const std::string& n) {  // "0.conv2d.weight" -> "0.weight"
  const auto a = n.find('.'), b = n.rfind('.');
  return n.substr(0, a) + n.substr(b);
}

struct PtqCase {
  std::string arch, engine;
  std::string name() const { return arch + "_" + engine; }
  std::string scheme() const { return "torch,quant_scheme=torch_" + engine; }
};
const std::vector<PtqCase> kCases = {{"lenet5", "qnnpack"}, {"lenet5", "onednn"}, {"lenet1", "qnnpack"},
                                     {"lenet1", "onednn"}};

Model fp32_model(const std::string& arch) { return build_model(arch, Policy::torch(), 7); }
Tensor calib_batch(int k) { return random_tensor({kCalibRows, 1, 28, 28}, DType::f32, 300 + k, 0.0, 1.0); }
Tensor test_input() { return random_tensor({kTestRows, 1, 28, 28}, DType::f32, 399, 0.0, 1.0); }

void fill_ptq(CaseDir& d) {
  for (const PtqCase& c : kCases) {
    Model m = fp32_model(c.arch);
    for (auto& np : m.net->named_params()) d.input(c.name(), "p." + torch_param(np.first), np.second->value);
    for (int k = 0; k < kCalibBatches; ++k) d.input(c.name(), "calib" + std::to_string(k), calib_batch(k));
    d.input(c.name(), "x", test_input());
    d.add_case({{"name", c.name()}, {"kind", "ptq"}, {"arch", c.arch}, {"engine", c.engine},
                {"calib_batches", kCalibBatches}});
  }
}
const CaseDir& ptq_run() {
  static const CaseDir d(oracle::torch_oracle("quant_oracle.py"), "torch_quant_ptq", fill_ptq);
  return d;
}

// Elements that differ and the largest difference (integer steps for int tensors).
std::string diff_summary(const Tensor& a, const Tensor& b, int64_t* count) {
  *count = 0;
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.at(i) != b.at(i)) {
      ++*count;
      worst = std::max(worst, std::fabs(a.at(i) - b.at(i)));
    }
  return std::to_string(*count) + " of " + std::to_string(a.numel()) + " differ (max " + std::to_string(worst) + ")";
}

TEST(TorchQuantPtq, LenetQparamsWeightsAndIntegerOutputsMatchQnnpackAndOnednn) {
  ORACLE_GROUP(run, ptq_run);
  for (const PtqCase& c : kCases) {
    SCOPED_TRACE(c.name());
    Model m = fp32_model(c.arch);
    Tensor calib({kCalibBatches * kCalibRows, 1, 28, 28}, DType::f32);
    for (int k = 0; k < kCalibBatches; ++k) {
      const Tensor b = calib_batch(k);
      std::copy_n(b.data<float>(), b.numel(), calib.data<float>() + k * b.numel());
    }
    quant::PtqOptions o;
    o.calib_batch = kCalibRows;  // the oracle's batches, one forward each
    quant::PtqResult r = quant::quantize_model(m, Policy::parse(c.scheme()), calib, o);
    // qparams
    const Tensor qp = run.out(c.name(), "qparams");
    ASSERT_EQ(qp.dim(0), static_cast<int64_t>(r.points.size()));
    for (std::size_t i = 0; i < r.points.size(); ++i) {
      std::cout << c.name() << " " << r.points[i].name << ": scale " << r.points[i].q.scale << " zp "
                << r.points[i].q.zero_point << " | torch " << qp.at(2 * i) << " " << qp.at(2 * i + 1) << "\n";
      EXPECT_EQ(static_cast<double>(r.points[i].q.scale), qp.at(2 * i)) << r.points[i].name;
      EXPECT_EQ(r.points[i].q.zero_point, qp.at(2 * i + 1)) << r.points[i].name;
    }
    // weights, then the integer outputs of each int8 conv/dense, layer by layer
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    Tensor x = test_input();
    int li = 0;
    for (std::size_t i = 0; i < r.model.net->size(); ++i) {
      Layer& l = r.model.net->layer(i);
      x = l.forward(ctx, x);
      if (l.kind() != "qconv2d" && l.kind() != "qdense") continue;
      const std::string k = std::to_string(li++);
      Tensor w, ws;
      for (Param* p : l.buffers()) {
        if (p->name == "weight") w = p->value;
        if (p->name == "weight_scale") ws = p->value;
      }
      int64_t n = 0;
      std::cout << c.name() << " layer " << i << " " << l.kind() << " weights: "
                << diff_summary(w, run.out(c.name(), "w" + k), &n);
      EXPECT_EQ(n, 0);
      std::cout << "; weight scales: " << diff_summary(ws, run.out(c.name(), "ws" + k), &n);
      EXPECT_EQ(n, 0);
      std::cout << "; outputs: " << diff_summary(x, run.out(c.name(), "y" + k), &n) << "\n";
      EXPECT_EQ(n, 0) << "layer " << i;
    }
    int64_t n = 0;
    std::cout << c.name() << " logits: " << diff_summary(x, run.out(c.name(), "logits"), &n) << "\n";
    EXPECT_EQ(n, 0);
  }
}

}  // namespace ptq
}  // namespace
}  // namespace driftlab
