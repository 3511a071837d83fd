// attacks/stats.h against SciPy 1.10 (Debian 12's python3-scipy; tests/oracles/scipy/stats_oracle.py)
// on the same data: the Wilcoxon signed-rank test with scipy.stats.wilcoxon's defaults and the
// Vargha-Delaney A12 as mannwhitneyu(a, b).statistic / (m n). The data cover the exact and the
// approximate method, ties (including SciPy 1.10's exact p on a tied, truncated R+), zeros (dropped),
// n = 50 and 51 (the switch), and A12 with ties and unequal sizes.
//
// Tolerance: the statistics (half-integer rank sums, A12) and the exact p-values (the same
// recursion and numpy's pairwise summation order) must be equal; the approximate p-values within
// 1e-14 relative: SciPy's normal tail is cephes' erfc, driftlab's the C library's (both within an ulp
// or two of the true value).
#include <gtest/gtest.h>

#include <cmath>
#include <iomanip>
#include <random>

#include "attacks/stats.h"
#include "tests/oracles/oracle_util.h"

namespace driftlab {
namespace {

using oracle::CaseDir;

struct StatCase {
  std::string name, kind;
  std::vector<double> a, b;
};

std::vector<StatCase> stat_cases() {
  std::vector<StatCase> cs;
  std::mt19937 g(7);
  auto draw = [&](int n, double lo, double hi, bool round) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (double& x : v) {
      x = std::uniform_real_distribution<double>(lo, hi)(g);
      if (round) x = std::round(x);
    }
    return v;
  };
  cs.push_back({"w_exact_12", "wilcoxon", draw(12, 0, 1, false), draw(12, 0, 1, false)});
  cs.push_back({"w_exact_ties", "wilcoxon", {3, 5, 2, 8, 7, 4, 9, 6, 1, 5}, {1, 3, 4, 6, 9, 2, 7, 4, 3, 2}});
  // |d| = 1, 1, 2, 3, 4, 5: R+ = 19.5, a half-integer SciPy 1.10 truncates to 19 for its exact p
  cs.push_back({"w_exact_half", "wilcoxon", {1, 0, 2, 3, 4, 5}, {0, 1, 0, 0, 0, 0}});
  cs.push_back({"w_zeros_20", "wilcoxon", draw(20, 0, 5, true), draw(20, 0, 5, true)});
  cs.push_back({"w_exact_50", "wilcoxon", draw(50, 0, 1, false), draw(50, 0.1, 1.1, false)});
  cs.push_back({"w_approx_51", "wilcoxon", draw(51, 0, 1, false), draw(51, 0.1, 1.1, false)});
  cs.push_back({"w_approx_ties_80", "wilcoxon", draw(80, 0, 9, true), draw(80, 0, 9, true)});
  // success rates of two configurations over 10 repeats (what Abyane & Hemmati compare,
  // docs/GLOSSARY.md): ties and a zero
  cs.push_back({"w_rates", "wilcoxon", {0.41, 0.43, 0.40, 0.44, 0.41, 0.42, 0.45, 0.40, 0.43, 0.42},
                {0.39, 0.43, 0.38, 0.41, 0.40, 0.40, 0.42, 0.41, 0.40, 0.39}});
  cs.push_back({"a_ties", "a12", {1, 2, 2, 3, 5}, {2, 2, 4}});
  cs.push_back({"a_rand", "a12", draw(30, 0, 1, false), draw(17, 0.2, 1.2, false)});
  cs.push_back({"a_rounded", "a12", draw(40, 0, 6, true), draw(40, 0, 6, true)});
  return cs;
}

Tensor vec(const std::vector<double>& v) { return Tensor::from<double>({static_cast<int64_t>(v.size())}, v); }

void fill_stats(CaseDir& d) {
  for (const StatCase& c : stat_cases()) {
    d.input(c.name, "a", vec(c.a));
    d.input(c.name, "b", vec(c.b));
    d.add_case({{"name", c.name}, {"kind", c.kind}});
  }
}
const CaseDir& stats_run() {
  static const CaseDir d(oracle::scipy_oracle("stats_oracle.py"), "scipy_stats", fill_stats);
  return d;
}

TEST(ScipyStats, WilcoxonAndA12EqualScipy) {
  ORACLE_GROUP(run, stats_run);
  for (const StatCase& c : stat_cases()) {
    SCOPED_TRACE(c.name);
    if (c.kind == "wilcoxon") {
      const attacks::WilcoxonResult r = attacks::wilcoxon(c.a, c.b);
      const double ts = run.out_scalar(c.name, "statistic"), tp = run.out_scalar(c.name, "pvalue");
      std::cout << c.name << ": " << r.method << " n=" << r.n << " zeros=" << r.zeros << (r.ties ? " ties" : "")
                << "  T " << r.statistic << " | scipy " << ts << "  p " << std::setprecision(17) << r.pvalue
                << " | scipy " << tp << std::setprecision(6) << "\n";
      EXPECT_EQ(r.statistic, ts);
      if (r.method == "exact") {
        EXPECT_EQ(r.pvalue, tp);
      } else {
        EXPECT_NEAR(r.pvalue, tp, 1e-14 * tp);
      }
    } else {
      const double a = attacks::a12(c.a, c.b), ta = run.out_scalar(c.name, "a12");
      std::cout << c.name << ": A12 " << std::setprecision(17) << a << " | scipy " << ta << std::setprecision(6) << "\n";
      EXPECT_EQ(a, ta);
    }
  }
}

}  // namespace
}  // namespace driftlab
