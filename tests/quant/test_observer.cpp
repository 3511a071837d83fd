// Calibration observers (quant/observer.h) on inputs small enough to compute by hand. The
// PyTorch kinds are also checked bit for bit against torch itself in
// tests/oracles/test_quant_oracle_torch.cpp. The ONNX Runtime kinds (percentile, entropy) have
// only these hand cases: ORT is not installed here, and a numpy re-implementation written by the
// same person from the same reading of calibrate.py would not be an independent check.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "quant/observer.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

using quant::ObserverConfig;
using quant::ObserverKind;
using quant::Range;

Tensor vec(const std::vector<float>& v) { return Tensor::from<float>({static_cast<int64_t>(v.size())}, v); }

std::unique_ptr<quant::Observer> make(ObserverKind kind) {
  ObserverConfig c;
  c.kind = kind;
  return quant::make_observer(c);
}

Range run(const ObserverConfig& c, const std::vector<std::vector<float>>& batches) {
  auto o = quant::make_observer(c);
  for (const auto& b : batches) o->observe(vec(b));
  return o->range();
}

ObserverConfig config(ObserverKind kind) {
  ObserverConfig c;
  c.kind = kind;
  return c;
}

const ObserverKind kAllKinds[] = {ObserverKind::minmax, ObserverKind::moving_average, ObserverKind::histogram,
                                  ObserverKind::percentile, ObserverKind::entropy};

TEST(QuantObserver, NamesRoundTripAndUnknownNameListsTheKnown) {
  for (ObserverKind k : kAllKinds) EXPECT_EQ(quant::observer_from_name(quant::observer_name(k)), k);
  try {
    quant::observer_from_name("kl");
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("minmax, moving_average, histogram, percentile, entropy"), std::string::npos)
        << e.what();
  }
}

TEST(QuantObserver, MinMaxIsTheRunningMinAndMax) {
  const Range r = run(config(ObserverKind::minmax), {{1.0f, -2.0f, 3.0f}, {0.5f, 4.0f}, {-1.0f}});
  EXPECT_EQ(r.min, -2.0f);
  EXPECT_EQ(r.max, 4.0f);
}

TEST(QuantObserver, MovingAverageFirstBatchSetsThenFloat32Update) {
  // (-1, 1) then (-3, 5): m + 0.01f * (cur - m), each op rounded to float32 (torch's tensor ops).
  const Range r = run(config(ObserverKind::moving_average), {{-1.0f, 1.0f}, {-3.0f, 5.0f}});
  const float c = 0.01f;
  EXPECT_EQ(r.min, -1.0f + c * (-3.0f - -1.0f));  // -1.02 (torch: -1.0199999809)
  EXPECT_EQ(r.max, 1.0f + c * (5.0f - 1.0f));     // 1.04
  // One batch: its own min/max.
  const Range one = run(config(ObserverKind::moving_average), {{2.0f, -7.0f}});
  EXPECT_EQ(one.min, -7.0f);
  EXPECT_EQ(one.max, 2.0f);
}

TEST(QuantObserver, HistogramConstantTensorGivesItsValue) {
  const Range r = run(config(ObserverKind::histogram), {{0.5f, 0.5f, 0.5f}, {0.5f, 0.5f}});
  EXPECT_EQ(r.min, 0.5f);
  EXPECT_EQ(r.max, 0.5f);
}

TEST(QuantObserver, HistogramTwoClustersEndsOneBinShort) {
  // 100 values 0.25 and 100 values 0.75: int bounds 0 == 0, so histc takes the data range
  // [0.25, 0.75]: 100 counts in bin 0, 100 in bin 2047 (x == max goes into the last bin).
  // _non_linear_param_search, round 1: l stays 0 (cSum[0] = 100 >= 1e-5 * 200); r: cSum[2047] =
  // 200 > 0.99999 * 200, cSum[2046] = 100 is not, so r = 2046; 0 > 1 is false: the end moves to
  // 2046, and the first candidate is always accepted (norm_min starts at inf). Then r stays 2046
  // (only beta shrinks) until beta < 0.5, when r runs down to 0; covering bin 0 alone clamps the
  // upper cluster into the last destination bin, the L2 error grows, the search stops.
  // new_max = 0.25 + bw * (2046 + 1), bw = 0.5 / 2048 = 2^-12: 0.749755859375, one bin below
  // the data max (torch 1.13 gives (0.25, 0.749755859375): checked with /usr/bin/python3).
  std::vector<float> v(200, 0.25f);
  for (int i = 100; i < 200; ++i) v[static_cast<std::size_t>(i)] = 0.75f;
  const Range r = run(config(ObserverKind::histogram), {v});
  EXPECT_EQ(r.min, 0.25f);
  EXPECT_EQ(r.max, 0.749755859375f);
}

TEST(QuantObserver, HistogramSameBatchTwiceEqualsOnce) {
  // The second identical batch gives combined min/max equal to the stored ones (downsample 1,
  // e = 128 * range/128 - range = 0 exactly), so the histograms add: every count doubles, and the
  // search (thresholds and L2 norms scale by exactly 2) picks the same bins.
  std::vector<float> v;
  for (int i = 0; i < 300; ++i) v.push_back(std::sin(0.37f * static_cast<float>(i)) * 2.6f + 0.3f);
  const Range once = run(config(ObserverKind::histogram), {v});
  const Range twice = run(config(ObserverKind::histogram), {v, v});
  EXPECT_EQ(once.min, twice.min);
  EXPECT_EQ(once.max, twice.max);
}

TEST(QuantObserver, HistogramConstantFirstBatchIsForgotten) {
  // torch 1.13 HistogramObserver.forward: `same_values` (stored min == max) re-initialises from
  // the new batch, dropping the constant batch's counts (and its value from the range).
  std::vector<float> v;
  for (int i = 0; i < 200; ++i) v.push_back(std::cos(0.11f * static_cast<float>(i)) * 1.7f);
  const Range data_only = run(config(ObserverKind::histogram), {v});
  const Range after_const = run(config(ObserverKind::histogram), {{9.0f, 9.0f}, v});
  EXPECT_EQ(after_const.min, data_only.min);
  EXPECT_EQ(after_const.max, data_only.max);
}

TEST(QuantObserver, HistogramIntBoundsKnobChangesWhatIsCounted) {
  // Data on [-2.7, 4.2] with most of its mass beyond the int-truncated bounds [-2, 4]: 1.13 drops
  // those values from the histogram (docs/QUANT_SOURCES.md item 2); with float bounds they count.
  std::vector<float> v;
  for (int i = 0; i < 400; ++i) v.push_back(i % 2 ? 4.2f - 0.001f * static_cast<float>(i % 50) : -2.7f + 0.001f * static_cast<float>(i % 50));
  v.push_back(0.0f);
  ObserverConfig truncated = config(ObserverKind::histogram), exact = truncated;
  exact.histc_int_bounds = false;
  const Range a = run(truncated, {v}), b = run(exact, {v});
  EXPECT_TRUE(a.min != b.min || a.max != b.max) << a.min << " " << a.max;
  // With float bounds both clusters are counted and neither is an outlier: the range stays wide.
  EXPECT_LT(b.min, -2.0f);
  EXPECT_GT(b.max, 4.0f);
}

TEST(QuantObserver, PercentileAsymmetricHandCase) {
  // threshold 1: 4 bins on [-1, 1], edges -1 -0.5 0 0.5 1; -1 -> 0, -0.5 -> 1 (left-closed),
  // 0.5 -> 3, 1 -> 3 (last bin closed): hist [1 1 0 2], cdf [.25 .5 .5 1].
  // percentile 50: cut 0.25 each side; searchsorted(cdf, .25) = 0 -> -1; (cdf, .75) = 3 -> 0.5.
  ObserverConfig c = config(ObserverKind::percentile);
  c.bins = 4;
  c.percentile = 50;
  const Range r = run(c, {{-1.0f, -0.5f, 0.5f, 1.0f}});
  EXPECT_EQ(r.min, -1.0f);
  EXPECT_EQ(r.max, 0.5f);
}

TEST(QuantObserver, PercentileSymmetricUsesAbsoluteValues) {
  // |x| = 1 .5 .5 1: np.histogram(bins=4) on [0.5, 1]: edges .5 .625 .75 .875 1, hist [2 0 0 2],
  // cdf [.5 .5 .5 1]; searchsorted(cdf, 0.5) = 0 -> 0.5: range (-0.5, 0.5).
  ObserverConfig c = config(ObserverKind::percentile);
  c.bins = 4;
  c.percentile = 50;
  c.symmetric = true;
  const Range r = run(c, {{-1.0f, -0.5f, 0.5f, 1.0f}});
  EXPECT_EQ(r.min, -0.5f);
  EXPECT_EQ(r.max, 0.5f);
}

TEST(QuantObserver, PercentileMergeGrowsTheHistogramByWholeStrides) {
  // Batch 1 {-1, 1}: threshold 1, 4 bins, hist [1 0 0 1]. Batch 2 {-2.5, 0}: threshold 2.5 > 1:
  // stride 0.5, half_increased = int(1.5 // 0.5 + 1) = 4, 12 bins on [-3, 3]; batch 2 in bins 1
  // and 6, the old counts added at 4..7: hist has 1 in bins 1, 4, 6, 7. cdf reaches .25 at bin 1
  // (edge -2.5) and .75 at bin 6 (edge 0). Clipped to the observed [-2.5, 1]: (-2.5, 0).
  ObserverConfig c = config(ObserverKind::percentile);
  c.bins = 4;
  c.percentile = 50;
  const Range r = run(c, {{-1.0f, 1.0f}, {-2.5f, 0.0f}});
  EXPECT_EQ(r.min, -2.5f);
  EXPECT_EQ(r.max, 0.0f);
}

TEST(QuantObserver, EntropyHandCaseAndClipToObservedRange) {
  // {-0.2, 0.1, 0.2, 1}: threshold 1, 4 bins on [-1, 1]: hist [0 1 2 1]. quantized_bins 2:
  // i = 1 (bins 1..3): p [1 2 1], q [1 3 0] -> smoothed q has a 1e-4 bin where p has 1/4:
  // KL ~ 2.1; i = 2 (all bins): p [0 1 2 1], q [1 1 1 1] (1.5 truncated to int64): KL ~ 0.35.
  // i = 2 wins: (-1, 1), clipped to the observed min: (-0.2, 1).
  ObserverConfig c = config(ObserverKind::entropy);
  c.bins = 4;
  c.quantized_bins = 2;
  const Range r = run(c, {{-0.2f, 0.1f, 0.2f, 1.0f}});
  EXPECT_EQ(r.min, -0.2f);
  EXPECT_EQ(r.max, 1.0f);
}

TEST(QuantObserver, EmptyObserverThrowsNamingItself) {
  for (ObserverKind k : kAllKinds) {
    auto o = make(k);
    EXPECT_TRUE(o->empty());
    try {
      o->range();
      ADD_FAILURE() << quant::observer_name(k) << ": no error";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(quant::observer_name(k)), std::string::npos) << e.what();
    }
  }
}

TEST(QuantObserver, NonFiniteInputIsRefusedAndStateKept) {
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (ObserverKind k : kAllKinds) {
    for (float b : bad) {
      auto o = make(k);
      o->observe(vec({-1.0f, 0.5f, 2.0f}));
      const Range before = o->range();
      try {
        o->observe(vec({0.0f, b, 1.0f}));
        ADD_FAILURE() << quant::observer_name(k) << ": no error for " << b;
      } catch (const std::exception& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(std::string(quant::observer_name(k)) + " observer"), std::string::npos) << msg;
        EXPECT_NE(msg.find("flat index 1"), std::string::npos) << msg;
      }
      const Range after = o->range();
      EXPECT_EQ(after.min, before.min);
      EXPECT_EQ(after.max, before.max);
    }
  }
}

TEST(QuantObserver, RefusesNonFloat32) {
  auto o = make(ObserverKind::minmax);
  EXPECT_THROW(o->observe(Tensor::from<double>({2}, {1.0, 2.0})), std::exception);
}

TEST(QuantObserver, WeightRangesPerTensorAndPerChannel) {
  // (3, 2): rows are the output channels.
  const Tensor w = Tensor::from<float>({3, 2}, {1.0f, -2.0f, 0.5f, 0.25f, -3.0f, 4.0f});
  const Range all = quant::minmax_range(w);
  EXPECT_EQ(all.min, -3.0f);
  EXPECT_EQ(all.max, 4.0f);
  const auto ch = quant::per_channel_minmax(w);
  ASSERT_EQ(ch.size(), 3u);
  EXPECT_EQ(ch[0].min, -2.0f);
  EXPECT_EQ(ch[0].max, 1.0f);
  EXPECT_EQ(ch[1].min, 0.25f);
  EXPECT_EQ(ch[1].max, 0.5f);
  EXPECT_EQ(ch[2].min, -3.0f);
  EXPECT_EQ(ch[2].max, 4.0f);
}

}  // namespace
}  // namespace driftlab
