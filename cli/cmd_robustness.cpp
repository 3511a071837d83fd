// driftlab robustness: several models under several attacks (driftlab/robustness.h computes the
// table, report/robustness.h writes robustness.json, robustness.csv, table.md and the chart); the
// options and the printed table.
#include "cli/commands.h"
#include "cli/common.h"

#include <iostream>
#include <memory>
#include <string>

#include "driftlab/robustness.h"
#include "report/robustness.h"

namespace driftlab {
namespace cli {
namespace {

// The command's options: the request, and what only the command has.
struct RobustnessOptions {
  RobustnessRequest request;
  std::string out;
  bool no_chart = false;
  int threads = 0;
  DataOptions data;
  DeviceOptions dev;
};

void robustness_cmd(RobustnessOptions o) {
  set_threads(o.threads);
  check(!o.out.empty(), "robustness: --out DIR is required");
  o.request.data = o.data;
  o.request.loader = o.data.loader.get();
  o.request.device = o.dev.device;
  const RobustnessOutcome r = run_robustness(o.request);
  // Outputs: JSON (everything), CSV (one row per model x attack x repeat), Markdown table, chart.
  report::write_robustness(o.out, r);
  std::cout << "robustness: " << r.models.size() << " models x " << r.attacks.size() << " attacks x "
            << r.table.seeds.size() << " repeat(s) on the " << r.table.common.size() << " inputs of " << r.inputs
            << " that every model classifies correctly\n\n"
            << report::robustness_markdown(r) << "\n";
  if (!o.no_chart) report::write_robustness_chart(o.out);
  std::cout << "  wrote " << o.out << "/robustness.json, robustness.csv, table.md"
            << (o.no_chart ? "" : ", chart.png, chart.svg") << "\n";
}

}  // namespace

void register_robustness(CLI::App& app) {
  // robustness
  auto ro = std::make_shared<RobustnessOptions>();
  AttackSettings& as = ro->request.settings;  // the attacks' settings (the attack command's flags)
  auto* rb = app.add_subcommand("robustness", "several models (fp32, int8, presets) under several attacks: success "
                                              "rates over the inputs every model classifies correctly, R(m), "
                                              "Wilcoxon/A12, a table and a bar chart");
  rb->add_option("--model", ro->request.models, "NAME=FILE (.dlm, fp32 or int8); repeatable, the first is the baseline")
      ->required();
  rb->add_option("--craft", ro->request.crafts, "NAME=SOURCE: NAME's white-box examples are crafted on model SOURCE "
                                        "(transfer, e.g. an int8 model from its fp32 one; without it an int8 model is attacked on its "
                                        "straight-through gradients); repeatable");
  rb->add_option("--attacks", ro->request.attacks, "comma-separated: fgsm, bim, pgd, boundary, single-pixel")
      ->capture_default_str();
  rb->add_option("--repeats", ro->request.repeats, "runs per attack, seeds --seed, --seed + 1, ...")->capture_default_str();
  rb->add_option("--samples", ro->request.samples, "at most this many of the inputs every model gets right (0: all)")->capture_default_str();
  rb->add_flag("--no-chart", ro->no_chart, "skip the chart (it needs python3-matplotlib)");
  rb->add_option("--out", ro->out, "output folder")->required();
  rb->add_option("--convention", as.convention, "driftlab | foolbox2 | foolbox3 | art | torchattacks")
      ->capture_default_str();
  rb->add_option("--eps", as.eps, "white-box L-inf budget")->check(kFiniteNonNegative)->capture_default_str();
  rb->add_option("--eps-units", as.eps_units, "absolute | fraction")->capture_default_str();
  rb->add_option("--eps-schedule", as.eps_schedule, "fgsm: single | foolbox2-sweep")->capture_default_str();
  rb->add_option("--epsilons", as.epsilons, "foolbox2-sweep: grid size")->capture_default_str();
  rb->add_option("--max-epsilon", as.max_epsilon, "foolbox2-sweep: its end")->capture_default_str();
  rb->add_option("--step", as.step, "bim/pgd step")->check(kFiniteNonNegative)->capture_default_str();
  rb->add_option("--steps", as.steps, "bim/pgd iterations")->capture_default_str();
  rb->add_flag("--random-start", as.random_start, "pgd: uniform start in the ball");
  rb->add_option("--restarts", as.restarts, "pgd with --random-start: runs from seeds --seed, --seed + 1, ...")
      ->capture_default_str();
  rb->add_option("--restart-select", as.restart_select, "pgd --restarts: per-sample | per-run (ART <= 1.4)")
      ->capture_default_str();
  rb->add_flag("--early-stop", as.early_stop, "bim/pgd: stop a sample once misclassified");
  rb->add_option("--projection", as.projection, "bim/pgd: clip-delta | max-min (torchattacks' BIM)")
      ->capture_default_str();
  rb->add_option("--iterations", as.iterations, "boundary: steps (default the rules' own)");
  rb->add_option("--max-directions", as.max_directions, "boundary: candidates per step (Foolbox 2's)")
      ->capture_default_str();
  rb->add_option("--boundary-rules", as.boundary_rules, "boundary: foolbox2 | foolbox3 | art (default: the "
                 "convention's)");
  rb->add_option("--max-pixels", as.max_pixels, "single-pixel: positions tried")->capture_default_str();
  rb->add_option("--seed", as.seed, "the first repeat's seed")->capture_default_str()->check(CLI::NonNegativeNumber);
  rb->add_option("--batch", as.batch, "inputs per gradient call")->capture_default_str();
  add_threads_option(rb, ro->threads);
  add_data_options(rb, ro->data);
  add_device_options(rb, ro->dev);
  rb->callback([ro, rb] {
    RobustnessOptions o = *ro;
    for (const CLI::Option* opt : rb->get_options())
      if (opt->count() > 0) o.request.settings.given.insert(opt->get_name());
    robustness_cmd(o);
  });
}

}  // namespace cli
}  // namespace driftlab
