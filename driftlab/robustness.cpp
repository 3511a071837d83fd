// Robustness tables on saved models (driftlab/robustness.h): the models and their crafting
// sources, the checks that they share an input space, the attacks' settings, the runners.
#include "driftlab/robustness.h"

#include <algorithm>
#include <memory>
#include <sstream>

#include "driftlab/model.h"

namespace driftlab {

namespace {

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

}  // namespace

RobustnessOutcome run_robustness(const RobustnessRequest& q) {
  check(!q.models.empty(), "robustness: give at least one --model NAME=FILE");
  RobustnessOutcome o;
  o.convention = q.settings.convention, o.device = q.device;
  std::vector<std::string> names;
  std::vector<SavedModel> sms;
  for (const std::string& m : q.models) {
    const auto eq = m.find('=');
    check(eq != std::string::npos && eq > 0 && eq + 1 < m.size(), "robustness: --model '", m, "' is not NAME=FILE");
    check(std::find(names.begin(), names.end(), m.substr(0, eq)) == names.end(), "robustness: model name '",
          m.substr(0, eq), "' given twice");
    names.push_back(m.substr(0, eq));
    sms.push_back(open_model(m.substr(eq + 1)));
    o.models.push_back({names.back(), sms.back().path, sms.back().int8(), -1, sms.back().model().policy.to_string()});
  }
  auto index_of = [&](const std::string& n) {
    const auto it = std::find(names.begin(), names.end(), n);
    check(it != names.end(), "robustness: no model named '", n, "' (models: ", join_list(names, ", "), ")");
    return static_cast<int>(it - names.begin());
  };
  for (const std::string& c : q.crafts) {
    const auto eq = c.find('=');
    check(eq != std::string::npos, "robustness: --craft '", c, "' is not NAME=SOURCE");
    o.models[static_cast<std::size_t>(index_of(c.substr(0, eq)))].craft = index_of(c.substr(eq + 1));
  }
  const SavedModel& first = sms[0];
  const InputNorm norm = first.norm();
  for (const SavedModel& sm : sms) {
    check(sm.model().input_shape == first.model().input_shape, "robustness: ", sm.path, " takes ",
          shape_str(sm.model().input_shape), ", ", first.path, " takes ", shape_str(first.model().input_shape));
    const InputNorm nm = sm.norm();
    check(nm.mean == norm.mean && nm.std == norm.std, "robustness: ", sm.path, " normalises its inputs with mean ",
          nm.mean, ", std ", nm.std, "; ", first.path, " with ", norm.mean, ", ", norm.std,
          ": the models must share their input space");
  }
  // The attacks and their settings (the attack command's flags and conventions).
  const auto [lo, hi] = attack_bounds(q.settings, norm);
  for (const std::string& name : split_list(q.attacks, ',')) {
    attacks::AttackSpec a;
    a.name = name;
    AttackSettings s = q.settings;
    s.attack = name;
    if (!attacks::is_decision_based(name)) {
      a.gradient = gradient_spec(s, attacks::parse_attack_kind(name), false);
      a.gradient.lo = lo, a.gradient.hi = hi;
    } else {
      if (name == "boundary") a.boundary = boundary_spec(s, lo, hi);
      if (name == "single-pixel") apply_convention(s, attacks::AttackKind::fgsm, true);  // refuses what is not Foolbox 2's
      a.pixel.max_pixels = s.max_pixels, a.pixel.lo = lo, a.pixel.hi = hi;
      a.pixel.transposed_index = s.transposed_index;
    }
    o.attacks.push_back(a);
  }
  DatasetLoader own;
  const Dataset test = load_data(first, q.loader ? *q.loader : own, q.data, Split::test);
  const Tensor x = all_inputs(test, first.model().dtype());
  o.inputs = test.name;
  std::vector<AttackRunner> runners;
  std::vector<attacks::RobustnessModel> rm;
  const Device device = parse_device(q.device);
  for (std::size_t m = 0; m < sms.size(); ++m) {
    const RobustnessOutcome::Entry& e = o.models[m];
    check(sms[m].model().dtype() == first.model().dtype(), "robustness: ", e.file, " computes in ",
          dtype_name(sms[m].model().dtype()), ", ", first.path, " in ", dtype_name(first.model().dtype()));
    // An int8 model attacked white-box on itself (no --craft): straight-through gradients of its
    // fake-quantized graph, its own decisions (quant/ste.h).
    runners.push_back(open_attack_runner(
        sms[m].loaded, e.craft < 0, device,
        "robustness: " + e.name + " (" + e.file + ") is an int8 model attacked through the straight-through "
            "gradient of its fake-quantized graph (quant/ste.h), which has no device layers: run with --device "
            "cpu, or craft its examples on another model (--craft " + e.name + "=SOURCE)"));
    rm.push_back({e.name, runners.back().runner.get(), e.craft});
  }
  o.table = attacks::run_robustness(rm, o.attacks, x, test.labels, q.repeats, q.settings.seed, q.samples);
  return o;
}

}  // namespace driftlab
