#include "study/cells.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include "core/error.h"
#include "driftlab/attack.h"
#include "driftlab/convert.h"
#include "driftlab/drift.h"
#include "driftlab/evaluate.h"
#include "driftlab/quantize.h"
#include "driftlab/robustness.h"
#include "driftlab/train.h"
#include "report/attack.h"
#include "report/convert.h"
#include "study/files.h"

namespace driftlab {
namespace study {

namespace fs = std::filesystem;

namespace {

using Params = std::map<std::string, std::string>;

const std::string& param(const Cell& c, const std::string& key) {
  auto it = c.params.find(key);
  check(it != c.params.end(), "study: cell ", c.hash, " (", c.kind, ") has no parameter '", key, "'");
  return it->second;
}
int64_t int_param(const Cell& c, const std::string& key) { return std::stoll(param(c, key)); }
double real_param(const Cell& c, const std::string& key) { return std::stod(param(c, key)); }
bool bool_param(const Cell& c, const std::string& key) { return param(c, key) == "true"; }

// The data a cell reads: its own dataset when it names one, else the data of the trained model
// it descends from (dataset, folder and limit), with the cell's own limit when it sets one.
DataSpec data_of(const Plan& p, const Cell& c) {
  DataSpec d;
  const Cell* from = &c;
  while (param(*from, "dataset").empty()) {
    check(!from->inputs.empty(), "study: cell ", c.hash, " names no dataset and has no input to take one from");
    from = &p.cells.at(from->inputs.front());
  }
  d.dataset = param(*from, "dataset");
  d.data_dir = param(*from, "data_dir");
  d.limit = int_param(*from, "limit");
  if (from != &c && int_param(c, "limit") > 0) d.limit = int_param(c, "limit");
  return d;
}

nlohmann::ordered_json eval_json(const EvalResult& e) {
  nlohmann::ordered_json j;
  j["loss"] = e.loss;
  j["accuracy"] = e.accuracy;
  j["n"] = e.n;
  return j;
}

CellOutput train_cell(const Plan& p, const Cell& c, const std::string& dir, DatasetLoader& loader,
                      const std::function<bool()>& stop) {
  TrainRequest r;
  r.model = param(c, "model");
  r.policy = param(c, "policy");
  r.data = data_of(p, c);
  r.epochs = static_cast<int>(int_param(c, "epochs"));
  r.batch = int_param(c, "batch");
  r.optimizer = param(c, "optimizer");
  r.lr = real_param(c, "lr");
  if (!param(c, "momentum").empty()) r.momentum = real_param(c, "momentum");
  r.nesterov = bool_param(c, "nesterov");
  r.weight_decay = real_param(c, "weight_decay");
  r.schedule = param(c, "schedule");
  r.seed = static_cast<uint64_t>(int_param(c, "seed"));
  r.normalize = bool_param(c, "normalize");
  r.step_loss = bool_param(c, "step_loss");
  r.device = param(c, "device");
  r.checkpoint_every = int_param(c, "checkpoint_every");
  r.init = param(c, "init");
  r.out = dir + "/run";
  TrainRunHooks hooks;
  if (stop) hooks.stop_requested = stop;
  CellOutput out;
  TrainRunResult res;
  if (fs::exists(r.out + "/checkpoint.dlc")) {
    res = resume(read_run_checkpoint(r.out), r.out, loader, hooks);
    out.resumed = true;
  } else {
    fs::remove_all(r.out);  // a start that wrote no checkpoint: begin again
    res = train(r, loader, hooks);
  }
  check(!res.interrupted, "interrupted at epoch ", res.stopped_epoch, " (", res.stopped_step,
        " steps): the checkpoint goes on from there");
  nlohmann::ordered_json& j = out.results;
  j["policy"] = res.policy;
  nlohmann::ordered_json epochs = nlohmann::ordered_json::array(), times = nlohmann::ordered_json::array();
  double total = 0;
  for (const EpochStats& e : res.epochs) {
    nlohmann::ordered_json ej;
    ej["epoch"] = e.epoch;
    ej["train_loss"] = e.train_loss;
    ej["train_acc"] = e.train_acc;
    ej["val_loss"] = e.val_loss;
    ej["val_acc"] = e.val_acc;
    ej["lr"] = e.lr;
    ej["skipped_steps"] = e.skipped_steps;
    ej["overflow_steps"] = e.overflow_steps;
    ej["loss_scale"] = e.loss_scale;
    if (!e.step_losses.empty()) ej["step_losses"] = e.step_losses;
    epochs.push_back(ej);
    times.push_back({{"epoch", e.epoch}, {"seconds", e.seconds}, {"images_per_s", e.images_per_s}});
    total += e.seconds;
  }
  j["epochs"] = epochs;
  j["test"] = eval_json(res.test);
  j["model_bytes"] = res.model_bytes;
  out.timings["epochs"] = times;
  out.timings["train_seconds"] = total;
  return out;
}

CellOutput evaluate_cell(const Plan& p, const Cell& c, const std::string& study_dir, DatasetLoader& loader) {
  EvalRequest r;
  r.weights = cell_model(study_dir, p.cells.at(c.inputs.at(0)));
  r.data = data_of(p, c);
  r.batch = int_param(c, "batch");
  r.device = param(c, "device");
  const Evaluation e = evaluate(r, loader);
  CellOutput out;
  out.results["model"] = e.model;
  out.results["policy"] = e.policy;
  out.results["test"] = eval_json(e.test);
  return out;
}

CellOutput quantize_cell(const Plan& p, const Cell& c, const std::string& study_dir, DatasetLoader& loader) {
  QuantizeRequest r;
  r.weights = cell_model(study_dir, p.cells.at(c.inputs.at(0)));
  r.out = cell_model(study_dir, c);
  r.scheme = param(c, "scheme");
  r.knobs = param(c, "knobs");
  r.observer = param(c, "observer");
  r.mode = param(c, "mode");
  r.calib = int_param(c, "calib");
  r.calib_batch = int_param(c, "calib_batch");
  r.data = data_of(p, c);
  const QuantizeResult q = quantize(r, loader);
  // The int8 model on the test split, as an evaluate cell would measure it.
  EvalRequest e;
  e.weights = r.out;
  e.data = r.data;
  const Evaluation ev = evaluate(e, loader);
  CellOutput out;
  out.results["model"] = q.model;
  out.results["policy"] = q.policy;
  out.results["dynamic"] = q.dynamic;
  out.results["calibration_samples"] = q.calibration_samples;
  out.results["test"] = eval_json(ev.test);
  return out;
}

// The prediction time of 1,000 and 10,000 inputs (S1's RQ2): the sizes and the model in the
// results, the seconds in the timings (a time is not a result two machines can agree on).
CellOutput predict_time_cell(const Plan& p, const Cell& c, const std::string& study_dir, DatasetLoader& loader) {
  PredictRequest r;
  r.weights = cell_model(study_dir, p.cells.at(c.inputs.at(0)));
  r.device = param(c, "device");
  r.data = data_of(p, c);
  r.sizes.clear();
  std::istringstream sizes(param(c, "sizes"));
  for (std::string v; std::getline(sizes, v, ',');) r.sizes.push_back(std::stoll(v));
  const PredictTiming t = time_predictions(r, loader);
  CellOutput out;
  out.results["model"] = t.model;
  out.results["policy"] = t.policy;
  out.results["sizes"] = r.sizes;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const PredictTimingRow& row : t.rows) {
    nlohmann::ordered_json j;
    j["inputs"] = row.inputs;
    j["seconds"] = row.time.host_to_host_s;
    if (row.time.device_forward_s >= 0) j["device_forward_seconds"] = row.time.device_forward_s;
    rows.push_back(j);
  }
  out.timings["runner"] = t.runner;
  out.timings["threads"] = t.threads;
  out.timings["predictions"] = rows;
  return out;
}

// A parameter the spec gives counts as the command's flag given: the convention fills the others.
template <typename Set>
void given(const Cell& c, AttackSettings& s, const char* key, const char* flag, Set set) {
  if (param(c, key).empty()) return;
  set(param(c, key));
  s.given.insert(flag);
}

// The settings the attack and robustness kinds share (study/kinds.cpp attack_params).
void attack_settings(const Cell& c, AttackSettings& s) {
  s.convention = param(c, "convention");
  s.seed = static_cast<uint64_t>(int_param(c, "seed"));
  s.batch = int_param(c, "batch");
  given(c, s, "eps", "--eps", [&](const std::string& v) { s.eps = std::stod(v); });
  given(c, s, "step", "--step", [&](const std::string& v) { s.step = std::stod(v); });
  given(c, s, "steps", "--steps", [&](const std::string& v) { s.steps = std::stoi(v); });
  given(c, s, "eps_units", "--eps-units", [&](const std::string& v) { s.eps_units = v; });
  given(c, s, "eps_schedule", "--eps-schedule", [&](const std::string& v) { s.eps_schedule = v; });
  given(c, s, "epsilons", "--epsilons", [&](const std::string& v) { s.epsilons = std::stoi(v); });
  given(c, s, "max_epsilon", "--max-epsilon", [&](const std::string& v) { s.max_epsilon = std::stod(v); });
  given(c, s, "max_pixels", "--max-pixels", [&](const std::string& v) { s.max_pixels = std::stoll(v); });
  given(c, s, "iterations", "--iterations", [&](const std::string& v) { s.iterations = std::stoi(v); });
  given(c, s, "max_directions", "--max-directions", [&](const std::string& v) { s.max_directions = std::stoi(v); });
}

nlohmann::ordered_json summary_json(const attacks::AttackSummary& s) {
  nlohmann::ordered_json j;
  j["samples"] = s.samples;
  j["successes"] = s.successes;
  j["success_rate"] = s.success_rate;
  j["zero_gradients"] = s.zero_gradients;
  j["mean_linf"] = s.mean_linf;
  j["mean_l2"] = s.mean_l2;
  j["mean_l0"] = s.mean_l0;
  if (s.mean_queries > 0) j["mean_queries"] = s.mean_queries;
  return j;
}

CellOutput attack_cell(const Plan& p, const Cell& c, const std::string& study_dir) {
  AttackRequest r;
  r.weights = cell_model(study_dir, p.cells.at(c.inputs.at(0)));
  for (std::size_t i = 1; i < c.inputs.size(); ++i) r.judges.push_back(cell_model(study_dir, p.cells.at(c.inputs[i])));
  r.data = data_of(p, c);
  r.device = param(c, "device");
  AttackSettings& s = r.settings;
  attack_settings(c, s);
  s.attack = param(c, "attack");
  s.eight_bit = param(c, "eight_bit");
  given(c, s, "random_start", "--random-start", [&](const std::string& v) { s.random_start = v == "true"; });
  given(c, s, "early_stop", "--early-stop", [&](const std::string& v) { s.early_stop = v == "true"; });
  const AttackOutcome o = run_attack(r);
  CellOutput out;
  nlohmann::ordered_json& j = out.results;
  j["model"] = o.model;
  j["policy"] = o.policy;
  j["int8"] = o.int8;
  j["attack"] = o.settings.attack;
  j["convention"] = o.settings.convention;
  j["eps"] = o.settings.eps;
  j["eps_units"] = o.settings.eps_units;
  j["steps"] = o.settings.steps;
  j["step"] = o.settings.step;
  j["clean_accuracy"] = o.clean_accuracy;
  j["over_all"] = summary_json(o.over_all);
  j["over_correct"] = summary_json(o.over_correct);
  // With judges: the attacked model's rate over the samples every model gets right, the samples
  // the judges' rate_all counts over (the comparison S2 makes).
  if (!o.judges.empty()) j["over_correct_by_all"] = summary_json(o.over_correct_by_all);
  if (o.eight_bit != attacks::EightBit::off) j["successes_before_8bit"] = o.successes_before_8bit;
  nlohmann::ordered_json judges = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < o.judges.size(); ++i) {
    const AttackJudge& jd = o.judges[i];
    nlohmann::ordered_json x;
    x["cell"] = p.cells.at(c.inputs.at(i + 1)).hash;
    x["model"] = jd.model;
    x["int8"] = jd.int8;
    x["clean_accuracy"] = jd.clean_accuracy;
    x["rate_all"] = jd.rate_all;
    x["rate_own"] = jd.rate_own;
    x["successes_all"] = jd.successes_all;
    x["samples_all"] = jd.samples_all;
    judges.push_back(x);
  }
  j["judges"] = judges;
  // The examples as `driftlab attack --out` leaves them (adversarial.npy, samples.csv, result.json):
  // what a convert cell that needs this one judges before and after conversion.
  report::write_attack(cell_dir(study_dir, c), o, false);
  return out;
}

// The trained model's weights under each policy (driftlab/drift.h): the accuracies, and per pair
// (each policy against every one before it) the softmax outputs' errors, misclassification and the
// first layer past the tolerance.
CellOutput drift_cell(const Plan& p, const Cell& c, const std::string& study_dir, DatasetLoader& loader) {
  DriftRequest r;
  r.weights = cell_model(study_dir, p.cells.at(c.inputs.at(0)));
  r.policies = param(c, "policies");
  r.convert = bool_param(c, "convert");
  r.tolerance = real_param(c, "tolerance");
  r.localise_batch = int_param(c, "localise_batch");
  r.device = param(c, "device");
  r.data = data_of(p, c);
  const DriftResult d = drift(r, loader);
  CellOutput out;
  nlohmann::ordered_json& j = out.results;
  j["model"] = d.model;
  j["weights_policy"] = d.weights_policy;
  j["converted"] = d.converted;
  j["n"] = d.n;
  nlohmann::ordered_json acc = nlohmann::ordered_json::array();
  for (const PolicyAccuracy& a : d.drift.accuracy) acc.push_back({{"policy", a.label}, {"accuracy", a.accuracy}});
  j["accuracy"] = acc;
  nlohmann::ordered_json pairs = nlohmann::ordered_json::array();
  for (const PolicyPair& pr : d.drift.pairs) {
    nlohmann::ordered_json x;
    x["a"] = pr.a_label;
    x["b"] = pr.b_label;
    x["abs_err_mean"] = pr.outputs.abs_err_mean;
    x["rel_err_mean"] = pr.outputs.rel_err_mean;
    x["mean_abs"] = pr.outputs.mean_abs;
    x["max_abs"] = pr.outputs.max_abs;
    x["misclassification"] = pr.outputs.misclassification;
    const Localisation& l = pr.localisation;
    x["first_divergent_layer"] = l.first_divergent >= 0 ? l.layers.at(static_cast<std::size_t>(l.first_divergent)).layer
                                                         : std::string();
    pairs.push_back(x);
  }
  j["pairs"] = pairs;
  return out;
}

// Where ONNX Runtime is: the folder holding ort_run.js and its node_modules (onnxruntime-node).
// The driftlab command sets DRIFTLAB_ORT_DIR to its source tree's tests/oracles/ort unless the
// environment already names one; a worker inherits it.
std::string ort_dir() {
  const char* e = std::getenv("DRIFTLAB_ORT_DIR");
  check(e && *e, "study: a convert cell runs ONNX Runtime: set DRIFTLAB_ORT_DIR to the folder holding ort_run.js and "
        "its node_modules (tests/oracles/ort after `npm ci --ignore-scripts` there)");
  return e;
}

// The attack a convert cell judges, as its column of R(m, c) is named: "fgsm eps 0.1", "boundary".
std::string attack_name(const nlohmann::json& attack_results) {
  std::string a = attack_results.value("attack", std::string("?"));
  if (a != "boundary" && a != "single-pixel" && attack_results.contains("eps")) {
    std::ostringstream e;
    e << a << " eps " << attack_results["eps"].get<double>();
    a = e.str();
  }
  return a;
}

// Openja et al.'s conversion measurements on the model of the first need (driftlab/convert.h): the
// cell's folder holds model.onnx, ONNX Runtime's logits, convert.json and convert.csv (the test
// inputs written for ONNX Runtime are removed: the dataset is not a result). With an attack as second
// need (crafted on that same model), its examples judged by driftlab and by ONNX Runtime.
CellOutput convert_cell(const Plan& p, const Cell& c, const std::string& study_dir, DatasetLoader& loader) {
  const Cell& model = p.cells.at(c.inputs.at(0));
  ConversionRequest r;
  r.weights = cell_model(study_dir, model);
  r.to = param(c, "to");
  r.out = cell_dir(study_dir, c);
  r.onnx.opset = int_param(c, "opset");
  r.onnx.quant_form = param(c, "quant_form");
  r.onnx.naive_pads = bool_param(c, "naive_pads");
  r.onnx.naive_rnn_gates = bool_param(c, "naive_rnn_gates");
  r.onnx.doc = "driftlab study cell " + c.hash;  // no path in the file: its size is a result
  r.repeats = int_param(c, "repeats");
  r.threads = static_cast<int>(int_param(c, "threads"));
  r.ort_dir = ort_dir();
  r.data = data_of(p, c);
  nlohmann::json attack;
  if (c.inputs.size() > 1) {
    const Cell& a = p.cells.at(c.inputs[1]);
    check(!a.inputs.empty() && a.inputs.front() == c.inputs.front(), "study: step '", c.step, "': the attack ", a.hash,
          " (step '", a.step, "') was crafted on another model than the one this cell converts (", model.hash,
          ", step '", model.step, "'): S3 judges a model's own adversarial examples");
    r.adversarial = cell_dir(study_dir, a);
    check(fs::exists(r.adversarial + "/adversarial.npy"), "study: ", r.adversarial, " holds no adversarial.npy (an attack "
          "cell run by a build before 2026-11-29): remove its results.json and run the study again");
    attack = read_json_if_any(r.adversarial + "/results.json");
  }
  const ConversionResult res = measure_conversion(r, loader);
  report::write_conversion_files(r.out, res);
  fs::remove(r.out + "/inputs.npy");
  CellOutput out;
  nlohmann::ordered_json& j = out.results;
  j["model"] = res.model;
  j["policy"] = res.policy;
  j["conversion"] = res.conversion;
  j["opset"] = res.opset;
  j["inputs"] = res.inputs;
  j["n"] = res.n;
  j["ort_version"] = res.ort_version;
  j["notes"] = res.notes;
  j["accuracy_before"] = res.accuracy_before;
  j["accuracy_after"] = res.accuracy_after;
  j["abs_err_mean"] = res.abs_err_mean;
  j["rel_err_mean"] = res.rel_err_mean;
  j["mean_abs"] = res.mean_abs;
  j["max_abs"] = res.max_abs;
  j["misclassification"] = res.misclassification;
  j["logits_max_abs"] = res.logits_max_abs;
  j["logits_max_rel"] = res.logits_max_rel;
  j["size_before"] = res.size_before;
  j["size_after"] = res.size_after;
  if (res.adversarial) {
    const ConversionAdversarial& a = *res.adversarial;
    j["adversarial"] = {{"attack", attack_name(attack)}, {"cell", p.cells.at(c.inputs[1]).hash}, {"n", a.n},
                        {"success_before", a.success_before}, {"success_after", a.success_after},
                        {"variation", a.variation}, {"predictions_differ", a.predictions_differ}};
  }
  out.timings["threads"] = res.threads;
  out.timings["load_ms_before"] = res.load_ms_before;
  out.timings["load_ms_after"] = res.load_ms_after;
  out.timings["inference_ms_before"] = res.inference_ms_before;
  out.timings["inference_ms_after"] = res.inference_ms_after;
  return out;
}

// R(m, c) over the gathered convert cells (driftlab/convert.h conversion_robustness): a row per
// (model, conversion), named by what tells the rows apart among the model's name, its policy and
// the conversion (as the convert cells measured them: cells of several steps name them alike); a
// column per attack.
CellOutput convert_robustness_cell(const Plan& p, const Cell& c, const std::string& study_dir) {
  std::vector<std::string> dirs;
  const std::vector<std::string> keys_in_order = {"model", "policy", "conversion"};
  std::vector<std::map<std::string, std::string>> lab(c.inputs.size());
  std::vector<std::string> weights(c.inputs.size());
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    const Cell& cv = p.cells.at(c.inputs[i]);
    check(cv.inputs.size() == 2, "study: step '", c.step, "': the convert cell ", cv.hash, " (step '", cv.step,
          "') judges no attack: R(m, c) needs every conversion's adversarial examples");
    dirs.push_back(cell_dir(study_dir, cv));
    const nlohmann::json res = read_json_if_any(dirs.back() + "/results.json");
    for (const std::string& k : keys_in_order) lab[i][k] = res.value(k, std::string());
    weights[i] = cell_model(study_dir, p.cells.at(cv.inputs.front()));
  }
  // A key names the rows where the keys before it leave rows with different values alike.
  std::vector<std::string> keys;
  for (const std::string& k : keys_in_order) {
    bool tells = false;
    for (std::size_t i = 0; i < lab.size() && !tells; ++i)
      for (std::size_t j = i + 1; j < lab.size() && !tells; ++j) {
        bool alike = lab[i][k] != lab[j][k];
        for (const std::string& before : keys) alike = alike && lab[i][before] == lab[j][before];
        tells = alike;
      }
    if (tells) keys.push_back(k);
  }
  auto name_of = [&](std::size_t i) {
    std::string name;
    for (const std::string& k : keys) name += (name.empty() ? "" : "/") + lab[i][k];
    return name;
  };
  const ConversionRobustness t = conversion_robustness(dirs);
  CellOutput out;
  nlohmann::ordered_json& j = out.results;
  j["attacks"] = t.attacks;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const ConversionRobustness::Row& row : t.rows) {
    std::size_t i = 0;
    while (i < weights.size() && (weights[i] != row.weights || lab[i]["conversion"] != row.conversion)) ++i;
    check(i < weights.size(), "study: step '", c.step, "': a row of R(m, c) for an unknown model ", row.weights);
    std::string name = name_of(i);
    if (name.empty()) name = row.model + " " + row.conversion;
    nlohmann::ordered_json r;
    r["name"] = name;
    r["model"] = row.model;
    r["conversion"] = row.conversion;
    r["R"] = row.R;
    for (std::size_t a = 0; a < t.attacks.size(); ++a)
      r["attacks"][t.attacks[a]] = {{"success_before", row.cells[a].before}, {"success_after", row.cells[a].after},
                                    {"variation", row.cells[a].variation}};
    rows.push_back(r);
  }
  j["rows"] = rows;
  return out;
}

// A robustness table over the gathered models (driftlab/robustness.h): each model named by the
// values that tell its cell apart from the other inputs' (policy, scheme, ...), the first input the
// baseline of the Wilcoxon/A12 pairs.
CellOutput robustness_cell(const Plan& p, const Cell& c, const std::string& study_dir) {
  // The labels of each input (its own parameters too as step.key).
  std::vector<std::map<std::string, std::string>> lab(c.inputs.size());
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    const Cell& in = p.cells.at(c.inputs[i]);
    for (const auto& [k, v] : cell_labels(p, in)) lab[i][k.find('.') == std::string::npos ? in.step + "." + k : k] = v;
  }
  std::vector<std::string> differ;
  for (const auto& [k, v] : lab.front())
    for (const auto& l : lab)
      if (l.count(k) && l.at(k) != v) {
        differ.push_back(k);
        break;
      }
  RobustnessRequest r;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    std::string name;
    for (const std::string& k : differ) name += (name.empty() ? "" : "/") + lab[i][k];
    if (name.empty()) name = "m" + std::to_string(i + 1);
    names.push_back(name);
    r.models.push_back(name + "=" + cell_model(study_dir, p.cells.at(c.inputs[i])));
  }
  r.attacks = param(c, "attacks");
  r.repeats = static_cast<int>(int_param(c, "repeats"));
  r.samples = int_param(c, "samples");
  r.data = data_of(p, c);
  r.device = param(c, "device");
  attack_settings(c, r.settings);
  const RobustnessOutcome o = run_robustness(r);
  const attacks::RobustnessTable& t = o.table;
  CellOutput out;
  nlohmann::ordered_json& j = out.results;
  j["models"] = names;
  j["attacks"] = t.attacks;
  j["common_samples"] = t.common.size();
  j["seeds"] = t.seeds;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (std::size_t m = 0; m < t.models.size(); ++m) {
    nlohmann::ordered_json row;
    row["model"] = names.at(m);
    row["cell"] = p.cells.at(c.inputs[m]).hash;
    row["clean_accuracy"] = t.clean_accuracy.at(m);
    row["R"] = t.r.at(m);
    for (std::size_t a = 0; a < t.attacks.size(); ++a) {
      const attacks::RobustnessCell& rc = t.cell[m][a];
      row["attacks"][t.attacks[a]] = {{"rates", rc.rates}, {"mean", rc.mean}, {"std", rc.std},
                                       {"mean_l2", rc.mean_l2}, {"mean_linf", rc.mean_linf}};
    }
    rows.push_back(row);
  }
  j["rows"] = rows;
  nlohmann::ordered_json pairs = nlohmann::ordered_json::array();
  for (const auto& pr : t.pairs)
    pairs.push_back({{"model", names.at(static_cast<std::size_t>(pr.k))}, {"against", names.front()},
                     {"wilcoxon_p", pr.wilcoxon.pvalue}, {"a12", pr.a12}});
  j["pairs"] = pairs;
  return out;
}

}  // namespace

std::string cell_dir(const std::string& study_dir, const Cell& c) { return study_dir + "/cells/" + c.hash; }

bool cell_done(const std::string& study_dir, const Cell& c) {
  return fs::exists(cell_dir(study_dir, c) + "/results.json");
}

std::string cell_model(const std::string& study_dir, const Cell& c) {
  if (c.kind == "train") return cell_dir(study_dir, c) + "/run/model.dlm";
  if (c.kind == "quantize") return cell_dir(study_dir, c) + "/model.dlm";
  fail("study: a ", c.kind, " cell (", c.step, ") makes no model");
}

CellOutput run_cell(const Plan& plan, std::size_t i, const std::string& study_dir, DatasetLoader& loader,
                    const std::function<bool()>& stop) {
  const Cell& c = plan.cells.at(i);
  const std::string dir = cell_dir(study_dir, c);
  fs::create_directories(dir);
  if (c.kind == "train") return train_cell(plan, c, dir, loader, stop);
  if (c.kind == "evaluate") return evaluate_cell(plan, c, study_dir, loader);
  if (c.kind == "quantize") return quantize_cell(plan, c, study_dir, loader);
  if (c.kind == "attack") return attack_cell(plan, c, study_dir);
  if (c.kind == "predict_time") return predict_time_cell(plan, c, study_dir, loader);
  if (c.kind == "robustness") return robustness_cell(plan, c, study_dir);
  if (c.kind == "convert") return convert_cell(plan, c, study_dir, loader);
  if (c.kind == "drift") return drift_cell(plan, c, study_dir, loader);
  if (c.kind == "convert_robustness") return convert_robustness_cell(plan, c, study_dir);
  fail("study: step '", c.step, "': the kind '", c.kind, "' is planned but not run yet (this build runs train, "
       "evaluate, quantize, attack, predict_time, robustness, drift, convert, convert_robustness)");
}

}  // namespace study
}  // namespace driftlab
