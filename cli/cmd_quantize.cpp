// driftlab quantize: int8 post-training quantization of a saved model (driftlab/quantize.h), and
// its --report (report/quantize.h); here the options and the lines printed.
#include "cli/commands.h"
#include "cli/common.h"

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>

#include "driftlab/quantize.h"
#include "report/quantize.h"

namespace driftlab {
namespace cli {
namespace {

struct QuantizeOptions {
  QuantizeRequest req;  // the data copied in from `data`
  std::string report;
  int64_t report_n = 1000;
  int threads = 0;
  DataOptions data;
};

void quantize_cmd(const QuantizeOptions& o) {
  set_threads(o.threads);
  QuantizeRequest r = o.req;
  r.data = o.data;
  // the report's options checked before the model is written (a refused command writes nothing)
  if (!o.report.empty()) report::quantize_report_format(o.report);
  QuantizeResult q = quantize(r, *o.data.loader);
  if (q.dynamic) {
    std::cout << "wrote " << r.out << " (" << q.model << ", dynamic int8 (weights only), scheme " << r.scheme << ", "
              << q.policy << ")\n";
    for (std::size_t i = 0; i < q.int8.model.net->size(); ++i)
      std::cout << "  " << i << " " << q.int8.model.net->layer(i).describe() << "\n";
  } else {
    std::cout << "wrote " << r.out << " (" << q.model << ", int8 scheme " << r.scheme << ", " << q.policy
              << "; calibrated on " << q.calibration << ")\n";
    for (const auto& p : q.int8.points)
      std::cout << "  " << std::left << std::setw(12) << p.name << std::right << " range [" << p.range.min << ", "
                << p.range.max << "] scale " << p.q.scale << " zero point " << p.q.zero_point << "\n";
  }
  if (o.report.empty()) return;
  try {
    const QuantizeReport rep = quantize_report(r, q, *o.data.loader, o.report_n);
    const std::string md = report::write_quantize_report(o.report, rep);
    std::cout << md << "wrote " << o.report << "\n";
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(r.out, ec);  // the command failed: its model goes with it
    throw;
  }
}

}  // namespace

void register_quantize(CLI::App& app) {
  // quantize
  auto qo = std::make_shared<QuantizeOptions>();
  QuantizeRequest& r = qo->req;
  auto* qz = app.add_subcommand("quantize", "int8 post-training quantization of a saved fp32 model (writes Q.dlm)");
  qz->add_option("--weights", r.weights, "fp32 model file (.dlm)")->required();
  qz->add_option("--scheme", r.scheme, "tflite | torch_qnnpack | torch_onednn | torch_fbgemm | ort")
      ->capture_default_str();
  qz->add_option("--quant", r.knobs, "quant knobs over the scheme's, e.g. quant_round=half_away,quant_relu=separate");
  qz->add_option("--observer", r.observer, "minmax | moving_average | histogram | percentile | entropy");
  qz->add_option("--mode", r.mode, "static (calibrated int8 activations) | dynamic (int8 weights, each input's "
                 "scale chosen at run time: PyTorch quantize_dynamic) | auto (dynamic for models with LSTM/GRU layers)")
      ->capture_default_str();
  qz->add_option("--calib", r.calib, "calibrate on the first N training samples in file order")->capture_default_str();
  qz->add_option("--calib-data", r.calib_data, "calibrate on this float32 .npy (N, input shape) instead");
  qz->add_option("--calib-batch", r.calib_batch, "calibration samples per forward")->capture_default_str();
  qz->add_option("--out", r.out, "the int8 model file to write")->required();
  qz->add_option("--report", qo->report, "write a report (.json, .csv or .md): sizes, accuracy, SQNR, time");
  qz->add_option("--report-inputs", qo->report_n, "inputs for the SQNR and timing")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_threads_option(qz, qo->threads);
  add_data_options(qz, qo->data);
  qz->callback([qo] { quantize_cmd(*qo); });
}

}  // namespace cli
}  // namespace driftlab
