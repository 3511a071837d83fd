// driftlab export (issue 18): a saved model written in an exchange format.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>
#include <omp.h>

#include "cli/commands.h"
#include "attacks/stats.h"
#include "cli/common.h"
#include "convert/onnx_export.h"
#include "convert/onnx_import.h"
#include "convert/tfjs_export.h"
#include "models/reparam.h"
#include "drift/drift.h"
#include "train/run.h"
#include "engine/build_info.h"
#include "engine/io/npy.h"
#include "engine/train/cpu_runner.h"
#include "engine/train/runner.h"
#include "core/error.h"
#include "engine/data/transform.h"
#include "models/model_file.h"
#include "quant/model_io.h"

namespace driftlab {
namespace cli {
namespace {

namespace fs = std::filesystem;

struct ExportOptions {
  std::string weights, format = "onnx", out, quant_form = "qdq";
  int64_t opset = 13;
  bool naive_pads = false, naive_rnn_gates = false;
};

convert::OnnxExportOptions::QuantForm quant_form_named(const std::string& f) {
  check(f == "qdq" || f == "qop", "--quant-form '", f, "' (known: qdq, qop)");
  return f == "qdq" ? convert::OnnxExportOptions::QuantForm::qdq : convert::OnnxExportOptions::QuantForm::qoperator;
}

// The exporter's notes on an int8 model: where ONNX Runtime computes otherwise than the scheme.
void print_quant_notes(const convert::OnnxExport& ex) {
  if (ex.notes.empty()) return;
  std::cout << "  ONNX Runtime will compute otherwise than this model's scheme (outputs may move by a step):\n";
  for (const std::string& n : ex.notes) std::cout << "    - " << n << "\n";
}

void export_cmd(const ExportOptions& o) {
  check(o.format == "onnx" || o.format == "tfjs", "export: --format '", o.format, "' (known: onnx, tfjs)");
  LoadedModel lm = quant::load_any_model(o.weights);
  const bool int8 = quant::is_quantized(lm);
  if (o.format == "tfjs") {
    check(!int8, "export: ", o.weights, " is an int8 model; a TF.js layers model is float: export its fp32 model");
    const convert::TfjsExport ex = convert::export_tfjs(lm.model, input_norm_from_metadata(lm.metadata));
    convert::write_tfjs(o.out, ex);
    std::cout << "export tfjs: " << lm.model.name << " under " << lm.model.policy.to_string()
              << " as a TF.js layers model (input channels-last)\n";
    for (const std::string& n : ex.layers) std::cout << "  " << n << "\n";
    std::cout << "wrote " << o.out << "/model.json and " << o.out << "/group1-shard1of1.bin (" << ex.weights.size()
              << " bytes)\n";
    return;
  }
  convert::OnnxExportOptions eo;
  eo.opset = o.opset;
  eo.norm = input_norm_from_metadata(lm.metadata);
  eo.doc = "driftlab export --weights " + o.weights;
  eo.symmetric_pads = o.naive_pads;
  eo.rnn_gates_as_stored = o.naive_rnn_gates;
  eo.quant_form = quant_form_named(o.quant_form);
  const convert::OnnxExport ex = convert::export_onnx(lm.model, eo);
  convert::write_onnx(o.out, ex.bytes);
  std::cout << "export onnx: " << lm.model.name << (int8 ? " (int8, " + o.quant_form + " form)" : "") << " under "
            << lm.model.policy.to_string() << ", opset " << o.opset << "\n";
  for (const std::string& n : ex.nodes) std::cout << "  " << n << "\n";
  print_quant_notes(ex);
  if (o.naive_pads || o.naive_rnn_gates)
    std::cout << "  (deliberately wrong: " << (o.naive_pads ? "--naive-pads " : "")
              << (o.naive_rnn_gates ? "--naive-rnn-gates" : "") << ")\n";
  std::cout << "wrote " << o.out << " (" << ex.bytes.size() << " bytes, " << ex.num_nodes << " nodes, "
            << ex.num_initializers << " initializers; ONNX checker: passed)\n";
}

struct ImportOptions {
  std::string file, format = "onnx", policy = "torch", out;
};

void import_cmd(const ImportOptions& o) {
  check(o.format == "onnx", "import: --format '", o.format, "' (known: onnx)");
  convert::OnnxImport im = convert::import_onnx(o.file);
  std::cout << "import onnx: " << o.file << " (" << im.producer << ", opset " << im.opset << ") is driftlab's "
            << im.model.name << "\n";
  for (const std::string& m : im.mapping) std::cout << "  " << m << "\n";
  Model m = std::move(im.model);
  const Policy target = Policy::parse(o.policy);
  if (target.to_string() != m.policy.to_string()) {
    // ONNX's semantics are the torch preset's; another preset gets the weights converted to its
    // conventions (flip, flatten order, layouts: models/reparam.h), its numeric knobs its own
    m = rebuild_under(m, target, true);
    std::cout << "  weights converted from the torch preset's conventions to " << o.policy << "'s\n";
  }
  save_model(o.out, m, {{"imported_from", o.file}, {"onnx_producer", im.producer}});
  std::cout << "wrote " << o.out << "\n";
}

struct ConvertOptions {
  std::string weights, to = "onnx", out, adversarial, quant_form = "qdq";
  bool naive_pads = false, naive_rnn_gates = false;
  int64_t opset = 13, repeats = 3;
  int threads = 0;
  DataOptions data;
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The folder holding ort_run.js and its node_modules (onnxruntime-node from npm).
std::string ort_dir() {
  const char* e = std::getenv("DRIFTLAB_ORT_DIR");
  if (e && *e) return e;
  return std::string(DRIFTLAB_SOURCE_DIR) + "/tests/oracles/ort";
}

// The label column of a `driftlab attack` samples.csv (index,label,...).
std::vector<int32_t> attack_labels(const std::string& csv) {
  std::ifstream f(csv);
  check(static_cast<bool>(f), "convert: cannot open ", csv, " (a `driftlab attack --out DIR` folder has one)");
  std::string line;
  std::getline(f, line);
  check(line.rfind("index,label,", 0) == 0, "convert: ", csv, " does not start with 'index,label,': ", line);
  std::vector<int32_t> labels;
  for (int64_t row = 1; std::getline(f, line); ++row) {
    const std::size_t a = line.find(','), b = line.find(',', a + 1);
    check(a != std::string::npos && b != std::string::npos, "convert: ", csv, " line ", row + 1, ": '", line, "'");
    labels.push_back(static_cast<int32_t>(std::stol(line.substr(a + 1, b - a - 1))));
  }
  return labels;
}

// S3's conversion measurements: driftlab (the original) against ONNX Runtime (the converted
// model) on the same test inputs.
void convert_cmd(ConvertOptions o) {
  check(o.to == "onnx", "convert: --to '", o.to, "' (known: onnx)");
  check(o.repeats >= 1, "convert: --repeats ", o.repeats, " must be >= 1");
  set_threads(o.threads);
  const int threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  fs::create_directories(o.out);
  auto t0 = std::chrono::steady_clock::now();
  LoadedModel lm = quant::load_any_model(o.weights);
  const double load_ms = ms_since(t0);
  convert::OnnxExportOptions eo;
  eo.opset = o.opset;
  eo.norm = input_norm_from_metadata(lm.metadata);
  eo.doc = "driftlab convert --weights " + o.weights;
  eo.quant_form = quant_form_named(o.quant_form);
  eo.symmetric_pads = o.naive_pads;
  eo.rnn_gates_as_stored = o.naive_rnn_gates;
  // the conversion's name in reports (convert-report's rows): the target, the int8 form, and any
  // deliberately wrong semantics
  const bool int8 = quant::is_quantized(lm);
  const std::string conversion = "onnx" + (int8 ? "-" + o.quant_form : std::string()) +
                                 (o.naive_pads ? "+naive-pads" : "") + (o.naive_rnn_gates ? "+naive-rnn-gates" : "");
  const std::string onnx = o.out + "/model.onnx";
  const convert::OnnxExport ex = convert::export_onnx(lm.model, eo);
  convert::write_onnx(onnx, ex.bytes);
  print_quant_notes(ex);

  // the test split as stored (ONNX's graph standardises it itself) and as driftlab's model takes it
  const Dataset raw = o.data.loader->load(o.data, Split::test, &lm.metadata);
  check_data_fits(lm, o.weights, raw);
  const std::string inputs = o.out + "/inputs.npy";
  write_npy(inputs, raw.images);
  Tensor x = raw.images.clone();
  normalise_for(lm, x);
  CpuRunner runner(lm.model);
  Tensor y_o;
  std::vector<double> run_ms;
  for (int64_t r = 0; r < o.repeats; ++r) {
    t0 = std::chrono::steady_clock::now();
    y_o = runner.logits(x);
    run_ms.push_back(ms_since(t0));
  }

  // ONNX Runtime on an .npy of raw inputs: its logits (written to out) and its JSON line
  auto run_ort = [&](const std::string& x_npy, const std::string& out, int64_t repeats) {
    const std::string cmd = "node " + shell_quoted(ort_dir() + "/ort_run.js") + " --model " + shell_quoted(onnx) + " --x " +
                            shell_quoted(x_npy) + " --out " + shell_quoted(out) + " --threads " + std::to_string(threads) +
                            " --repeats " + std::to_string(repeats) + " 2>&1";
    int rc = 0;
    const std::string said = run_capture(cmd, &rc);
    check(rc == 0, "convert: ONNX Runtime (onnxruntime-node in ", ort_dir(),
          "; npm ci --ignore-scripts there, or set DRIFTLAB_ORT_DIR) failed: ", cmd, " said: ", said);
    return std::make_pair(read_npy(out), nlohmann::json::parse(said.substr(said.rfind('{'))));
  };
  const auto [y_c, ort] = run_ort(inputs, o.out + "/ort_logits.npy", o.repeats);
  check(y_c.shape() == y_o.shape(), "convert: ONNX Runtime's output ", shape_str(y_c.shape()), ", driftlab's ",
        shape_str(y_o.shape()));

  const Tensor p_o = softmax_rows(y_o), p_c = softmax_rows(y_c);
  const OutputDrift d = compare_outputs(p_c, p_o);
  double scale = 0, worst = 0;
  for (int64_t i = 0; i < y_o.numel(); ++i) {
    scale = std::max(scale, std::fabs(y_o.at(i)));
    worst = std::max(worst, std::fabs(y_c.at(i) - y_o.at(i)));
  }
  const double acc_o = accuracy_of(p_o, raw.labels), acc_c = accuracy_of(p_c, raw.labels);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> ort_ms = ort["run_ms"].get<std::vector<double>>();
  const auto size_o = fs::file_size(o.weights), size_c = fs::file_size(onnx);
  nlohmann::json j = {
      {"model", lm.model.name}, {"weights", o.weights}, {"policy", lm.model.policy.to_string()},
      {"conversion", conversion}, {"onnx", onnx},
      {"opset", o.opset}, {"inputs", raw.name}, {"n", raw.images.dim(0)}, {"threads", threads}, {"commit", build_commit()},
      {"ort_version", ort["ort"]},
      {"accuracy_before", acc_o}, {"accuracy_after", acc_c},
      {"abs_err_mean", d.abs_err_mean}, {"rel_err_mean", d.rel_err_mean}, {"mean_abs", d.mean_abs},
      {"max_abs", d.max_abs}, {"misclassification", d.misclassification},
      {"logits_max_abs", worst}, {"logits_max_rel", worst / scale},
      {"load_ms_before", load_ms}, {"load_ms_after", ort["load_ms"]},
      {"inference_ms_before", median(run_ms)}, {"inference_ms_after", median(ort_ms)},
      {"inference_ms_before_all", run_ms}, {"inference_ms_after_all", ort_ms},
      {"size_before", size_o}, {"size_after", size_c}};
  if (!o.adversarial.empty()) {
    // S3's robustness before and after conversion: examples `driftlab attack` crafted on this
    // model (its adversarial.npy, in the input space, and samples.csv's labels), judged by both
    const Tensor adv = read_npy(o.adversarial + "/adversarial.npy");
    const std::vector<int32_t> labels = attack_labels(o.adversarial + "/samples.csv");
    check(adv.rank() >= 1 && adv.dim(0) == static_cast<int64_t>(labels.size()), "convert: ", o.adversarial,
          "/adversarial.npy holds ", adv.rank() ? adv.dim(0) : 0, " examples, samples.csv ", labels.size(), " labels");
    Tensor xa = adv.clone();
    normalise_for(lm, xa);
    const Tensor a_o = runner.logits(xa);
    const auto [a_c, unused] = run_ort(o.adversarial + "/adversarial.npy", o.out + "/ort_adversarial_logits.npy", 1);
    (void)unused;
    const std::vector<int32_t> pred_o = predictions(a_o), pred_c = predictions(a_c);
    int64_t fooled_o = 0, fooled_c = 0, differ = 0;
    for (std::size_t i = 0; i < labels.size(); ++i) {
      fooled_o += pred_o[i] != labels[i];
      fooled_c += pred_c[i] != labels[i];
      differ += pred_o[i] != pred_c[i];
    }
    const double n = static_cast<double>(labels.size()), s_o = fooled_o / n, s_c = fooled_c / n;
    j["adversarial"] = {{"from", o.adversarial}, {"n", labels.size()}, {"success_before", s_o}, {"success_after", s_c},
                        {"variation", std::fabs(s_c - s_o)}, {"predictions_differ", differ}};
    std::cout << "adversarial examples of " << o.adversarial << " (" << labels.size()
              << "): misclassified by driftlab " << s_o * 100 << "%, by ONNX Runtime " << s_c * 100
              << "% (S3's |S_conv - S_orig| = " << std::fabs(s_c - s_o) << "); " << differ << " predictions differ\n";
  }
  std::ofstream(o.out + "/convert.json") << j.dump(2) << "\n";
  {
    std::ofstream c(o.out + "/convert.csv");
    bool first = true;
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!it->is_array()) c << (first ? "" : ",") << it.key(), first = false;
    c << "\n";
    first = true;
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!it->is_array()) c << (first ? "" : ",") << (it->is_string() ? it->get<std::string>() : it->dump()), first = false;
    c << "\n";
  }
  std::cout << std::setprecision(4);
  std::cout << "convert " << lm.model.name << " (" << lm.model.policy.to_string() << ") to ONNX (opset " << o.opset
            << "), " << raw.images.dim(0) << " inputs of " << raw.name << ", " << threads
            << " thread(s); driftlab (before) vs ONNX Runtime " << ort["ort"].get<std::string>() << " (after)\n\n"
            << "| | driftlab | ONNX Runtime |\n|---|---|---|\n"
            << "| accuracy | " << acc_o << " | " << acc_c << " |\n"
            << "| load time (ms) | " << load_ms << " | " << ort["load_ms"].get<double>() << " |\n"
            << "| inference time (ms, median of " << o.repeats << ") | " << median(run_ms) << " | " << median(ort_ms)
            << " |\n"
            << "| file size (bytes) | " << size_o << " | " << size_c << " |\n\n"
            << "softmax outputs, ONNX Runtime - driftlab: S3 abs. error (signed mean) " << d.abs_err_mean
            << ", rel. error " << d.rel_err_mean << ", mean |d| " << d.mean_abs << ", max |d| " << d.max_abs
            << "; misclassification " << d.misclassification * 100 << "%\n"
            << "logits: max |d| " << worst << " = " << worst / scale << " of the largest\n"
            << "wrote " << o.out << "/model.onnx, convert.json, convert.csv\n";
}

// S3's robustness variation indicator over several conversions (../shared/STUDIES.md):
// R(m_i, c_j) = sum over attacks A of P(m_i, c_j, A), P = (|S_conv - S_orig| - min) / (max - min),
// min and max over the (model, conversion) rows of that attack (attacks/stats.h min_max_indicator).
// Each DIR is a `driftlab convert --adversarial ATTACK_DIR --out DIR` result; the attack is named by
// ATTACK_DIR/result.json. Every row needs every attack.
struct ConvertReportOptions {
  std::vector<std::string> dirs;
  std::string out;
};

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::ifstream f(path);
  check(static_cast<bool>(f), "convert-report: cannot open ", path, " (", what, ")");
  try {
    return nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    fail("convert-report: ", path, " is not JSON: ", e.what());
  }
}

void convert_report_cmd(const ConvertReportOptions& o) {
  check(!o.dirs.empty(), "convert-report: no convert folders given");
  struct Cell {
    double before = 0, after = 0, variation = 0;
  };
  using Row = std::pair<std::string, std::string>;  // (weights, conversion)
  std::vector<Row> rows;                              // first-seen order
  std::vector<std::string> attacks;
  std::map<std::pair<Row, std::string>, Cell> cells;
  std::map<Row, std::string> row_model;
  auto row_name = [](const Row& r) { return r.first + " | " + r.second; };
  for (const std::string& d : o.dirs) {
    const nlohmann::json j = read_json_file(d + "/convert.json", "a `driftlab convert --out` folder");
    check(j.contains("adversarial"), "convert-report: ", d, "/convert.json has no adversarial section: run convert with "
          "--adversarial ATTACK_DIR");
    check(j.contains("conversion"), "convert-report: ", d, "/convert.json names no conversion (written before 2026-11-27)");
    const nlohmann::json& a = j["adversarial"];
    const nlohmann::json r = read_json_file(a["from"].get<std::string>() + "/result.json", "the attack's result");
    std::string attack = r.value("attack", "");
    check(!attack.empty(), "convert-report: ", a["from"].get<std::string>(), "/result.json names no attack");
    if (r.contains("eps") && r["eps"].is_number() && attack != "boundary" && attack != "single-pixel") {
      std::ostringstream e;
      e << attack << " eps " << r["eps"].get<double>();
      attack = e.str();
    }
    const Row row{j["weights"].get<std::string>(), j["conversion"].get<std::string>()};
    if (std::find(rows.begin(), rows.end(), row) == rows.end()) rows.push_back(row);
    if (std::find(attacks.begin(), attacks.end(), attack) == attacks.end()) attacks.push_back(attack);
    row_model[row] = j["model"].get<std::string>();
    const bool fresh =
        cells.emplace(std::make_pair(row, attack),
                      Cell{a["success_before"].get<double>(), a["success_after"].get<double>(), a["variation"].get<double>()})
            .second;
    check(fresh, "convert-report: ", d, ": a second result for ", row_name(row), " under ", attack);
  }
  std::vector<std::vector<double>> v(rows.size(), std::vector<double>(attacks.size()));
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t k = 0; k < attacks.size(); ++k) {
      auto it = cells.find({rows[i], attacks[k]});
      check(it != cells.end(), "convert-report: no result for ", row_name(rows[i]), " under ", attacks[k],
            " (every model and conversion needs every attack)");
      v[i][k] = it->second.variation;
    }
  const std::vector<double> R = attacks::min_max_indicator(v);
  nlohmann::json out = nlohmann::json::array();
  std::cout << "S3's robustness variation over " << rows.size() << " model/conversion pairs and " << attacks.size()
            << " attacks: S = success rate of the model's own adversarial examples, before (driftlab) and after "
               "(the converted model in ONNX Runtime); R(m, c) = sum over attacks of the min-max scaled |S_conv - S_orig| "
               "(0: the least variation)\n\n| weights | conversion |";
  for (const std::string& a : attacks) std::cout << " " << a << ": S_orig / S_conv |";
  std::cout << " R(m, c) |\n|---|---|";
  for (std::size_t k = 0; k < attacks.size(); ++k) std::cout << "---|";
  std::cout << "---|\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::cout << "| " << row_name(rows[i]) << " |";
    nlohmann::json per = nlohmann::json::object();
    for (const std::string& a : attacks) {
      const Cell& c = cells.at({rows[i], a});
      std::cout << " " << c.before << " / " << c.after << " |";
      per[a] = {{"success_before", c.before}, {"success_after", c.after}, {"variation", c.variation}};
    }
    std::cout << " " << R[i] << " |\n";
    out.push_back({{"weights", rows[i].first}, {"conversion", rows[i].second}, {"model", row_model[rows[i]]},
                   {"attacks", per}, {"R", R[i]}});
  }
  if (!o.out.empty()) {
    write_file_atomic(o.out, nlohmann::json{{"rows", out}, {"commit", build_commit()}}.dump(1) + "\n");
    std::cout << "wrote " << o.out << "\n";
  }
}

}  // namespace

void register_convert(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  auto* ex = app.add_subcommand("export", "write a saved model as ONNX (the Policy's semantics stated in the graph; an "
                                "int8 model with its integers and scales in QDQ or QOperator form) or as TF.js");
  ex->add_option("--weights", o->weights, "model file (.dlm)")->required();
  ex->add_option("--format", o->format, "onnx | tfjs (a TF.js layers model: --out is a folder)")->capture_default_str();
  ex->add_option("--opset", o->opset, "ONNX opset, 13..17")->capture_default_str();
  ex->add_option("--out", o->out, "the .onnx file to write (tfjs: the folder)")->required();
  ex->add_option("--quant-form", o->quant_form,
                 "an int8 model's form: qdq (QuantizeLinear/DequantizeLinear around float ops) or qop (QLinearConv, "
                 "QGemm, QLinearAdd...)")
      ->capture_default_str();
  ex->add_flag("--naive-pads", o->naive_pads,
               "deliberately wrong: pads written symmetric, (begin+end)/2 rounded up (what a converter assuming "
               "PyTorch's padding writes), to measure what the padding rule is worth");
  ex->add_flag("--naive-rnn-gates", o->naive_rnn_gates,
               "deliberately wrong: recurrent gate blocks in driftlab's stored order, not ONNX's");
  ex->callback([o] { export_cmd(*o); });

  auto io = std::make_shared<ImportOptions>();
  auto* im = app.add_subcommand("import", "read an ONNX model (torch.onnx.export's) into a driftlab model file");
  im->add_option("file", io->file, "the .onnx file")->required();
  im->add_option("--format", io->format, "onnx")->capture_default_str();
  im->add_option("--policy", io->policy, "the policy of the written model (ONNX's semantics are the torch preset's; "
                 "another preset gets converted weights)")->capture_default_str();
  im->add_option("--out", io->out, "the model file to write (.dlm)")->required();
  im->callback([io] { import_cmd(*io); });

  auto co = std::make_shared<ConvertOptions>();
  auto* cv = app.add_subcommand("convert", "S3's conversion measurements: export to ONNX and run the test inputs in "
                                "driftlab and ONNX Runtime (accuracy, errors, misclassification, load and "
                                "inference time, sizes)");
  cv->add_option("--weights", co->weights, "model file (.dlm, fp32 or int8)")->required();
  cv->add_option("--quant-form", co->quant_form, "an int8 model's ONNX form: qdq or qop")->capture_default_str();
  cv->add_flag("--naive-pads", co->naive_pads, "deliberately wrong conversion: pads written symmetric (as export's)");
  cv->add_flag("--naive-rnn-gates", co->naive_rnn_gates,
               "deliberately wrong conversion: recurrent gates in driftlab's stored order (as export's)");
  cv->add_option("--to", co->to, "onnx")->capture_default_str();
  cv->add_flag("--check", "run the converted model in ONNX Runtime (what this command does; kept for the issue's "
               "spelling)");
  cv->add_option("--opset", co->opset, "ONNX opset, 13..17")->capture_default_str();
  cv->add_option("--repeats", co->repeats, "timed inference runs on each side (the median is reported)")
      ->capture_default_str();
  cv->add_option("--out", co->out, "output folder")->required();
  cv->add_option("--adversarial", co->adversarial, "a `driftlab attack --out DIR` folder of examples crafted on this "
                 "model: their success judged by driftlab and by ONNX Runtime (S3's robustness before and after)");
  add_threads_option(cv, co->threads);
  add_data_options(cv, co->data);
  cv->callback([co] { convert_cmd(*co); });

  auto ro = std::make_shared<ConvertReportOptions>();
  auto* rp = app.add_subcommand("convert-report", "S3's robustness variation R(m, c) over several `convert "
                                "--adversarial` results (one folder per model, conversion and attack)");
  rp->add_option("dirs", ro->dirs, "`driftlab convert --adversarial ... --out DIR` folders")->required();
  rp->add_option("--out", ro->out, "also write the table as JSON here");
  rp->callback([ro] { convert_report_cmd(*ro); });
}

}  // namespace cli
}  // namespace driftlab
