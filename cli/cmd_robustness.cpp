// driftlab robustness: several models under several attacks, R(m), Wilcoxon/A12, table and chart.
#include "cli/commands.h"
#include "cli/common.h"

#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attacks/boundary.h"
#include "attacks/robustness.h"
#include "cli/attack_options.h"
#include "engine/build_info.h"
#include "engine/data/transform.h"
#include "engine/train/runner.h"
#include "quant/model_io.h"
#include "quant/ste.h"

namespace driftlab {
namespace cli {
namespace {

using nlohmann::json;

std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);) {
    check(!item.empty(), "robustness: an empty item in '", s, "'");
    out.push_back(item);
  }
  return out;
}

std::string join_list(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

struct RobustnessOptions {
  std::vector<std::string> models, crafts;  // NAME=FILE; NAME=SOURCE
  std::string attacks = "fgsm,boundary", out;
  int repeats = 1;
  int64_t samples = 0;
  bool no_chart = false;
  AttackOptions attack;  // the attacks' settings (the attack command's flags)
};

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

void robustness_cmd(RobustnessOptions o) {
  set_threads(o.attack.threads);
  check(!o.out.empty(), "robustness: --out DIR is required");
  check(!o.models.empty(), "robustness: give at least one --model NAME=FILE");
  std::vector<std::string> names, files;
  std::vector<LoadedModel> lms;
  for (const std::string& m : o.models) {
    const auto eq = m.find('=');
    check(eq != std::string::npos && eq > 0 && eq + 1 < m.size(), "robustness: --model '", m, "' is not NAME=FILE");
    check(std::find(names.begin(), names.end(), m.substr(0, eq)) == names.end(), "robustness: model name '",
          m.substr(0, eq), "' given twice");
    names.push_back(m.substr(0, eq)), files.push_back(m.substr(eq + 1));
    lms.push_back(quant::load_any_model(files.back()));
  }
  auto index_of = [&](const std::string& n) {
    const auto it = std::find(names.begin(), names.end(), n);
    check(it != names.end(), "robustness: no model named '", n, "' (models: ", join_list(names, ", "), ")");
    return static_cast<int>(it - names.begin());
  };
  std::vector<int> craft(names.size(), -1);
  for (const std::string& c : o.crafts) {
    const auto eq = c.find('=');
    check(eq != std::string::npos, "robustness: --craft '", c, "' is not NAME=SOURCE");
    craft[static_cast<std::size_t>(index_of(c.substr(0, eq)))] = index_of(c.substr(eq + 1));
  }
  const InputNorm norm = input_norm_from_metadata(lms[0].metadata);
  for (std::size_t m = 0; m < lms.size(); ++m) {
    check(lms[m].model.input_shape == lms[0].model.input_shape, "robustness: ", files[m], " takes ",
          shape_str(lms[m].model.input_shape), ", ", files[0], " takes ", shape_str(lms[0].model.input_shape));
    const InputNorm nm = input_norm_from_metadata(lms[m].metadata);
    check(nm.mean == norm.mean && nm.std == norm.std, "robustness: ", files[m], " normalises its inputs with mean ",
          nm.mean, ", std ", nm.std, "; ", files[0], " with ", norm.mean, ", ", norm.std,
          ": the models must share their input space");
  }
  // The attacks and their settings (the attack command's flags and conventions).
  std::vector<attacks::RobustnessAttack> atts;
  Tensor bounds = Tensor::from<float>({2}, {0.f, 1.f});
  apply_norm(bounds, norm);
  const double lo = std::isnan(o.attack.lo) ? bounds.at(0) : o.attack.lo;
  const double hi = std::isnan(o.attack.hi) ? bounds.at(1) : o.attack.hi;
  for (const std::string& name : split_list(o.attacks, ',')) {
    attacks::RobustnessAttack a;
    a.name = name;
    const bool decision = name == "boundary" || name == "single-pixel";
    AttackOptions ao = o.attack;
    ao.attack = name;
    if (!decision) {
      a.gradient = gradient_spec(ao, attacks::parse_attack_kind(name), false);
      a.gradient.lo = lo, a.gradient.hi = hi;
    } else {
      check(name == "boundary" || name == "single-pixel", "robustness: unknown attack '", name, "'");
      if (name == "boundary") a.boundary = boundary_spec(ao, lo, hi);
      if (name == "single-pixel") apply_convention(ao, attacks::AttackKind::fgsm, true);  // refuses what is not Foolbox 2's
      a.pixel.max_pixels = ao.max_pixels, a.pixel.lo = lo, a.pixel.hi = hi;
      a.pixel.transposed_index = ao.transposed_index;
    }
    atts.push_back(a);
  }
  Dataset test = load_split_for(lms[0], *o.attack.data.loader, o.attack.data, Split::test);
  check_data_fits(lms[0], files[0], test);
  std::vector<int64_t> idx(static_cast<std::size_t>(test.images.dim(0)));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  const Tensor x = gather_batch(test, idx, 0, test.images.dim(0), lms[0].model.dtype());
  std::vector<std::unique_ptr<Runner>> runners;
  std::vector<attacks::RobustnessModel> rm;
  // An int8 model attacked white-box on itself (no --craft): straight-through gradients of its
  // fake-quantized graph, its own decisions (quant/ste.h).
  std::vector<std::unique_ptr<Model>> fakes;
  const Device device = o.attack.dev.parsed();
  for (std::size_t m = 0; m < lms.size(); ++m) {
    check(lms[m].model.dtype() == lms[0].model.dtype(), "robustness: ", files[m], " computes in ",
          dtype_name(lms[m].model.dtype()), ", ", files[0], " in ", dtype_name(lms[0].model.dtype()));
    if (quant::is_quantized(lms[m]) && craft[m] < 0) {
      check(device == Device::cpu, "robustness: ", names[m], " (", files[m], ") is an int8 model attacked through the "
            "straight-through gradient of its fake-quantized graph (quant/ste.h), which has no device layers: run with "
            "--device cpu, or craft its examples on another model (--craft ", names[m], "=SOURCE)");
      fakes.push_back(std::make_unique<Model>(quant::fake_quant_model(lms[m].model)));
      runners.push_back(quant::open_ste_runner(lms[m].model, *fakes.back()));
    } else {
      runners.push_back(open_runner(lms[m].model, device));
    }
    rm.push_back({names[m], runners.back().get(), craft[m]});
  }
  const attacks::RobustnessTable t =
      attacks::run_robustness(rm, atts, x, test.labels, o.repeats, o.attack.seed, o.samples);

  // Outputs: JSON (everything), CSV (one row per model x attack x repeat), Markdown table, chart.
  std::filesystem::create_directories(o.out);
  json cells = json::array();
  for (std::size_t m = 0; m < names.size(); ++m) {
    json row = json::array();
    for (std::size_t a = 0; a < atts.size(); ++a) {
      const attacks::RobustnessCell& c = t.cell[m][a];
      row.push_back({{"rates", c.rates}, {"successes", c.successes}, {"mean", c.mean}, {"std", c.std},
                     {"mean_l2", c.mean_l2}, {"mean_linf", c.mean_linf}, {"mean_queries", c.mean_queries}});
    }
    cells.push_back(row);
  }
  json pairs = json::array();
  for (const auto& p : t.pairs)
    pairs.push_back({{"a", names[0]}, {"b", names[static_cast<std::size_t>(p.k)]}, {"wilcoxon_statistic", p.wilcoxon.statistic},
                     {"pvalue", p.wilcoxon.pvalue}, {"method", p.wilcoxon.method}, {"zeros", p.wilcoxon.zeros},
                     {"ties", p.wilcoxon.ties}, {"a12", p.a12}});
  json mj = json::array();
  for (std::size_t m = 0; m < names.size(); ++m)
    mj.push_back({{"name", names[m]}, {"weights", files[m]}, {"int8", quant::is_quantized(lms[m])},
                  {"crafted_on", craft[m] < 0 ? json(nullptr) : json(names[static_cast<std::size_t>(craft[m])])},
                  {"gradient", craft[m] >= 0            ? "the crafting model's"
                               : quant::is_quantized(lms[m]) ? "straight-through (fake-quantized graph)"
                                                             : "the model's own backward"},
                  {"clean_accuracy", t.clean_accuracy[m]}});
  json settings = json::array();  // what each attack ran with (after the convention filled the defaults)
  for (const attacks::RobustnessAttack& a : atts) {
    if (a.name == "boundary")
      settings.push_back({{"attack", a.name}, {"boundary_rules", attacks::boundary_rules_name(a.boundary.rules)},
                          {"iterations", a.boundary.steps}, {"max_directions", a.boundary.max_directions},
                          {"batch", a.boundary.batch}});
    else if (a.name == "single-pixel")
      settings.push_back({{"attack", a.name}, {"max_pixels", a.pixel.max_pixels}});
    else
      settings.push_back({{"attack", a.name}, {"convention", o.attack.convention}, {"eps", a.gradient.eps},
                          {"step", a.gradient.step}, {"steps", a.gradient.steps}});
  }
  const json j{{"models", names},       {"model_files", mj}, {"attacks", t.attacks}, {"settings", settings}, {"common", t.common},
               {"inputs", test.name},   {"seeds", t.seeds},  {"cells", cells},       {"R", t.r},
               {"pairs", pairs},        {"device", o.attack.dev.device}, {"commit", build_commit()}};
  {
    std::ofstream f(o.out + "/robustness.json");
    f << j.dump(1) << "\n";
    check(static_cast<bool>(f), "robustness: could not write ", o.out, "/robustness.json");
    std::ofstream c(o.out + "/robustness.csv");
    c << "model,attack,repeat,seed,samples,successes,success_rate\n";
    for (std::size_t m = 0; m < names.size(); ++m)
      for (std::size_t a = 0; a < atts.size(); ++a)
        for (std::size_t r = 0; r < t.seeds.size(); ++r)
          c << names[m] << "," << t.attacks[a] << "," << r << "," << t.seeds[r] << "," << t.common.size() << ","
            << t.cell[m][a].successes[r] << "," << fmt(t.cell[m][a].rates[r], 6) << "\n";
    check(static_cast<bool>(c), "robustness: could not write ", o.out, "/robustness.csv");
  }
  std::ostringstream md;
  md << "| model | clean acc. |";
  for (const std::string& a : t.attacks) md << " " << a << " success % |";
  md << " R(m) |\n|---|---|";
  for (std::size_t a = 0; a < atts.size(); ++a) md << "---|";
  md << "---|\n";
  for (std::size_t m = 0; m < names.size(); ++m) {
    md << "| " << names[m] << (quant::is_quantized(lms[m]) ? " (int8)" : "")
       << (craft[m] >= 0 ? ", crafted on " + names[static_cast<std::size_t>(craft[m])] : std::string()) << " | "
       << fmt(100 * t.clean_accuracy[m], 2) << " |";
    for (std::size_t a = 0; a < atts.size(); ++a) {
      md << " " << fmt(100 * t.cell[m][a].mean, 2);
      if (t.seeds.size() > 1) md << " ± " << fmt(100 * t.cell[m][a].std, 2);
      md << " |";
    }
    md << " " << fmt(t.r[m], 3) << " |\n";
  }
  for (const auto& p : t.pairs)
    md << "\n" << names[0] << " vs " << names[static_cast<std::size_t>(p.k)] << ": Wilcoxon signed-rank p = "
       << fmt(p.wilcoxon.pvalue, 4) << " (" << p.wilcoxon.method << ", over " << atts.size() * t.seeds.size()
       << " paired (attack, repeat) rates), A12 = " << fmt(p.a12, 3);
  if (!t.pairs.empty()) md << "\n";
  {
    std::ofstream f(o.out + "/table.md");
    f << md.str();
    check(static_cast<bool>(f), "robustness: could not write ", o.out, "/table.md");
  }
  std::cout << "robustness: " << names.size() << " models x " << atts.size() << " attacks x " << t.seeds.size()
            << " repeat(s) on the " << t.common.size() << " inputs of " << test.name
            << " that every model classifies correctly\n\n"
            << md.str() << "\n";
  if (!o.no_chart) {
    const std::string script = o.out + "/chart.py";
    {
      std::ofstream f(script);
      f << kRobustnessChart;
      check(static_cast<bool>(f), "robustness: could not write ", script);
    }
    const char* py = std::getenv("DRIFTLAB_PYTHON");
    const std::string cmd = std::string(py && *py ? py : "/usr/bin/python3") + " " + shell_quoted(script) + " " +
                            shell_quoted(o.out + "/robustness.json") + " " + shell_quoted(o.out + "/chart") + " 2>&1";
    int rc = 0;
    const std::string out = run_capture(cmd, &rc);
    check(rc == 0, "robustness: the chart needs Python 3 with matplotlib (apt-get install python3-matplotlib; "
          "or --no-chart): ", cmd, " said: ", out);
  }
  std::cout << "  wrote " << o.out << "/robustness.json, robustness.csv, table.md"
            << (o.no_chart ? "" : ", chart.png, chart.svg") << "\n";
}

}  // namespace

void register_robustness(CLI::App& app) {
  // robustness
  auto ro = std::make_shared<RobustnessOptions>();
  auto* rb = app.add_subcommand("robustness", "several models (fp32, int8, presets) under several attacks: success "
                                              "rates over the inputs every model classifies correctly, R(m), "
                                              "Wilcoxon/A12, a table and a bar chart");
  rb->add_option("--model", ro->models, "NAME=FILE (.dlm, fp32 or int8); repeatable, the first is the baseline")
      ->required();
  rb->add_option("--craft", ro->crafts, "NAME=SOURCE: NAME's white-box examples are crafted on model SOURCE "
                                        "(transfer, e.g. an int8 model from its fp32 one; without it an int8 model is attacked on its "
                                        "straight-through gradients); repeatable");
  rb->add_option("--attacks", ro->attacks, "comma-separated: fgsm, bim, pgd, boundary, single-pixel")
      ->capture_default_str();
  rb->add_option("--repeats", ro->repeats, "runs per attack, seeds --seed, --seed + 1, ...")->capture_default_str();
  rb->add_option("--samples", ro->samples, "at most this many of the inputs every model gets right (0: all; "
                                           "S1: 1000)")->capture_default_str();
  rb->add_flag("--no-chart", ro->no_chart, "skip the chart (it needs python3-matplotlib)");
  rb->add_option("--out", ro->out, "output folder")->required();
  rb->add_option("--convention", ro->attack.convention, "driftlab | foolbox2 | foolbox3 | art | torchattacks")
      ->capture_default_str();
  rb->add_option("--eps", ro->attack.eps, "white-box L-inf budget")->check(kFiniteNonNegative)->capture_default_str();
  rb->add_option("--eps-units", ro->attack.eps_units, "absolute | fraction")->capture_default_str();
  rb->add_option("--eps-schedule", ro->attack.eps_schedule, "fgsm: single | foolbox2-sweep")->capture_default_str();
  rb->add_option("--epsilons", ro->attack.epsilons, "foolbox2-sweep: grid size")->capture_default_str();
  rb->add_option("--max-epsilon", ro->attack.max_epsilon, "foolbox2-sweep: its end")->capture_default_str();
  rb->add_option("--step", ro->attack.step, "bim/pgd step")->check(kFiniteNonNegative)->capture_default_str();
  rb->add_option("--steps", ro->attack.steps, "bim/pgd iterations")->capture_default_str();
  rb->add_flag("--random-start", ro->attack.random_start, "pgd: uniform start in the ball");
  rb->add_flag("--early-stop", ro->attack.early_stop, "bim/pgd: stop a sample once misclassified");
  rb->add_option("--projection", ro->attack.projection, "bim/pgd: clip-delta | max-min (torchattacks' BIM)")
      ->capture_default_str();
  rb->add_option("--iterations", ro->attack.iterations, "boundary: steps (default the rules' own)");
  rb->add_option("--max-directions", ro->attack.max_directions, "boundary: candidates per step (Foolbox 2's)")
      ->capture_default_str();
  rb->add_option("--boundary-rules", ro->attack.boundary_rules, "boundary: foolbox2 | foolbox3 | art (default: the "
                 "convention's)");
  rb->add_option("--max-pixels", ro->attack.max_pixels, "single-pixel: positions tried")->capture_default_str();
  rb->add_option("--seed", ro->attack.seed, "the first repeat's seed")->capture_default_str();
  rb->add_option("--batch", ro->attack.batch, "inputs per gradient call")->capture_default_str();
  add_threads_option(rb, ro->attack.threads);
  add_data_options(rb, ro->attack.data);
  add_device_options(rb, ro->attack.dev);
  rb->callback([ro, rb] {
    RobustnessOptions o = *ro;
    for (const CLI::Option* opt : rb->get_options())
      if (opt->count() > 0) o.attack.given.insert(opt->get_name());
    robustness_cmd(o);
  });
}

}  // namespace cli
}  // namespace driftlab
