// The statistics Abyane & Hemmati's mobile robustness study (docs/GLOSSARY.md) compares
// configurations with: the paired Wilcoxon signed-rank test and the Vargha-Delaney A12 effect size,
// as SciPy 1.10 (Debian 12's python3-scipy) computes them, so a result can be checked against
// scipy.stats on the same data (tests/oracles/test_stats_oracle_scipy.cpp).
//
// wilcoxon(x, y) follows scipy.stats.wilcoxon's defaults (zero_method="wilcox", correction=False,
// alternative="two-sided", method="auto"; scipy/stats/_morestats.py): d = x - y; "exact" when
// len(d) <= 50 and no d is zero, else the normal approximation with the zeros dropped; ranks of
// |d| averaged over ties; T = min(R+, R-). Exact: the null distribution of R+ over n signed ranks
// (_get_wilcoxon_distr's recursion), p = 2 min(P(R+ <= r), P(R+ >= r)) with r = int(R+) — SciPy 1.10
// truncates a tied (half-integer) R+ here and keeps the exact method although ties break its
// premise: reproduced, and flagged in the result. Approximate: z = (T - n(n+1)/4) / se with se^2 =
// (n(n+1)(2n+1) - sum_ties t(t^2-1)/2) / 24, p = 2 Phi(-|z|).
//
// a12(a, b) = (R_a - m(m+1)/2) / (m n), R_a the sum of a's ranks among a and b together (ties
// averaged): the probability that a value of a is larger than one of b, ties counting half;
// SciPy's mannwhitneyu(a, b).statistic / (m n).
#pragma once
#include <string>
#include <vector>

namespace driftlab {
namespace attacks {

struct WilcoxonResult {
  double statistic = 0;  // T = min(R+, R-)
  double pvalue = 1;
  std::string method;    // "exact" or "approx"
  int64_t n = 0;         // differences ranked (zeros dropped under "approx")
  int64_t zeros = 0;     // differences exactly zero
  bool ties = false;     // some |d| tied (under "exact": SciPy's p then rests on int(R+))
  double z = 0;          // "approx" only
};
WilcoxonResult wilcoxon(const std::vector<double>& x, const std::vector<double>& y);

double a12(const std::vector<double>& a, const std::vector<double>& b);

// The studies' min-max indicator: values[k][a] for K rows (models, or model-conversion pairs) and A
// attacks; per attack P(k, a) = (v - min_k v) / (max_k v - min_k v), or 0 where every row ties; R(k) =
// sum_a P(k, a). Guo et al.'s robustness indicator R(m) takes the success rates S_A(m) (smaller:
// more robust); Openja et al.'s variation indicator R(m, c) takes |S_conv - S_orig| per (model,
// conversion) (both in docs/GLOSSARY.md). Throws naming a ragged row or a non-finite value.
std::vector<double> min_max_indicator(const std::vector<std::vector<double>>& values);

// Ranks 1..n of v, ties given the average of the ranks they span (scipy.stats.rankdata 'average').
std::vector<double> average_ranks(const std::vector<double>& v);

}  // namespace attacks
}  // namespace driftlab
