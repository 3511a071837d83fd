#include "attacks/robustness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "core/error.h"

namespace driftlab {
namespace attacks {

namespace {

Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& idx) {
  Shape s = x.shape();
  s[0] = static_cast<int64_t>(idx.size());
  Tensor out = Tensor::empty(s, x.dtype());
  const std::size_t per = x.nbytes() / static_cast<std::size_t>(x.dim(0));
  for (std::size_t i = 0; i < idx.size(); ++i)
    std::memcpy(static_cast<unsigned char*>(out.raw()) + i * per,
                static_cast<const unsigned char*>(x.raw()) + static_cast<std::size_t>(idx[i]) * per, per);
  return out;
}

}  // namespace

RobustnessTable run_robustness(const std::vector<RobustnessModel>& models, const std::vector<RobustnessAttack>& attacks,
                               const Tensor& x, const std::vector<int32_t>& labels, int repeats, uint64_t seed,
                               int64_t max_samples) {
  check(!models.empty() && !attacks.empty(), "robustness: needs at least one model and one attack");
  check(repeats >= 1, "robustness: repeats ", repeats, " must be >= 1");
  check(x.rank() >= 2 && x.dim(0) == static_cast<int64_t>(labels.size()), "robustness: ", labels.size(),
        " labels for inputs of shape ", shape_str(x.shape()));
  for (std::size_t m = 0; m < models.size(); ++m) {
    check(models[m].runner != nullptr, "robustness: model ", models[m].name, " has no runner");
    const int c = models[m].craft_on;
    check(c >= -1 && c < static_cast<int>(models.size()) && c != static_cast<int>(m) &&
              (c < 0 || models[static_cast<std::size_t>(c)].craft_on < 0),
          "robustness: model ", models[m].name, " crafts on model index ", c,
          " (another model of the list that crafts on itself)");
  }
  for (const RobustnessAttack& a : attacks)
    check(is_white_box(a.name) || is_decision_based(a.name), "robustness: unknown attack '",
          a.name, "' (fgsm, bim, pgd, boundary, single-pixel)");
  RobustnessTable t;
  for (const RobustnessModel& m : models) t.models.push_back(m.name);
  for (const RobustnessAttack& a : attacks) t.attacks.push_back(a.name);
  // The common samples: correct under every model.
  const int64_t n = x.dim(0);
  std::vector<uint8_t> ok(static_cast<std::size_t>(n), 1);
  for (const RobustnessModel& m : models) {
    const std::vector<int32_t> p = predictions(m.runner->logits(x));
    int64_t correct = 0;
    for (int64_t i = 0; i < n; ++i) {
      const bool c = p[static_cast<std::size_t>(i)] == labels[static_cast<std::size_t>(i)];
      correct += c;
      ok[static_cast<std::size_t>(i)] &= c;
    }
    t.clean_accuracy.push_back(n ? static_cast<double>(correct) / static_cast<double>(n) : 0.0);
  }
  for (int64_t i = 0; i < n; ++i)
    if (ok[static_cast<std::size_t>(i)] && (max_samples <= 0 || static_cast<int64_t>(t.common.size()) < max_samples))
      t.common.push_back(i);
  check(!t.common.empty(), "robustness: no input is classified correctly by every model (", n, " inputs)");
  const Tensor xc = gather_rows(x, t.common);
  std::vector<int32_t> yc;
  for (int64_t i : t.common) yc.push_back(labels[static_cast<std::size_t>(i)]);
  for (int r = 0; r < repeats; ++r) t.seeds.push_back(seed + static_cast<uint64_t>(r));
  t.cell.assign(models.size(), std::vector<RobustnessCell>(attacks.size()));
  // each model's clean predictions on the common samples (a judge's reference under ART's rule)
  std::vector<std::vector<int32_t>> clean;
  for (const RobustnessModel& m : models) clean.push_back(predictions(m.runner->logits(xc)));
  for (std::size_t a = 0; a < attacks.size(); ++a) {
    const RobustnessAttack& at = attacks[a];
    for (int r = 0; r < repeats; ++r) {
      const uint64_t s = t.seeds[static_cast<std::size_t>(r)];
      std::map<std::size_t, AttackResult> crafted;  // white-box examples per crafting model
      auto craft = [&](std::size_t m) -> const AttackResult& {
        auto it = crafted.find(m);
        if (it != crafted.end()) return it->second;
        AttackSpec g = at;
        g.gradient.seed = s;
        return crafted.emplace(m, run_attack(*models[m].runner, xc, yc, g)).first->second;
      };
      for (std::size_t m = 0; m < models.size(); ++m) {
        AttackResult res;
        if (is_white_box(at.name)) {
          const std::size_t src = models[m].craft_on < 0 ? m : static_cast<std::size_t>(models[m].craft_on);
          res = craft(src);  // a copy: judged below where the model is not the source
          if (src != m) {
            res.clean_pred = clean[m];
            res.adv_pred = predictions(models[m].runner->logits(res.x_adv));
            finish_result(xc, yc, res, at.gradient.success);
          }
        } else {  // decision-based: always the model itself, queried under the repeat's seed
          AttackSpec d = at;
          d.boundary.seed = s, d.pixel.seed = s;
          res = run_attack(*models[m].runner, xc, yc, d);
        }
        const AttackSummary sum = summarize(res);
        RobustnessCell& c = t.cell[m][a];
        c.rates.push_back(sum.success_rate);
        c.successes.push_back(sum.successes);
        c.mean_l2 += sum.mean_l2 * static_cast<double>(sum.successes);
        c.mean_linf += sum.mean_linf * static_cast<double>(sum.successes);
        c.mean_queries += sum.mean_queries * static_cast<double>(sum.successes);
      }
    }
  }
  std::vector<std::vector<double>> means(models.size(), std::vector<double>(attacks.size()));
  for (std::size_t m = 0; m < models.size(); ++m)
    for (std::size_t a = 0; a < attacks.size(); ++a) {
      RobustnessCell& c = t.cell[m][a];
      double sum = 0, total = 0;
      for (double v : c.rates) sum += v;
      for (int64_t v : c.successes) total += static_cast<double>(v);
      c.mean = sum / static_cast<double>(c.rates.size());
      double ss = 0;
      for (double v : c.rates) ss += (v - c.mean) * (v - c.mean);
      c.std = c.rates.size() > 1 ? std::sqrt(ss / static_cast<double>(c.rates.size() - 1)) : 0.0;
      if (total > 0) c.mean_l2 /= total, c.mean_linf /= total, c.mean_queries /= total;
      means[m][a] = c.mean;
    }
  t.r = min_max_indicator(means);
  // Abyane & Hemmati's comparison (docs/GLOSSARY.md): model 0 against each other one, paired over
  // (attack, repeat).
  if (attacks.size() * static_cast<std::size_t>(repeats) >= 2)
    for (std::size_t m = 1; m < models.size(); ++m) {
      std::vector<double> a0, am;
      for (std::size_t a = 0; a < attacks.size(); ++a)
        for (int r = 0; r < repeats; ++r) {
          a0.push_back(t.cell[0][a].rates[static_cast<std::size_t>(r)]);
          am.push_back(t.cell[m][a].rates[static_cast<std::size_t>(r)]);
        }
      RobustnessTable::Pair p;
      p.k = static_cast<int>(m);
      bool all_equal = true;
      for (std::size_t i = 0; i < a0.size(); ++i) all_equal = all_equal && a0[i] == am[i];
      if (all_equal) {  // SciPy refuses (every difference zero): no test, A12 = 0.5
        p.wilcoxon.method = "none (every difference zero)";
        p.wilcoxon.pvalue = 1.0;
        p.wilcoxon.zeros = static_cast<int64_t>(a0.size());
      } else {
        p.wilcoxon = wilcoxon(a0, am);
      }
      p.a12 = a12(a0, am);
      t.pairs.push_back(p);
    }
  return t;
}

}  // namespace attacks
}  // namespace driftlab
