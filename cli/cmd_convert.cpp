// driftlab export, import, convert and convert-report: a saved model written as ONNX or TF.js, an
// ONNX file read onto the zoo, the conversion measured against ONNX Runtime, and R(m, c) over
// several conversions. What they compute is in driftlab/convert.h; the files and tables they
// write are in report/convert.h.
#include "cli/commands.h"
#include "cli/common.h"

#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "driftlab/convert.h"
#include "engine/io/container.h"
#include "report/convert.h"
#include <nlohmann/json.hpp>

namespace driftlab {
namespace cli {
namespace {

void export_cmd(const ModelExportRequest& o) {
  const ModelExportResult ex = export_model(o);
  if (o.format == "tfjs") {
    std::cout << "export tfjs: " << ex.model << " under " << ex.policy << " as a TF.js layers model (input channels-last)\n";
    for (const std::string& n : ex.lines) std::cout << "  " << n << "\n";
    std::cout << "wrote " << o.out << "/model.json and " << o.out << "/group1-shard1of1.bin (" << ex.bytes << " bytes)\n";
    return;
  }
  std::cout << "export onnx: " << ex.model << (ex.int8 ? " (int8, " + o.onnx.quant_form + " form)" : "") << " under "
            << ex.policy << ", opset " << o.onnx.opset << "\n";
  for (const std::string& n : ex.lines) std::cout << "  " << n << "\n";
  std::cout << report::quant_notes_text(ex.notes);
  if (o.onnx.naive_pads || o.onnx.naive_rnn_gates)
    std::cout << "  (deliberately wrong: " << (o.onnx.naive_pads ? "--naive-pads " : "")
              << (o.onnx.naive_rnn_gates ? "--naive-rnn-gates" : "") << ")\n";
  std::cout << "wrote " << o.out << " (" << ex.bytes << " bytes, " << ex.num_nodes << " nodes, " << ex.num_initializers
            << " initializers; ONNX checker: passed)\n";
}

void import_cmd(const OnnxImportRequest& o) {
  OnnxImportHooks hooks;
  hooks.on_mapped = [&](const OnnxImportResult& im) {
    if (!im.zoo_mismatch.empty()) std::cout << "import onnx: " << o.file << " maps onto no zoo model; imported as a graph\n";
    if (im.model == "graph" && im.opset == 0)
      std::cout << "import keras: " << o.file << " (" << im.producer << ") as a graph model under "
                << (o.policy.empty() ? "tensorflow" : o.policy) << "\n";
    else if (im.model == "graph")
      std::cout << "import onnx: " << o.file << " (" << im.producer << ", opset " << im.opset << ") as a graph model of "
                << im.mapping.size() << " nodes under " << (o.policy.empty() ? "torch" : o.policy) << "\n";
    else
      std::cout << "import onnx: " << o.file << " (" << im.producer << ", opset " << im.opset << ") is driftlab's "
                << im.model << "\n";
    for (const std::string& m : im.mapping) std::cout << "  " << m << "\n";
  };
  hooks.on_converted = [&](const OnnxImportResult&) {
    std::cout << "  weights converted from the torch preset's conventions to " << o.policy << "'s\n";
  };
  import_onnx_model(o, hooks);
  std::cout << "wrote " << o.out << "\n";
}

struct LocaliseOptions {
  OrtLocaliseRequest req;
  std::string json;
};

void localise_cmd(LocaliseOptions& o) {
  o.req.ort_dir = ort_dir();
  const OrtLocaliseResult r = localise_against_ort(o.req);
  std::cout << "localise: " << r.onnx << " under " << r.policy << " against ONNX Runtime"
            << (o.req.ort_onnx.empty() ? "" : " running " + o.req.ort_onnx) << ", node by node, on " << r.n
            << " inputs (tolerance " << r.tol << " of each node's largest |value| in ONNX Runtime)\n";
  std::cout << std::left << std::setw(6) << "node" << std::setw(48) << "name" << std::setw(16) << "op" << std::right
            << std::setw(12) << "max|d|" << std::setw(12) << "max|ort|" << std::setw(12) << "relative" << "\n";
  for (std::size_t i = 0; i < r.nodes.size(); ++i) {
    const NodeAgreement& a = r.nodes[i];
    std::string name = a.node.size() > 46 ? "..." + a.node.substr(a.node.size() - 43) : a.node;
    std::cout << std::left << std::setw(6) << i << std::setw(48) << name << std::setw(16) << a.op << std::right
              << std::setw(12) << sci(a.max_abs_diff) << std::setw(12) << sci(a.max_abs_ort) << std::setw(12)
              << sci(a.rel) << (static_cast<int>(i) == r.first_parting ? "   <- first to part" : "") << "\n";
  }
  if (r.first_parting < 0) {
    std::cout << "no node parts beyond " << r.tol << ": driftlab's " << r.policy
              << " and ONNX Runtime compute this file alike\n";
  } else {
    const NodeAgreement& a = r.nodes[static_cast<std::size_t>(r.first_parting)];
    std::cout << "first node to part: '" << a.node << "' (" << a.op << ", output '" << a.value << "'): max|d| "
              << sci(a.max_abs_diff) << " = " << sci(a.rel) << " of ONNX Runtime's largest |value|\n";
  }
  if (!o.json.empty()) {
    nlohmann::json nodes = nlohmann::json::array();
    for (const NodeAgreement& a : r.nodes)
      nodes.push_back({{"node", a.node}, {"op", a.op}, {"value", a.value}, {"shape", a.shape},
                       {"max_abs_diff", a.max_abs_diff}, {"max_abs_ort", a.max_abs_ort}, {"rel", a.rel}});
    write_file_atomic(o.json, nlohmann::json({{"onnx", r.onnx}, {"policy", r.policy}, {"n", r.n}, {"tol", r.tol},
                                              {"first_parting", r.first_parting}, {"nodes", nodes}})
                                      .dump(2) + "\n");
  }
}

struct ConvertOptions {
  ConversionRequest request;
  DataOptions data;
};

// The measurements of Openja et al.'s conversion study (docs/GLOSSARY.md): driftlab (the original) against ONNX Runtime
// (the converted model) on the same test inputs.
void convert_cmd(ConvertOptions o) {
  ConversionRequest& r = o.request;
  set_threads(r.threads);
  r.ort_dir = ort_dir();
  r.data = o.data;
  ConversionHooks hooks;
  hooks.on_exported = [](const std::vector<std::string>& notes) { std::cout << report::quant_notes_text(notes); };
  const ConversionResult c = measure_conversion(r, *o.data.loader, hooks);
  if (c.adversarial) {
    const ConversionAdversarial& a = *c.adversarial;
    std::cout << "adversarial examples of " << a.from << " (" << a.n << "): misclassified by driftlab "
              << a.success_before * 100 << "%, by ONNX Runtime " << a.success_after * 100
              << "% (robustness variation |S_conv - S_orig| = " << a.variation << "); " << a.predictions_differ
              << " predictions differ\n";
  }
  report::write_conversion_files(r.out, c);
  std::cout << report::conversion_table(c) << "wrote " << r.out << "/model.onnx, convert.json, convert.csv\n";
}

// The robustness variation R(m, c) over several conversions (docs/GLOSSARY.md). Each DIR is a
// `driftlab convert --adversarial ATTACK_DIR --out DIR` result; the attack is named by
// ATTACK_DIR/result.json. Every row needs every attack.
struct ConvertReportOptions {
  std::vector<std::string> dirs;
  std::string out;
};

void convert_report_cmd(const ConvertReportOptions& o) {
  const ConversionRobustness t = conversion_robustness(o.dirs);
  std::cout << report::robustness_variation_table(t);
  if (!o.out.empty()) {
    report::write_robustness_variation_json(o.out, t);
    std::cout << "wrote " << o.out << "\n";
  }
}

}  // namespace

void register_convert(CLI::App& app) {
  auto o = std::make_shared<ModelExportRequest>();
  auto* ex = app.add_subcommand("export", "write a saved model as ONNX (the Policy's semantics stated in the graph; an "
                                "int8 model with its integers and scales in QDQ or QOperator form) or as TF.js");
  ex->add_option("--weights", o->weights, "model file (.dlm)")->required();
  ex->add_option("--format", o->format, "onnx | tfjs (a TF.js layers model: --out is a folder)")->capture_default_str();
  ex->add_option("--opset", o->onnx.opset, "ONNX opset, 13..17")->capture_default_str();
  ex->add_option("--out", o->out, "the .onnx file to write (tfjs: the folder)")->required();
  ex->add_option("--quant-form", o->onnx.quant_form,
                 "an int8 model's form: qdq (QuantizeLinear/DequantizeLinear around float ops) or qop (QLinearConv, "
                 "QGemm, QLinearAdd...)")
      ->capture_default_str();
  ex->add_flag("--naive-pads", o->onnx.naive_pads,
               "deliberately wrong: pads written symmetric, (begin+end)/2 rounded up (what a converter assuming "
               "PyTorch's padding writes), to measure what the padding rule is worth");
  ex->add_flag("--naive-rnn-gates", o->onnx.naive_rnn_gates,
               "deliberately wrong: recurrent gate blocks in driftlab's stored order, not ONNX's");
  ex->callback([o] { export_cmd(*o); });

  auto io = std::make_shared<OnnxImportRequest>();
  auto* im = app.add_subcommand("import", "read an ONNX model (a zoo model, or a graph model of any supported graph) or a "
                                "Keras / TF.js layers model (a graph model) into a driftlab model file");
  im->add_option("file", io->file, "the .onnx file, or a TF.js model.json / Keras model JSON")->required();
  im->add_option("--format", io->format, "auto (keras for a .json file), onnx or keras")->capture_default_str();
  im->add_option("--as", io->as, "zoo: onto a zoo model; graph: as a graph model (any graph of the supported ops); "
                 "auto: the zoo where it matches, else a graph")->capture_default_str();
  im->add_option("--policy", io->policy, "the policy of the written model (default: torch for ONNX, whose semantics "
                 "are the torch preset's, another preset getting converted weights; tensorflow for Keras, whose "
                 "abstract semantics the policy decides)");
  im->add_option("--out", io->out, "the model file to write (.dlm)")->required();
  im->callback([io] { import_cmd(*io); });

  auto lo = std::make_shared<LocaliseOptions>();
  auto* lc = app.add_subcommand("localise", "an ONNX file node by node in driftlab and in ONNX Runtime: the first node "
                                "whose outputs part (where an exported model's mismatch starts)");
  lc->add_option("--onnx", lo->req.onnx, "the .onnx file")->required();
  lc->add_option("--ort-onnx", lo->req.ort_onnx, "the file ONNX Runtime runs, when another: a transformed version "
                 "of --onnx with its value names (simplified, optimised, re-exported)");
  lc->add_option("--input", lo->req.input, "float32 .npy of inputs, (N, the graph's input shape)")->required();
  lc->add_option("--policy", lo->req.policy, "the graph's policy (ONNX's semantics are the torch preset's)")
      ->capture_default_str();
  lc->add_option("--tol", lo->req.tol, "a node parts when max|d| exceeds this share of its largest |value|")
      ->capture_default_str();
  lc->add_option("--out", lo->req.out, "folder for the probed model and ONNX Runtime's outputs")->required();
  lc->add_option("--json", lo->json, "also write the table as JSON");
  lc->callback([lo] { localise_cmd(*lo); });

  auto co = std::make_shared<ConvertOptions>();
  ConversionRequest& cr = co->request;
  auto* cv = app.add_subcommand("convert", "export to ONNX and run the test inputs in driftlab and ONNX Runtime: "
                                "accuracy, output errors, misclassification, load and inference time, sizes");
  cv->add_option("--weights", cr.weights, "model file (.dlm, fp32 or int8)")->required();
  cv->add_option("--quant-form", cr.onnx.quant_form, "an int8 model's ONNX form: qdq or qop")->capture_default_str();
  cv->add_flag("--naive-pads", cr.onnx.naive_pads, "deliberately wrong conversion: pads written symmetric (as export's)");
  cv->add_flag("--naive-rnn-gates", cr.onnx.naive_rnn_gates,
               "deliberately wrong conversion: recurrent gates in driftlab's stored order (as export's)");
  cv->add_option("--to", cr.to, "onnx")->capture_default_str();
  cv->add_flag("--check", "run the converted model in ONNX Runtime (what this command always does; accepted for "
               "compatibility)");
  cv->add_option("--opset", cr.onnx.opset, "ONNX opset, 13..17")->capture_default_str();
  cv->add_option("--repeats", cr.repeats, "timed inference runs on each side (the median is reported)")
      ->capture_default_str();
  cv->add_option("--out", cr.out, "output folder")->required();
  cv->add_option("--adversarial", cr.adversarial, "a `driftlab attack --out DIR` folder of examples crafted on this "
                 "model: their success judged by driftlab and by ONNX Runtime (robustness before and after conversion)");
  add_threads_option(cv, cr.threads);
  add_data_options(cv, co->data);
  cv->callback([co] { convert_cmd(*co); });

  auto ro = std::make_shared<ConvertReportOptions>();
  auto* rp = app.add_subcommand("convert-report", "robustness variation R(m, c): per attack the change of success rate "
                                "through conversion, min-max scaled over the rows, summed over attacks; over several "
                                "`convert --adversarial` results (one folder per model, conversion and attack)");
  rp->add_option("dirs", ro->dirs, "`driftlab convert --adversarial ... --out DIR` folders")->required();
  rp->add_option("--out", ro->out, "also write the table as JSON here");
  rp->callback([ro] { convert_report_cmd(*ro); });
}

}  // namespace cli
}  // namespace driftlab
