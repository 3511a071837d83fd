#include "attacks/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace driftlab {
namespace attacks {

std::vector<double> average_ranks(const std::vector<double>& v) {
  const std::size_t n = v.size();
  std::vector<std::size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(n);
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    while (j < n && v[idx[j]] == v[idx[i]]) ++j;
    const double avg = 0.5 * (static_cast<double>(i + 1) + static_cast<double>(j));  // ranks i+1..j
    for (std::size_t k = i; k < j; ++k) r[idx[k]] = avg;
    i = j;
  }
  return r;
}

namespace {

// numpy's pairwise summation of a float64 array (np.add.reduce: blocks of 8 partial sums up to 128
// elements, halves above), the order SciPy's p-value sums are formed in.
double pairwise_sum(const double* a, std::size_t n) {
  if (n < 8) {
    double s = 0.;  // numpy starts its short loop at -0.0 only for sums of no element; 0. here
    for (std::size_t i = 0; i < n; ++i) s += a[i];
    return s;
  }
  if (n <= 128) {
    double r[8];
    for (int k = 0; k < 8; ++k) r[k] = a[k];
    std::size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (int k = 0; k < 8; ++k) r[k] += a[i + k];
    double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) s += a[i];
    return s;
  }
  std::size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

// np.sum of a slice: numpy's reduction takes the first element as its start and adds the pairwise
// sum of the rest.
double numpy_sum(const std::vector<double>& v, std::size_t begin, std::size_t end) {
  if (begin >= end) return 0.0;
  return v[begin] + pairwise_sum(v.data() + begin + 1, end - begin - 1);
}

// P(R+ = k), k = 0..n(n+1)/2, for n signed ranks (each sign 1/2): SciPy's recursion.
std::vector<double> signed_rank_pmf(int64_t n) {
  std::vector<double> c{1.0};
  for (int64_t k = 1; k <= n; ++k) {
    std::vector<double> next(static_cast<std::size_t>(k * (k + 1) / 2 + 1), 0.0);
    const std::size_t m = c.size(), off = next.size() - m;
    for (std::size_t i = 0; i < m; ++i) next[i] = c[i] * 0.5;
    for (std::size_t i = 0; i < m; ++i) next[off + i] += c[i] * 0.5;
    c.swap(next);
  }
  return c;
}

// 2 * scipy.stats.norm.sf(|z|): cephes' ndtr(-|z|) branch structure with the C library's erf/erfc.
double two_sided_normal_p(double z) {
  const double x = -std::fabs(z) * 0.70710678118654752440;  // a * NPY_SQRT1_2
  const double ax = std::fabs(x);
  double y;
  if (ax < 0.70710678118654752440)
    y = 0.5 + 0.5 * std::erf(x);
  else
    y = 0.5 * std::erfc(ax);  // x <= 0: no 1 - y
  return 2.0 * y;
}

}  // namespace

WilcoxonResult wilcoxon(const std::vector<double>& x, const std::vector<double>& y) {
  check(x.size() == y.size(), "wilcoxon: ", x.size(), " and ", y.size(), " values: the test pairs them");
  check(!x.empty(), "wilcoxon: no pairs");
  std::vector<double> d(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    d[i] = x[i] - y[i];
    if (!std::isfinite(d[i])) fail("wilcoxon: pair ", i, " gives a difference of ", d[i]);
  }
  WilcoxonResult r;
  r.method = d.size() <= 50 ? "exact" : "approx";
  r.zeros = std::count(d.begin(), d.end(), 0.0);
  if (r.zeros > 0) r.method = "approx";
  if (r.method == "approx") {
    check(r.zeros < static_cast<int64_t>(d.size()), "wilcoxon: every difference is zero (SciPy refuses it too)");
    d.erase(std::remove(d.begin(), d.end(), 0.0), d.end());
  }
  r.n = static_cast<int64_t>(d.size());
  std::vector<double> ad(d.size());
  for (std::size_t i = 0; i < d.size(); ++i) ad[i] = std::fabs(d[i]);
  const std::vector<double> rk = average_ranks(ad);
  double rp = 0, rm = 0;  // half-integers: exact in any order
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (d[i] > 0) rp += rk[i];
    if (d[i] < 0) rm += rk[i];
  }
  r.statistic = std::min(rp, rm);
  // ties: groups of equal ranks
  std::vector<double> sorted = rk;
  std::sort(sorted.begin(), sorted.end());
  double tie_term = 0;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i + 1;
    while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
    const double t = static_cast<double>(j - i);
    if (j - i > 1) r.ties = true, tie_term += t * (t * t - 1);
    i = j;
  }
  const double n = static_cast<double>(r.n);
  if (r.method == "approx") {
    const double mn = n * (n + 1.) * 0.25;
    double se = n * (n + 1.) * (2. * n + 1.);
    se -= 0.5 * tie_term;
    se = std::sqrt(se / 24);
    r.z = (r.statistic - mn) / se;
    r.pvalue = two_sided_normal_p(r.z);
  } else {
    const std::vector<double> pmf = signed_rank_pmf(r.n);
    const auto ri = static_cast<std::size_t>(rp);  // int(r_plus): truncates a tied half-integer
    if (ri == (pmf.size() - 1) / 2) {
      r.pvalue = 1.0;
    } else {
      const double p_less = numpy_sum(pmf, 0, ri + 1), p_greater = numpy_sum(pmf, ri, pmf.size());
      r.pvalue = std::min(1.0, std::max(0.0, 2 * std::min(p_greater, p_less)));
    }
  }
  return r;
}

double a12(const std::vector<double>& a, const std::vector<double>& b) {
  check(!a.empty() && !b.empty(), "a12: both groups need values (", a.size(), ", ", b.size(), ")");
  std::vector<double> all(a);
  all.insert(all.end(), b.begin(), b.end());
  for (std::size_t i = 0; i < all.size(); ++i)
    if (!std::isfinite(all[i])) fail("a12: value ", i, " is ", all[i]);
  const std::vector<double> r = average_ranks(all);
  double ra = 0;
  for (std::size_t i = 0; i < a.size(); ++i) ra += r[i];
  const double m = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  return (ra - m * (m + 1) / 2) / (m * nb);
}

std::vector<double> min_max_indicator(const std::vector<std::vector<double>>& values) {
  check(!values.empty(), "indicator: no rows");
  const std::size_t attacks = values[0].size();
  std::vector<double> r(values.size(), 0.0);
  for (std::size_t k = 0; k < values.size(); ++k) {
    check(values[k].size() == attacks, "indicator: row ", k, " has ", values[k].size(), " attacks, row 0 ", attacks);
    for (std::size_t a = 0; a < attacks; ++a)
      if (!std::isfinite(values[k][a])) fail("indicator: row ", k, " attack ", a, " is ", values[k][a]);
  }
  for (std::size_t a = 0; a < attacks; ++a) {
    double lo = values[0][a], hi = values[0][a];
    for (const auto& row : values) lo = std::min(lo, row[a]), hi = std::max(hi, row[a]);
    if (!(lo < hi)) continue;  // every row ties: P = 0
    for (std::size_t k = 0; k < values.size(); ++k) r[k] += (values[k][a] - lo) / (hi - lo);
  }
  return r;
}

}  // namespace attacks
}  // namespace driftlab
