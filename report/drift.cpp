#include "report/drift.h"

namespace driftlab {

nlohmann::json to_json(const OutputDrift& d) {
  return {{"abs_err_mean", d.abs_err_mean}, {"rel_err_mean", d.rel_err_mean}, {"mean_abs", d.mean_abs},
          {"max_abs", d.max_abs},           {"misclassification", d.misclassification}, {"n", d.n}};
}

nlohmann::json to_json(const Localisation& l) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& x : l.layers)
    layers.push_back({{"index", x.index}, {"layer", x.layer}, {"max_abs", x.max_abs}, {"max_rel", x.max_rel}});
  return {{"tolerance", l.tolerance}, {"first_divergent", l.first_divergent}, {"layers", layers}};
}

nlohmann::json to_json(const Attribution& a) {
  nlohmann::json single = nlohmann::json::array(), path = nlohmann::json::array();
  for (const auto& e : a.single) {
    nlohmann::json j = {{"knob", e.knob}, {"from", e.from_value}, {"to", e.to_value}, {"vs_from", to_json(e.vs_from)},
                        {"accuracy", e.accuracy}, {"changes_nothing", e.changes_nothing}};
    if (a.trained) {
      j["train_loss"] = e.train_loss;
      j["weight_distance"] = e.weight_distance;
    }
    single.push_back(j);
  }
  for (const auto& s : a.path)
    path.push_back({{"knob", s.knob}, {"policy", s.policy}, {"distance_to_to", s.distance_to_to}, {"share", s.share},
                    {"accuracy", s.accuracy}, {"train_loss", s.train_loss}});
  return {{"from", a.from}, {"to", a.to}, {"trained", a.trained}, {"total", to_json(a.total)},
          {"from_accuracy", a.from_accuracy}, {"to_accuracy", a.to_accuracy}, {"single", single}, {"path", path}};
}

nlohmann::json to_json(const CrossPolicyDrift& d) {
  nlohmann::json accuracy = nlohmann::json::array(), pairs = nlohmann::json::array();
  for (const auto& a : d.accuracy)
    accuracy.push_back({{"policy", a.policy.to_string()}, {"label", a.label}, {"accuracy", a.accuracy}});
  for (const auto& p : d.pairs)
    pairs.push_back({{"a", p.a.to_string()}, {"b", p.b.to_string()}, {"a_label", p.a_label}, {"b_label", p.b_label},
                     {"outputs", to_json(p.outputs)}, {"localisation", to_json(p.localisation)}});
  return {{"accuracy", accuracy}, {"pairs", pairs}};
}

namespace report {

std::string drift_json(const DriftResult& r) {
  nlohmann::json out = {{"model", r.model},   {"weights", r.weights},     {"weights_policy", r.weights_policy},
                        {"dataset", r.dataset}, {"n", r.n},               {"converted", r.converted},
                        {"device", r.device}};
  out.update(to_json(r.drift));
  return out.dump(2) + "\n";
}

std::string attribute_json(const AttributeResult& r) { return to_json(r.attribution).dump(2) + "\n"; }

}  // namespace report
}  // namespace driftlab
