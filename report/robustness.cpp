// The files of a robustness table (report/robustness.h): JSON, CSV, Markdown and the chart.
#include "report/robustness.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attacks/boundary.h"
#include "engine/build_info.h"
#include "engine/io/shell.h"
#include "report/attack.h"

namespace driftlab {
namespace report {

namespace {

using nlohmann::json;

// The chart: grouped bars (one group per attack, one bar per model, the repeats' standard deviation
// as error bars), R(m) in the legend; matplotlib's Agg backend, PNG and SVG.
const char* kRobustnessChart = R"PY(# written by driftlab robustness: python3 chart.py robustness.json OUT_PREFIX
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
r = json.load(open(sys.argv[1]))
models, attacks = r["models"], r["attacks"]
width = 0.8 / len(models)
fig, ax = plt.subplots(figsize=(max(5, 1.6 * len(attacks) + 1), 3.6))
for m, name in enumerate(models):
    cells = r["cells"][m]
    xs = [a + (m - (len(models) - 1) / 2) * width for a in range(len(attacks))]
    ax.bar(xs, [100 * c["mean"] for c in cells], width, yerr=[100 * c["std"] for c in cells], capsize=3,
           label="%s (R = %.3f)" % (name, r["R"][m]))
ax.set_xticks(range(len(attacks)))
ax.set_xticklabels(attacks)
ax.set_ylabel("success rate (%)")
ax.set_ylim(0, 105)
ax.set_title("%d samples correct under every model, %d repeat(s)" % (len(r["common"]), len(r["seeds"])))
ax.legend(fontsize="small")
fig.tight_layout()
fig.savefig(sys.argv[2] + ".png", dpi=120)
fig.savefig(sys.argv[2] + ".svg")
)PY";

json robustness_json(const RobustnessOutcome& o) {
  const attacks::RobustnessTable& t = o.table;
  json names = json::array();
  for (const RobustnessOutcome::Entry& e : o.models) names.push_back(e.name);
  json cells = json::array();
  for (std::size_t m = 0; m < o.models.size(); ++m) {
    json row = json::array();
    for (std::size_t a = 0; a < o.attacks.size(); ++a) {
      const attacks::RobustnessCell& c = t.cell[m][a];
      row.push_back({{"rates", c.rates}, {"successes", c.successes}, {"mean", c.mean}, {"std", c.std},
                     {"mean_l2", c.mean_l2}, {"mean_linf", c.mean_linf}, {"mean_queries", c.mean_queries}});
    }
    cells.push_back(row);
  }
  json pairs = json::array();
  for (const auto& p : t.pairs)
    pairs.push_back({{"a", o.models[0].name}, {"b", o.models[static_cast<std::size_t>(p.k)].name},
                     {"wilcoxon_statistic", p.wilcoxon.statistic}, {"pvalue", p.wilcoxon.pvalue},
                     {"method", p.wilcoxon.method}, {"zeros", p.wilcoxon.zeros}, {"ties", p.wilcoxon.ties},
                     {"a12", p.a12}});
  json mj = json::array();
  for (std::size_t m = 0; m < o.models.size(); ++m) {
    const RobustnessOutcome::Entry& e = o.models[m];
    mj.push_back({{"name", e.name}, {"weights", e.file}, {"policy", e.policy}, {"int8", e.int8},
                  {"crafted_on", e.craft < 0 ? json(nullptr) : json(o.models[static_cast<std::size_t>(e.craft)].name)},
                  {"gradient", e.craft >= 0 ? "the crafting model's"
                               : e.int8     ? "straight-through (fake-quantized graph)"
                                            : "the model's own backward"},
                  {"clean_accuracy", t.clean_accuracy[m]}});
  }
  json settings = json::array();  // what each attack ran with (after the convention filled the defaults)
  for (const attacks::AttackSpec& a : o.attacks) {
    if (a.name == "boundary")
      settings.push_back({{"attack", a.name}, {"boundary_rules", attacks::boundary_rules_name(a.boundary.rules)},
                          {"iterations", a.boundary.steps}, {"max_directions", a.boundary.max_directions},
                          {"batch", a.boundary.batch}});
    else if (a.name == "single-pixel")
      settings.push_back({{"attack", a.name}, {"max_pixels", a.pixel.max_pixels}});
    else
      settings.push_back({{"attack", a.name}, {"convention", o.convention}, {"eps", a.gradient.eps},
                          {"step", a.gradient.step}, {"steps", a.gradient.steps}});
  }
  return json{{"models", names},     {"model_files", mj}, {"attacks", t.attacks}, {"settings", settings},
              {"common", t.common},  {"inputs", o.inputs}, {"seeds", t.seeds},   {"cells", cells},
              {"R", t.r},            {"pairs", pairs},     {"device", o.device},  {"commit", build_commit()}};
}

}  // namespace

std::string robustness_markdown(const RobustnessOutcome& o) {
  const attacks::RobustnessTable& t = o.table;
  std::ostringstream md;
  md << "| model | clean acc. |";
  for (const std::string& a : t.attacks) md << " " << a << " success % |";
  md << " R(m) |\n|---|---|";
  for (std::size_t a = 0; a < o.attacks.size(); ++a) md << "---|";
  md << "---|\n";
  for (std::size_t m = 0; m < o.models.size(); ++m) {
    const RobustnessOutcome::Entry& e = o.models[m];
    md << "| " << e.name << (e.int8 ? " (int8)" : "")
       << (e.craft >= 0 ? ", crafted on " + o.models[static_cast<std::size_t>(e.craft)].name : std::string()) << " | "
       << fixed_point(100 * t.clean_accuracy[m], 2) << " |";
    for (std::size_t a = 0; a < o.attacks.size(); ++a) {
      md << " " << fixed_point(100 * t.cell[m][a].mean, 2);
      if (t.seeds.size() > 1) md << " ± " << fixed_point(100 * t.cell[m][a].std, 2);
      md << " |";
    }
    md << " " << fixed_point(t.r[m], 3) << " |\n";
  }
  for (const auto& p : t.pairs)
    md << "\n" << o.models[0].name << " vs " << o.models[static_cast<std::size_t>(p.k)].name
       << ": Wilcoxon signed-rank p = " << fixed_point(p.wilcoxon.pvalue, 4) << " (" << p.wilcoxon.method << ", over "
       << o.attacks.size() * t.seeds.size() << " paired (attack, repeat) rates), A12 = " << fixed_point(p.a12, 3);
  if (!t.pairs.empty()) md << "\n";
  return md.str();
}

void write_robustness(const std::string& out, const RobustnessOutcome& o) {
  const attacks::RobustnessTable& t = o.table;
  std::filesystem::create_directories(out);
  {
    std::ofstream f(out + "/robustness.json");
    f << robustness_json(o).dump(1) << "\n";
    check(static_cast<bool>(f), "robustness: could not write ", out, "/robustness.json");
    std::ofstream c(out + "/robustness.csv");
    c << "model,attack,repeat,seed,samples,successes,success_rate\n";
    for (std::size_t m = 0; m < o.models.size(); ++m)
      for (std::size_t a = 0; a < o.attacks.size(); ++a)
        for (std::size_t r = 0; r < t.seeds.size(); ++r)
          c << o.models[m].name << "," << t.attacks[a] << "," << r << "," << t.seeds[r] << "," << t.common.size()
            << "," << t.cell[m][a].successes[r] << "," << fixed_point(t.cell[m][a].rates[r], 6) << "\n";
    check(static_cast<bool>(c), "robustness: could not write ", out, "/robustness.csv");
  }
  std::ofstream f(out + "/table.md");
  f << robustness_markdown(o);
  check(static_cast<bool>(f), "robustness: could not write ", out, "/table.md");
}

void write_robustness_chart(const std::string& out) {
  const std::string script = out + "/chart.py";
  {
    std::ofstream f(script);
    f << kRobustnessChart;
    check(static_cast<bool>(f), "robustness: could not write ", script);
  }
  const char* py = std::getenv("DRIFTLAB_PYTHON");
  const std::string cmd = std::string(py && *py ? py : "/usr/bin/python3") + " " + shell_quoted(script) + " " +
                          shell_quoted(out + "/robustness.json") + " " + shell_quoted(out + "/chart") + " 2>&1";
  int rc = 0;
  const std::string said = run_capture(cmd, &rc);
  check(rc == 0, "robustness: the chart needs Python 3 with matplotlib (apt-get install python3-matplotlib; "
        "or --no-chart): ", cmd, " said: ", said);
}

}  // namespace report
}  // namespace driftlab
