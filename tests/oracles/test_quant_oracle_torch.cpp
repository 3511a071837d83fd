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

#include <cstring>
#include <random>

#include "models/models.h"
#include "quant/observer.h"
#include "quant/ptq.h"
#include "quant/report.h"
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
  // oneDNN on x86 without VNNI sums channel pairs in int16 with saturation (oracle::cpu_has_u8s8_vnni)
  std::string scheme() const {
    return "torch,quant_scheme=torch_" + engine +
           (engine == "onednn" && !oracle::cpu_has_u8s8_vnni() ? ",quant_u8s8_dot=int16_pairs_channels" : "");
  }
};
const std::vector<PtqCase> kCases = {{"lenet5", "qnnpack"},   {"lenet5", "onednn"},  {"lenet1", "qnnpack"},
                                     {"lenet1", "onednn"},    {"resnet20", "qnnpack"}, {"resnet20", "onednn"}};

bool is_resnet(const std::string& arch) { return arch == "resnet20"; }
// LeNets: the zoo's initial weights; ResNet-20: random BatchNorm statistics and affine parameters too
// (a model straight from init has mean 0, var 1, gamma 1, beta 0: folding would then be trivial).
Model fp32_model(const std::string& arch) {
  return is_resnet(arch) ? oracle::model_with_random_state(arch, Policy::torch(), 7) : build_model(arch, Policy::torch(), 7);
}
// LeNets: images in [0, 1); ResNet-20: a normalised CIFAR batch's range, U(-1, 1).
Tensor calib_batch(const std::string& arch, int k) {
  return is_resnet(arch) ? random_tensor({8, 3, 32, 32}, DType::f32, 310 + k, -1.0, 1.0)
                         : random_tensor({kCalibRows, 1, 28, 28}, DType::f32, 300 + k, 0.0, 1.0);
}
Tensor test_input(const std::string& arch) {
  return is_resnet(arch) ? random_tensor({6, 3, 32, 32}, DType::f32, 398, -1.0, 1.0)
                         : random_tensor({kTestRows, 1, 28, 28}, DType::f32, 399, 0.0, 1.0);
}

void fill_ptq(CaseDir& d) {
  for (const PtqCase& c : kCases) {
    Model m = fp32_model(c.arch);
    if (is_resnet(c.arch)) {
      const auto params = m.net->named_params();
      const auto stats = m.net->named_buffers();  // running_mean, running_var of each BatchNorm
      for (std::size_t i = 0; i < params.size(); ++i) d.input(c.name(), "p" + std::to_string(i), params[i].second->value);
      for (std::size_t j = 0; j < stats.size(); ++j) d.input(c.name(), "s" + std::to_string(j), stats[j].second->value);
    } else {
      for (auto& np : m.net->named_params()) d.input(c.name(), "p." + torch_param(np.first), np.second->value);
    }
    for (int k = 0; k < kCalibBatches; ++k) d.input(c.name(), "calib" + std::to_string(k), calib_batch(c.arch, k));
    d.input(c.name(), "x", test_input(c.arch));
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

TEST(TorchQuantPtq, LenetAndResnet20QparamsWeightsAndIntegerOutputsMatchQnnpackAndOnednn) {
  ORACLE_GROUP(run, ptq_run);
  for (const PtqCase& c : kCases) {
    SCOPED_TRACE(c.name());
    std::cout << c.name() << ": driftlab under " << c.scheme() << "\n";
    Model m = fp32_model(c.arch);
    std::vector<Tensor> batches;
    for (int k = 0; k < kCalibBatches; ++k) batches.push_back(calib_batch(c.arch, k));
    Shape cs = batches[0].shape();
    cs[0] *= kCalibBatches;
    Tensor calib(cs, DType::f32);
    for (int k = 0; k < kCalibBatches; ++k)
      std::copy_n(batches[k].data<float>(), batches[k].numel(), calib.data<float>() + k * batches[k].numel());
    quant::PtqOptions o;
    o.calib_batch = batches[0].dim(0);  // the oracle's batches, one forward each
    quant::PtqResult r = quant::quantize_model(m, Policy::parse(c.scheme()), calib, o);
    // qparams
    const Tensor qp = run.out(c.name(), "qparams");
    ASSERT_EQ(qp.dim(0), static_cast<int64_t>(r.points.size()));
    // Every point's qparams come from what its observer saw during calibration: fp32 tensors that
    // driftlab and torch each compute. Where driftlab's tensor is torch's bit for bit, the
    // qparams must be equal. Where it is not (a float32 sum in another order: torch's mean
    // reduction in adaptive_avg_pool2d, a cascade sum, before ResNet-20's fc; its OpenBLAS sgemm
    // before LeNet's last dense on a CPU whose BLAS kernel sums in another order than driftlab's
    // GEMM), driftlab's observer is shown torch's own tensors, batch by batch, and must then give
    // torch's qparams exactly (the observer and the qparams arithmetic are checked), while its
    // qparams from its own tensors may differ by at most 4 ulps of scale, zero point equal
    // (counted and printed; seen: 1-2 ulps). A bin edge crossed by the ulp-different values
    // would show as a larger jump, which this does not hide.
    const quant::QuantScheme scheme = quant::QuantScheme::from_policy(Policy::parse(c.scheme()));
    std::vector<std::vector<Tensor>> ours_seen(r.points.size());
    for (const Tensor& b : batches) {
      std::vector<Tensor> a = quant::fp32_activations(m, Policy::parse(c.scheme()), b);
      ASSERT_EQ(a.size(), r.points.size());
      for (std::size_t i = 0; i < a.size(); ++i) ours_seen[i].push_back(a[i]);
    }
    int64_t qp_diff = 0, qp_ulp = 0;
    double scale_gap = 0;
    for (std::size_t i = 0; i < r.points.size(); ++i) {
      const float ts = static_cast<float>(qp.at(2 * i));
      const std::string& pn = r.points[i].name;
      bool same = r.points[i].q.scale == ts && r.points[i].q.zero_point == qp.at(2 * i + 1);
      // torch's fp32 calibration tensors at this point, split into the calibration batches
      const Tensor theirs = run.out(c.name(), "a" + std::to_string(i));
      // torch 1.13's eager prepare makes the observer of a fused ConvReLU2d / LinearReLU (an
      // nn.Sequential) a child of it as well as its forward hook: it sees each batch twice in a
      // row. Harmless for the default histogram and min/max observers (the same range, every
      // count doubled); driftlab observes once. The oracle records every call.
      const int64_t reps = theirs.dim(0) / calib.dim(0);
      ASSERT_TRUE(reps >= 1 && theirs.dim(0) == reps * calib.dim(0)) << pn;
      const int64_t per = theirs.numel() / theirs.dim(0);
      bool inputs_equal = true;
      double input_gap = 0;
      auto fed = quant::make_observer(scheme.observer);
      for (int k = 0; k < kCalibBatches; ++k) {
        const Tensor& o = ours_seen[i][static_cast<std::size_t>(k)];
        Shape bs = theirs.shape();
        bs[0] = o.dim(0);
        Tensor t(bs, DType::f32);
        for (int64_t rep = 0; rep < reps; ++rep) {
          std::copy_n(theirs.data<float>() + (k * reps + rep) * o.dim(0) * per, t.numel(), t.data<float>());
          fed->observe(t);
        }
        ASSERT_EQ(o.numel(), t.numel()) << pn;
        for (int64_t e = 0; e < t.numel(); ++e) {
          const float a = o.data<float>()[e], b = t.data<float>()[e];
          if (std::memcmp(&a, &b, 4) != 0) inputs_equal = false;
          input_gap = std::max(input_gap, std::fabs(double(a) - double(b)));
        }
      }
      const quant::ActQParams tq = quant::activation_qparams(scheme, fed->range(), pn);
      EXPECT_TRUE(tq.scale == ts && tq.zero_point == qp.at(2 * i + 1))
          << pn << ": driftlab's observer on torch's own calibration tensors gives scale " << tq.scale << " zp "
          << tq.zero_point << ", torch " << ts << " " << qp.at(2 * i + 1);
      // ulps between the two scales (positive floats: their bit patterns are ordered)
      int32_t ours_bits, torch_bits;
      std::memcpy(&ours_bits, &r.points[i].q.scale, 4);
      std::memcpy(&torch_bits, &ts, 4);
      const int32_t ulps = std::abs(ours_bits - torch_bits);
      if (!inputs_equal)
        std::cout << c.name() << " " << pn << ": fp32 calibration tensors differ from torch's (largest "
                  << input_gap << "); scales " << ulps << " ulps apart\n";
      if (!same && !inputs_equal && r.points[i].q.zero_point == qp.at(2 * i + 1) && ulps <= 4) {
        ++qp_ulp;
        scale_gap = std::max(scale_gap, std::fabs(static_cast<double>(r.points[i].q.scale) - ts));
        same = true;
      }
      qp_diff += !same;
      if (!same || i < 3)
        std::cout << std::setprecision(9) << c.name() << " " << pn << ": scale " << r.points[i].q.scale << " zp "
                  << r.points[i].q.zero_point << " | torch " << qp.at(2 * i) << " " << qp.at(2 * i + 1) << "\n";
    }
    std::cout << c.name() << ": " << r.points.size() << " points, " << qp_diff << " scale/zero point differences, "
              << qp_ulp << " scale differences of a few ulps where the fp32 calibration tensors differ\n";
    EXPECT_EQ(qp_diff, 0);
    // weights of each qconv/qdense, the integer output of every point, layer by layer
    std::vector<Layer*> by;
    const std::vector<Tensor> acts = quant::int8_activations(r.model, test_input(c.arch), &by);
    ASSERT_EQ(acts.size(), r.points.size());
    int li = 0;
    int64_t total = 0, differ = 0;
    for (std::size_t i = 1; i < acts.size(); ++i) {
      Layer& l = *by[i];
      int64_t n = 0;
      const std::string summary = diff_summary(acts[i], run.out(c.name(), "y" + std::to_string(i - 1)), &n);
      total += acts[i].numel(), differ += n;
      if (n || !is_resnet(c.arch)) std::cout << c.name() << " " << r.points[i].name << " (" << l.kind() << ") outputs: " << summary << "\n";
      EXPECT_EQ(n, 0) << r.points[i].name;
      if (l.kind() != "qconv2d" && l.kind() != "qdense") continue;
      const std::string k = std::to_string(li++);
      Tensor w, ws;
      for (Param* p : l.buffers()) {
        if (p->name == "weight") w = p->value;
        if (p->name == "weight_scale") ws = p->value;
      }
      int64_t nw = 0, ns = 0;
      const std::string wsum = diff_summary(w, run.out(c.name(), "w" + k), &nw);
      const std::string ssum = diff_summary(ws, run.out(c.name(), "ws" + k), &ns);
      if (nw || ns) std::cout << c.name() << " " << r.points[i].name << " weights: " << wsum << "; scales: " << ssum << "\n";
      EXPECT_EQ(nw, 0) << r.points[i].name;
      EXPECT_EQ(ns, 0) << r.points[i].name;
    }
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    const Tensor y = r.model.forward(ctx, test_input(c.arch));
    int64_t n = 0;
    const Tensor tl = run.out(c.name(), "logits");
    std::cout << c.name() << ": integer outputs " << differ << " of " << total << " differ; logits: "
              << diff_summary(y, tl, &n) << "\n";
    if (qp_ulp == 0) {
      EXPECT_EQ(n, 0);
    } else {  // equal integers dequantized with scales a few ulps apart: |dy| <= |ds| * |q - zp| <= |ds| * 255,
              // plus the float32 rounding of each product (half an ulp of each side: |y| * 2^-24)
      for (int64_t i = 0; i < y.numel(); ++i)
        EXPECT_LE(std::fabs(y.at(i) - tl.at(i)), scale_gap * 255 + (std::fabs(y.at(i)) + std::fabs(tl.at(i))) * 0x1p-24)
            << i;
    }
  }
}

}  // namespace ptq
}  // namespace
}  // namespace driftlab
