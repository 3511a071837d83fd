#include "attacks/boundary.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <numeric>

#include "engine/core/error.h"
#include "engine/random.h"

namespace driftlab {
namespace attacks {

void BoundarySpec::validate() const {
  check(steps >= 0, "boundary: steps ", steps, " must be >= 0");
  check(max_directions >= 1, "boundary: max_directions ", max_directions, " must be >= 1");
  check(spherical_step > 0 && source_step > 0 && step_adaptation > 1, "boundary: steps must be > 0 and the "
        "adaptation > 1 (spherical ", spherical_step, ", source ", source_step, ", adaptation ", step_adaptation, ")");
  check(init_directions >= 1 && init_epsilons >= 1, "boundary: init_directions and init_epsilons must be >= 1");
  check(std::isfinite(lo) && std::isfinite(hi) && lo < hi, "boundary: input bounds [", lo, ", ", hi,
        "] must be finite with lo < hi");
}

namespace {

using Vec = std::vector<double>;

double sq_dist(const Vec& a, const Vec& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
  return s;
}
double mse(const Vec& a, const Vec& b) { return sq_dist(a, b) / static_cast<double>(a.size()); }

// Standard normals by Box-Muller from the sample's stream (both outputs used).
class Normal {
 public:
  explicit Normal(Rng& rng) : rng_(rng) {}
  double next() {
    if (have_) return have_ = false, spare_;
    const double u1 = 1.0 - rng_.uniform_f64(), u2 = rng_.uniform_f64();  // u1 in (0, 1]
    const double r = std::sqrt(-2.0 * std::log(u1)), t = 6.283185307179586 * u2;
    spare_ = r * std::sin(t), have_ = true;
    return r * std::cos(t);
  }

 private:
  Rng& rng_;
  double spare_ = 0;
  bool have_ = false;
};

// Judges float64 points: each rounded to the model's dtype, predicted in one logits() call.
class Judge {
 public:
  Judge(Runner& runner, const Shape& one, DType dtype, int32_t label)
      : runner_(runner), one_(one), dtype_(dtype), label_(label) {}
  // The predictions of the points, in order.
  std::vector<int32_t> operator()(const std::vector<const Vec*>& pts) {
    Shape s = one_;
    s[0] = static_cast<int64_t>(pts.size());
    Tensor t(s, dtype_);
    const std::size_t per = pts.empty() ? 0 : pts[0]->size();
    for (std::size_t k = 0; k < pts.size(); ++k)
      for (std::size_t e = 0; e < per; ++e) {
        if (dtype_ == DType::f32)
          t.data<float>()[k * per + e] = static_cast<float>((*pts[k])[e]);
        else
          t.data<double>()[k * per + e] = (*pts[k])[e];
      }
    return predictions(runner_.logits(t));
  }
  bool adversarial(int32_t pred) const { return pred != label_; }

 private:
  Runner& runner_;
  Shape one_;
  DType dtype_;
  int32_t label_;
};

Vec clip(Vec v, double lo, double hi) {
  for (double& e : v) e = std::min(std::max(e, lo), hi);
  return v;
}

struct SampleOut {
  Vec x;
  bool found = false;
  int32_t pred = 0;
  std::vector<double> trace;
  int64_t queries = 0;
  int steps = 0;
};

SampleOut attack_one(Judge& judge, const Vec& x0, const BoundarySpec& spec, Rng& rng) {
  SampleOut o;
  const std::size_t n = x0.size();
  // 1) the start: uniform noise until one is misclassified, then the smallest adversarial blend
  Vec noise(n);
  bool have_noise = false;
  int32_t noise_pred = -1;
  constexpr int kChunk = 32;
  for (int d0 = 0; d0 < spec.init_directions && !have_noise; d0 += kChunk) {
    const int m = std::min(kChunk, spec.init_directions - d0);
    std::vector<Vec> cand(static_cast<std::size_t>(m), Vec(n));
    std::vector<const Vec*> ptrs;
    for (auto& c : cand) {
      for (double& e : c) e = spec.lo + (spec.hi - spec.lo) * rng.uniform_f64();
      ptrs.push_back(&c);
    }
    const std::vector<int32_t> p = judge(ptrs);
    for (int k = 0; k < m; ++k) {
      ++o.queries;
      if (judge.adversarial(p[k])) {
        noise = cand[k], noise_pred = p[k], have_noise = true;
        break;
      }
    }
  }
  if (!have_noise) return o;  // no start: the attack fails (Foolbox 2 warns and returns None)
  Vec x = noise;
  int32_t pred = -1;
  for (int e0 = 1; e0 <= spec.init_epsilons && pred < 0; e0 += 2 * kChunk) {
    const int m = std::min(2 * kChunk, spec.init_epsilons - e0 + 1);
    std::vector<Vec> cand(static_cast<std::size_t>(m), Vec(n));
    std::vector<const Vec*> ptrs;
    for (int k = 0; k < m; ++k) {
      const double e = static_cast<double>(e0 + k) / spec.init_epsilons;  // linspace(0, 1, E + 1)[1:]
      for (std::size_t i = 0; i < n; ++i) cand[k][i] = (1.0 - e) * x0[i] + e * noise[i];
      ptrs.push_back(&cand[k]);
    }
    const std::vector<int32_t> p = judge(ptrs);
    for (int k = 0; k < m; ++k) {
      ++o.queries;
      if (judge.adversarial(p[k])) {
        x = cand[k], pred = p[k];
        break;
      }
    }
  }
  if (pred < 0) pred = noise_pred;  // no blend judged adversarial (rounding at e = 1): the noise itself
  o.found = true;
  double dist = sq_dist(x, x0);
  o.trace.push_back(dist / static_cast<double>(n));

  // 2) the steps
  double sph = spec.spherical_step, src = spec.source_step;
  std::deque<uint8_t> stats_sph, stats_step;
  Normal normal(rng);
  for (int step = 1; step <= spec.steps; ++step) {
    if (src < 1e-7) break;
    o.steps = step;
    const bool check_sph = step % 10 == 0;
    const double src_norm = std::sqrt(dist);
    if (src_norm == 0) break;
    std::vector<Vec> sphericals, candidates;
    for (int k = 0; k < spec.max_directions; ++k) {
      Vec d(n), eta(n);
      for (std::size_t i = 0; i < n; ++i) d[i] = (x0[i] - x[i]) / src_norm;
      for (double& e : eta) e = normal.next();
      double dot = 0;
      for (std::size_t i = 0; i < n; ++i) dot += eta[i] * d[i];
      double en = 0;
      for (std::size_t i = 0; i < n; ++i) eta[i] -= dot * d[i], en += eta[i] * eta[i];
      en = std::sqrt(en);
      const double scale = en > 0 ? sph * src_norm / en : 0.0, D = 1.0 / std::sqrt(sph * sph + 1.0);
      Vec s(n);
      for (std::size_t i = 0; i < n; ++i) s[i] = x0[i] + D * (eta[i] * scale - (x0[i] - x[i]));
      s = clip(std::move(s), spec.lo, spec.hi);
      double nn = 0;
      for (std::size_t i = 0; i < n; ++i) nn += (x0[i] - s[i]) * (x0[i] - s[i]);
      nn = std::sqrt(nn);
      double len = std::max(0.0, src * src_norm + (nn - src_norm));
      len = nn > 0 ? len / nn : 0.0;
      Vec c(n);
      for (std::size_t i = 0; i < n; ++i) c[i] = s[i] + len * (x0[i] - s[i]);
      sphericals.push_back(std::move(s));
      candidates.push_back(clip(std::move(c), spec.lo, spec.hi));
    }
    // judge them all at once, then walk them in order as Foolbox 2's loop does
    std::vector<const Vec*> ptrs;
    if (check_sph)
      for (const Vec& s : sphericals) ptrs.push_back(&s);
    for (const Vec& c : candidates) ptrs.push_back(&c);
    const std::vector<int32_t> p = judge(ptrs);
    const std::size_t off = check_sph ? sphericals.size() : 0;
    for (int k = 0; k < spec.max_directions; ++k) {
      if (check_sph) {
        ++o.queries;
        const bool sph_adv = judge.adversarial(p[k]);
        stats_sph.push_back(sph_adv);
        if (stats_sph.size() > 100) stats_sph.pop_front();
        if (!sph_adv) continue;  // a candidate is only judged where its spherical step stayed adversarial
      }
      ++o.queries;
      const int32_t cp = p[off + k];
      const bool cand_adv = judge.adversarial(cp);
      if (check_sph) {
        stats_step.push_back(cand_adv);
        if (stats_step.size() > 30) stats_step.pop_front();
      }
      if (!cand_adv) continue;
      const double nd = sq_dist(candidates[k], x0);
      if (nd < dist) {
        x = candidates[k], dist = nd, pred = cp;
        o.trace.push_back(dist / static_cast<double>(n));
        break;
      }
    }
    if (check_sph) {
      auto rate = [](const std::deque<uint8_t>& q) {
        return static_cast<double>(std::accumulate(q.begin(), q.end(), 0)) / static_cast<double>(q.size());
      };
      if (stats_sph.size() == 100) {
        const double r = rate(stats_sph);
        if (r > 0.5) sph *= spec.step_adaptation, src *= spec.step_adaptation;
        if (r < 0.2) sph /= spec.step_adaptation, src /= spec.step_adaptation;
        if (r > 0.5 || r < 0.2) stats_sph.clear();
      }
      if (stats_step.size() == 30) {
        const double r = rate(stats_step);
        if (r > 0.5) src *= spec.step_adaptation;
        if (r < 0.2) src /= spec.step_adaptation;
        if (r > 0.5 || r < 0.2) stats_step.clear();
      }
    }
  }
  o.x = std::move(x);
  o.pred = pred;
  return o;
}

}  // namespace

BoundaryResult run_boundary(Runner& runner, const Tensor& x, const std::vector<int32_t>& labels,
                            const BoundarySpec& spec) {
  spec.validate();
  check(x.rank() >= 2, "boundary: input must be (N, ...), got ", shape_str(x.shape()));
  check(x.dtype() == DType::f32 || x.dtype() == DType::f64, "boundary: input must be float32 or float64, got ",
        dtype_name(x.dtype()));
  const int64_t n = x.dim(0), per = x.numel() / std::max<int64_t>(n, 1);
  check(static_cast<int64_t>(labels.size()) == n, "boundary: ", labels.size(), " labels for ", n, " inputs");
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.at(i);
    if (!(v >= spec.lo && v <= spec.hi))  // the message is built only on failure (this runs per element)
      fail("boundary: input element ", i, " (sample ", i / per, ") is ", v, ", outside the bounds [", spec.lo, ", ",
           spec.hi, "]");
  }
  BoundaryResult r;
  r.x_adv = x.clone();
  r.clean_pred = predictions(runner.logits(x));
  r.adv_pred = r.clean_pred;
  r.success.assign(static_cast<std::size_t>(n), 0);
  r.mse.assign(static_cast<std::size_t>(n), 0.0);
  r.trace.resize(static_cast<std::size_t>(n));
  r.queries.assign(static_cast<std::size_t>(n), 1);
  r.steps_run.assign(static_cast<std::size_t>(n), 0);
  Shape one = x.shape();
  one[0] = 1;
  for (int64_t s = 0; s < n; ++s) {
    if (r.clean_pred[s] != labels[s]) {  // already misclassified: a success at distance 0
      r.success[s] = 1;
      continue;
    }
    Vec x0(static_cast<std::size_t>(per));
    for (int64_t e = 0; e < per; ++e) x0[e] = x.at(s * per + e);
    Rng rng(RngEngine::mt19937_u24, spec.seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(s + 1)));
    Judge judge(runner, one, x.dtype(), labels[s]);
    SampleOut o = attack_one(judge, x0, spec, rng);
    r.queries[s] += o.queries;
    r.steps_run[s] = o.steps;
    if (!o.found) continue;
    for (int64_t e = 0; e < per; ++e) {
      if (x.dtype() == DType::f32)
        r.x_adv.data<float>()[s * per + e] = static_cast<float>(o.x[e]);
      else
        r.x_adv.data<double>()[s * per + e] = o.x[e];
    }
    r.adv_pred[s] = o.pred;
    r.success[s] = o.pred != labels[s];
    r.mse[s] = mse(o.x, x0);
    r.trace[s] = std::move(o.trace);
  }
  return r;
}

}  // namespace attacks
}  // namespace driftlab
