#include "attacks/boundary.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "engine/random.h"

namespace driftlab {
namespace attacks {

const char* boundary_rules_name(BoundaryRules r) {
  switch (r) {
    case BoundaryRules::foolbox2: return "foolbox2";
    case BoundaryRules::foolbox3: return "foolbox3";
    case BoundaryRules::art: return "art";
  }
  return "?";
}

BoundaryRules parse_boundary_rules(const std::string& name) {
  if (name == "foolbox2") return BoundaryRules::foolbox2;
  if (name == "foolbox3") return BoundaryRules::foolbox3;
  if (name == "art") return BoundaryRules::art;
  fail("boundary: unknown rules '", name, "' (foolbox2 | foolbox3 | art)");
}

BoundarySpec boundary_defaults(BoundaryRules rules) {
  BoundarySpec s;
  s.rules = rules;
  if (rules == BoundaryRules::foolbox3) {
    s.steps = 25000, s.max_directions = 1, s.step_raise = 0.25, s.step_lower = 0.1;
    s.init_epsilons = 50, s.convergence_confirm = 0, s.batch = 128, s.f64_internals = false;
  }
  if (rules == BoundaryRules::art) {
    s.max_directions = 20, s.step_adaptation = 0.667, s.init_directions = 100, s.convergence_confirm = 0;
    s.f64_internals = false;
  }
  return s;
}

void BoundarySpec::validate() const {
  check(steps >= 0, "boundary: steps ", steps, " must be >= 0");
  check(max_directions >= 1, "boundary: max_directions ", max_directions, " must be >= 1");
  const bool art = rules == BoundaryRules::art;
  check(spherical_step > 0 && source_step > 0 && (art ? step_adaptation > 0 && step_adaptation < 1 : step_adaptation > 1),
        "boundary: steps must be > 0 and the adaptation ", art ? "in (0, 1) (ART's step_adapt)" : "> 1",
        " (spherical ", spherical_step, ", source ", source_step, ", adaptation ", step_adaptation, ")");
  check(trials >= 1, "boundary: trials ", trials, " must be >= 1");
  check(step_lower >= 0 && step_lower < step_raise && step_raise <= 1, "boundary: the source step's thresholds (lower ",
        step_lower, ", raise ", step_raise, ") must satisfy 0 <= lower < raise <= 1");
  check(init_directions >= 1 && init_epsilons >= 1, "boundary: init_directions and init_epsilons must be >= 1");
  check(convergence_confirm >= 0, "boundary: convergence_confirm ", convergence_confirm, " must be >= 0");
  check(batch >= 1, "boundary: batch ", batch, " must be >= 1");
  check(std::isfinite(lo) && std::isfinite(hi) && lo < hi, "boundary: input bounds [", lo, ", ", hi,
        "] must be finite with lo < hi");
  if (rules == BoundaryRules::foolbox2) {
    check(batch == 1, "boundary: Foolbox 2's rules attack one sample at a time (batch ", batch,
          "); samples stepping together with a shared draw are Foolbox 3's");
    check(f64_internals, "boundary: Foolbox 2's rules run in float64 here (its internal_dtype=float32 is not "
          "reproduced)");
  } else if (art) {
    check(batch == 1 && convergence_confirm == 0, "boundary: ART's rules attack one sample at a time without "
          "convergence confirmation (batch ", batch, ", convergence_confirm ", convergence_confirm, ")");
  } else {
    check(max_directions == 1, "boundary: Foolbox 3's rules judge one candidate per sample and step (max_directions ",
          max_directions, "); several are Foolbox 2's");
    check(convergence_confirm == 0, "boundary: Foolbox 3 stops a sample at source_step < 1e-7 without Foolbox 2's "
          "confirmation steps (convergence_confirm ", convergence_confirm, ")");
  }
}

namespace boundary_rules {

void SuccessWindow::push(bool success) {
  q_.push_back(success);
  if (q_.size() > maxlen_) q_.pop_front();
}

double SuccessWindow::rate() const {
  std::size_t k = 0;
  for (uint8_t v : q_) k += v;
  return static_cast<double>(k) / static_cast<double>(q_.size());
}

namespace {
template <typename S>
void adapt_in(SuccessWindow& sph_w, SuccessWindow& step_w, S& sph, S& src, const BoundarySpec& spec) {
  const S a = static_cast<S>(spec.step_adaptation);
  if (sph_w.full()) {
    const double r = sph_w.rate();
    if (r > 0.5) sph *= a, src *= a;
    if (r < 0.2) sph /= a, src /= a;
    if (r > 0.5 || r < 0.2) sph_w.clear();
  }
  if (step_w.full()) {
    const double r = step_w.rate();
    if (r > spec.step_raise) src *= a;
    if (r < spec.step_lower) src /= a;
    if (r > spec.step_raise || r < spec.step_lower) step_w.clear();
  }
}
}  // namespace

void adapt(SuccessWindow& spherical, SuccessWindow& step, double& sph, double& src, const BoundarySpec& spec) {
  adapt_in(spherical, step, sph, src, spec);
}
void adapt(SuccessWindow& spherical, SuccessWindow& step, float& sph, float& src, const BoundarySpec& spec) {
  adapt_in(spherical, step, sph, src, spec);
}

bool Convergence::stop(double& sph, double& src) {
  // Foolbox 2's has_converged: strict (< 1e-7) until the confirmation counts down, then < 2e-7
  const bool converged = remaining_ == confirm_ ? src < 1e-7 : src < 2e-7;
  if (converged && confirm_ == 0) return true;
  if (converged) {
    if (resetted_) return --remaining_ == 0;
    resetted_ = true;
    sph = 1e-2, src = 1e-2;  // Foolbox 2 resets to the literal 1e-2, whatever the initial steps were
  } else if (remaining_ < confirm_) {  // left convergence while confirming: start over
    remaining_ = confirm_;
    resetted_ = false;
  }
  return false;
}

}  // namespace boundary_rules

namespace {

using boundary_rules::SuccessWindow;
using boundary_rules::adapt;
using Vec = std::vector<double>;

// The squared L2 distance of two points of n elements, in float64 whatever their dtype (every rule
// set's accept test and trace).
template <typename A, typename B>
double sq_dist(const A* a, const B* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    s += d * d;
  }
  return s;
}
double sq_dist(const Vec& a, const Vec& b) { return sq_dist(a.data(), b.data(), static_cast<int64_t>(a.size())); }

// Foolbox 2's and ART's per-sample stream.
Rng sample_rng(const BoundarySpec& spec, int64_t s) {
  return Rng(RngEngine::mt19937_u24, spec.seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(s + 1)));
}


// The predictions of `count` points stored row after row in `pts`, each rounded to the model's dtype,
// in one logits() call.
template <typename T>
std::vector<int32_t> judge_rows(Runner& runner, const Shape& one, DType dtype, const T* pts, int64_t count) {
  Shape s = one;
  s[0] = count;
  Tensor t(s, dtype);
  const int64_t total = t.numel();
  if (dtype == DType::f32) {
    float* d = t.data<float>();
    for (int64_t i = 0; i < total; ++i) d[i] = static_cast<float>(pts[i]);
  } else {
    double* d = t.data<double>();
    for (int64_t i = 0; i < total; ++i) d[i] = static_cast<double>(pts[i]);
  }
  return predictions(runner.logits(t));
}

struct SampleOut {
  Vec x;
  bool found = false;
  int32_t pred = 0;
  std::vector<double> trace;
  int64_t queries = 0;
  int steps = 0;
};

// Foolbox 2's rules for one sample (float64 throughout).
class Judge {
 public:
  Judge(Runner& runner, const Shape& one, DType dtype, int32_t label)
      : runner_(runner), one_(one), dtype_(dtype), label_(label) {}
  std::vector<int32_t> operator()(const std::vector<const Vec*>& pts) {
    const std::size_t per = pts.empty() ? 0 : pts[0]->size();
    buf_.resize(pts.size() * per);
    for (std::size_t k = 0; k < pts.size(); ++k) std::copy(pts[k]->begin(), pts[k]->end(), buf_.begin() + k * per);
    return judge_rows(runner_, one_, dtype_, buf_.data(), static_cast<int64_t>(pts.size()));
  }
  bool adversarial(int32_t pred) const { return pred != label_; }

 private:
  Runner& runner_;
  Shape one_;
  DType dtype_;
  int32_t label_;
  Vec buf_;
};

Vec clip(Vec v, double lo, double hi) {
  for (double& e : v) e = std::min(std::max(e, lo), hi);
  return v;
}

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
      noise = cand[k];  // Foolbox 2 keeps the last draw when none is adversarial, warns, and blends it anyway
      if (judge.adversarial(p[k])) {
        noise_pred = p[k], have_noise = true;
        break;
      }
    }
  }
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
  if (pred < 0 && !have_noise) return o;  // no start: the attack fails (Foolbox 2 returns None)
  if (pred < 0) pred = noise_pred;  // no blend judged adversarial (rounding at e = 1): the noise itself
  o.found = true;
  double dist = sq_dist(x, x0);
  o.trace.push_back(dist / static_cast<double>(n));
  // What Foolbox 2 returns: its Adversarial object's closest adversarial point among everything
  // judged (spherical points too, which clipping can put strictly closer), not the walk's x.
  Vec best = x;
  double best_dist = dist;
  int32_t best_pred = pred;
  auto offer = [&](const Vec& pt, double d, int32_t pr) {
    if (!(d < best_dist)) return;
    best = pt, best_dist = d, best_pred = pr;
    o.trace.push_back(d / static_cast<double>(n));
  };

  // 2) the steps
  double sph = spec.spherical_step, src = spec.source_step;
  SuccessWindow stats_sph(100), stats_step(30);
  ZigguratNormal normal(rng);
  boundary_rules::Convergence convergence(spec.convergence_confirm);
  for (int step = 1; step <= spec.steps; ++step) {
    if (convergence.stop(sph, src)) break;
    o.steps = step;
    const bool check_sph = step % 10 == 0 || convergence.confirming();
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
    // judge them all at once, then walk them in order as Foolbox 2's loop does (batch_size 1):
    // the first adversarial candidate ends the search and is taken where strictly closer
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
        stats_sph.push(sph_adv);
        if (!sph_adv) continue;  // a candidate is only judged where its spherical step stayed adversarial
        offer(sphericals[k], sq_dist(sphericals[k], x0), p[k]);
      }
      ++o.queries;
      const int32_t cp = p[off + k];
      const bool cand_adv = judge.adversarial(cp);
      if (check_sph) stats_step.push(cand_adv);
      if (!cand_adv) continue;
      const double nd = sq_dist(candidates[k], x0);
      if (nd < dist) {  // otherwise Foolbox 2 warns of a numerical inconsistency and keeps x
        x = candidates[k], dist = nd;
        offer(x, nd, cp);
      }
      break;
    }
    adapt(stats_sph, stats_step, sph, src, spec);
  }
  o.x = std::move(best);
  o.pred = best_pred;
  return o;
}

// Foolbox 3's rules for one batch of samples in the arithmetic type T (the input's dtype, or
// double). x0: B rows of n; out: one result per row.
template <typename T>
void attack_batch(Runner& runner, const Shape& one, DType dtype, const std::vector<T>& x0,
                  const std::vector<int32_t>& labels, int64_t n, const BoundarySpec& spec, Rng& rng,
                  std::vector<SampleOut>& out) {
  const int64_t B = static_cast<int64_t>(labels.size());
  const std::size_t un = static_cast<std::size_t>(n);
  out.assign(static_cast<std::size_t>(B), SampleOut{});
  int64_t calls = 0;  // judge calls of the batch: each is one query for every sample in it
  auto judge = [&](const std::vector<T>& pts, int64_t rows) {
    ++calls;
    return judge_rows(runner, one, dtype, pts.data(), rows);
  };
  auto row = [&](std::vector<T>& v, int64_t b) { return v.data() + b * n; };
  const T lo = static_cast<T>(spec.lo), hi = static_cast<T>(spec.hi);

  // 1) the start: uniform noise for the whole batch until every sample has an adversarial one
  std::vector<T> noise(static_cast<std::size_t>(B) * un), draw(noise.size());
  std::vector<uint8_t> have(static_cast<std::size_t>(B), 0);
  for (int j = 0; j < spec.init_directions; ++j) {
    for (T& e : draw) e = rng.uniform<T>(lo, hi);
    const std::vector<int32_t> p = judge(draw, B);
    bool all = true;
    for (int64_t b = 0; b < B; ++b) {
      if (!have[b]) {
        std::copy(row(draw, b), row(draw, b) + n, row(noise, b));
        have[b] = p[b] != labels[b];
      }
      all = all && have[b];
    }
    if (all) break;
  }
  // then the smallest adversarial blend on linspace(0, 1, E + 1) (float32, as Foolbox 3's grid)
  std::vector<T> best_e(static_cast<std::size_t>(B), T(1)), x(noise.size());
  for (int k = 0; k <= spec.init_epsilons; ++k) {
    const T e = static_cast<T>(static_cast<float>(static_cast<double>(k) / spec.init_epsilons));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < n; ++i) row(x, b)[i] = (T(1) - e) * x0[b * n + i] + e * row(noise, b)[i];
    const std::vector<int32_t> p = judge(x, B);
    bool all = true;
    for (int64_t b = 0; b < B; ++b) {
      if (p[b] != labels[b]) best_e[b] = std::min(best_e[b], e);
      all = all && best_e[b] < T(1);
    }
    if (all) break;
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i)
      row(x, b)[i] = (T(1) - best_e[b]) * x0[b * n + i] + best_e[b] * row(noise, b)[i];
  std::vector<int32_t> pred = judge(x, B);  // Foolbox 3 checks its start before the steps
  std::vector<double> dist(static_cast<std::size_t>(B));
  auto sq_dist_row = [&](const T* a, int64_t b) { return sq_dist(x0.data() + b * n, a, n); };
  for (int64_t b = 0; b < B; ++b) {
    out[b].found = pred[b] != labels[b];
    dist[b] = sq_dist_row(row(x, b), b);
    if (out[b].found) out[b].trace.push_back(dist[b] / static_cast<double>(n));
  }

  // 2) the steps (samples without a start take no part: Foolbox 3 would have raised)
  std::vector<int64_t> live;
  for (int64_t b = 0; b < B; ++b)
    if (out[b].found) live.push_back(b);
  const int64_t L = static_cast<int64_t>(live.size());
  const int64_t calls_at_start = calls;
  std::vector<T> sph(static_cast<std::size_t>(L), static_cast<T>(spec.spherical_step));
  std::vector<T> src(static_cast<std::size_t>(L), static_cast<T>(spec.source_step));
  std::vector<SuccessWindow> stats_sph(static_cast<std::size_t>(L), SuccessWindow(100));
  std::vector<SuccessWindow> stats_step(static_cast<std::size_t>(L), SuccessWindow(30));
  std::vector<T> cand(static_cast<std::size_t>(L) * un), sphc(cand.size()), eta(un), u(un), e_b(un);
  std::vector<double> src_norm(static_cast<std::size_t>(L));
  std::vector<uint8_t> converged(static_cast<std::size_t>(L));
  ZigguratNormal normal(rng);
  constexpr double kConverged = 1e-7;  // Foolbox 3's source_step_convergance
  int steps_run = 0;
  for (int step = 1; step <= spec.steps && L > 0; ++step) {
    bool all = true;
    for (int64_t l = 0; l < L; ++l) {
      converged[l] = src[l] < static_cast<T>(kConverged);
      all = all && converged[l];
    }
    if (all) break;
    steps_run = step;
    const bool check_sph = step % 10 == 0;
    for (T& e : eta) e = static_cast<T>(normal.next());  // one draw shared by the batch
    for (int64_t l = 0; l < L; ++l) {
      const int64_t b = live[l];
      const T* o0 = x0.data() + b * n;
      const T* xb = row(x, b);
      double nn = 0;
      for (int64_t i = 0; i < n; ++i) u[i] = o0[i] - xb[i], nn += static_cast<double>(u[i]) * u[i];
      src_norm[l] = std::sqrt(nn);
      const T norm = static_cast<T>(src_norm[l]);
      double dot = 0;  // <eta, u / |u|>
      for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(eta[i]) * (u[i] / norm);
      double en = 0;
      for (int64_t i = 0; i < n; ++i) {
        e_b[i] = eta[i] - static_cast<T>(dot) * (u[i] / norm);
        en += static_cast<double>(e_b[i]) * e_b[i];
      }
      const T scale = sph[l] * norm / static_cast<T>(std::sqrt(en));
      const T D = std::sqrt(sph[l] * sph[l] + T(1));
      T* s = sphc.data() + l * n;
      double sn = 0;
      for (int64_t i = 0; i < n; ++i) {
        s[i] = std::min(std::max(o0[i] + (e_b[i] * scale - u[i]) / D, lo), hi);
        const double d = static_cast<double>(o0[i] - s[i]);
        sn += d * d;
      }
      const T new_norm = static_cast<T>(std::sqrt(sn));
      T len = std::max(src[l] * norm + new_norm - norm, T(0)) / new_norm;
      T* c = cand.data() + l * n;
      for (int64_t i = 0; i < n; ++i) c[i] = std::min(std::max(s[i] + len * (o0[i] - s[i]), lo), hi);
    }
    const std::vector<int32_t> p = judge(cand, L);
    std::vector<int32_t> ps;
    if (check_sph) ps = judge(sphc, L);
    for (int64_t l = 0; l < L; ++l) {
      const int64_t b = live[l];
      const bool adv = p[l] != labels[b];
      if (check_sph) stats_sph[l].push(ps[l] != labels[b]), stats_step[l].push(adv);
      const T* c = cand.data() + l * n;
      if (!converged[l] && adv) {
        const double nd = sq_dist_row(c, b);
        if (nd < dist[b]) {  // Foolbox 3: |x0 - candidate| < |x0 - x|, here in float64 on the points as held
          std::copy(c, c + n, row(x, b));
          dist[b] = nd, pred[b] = p[l];
          out[b].trace.push_back(nd / static_cast<double>(n));
        }
      }
      if (check_sph) adapt(stats_sph[l], stats_step[l], sph[l], src[l], spec);
    }
  }
  for (int64_t b = 0; b < B; ++b) {
    SampleOut& o = out[b];
    o.queries = o.found ? calls : calls_at_start;
    o.steps = o.found ? steps_run : 0;
    if (!o.found) continue;
    o.pred = pred[b];
    o.x.assign(row(x, b), row(x, b) + n);
  }
}

// ART's rules for one sample in the arithmetic type T (the input's dtype, as ART's float32).
template <typename T>
SampleOut attack_one_art(Runner& runner, const Shape& one, DType dtype, const std::vector<T>& x0, int32_t label,
                         const BoundarySpec& spec, Rng& rng) {
  SampleOut o;
  const int64_t n = static_cast<int64_t>(x0.size());
  const T lo = static_cast<T>(spec.lo), hi = static_cast<T>(spec.hi);
  auto predict = [&](const std::vector<T>& pts, int64_t rows) { return judge_rows(runner, one, dtype, pts.data(), rows); };
  auto sq_dist_to_x0 = [&](const T* p) { return sq_dist(x0.data(), p, n); };
  auto clip = [&](T v) { return std::min(std::max(v, lo), hi); };
  // 1) the start: the first misclassified uniform image (ART judges one per call and uses it as it
  // is); drawn in chunks here, the queries counted as ART spends them
  std::vector<T> x(static_cast<std::size_t>(n));
  constexpr int kChunk = 32;
  for (int d0 = 0; d0 < spec.init_directions && !o.found; d0 += kChunk) {
    const int m = std::min(kChunk, spec.init_directions - d0);
    std::vector<T> cand(static_cast<std::size_t>(m * n));
    for (T& e : cand) e = rng.uniform<T>(lo, hi);
    const std::vector<int32_t> p = predict(cand, m);
    for (int k = 0; k < m && !o.found; ++k) {
      ++o.queries;
      if (p[k] != label) {
        std::copy(cand.begin() + k * n, cand.begin() + (k + 1) * n, x.begin());
        o.found = true, o.pred = p[k];
      }
    }
  }
  if (!o.found) return o;  // ART warns and returns the input
  double dist = sq_dist_to_x0(x.data());
  o.trace.push_back(dist / static_cast<double>(n));

  // 2) the iterations
  const int m = spec.max_directions;
  const double a = spec.step_adaptation;  // ART's step sizes are Python floats (float64)
  double delta_d = spec.spherical_step, eps_d = spec.source_step;
  auto adapt_one = [&](double& step, double rate) {  // ART's trust region: < 0.2 shrinks, > 0.5 grows
    if (rate < 0.2)
      step *= a;
    else if (rate > 0.5)
      step /= a;
  };
  std::vector<T> props(static_cast<std::size_t>(m * n)), eta(static_cast<std::size_t>(n)), dir(eta.size());
  std::vector<T> advs, cands;
  std::vector<int32_t> adv_preds;
  ZigguratNormal normal(rng);
  for (int it = 1; it <= spec.steps; ++it) {
    o.steps = it;
    // the orthogonal step: rounds of m proposals until one is adversarial
    const T norm = static_cast<T>(std::sqrt(dist));
    for (int64_t i = 0; i < n; ++i) dir[i] = (x0[i] - x[i]) / norm;
    advs.clear(), adv_preds.clear();
    for (int t = 0; t < spec.trials && advs.empty(); ++t) {
      const T delta = static_cast<T>(delta_d), h = static_cast<T>(std::sqrt(1.0 + delta_d * delta_d));
      for (int k = 0; k < m; ++k) {
        double en = 0;
        for (T& e : eta) e = static_cast<T>(normal.next()), en += static_cast<double>(e) * e;
        const T scale = delta * norm / static_cast<T>(std::sqrt(en));  // normalised, then delta |x0 - x|
        double dot = 0;
        for (int64_t i = 0; i < n; ++i) eta[i] *= scale, dot += static_cast<double>(eta[i]) * dir[i];
        T* p = props.data() + k * n;
        for (int64_t i = 0; i < n; ++i) {
          const T e = eta[i] - static_cast<T>(dot) * dir[i];
          p[i] = clip(x[i] + ((T(1) - h) * (x[i] - x0[i]) + e) / h);
        }
      }
      const std::vector<int32_t> pr = predict(props, m);
      o.queries += m;
      int hits = 0;
      for (int k = 0; k < m; ++k)
        if (pr[k] != label) {
          ++hits;
          advs.insert(advs.end(), props.begin() + k * n, props.begin() + (k + 1) * n);
          adv_preds.push_back(pr[k]);
        }
      adapt_one(delta_d, static_cast<double>(hits) / m);
    }
    if (advs.empty()) break;  // ART: "Adversarial example found but not optimal", x returned
    // the step towards x0: every adversarial proposal moved by eps, until one stays adversarial
    const int64_t na = static_cast<int64_t>(adv_preds.size());
    int64_t best = -1;
    std::vector<int32_t> best_from;  // predictions of the points `best` indexes
    const std::vector<T>* best_pts = &advs;
    for (int t = 0; t < spec.trials && best < 0; ++t) {
      cands.resize(advs.size());
      const T eps = static_cast<T>(eps_d);
      for (int64_t j = 0; j < na; ++j)
        for (int64_t i = 0; i < n; ++i) {
          const T v = advs[j * n + i];
          cands[j * n + i] = clip(v + eps * (x0[i] - v));
        }
      const std::vector<int32_t> pr = predict(cands, na);
      o.queries += na;
      int hits = 0;
      double best_d = 0;
      for (int64_t j = 0; j < na; ++j) {
        if (pr[j] == label) continue;
        ++hits;
        const double d = sq_dist_to_x0(cands.data() + j * n);
        if (best < 0 || d < best_d) best = j, best_d = d;  // numpy argmin: the first of equals
      }
      adapt_one(eps_d, static_cast<double>(hits) / static_cast<double>(na));
      if (best >= 0) best_from = pr, best_pts = &cands;
    }
    const bool moved = best >= 0;
    if (!moved) {  // ART returns the closest adversarial proposal of the orthogonal step and stops
      double best_d = 0;
      for (int64_t j = 0; j < na; ++j) {
        const double d = sq_dist_to_x0(advs.data() + j * n);
        if (best < 0 || d < best_d) best = j, best_d = d;
      }
      best_from = adv_preds;
    }
    std::copy(best_pts->begin() + best * n, best_pts->begin() + (best + 1) * n, x.begin());
    o.pred = best_from[static_cast<std::size_t>(best)];
    dist = sq_dist_to_x0(x.data());
    o.trace.push_back(dist / static_cast<double>(n));
    if (!moved) break;
  }
  o.x.assign(x.begin(), x.end());
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
  auto take = [&](int64_t s, SampleOut& o) {
    r.queries[s] += o.queries;
    r.steps_run[s] = o.steps;
    if (!o.found) return;
    for (int64_t e = 0; e < per; ++e) {
      if (x.dtype() == DType::f32)
        r.x_adv.data<float>()[s * per + e] = static_cast<float>(o.x[e]);
      else
        r.x_adv.data<double>()[s * per + e] = o.x[e];
    }
    r.adv_pred[s] = o.pred;
    r.success[s] = o.pred != labels[s];
    r.mse[s] = o.trace.back();  // every rule set's trace ends with the returned point's MSE
    r.trace[s] = std::move(o.trace);
  };
  // an input the model already misclassifies is a success at distance 0 (one query: the clean one)
  std::vector<int64_t> todo;
  for (int64_t s = 0; s < n; ++s) {
    if (r.clean_pred[s] != labels[s])
      r.success[s] = 1;
    else
      todo.push_back(s);
  }
  if (spec.rules == BoundaryRules::foolbox2) {
    for (int64_t s : todo) {
      Vec x0(static_cast<std::size_t>(per));
      for (int64_t e = 0; e < per; ++e) x0[e] = x.at(s * per + e);
      Rng rng = sample_rng(spec, s);
      Judge judge(runner, one, x.dtype(), labels[s]);
      SampleOut o = attack_one(judge, x0, spec, rng);
      take(s, o);
    }
    return r;
  }
  const bool f32 = x.dtype() == DType::f32 && !spec.f64_internals;
  if (spec.rules == BoundaryRules::art) {
    for (int64_t s : todo) {
      Rng rng = sample_rng(spec, s);
      SampleOut o;
      dispatch_dtype(f32 ? DType::f32 : DType::f64, [&](auto tag) {
        using T = decltype(tag);
        std::vector<T> x0(static_cast<std::size_t>(per));
        for (int64_t e = 0; e < per; ++e) x0[e] = static_cast<T>(x.at(s * per + e));
        o = attack_one_art<T>(runner, one, x.dtype(), x0, labels[s], spec, rng);
      });
      take(s, o);
    }
    return r;
  }
  for (std::size_t b0 = 0, k = 0; b0 < todo.size(); b0 += static_cast<std::size_t>(spec.batch), ++k) {
    const std::size_t b1 = std::min(todo.size(), b0 + static_cast<std::size_t>(spec.batch));
    std::vector<int32_t> yb;
    for (std::size_t i = b0; i < b1; ++i) yb.push_back(labels[todo[i]]);
    Rng rng(RngEngine::mt19937_u24, spec.seed ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(k + 1)));
    std::vector<SampleOut> outs;
    dispatch_dtype(f32 ? DType::f32 : DType::f64, [&](auto tag) {
      using T = decltype(tag);
      std::vector<T> x0;
      x0.reserve((b1 - b0) * static_cast<std::size_t>(per));
      for (std::size_t i = b0; i < b1; ++i)
        for (int64_t e = 0; e < per; ++e) x0.push_back(static_cast<T>(x.at(todo[i] * per + e)));
      attack_batch<T>(runner, one, x.dtype(), x0, yb, per, spec, rng, outs);
    });
    for (std::size_t i = b0; i < b1; ++i) take(todo[i], outs[i - b0]);
  }
  return r;
}

}  // namespace attacks
}  // namespace driftlab
