// attacks/stats.h on hand-computed cases (the SciPy oracle is tests/oracles/test_stats_oracle_scipy.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "attacks/stats.h"
#include "core/error.h"

namespace driftlab {
namespace {

TEST(Stats, WilcoxonExactByHand) {
  // d = (1, -2, 3, 4): ranks 1..4, R+ = 8, R- = 2, T = 2. Of the 16 equally likely sign patterns,
  // R+ <= 2 for {}, {1}, {2}: p = 2 * 3/16 = 0.375.
  const attacks::WilcoxonResult r = attacks::wilcoxon({2, 0, 5, 4}, {1, 2, 2, 0});
  EXPECT_EQ(r.method, "exact");
  EXPECT_EQ(r.statistic, 2.0);
  EXPECT_EQ(r.pvalue, 0.375);
  EXPECT_FALSE(r.ties);
  // the centre of the distribution: p = 1
  EXPECT_EQ(attacks::wilcoxon({1, 0, 0, 4}, {0, 2, 3, 0}).pvalue, 1.0);  // d = 1,-2,-3,4: R+ = 5 = 10/2
}

TEST(Stats, WilcoxonZerosSwitchToTheNormalApproximationWithoutThem) {
  // d = (0, 1, -2, 3, 4): the zero is dropped, n = 4, T = 2, mean 5, se^2 = 4*5*9/24 = 7.5
  const attacks::WilcoxonResult r = attacks::wilcoxon({5, 2, 0, 5, 4}, {5, 1, 2, 2, 0});
  EXPECT_EQ(r.method, "approx");
  EXPECT_EQ(r.zeros, 1);
  EXPECT_EQ(r.n, 4);
  EXPECT_DOUBLE_EQ(r.z, (2.0 - 5.0) / std::sqrt(7.5));
  EXPECT_NEAR(r.pvalue, std::erfc(3.0 / std::sqrt(7.5) / std::sqrt(2.0)), 1e-15);
  EXPECT_THROW(attacks::wilcoxon({1, 2}, {1, 2}), Error);  // every difference zero
  EXPECT_THROW(attacks::wilcoxon({1, 2}, {1}), Error);
}

TEST(Stats, A12ByHandTiesCountHalf) {
  // a = (1, 2, 3), b = (2, 2): a > b in 2 of 6 pairs, ties in 2: (2 + 2 * 0.5) / 6 = 0.5
  EXPECT_DOUBLE_EQ(attacks::a12({1, 2, 3}, {2, 2}), 0.5);
  EXPECT_DOUBLE_EQ(attacks::a12({5, 6}, {1, 2, 3}), 1.0);
  EXPECT_DOUBLE_EQ(attacks::a12({1}, {2}), 0.0);
  EXPECT_EQ(attacks::average_ranks({3, 1, 3, 2}), (std::vector<double>{3.5, 1, 3.5, 2}));
}

TEST(Stats, MinMaxIndicatorS1AndS3) {
  // Guo et al.'s R(m) (docs/GLOSSARY.md): attack 0 rates 0.2, 0.4, 0.6 -> P = 0, 0.5, 1; attack 1
  // ties everywhere -> 0
  const std::vector<double> r = attacks::min_max_indicator({{0.2, 0.5}, {0.4, 0.5}, {0.6, 0.5}});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_DOUBLE_EQ(r[0], 0.0);
  EXPECT_DOUBLE_EQ(r[1], 0.5);
  EXPECT_DOUBLE_EQ(r[2], 1.0);
  // Openja et al.'s R(m, c) on |S_conv - S_orig|: two attacks, both spread
  const std::vector<double> v = attacks::min_max_indicator({{0.0, 0.1}, {0.02, 0.0}, {0.04, 0.05}});
  EXPECT_DOUBLE_EQ(v[0], 0.0 + 1.0);
  EXPECT_DOUBLE_EQ(v[1], 0.5 + 0.0);
  EXPECT_DOUBLE_EQ(v[2], 1.0 + 0.5);
  EXPECT_THROW(attacks::min_max_indicator({{0.1, 0.2}, {0.3}}), Error);
  EXPECT_THROW(attacks::min_max_indicator({{NAN}}), Error);
}

}  // namespace
}  // namespace driftlab
