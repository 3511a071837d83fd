// The library face for exchange formats (docs/CONVERSION.md): a saved model exported to ONNX (fp32,
// or int8 in QDQ or QOperator form) or to a TF.js layers model; an ONNX file imported onto the
// zoo; the conversion measurements (the original in driftlab against the ONNX export in ONNX
// Runtime, on the test inputs and optionally on adversarial examples); and the robustness
// variation R(m, c) over several such measurements (docs/GLOSSARY.md).
//
// Each function takes a request of plain values and returns a plain result; nothing here prints,
// and the only JSON written here is localise_against_ort's cases.json, ONNX Runtime's input
// (report/convert.h writes convert.json, convert.csv and the tables). Errors throw
// driftlab::Error with the same messages the driftlab command shows.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "engine/data/datasets.h"

namespace driftlab {

// How a model is written as ONNX; shared by export and by the conversion measurements.
struct OnnxForm {
  int64_t opset = 13;              // 13..17
  std::string quant_form = "qdq";  // an int8 model's form: qdq (QuantizeLinear/DequantizeLinear
                                   // around float ops) or qop (QLinearConv, QGemm, ...)
  // Deliberately wrong exports, to measure what each semantic is worth:
  bool naive_pads = false;       // pads written symmetric, (begin+end)/2 rounded up
  bool naive_rnn_gates = false;  // recurrent gate blocks in driftlab's stored order, not ONNX's
  std::string doc;  // the graph's doc_string; "": "driftlab export --weights W" (or convert)
};

// ---- export: a model file written as ONNX or as a TF.js layers model ----

struct ModelExportRequest {
  std::string weights;         // the model file (.dlm, fp32 or int8)
  std::string format = "onnx";  // onnx | tfjs (fp32 only)
  std::string out;             // onnx: the .onnx file; tfjs: the folder (model.json, group1-shard1of1.bin)
  OnnxForm onnx;               // onnx only
};

struct ModelExportResult {
  std::string model, policy;       // the model's name and Policy string
  bool int8 = false;
  std::vector<std::string> lines;  // one per layer: the ONNX nodes or the TF.js layer it became
  std::vector<std::string> notes;  // int8 ONNX: where ONNX Runtime computes otherwise than the scheme
  int64_t bytes = 0;               // onnx: the file's size; tfjs: the weight shard's
  int64_t num_nodes = 0, num_initializers = 0;  // onnx only (the graph passed ONNX's checker)
};

ModelExportResult export_model(const ModelExportRequest& request);

// ---- import: an ONNX file onto the zoo (torch.onnx.export's of a zoo model, or driftlab's
// export), or as a graph model (any graph of the ops convert/onnx_graph_import.h lists) ----

struct OnnxImportRequest {
  std::string file;              // the .onnx file, or a Keras / TF.js model.json
  // onnx | keras (a TF.js layers model or a Keras model JSON: always a graph model,
  // convert/keras_import.h) | auto: keras for a .json file, else onnx
  std::string format = "auto";
  // zoo: onto a zoo model (int8, CUDA and every export then apply); graph: as a graph model; auto:
  // the zoo where the graph maps onto a zoo model, else a graph
  std::string as = "auto";
  // the written model's Policy ("": the format's own, torch for ONNX, tensorflow for Keras); for an
  // ONNX zoo model another than torch gets converted weights
  std::string policy;
  std::string out;               // the model file to write (.dlm)
};

struct OnnxImportResult {
  std::string producer;              // the file's producer name and version
  int64_t opset = 0;
  std::string model;                 // the zoo model the graph maps onto, or "graph"
  std::vector<std::string> mapping;  // "node 'Conv_0' (Conv) -> 0.conv2d", one per weighted node (graph: per node)
  std::string zoo_mismatch;          // auto that fell back to a graph: why no zoo model matched
  bool converted = false;  // the weights were converted from the torch preset's conventions to the policy's
};

// Called at the steps after which the command reports, so that what it shows before a later
// error is what it always showed: after the file is mapped (producer, opset, model and mapping
// set), and after the weights are converted to another policy (converted set).
struct OnnxImportHooks {
  std::function<void(const OnnxImportResult&)> on_mapped, on_converted;
};

OnnxImportResult import_onnx_model(const OnnxImportRequest& request, const OnnxImportHooks& hooks = {});

// ---- node by node against ONNX Runtime: where an ONNX file's outputs part ----
// The file imported as a graph model under `policy` (ONNX's semantics: the torch preset's) and run
// on the inputs; ONNX Runtime runs the same file with every node output the graph computes also
// returned (an Identity per value: ORT then cannot fuse a node into the next across that value,
// so its kernels may differ slightly from an unprobed run's). Each node's output is compared, in
// node order; the first whose max|d| exceeds `tol` x max|ONNX Runtime's| is where they part.

struct OrtLocaliseRequest {
  std::string onnx;              // the .onnx file
  // the file ONNX Runtime runs, when another: a transformed version of `onnx` that keeps its value
  // names (a simplified or optimised graph, a re-export): which node did the transformation move?
  // Values it no longer has are not compared.
  std::string ort_onnx;
  std::string input;             // float32 .npy, (N, the graph's per-sample input shape)
  std::string policy = "torch";
  double tol = 1e-5;             // of each node's largest |value| in ONNX Runtime
  std::string out;               // folder: probed.onnx, x.npy, cases.json, ONNX Runtime's outputs
  std::string ort_dir;           // the folder holding ort_run.js and its node_modules (onnxruntime-node)
};

struct NodeAgreement {
  std::string node, op, value;   // the node's name (the file's), driftlab's op, its output value
  Shape shape;                   // per sample
  double max_abs_diff = 0, max_abs_ort = 0, rel = 0;
};

struct OrtLocaliseResult {
  std::string onnx, policy;
  int64_t n = 0;                      // inputs run
  double tol = 0;
  std::vector<NodeAgreement> nodes;   // node order
  int first_parting = -1;             // index into nodes, -1: none parts beyond tol
};

OrtLocaliseResult localise_against_ort(const OrtLocaliseRequest& request);

// Where ONNX Runtime's runner is (ort_run.js beside its onnxruntime-node): DRIFTLAB_ORT_DIR when set,
// else `fallback` (the caller's source tree's tests/oracles/ort: the command's, the Python module's).
std::string ort_dir_or(const std::string& fallback);

// ---- the conversion measurements: driftlab (before) against ONNX Runtime (after) ----

struct ConversionRequest {
  std::string weights;          // the model file (.dlm, fp32 or int8)
  std::string to = "onnx";      // onnx
  std::string out;              // folder: model.onnx, inputs.npy, ort_logits.npy (ort_adversarial_logits.npy)
  OnnxForm onnx;
  int64_t repeats = 3;          // timed inference runs on each side (the median is reported)
  int threads = 0;              // the threads ONNX Runtime is given and reported (0: OpenMP's maximum);
                                // driftlab's side runs on OpenMP's count, which the caller sets
  std::string ort_dir;          // the folder holding ort_run.js and its node_modules (onnxruntime-node)
  std::string adversarial;      // "" or a `driftlab attack --out DIR` folder (adversarial.npy, samples.csv)
  DataSpec data;                // the test split the model is measured on
};

// Examples an attack crafted on the original model, judged by both sides.
struct ConversionAdversarial {
  std::string from;  // the attack folder
  int64_t n = 0;
  double success_before = 0, success_after = 0;  // share misclassified by driftlab, by ONNX Runtime
  double variation = 0;                          // |success_after - success_before|
  int64_t predictions_differ = 0;
};

struct ConversionResult {
  std::string model, weights, policy;
  std::string conversion;  // "onnx", "onnx-qdq", "onnx-qop", with "+naive-pads", "+naive-rnn-gates"
  std::string onnx;        // the written model.onnx
  int64_t opset = 13, repeats = 1;
  std::string inputs;      // the dataset's name
  int64_t n = 0;           // test inputs
  int threads = 0;
  std::string ort_version;
  std::vector<std::string> notes;  // int8: where ONNX Runtime computes otherwise than the scheme
  double accuracy_before = 0, accuracy_after = 0;
  // softmax outputs, ONNX Runtime against driftlab (drift/drift.h OutputDrift)
  double abs_err_mean = 0, rel_err_mean = 0, mean_abs = 0, max_abs = 0, misclassification = 0;
  double logits_max_abs = 0, logits_max_rel = 0;  // max |d| of the logits, and over the largest |logit|
  double load_ms_before = 0, load_ms_after = 0;
  double inference_ms_before = 0, inference_ms_after = 0;  // medians of:
  std::vector<double> inference_ms_before_all, inference_ms_after_all;
  uint64_t size_before = 0, size_after = 0;  // the model file, the .onnx file (bytes)
  std::optional<ConversionAdversarial> adversarial;
};

struct ConversionHooks {
  // After model.onnx is written, before the data is read: the exporter's notes (int8 models).
  std::function<void(const std::vector<std::string>& notes)> on_exported;
};

// Runs ONNX Runtime through node (request.ort_dir/ort_run.js). The data comes from `loader`.
ConversionResult measure_conversion(const ConversionRequest& request, DatasetLoader& loader,
                                    const ConversionHooks& hooks = {});

// ---- the robustness variation R(m, c) over several conversions (docs/GLOSSARY.md) ----
//
// R(m_i, c_j) = sum over attacks A of P(m_i, c_j, A), P = (|S_conv - S_orig| - min) / (max - min),
// min and max over the (model, conversion) rows of that attack (attacks/stats.h min_max_indicator).
// Each folder is a measure_conversion result with an adversarial section (its convert.json); the
// attack is named by the attack folder's result.json. Every row needs every attack.

struct ConversionRobustness {
  struct Cell {
    double before = 0, after = 0, variation = 0;  // success rates and their |difference|
  };
  struct Row {
    std::string weights, conversion, model;
    std::vector<Cell> cells;  // one per attack
    double R = 0;
  };
  std::vector<std::string> attacks;  // "fgsm eps 0.1", "boundary", ... in first-seen order
  std::vector<Row> rows;             // (weights, conversion) in first-seen order
};

ConversionRobustness conversion_robustness(const std::vector<std::string>& dirs);

// The label column of a `driftlab attack` samples.csv (index,label,...), read from `in` (`csv`
// names it in errors): each label a class index of the model (0..classes-1), else an error naming
// the line.
std::vector<int32_t> read_attack_labels(std::istream& in, const std::string& csv, int64_t classes);

}  // namespace driftlab
