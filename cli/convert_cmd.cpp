// driftlab export (issue 18): a saved model written in an exchange format.
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "convert/onnx_export.h"
#include "engine/core/error.h"
#include "engine/data/transform.h"
#include "models/model_file.h"
#include "quant/model_io.h"

namespace driftlab {
namespace cli {
namespace {

struct ExportOptions {
  std::string weights, format = "onnx", out;
  int64_t opset = 13;
  bool naive_pads = false, naive_rnn_gates = false;
};

void export_cmd(const ExportOptions& o) {
  check(o.format == "onnx", "export: --format '", o.format, "' (known: onnx)");
  LoadedModel lm = quant::load_any_model(o.weights);
  check(!quant::is_quantized(lm), "export: ", o.weights,
        " is an int8 model; the ONNX export of quantized models (QDQ and QOperator forms) is not built yet: export "
        "its fp32 model");
  convert::OnnxExportOptions eo;
  eo.opset = o.opset;
  eo.norm = input_norm_from_metadata(lm.metadata);
  eo.doc = "driftlab export --weights " + o.weights;
  eo.symmetric_pads = o.naive_pads;
  eo.rnn_gates_as_stored = o.naive_rnn_gates;
  const convert::OnnxExport ex = convert::export_onnx(lm.model, eo);
  convert::write_onnx(o.out, ex.bytes);
  std::cout << "export onnx: " << lm.model.name << " under " << lm.model.policy.to_string() << ", opset " << o.opset
            << "\n";
  for (const std::string& n : ex.nodes) std::cout << "  " << n << "\n";
  if (o.naive_pads || o.naive_rnn_gates)
    std::cout << "  (deliberately wrong: " << (o.naive_pads ? "--naive-pads " : "")
              << (o.naive_rnn_gates ? "--naive-rnn-gates" : "") << ")\n";
  std::cout << "wrote " << o.out << " (" << ex.bytes.size() << " bytes, " << ex.num_nodes << " nodes, "
            << ex.num_initializers << " initializers; ONNX checker: passed)\n";
}

}  // namespace

void register_convert_commands(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  auto* ex = app.add_subcommand("export", "write a saved fp32 model as ONNX (the Policy's semantics stated in the graph)");
  ex->add_option("--weights", o->weights, "model file (.dlm)")->required();
  ex->add_option("--format", o->format, "onnx")->capture_default_str();
  ex->add_option("--opset", o->opset, "ONNX opset, 13..17")->capture_default_str();
  ex->add_option("--out", o->out, "the .onnx file to write")->required();
  ex->add_flag("--naive-pads", o->naive_pads,
               "deliberately wrong: pads written symmetric, (begin+end)/2 rounded up (what a converter assuming "
               "PyTorch's padding writes), to measure what the padding rule is worth");
  ex->add_flag("--naive-rnn-gates", o->naive_rnn_gates,
               "deliberately wrong: recurrent gate blocks in driftlab's stored order, not ONNX's");
  ex->callback([o] { export_cmd(*o); });
}

}  // namespace cli
}  // namespace driftlab
