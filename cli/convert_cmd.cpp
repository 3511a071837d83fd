// driftlab export (issue 18): a saved model written in an exchange format.
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "convert/onnx_export.h"
#include "convert/onnx_import.h"
#include "drift/convert.h"
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
    // conventions (flip, flatten order, layouts: drift/convert.h), its numeric knobs its own
    m = rebuild_under(m, target, true);
    std::cout << "  weights converted from the torch preset's conventions to " << o.policy << "'s\n";
  }
  save_model(o.out, m, {{"imported_from", o.file}, {"onnx_producer", im.producer}});
  std::cout << "wrote " << o.out << "\n";
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

  auto io = std::make_shared<ImportOptions>();
  auto* im = app.add_subcommand("import", "read an ONNX model (torch.onnx.export's) into a driftlab model file");
  im->add_option("file", io->file, "the .onnx file")->required();
  im->add_option("--format", io->format, "onnx")->capture_default_str();
  im->add_option("--policy", io->policy, "the policy of the written model (ONNX's semantics are the torch preset's; "
                 "another preset gets converted weights)")->capture_default_str();
  im->add_option("--out", io->out, "the model file to write (.dlm)")->required();
  im->callback([io] { import_cmd(*io); });
}

}  // namespace cli
}  // namespace driftlab
