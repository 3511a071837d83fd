#include "attacks/gradient.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "core/parallel.h"
#include "core/ops/linf_step.h"
#include "engine/random.h"

namespace driftlab {
namespace attacks {

AttackKind parse_attack_kind(const std::string& s) {
  if (s == "fgsm") return AttackKind::fgsm;
  if (s == "bim") return AttackKind::bim;
  if (s == "pgd") return AttackKind::pgd;
  fail("attack: unknown attack '", s, "' (known: fgsm, bim, pgd; decision-based: boundary, single-pixel)");
}

const char* attack_kind_name(AttackKind k) {
  switch (k) {
    case AttackKind::fgsm: return "fgsm";
    case AttackKind::bim: return "bim";
    case AttackKind::pgd: return "pgd";
  }
  return "?";
}

SuccessRule parse_success_rule(const std::string& s) {
  if (s == "label") return SuccessRule::differs_from_label;
  if (s == "clean-prediction") return SuccessRule::differs_from_clean_prediction;
  fail("attack: unknown success rule '", s, "' (label: the prediction differs from the label, Foolbox and "
       "torchattacks; clean-prediction: from the clean prediction, ART)");
}

const char* success_rule_name(SuccessRule r) {
  return r == SuccessRule::differs_from_label ? "label" : "clean-prediction";
}

RestartSelect parse_restart_select(const std::string& s) {
  if (s == "per-sample") return RestartSelect::per_sample;
  if (s == "per-run") return RestartSelect::per_run;
  fail("attack: --restart-select '", s, "' (per-sample: each sample's successful restart, ART >= 1.5; per-run: the run "
       "with the most successes, ART <= 1.4)");
}
const char* restart_select_name(RestartSelect r) { return r == RestartSelect::per_sample ? "per-sample" : "per-run"; }

Projection parse_projection(const std::string& s) {
  if (s == "clip-delta") return Projection::clip_delta;
  if (s == "max-min") return Projection::max_min;
  fail("attack: unknown projection '", s, "' (clip-delta | max-min: torchattacks' BIM)");
}

const char* projection_name(Projection p) { return p == Projection::clip_delta ? "clip-delta" : "max-min"; }

void GradientAttackSpec::validate() const {
  check(std::isfinite(lo) && std::isfinite(hi) && lo < hi, "attack: input bounds [", lo, ", ", hi,
        "] must be finite with lo < hi");
  check(std::isfinite(eps) && eps >= 0, "attack: eps ", eps, " must be finite and >= 0");
  if (kind != AttackKind::fgsm) {
    check(std::isfinite(step) && step > 0, "attack: step ", step, " must be finite and > 0");
    check(steps >= 1, "attack: steps ", steps, " must be >= 1");
  }
  check(kind == AttackKind::pgd || !random_start, "attack: random_start is PGD's (", attack_kind_name(kind), ")");
  check(kind != AttackKind::fgsm || step_units == StepUnits::like_eps,
        "attack: a step relative to eps is BIM's and PGD's (fgsm takes one step of eps)");
  if (schedule == EpsSchedule::foolbox2_sweep) {
    check(kind == AttackKind::fgsm, "attack: Foolbox 2's epsilon sweep is FGSM's (", attack_kind_name(kind),
          " runs at one eps)");
    check(sweep_epsilons >= 1, "attack: sweep epsilons ", sweep_epsilons, " must be >= 1");
    check(std::isfinite(max_epsilon) && max_epsilon > 0, "attack: max_epsilon ", max_epsilon,
          " must be finite and > 0");
  }
  if (schedule == EpsSchedule::foolbox2_search) {
    check(kind != AttackKind::fgsm, "attack: Foolbox 2's eps search is BIM's and PGD's (fgsm: the epsilon sweep)");
    check(eps > 0, "attack: Foolbox 2's eps search starts at eps > 0 (got ", eps, ")");
    check(!random_start, "attack: Foolbox 2's random start is not reproduced under its eps search (it leaves the "
          "start outside the bounds, strict=False); run PGD without --random-start");
    check(projection == Projection::clip_delta, "attack: Foolbox 2's eps search projects by clipping the "
          "perturbation (projection clip-delta, not ", projection_name(projection), ")");
  }
  check(batch >= 1, "attack: batch ", batch, " must be >= 1");
  check(restarts >= 1 && restarts <= 10000, "attack: restarts ", restarts, " must be in [1, 10000]");
  check(restarts == 1 || (kind == AttackKind::pgd && random_start && schedule == EpsSchedule::single),
        "attack: restarts are PGD's with a random start (--random-start; each restart starts from its own point "
        "of the eps-ball) at one eps");
}

namespace {

Tensor rows(const Tensor& x, int64_t start, int64_t count) {
  Shape s = x.shape();
  s[0] = count;
  Tensor out = Tensor::empty(s, x.dtype());
  const std::size_t per = x.nbytes() / static_cast<std::size_t>(x.dim(0));
  std::memcpy(out.raw(), static_cast<const unsigned char*>(x.raw()) + static_cast<std::size_t>(start) * per,
              static_cast<std::size_t>(count) * per);
  return out;
}


// Predictions in batches of `batch` (the CPU runner runs any size as one batch; this bounds memory).
std::vector<int32_t> predict(Runner& runner, const Tensor& x, int64_t batch) {
  std::vector<int32_t> out;
  for (int64_t b0 = 0; b0 < x.dim(0); b0 += batch) {
    const std::vector<int32_t> p = predictions(runner.logits(rows(x, b0, std::min(batch, x.dim(0) - b0))));
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

// The first element of x outside [lo, hi] (compared in double, NaN included), or -1.
template <typename T>
int64_t first_outside(const T* x, int64_t n, int64_t per, double lo, double hi) {
  int64_t first = INT64_MAX;
#pragma omp parallel for schedule(static) reduction(min : first) if (n * per >= kParallelMinElements)
  for (int64_t s = 0; s < n; ++s)
    for (int64_t e = s * per; e < (s + 1) * per; ++e) {
      const double v = static_cast<double>(x[e]);
      if (!(v >= lo && v <= hi)) {
        first = std::min(first, e);
        break;
      }
    }
  return first == INT64_MAX ? -1 : first;
}

// Whether the n values at g are all exactly zero (a sample whose gradient cannot move it).
template <typename T>
bool all_zero(const T* g, int64_t n) {
  for (int64_t e = 0; e < n; ++e)
    if (g[e] != T(0)) return false;
  return true;
}

// One batch of FGSM / BIM / PGD. Returns whether adv_out holds the predictions at the result (the
// device loop's judging forward); else the caller judges x_adv.
template <typename T>
bool attack_batch(Runner& runner, const GradientAttackSpec& spec, const T* x0, int64_t n, const Shape& shape,
                  const std::vector<int32_t>& target, Rng& rng, T* xa, uint8_t* zero_grad, int64_t* calls,
                  int32_t* clean_out, int32_t* adv_out) {
  const int64_t per = shape_numel(shape) / shape[0];
  const double range = spec.hi - spec.lo;
  const double eps_in = spec.units == EpsUnits::absolute ? spec.eps : spec.eps * range;
  const double step_in = spec.step_units == StepUnits::fraction_of_eps ? spec.step * eps_in
                         : spec.units == EpsUnits::absolute         ? spec.step
                                                                    : spec.step * range;
  const T eps = static_cast<T>(eps_in), step = static_cast<T>(step_in);
  const T lo = static_cast<T>(spec.lo), hi = static_cast<T>(spec.hi);
  const int64_t total = n * per;
  const bool fgsm = spec.kind == AttackKind::fgsm;
  const bool max_min = !fgsm && spec.projection == Projection::max_min;
  if (spec.random_start)
    for (int64_t i = 0; i < total; ++i) xa[i] = linf_clamp<T>(x0[i] + rng.uniform<T>(-eps, eps), lo, hi);
  const int steps = fgsm ? 1 : spec.steps;
  // Where the runner keeps the iterate on its device (Runner::linf_steps), the loop runs there with
  // the same formula and decisions, and judges the result there; else here over input_gradient().
  // (Asked of device runners only: the CPU runner has nothing to keep resident.)
  // (The device loop projects by clipping the perturbation; torchattacks' form runs here.)
  if (runner.device() != Device::cpu && spec.projection == Projection::clip_delta) {
    LinfSteps ls;
    ls.fgsm = fgsm, ls.steps = steps, ls.eps = eps_in, ls.step = step_in, ls.lo = spec.lo, ls.hi = spec.hi;
    ls.early_stop = spec.early_stop, ls.judge = true;
    LinfStepsResult res;
    if (runner.linf_steps(x0, spec.random_start ? xa : nullptr, xa, shape, DTypeOf<T>::value, target, ls, &res)) {
      *calls += steps;
      if (clean_out) {
        const std::vector<int32_t> p = predictions(res.first_logits);
        std::copy(p.begin(), p.end(), clean_out);
      }
      std::copy(res.first_zero_gradient.begin(), res.first_zero_gradient.end(), zero_grad);
      const std::vector<int32_t> p = predictions(res.last_logits);
      std::copy(p.begin(), p.end(), adv_out);
      return true;
    }
  }
  if (!spec.random_start) std::copy_n(x0, total, xa);
  std::vector<uint8_t> frozen(static_cast<std::size_t>(n), 0);
  for (int t = 0; t < steps; ++t) {
    Tensor cur = Tensor::empty(shape, DTypeOf<T>::value);  // every element written below
    std::copy_n(xa, total, cur.data<T>());
    const InputGradient g = runner.input_gradient(cur, target, Semantics::inference);
    ++*calls;
    const T* dx = g.dx.data<T>();
    if (t == 0 && clean_out) {  // the first call's logits are the clean input's (no random start)
      const std::vector<int32_t> p = predictions(g.logits);
      std::copy(p.begin(), p.end(), clean_out);
    }
    if (t == 0) {
#pragma omp parallel for schedule(static) if (total >= kParallelMinElements)
      for (int64_t s = 0; s < n; ++s) zero_grad[s] = all_zero(dx + s * per, per);
    }
    if (spec.early_stop) {  // a sample already misclassified at x_t stays where it is
      const std::vector<int32_t> pred = predictions(g.logits);
      for (int64_t s = 0; s < n; ++s) frozen[s] = frozen[s] || pred[s] != target[s];
    }
    // element by element (the same bits at any thread count)
#pragma omp parallel for schedule(static) if (total >= kParallelMinElements)
    for (int64_t s = 0; s < n; ++s) {
      if (frozen[s]) continue;
      if (max_min)
        for (int64_t e = s * per; e < (s + 1) * per; ++e) xa[e] = linf_step_max_min(x0[e], xa[e], dx[e], eps, step, lo, hi);
      else
        for (int64_t e = s * per; e < (s + 1) * per; ++e) xa[e] = linf_step(fgsm, x0[e], xa[e], dx[e], eps, step, lo, hi);
    }
  }
  return false;
}

// numpy.linspace(0, stop, num + 1)[1:]: k * (stop / num) in double, the last exactly stop.
std::vector<double> linspace_tail(double stop, int num) {
  std::vector<double> v(static_cast<std::size_t>(num));
  const double step = stop / num;
  for (int k = 1; k <= num; ++k) v[static_cast<std::size_t>(k - 1)] = k * step;
  v.back() = stop;
  return v;
}

// FGSM with Foolbox 2's epsilon sweep on one batch (gradient.h). `ref`: what a prediction must
// differ from to count as adversarial (the labels, or the clean predictions).
template <typename T>
void sweep_batch(Runner& runner, const GradientAttackSpec& spec, const T* x0, int64_t n, const Shape& shape,
                 const std::vector<int32_t>& target, const std::vector<int32_t>* ref_in, T* xa, uint8_t* zero_grad,
                 int64_t* calls, int32_t* clean_out, int64_t* queries, double* eps_found) {
  const int64_t per = shape_numel(shape) / shape[0];
  const T lo = static_cast<T>(spec.lo), hi = static_cast<T>(spec.hi);
  const T scale = static_cast<T>(spec.units == EpsUnits::absolute ? 1.0 : spec.hi - spec.lo);
  Tensor cur(shape, DTypeOf<T>::value);
  std::copy_n(x0, n * per, cur.data<T>());
  const InputGradient g = runner.input_gradient(cur, target, Semantics::inference);
  ++*calls;
  const std::vector<int32_t> clean = predictions(g.logits);
  if (clean_out) std::copy(clean.begin(), clean.end(), clean_out);
  const std::vector<int32_t>& ref = ref_in ? *ref_in : clean;
  std::vector<T> dir(static_cast<std::size_t>(n * per));
  for (int64_t e = 0; e < n * per; ++e) dir[e] = linf_sign(g.dx.data<T>()[e]) * scale;
  for (int64_t s = 0; s < n; ++s) {
    zero_grad[s] = all_zero(dir.data() + s * per, per);
    queries[s] = 1;  // the clean prediction
  }
  auto candidate = [&](int64_t s, double eps, T* out) {
    const T te = static_cast<T>(eps);
    for (int64_t e = 0; e < per; ++e) out[e] = linf_clamp<T>(x0[s * per + e] + dir[s * per + e] * te, lo, hi);
  };
  // state per sample: 0 in the first pass, 1 in the second, 2 finished
  std::vector<int> state(static_cast<std::size_t>(n), 0);
  std::vector<double> best(static_cast<std::size_t>(n), std::nan(""));
  std::vector<std::vector<double>> grid2(static_cast<std::size_t>(n));
  for (int64_t s = 0; s < n; ++s)
    if (clean[s] != ref[s]) state[s] = 2, best[s] = 0.0;  // already adversarial: distance 0
  const std::vector<double> grid1 = linspace_tail(spec.max_epsilon, spec.sweep_epsilons);
  // Judges the active samples at their own eps (k-th value of their current grid) in one batch.
  auto judge = [&](const std::vector<int64_t>& active, const std::vector<double>& eps) {
    Shape bs = shape;
    bs[0] = static_cast<int64_t>(active.size());
    Tensor b(bs, DTypeOf<T>::value);
    for (std::size_t a = 0; a < active.size(); ++a) candidate(active[a], eps[a], b.data<T>() + a * per);
    std::vector<int32_t> p;
    for (int64_t b0 = 0; b0 < bs[0]; b0 += spec.batch) {
      const int64_t m = std::min(spec.batch, bs[0] - b0);
      const std::vector<int32_t> q = predictions(runner.logits(rows(b, b0, m)));
      p.insert(p.end(), q.begin(), q.end());
    }
    for (int64_t s : active) ++queries[s];
    return p;
  };
  for (std::size_t k = 0; k < grid1.size(); ++k) {  // the first pass: every sample on grid1
    std::vector<int64_t> active;
    for (int64_t s = 0; s < n; ++s)
      if (state[s] == 0) active.push_back(s);
    if (active.empty()) break;
    const std::vector<int32_t> p = judge(active, std::vector<double>(active.size(), grid1[k]));
    for (std::size_t a = 0; a < active.size(); ++a) {
      const int64_t s = active[a];
      if (p[a] == ref[s]) continue;
      best[s] = grid1[k];
      if (k < 20) {
        state[s] = 1, grid2[s] = linspace_tail(grid1[k], 20);  // refine below the hit
      } else {
        state[s] = 2;
      }
    }
  }
  for (int64_t s = 0; s < n; ++s)
    if (state[s] == 0) state[s] = 1, grid2[s] = linspace_tail(grid1.back(), 20);  // no hit: Foolbox 2's coarse repeat
  for (int j = 0; j < 20; ++j) {  // the second pass: each sample on its own grid
    std::vector<int64_t> active;
    std::vector<double> eps;
    for (int64_t s = 0; s < n; ++s)
      if (state[s] == 1) active.push_back(s), eps.push_back(grid2[s][static_cast<std::size_t>(j)]);
    if (active.empty()) break;
    const std::vector<int32_t> p = judge(active, eps);
    for (std::size_t a = 0; a < active.size(); ++a) {
      const int64_t s = active[a];
      if (p[a] == ref[s]) continue;
      if (!(best[s] <= eps[a])) best[s] = eps[a];  // NaN (no hit before) or larger
      state[s] = 2;
    }
  }
  for (int64_t s = 0; s < n; ++s) {
    eps_found[s] = best[s];
    if (std::isnan(best[s]) || best[s] == 0.0)
      std::copy_n(x0 + s * per, per, xa + s * per);
    else
      candidate(s, best[s], xa + s * per);
  }
}

// BIM / PGD with Foolbox 2's eps search on one batch (gradient.h). `ref`: what a prediction must
// differ from to count as adversarial.
template <typename T>
void search_batch(Runner& runner, const GradientAttackSpec& spec, const T* x0, int64_t n, const Shape& shape,
                  const std::vector<int32_t>& target, const std::vector<int32_t>* ref_in, T* xa, uint8_t* zero_grad,
                  int64_t* calls, int32_t* clean_out, int64_t* queries, double* eps_found) {
  const int64_t per = shape_numel(shape) / shape[0];
  const T lo = static_cast<T>(spec.lo), hi = static_cast<T>(spec.hi);
  const double unit = spec.units == EpsUnits::absolute ? 1.0 : spec.hi - spec.lo;
  // Foolbox 2's factor = stepsize / epsilon (a step relative to eps is that ratio already)
  const double factor = spec.step_units == StepUnits::fraction_of_eps ? spec.step : spec.step / spec.eps;
  std::copy_n(x0, n * per, xa);
  Tensor x0t(shape, DTypeOf<T>::value);
  std::copy_n(x0, n * per, x0t.data<T>());
  const std::vector<int32_t> clean = predict(runner, x0t, spec.batch);
  if (clean_out) std::copy(clean.begin(), clean.end(), clean_out);
  const std::vector<int32_t>& ref = ref_in ? *ref_in : clean;
  // per sample: phase 0 the exponential search, 1 the bisection, 2 finished
  std::vector<int> phase(static_cast<std::size_t>(n), 0), tries(static_cast<std::size_t>(n), 0);
  std::vector<double> eps(static_cast<std::size_t>(n), spec.eps), good(static_cast<std::size_t>(n), 0.0),
      bad(static_cast<std::size_t>(n), 0.0), best(static_cast<std::size_t>(n), HUGE_VAL);
  for (int64_t s = 0; s < n; ++s) {
    queries[s] = 1, eps_found[s] = std::nan("");
    if (clean[s] != ref[s]) phase[s] = 2, eps_found[s] = 0.0;  // already adversarial: distance 0
  }
  // One run for every active sample at its own eps: x_0 = x, `steps` steps; an iterate judged
  // adversarial is a candidate (kept when closer than the sample's best) and, with early_stop,
  // ends the sample's run. Returns whether each active sample's run succeeded.
  auto run = [&](const std::vector<int64_t>& active) {
    const int64_t m = static_cast<int64_t>(active.size());
    std::vector<T> x(static_cast<std::size_t>(m * per)), te(static_cast<std::size_t>(m)), ts(static_cast<std::size_t>(m));
    for (int64_t a = 0; a < m; ++a) {
      std::copy_n(x0 + active[a] * per, per, x.data() + a * per);
      te[a] = static_cast<T>(eps[active[a]] * unit), ts[a] = static_cast<T>(factor * eps[active[a]] * unit);
    }
    std::vector<uint8_t> ok(static_cast<std::size_t>(m), 0), running(static_cast<std::size_t>(m), 1);
    // judges iterate x of the running samples from predictions p (in `running` order)
    auto judge = [&](const std::vector<int64_t>& idx, const std::vector<int32_t>& p) {
      for (std::size_t i = 0; i < idx.size(); ++i) {
        const int64_t a = idx[i], s = active[a];
        if (p[i] == ref[s]) continue;
        ok[a] = 1;
        if (spec.early_stop) running[a] = 0;
        double d2 = 0;
        for (int64_t e = 0; e < per; ++e) {
          const double d = static_cast<double>(x[a * per + e]) - static_cast<double>(x0[s * per + e]);
          d2 += d * d;
        }
        if (d2 < best[s]) best[s] = d2, eps_found[s] = eps[s], std::copy_n(x.data() + a * per, per, xa + s * per);
      }
    };
    for (int t = 0; t <= spec.steps; ++t) {
      std::vector<int64_t> idx;
      for (int64_t a = 0; a < m; ++a)
        if (running[a]) idx.push_back(a);
      if (idx.empty()) break;
      Shape bs = shape;
      bs[0] = static_cast<int64_t>(idx.size());
      Tensor cur(bs, DTypeOf<T>::value);
      for (std::size_t i = 0; i < idx.size(); ++i) std::copy_n(x.data() + idx[i] * per, per, cur.data<T>() + i * per);
      for (int64_t a : idx) ++queries[active[a]];
      if (t == spec.steps) {  // the last iterate: judged by a forward pass
        judge(idx, predict(runner, cur, spec.batch));
        break;
      }
      std::vector<int32_t> tgt(idx.size());
      for (std::size_t i = 0; i < idx.size(); ++i) tgt[i] = target[active[idx[i]]];
      const InputGradient g = runner.input_gradient(cur, tgt, Semantics::inference);
      ++*calls;
      if (t > 0) judge(idx, predictions(g.logits));  // x_t, the iterate after step t - 1
      const T* dx = g.dx.data<T>();
      for (std::size_t i = 0; i < idx.size(); ++i) {
        const int64_t a = idx[i], s = active[a];
        if (!running[a]) continue;  // stopped at x_t (return_early)
        if (t == 0 && tries[s] == 0 && phase[s] == 0) zero_grad[s] = all_zero(dx + i * per, per);
        for (int64_t e = 0; e < per; ++e) {  // a BIM step at this run's eps and step size
          T& v = x[a * per + e];
          v = linf_step(false, x0[s * per + e], v, dx[i * per + e], te[a], ts[a], lo, hi);
        }
      }
    }
    return ok;
  };
  for (;;) {
    std::vector<int64_t> active;
    for (int64_t s = 0; s < n; ++s)
      if (phase[s] < 2) active.push_back(s);
    if (active.empty()) break;
    const std::vector<uint8_t> ok = run(active);
    for (std::size_t a = 0; a < active.size(); ++a) {
      const int64_t s = active[a];
      ++tries[s];
      if (phase[s] == 0) {
        if (ok[a]) {
          phase[s] = 1, good[s] = eps[s], bad[s] = 0.0, tries[s] = 0;
        } else if (tries[s] == 20) {
          phase[s] = 2;  // the exponential search failed: no adversarial
        } else {
          eps[s] *= 1.5;
        }
      } else {
        (ok[a] ? good[s] : bad[s]) = eps[s];
        if (tries[s] == 20) phase[s] = 2;
      }
      if (phase[s] == 1) eps[s] = (good[s] + bad[s]) / 2;
    }
  }
}

template <typename T>
void norms(const T* x, const T* xa, int64_t per, double* l0, double* l2, double* linf) {
  double a0 = 0, a2 = 0, ai = 0;
  for (int64_t e = 0; e < per; ++e) {
    const double d = static_cast<double>(xa[e]) - static_cast<double>(x[e]);
    a0 += d != 0;
    a2 += d * d;
    ai = std::max(ai, std::fabs(d));
  }
  *l0 = a0, *l2 = std::sqrt(a2), *linf = ai;
}

}  // namespace

namespace {

// PGD with restarts (gradient.h): each restart the single run from seed + k, then one example per
// sample by spec.restart_select.
AttackResult run_restarts(Runner& runner, const Tensor& x, const std::vector<int32_t>& labels,
                          const GradientAttackSpec& spec) {
  GradientAttackSpec one = spec;
  one.restarts = 1;
  const int64_t n = x.dim(0), row = (x.numel() / std::max<int64_t>(n, 1)) * static_cast<int64_t>(dtype_size(x.dtype()));
  AttackResult best;
  int64_t best_successes = 0, calls = 0;
  for (int k = 0; k < spec.restarts; ++k) {
    one.seed = spec.seed + static_cast<uint64_t>(k);
    AttackResult rk = run_gradient_attack(runner, x, labels, one);
    calls += rk.gradient_calls;
    const int64_t successes = std::count(rk.success.begin(), rk.success.end(), uint8_t{1});
    if (k == 0) {
      best = std::move(rk);
      best.restart.assign(static_cast<std::size_t>(n), 0);
      best_successes = successes;
    } else if (spec.restart_select == RestartSelect::per_run) {
      if (successes > best_successes) {  // the whole run (its first step's zero gradients too)
        best = std::move(rk);
        best.restart.assign(static_cast<std::size_t>(n), k);
        best_successes = successes;
      }
    } else {
      for (int64_t s = 0; s < n; ++s)
        if (rk.success[s]) {
          std::memcpy(static_cast<char*>(best.x_adv.raw()) + s * row, static_cast<const char*>(rk.x_adv.raw()) + s * row,
                      static_cast<std::size_t>(row));
          best.adv_pred[s] = rk.adv_pred[s];
          best.restart[s] = k;
        }
    }
  }
  best.gradient_calls = calls;
  finish_result(x, labels, best, spec.success);
  return best;
}

}  // namespace

AttackResult run_gradient_attack(Runner& runner, const Tensor& x, const std::vector<int32_t>& labels,
                                 const GradientAttackSpec& spec) {
  spec.validate();
  if (spec.restarts > 1) return run_restarts(runner, x, labels, spec);
  check(x.rank() >= 2, "attack: input must be (N, ...), got ", shape_str(x.shape()));
  check(x.dtype() == DType::f32 || x.dtype() == DType::f64, "attack: input must be float32 or float64, got ",
        dtype_name(x.dtype()));
  const int64_t n = x.dim(0), per = x.numel() / std::max<int64_t>(n, 1);
  check(static_cast<int64_t>(labels.size()) == n, "attack: ", labels.size(), " labels for ", n, " inputs");
  const int64_t bad = x.dtype() == DType::f32 ? first_outside(x.data<float>(), n, per, spec.lo, spec.hi)
                                              : first_outside(x.data<double>(), n, per, spec.lo, spec.hi);
  if (bad >= 0)
    fail("attack: input element ", bad, " (sample ", bad / per, ") is ", x.at(bad), ", outside the bounds [", spec.lo,
         ", ", spec.hi, "]");
  AttackResult r;
  // The clean predictions: from the first gradient call's logits where that call sees the clean
  // input against the true labels (one forward pass per example saved), else up front.
  const bool clean_from_gradient = spec.labels == LabelSource::true_label && !spec.random_start;
  if (clean_from_gradient)
    r.clean_pred.assign(static_cast<std::size_t>(n), 0);
  else
    r.clean_pred = predict(runner, x, spec.batch);
  const std::vector<int32_t>& target = spec.labels == LabelSource::true_label ? labels : r.clean_pred;
  r.x_adv = Tensor::empty(x.shape(), x.dtype());
  r.zero_gradient.assign(static_cast<std::size_t>(n), 0);
  Rng rng(RngEngine::mt19937_u24, spec.seed);
  const bool sweep = spec.schedule == EpsSchedule::foolbox2_sweep, search = spec.schedule == EpsSchedule::foolbox2_search;
  if (sweep || search)
    r.queries.assign(static_cast<std::size_t>(n), 0), r.eps_found.assign(static_cast<std::size_t>(n), 0.0);
  // The device loop judges each batch's result where it ends (adv_pred filled as it goes); where
  // any batch ran the host loop, the whole result is judged below.
  std::vector<int32_t> adv(static_cast<std::size_t>(n));
  bool judged = !(sweep || search);
  for (int64_t b0 = 0; b0 < n; b0 += spec.batch) {
    const int64_t m = std::min(spec.batch, n - b0);
    Shape bs = x.shape();
    bs[0] = m;
    const std::vector<int32_t> tb(target.begin() + b0, target.begin() + b0 + m);
    if (sweep || search) {
      // adversarial: differs from the label, or (SuccessRule) from the clean prediction
      const std::vector<int32_t> lb(labels.begin() + b0, labels.begin() + b0 + m);
      const std::vector<int32_t>* ref = spec.success == SuccessRule::differs_from_label ? &lb : nullptr;
      int32_t* clean_out = clean_from_gradient ? r.clean_pred.data() + b0 : nullptr;
      // the sweep and the search take the same arguments
      auto run_schedule = [&](auto tag) {
        using T = decltype(tag);
        (search ? search_batch<T> : sweep_batch<T>)(runner, spec, x.data<T>() + b0 * per, m, bs, tb, ref,
                                                    r.x_adv.data<T>() + b0 * per, r.zero_gradient.data() + b0,
                                                    &r.gradient_calls, clean_out, r.queries.data() + b0,
                                                    r.eps_found.data() + b0);
      };
      if (x.dtype() == DType::f32)
        run_schedule(float{});
      else
        run_schedule(double{});
      continue;
    }
    auto run_batch = [&](auto tag) {
      using T = decltype(tag);
      return attack_batch<T>(runner, spec, x.data<T>() + b0 * per, m, bs, tb, rng, r.x_adv.data<T>() + b0 * per,
                             r.zero_gradient.data() + b0, &r.gradient_calls,
                             clean_from_gradient ? r.clean_pred.data() + b0 : nullptr, adv.data() + b0);
    };
    judged = (x.dtype() == DType::f32 ? run_batch(float{}) : run_batch(double{})) && judged;
  }
  r.adv_pred = judged ? std::move(adv) : predict(runner, r.x_adv, spec.batch);
  finish_result(x, labels, r, spec.success);
  return r;
}

void finish_result(const Tensor& x, const std::vector<int32_t>& labels, AttackResult& r, SuccessRule rule) {
  const int64_t n = x.dim(0), per = x.numel() / std::max<int64_t>(n, 1);
  check(r.x_adv.shape() == x.shape() && r.x_adv.dtype() == x.dtype() &&
            static_cast<int64_t>(r.adv_pred.size()) == n && static_cast<int64_t>(labels.size()) == n,
        "attack: result and input do not match");
  r.success.resize(static_cast<std::size_t>(n));
  r.l0.resize(static_cast<std::size_t>(n)), r.l2.resize(static_cast<std::size_t>(n)),
      r.linf.resize(static_cast<std::size_t>(n));
  if (r.zero_gradient.empty()) r.zero_gradient.assign(static_cast<std::size_t>(n), 0);
  const bool vs_clean = rule == SuccessRule::differs_from_clean_prediction;
  check(!vs_clean || static_cast<int64_t>(r.clean_pred.size()) == n,
        "attack: success against the clean prediction needs the clean predictions");
  // per sample (each sample's sums in element order: the same bits at any thread count)
#pragma omp parallel for schedule(static) if (x.numel() >= kParallelMinElements)
  for (int64_t s = 0; s < n; ++s) {
    r.success[s] = r.adv_pred[s] != (vs_clean ? r.clean_pred[s] : labels[s]);
    if (x.dtype() == DType::f32)
      norms(x.data<float>() + s * per, r.x_adv.data<float>() + s * per, per, &r.l0[s], &r.l2[s], &r.linf[s]);
    else
      norms(x.data<double>() + s * per, r.x_adv.data<double>() + s * per, per, &r.l0[s], &r.l2[s], &r.linf[s]);
  }
}

AttackSummary summarize(const AttackResult& r, const std::vector<uint8_t>& mask) {
  AttackSummary s;
  std::vector<double> l2s, linfs;
  for (std::size_t i = 0; i < r.success.size(); ++i) {
    if (!mask.empty() && !mask[i]) continue;
    ++s.samples;
    s.zero_gradients += r.zero_gradient[i];
    if (!r.success[i]) continue;
    ++s.successes;
    s.mean_l0 += r.l0[i], s.mean_l2 += r.l2[i], s.mean_linf += r.linf[i];
    if (!r.queries.empty()) s.mean_queries += static_cast<double>(r.queries[i]);
    l2s.push_back(r.l2[i]), linfs.push_back(r.linf[i]);
  }
  if (s.samples) s.success_rate = static_cast<double>(s.successes) / static_cast<double>(s.samples);
  if (s.successes) {
    const double k = static_cast<double>(s.successes);
    s.mean_l0 /= k, s.mean_l2 /= k, s.mean_linf /= k, s.mean_queries /= k;
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      const std::size_t h = v.size() / 2;
      return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
    };
    s.median_l2 = median(l2s), s.median_linf = median(linfs);
  }
  return s;
}

}  // namespace attacks
}  // namespace driftlab
