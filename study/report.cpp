#include "study/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "attacks/stats.h"
#include "core/error.h"
#include "report/csv.h"
#include "study/files.h"
#include "study/run.h"

namespace driftlab {
namespace study {

namespace fs = std::filesystem;

namespace {

// One measure of one cell: name and value (absent when the cell's results lack it).
using Measures = std::vector<std::pair<std::string, double>>;

// The measure of the attacked model's success over the inputs every model gets right (S2's
// "regular"), and that of a judging model over the same inputs (S2's "quantized"), named by the
// judge's step.
const char* kRegular = "success rate on the inputs all models get right";
std::string judged_by(const std::string& step) { return "success rate judged by " + step; }

Measures measures_of(const Plan& p, const Cell& c, const nlohmann::json& res, const nlohmann::json& times) {
  Measures m;
  auto at = [&](const nlohmann::json& j, const char* ptr, const std::string& name) {
    const nlohmann::json::json_pointer p(ptr);
    if (!j.is_null() && j.contains(p) && j.at(p).is_number()) m.emplace_back(name, j.at(p).get<double>());
  };
  // A table over models (robustness, convert_robustness): per row "R(<model>)" and per attack
  // "<attack><what> (<model>)", the names model_tables reads back.
  auto model_rows = [&](const char* name_key, const char* value_key, const std::string& what) {
    if (!res.contains("rows")) return;
    for (const auto& row : res["rows"]) {
      const std::string name = row.value(name_key, std::string("?"));
      at(row, "/R", "R(" + name + ")");
      if (row.contains("attacks"))
        for (const auto& [a, v] : row["attacks"].items())
          if (v.contains(value_key)) m.emplace_back(a + what + " (" + name + ")", v[value_key].get<double>());
    }
  };
  if (c.kind == "train") {
    at(res, "/test/accuracy", "test accuracy");
    at(res, "/test/loss", "test loss");
    at(res, "/model_bytes", "model size (bytes)");
    if (res.contains("epochs") && !res["epochs"].empty()) {
      m.emplace_back("final train loss", res["epochs"].back().value("train_loss", NAN));
      m.emplace_back("final train accuracy", res["epochs"].back().value("train_acc", NAN));
    }
    if (!times.is_null() && times.contains("epochs") && !times["epochs"].empty()) {
      double s = 0, fastest = INFINITY;
      for (const auto& e : times["epochs"]) {
        s += e.value("seconds", 0.0);
        fastest = std::min(fastest, e.value("seconds", 0.0));
      }
      m.emplace_back("seconds per epoch", s / static_cast<double>(times["epochs"].size()));
      // the fastest epoch: the cell's time with the least of what else ran on the machine in it (a
      // mean over epochs takes in every build or test that shared the cores)
      m.emplace_back("seconds of the fastest epoch", fastest);
    }
  } else if (c.kind == "robustness") {
    model_rows("model", "mean", " success");
  } else if (c.kind == "drift") {
    if (res.contains("accuracy"))
      for (const auto& a : res["accuracy"])
        if (a.contains("accuracy")) m.emplace_back("accuracy under " + a.value("policy", std::string("?")), a["accuracy"].get<double>());
    if (res.contains("pairs"))
      for (const auto& pr : res["pairs"]) {
        const std::string ab = pr.value("a", std::string("?")) + " vs " + pr.value("b", std::string("?"));
        if (pr.contains("max_abs")) m.emplace_back("max |d| softmax, " + ab, pr["max_abs"].get<double>());
        if (pr.contains("misclassification"))
          m.emplace_back("misclassification, " + ab, pr["misclassification"].get<double>());
      }
  } else if (c.kind == "convert") {
    at(res, "/accuracy_before", "accuracy before");
    at(res, "/accuracy_after", "accuracy after");
    at(res, "/abs_err_mean", "abs. error (signed mean)");
    at(res, "/rel_err_mean", "rel. error");
    at(res, "/max_abs", "max |d| softmax");
    at(res, "/misclassification", "misclassification");
    at(res, "/size_before", "size before (bytes)");
    at(res, "/size_after", "size after (bytes)");
    at(res, "/adversarial/success_before", "S_orig");
    at(res, "/adversarial/success_after", "S_conv");
    at(res, "/adversarial/variation", "|S_conv - S_orig|");
    // times as seconds (a time is not compared across presets: study_comparisons skips "seconds")
    for (const char* side : {"before", "after"}) {
      const std::string k = std::string("inference_ms_") + side;
      if (!times.is_null() && times.contains(k) && times[k].is_number())
        m.emplace_back(std::string("seconds of inference ") + side, times[k].get<double>() / 1000.0);
    }
  } else if (c.kind == "convert_robustness") {
    model_rows("name", "variation", " |S_conv - S_orig|");
  } else if (c.kind == "predict_time") {
    if (!times.is_null() && times.contains("predictions"))
      for (const auto& row : times["predictions"])
        m.emplace_back("seconds for " + std::to_string(row.value("inputs", 0)) + " inputs", row.value("seconds", 0.0));
  } else if (c.kind == "evaluate") {
    at(res, "/test/accuracy", "test accuracy");
    at(res, "/test/loss", "test loss");
  } else if (c.kind == "quantize") {
    at(res, "/test/accuracy", "int8 test accuracy");
  } else if (c.kind == "attack") {
    at(res, "/clean_accuracy", "clean accuracy");
    at(res, "/over_all/success_rate", "success rate");
    at(res, "/over_correct/success_rate", "success rate on correct");
    at(res, "/over_correct_by_all/success_rate", kRegular);
    if (res.contains("judges"))
      for (std::size_t i = 0; i < res["judges"].size() && i + 1 < c.inputs.size(); ++i)
        at(res, ("/judges/" + std::to_string(i) + "/rate_all").c_str(), judged_by(p.cells.at(c.inputs[i + 1]).step));
  }
  return m;
}

bool is_seed(const std::string& key) {
  return key == "seed" || (key.size() > 5 && key.compare(key.size() - 5, 5, ".seed") == 0);
}

std::string fmt(double v, const char* f = "%.4f") {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// "mean ± sd (n)", "mean (1)", "" (no value)
// A value to 4 decimals, to 1 from 1,000 up, or to 3 significant digits when it is smaller than
// 0.001 and not 0 (a conversion's output error of 1e-8 is not 0.0000).
std::string num_text(double v) {
  if (v != 0 && std::fabs(v) < 1e-3) return fmt(v, "%.3g");
  return std::fabs(v) >= 1000 ? fmt(v, "%.1f") : fmt(v);  // a size in bytes needs no 4 decimals
}

// Two groups' Stats of one measure into c: the means and sds, paired by the seeds both have the
// Wilcoxon signed-rank p and A12 (equal values seed by seed, as presets that compute the same bits
// give: p = 1, A12 = 0.5, which SciPy refuses to compute), and whether the gap is within the
// seeds' spread (|mean a - mean b| <= sqrt(sd_a^2 + sd_b^2)).
void compare(Comparison& c, const Stat& sa, const Stat& sb, const std::map<std::string, double>& va,
             const std::map<std::string, double>& vb) {
  c.mean_a = sa.mean;
  c.mean_b = sb.mean;
  c.sd_a = sa.sd;
  c.sd_b = sb.sd;
  std::vector<double> x, y;
  for (const auto& [seed, v] : va) {
    auto it = vb.find(seed);
    if (it == vb.end()) continue;
    x.push_back(v);
    y.push_back(it->second);
  }
  c.pairs = static_cast<int>(x.size());
  c.p = 1;
  c.a12 = 0.5;
  if (c.pairs >= 2 && x != y) {
    c.p = attacks::wilcoxon(x, y).pvalue;
    c.a12 = attacks::a12(x, y);
  }
  const double spread = std::sqrt(c.sd_a * c.sd_a + c.sd_b * c.sd_b);
  c.within_spread = sa.n < 2 || sb.n < 2 || std::fabs(c.mean_a - c.mean_b) <= spread;
}

}  // namespace

bool seed_less(const std::string& a, const std::string& b) {
  // "2" before "10", and "2/10" before "10/1": each '/'-separated part as a number where it is one
  std::size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const std::size_t ei = std::min(a.find('/', i), a.size()), ej = std::min(b.find('/', j), b.size());
    const std::string x = a.substr(i, ei - i), y = b.substr(j, ej - j);
    const bool nx = !x.empty() && x.find_first_not_of("0123456789") == std::string::npos && x.size() < 18;
    const bool ny = !y.empty() && y.find_first_not_of("0123456789") == std::string::npos && y.size() < 18;
    if (nx && ny) {
      if (std::stoll(x) != std::stoll(y)) return std::stoll(x) < std::stoll(y);
    } else if (x != y) {
      return x < y;
    }
    i = ei + 1, j = ej + 1;
  }
  return a.size() - std::min(i, a.size()) < b.size() - std::min(j, b.size());
}

std::string stat_text(const Stat& s) {
  if (s.n == 0) return "";
  if (s.n == 1) return num_text(s.mean) + " (1)";
  return num_text(s.mean) + " ± " + num_text(s.sd) + " (" + std::to_string(s.n) + ")";
}

std::size_t training_key(const ReportTable& t, const std::string& key) {
  for (std::size_t k = 0; k < t.keys.size(); ++k)
    if (t.keys[k] == key) return k;
  for (std::size_t k = 0; k < t.keys.size(); ++k) {
    const std::string& n = t.keys[k];
    if (n.size() > key.size() + 1 && n.compare(n.size() - key.size() - 1, key.size() + 1, "." + key) == 0) return k;
  }
  return t.keys.size();
}

std::vector<ReportTable> study_tables(const std::string& dir) {
  const Plan plan = read_plan(dir);
  std::vector<std::string> steps;
  std::map<std::string, std::vector<const Cell*>> of_step;
  for (const Cell& c : plan.cells) {
    if (!of_step.count(c.step)) steps.push_back(c.step);
    of_step[c.step].push_back(&c);
  }
  std::vector<ReportTable> tables;
  for (const std::string& step : steps) {
    ReportTable t;
    t.step = step;
    t.kind = of_step[step].front()->kind;
    std::vector<std::map<std::string, std::string>> labels;
    std::map<std::string, std::set<std::string>> seen;
    for (const Cell* c : of_step[step]) {
      labels.push_back(cell_labels(plan, *c));
      for (const auto& [k, v] : labels.back()) seen[k].insert(v);
    }
    std::vector<std::string> seed_keys;
    for (const auto& [k, vals] : seen) {
      if (vals.size() < 2) continue;
      (is_seed(k) ? seed_keys : t.keys).push_back(k);
    }
    std::map<std::vector<std::string>, std::size_t> row_of;
    std::vector<std::map<std::string, std::vector<double>>> values;
    std::vector<std::set<std::string>> seeds;
    for (std::size_t i = 0; i < of_step[step].size(); ++i) {
      const Cell& c = *of_step[step][i];
      ++t.cells;
      std::vector<std::string> key;
      for (const std::string& k : t.keys) key.push_back(labels[i][k]);
      auto it = row_of.find(key);
      if (it == row_of.end()) {
        it = row_of.emplace(key, t.rows.size()).first;
        ReportRow row;
        row.values = key;
        t.rows.push_back(std::move(row));
        values.emplace_back();
        seeds.emplace_back();
      }
      const std::string cdir = dir + "/cells/" + c.hash;
      const nlohmann::json res = read_json_if_any(cdir + "/results.json");
      std::string s;
      for (const std::string& k : seed_keys) s += (s.empty() ? "" : "/") + labels[i][k];
      if (res.is_null()) {
        if (!fs::exists(cdir + "/error.txt")) {
          ++t.missing;
          continue;
        }
        // a failed cell: which one and what it said (its first line), so that a table with fewer
        // seeds than the others says why
        std::string who;
        for (const std::string& k : t.keys) who += (who.empty() ? "" : ", ") + k + "=" + labels[i][k];
        for (const std::string& k : seed_keys) who += (who.empty() ? "" : ", ") + k + "=" + labels[i][k];
        std::string what = read_text(cdir + "/error.txt");
        what = what.substr(0, what.find('\n'));
        t.failed.push_back(who + ": " + what);
        continue;
      }
      for (const auto& [name, v] : measures_of(plan, c, res, read_json_if_any(cdir + "/timings.json"))) {
        if (std::find(t.measures.begin(), t.measures.end(), name) == t.measures.end()) t.measures.push_back(name);
        values[it->second][name].push_back(v);
        t.rows[it->second].by_seed[name][s] = v;
      }
      if (!s.empty()) seeds[it->second].insert(s);
      t.rows[it->second].cells.push_back(c.hash);
      t.rows[it->second].cell_seeds.push_back(s);
    }
    for (std::size_t r = 0; r < t.rows.size(); ++r) {
      for (const std::string& m : t.measures) {
        const std::vector<double>& v = values[r][m];
        Stat s;
        s.measure = m;
        s.n = static_cast<int>(v.size());
        for (double x : v) s.mean += x;
        if (s.n) s.mean /= s.n;
        double ss = 0;
        for (double x : v) ss += (x - s.mean) * (x - s.mean);
        s.sd = s.n > 1 ? std::sqrt(ss / (s.n - 1)) : 0.0;
        t.rows[r].stats.push_back(s);
      }
      for (const std::string& s : seeds[r]) t.rows[r].seeds.push_back(s);
      std::stable_sort(t.rows[r].seeds.begin(), t.rows[r].seeds.end(), seed_less);
    }
    tables.push_back(std::move(t));
  }
  return tables;
}

std::vector<ModelTable> model_tables(const ReportTable& t) {
  std::vector<ModelTable> out;
  if (t.kind != "robustness" && t.kind != "convert_robustness") return out;
  // "R(name)" -> (name, "R"); "what (name)" -> (name, "what")
  auto split = [](const std::string& m, std::string* model, std::string* column) {
    if (m.size() > 3 && m.compare(0, 2, "R(") == 0 && m.back() == ')') {
      *model = m.substr(2, m.size() - 3);
      *column = "R";
      return true;
    }
    const std::size_t at = m.find(" (");
    if (at == std::string::npos || m.back() != ')') return false;
    *model = m.substr(at + 2, m.size() - at - 3);
    *column = m.substr(0, at);
    return true;
  };
  for (const ReportRow& r : t.rows) {
    ModelTable mt;
    for (std::size_t k = 0; k < t.keys.size(); ++k) mt.group += (k ? ", " : "") + t.keys[k] + "=" + r.values[k];
    for (const std::string& s : r.seeds) mt.seeds += (mt.seeds.empty() ? "" : ", ") + s;
    std::map<std::pair<std::string, std::string>, Stat> at;
    bool has_r = false;
    for (const Stat& st : r.stats) {
      std::string model, column;
      if (!split(st.measure, &model, &column)) continue;
      if (std::find(mt.models.begin(), mt.models.end(), model) == mt.models.end()) mt.models.push_back(model);
      if (column == "R") has_r = true;
      else if (std::find(mt.columns.begin(), mt.columns.end(), column) == mt.columns.end()) mt.columns.push_back(column);
      at[{model, column}] = st;
    }
    if (has_r) mt.columns.push_back("R");
    for (const std::string& m : mt.models) {
      std::vector<Stat> row;
      for (const std::string& c : mt.columns) {
        auto it = at.find({m, c});
        row.push_back(it == at.end() ? Stat{c, 0, 0, 0} : it->second);
      }
      mt.cells.push_back(row);
    }
    out.push_back(std::move(mt));
  }
  return out;
}

std::vector<BatchTable> batch_tables(const ReportTable& t) {
  std::vector<BatchTable> out;
  if (t.kind != "train") return out;
  const auto bit = std::find(t.keys.begin(), t.keys.end(), "batch");
  if (bit == t.keys.end() || t.keys.size() < 2) return out;
  const std::size_t bi = static_cast<std::size_t>(bit - t.keys.begin());
  for (const char* measure : {"test accuracy", "seconds per epoch", "seconds of the fastest epoch"}) {
    const auto mit = std::find(t.measures.begin(), t.measures.end(), measure);
    if (mit == t.measures.end()) continue;
    const std::size_t mi = static_cast<std::size_t>(mit - t.measures.begin());
    BatchTable b;
    b.step = t.step;
    b.measure = measure;
    for (std::size_t k = 0; k < t.keys.size(); ++k)
      if (k != bi) b.row_keys.push_back(t.keys[k]);
    for (const ReportRow& r : t.rows)
      if (std::find(b.batches.begin(), b.batches.end(), r.values[bi]) == b.batches.end()) b.batches.push_back(r.values[bi]);
    std::stable_sort(b.batches.begin(), b.batches.end(),
                     [](const std::string& x, const std::string& y) { return std::stoll(x) < std::stoll(y); });
    for (const ReportRow& r : t.rows) {
      std::vector<std::string> rv;
      for (std::size_t k = 0; k < t.keys.size(); ++k)
        if (k != bi) rv.push_back(r.values[k]);
      auto it = std::find(b.rows.begin(), b.rows.end(), rv);
      if (it == b.rows.end()) {
        b.rows.push_back(rv);
        b.cells.emplace_back(b.batches.size(), Stat{measure, 0, 0, 0});
        it = b.rows.end() - 1;
      }
      const std::size_t col =
          static_cast<std::size_t>(std::find(b.batches.begin(), b.batches.end(), r.values[bi]) - b.batches.begin());
      b.cells[static_cast<std::size_t>(it - b.rows.begin())][col] = r.stats[mi];
    }
    out.push_back(std::move(b));
  }
  return out;
}

std::string batch_tables_markdown(const std::vector<ReportTable>& tables) {
  std::ostringstream os;
  for (const ReportTable& t : tables)
    for (const BatchTable& b : batch_tables(t)) {
      os << "## " << b.step << ": " << b.measure << " by batch size (S1's layout)\n\n|";
      for (const std::string& k : b.row_keys) os << " " << k << " |";
      for (const std::string& x : b.batches) os << " B-" << x << " |";
      os << "\n|";
      for (std::size_t i = 0; i < b.row_keys.size() + b.batches.size(); ++i) os << " --- |";
      os << "\n";
      for (std::size_t r = 0; r < b.rows.size(); ++r) {
        os << "|";
        for (const std::string& v : b.rows[r]) os << " " << v << " |";
        for (const Stat& st : b.cells[r]) os << " " << stat_text(st) << " |";
        os << "\n";
      }
      os << "\n";
    }
  return os.str();
}

std::vector<Comparison> study_comparisons(const std::vector<ReportTable>& tables, const std::string& key) {
  std::vector<Comparison> out;
  for (const ReportTable& t : tables) {
    // a step downstream of a training compares that training's key (train.policy for an attack)
    const std::size_t ki = training_key(t, key);
    if (ki == t.keys.size()) continue;
    // With two or more plain values (presets without knobs of their own), only those are compared:
    // a study of one-knob variants is read through its explanations (study/explain.h), and all
    // pairs of 32 variants would be 496 comparisons per measure.
    std::set<std::string> plain;
    for (const ReportRow& r : t.rows)
      if (r.values[ki].find(',') == std::string::npos) plain.insert(r.values[ki]);
    const bool only_plain = plain.size() >= 2;
    // Rows that agree on every other key, compared two by two in their order.
    for (std::size_t a = 0; a < t.rows.size(); ++a)
      for (std::size_t b = a + 1; b < t.rows.size(); ++b) {
        if (only_plain && (!plain.count(t.rows[a].values[ki]) || !plain.count(t.rows[b].values[ki]))) continue;
        bool same_rest = true;
        for (std::size_t k = 0; k < t.keys.size(); ++k)
          if (k != ki && t.rows[a].values[k] != t.rows[b].values[k]) same_rest = false;
        if (!same_rest) continue;
        for (std::size_t m = 0; m < t.measures.size(); ++m) {
          const std::string& name = t.measures[m];
          // a time is not an outcome of the presets' arithmetic, nor a file's size (which moves with the
          // length of the policy string it records)
          if (name.rfind("seconds", 0) == 0 || name.find("(bytes)") != std::string::npos) continue;
          // a conversion's outcome, not the original's again (accuracy before, S_orig are the
          // training's and the attack's gaps) nor the signed errors that sum to nothing
          if (t.kind == "convert" && name != "misclassification" && name != "accuracy after" &&
              name != "|S_conv - S_orig|" && name != "max |d| softmax")
            continue;
          Comparison c;
          c.step = t.step;
          c.key = key;
          c.a = t.rows[a].values[ki];
          c.b = t.rows[b].values[ki];
          for (std::size_t k = 0; k < t.keys.size(); ++k)
            if (k != ki) c.within += (c.within.empty() ? "" : ", ") + t.keys[k] + "=" + t.rows[a].values[k];
          c.measure = name;
          const Stat& sa = t.rows[a].stats[m];
          const Stat& sb = t.rows[b].stats[m];
          if (sa.n == 0 || sb.n == 0) continue;
          compare(c, sa, sb, t.rows[a].by_seed.at(name), t.rows[b].by_seed.at(name));
          out.push_back(c);
        }
      }
  }
  return out;
}

std::vector<Comparison> judge_comparisons(const std::vector<ReportTable>& tables) {
  std::vector<Comparison> out;
  for (const ReportTable& t : tables) {
    if (t.kind != "attack") continue;
    const auto reg = std::find(t.measures.begin(), t.measures.end(), kRegular);
    if (reg == t.measures.end()) continue;
    const std::size_t ri = static_cast<std::size_t>(reg - t.measures.begin());
    for (std::size_t m = 0; m < t.measures.size(); ++m) {
      const std::string prefix = judged_by("");
      if (t.measures[m].rfind(prefix, 0) != 0) continue;
      for (const ReportRow& r : t.rows) {
        const Stat& sa = r.stats[ri];
        const Stat& sb = r.stats[m];
        if (sa.n == 0 || sb.n == 0) continue;
        Comparison c;
        c.step = t.step;
        c.key = "judged by";
        c.a = "the attacked model";
        c.b = t.measures[m].substr(prefix.size());
        for (std::size_t k = 0; k < t.keys.size(); ++k) c.within += (k ? ", " : "") + t.keys[k] + "=" + r.values[k];
        c.measure = kRegular;
        compare(c, sa, sb, r.by_seed.at(t.measures[ri]), r.by_seed.at(t.measures[m]));
        out.push_back(c);
      }
    }
  }
  return out;
}

std::string comparisons_markdown(const std::vector<Comparison>& cs) {
  std::ostringstream os;
  if (cs.empty()) return "";
  os << "## Comparisons of " << cs.front().key << " (paired by seed)\n\n"
     << "| step | within | measure | " << cs.front().key << " a | " << cs.front().key << " b | mean a - mean b "
     << "| within the seeds' spread | pairs | Wilcoxon p | A12 |\n"
     << "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const Comparison& c : cs) {
    os << "| " << c.step << " | " << c.within << " | " << c.measure << " | " << c.a << " | " << c.b << " | "
       << fmt(c.mean_a - c.mean_b, "%+.4f") << " | " << (c.within_spread ? "yes" : "no") << " | " << c.pairs << " | "
       << (c.pairs >= 2 ? fmt(c.p, "%.3g") : "") << " | " << (c.pairs >= 2 ? fmt(c.a12, "%.2f") : "") << " |\n";
  }
  os << "\nWithin the seeds' spread: |mean a - mean b| <= sqrt(sd_a^2 + sd_b^2). Wilcoxon signed-rank (two-sided, "
        "exact below 50 pairs, SciPy's rules: attacks/stats.h) over the seeds both have; with n pairs its p cannot go "
        "below 2^(1-n) (0.25 for 3 seeds, 0.0625 for 5). A12: the chance that a's value exceeds b's (ties half).\n\n";
  return os.str();
}

std::string tables_markdown(const std::vector<ReportTable>& tables) {
  std::ostringstream os;
  for (const ReportTable& t : tables) {
    os << "## " << t.step << " (" << t.kind << "): " << t.cells << " cells";
    if (t.missing) os << ", " << t.missing << " without results yet";
    if (!t.failed.empty()) os << ", " << t.failed.size() << " failed";
    for (const std::string& f : t.failed) os << "\n\n- failed: " << f;
    const std::vector<ModelTable> mts = model_tables(t);
    if (!mts.empty()) {
      // the papers' layout: a row per model, a column per measure
      for (const ModelTable& mt : mts) {
        std::string head = mt.group;
        if (!mt.seeds.empty()) head += (head.empty() ? "" : "; ") + std::string("seeds ") + mt.seeds;
        os << "\n\n" << (head.empty() ? "" : head + "\n\n") << "| model |";
        for (const std::string& c : mt.columns) os << " " << c << " |";
        os << "\n| --- |";
        for (std::size_t i = 0; i < mt.columns.size(); ++i) os << " --- |";
        os << "\n";
        for (std::size_t m = 0; m < mt.models.size(); ++m) {
          os << "| " << mt.models[m] << " |";
          for (const Stat& st : mt.cells[m]) os << " " << stat_text(st) << " |";
          os << "\n";
        }
      }
      os << "\n";
      continue;
    }
    os << "\n\n|";
    for (const std::string& k : t.keys) os << " " << k << " |";
    for (const std::string& m : t.measures) os << " " << m << " |";
    os << " seeds |\n|";
    for (std::size_t i = 0; i < t.keys.size() + t.measures.size() + 1; ++i) os << " --- |";
    os << "\n";
    for (const ReportRow& r : t.rows) {
      os << "|";
      for (const std::string& v : r.values) os << " " << v << " |";
      for (const Stat& s : r.stats) os << " " << stat_text(s) << " |";
      std::string seeds;
      for (const std::string& s : r.seeds) seeds += (seeds.empty() ? "" : ", ") + s;
      os << " " << seeds << " |\n";
    }
    os << "\n";
  }
  return os.str();
}

std::string tables_csv(const std::vector<ReportTable>& tables) {
  std::ostringstream os;
  os << "step,kind,group,measure,mean,sd,n,seeds\n";
  for (const ReportTable& t : tables)
    for (const ReportRow& r : t.rows) {
      std::string group, seeds;
      for (std::size_t i = 0; i < t.keys.size(); ++i) group += (i ? ";" : "") + t.keys[i] + "=" + r.values[i];
      for (const std::string& s : r.seeds) seeds += (seeds.empty() ? "" : ";") + s;
      for (const Stat& s : r.stats)
        os << report::csv_cell(t.step) << "," << t.kind << "," << report::csv_cell(group) << "," << report::csv_cell(s.measure) << ","
           << fmt(s.mean, "%.17g") << "," << fmt(s.sd, "%.17g") << "," << s.n << "," << report::csv_cell(seeds) << "\n";
    }
  return os.str();
}

std::string tables_json(const std::vector<ReportTable>& tables) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const ReportTable& t : tables) {
    nlohmann::ordered_json j;
    j["step"] = t.step;
    j["kind"] = t.kind;
    j["cells"] = t.cells;
    j["missing"] = t.missing;
    j["failed"] = t.failed;
    j["keys"] = t.keys;
    // a table over models also in the papers' layout (model_tables: a row per model, a column per
    // measure, R last), as the figures read it
    const std::vector<ModelTable> mts = model_tables(t);
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (std::size_t ri = 0; ri < t.rows.size(); ++ri) {
      const ReportRow& r = t.rows[ri];
      nlohmann::ordered_json row;
      for (std::size_t i = 0; i < t.keys.size(); ++i) row["group"][t.keys[i]] = r.values[i];
      for (const Stat& s : r.stats) row["stats"][s.measure] = {{"mean", s.mean}, {"sd", s.sd}, {"n", s.n}};
      row["seeds"] = r.seeds;
      if (ri < mts.size()) {
        const ModelTable& mt = mts[ri];
        nlohmann::ordered_json cells = nlohmann::ordered_json::array();
        for (const std::vector<Stat>& line : mt.cells) {
          nlohmann::ordered_json c = nlohmann::ordered_json::array();
          for (const Stat& st : line) c.push_back({{"mean", st.mean}, {"sd", st.sd}, {"n", st.n}});
          cells.push_back(c);
        }
        row["by_model"] = {{"models", mt.models}, {"columns", mt.columns}, {"cells", cells}};
      }
      rows.push_back(row);
    }
    j["rows"] = rows;
    out.push_back(j);
  }
  return out.dump(2) + "\n";
}

}  // namespace study
}  // namespace driftlab
