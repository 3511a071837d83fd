// driftlab quantize: int8 post-training quantization of a saved model, and its report.
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

#include "engine/data/transform.h"
#include "engine/io/npy.h"
#include "engine/train/runner.h"
#include "models/model_file.h"
#include "quant/dynamic.h"
#include "quant/model_io.h"
#include "quant/ptq.h"
#include "quant/report.h"

namespace driftlab {
namespace cli {
namespace {

struct QuantizeOptions {
  std::string weights, scheme = "torch_qnnpack", knobs, observer, calib_data, out, report, mode = "auto";
  int64_t calib = 1000, calib_batch = 32, report_n = 1000;
  int threads = 0;
  DataOptions data;
};

std::string json_number(double v) { return std::isfinite(v) ? fmt(v, 2) : std::string("inf"); }

void quantize_cmd(const QuantizeOptions& o) {
  set_threads(o.threads);
  check(!o.out.empty(), "quantize: --out Q.dlm is required");
  LoadedModel lm = quant::load_any_model(o.weights);
  check(!quant::is_quantized(lm), "quantize: ", o.weights, " is already an int8 model");
  // The policy: the model's, with the toolchain's quant group, then --quant knobs, then --observer.
  Policy policy = lm.model.policy;
  policy.set("quant_scheme", o.scheme);
  if (!o.knobs.empty()) policy = Policy::parse(policy.to_string() + "," + o.knobs);
  if (!o.observer.empty()) policy.set("quant_observer", o.observer);
  check(o.mode == "auto" || o.mode == "static" || o.mode == "dynamic", "quantize: --mode ", o.mode,
        " (allowed: auto, static, dynamic)");
  const bool dynamic = o.mode == "dynamic" || (o.mode == "auto" && quant::needs_dynamic(lm.model));
  check(!(o.mode == "static" && quant::needs_dynamic(lm.model)), "quantize: ", lm.model.name, " has LSTM/GRU layers, "
        "which have no static int8 form here; use --mode dynamic (weights-only, PyTorch quantize_dynamic)");
  // Calibration samples: --calib-data, or the first N training samples in file order (static only).
  Tensor calib;
  std::string calib_from;
  quant::PtqResult r;
  if (dynamic) {
    check(o.calib_data.empty(), "quantize: --calib-data is for static quantization; dynamic quantization "
          "chooses each input's scale at run time");
    r.model = quant::quantize_dynamic(lm.model, policy);
    nlohmann::json quantized = {{"scheme", o.scheme}, {"mode", "dynamic"}, {"from", o.weights}};
    quant::save_quantized_model(o.out, r.model, lm.metadata, quantized);
    std::cout << "wrote " << o.out << " (" << lm.model.name << ", dynamic int8 (weights only), scheme " << o.scheme
              << ", " << policy.to_string() << ")\n";
    for (std::size_t i = 0; i < r.model.net->size(); ++i)
      std::cout << "  " << i << " " << r.model.net->layer(i).describe() << "\n";
  } else if (!o.calib_data.empty()) {
    calib = read_npy(o.calib_data);
    check(calib.dtype() == DType::f32, "quantize: ", o.calib_data, " holds ", dtype_name(calib.dtype()),
          ", calibration data must be float32");
    normalise_for(lm, calib);
    calib_from = o.calib_data;
  } else {
    check(o.calib > 0, "quantize: --calib ", o.calib, " must be positive");
    calib = first_training_samples(lm, o.data, o.calib, &calib_from);
  }
  if (!dynamic) {
    quant::PtqOptions po;
    po.calib_batch = o.calib_batch;
    r = quant::quantize_model(lm.model, policy, calib, po);
    nlohmann::json quantized = {{"scheme", o.scheme},
                                {"observer", policy.get("quant_observer")},
                                {"calibration", calib_from},
                                {"calibration_samples", calib.dim(0)},
                                {"calibration_batch", o.calib_batch},
                                {"from", o.weights}};
    nlohmann::json meta = lm.metadata;
    quant::save_quantized_model(o.out, r.model, meta, quantized);
    std::cout << "wrote " << o.out << " (" << lm.model.name << ", int8 scheme " << o.scheme << ", " << policy.to_string()
              << "; calibrated on "
              << calib_from << ")\n";
    for (const auto& p : r.points)
      std::cout << "  " << std::left << std::setw(12) << p.name << std::right << " range [" << p.range.min << ", "
                << p.range.max << "] scale " << p.q.scale << " zero point " << p.q.zero_point << "\n";
  }
  if (o.report.empty()) return;

  // --report: sizes, accuracy, per-layer SQNR, time and agreement, on the test set.
  Dataset test = load_split_for(lm, *o.data.loader, o.data, Split::test);
  check_data_fits(lm, o.weights, test);
  Model& fp = lm.model;
  LoadedModel qm = quant::load_any_model(o.out);  // what was written is what is reported
  std::unique_ptr<Runner> run_fp = open_runner(fp, Device::cpu), run_q = open_runner(qm.model, Device::cpu);
  const EvalResult efp = run_fp->evaluate(test, 256), eq = run_q->evaluate(test, 256);
  const int64_t n = std::min<int64_t>(o.report_n, test.images.dim(0));
  std::vector<int64_t> idx(static_cast<std::size_t>(test.images.dim(0)));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  const Tensor x = gather_batch(test, idx, 0, n, DType::f32);
  const std::vector<quant::LayerSqnr> sq = dynamic ? quant::layer_sqnr_dynamic(fp, qm.model, x) : quant::layer_sqnr(fp, r, x);
  const Tensor all = gather_batch(test, idx, 0, test.images.dim(0), DType::f32);
  const std::vector<int32_t> pf = quant::predictions(run_fp->logits(all)), pq = quant::predictions(run_q->logits(all));
  int64_t disagree = 0;
  for (std::size_t i = 0; i < pf.size(); ++i) disagree += pf[i] != pq[i];
  const PredictTime tf = run_fp->time_prediction(x), tq = run_q->time_prediction(x);
  const auto fsize = std::filesystem::file_size(o.weights), qsize = std::filesystem::file_size(o.out);
  nlohmann::json rep = {
      {"model", fp.name},
      {"fp32_policy", fp.policy.to_string()},
      {"int8_policy", policy.to_string()},
      {"scheme", o.scheme},
      {"mode", dynamic ? "dynamic" : "static"},
      {"calibration", dynamic ? std::string("none (dynamic: per-call input scales)") : calib_from},
      {"test_set", test.name},
      {"file_bytes", {{"fp32", fsize}, {"int8", qsize}, {"ratio", double(qsize) / double(fsize)}}},
      {"accuracy", {{"fp32", efp.accuracy}, {"int8", eq.accuracy}, {"n", efp.n}}},
      {"disagreement_with_fp32", {{"count", disagree}, {"rate", double(disagree) / double(pf.size())}}},
      {"inference_s", {{"inputs", n}, {"threads", omp_get_max_threads()}, {"fp32", tf.host_to_host_s},
                       {"int8", tq.host_to_host_s}, {"speedup", tf.host_to_host_s / tq.host_to_host_s}}}};
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : sq) layers.push_back({{"point", l.point}, {"sqnr_db", json_number(l.sqnr_db)}, {"n", l.n}});
  rep["sqnr"] = layers;
  std::ostringstream md;
  md << "| quantity | fp32 | int8 (" << o.scheme << ") |\n|---|---|---|\n"
     << "| file bytes | " << fsize << " | " << qsize << " |\n"
     << "| test accuracy (" << test.name << ", " << efp.n << ") | " << fmt(efp.accuracy, 4) << " | " << fmt(eq.accuracy, 4)
     << " |\n| inference of " << n << " inputs, " << omp_get_max_threads() << " threads (s) | " << fmt(tf.host_to_host_s, 5)
     << " | " << fmt(tq.host_to_host_s, 5) << " |\n"
     << "| predictions that differ from fp32 | | " << disagree << " (" << fmt(100.0 * disagree / pf.size(), 2) << "%) |\n\n"
     << "| point | SQNR (dB) |\n|---|---|\n";
  for (const auto& l : sq) md << "| " << l.point << " | " << json_number(l.sqnr_db) << " |\n";
  std::string text;
  const auto ends = [&](const char* e) {
    const std::string ext(e);
    return o.report.size() >= ext.size() && o.report.compare(o.report.size() - ext.size(), ext.size(), ext) == 0;
  };
  if (ends(".md")) {
    text = md.str();
  } else if (ends(".csv")) {
    std::ostringstream cs;
    cs << "quantity,fp32,int8\nfile_bytes," << fsize << "," << qsize << "\naccuracy," << efp.accuracy << "," << eq.accuracy
       << "\ninference_s," << tf.host_to_host_s << "," << tq.host_to_host_s << "\ndisagreement,," << disagree << "\n";
    for (const auto& l : sq) cs << "sqnr_db:" << l.point << ",," << json_number(l.sqnr_db) << "\n";
    text = cs.str();
  } else {
    check(ends(".json"), "quantize: --report ", o.report, " must end in .json, .csv or .md");
    text = rep.dump(2) + "\n";
  }
  write_file_atomic(o.report, text);
  std::cout << md.str() << "wrote " << o.report << "\n";
}

}  // namespace

void register_quantize(CLI::App& app) {
  // quantize
  auto qo = std::make_shared<QuantizeOptions>();
  auto* qz = app.add_subcommand("quantize", "int8 post-training quantization of a saved fp32 model (writes Q.dlm)");
  qz->add_option("--weights", qo->weights, "fp32 model file (.dlm)")->required();
  qz->add_option("--scheme", qo->scheme, "tflite | torch_qnnpack | torch_onednn | torch_fbgemm | ort")
      ->capture_default_str();
  qz->add_option("--quant", qo->knobs, "quant knobs over the scheme's, e.g. quant_round=half_away,quant_relu=separate");
  qz->add_option("--observer", qo->observer, "minmax | moving_average | histogram | percentile | entropy");
  qz->add_option("--mode", qo->mode, "static (calibrated int8 activations) | dynamic (int8 weights, each input's "
                 "scale chosen at run time: PyTorch quantize_dynamic) | auto (dynamic for models with LSTM/GRU layers)")
      ->capture_default_str();
  qz->add_option("--calib", qo->calib, "calibrate on the first N training samples in file order")->capture_default_str();
  qz->add_option("--calib-data", qo->calib_data, "calibrate on this float32 .npy (N, input shape) instead");
  qz->add_option("--calib-batch", qo->calib_batch, "calibration samples per forward")->capture_default_str();
  qz->add_option("--out", qo->out, "the int8 model file to write")->required();
  qz->add_option("--report", qo->report, "write a report (.json, .csv or .md): sizes, accuracy, SQNR, time");
  qz->add_option("--report-inputs", qo->report_n, "inputs for the SQNR and timing")->capture_default_str();
  add_threads_option(qz, qo->threads);
  add_data_options(qz, qo->data);
  qz->callback([qo] { quantize_cmd(*qo); });
}

}  // namespace cli
}  // namespace driftlab
