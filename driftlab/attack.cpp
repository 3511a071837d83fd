// Attacks on saved models (driftlab/attack.h): the settings and their conventions, the runner a
// model is attacked on, one attack with its 8-bit round trip, summaries and transfer.
#include "driftlab/attack.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "attacks/convention.h"
#include "driftlab/model.h"
#include "engine/io/npy.h"
#include "quant/model_io.h"
#include "quant/ste.h"
#include "train/run.h"

namespace driftlab {

void apply_convention(AttackSettings& o, attacks::AttackKind kind, bool decision) {
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

attacks::BoundarySpec boundary_spec(const AttackSettings& o, double lo, double hi) {
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

attacks::GradientAttackSpec gradient_spec(AttackSettings& o, attacks::AttackKind kind, bool decision) {
  apply_convention(o, kind, decision);
  attacks::GradientAttackSpec spec;
  spec.kind = kind;
  spec.eps = o.eps, spec.step = o.step, spec.steps = o.steps;
  spec.random_start = o.random_start, spec.early_stop = o.early_stop;
  spec.restarts = o.restarts, spec.restart_select = attacks::parse_restart_select(o.restart_select);
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

std::pair<double, double> attack_bounds(const AttackSettings& s, const InputNorm& norm) {
  Tensor bounds = Tensor::from<float>({2}, {0.f, 1.f});
  apply_norm(bounds, norm);
  return {std::isnan(s.lo) ? bounds.at(0) : s.lo, std::isnan(s.hi) ? bounds.at(1) : s.hi};
}

AttackRunner open_attack_runner(LoadedModel& m, bool white_box, Device device, const std::string& refusal) {
  AttackRunner r;
  if (quant::is_quantized(m) && white_box) {
    check(device == Device::cpu, refusal);
    r.fake = std::make_unique<Model>(quant::fake_quant_model(m.model));
    r.runner = quant::open_ste_runner(m.model, *r.fake);
  } else {
    r.runner = open_runner(m.model, device);
  }
  return r;
}

bool AttackOutcome::eps_schedule() const {
  return !decision && (spec.gradient.schedule == attacks::EpsSchedule::foolbox2_sweep ||
                       spec.gradient.schedule == attacks::EpsSchedule::foolbox2_search);
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

// --input / --labels: the inputs (checked against the model's input shape, normalised as it
// was trained) and their classes.
void read_inputs(const AttackRequest& q, const LoadedModel& lm, Tensor& x, std::vector<int32_t>& y) {
  check(!q.labels.empty(), "attack: --input needs --labels Y.npy (one class per input)");
  x = read_npy(q.input);
  check(x.dtype() == DType::f32 || x.dtype() == DType::f64, "attack: ", q.input, " holds ", dtype_name(x.dtype()),
        "; the model takes float32 or float64 inputs");
  Shape want{x.rank() ? x.dim(0) : 0};
  want.insert(want.end(), lm.model.input_shape.begin(), lm.model.input_shape.end());
  check(x.shape() == want && x.dim(0) >= 1, "attack: ", q.input, " has shape ", shape_str(x.shape()), ", model ",
        lm.model.name, " takes ", shape_str(want));
  x = x.to(lm.model.dtype());
  normalise_for(lm, x);
  const Tensor yl = read_npy(q.labels);
  check(yl.rank() == 1 && yl.dim(0) == x.dim(0), "attack: ", q.labels, " has shape ", shape_str(yl.shape()),
        ", expected [", x.dim(0), "]");
  for (int64_t i = 0; i < yl.numel(); ++i) {
    const double v = yl.at(i);
    check(v == std::floor(v) && v >= 0 && v < static_cast<double>(lm.model.num_classes), "attack: ", q.labels,
          " element ", i, " is ", v, ", not a class index of ", lm.model.name, " (0..", lm.model.num_classes - 1, ")");
    y.push_back(static_cast<int32_t>(v));
  }
}

double rate(int64_t s, int64_t n) { return n ? static_cast<double>(s) / static_cast<double>(n) : 0.0; }

}  // namespace

AttackOutcome run_attack(const AttackRequest& q) {
  AttackOutcome o;
  AttackSettings& s = o.settings;
  s = q.settings;
  o.weights = q.weights, o.device = q.device;
  o.spec.name = s.attack;
  o.decision = attacks::is_decision_based(s.attack);
  const attacks::AttackKind kind = o.decision ? attacks::AttackKind::fgsm : attacks::parse_attack_kind(s.attack);
  attacks::GradientAttackSpec& spec = o.spec.gradient;
  spec = gradient_spec(s, kind, o.decision);
  o.eight_bit = attacks::parse_eight_bit(s.eight_bit);
  SavedModel sm = open_model(q.weights);
  LoadedModel& lm = sm.loaded;
  o.model = lm.model.name, o.policy = lm.model.policy.to_string(), o.int8 = sm.int8();
  o.norm = sm.norm();
  std::tie(spec.lo, spec.hi) = attack_bounds(s, o.norm);
  Tensor x;
  std::vector<int32_t>& y = o.labels;
  if (!q.input.empty()) {
    read_inputs(q, lm, x, y);
    o.inputs = q.input;
  } else {
    DatasetLoader own;
    const Dataset test = load_data(sm, q.loader ? *q.loader : own, q.data, Split::test);
    x = all_inputs(test, lm.model.dtype());
    y = test.labels;
    o.inputs = test.name;
  }
  // The judges (transfer: the examples crafted here, judged by other models, e.g. the int8
  // version): loaded and checked before the attack runs.
  std::vector<LoadedModel> judges;
  for (const std::string& path : q.judges) {
    judges.push_back(quant::load_any_model(path));
    check(judges.back().model.input_shape == lm.model.input_shape, "attack: --judge ", path, " (",
          judges.back().model.name, ") takes ", shape_str(judges.back().model.input_shape), ", ", q.weights,
          " takes ", shape_str(lm.model.input_shape));
  }
  // With cuda the gradients and decisions come from the device's kernels (the attack's own
  // arithmetic, sign/clamp/projection and the judging, stays on the host: the same code for both).
  o.ran_on = parse_device(q.device);
  const AttackRunner runner = open_attack_runner(
      lm, !o.decision, o.ran_on,
      "attack: " + s.attack + " on the int8 model " + q.weights +
          " differentiates its fake-quantized graph (quant/ste.h), which has no device layers: run it with "
          "--device cpu (boundary and single-pixel run int8 models on the device)");
  attacks::AttackResult& r = o.result;
  if (s.attack == "single-pixel") {
    attacks::SinglePixelSpec& sp = o.spec.pixel;
    sp.max_pixels = s.max_pixels, sp.lo = spec.lo, sp.hi = spec.hi, sp.seed = s.seed;
    sp.transposed_index = s.transposed_index;
    check(x.rank() == 4, "attack: single-pixel takes images (N, C, H, W); ", lm.model.name, " takes ",
          shape_str(lm.model.input_shape));
  } else if (s.attack == "boundary") {
    o.spec.boundary = boundary_spec(s, spec.lo, spec.hi);
  }
  r = attacks::run_attack(*runner, x, y, o.spec);
  o.rule = o.decision ? attacks::SuccessRule::differs_from_label : spec.success;
  // the adversarial examples in the input's space (the model's normalisation undone)
  o.adversarial = to_input_space(r.x_adv, o.norm);
  Tensor& adv = o.adversarial;
  // Abyane & Hemmati's round trip (docs/GLOSSARY.md): the examples as 8-bit images, judged again
  if (o.eight_bit != attacks::EightBit::off) {
    for (uint8_t v : r.success) o.successes_before_8bit += v;
    try {
      adv = attacks::to_8bit(adv, o.eight_bit);
    } catch (const Error& e) {
      fail("attack: --uint8 ", s.eight_bit, " takes images in [0, 1] (the input space): ", e.what());
    }
    r.x_adv = adv.clone();
    normalise_for(lm, r.x_adv);
    r.adv_pred = predict_all(*runner, r.x_adv);
    attacks::finish_result(x, y, r, o.rule);
  }
  std::vector<uint8_t> correct(y.size());
  for (std::size_t i = 0; i < y.size(); ++i) correct[i] = r.clean_pred[i] == y[i];
  // Transfer: each judge's predictions on the clean and the adversarial inputs (in its own normalisation).
  std::vector<uint8_t> all_correct = correct;  // correct under every compared model
  const Tensor clean_in = to_input_space(x, o.norm);
  for (std::size_t k = 0; k < judges.size(); ++k) {
    LoadedModel& jm = judges[k];
    std::unique_ptr<Runner> jr = open_runner(jm.model, o.ran_on);
    Tensor xc = clean_in.to(jm.model.dtype()), xa = adv.to(jm.model.dtype());
    normalise_for(jm, xc);
    normalise_for(jm, xa);
    AttackJudge j;
    j.weights = q.judges[k], j.model = jm.model.name, j.int8 = quant::is_quantized(jm);
    j.clean = predict_all(*jr, xc), j.adv = predict_all(*jr, xa);
    for (std::size_t i = 0; i < y.size(); ++i) all_correct[i] = all_correct[i] && j.clean[i] == y[i];
    o.judges.push_back(std::move(j));
  }
  o.over_all = attacks::summarize(r), o.over_correct = attacks::summarize(r, correct);
  o.clean_accuracy = static_cast<double>(o.over_correct.samples) / static_cast<double>(y.size());
  if (o.eps_schedule()) {
    std::vector<double> found;
    for (std::size_t i = 0; i < y.size(); ++i)
      if (correct[i] && r.success[i]) found.push_back(r.eps_found[i]);
    double mean = 0;
    for (double v : found) mean += v;
    o.mean_eps_found = found.empty() ? 0.0 : mean / static_cast<double>(found.size());
  }
  // Transfer: success on each judge over the samples every compared model classifies correctly
  // (Abyane & Hemmati's denominator), and over those the judge classifies correctly.
  for (AttackJudge& j : o.judges) {
    int64_t n_all = 0, s_all = 0, n_own = 0, s_own = 0;
    for (std::size_t i = 0; i < y.size(); ++i) {
      const int32_t ref = o.rule == attacks::SuccessRule::differs_from_label ? y[i] : j.clean[i];
      const bool success = j.adv[i] != ref, own = j.clean[i] == y[i];
      n_own += own, s_own += own && success;
      n_all += all_correct[i], s_all += all_correct[i] && success;
    }
    j.samples_all = n_all, j.successes_all = s_all, j.samples_own = n_own, j.successes_own = s_own;
    j.rate_all = rate(s_all, n_all), j.rate_own = rate(s_own, n_own);
    j.clean_accuracy = rate(n_own, static_cast<int64_t>(y.size()));
  }
  if (!o.judges.empty()) o.over_correct_by_all = attacks::summarize(r, all_correct);
  return o;
}

}  // namespace driftlab
