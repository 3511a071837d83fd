// The exchange-format face (driftlab/convert.h): export, import, the conversion measurements
// against ONNX Runtime, and R(m, c) over several of them.
#include "driftlab/convert.h"

#include "convert/onnx_graph_import.h"
#include "convert/keras_import.h"
#include "models/graph.h"

#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "attacks/stats.h"
#include "convert/onnx_export.h"
#include "convert/onnx_import.h"
#include "convert/tfjs_export.h"
#include "core/error.h"
#include "drift/drift.h"
#include "driftlab/model.h"
#include "engine/data/transform.h"
#include "engine/io/npy.h"
#include "engine/io/shell.h"
#include "engine/train/cpu_runner.h"
#include "engine/train/runner.h"
#include "models/model_file.h"
#include "models/reparam.h"
#include "quant/model_io.h"
#include "train/run.h"

namespace driftlab {

namespace {

namespace fs = std::filesystem;

// The exporter's options for a model file; the int8 form is checked here, after the file is read
// (a bad --quant-form with a bad --weights names the weights first).
convert::OnnxExportOptions onnx_export_options(const OnnxForm& f, const LoadedModel& lm, const std::string& doc) {
  convert::OnnxExportOptions eo;
  eo.opset = f.opset;
  eo.norm = input_norm_from_metadata(lm.metadata);
  eo.doc = f.doc.empty() ? doc : f.doc;
  eo.symmetric_pads = f.naive_pads;
  eo.rnn_gates_as_stored = f.naive_rnn_gates;
  check(f.quant_form == "qdq" || f.quant_form == "qop", "--quant-form '", f.quant_form, "' (known: qdq, qop)");
  eo.quant_form = f.quant_form == "qdq" ? convert::OnnxExportOptions::QuantForm::qdq
                                        : convert::OnnxExportOptions::QuantForm::qoperator;
  return eo;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<int32_t> attack_labels(const std::string& csv, int64_t classes) {
  std::ifstream f(csv);
  check(static_cast<bool>(f), "convert: cannot open ", csv, " (a `driftlab attack --out DIR` folder has one)");
  return read_attack_labels(f, csv, classes);
}

}  // namespace

std::vector<int32_t> read_attack_labels(std::istream& f, const std::string& csv, int64_t classes) {
  std::string line;
  std::getline(f, line);
  check(line.rfind("index,label,", 0) == 0, "convert: ", csv, " does not start with 'index,label,': ", line);
  std::vector<int32_t> labels;
  for (int64_t row = 1; std::getline(f, line); ++row) {
    const std::size_t a = line.find(','), b = line.find(',', a + 1);
    check(a != std::string::npos && b != std::string::npos, "convert: ", csv, " line ", row + 1, ": '", line, "'");
    const std::string v = line.substr(a + 1, b - a - 1);
    char* end = nullptr;
    errno = 0;
    const long long label = std::strtoll(v.c_str(), &end, 10);
    check(!v.empty() && errno == 0 && end == v.c_str() + v.size() && label >= 0 && label < classes, "convert: ", csv,
          " line ", row + 1, ": label '", v, "' is not a class index (0..", classes - 1, ")");
    labels.push_back(static_cast<int32_t>(label));
  }
  return labels;
}

namespace {

// The files a conversion writes into its folder, removed again when it fails part way (a refused
// conversion leaves nothing of its own behind).
class Outputs {
 public:
  std::string add(const std::string& path) {
    paths_.push_back(path);
    return path;
  }
  void keep() { paths_.clear(); }
  ~Outputs() {
    std::error_code ec;
    for (const std::string& p : paths_) fs::remove(p, ec);
  }

 private:
  std::vector<std::string> paths_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ONNX Runtime's answer for one .npy of raw inputs: its logits and what ort_run.js printed.
struct OrtRun {
  Tensor logits;
  nlohmann::json said;  // load_ms, run_ms, ort (the version)
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

}  // namespace

ModelExportResult export_model(const ModelExportRequest& r) {
  check(r.format == "onnx" || r.format == "tfjs", "export: --format '", r.format, "' (known: onnx, tfjs)");
  LoadedModel lm = quant::load_any_model(r.weights);
  ModelExportResult res;
  res.int8 = quant::is_quantized(lm);
  if (r.format == "tfjs") {
    check(!res.int8, "export: ", r.weights, " is an int8 model; a TF.js layers model is float: export its fp32 model");
    const convert::TfjsExport ex = convert::export_tfjs(lm.model, input_norm_from_metadata(lm.metadata));
    convert::write_tfjs(r.out, ex);
    res.lines = ex.layers;
    res.bytes = static_cast<int64_t>(ex.weights.size());
  } else {
    const convert::OnnxExportOptions eo = onnx_export_options(r.onnx, lm, "driftlab export --weights " + r.weights);
    const convert::OnnxExport ex = convert::export_onnx(lm.model, eo);
    convert::write_onnx(r.out, ex.bytes);
    res.lines = ex.nodes;
    res.notes = ex.notes;
    res.bytes = static_cast<int64_t>(ex.bytes.size());
    res.num_nodes = ex.num_nodes;
    res.num_initializers = ex.num_initializers;
  }
  res.model = lm.model.name;
  res.policy = lm.model.policy.to_string();
  return res;
}

namespace {
// A graph model: built under the requested Policy directly (the file states what it freezes).
OnnxImportResult import_as_graph(const OnnxImportRequest& r, const OnnxImportHooks& hooks, OnnxImportResult res) {
  convert::OnnxGraphOptions go;
  go.policy = r.policy;
  convert::OnnxGraph g = convert::import_onnx_graph(r.file, go);
  res.producer = g.producer;
  res.opset = g.opset;
  res.model = kGraphModelName;
  res.mapping = g.nodes;
  if (hooks.on_mapped) hooks.on_mapped(res);
  const std::string producer = g.producer;
  Model m = convert::onnx_graph_model(std::move(g), r.policy);
  save_model(r.out, m, {{"imported_from", r.file}, {"onnx_producer", producer}});
  return res;
}
}  // namespace

namespace {
// A Keras / TF.js layers model: always a graph, built under the Policy (Keras's abstract
// semantics the Policy's, what the file states frozen).
OnnxImportResult import_keras_graph(const OnnxImportRequest& r, const OnnxImportHooks& hooks) {
  check(r.as != "zoo", "import: --as zoo: a Keras model is imported as a graph (--as graph or auto)");
  convert::KerasGraph g = convert::import_keras(r.file, r.policy);
  OnnxImportResult res;
  res.producer = g.producer.empty() ? "keras" : g.producer;
  res.model = kGraphModelName;
  res.mapping = g.layers;
  for (const std::string& n : g.notes) res.mapping.push_back("note: " + n);
  if (!g.has_weights)
    res.mapping.push_back("note: the file has no weights; the Policy's initialisers drew them");
  if (hooks.on_mapped) hooks.on_mapped(res);
  const std::string producer = res.producer;
  Model m = convert::keras_graph_model(std::move(g), r.policy);
  save_model(r.out, m, {{"imported_from", r.file}, {"keras_producer", producer}});
  return res;
}
}  // namespace

OnnxImportResult import_onnx_model(const OnnxImportRequest& request, const OnnxImportHooks& hooks) {
  OnnxImportRequest r = request;
  if (r.format == "auto")
    r.format = r.file.size() >= 5 && r.file.compare(r.file.size() - 5, 5, ".json") == 0 ? "keras" : "onnx";
  check(r.format == "onnx" || r.format == "keras", "import: --format '", r.format, "' (known: auto, onnx, keras)");
  check(r.as == "auto" || r.as == "zoo" || r.as == "graph", "import: --as '", r.as, "' (known: auto, zoo, graph)");
  if (r.policy.empty()) r.policy = r.format == "keras" ? "tensorflow" : "torch";
  if (r.format == "keras") return import_keras_graph(r, hooks);
  if (r.as == "graph") return import_as_graph(r, hooks, {});
  convert::OnnxImport im;
  try {
    im = convert::import_onnx(r.file);
  } catch (const Error& e) {
    if (r.as == "zoo") throw;
    OnnxImportResult res;
    res.zoo_mismatch = e.what();
    try {
      return import_as_graph(r, hooks, res);
    } catch (const Error& g) {
      fail(g.what(), "\n(and as a zoo model: ", res.zoo_mismatch, ")");
    }
  }
  OnnxImportResult res;
  res.producer = im.producer;
  res.opset = im.opset;
  res.model = im.model.name;
  res.mapping = im.mapping;
  if (hooks.on_mapped) hooks.on_mapped(res);
  Model m = std::move(im.model);
  const Policy target = Policy::parse(r.policy);
  if (target.to_string() != m.policy.to_string()) {
    // ONNX's semantics are the torch preset's; another preset gets the weights converted to its
    // conventions (flip, flatten order, layouts: models/reparam.h), its numeric knobs its own
    m = rebuild_under(m, target, true);
    res.converted = true;
    if (hooks.on_converted) hooks.on_converted(res);
  }
  save_model(r.out, m, {{"imported_from", r.file}, {"onnx_producer", im.producer}});
  return res;
}

OrtLocaliseResult localise_against_ort(const OrtLocaliseRequest& o) {
  check(o.tol > 0, "localise: --tol ", o.tol, " must be above 0");
  OrtLocaliseResult res;
  res.onnx = o.onnx;
  res.policy = o.policy;
  res.tol = o.tol;
  auto read_bytes = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    check(f.good(), "localise: cannot open ", path);
    std::string b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    check(!f.bad(), "localise: cannot read ", path);
    return b;
  };
  const std::string bytes = read_bytes(o.onnx);
  const std::string ort_file = o.ort_onnx.empty() ? o.onnx : o.ort_onnx;
  convert::OnnxGraphOptions go;
  go.policy = o.policy;
  convert::OnnxGraph g = convert::import_onnx_graph_bytes(bytes, o.onnx, go);
  GraphLayer& gl = *g.graph;
  const Tensor x = read_npy(o.input);
  Shape want{x.rank() ? x.dim(0) : 0};
  want.insert(want.end(), g.input_shape.begin(), g.input_shape.end());
  check(x.dtype() == DType::f32 && x.shape() == want, "localise: ", o.input, " holds ", dtype_name(x.dtype()), " ",
        shape_str(x.shape()), "; the graph takes float32 (N", [&] {
          std::string s;
          for (int64_t d : g.input_shape) s += ", " + std::to_string(d);
          return s;
        }(), ")");
  res.n = x.dim(0);
  // the nodes and the values they write, in node order
  std::vector<std::string> values;
  for (std::size_t i = 0; i < gl.num_nodes(); ++i) values.push_back(gl.value_name(gl.node(i).output));
  fs::create_directories(o.out);
  Outputs written;
  const std::string probed = written.add(o.out + "/probed.onnx");
  std::vector<bool> in_file;
  write_file_atomic(probed, convert::onnx_with_probes(o.ort_onnx.empty() ? bytes : read_bytes(ort_file), ort_file,
                                                      values, in_file));
  write_npy(written.add(o.out + "/x.npy"), x);
  const nlohmann::json cases = {
      {"threads", 1}, {"cases", {{{"name", "probe"}, {"kind", "run"}, {"model", "probed.onnx"}, {"x", "x.npy"}}}}};
  write_file_atomic(written.add(o.out + "/cases.json"), cases.dump(1));
  for (std::size_t i = 0; i < values.size(); ++i) written.add(o.out + "/out/probe.dl_probe_" + std::to_string(i) + ".npy");
  const std::string cmd = "node " + shell_quoted(o.ort_dir + "/ort_run.js") + " " + shell_quoted(o.out) + " 2>&1";
  int rc = 0;
  const std::string said = run_capture(cmd, &rc);
  check(rc == 0, "localise: ONNX Runtime (onnxruntime-node in ", o.ort_dir,
        "; npm ci --ignore-scripts there, or set DRIFTLAB_ORT_DIR) failed: ", cmd, " said: ", said);
  // driftlab's node outputs on the same inputs
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  const std::vector<Tensor> ours = gl.node_outputs(ctx, x);
  for (std::size_t i = 0; i < gl.num_nodes(); ++i) {
    if (!in_file[i]) continue;  // a value the importer made up (or the ORT file lacks): no ORT output
    const GraphNode& node = gl.node(i);
    const std::string f = o.out + "/out/probe.dl_probe_" + std::to_string(i) + ".npy";
    const Tensor theirs = read_npy(f);
    NodeAgreement a;
    a.node = node.name;
    a.op = node.layer ? node.layer->kind() : graph_op_name(node.op);
    a.value = values[i];
    a.shape = gl.value_shape(node.output);
    const Tensor mine = ours[i].to(DType::f32);
    check(theirs.numel() == mine.numel(), "localise: node '", node.name, "': ONNX Runtime's output ",
          shape_str(theirs.shape()), ", driftlab's ", shape_str(mine.shape()));
    for (int64_t k = 0; k < mine.numel(); ++k) {
      const double t = theirs.data<float>()[k], m = mine.data<float>()[k];
      a.max_abs_diff = std::max(a.max_abs_diff, std::abs(t - m));
      a.max_abs_ort = std::max(a.max_abs_ort, std::abs(t));
    }
    a.rel = a.max_abs_ort > 0 ? a.max_abs_diff / a.max_abs_ort : a.max_abs_diff;
    if (res.first_parting < 0 && !(a.rel <= o.tol)) res.first_parting = static_cast<int>(res.nodes.size());
    res.nodes.push_back(a);
  }
  written.keep();
  return res;
}

ConversionResult measure_conversion(const ConversionRequest& o, DatasetLoader& loader, const ConversionHooks& hooks) {
  check(o.to == "onnx", "convert: --to '", o.to, "' (known: onnx)");
  check(o.repeats >= 1, "convert: --repeats ", o.repeats, " must be >= 1");
  ConversionResult res;
  res.weights = o.weights;
  res.opset = o.onnx.opset;
  res.repeats = o.repeats;
  res.threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  fs::create_directories(o.out);
  auto t0 = std::chrono::steady_clock::now();
  LoadedModel lm = quant::load_any_model(o.weights);
  res.load_ms_before = ms_since(t0);
  const convert::OnnxExportOptions eo = onnx_export_options(o.onnx, lm, "driftlab convert --weights " + o.weights);
  // the conversion's name in reports (convert-report's rows): the target, the int8 form, and any
  // deliberately wrong semantics
  const bool int8 = quant::is_quantized(lm);
  res.conversion = "onnx" + (int8 ? "-" + o.onnx.quant_form : std::string()) +
                   (o.onnx.naive_pads ? "+naive-pads" : "") + (o.onnx.naive_rnn_gates ? "+naive-rnn-gates" : "");
  // The adversarial examples read and checked before anything is written.
  Tensor adv;
  std::vector<int32_t> adv_labels;
  if (!o.adversarial.empty()) {
    adv = read_npy(o.adversarial + "/adversarial.npy");
    adv_labels = attack_labels(o.adversarial + "/samples.csv", lm.model.num_classes);
    Shape want{adv.rank() ? adv.dim(0) : 0};
    want.insert(want.end(), lm.model.input_shape.begin(), lm.model.input_shape.end());
    check(adv.shape() == want, "convert: ", o.adversarial, "/adversarial.npy has shape ", shape_str(adv.shape()),
          "; model ", lm.model.name, " takes ", shape_str(want));
    check(adv.dim(0) == static_cast<int64_t>(adv_labels.size()), "convert: ", o.adversarial, "/adversarial.npy holds ",
          adv.dim(0), " examples, samples.csv ", adv_labels.size(), " labels");
  }
  Outputs written;
  res.onnx = written.add(o.out + "/model.onnx");
  const convert::OnnxExport ex = convert::export_onnx(lm.model, eo);
  convert::write_onnx(res.onnx, ex.bytes);
  res.notes = ex.notes;
  if (hooks.on_exported) hooks.on_exported(res.notes);

  // the test split as stored (ONNX's graph standardises it itself) and as driftlab's model takes it
  const Dataset raw = loader.load(o.data, Split::test, &lm.metadata);
  check_data_fits(lm, o.weights, raw);
  const std::string inputs = written.add(o.out + "/inputs.npy");
  write_npy(inputs, raw.images);
  Tensor x = raw.images.clone();
  normalise_for(lm, x);
  CpuRunner runner(lm.model);
  Tensor y_o;
  for (int64_t r = 0; r < o.repeats; ++r) {
    t0 = std::chrono::steady_clock::now();
    y_o = runner.logits(x);
    res.inference_ms_before_all.push_back(ms_since(t0));
  }

  // ONNX Runtime on an .npy of raw inputs: its logits (written to out) and its JSON line
  auto run_ort = [&](const std::string& x_npy, const std::string& out, int64_t repeats) {
    const std::string cmd = "node " + shell_quoted(o.ort_dir + "/ort_run.js") + " --model " + shell_quoted(res.onnx) +
                            " --x " + shell_quoted(x_npy) + " --out " + shell_quoted(out) + " --threads " +
                            std::to_string(res.threads) + " --repeats " + std::to_string(repeats) + " 2>&1";
    int rc = 0;
    const std::string said = run_capture(cmd, &rc);
    check(rc == 0, "convert: ONNX Runtime (onnxruntime-node in ", o.ort_dir,
          "; npm ci --ignore-scripts there, or set DRIFTLAB_ORT_DIR) failed: ", cmd, " said: ", said);
    // the JSON line is parsed before the logits are read, so that an ort_run.js that fails both
    // ways is reported by the same one of the two errors as always
    nlohmann::json line = nlohmann::json::parse(said.substr(said.rfind('{')));
    return OrtRun{read_npy(out), std::move(line)};
  };
  const OrtRun ort = run_ort(inputs, written.add(o.out + "/ort_logits.npy"), o.repeats);
  const Tensor& y_c = ort.logits;
  check(y_c.shape() == y_o.shape(), "convert: ONNX Runtime's output ", shape_str(y_c.shape()), ", driftlab's ",
        shape_str(y_o.shape()));

  const Tensor p_o = softmax_rows(y_o), p_c = softmax_rows(y_c);
  const OutputDrift d = compare_outputs(p_c, p_o);
  double scale = 0, worst = 0;
  for (int64_t i = 0; i < y_o.numel(); ++i) {
    scale = std::max(scale, std::fabs(y_o.at(i)));
    worst = std::max(worst, std::fabs(y_c.at(i) - y_o.at(i)));
  }
  res.accuracy_before = accuracy_of(p_o, raw.labels);
  res.accuracy_after = accuracy_of(p_c, raw.labels);
  res.inference_ms_after_all = ort.said["run_ms"].get<std::vector<double>>();
  res.size_before = fs::file_size(o.weights);
  res.size_after = fs::file_size(res.onnx);
  res.model = lm.model.name;
  res.policy = lm.model.policy.to_string();
  res.inputs = raw.name;
  res.n = raw.images.dim(0);
  res.ort_version = ort.said["ort"].get<std::string>();
  res.abs_err_mean = d.abs_err_mean;
  res.rel_err_mean = d.rel_err_mean;
  res.mean_abs = d.mean_abs;
  res.max_abs = d.max_abs;
  res.misclassification = d.misclassification;
  res.logits_max_abs = worst;
  res.logits_max_rel = worst / scale;
  res.load_ms_after = ort.said["load_ms"].get<double>();
  res.inference_ms_before = median(res.inference_ms_before_all);
  res.inference_ms_after = median(res.inference_ms_after_all);
  if (!o.adversarial.empty()) {
    // robustness before and after conversion: examples `driftlab attack` crafted on this model
    // (its adversarial.npy, in the input space, and samples.csv's labels), judged by both
    const std::vector<int32_t>& labels = adv_labels;
    Tensor xa = adv.clone();
    normalise_for(lm, xa);
    const Tensor a_o = runner.logits(xa);
    const Tensor a_c =
        run_ort(o.adversarial + "/adversarial.npy", written.add(o.out + "/ort_adversarial_logits.npy"), 1).logits;
    const std::vector<int32_t> pred_o = predictions(a_o), pred_c = predictions(a_c);
    int64_t fooled_o = 0, fooled_c = 0, differ = 0;
    for (std::size_t i = 0; i < labels.size(); ++i) {
      fooled_o += pred_o[i] != labels[i];
      fooled_c += pred_c[i] != labels[i];
      differ += pred_o[i] != pred_c[i];
    }
    const double n = static_cast<double>(labels.size()), s_o = fooled_o / n, s_c = fooled_c / n;
    res.adversarial = ConversionAdversarial{o.adversarial, static_cast<int64_t>(labels.size()), s_o, s_c,
                                            std::fabs(s_c - s_o), differ};
  }
  written.keep();
  return res;
}

ConversionRobustness conversion_robustness(const std::vector<std::string>& dirs) {
  check(!dirs.empty(), "convert-report: no convert folders given");
  using Cell = ConversionRobustness::Cell;
  using Row = std::pair<std::string, std::string>;  // (weights, conversion)
  std::vector<Row> rows;                              // first-seen order
  std::vector<std::string> attacks;
  std::map<std::pair<Row, std::string>, Cell> cells;
  std::map<Row, std::string> row_model;
  auto row_name = [](const Row& r) { return r.first + " | " + r.second; };
  // A field of the JSON files read here, of its type, or an error naming the file and the field.
  auto field = [](const nlohmann::json& o, const char* key, const std::string& file, bool number) -> const nlohmann::json& {
    check(o.is_object() && o.contains(key) && (number ? o[key].is_number() : o[key].is_string()), "convert-report: ",
          file, ": \"", key, "\" is not ", number ? "a number" : "a string");
    return o[key];
  };
  for (const std::string& d : dirs) {
    const std::string file = d + "/convert.json";
    const nlohmann::json j = read_json_file(file, "a `driftlab convert --out` folder");
    check(j.is_object(), "convert-report: ", file, " is not a JSON object");
    check(j.contains("adversarial"), "convert-report: ", d, "/convert.json has no adversarial section: run convert with "
          "--adversarial ATTACK_DIR");
    check(j.contains("conversion"), "convert-report: ", d, "/convert.json names no conversion (written before 2026-11-27)");
    const nlohmann::json& a = j["adversarial"];
    check(a.is_object(), "convert-report: ", file, ": \"adversarial\" is not an object");
    const std::string from = field(a, "from", file, false).get<std::string>();
    for (const char* k : {"success_before", "success_after", "variation"}) {
      const double v = field(a, k, file, true).get<double>();
      check(v >= 0 && v <= 1, "convert-report: ", file, ": \"adversarial\".\"", k, "\" = ", v,
            " is not a rate (0..1)");
    }
    for (const char* k : {"weights", "conversion", "model"}) field(j, k, file, false);
    const nlohmann::json r = read_json_file(from + "/result.json", "the attack's result");
    std::string attack = r.is_object() && r.contains("attack") && r["attack"].is_string() ? r["attack"].get<std::string>() : "";
    check(!attack.empty(), "convert-report: ", from, "/result.json names no attack");
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
  ConversionRobustness t;
  t.attacks = attacks;
  std::vector<std::vector<double>> v(rows.size(), std::vector<double>(attacks.size()));
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t k = 0; k < attacks.size(); ++k) {
      auto it = cells.find({rows[i], attacks[k]});
      check(it != cells.end(), "convert-report: no result for ", row_name(rows[i]), " under ", attacks[k],
            " (every model and conversion needs every attack)");
      v[i][k] = it->second.variation;
    }
  const std::vector<double> R = attacks::min_max_indicator(v);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ConversionRobustness::Row row{rows[i].first, rows[i].second, row_model[rows[i]], {}, R[i]};
    for (const std::string& a : attacks) row.cells.push_back(cells.at({rows[i], a}));
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string ort_dir_or(const std::string& fallback) {
  const char* e = std::getenv("DRIFTLAB_ORT_DIR");
  return e && *e ? std::string(e) : fallback;
}

}  // namespace driftlab
