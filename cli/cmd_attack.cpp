// driftlab attack: one attack on one saved model, its examples, result.json and samples.csv.
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
#include "attacks/convention.h"
#include "attacks/gradient.h"
#include "attacks/images.h"
#include "attacks/single_pixel.h"
#include "cli/attack_options.h"
#include "engine/build_info.h"
#include "engine/data/transform.h"
#include "engine/io/npy.h"
#include "engine/train/runner.h"
#include "quant/model_io.h"
#include "quant/report.h"
#include "quant/ste.h"

namespace driftlab {
namespace cli {
using nlohmann::json;

// The convention's value for every attack setting the command line did not give.
void apply_convention(AttackOptions& o, attacks::AttackKind kind, bool decision) {
  const attacks::Convention c = attacks::convention(o.convention);
  if (c.name == "driftlab") return;
  if (decision) {  // Boundary's rules come from the convention in boundary_spec
    check(o.attack == "boundary" || c.name == "foolbox2", "attack: --convention ", c.name, ": single-pixel is "
          "Foolbox 2's attack (Foolbox 3 has none; ART's and torchattacks' pixel attacks are differential evolution, "
          "not reproduced)");
    return;
  }
  auto unless = [&](const char* flag, auto& field, auto value) {
    if (!o.given.count(flag)) field = value;
  };
  unless("--eps-units", o.eps_units, std::string(c.units == attacks::EpsUnits::absolute ? "absolute" : "fraction"));
  unless("--labels-from", o.labels_from, std::string(c.labels == attacks::LabelSource::true_label ? "true" : "prediction"));
  unless("--success", o.success, std::string(attacks::success_rule_name(c.success)));
  if (kind == attacks::AttackKind::fgsm) {
    unless("--eps-schedule", o.eps_schedule,
           std::string(c.fgsm_schedule == attacks::EpsSchedule::single ? "single" : "foolbox2-sweep"));
    unless("--epsilons", o.epsilons, c.sweep_epsilons);
    unless("--max-epsilon", o.max_epsilon, c.max_epsilon);
  } else {
    // a step's units are BIM's and PGD's (FGSM's one step is eps itself)
    unless("--eps-schedule", o.eps_schedule,
           std::string(c.iterative_schedule == attacks::EpsSchedule::single ? "single" : "foolbox2-search"));
    unless("--step-units", o.step_units, std::string(c.step_units == attacks::StepUnits::like_eps ? "eps" : "of-eps"));
    unless("--early-stop", o.early_stop, c.early_stop);
    if (kind == attacks::AttackKind::pgd) unless("--random-start", o.random_start, c.pgd_random_start);
    if (kind == attacks::AttackKind::bim)
      unless("--projection", o.projection, std::string(attacks::projection_name(c.bim_projection)));
    const bool bim = kind == attacks::AttackKind::bim;
    if (bim ? c.bim_step > 0 : c.pgd_step > 0) unless("--step", o.step, bim ? c.bim_step : c.pgd_step);
    if (bim ? c.bim_steps > 0 : c.pgd_steps > 0) unless("--steps", o.steps, bim ? c.bim_steps : c.pgd_steps);
  }
  if (o.eps_schedule != "foolbox2-sweep") {  // one eps, or the search's starting eps
    check(c.eps > 0 || o.given.count("--eps"), "attack: --convention ", c.name, " has no default eps: give --eps");
    unless("--eps", o.eps, c.eps);
  }
}

// The Boundary attack's spec: the rules of --boundary-rules, else of the convention (driftlab:
// Foolbox 2's), with that library's defaults for every flag not given.
attacks::BoundarySpec boundary_spec(const AttackOptions& o, double lo, double hi) {
  std::string rules = o.boundary_rules;
  if (rules.empty()) {
    const attacks::Convention c = attacks::convention(o.convention);
    check(c.name != "torchattacks", "attack: --convention torchattacks: torchattacks has no Boundary attack "
          "(give --boundary-rules foolbox2 | foolbox3 | art)");
    rules = c.name == "driftlab" ? "foolbox2" : c.name;
  }
  attacks::BoundarySpec bs = attacks::boundary_defaults(attacks::parse_boundary_rules(rules));
  if (o.given.count("--iterations")) bs.steps = o.iterations;
  if (o.given.count("--max-directions")) bs.max_directions = o.max_directions;
  if (bs.rules == attacks::BoundaryRules::foolbox3) {
    check(o.batch >= 1 && o.batch <= (1 << 20), "attack: --batch ", o.batch, " must be in [1, 2^20]");
    bs.batch = static_cast<int>(o.batch);
  }
  bs.lo = lo, bs.hi = hi, bs.seed = o.seed;
  bs.validate();
  return bs;
}

namespace {

// The input space's images (the model's normalisation undone), and back.
Tensor to_input_space(const Tensor& x, const InputNorm& norm) {
  Tensor adv = x.clone();
  if (!norm.identity())
    dispatch_dtype(adv.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* d = adv.data<T>();
      for (int64_t i = 0; i < adv.numel(); ++i) d[i] = d[i] * static_cast<T>(norm.std) + static_cast<T>(norm.mean);
    });
  return adv;
}

std::vector<int32_t> predict_all(Runner& runner, const Tensor& x) {
  return predictions(runner.logits(x));  // the CPU runner runs any size as one batch
}

}  // namespace

// The white-box spec of the options (after the convention filled what was not given); lo/hi
// are the caller's.
attacks::GradientAttackSpec gradient_spec(AttackOptions& o, attacks::AttackKind kind, bool decision) {
  apply_convention(o, kind, decision);
  attacks::GradientAttackSpec spec;
  spec.kind = kind;
  spec.eps = o.eps, spec.step = o.step, spec.steps = o.steps;
  spec.random_start = o.random_start, spec.early_stop = o.early_stop;
  spec.seed = o.seed, spec.batch = o.batch;
  check(o.eps_units == "absolute" || o.eps_units == "fraction", "attack: --eps-units '", o.eps_units,
        "' (absolute: input units; fraction: of hi - lo, Foolbox 2's)");
  spec.units = o.eps_units == "absolute" ? attacks::EpsUnits::absolute : attacks::EpsUnits::fraction_of_range;
  check(o.step_units == "eps" || o.step_units == "of-eps", "attack: --step-units '", o.step_units,
        "' (eps: in eps's units; of-eps: a fraction of eps, Foolbox 3's rel_stepsize)");
  spec.step_units = o.step_units == "eps" ? attacks::StepUnits::like_eps : attacks::StepUnits::fraction_of_eps;
  check(o.labels_from == "true" || o.labels_from == "prediction", "attack: --labels-from '", o.labels_from,
        "' (true | prediction)");
  spec.labels = o.labels_from == "true" ? attacks::LabelSource::true_label : attacks::LabelSource::clean_prediction;
  check(o.eps_schedule == "single" || o.eps_schedule == "foolbox2-sweep" || o.eps_schedule == "foolbox2-search",
        "attack: --eps-schedule '", o.eps_schedule, "' (single | foolbox2-sweep: FGSM | foolbox2-search: BIM, PGD)");
  spec.schedule = o.eps_schedule == "single"           ? attacks::EpsSchedule::single
                  : o.eps_schedule == "foolbox2-sweep" ? attacks::EpsSchedule::foolbox2_sweep
                                                       : attacks::EpsSchedule::foolbox2_search;
  spec.sweep_epsilons = o.epsilons, spec.max_epsilon = o.max_epsilon;
  spec.success = attacks::parse_success_rule(o.success);
  spec.projection = attacks::parse_projection(o.projection);
  return spec;
}

namespace {

void attack_cmd(AttackOptions o) {
  set_threads(o.threads);
  check(!o.out.empty(), "attack: --out DIR is required");
  const bool decision = o.attack == "boundary" || o.attack == "single-pixel";
  const attacks::AttackKind kind = decision ? attacks::AttackKind::fgsm : attacks::parse_attack_kind(o.attack);
  attacks::GradientAttackSpec spec = gradient_spec(o, kind, decision);
  const attacks::EightBit eight_bit = attacks::parse_eight_bit(o.eight_bit);
  LoadedModel lm = quant::load_any_model(o.weights);
  const InputNorm norm = input_norm_from_metadata(lm.metadata);
  // The valid range in the model's input space: the images' [0, 1] through the model's own
  // normalisation (the same float ops as apply_norm), unless --lo/--hi say otherwise.
  Tensor bounds = Tensor::from<float>({2}, {0.f, 1.f});
  apply_norm(bounds, norm);
  spec.lo = std::isnan(o.lo) ? bounds.at(0) : o.lo;
  spec.hi = std::isnan(o.hi) ? bounds.at(1) : o.hi;
  Tensor x;
  std::vector<int32_t> y;
  std::string from;
  if (!o.input.empty()) {
    check(!o.labels.empty(), "attack: --input needs --labels Y.npy (one class per input)");
    x = read_npy(o.input);
    check(x.dtype() == DType::f32 || x.dtype() == DType::f64, "attack: ", o.input, " holds ", dtype_name(x.dtype()),
          "; the model takes float32 or float64 inputs");
    Shape want{x.rank() ? x.dim(0) : 0};
    want.insert(want.end(), lm.model.input_shape.begin(), lm.model.input_shape.end());
    check(x.shape() == want && x.dim(0) >= 1, "attack: ", o.input, " has shape ", shape_str(x.shape()), ", model ",
          lm.model.name, " takes ", shape_str(want));
    x = x.to(lm.model.dtype());
    normalise_for(lm, x);
    const Tensor yl = read_npy(o.labels);
    check(yl.rank() == 1 && yl.dim(0) == x.dim(0), "attack: ", o.labels, " has shape ", shape_str(yl.shape()),
          ", expected [", x.dim(0), "]");
    for (int64_t i = 0; i < yl.numel(); ++i) {
      const double v = yl.at(i);
      check(v == std::floor(v) && v >= 0 && v < 1e6, "attack: ", o.labels, " element ", i, " is ", v,
            ", not a class index");
      y.push_back(static_cast<int32_t>(v));
    }
    from = o.input;
  } else {
    Dataset test = load_split_for(lm, *o.data.loader, o.data, Split::test);
    check_data_fits(lm, o.weights, test);
    std::vector<int64_t> idx(static_cast<std::size_t>(test.images.dim(0)));
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
    x = gather_batch(test, idx, 0, test.images.dim(0), lm.model.dtype());
    y = test.labels;
    from = test.name;
  }
  // The judges (transfer: the examples crafted here, judged by other models, e.g. the int8
  // version): loaded and checked before the attack runs.
  std::vector<LoadedModel> judges;
  for (const std::string& path : o.judges) {
    judges.push_back(quant::load_any_model(path));
    check(judges.back().model.input_shape == lm.model.input_shape, "attack: --judge ", path, " (",
          judges.back().model.name, ") takes ", shape_str(judges.back().model.input_shape), ", ", o.weights,
          " takes ", shape_str(lm.model.input_shape));
  }
  // White-box attacks on an int8 model: the straight-through gradient of its fake-quantized float
  // graph, the decisions the int8 model's own (quant/ste.h).
  // With --device cuda the gradients and decisions come from the device's kernels (the attack's own
  // arithmetic, sign/clamp/projection and the judging, stays on the host: the same code for both).
  const Device device = o.dev.parsed();
  Model fake;
  std::unique_ptr<Runner> runner;
  if (quant::is_quantized(lm) && !decision) {
    check(device == Device::cpu, "attack: ", o.attack, " on the int8 model ", o.weights,
          " differentiates its fake-quantized graph (quant/ste.h), which has no device layers: run it with "
          "--device cpu (boundary and single-pixel run int8 models on the device)");
    fake = quant::fake_quant_model(lm.model);
    runner = quant::open_ste_runner(lm.model, fake);
  } else {
    runner = open_runner(lm.model, device);
  }
  attacks::AttackResult r;
  attacks::BoundarySpec bs;
  if (o.attack == "single-pixel") {
    attacks::SinglePixelSpec sp;
    sp.max_pixels = o.max_pixels, sp.lo = spec.lo, sp.hi = spec.hi, sp.seed = o.seed;
    sp.transposed_index = o.transposed_index;
    check(x.rank() == 4, "attack: single-pixel takes images (N, C, H, W); ", lm.model.name, " takes ",
          shape_str(lm.model.input_shape));
    attacks::SinglePixelResult d = attacks::run_single_pixel(*runner, x, y, sp);
    r.x_adv = d.x_adv, r.clean_pred = d.clean_pred, r.adv_pred = d.adv_pred, r.queries = d.queries;
    attacks::finish_result(x, y, r);
  } else if (o.attack == "boundary") {
    bs = boundary_spec(o, spec.lo, spec.hi);
    attacks::BoundaryResult d = attacks::run_boundary(*runner, x, y, bs);
    r.x_adv = d.x_adv, r.clean_pred = d.clean_pred, r.adv_pred = d.adv_pred, r.queries = d.queries;
    attacks::finish_result(x, y, r);
  } else {
    r = attacks::run_gradient_attack(*runner, x, y, spec);
  }
  const attacks::SuccessRule rule = decision ? attacks::SuccessRule::differs_from_label : spec.success;
  // the adversarial examples in the input's space (the model's normalisation undone)
  Tensor adv = to_input_space(r.x_adv, norm);
  // S2's round trip: the examples as 8-bit images, judged again
  int64_t successes_before_8bit = 0;
  if (eight_bit != attacks::EightBit::off) {
    for (uint8_t v : r.success) successes_before_8bit += v;
    try {
      adv = attacks::to_8bit(adv, eight_bit);
    } catch (const Error& e) {
      fail("attack: --uint8 ", o.eight_bit, " takes images in [0, 1] (the input space): ", e.what());
    }
    r.x_adv = adv.clone();
    normalise_for(lm, r.x_adv);
    r.adv_pred = predict_all(*runner, r.x_adv);
    attacks::finish_result(x, y, r, rule);
  }
  std::vector<uint8_t> correct(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) correct[i] = r.clean_pred[i] == y[i];
  // Transfer: each judge's predictions on the clean and the adversarial inputs (in its own normalisation).
  struct Judged {
    std::vector<int32_t> clean, adv;
  };
  std::vector<Judged> judged;
  std::vector<uint8_t> all_correct = correct;  // correct under every compared model
  const Tensor clean_in = to_input_space(x, norm);
  for (LoadedModel& jm : judges) {
    std::unique_ptr<Runner> jr = open_runner(jm.model, device);
    Tensor xc = clean_in.to(jm.model.dtype()), xa = adv.to(jm.model.dtype());
    normalise_for(jm, xc);
    normalise_for(jm, xa);
    judged.push_back({predict_all(*jr, xc), predict_all(*jr, xa)});
    for (std::size_t i = 0; i < y.size(); ++i) all_correct[i] = all_correct[i] && judged.back().clean[i] == y[i];
  }
  const attacks::AttackSummary all = attacks::summarize(r), on_correct = attacks::summarize(r, correct);
  std::filesystem::create_directories(o.out);
  write_npy(o.out + "/adversarial.npy", adv);
  if (o.png) {
    std::filesystem::create_directories(o.out + "/png");
    attacks::write_pngs(o.out + "/png", "adv_", adv);
  }
  auto summary_json = [](const attacks::AttackSummary& s) {
    return json{{"samples", s.samples}, {"successes", s.successes}, {"success_rate", s.success_rate},
                {"zero_gradients", s.zero_gradients}, {"mean_l0", s.mean_l0}, {"mean_l2", s.mean_l2},
                {"mean_linf", s.mean_linf}, {"median_l2", s.median_l2}, {"median_linf", s.median_linf},
                {"mean_queries", s.mean_queries}};
  };
  json j{{"attack", o.attack},
         {"model", lm.model.name},
         {"weights", o.weights},
         {"int8", quant::is_quantized(lm)},
         {"gradient", decision ? "none (decision-based)"
                      : quant::is_quantized(lm) ? "straight-through: the fake-quantized float graph (quant/ste.h)"
                                                : "the model's own backward"},
         {"policy", lm.model.policy.to_string()},
         {"device", o.dev.device},
         {"inputs", from},
         {"convention", o.convention},
         {"eps", spec.eps},
         {"eps_units", o.eps_units},
         {"eps_schedule", o.eps_schedule},
         {"step", spec.step},
         {"step_units", o.step_units},
         {"steps", spec.kind == attacks::AttackKind::fgsm ? 1 : spec.steps},
         {"random_start", spec.random_start},
         {"projection", attacks::projection_name(spec.projection)},
         {"early_stop", spec.early_stop},
         {"labels_from", o.labels_from},
         {"success", attacks::success_rule_name(rule)},
         {"uint8", o.eight_bit},
         {"seed", spec.seed},
         {"bounds", {spec.lo, spec.hi}},
         {"input_norm", {{"mean", norm.mean}, {"std", norm.std}}},
         {"gradient_calls", r.gradient_calls},
         {"clean_accuracy", static_cast<double>(on_correct.samples) / static_cast<double>(y.size())},
         {"over_correctly_classified", summary_json(on_correct)},
         {"over_all", summary_json(all)},
         {"commit", build_commit()}};
  if ((spec.schedule == attacks::EpsSchedule::foolbox2_sweep || spec.schedule == attacks::EpsSchedule::foolbox2_search) &&
      !decision) {
    if (spec.schedule == attacks::EpsSchedule::foolbox2_sweep)
      j["epsilons"] = o.epsilons, j["max_epsilon"] = o.max_epsilon;
    else
      j["start_eps"] = o.eps;  // the search's first eps; each sample's own is in samples.csv (eps_found)
    j.erase("eps");
    std::vector<double> found;
    for (std::size_t i = 0; i < y.size(); ++i)
      if (correct[i] && r.success[i]) found.push_back(r.eps_found[i]);
    double mean = 0;
    for (double v : found) mean += v;
    j["mean_eps_found"] = found.empty() ? 0.0 : mean / static_cast<double>(found.size());
  }
  if (eight_bit != attacks::EightBit::off) j["successes_before_uint8"] = successes_before_8bit;
  if (decision) {  // no gradient, no eps-ball: the decision-based attacks' own settings
    j["gradient_calls"] = 0;
    for (const char* k : {"eps", "eps_units", "eps_schedule", "step", "step_units", "steps", "random_start",
                          "early_stop", "labels_from", "convention", "projection"})
      j.erase(k);
  }
  if (o.attack == "boundary") {
    j["boundary_rules"] = attacks::boundary_rules_name(bs.rules);
    j["iterations"] = bs.steps, j["max_directions"] = bs.max_directions;
    if (bs.rules == attacks::BoundaryRules::foolbox3) j["boundary_batch"] = bs.batch;
  }
  if (o.attack == "single-pixel") j["max_pixels"] = o.max_pixels, j["transposed_index"] = o.transposed_index;
  // Transfer: success on each judge over the samples every compared model classifies correctly
  // (S2's denominator), and over those the judge classifies correctly.
  json tj = json::array();
  std::vector<double> judge_rates;
  for (std::size_t k = 0; k < judged.size(); ++k) {
    int64_t n_all = 0, s_all = 0, n_own = 0, s_own = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      const int32_t ref = rule == attacks::SuccessRule::differs_from_label ? y[i] : judged[k].clean[i];
      const bool success = judged[k].adv[i] != ref, own = judged[k].clean[i] == y[i];
      n_own += own, s_own += own && success;
      n_all += all_correct[i], s_all += all_correct[i] && success;
    }
    auto rate = [](int64_t s, int64_t n) { return n ? static_cast<double>(s) / static_cast<double>(n) : 0.0; };
    judge_rates.push_back(rate(s_all, n_all));
    tj.push_back({{"weights", o.judges[k]},
                  {"model", judges[k].model.name},
                  {"int8", quant::is_quantized(judges[k])},
                  {"clean_accuracy", rate(n_own, static_cast<int64_t>(y.size()))},
                  {"over_correct_by_all", {{"samples", n_all}, {"successes", s_all}, {"success_rate", rate(s_all, n_all)}}},
                  {"over_correct_by_judge", {{"samples", n_own}, {"successes", s_own}, {"success_rate", rate(s_own, n_own)}}}});
  }
  if (!judged.empty()) {
    const attacks::AttackSummary src = attacks::summarize(r, all_correct);
    j["over_correct_by_all"] = summary_json(src);
    j["transfer"] = tj;
  }
  {
    std::ofstream f(o.out + "/result.json");
    f << j.dump(1) << "\n";
    check(static_cast<bool>(f), "attack: could not write ", o.out, "/result.json");
    std::ofstream c(o.out + "/samples.csv");
    c << "index,label,clean_pred,adv_pred,success,zero_gradient,l0,l2,linf,queries";
    if (!r.eps_found.empty()) c << ",eps_found";
    for (std::size_t k = 0; k < judged.size(); ++k) c << ",judge" << k << "_clean_pred,judge" << k << "_adv_pred";
    c << "\n";
    for (std::size_t i = 0; i < y.size(); ++i) {
      c << i << "," << y[i] << "," << r.clean_pred[i] << "," << r.adv_pred[i] << "," << int(r.success[i]) << ","
        << int(r.zero_gradient[i]) << "," << r.l0[i] << "," << fmt(r.l2[i], 6) << "," << fmt(r.linf[i], 6) << ","
        << (r.queries.empty() ? 0 : r.queries[i]);
      if (!r.eps_found.empty()) c << "," << (std::isnan(r.eps_found[i]) ? std::string("nan") : fmt(r.eps_found[i], 6));
      for (const Judged& jd : judged) c << "," << jd.clean[i] << "," << jd.adv[i];
      c << "\n";
    }
    check(static_cast<bool>(c), "attack: could not write ", o.out, "/samples.csv");
  }
  std::cout << o.attack;
  if (!decision) {
    if (spec.schedule == attacks::EpsSchedule::foolbox2_sweep)
      std::cout << " sweep of " << o.epsilons << " eps up to " << o.max_epsilon << " (" << o.eps_units << ")";
    else
      std::cout << " eps " << spec.eps << " (" << o.eps_units << ")";
    if (o.convention != "driftlab") std::cout << ", " << o.convention << "'s conventions";
  }
  std::cout << " on " << y.size()
            << " inputs of " << from << " (" << lm.model.name << (quant::is_quantized(lm) ? " int8" : "") << ", "
            << lm.model.policy.to_string() << (device == Device::cuda ? ", cuda" : "") << ")\n"
            << "  clean accuracy " << fmt(static_cast<double>(on_correct.samples) / static_cast<double>(y.size()), 4)
            << "; success rate " << fmt(on_correct.success_rate, 4) << " over the " << on_correct.samples
            << " classified correctly (" << fmt(all.success_rate, 4) << " over all)\n"
            << "  per success: mean L2 " << fmt(on_correct.mean_l2, 4) << ", mean Linf " << fmt(on_correct.mean_linf, 4)
            << (decision ? "; mean queries " + fmt(on_correct.mean_queries, 1) : "; zero gradients " +
                                                                                   std::to_string(all.zero_gradients))
            << "\n";
  if (eight_bit != attacks::EightBit::off)
    std::cout << "  as 8-bit images (" << o.eight_bit << "): " << all.successes << " successes of "
              << successes_before_8bit << " before\n";
  for (std::size_t k = 0; k < judged.size(); ++k)
    std::cout << "  judged by " << o.judges[k] << ": success rate " << fmt(judge_rates[k], 4)
              << " over the " << tj[k]["over_correct_by_all"]["samples"].get<int64_t>()
              << " classified correctly by every model\n";
  std::cout << "  wrote " << o.out << "/adversarial.npy, result.json, samples.csv" << (o.png ? ", png/" : "") << "\n";
}

}  // namespace

void register_attack(CLI::App& app) {
  // attack
  auto ao = std::make_shared<AttackOptions>();
  auto* ak = app.add_subcommand("attack", "attack a saved model (fgsm, bim, pgd; boundary and single-pixel on int8 "
                                           "models too): "
                                           "adversarial examples (.npy), result.json, samples.csv");
  ak->add_option("--weights", ao->weights, "model file (.dlm); int8: white-box attacks on straight-through gradients (quant/ste.h)")->required();
  ak->add_option("--attack", ao->attack, "fgsm | bim | pgd | boundary | single-pixel")->capture_default_str();
  ak->add_option("--iterations", ao->iterations, "boundary: steps (Foolbox 2's iterations; default the rules' own: "
                 "5000 Foolbox 2, 25000 Foolbox 3)");
  ak->add_option("--max-directions", ao->max_directions, "boundary: candidates per step (Foolbox 2's; Foolbox 3: 1; ART: sample_size)")
      ->capture_default_str();
  ak->add_option("--boundary-rules", ao->boundary_rules, "boundary: foolbox2 | foolbox3 | art (default: the convention's; "
                 "driftlab: foolbox2). foolbox3 steps --batch samples together");
  ak->add_option("--max-pixels", ao->max_pixels, "single-pixel: positions tried")->capture_default_str();
  ak->add_flag("--transposed-index", ao->transposed_index, "single-pixel: Foolbox 2's (x = p % w) reading of a position");
  ak->add_option("--eps", ao->eps, "L-inf budget (--eps-units)")->check(kFiniteNonNegative)->capture_default_str();
  ak->add_option("--step", ao->step, "bim/pgd step size (--eps-units)")->check(kFiniteNonNegative)->capture_default_str();
  ak->add_option("--steps", ao->steps, "bim/pgd iterations")->capture_default_str();
  ak->add_flag("--random-start", ao->random_start, "pgd: start from a uniform point of the eps-ball (--seed)");
  ak->add_flag("--early-stop", ao->early_stop, "bim/pgd: a sample stops once misclassified (Foolbox 2's return_early)");
  ak->add_option("--projection", ao->projection, "bim/pgd: clip-delta (x0 + clamp(x - x0, -eps, eps), then the "
                 "bounds) | max-min (torchattacks' BIM)")->capture_default_str();
  ak->add_option("--eps-units", ao->eps_units, "absolute (input units) | fraction (of the input range: Foolbox 2)")
      ->capture_default_str();
  ak->add_option("--labels-from", ao->labels_from, "the loss's labels: true | prediction (ART's default)")
      ->capture_default_str();
  ak->add_option("--lo", ao->lo, "lowest valid input (default: 0 through the model's normalisation)");
  ak->add_option("--hi", ao->hi, "highest valid input (default: 1 through the model's normalisation)");
  ak->add_option("--seed", ao->seed, "pgd's random start")->capture_default_str();
  ak->add_option("--batch", ao->batch, "inputs per gradient call")->capture_default_str();
  ak->add_option("--input", ao->input, "attack these inputs (.npy, the model's input shape) instead of the test split");
  ak->add_option("--labels", ao->labels, "their classes (.npy, N integers)");
  ak->add_option("--convention", ao->convention,
                 "driftlab | foolbox2 | foolbox3 | art | torchattacks: the library's units, step rule, labels, "
                 "success rule, schedule and defaults for every flag not given")
      ->capture_default_str();
  ak->add_option("--eps-schedule", ao->eps_schedule, "fgsm: single | foolbox2-sweep (--epsilons, --max-epsilon); bim, pgd: single | foolbox2-search "
                  "(Foolbox 2's eps search from --eps, step/eps ratio kept)")
      ->capture_default_str();
  ak->add_option("--epsilons", ao->epsilons, "foolbox2-sweep: grid size (Foolbox 2's epsilons)")->capture_default_str();
  ak->add_option("--max-epsilon", ao->max_epsilon, "foolbox2-sweep: its end (--eps-units)")->capture_default_str();
  ak->add_option("--step-units", ao->step_units, "bim/pgd: eps (the step in eps's units) | of-eps (a fraction of "
                 "eps: Foolbox 3)")->capture_default_str();
  ak->add_option("--success", ao->success, "label (prediction != label) | clean-prediction (the prediction "
                 "changed: ART)")->capture_default_str();
  ak->add_option("--uint8", ao->eight_bit, "off | round | truncate: judge the examples as 8-bit images (S2's PNG)")
      ->capture_default_str();
  ak->add_flag("--png", ao->png, "also write each adversarial example as OUT/png/adv_<i>.png");
  ak->add_option("--judge", ao->judges, "judge the examples on this model too (transfer; e.g. its int8 version); "
                 "repeatable");
  ak->add_option("--out", ao->out, "output folder")->required();
  add_threads_option(ak, ao->threads);
  add_data_options(ak, ao->data);
  add_device_options(ak, ao->dev);
  ak->callback([ao, ak] {
    AttackOptions o = *ao;
    for (const CLI::Option* opt : ak->get_options())
      if (opt->count() > 0) o.given.insert(opt->get_name());
    attack_cmd(o);
  });
}

}  // namespace cli
}  // namespace driftlab
