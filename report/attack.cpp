// The files of one attack (report/attack.h): adversarial.npy, png/, result.json, samples.csv.
#include "report/attack.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include "attacks/images.h"
#include "engine/build_info.h"
#include "engine/io/npy.h"

namespace driftlab {
namespace report {

using nlohmann::json;

std::string fixed_point(double v, int prec) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

namespace {

json summary_json(const attacks::AttackSummary& s) {
  return json{{"samples", s.samples}, {"successes", s.successes}, {"success_rate", s.success_rate},
              {"zero_gradients", s.zero_gradients}, {"mean_l0", s.mean_l0}, {"mean_l2", s.mean_l2},
              {"mean_linf", s.mean_linf}, {"median_l2", s.median_l2}, {"median_linf", s.median_linf},
              {"mean_queries", s.mean_queries}};
}

json result_json(const AttackOutcome& o) {
  const AttackSettings& s = o.settings;
  const attacks::GradientAttackSpec& spec = o.spec.gradient;
  const attacks::AttackResult& r = o.result;
  json j{{"attack", s.attack},
         {"model", o.model},
         {"weights", o.weights},
         {"int8", o.int8},
         {"gradient", o.decision ? "none (decision-based)"
                      : o.int8   ? "straight-through: the fake-quantized float graph (quant/ste.h)"
                                 : "the model's own backward"},
         {"policy", o.policy},
         {"device", o.device},
         {"inputs", o.inputs},
         {"convention", s.convention},
         {"eps", spec.eps},
         {"eps_units", s.eps_units},
         {"eps_schedule", s.eps_schedule},
         {"step", spec.step},
         {"step_units", s.step_units},
         {"steps", spec.kind == attacks::AttackKind::fgsm ? 1 : spec.steps},
         {"random_start", spec.random_start},
         {"restarts", spec.restarts},
         {"projection", attacks::projection_name(spec.projection)},
         {"early_stop", spec.early_stop},
         {"labels_from", s.labels_from},
         {"success", attacks::success_rule_name(o.rule)},
         {"uint8", s.eight_bit},
         {"seed", spec.seed},
         {"bounds", {spec.lo, spec.hi}},
         {"input_norm", {{"mean", o.norm.mean}, {"std", o.norm.std}}},
         {"gradient_calls", r.gradient_calls},
         {"clean_accuracy", o.clean_accuracy},
         {"over_correctly_classified", summary_json(o.over_correct)},
         {"over_all", summary_json(o.over_all)},
         {"commit", build_commit()}};
  if (o.eps_schedule()) {
    if (spec.schedule == attacks::EpsSchedule::foolbox2_sweep)
      j["epsilons"] = s.epsilons, j["max_epsilon"] = s.max_epsilon;
    else
      j["start_eps"] = s.eps;  // the search's first eps; each sample's own is in samples.csv (eps_found)
    j.erase("eps");
    j["mean_eps_found"] = o.mean_eps_found;
  }
  if (spec.restarts > 1) j["restart_select"] = attacks::restart_select_name(spec.restart_select);
  if (o.eight_bit != attacks::EightBit::off) j["successes_before_uint8"] = o.successes_before_8bit;
  if (o.decision) {  // no gradient, no eps-ball: the decision-based attacks' own settings
    j["gradient_calls"] = 0;
    for (const char* k : {"eps", "eps_units", "eps_schedule", "step", "step_units", "steps", "random_start", "restarts",
                          "early_stop", "labels_from", "convention", "projection"})
      j.erase(k);
  }
  if (s.attack == "boundary") {
    const attacks::BoundarySpec& bs = o.spec.boundary;
    j["boundary_rules"] = attacks::boundary_rules_name(bs.rules);
    j["iterations"] = bs.steps, j["max_directions"] = bs.max_directions;
    if (bs.rules == attacks::BoundaryRules::foolbox3) j["boundary_batch"] = bs.batch;
  }
  if (s.attack == "single-pixel") j["max_pixels"] = s.max_pixels, j["transposed_index"] = s.transposed_index;
  json tj = json::array();
  for (const AttackJudge& jd : o.judges)
    tj.push_back({{"weights", jd.weights},
                  {"model", jd.model},
                  {"int8", jd.int8},
                  {"clean_accuracy", jd.clean_accuracy},
                  {"over_correct_by_all",
                   {{"samples", jd.samples_all}, {"successes", jd.successes_all}, {"success_rate", jd.rate_all}}},
                  {"over_correct_by_judge",
                   {{"samples", jd.samples_own}, {"successes", jd.successes_own}, {"success_rate", jd.rate_own}}}});
  if (!o.judges.empty()) {
    j["over_correct_by_all"] = summary_json(o.over_correct_by_all);
    j["transfer"] = tj;
  }
  return j;
}

}  // namespace

void write_attack(const std::string& out, const AttackOutcome& o, bool png) {
  std::filesystem::create_directories(out);
  write_npy(out + "/adversarial.npy", o.adversarial);
  if (png) {
    std::filesystem::create_directories(out + "/png");
    attacks::write_pngs(out + "/png", "adv_", o.adversarial);
  }
  const attacks::AttackResult& r = o.result;
  const std::vector<int32_t>& y = o.labels;
  std::ofstream f(out + "/result.json");
  f << result_json(o).dump(1) << "\n";
  check(static_cast<bool>(f), "attack: could not write ", out, "/result.json");
  std::ofstream c(out + "/samples.csv");
  c << "index,label,clean_pred,adv_pred,success,zero_gradient,l0,l2,linf,queries";
  if (!r.eps_found.empty()) c << ",eps_found";
  for (std::size_t k = 0; k < o.judges.size(); ++k) c << ",judge" << k << "_clean_pred,judge" << k << "_adv_pred";
  c << "\n";
  for (std::size_t i = 0; i < y.size(); ++i) {
    c << i << "," << y[i] << "," << r.clean_pred[i] << "," << r.adv_pred[i] << "," << int(r.success[i]) << ","
      << int(r.zero_gradient[i]) << "," << r.l0[i] << "," << fixed_point(r.l2[i], 6) << ","
      << fixed_point(r.linf[i], 6) << "," << (r.queries.empty() ? 0 : r.queries[i]);
    if (!r.eps_found.empty())
      c << "," << (std::isnan(r.eps_found[i]) ? std::string("nan") : fixed_point(r.eps_found[i], 6));
    for (const AttackJudge& jd : o.judges) c << "," << jd.clean[i] << "," << jd.adv[i];
    c << "\n";
  }
  check(static_cast<bool>(c), "attack: could not write ", out, "/samples.csv");
}

}  // namespace report
}  // namespace driftlab
