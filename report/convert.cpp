#include "report/convert.h"
#include "report/csv.h"

#include <fstream>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/build_info.h"
#include "engine/io/container.h"

namespace driftlab {
namespace report {

namespace {

// convert.json's object (nlohmann's default object keeps its keys sorted).
nlohmann::json conversion_record(const ConversionResult& r) {
  nlohmann::json j = {
      {"model", r.model}, {"weights", r.weights}, {"policy", r.policy},
      {"conversion", r.conversion}, {"onnx", r.onnx},
      {"opset", r.opset}, {"inputs", r.inputs}, {"n", r.n}, {"threads", r.threads}, {"commit", build_commit()},
      {"ort_version", r.ort_version},
      {"accuracy_before", r.accuracy_before}, {"accuracy_after", r.accuracy_after},
      {"abs_err_mean", r.abs_err_mean}, {"rel_err_mean", r.rel_err_mean}, {"mean_abs", r.mean_abs},
      {"max_abs", r.max_abs}, {"misclassification", r.misclassification},
      {"logits_max_abs", r.logits_max_abs}, {"logits_max_rel", r.logits_max_rel},
      {"load_ms_before", r.load_ms_before}, {"load_ms_after", r.load_ms_after},
      {"inference_ms_before", r.inference_ms_before}, {"inference_ms_after", r.inference_ms_after},
      {"inference_ms_before_all", r.inference_ms_before_all}, {"inference_ms_after_all", r.inference_ms_after_all},
      {"size_before", r.size_before}, {"size_after", r.size_after}};
  if (r.adversarial) {
    const ConversionAdversarial& a = *r.adversarial;
    j["adversarial"] = {{"from", a.from}, {"n", a.n}, {"success_before", a.success_before},
                        {"success_after", a.success_after}, {"variation", a.variation},
                        {"predictions_differ", a.predictions_differ}};
  }
  return j;
}

}  // namespace

std::string quant_notes_text(const std::vector<std::string>& notes) {
  if (notes.empty()) return "";
  std::string s = "  ONNX Runtime will compute otherwise than this model's scheme (outputs may move by a step):\n";
  for (const std::string& n : notes) s += "    - " + n + "\n";
  return s;
}

std::string conversion_json(const ConversionResult& r) { return conversion_record(r).dump(2) + "\n"; }

std::string conversion_csv(const ConversionResult& r) {
  const nlohmann::json j = conversion_record(r);
  std::string c;
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!it->is_array()) c += (first ? "" : ",") + csv_cell(it.key()), first = false;
  c += "\n";
  first = true;
  for (auto it = j.begin(); it != j.end(); ++it)
    if (!it->is_array())
      c += (first ? "" : ",") + csv_cell(it->is_string() ? it->get<std::string>() : it->dump()), first = false;
  return c + "\n";
}

void write_conversion_files(const std::string& dir, const ConversionResult& r) {
  std::ofstream(dir + "/convert.json") << conversion_json(r);
  std::ofstream(dir + "/convert.csv") << conversion_csv(r);
}

std::string conversion_table(const ConversionResult& r) {
  std::ostringstream os;
  os << std::setprecision(4);
  os << "convert " << r.model << " (" << r.policy << ") to ONNX (opset " << r.opset << "), " << r.n << " inputs of "
     << r.inputs << ", " << r.threads << " thread(s); driftlab (before) vs ONNX Runtime " << r.ort_version
     << " (after)\n\n"
     << "| | driftlab | ONNX Runtime |\n|---|---|---|\n"
     << "| accuracy | " << r.accuracy_before << " | " << r.accuracy_after << " |\n"
     << "| load time (ms) | " << r.load_ms_before << " | " << r.load_ms_after << " |\n"
     << "| inference time (ms, median of " << r.repeats << ") | " << r.inference_ms_before << " | "
     << r.inference_ms_after << " |\n"
     << "| file size (bytes) | " << r.size_before << " | " << r.size_after << " |\n\n"
     << "softmax outputs, ONNX Runtime - driftlab: abs. error (signed mean) " << r.abs_err_mean << ", rel. error "
     << r.rel_err_mean << ", mean |d| " << r.mean_abs << ", max |d| " << r.max_abs << "; misclassification "
     << r.misclassification * 100 << "%\n"
     << "logits: max |d| " << r.logits_max_abs << " = " << r.logits_max_rel << " of the largest\n";
  return os.str();
}

std::string robustness_variation_table(const ConversionRobustness& t) {
  std::ostringstream os;
  os << "robustness variation over " << t.rows.size() << " model/conversion pairs and " << t.attacks.size()
     << " attacks: S = success rate of the model's own adversarial examples, before (driftlab) and after "
        "(the converted model in ONNX Runtime); R(m, c) = sum over attacks of the min-max scaled |S_conv - S_orig| "
        "(0: the least variation)\n\n| weights | conversion |";
  for (const std::string& a : t.attacks) os << " " << a << ": S_orig / S_conv |";
  os << " R(m, c) |\n|---|---|";
  for (std::size_t k = 0; k < t.attacks.size(); ++k) os << "---|";
  os << "---|\n";
  for (const ConversionRobustness::Row& row : t.rows) {
    os << "| " << row.weights << " | " << row.conversion << " |";
    for (const ConversionRobustness::Cell& c : row.cells) os << " " << c.before << " / " << c.after << " |";
    os << " " << row.R << " |\n";
  }
  return os.str();
}

std::string robustness_variation_json(const ConversionRobustness& t) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ConversionRobustness::Row& row : t.rows) {
    nlohmann::json per = nlohmann::json::object();
    for (std::size_t k = 0; k < t.attacks.size(); ++k) {
      const ConversionRobustness::Cell& c = row.cells[k];
      per[t.attacks[k]] = {{"success_before", c.before}, {"success_after", c.after}, {"variation", c.variation}};
    }
    rows.push_back({{"weights", row.weights}, {"conversion", row.conversion}, {"model", row.model},
                    {"attacks", per}, {"R", row.R}});
  }
  return nlohmann::json{{"rows", rows}, {"commit", build_commit()}}.dump(1) + "\n";
}

void write_robustness_variation_json(const std::string& path, const ConversionRobustness& t) {
  write_file_atomic(path, robustness_variation_json(t));
}

}  // namespace report
}  // namespace driftlab
