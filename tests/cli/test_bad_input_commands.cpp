// The bad-input catalogue of the commands added since the first one (tests/cli/test_bad_input.cpp
// says what every row asserts; tests/cli/bad_input.h runs a row): convert, convert-report,
// attack, robustness, quantize and study. Each row here was a defect (issue 46: an internal
// error, undefined behaviour, a silent wrong result or a file left behind) and failed before the
// fix it names. The import rows (issue 40) check the graph importer's refusals, each naming the
// node; import_cycle and import_dangling came out over several lines before (ONNX's checker's
// text, which check_row's one error line now holds).
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "tests/cli/bad_input.h"

namespace {

using namespace bad_input;

// An attack folder as `driftlab attack --out` leaves it: n examples for lenet1 and samples.csv with
// the given labels (the first column the index, the second the label, the rest as the attack writes).
void write_attack_dir(const fs::path& dir, const std::vector<std::string>& labels, driftlab::Shape shape = {}) {
  const int64_t n = static_cast<int64_t>(labels.size());
  write_input(dir / "adversarial.npy", shape.empty() ? driftlab::Shape{n, 1, 28, 28} : shape);
  std::string csv = "index,label,clean_pred,adv_pred,success,zero_gradient,l0,l2,linf,queries\n";
  for (int64_t i = 0; i < n; ++i) csv += std::to_string(i) + "," + labels[i] + ",0,1,1,0,1,0.1,0.1,0\n";
  write_all(dir / "samples.csv", csv);
}

std::function<void(const fs::path&)> model_and_attack(std::vector<std::string> labels, driftlab::Shape shape = {}) {
  return [labels, shape](const fs::path& d) {
    write_model(d / "m.dlm");
    write_attack_dir(d / "adv", labels, shape);
  };
}

// A convert folder whose convert.json is `text`.
std::function<void(const fs::path&)> convert_json(std::string text) {
  return [text](const fs::path& d) { write_all(d / "conv" / "convert.json", text); };
}

// A labels .npy for `attack --input`: two inputs, their classes.
std::function<void(const fs::path&)> attack_inputs(float label) {
  return [label](const fs::path& d) {
    write_model(d / "m.dlm");
    write_input(d / "x.npy");
    driftlab::write_npy((d / "y.npy").string(), filled({2}, 1.0f, 1, label));
  };
}

// An int8 model (TFLite's scheme, calibrated by the built driftlab on 4 inputs) whose int32 element
// `index` of tensor `name` is replaced by v, the file's CRC recomputed (so the values, not the
// checksum, are what the loader sees).
std::function<void(const fs::path&)> int8_with(std::string name, int64_t index, int32_t v) {
  return [name, index, v](const fs::path& d) {
    write_model(d / "m.dlm");
    write_input(d / "x.npy", {4, 1, 28, 28});
    const CliRun q = run_driftlab("quantize --weights " + (d / "m.dlm").string() + " --out " + (d / "q.dlm").string() +
                                  " --scheme tflite --calib-data " + (d / "x.npy").string() + " --calib 4 --threads 1");
    ASSERT_EQ(q.code, 0) << q.out;
    ModelParts m = split_model(read_all(d / "q.dlm"));
    int64_t offset = -1;
    for (const json& t : m.header["tensors"])
      if (t["name"] == name) offset = t["offset"].get<int64_t>();
    ASSERT_GE(offset, 0) << name << " is no tensor of the int8 model";
    std::memcpy(&m.data[static_cast<std::size_t>(offset + 4 * index)], &v, sizeof v);
    write_all(d / "q.dlm", join_model(m.version, m.header.dump(), m.data));
  };
}
const std::string kPredictInt8 = "predict --threads 1 --weights {d}/q.dlm --input {d}/x.npy --output {d}/y.npy";

const std::string kConvert = "convert --weights {d}/m.dlm --adversarial {d}/adv --out {d}/out --limit 4 --repeats 1";
const std::string kAttackInput = "attack --weights {d}/m.dlm --input {d}/x.npy --labels {d}/y.npy --out {d}/a";

// The bad ONNX graphs of tests/onnx_node/bad_graphs.py (python3-onnx) written into the row's folder.
void bad_graphs(const fs::path& d) {
  const std::string cmd = "/usr/bin/python3 " + std::string(DRIFTLAB_SOURCE_DIR) + "/tests/onnx_node/bad_graphs.py " + d.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

std::vector<Row> catalogue() {
  const std::string spec_head = "study: bad\nsteps:\n";
  return {
      // ---- convert --adversarial: samples.csv and adversarial.npy, read before anything is written ----
      {"convert_label_not_a_number", model_and_attack({"3", "x7"}), kConvert, 1, "convert",
       {"\\{d\\}/adv/samples\\.csv line 3", "label 'x7' is not a class index"}, {"out/model.onnx", "out/inputs.npy"}},
      {"convert_label_too_large", model_and_attack({"3", "99999999999999"}), kConvert, 1, "convert",
       {"samples\\.csv line 3", "'99999999999999'", "\\(0\\.\\.9\\)"}, {"out/model.onnx", "out/inputs.npy"}},
      {"convert_label_negative", model_and_attack({"-1", "3"}), kConvert, 1, "convert", {"samples\\.csv line 2", "'-1'"},
       {"out/model.onnx"}},
      {"convert_examples_wrong_shape", model_and_attack({"1", "2"}, {2, 3, 28, 28}), kConvert, 1, "convert",
       {"\\{d\\}/adv/adversarial\\.npy has shape \\[2,3,28,28\\]", "lenet1 takes \\[2,1,28,28\\]"}, {"out/model.onnx"}},
      {"convert_examples_and_labels_disagree", model_and_attack({"1", "2"}, {3, 1, 28, 28}), kConvert, 1, "convert",
       {"holds 3 examples, samples\\.csv 2 labels"}, {"out/model.onnx"}},
      // ---- convert-report: convert.json as written by hand or by another version ----
      {"convertreport_from_not_a_string",
       convert_json(R"({"adversarial": {"from": 5}, "conversion": "onnx", "weights": "w", "model": "m"})"),
       "convert-report {d}/conv", 1, "convert-report", {"\\{d\\}/conv/convert\\.json: \"from\" is not a string"}},
      {"convertreport_from_missing",
       convert_json(R"({"adversarial": {}, "conversion": "onnx", "weights": "w", "model": "m"})"),
       "convert-report {d}/conv", 1, "convert-report", {"\"from\" is not a string"}},
      {"convertreport_not_an_object", convert_json("[1, 2]"), "convert-report {d}/conv", 1, "convert-report",
       {"\\{d\\}/conv/convert\\.json is not a JSON object"}},
      {"convertreport_adversarial_not_an_object",
       convert_json(R"({"adversarial": [], "conversion": "onnx", "weights": "w", "model": "m"})"),
       "convert-report {d}/conv", 1, "convert-report", {"\"adversarial\" is not an object"}},
      {"convertreport_rate_not_a_number",
       convert_json(R"({"adversarial": {"from": "a", "success_before": "1"}, "conversion": "onnx", "weights": "w",
                        "model": "m"})"),
       "convert-report {d}/conv", 1, "convert-report", {"\"success_before\" is not a number"}},
      {"convertreport_weights_not_a_string",
       convert_json(R"({"adversarial": {"from": "a", "success_before": 1, "success_after": 1, "variation": 0},
                        "conversion": "onnx", "weights": 3, "model": "m"})"),
       "convert-report {d}/conv", 1, "convert-report", {"\"weights\" is not a string"}},
      // a rate outside 0..1 (was read as given: 1e308 and -1e308 in two rows make R's min-max scaling inf/inf = NaN)
      {"convertreport_rate_not_a_rate",
       convert_json(R"({"adversarial": {"from": "a", "success_before": 1, "success_after": 1, "variation": 1e308},
                        "conversion": "onnx", "weights": "w", "model": "m"})"),
       "convert-report {d}/conv", 1, "convert-report", {"\"variation\" = 1e\\+308 is not a rate \\(0\\.\\.1\\)"}},
      // ---- attack and robustness ----
      {"attack_label_beyond_the_classes", attack_inputs(50.0f), kAttackInput + " --attack single-pixel", 1, "attack",
       {"\\{d\\}/y\\.npy element 1 is 50", "lenet1 \\(0\\.\\.9\\)"}, {"a"}},
      {"attack_label_beyond_the_classes_boundary", attack_inputs(10.0f), kAttackInput + " --attack boundary", 1, "attack",
       {"element 1 is 10"}, {"a"}},
      {"attack_seed_negative", valid_model, "attack --weights {d}/m.dlm --seed -1 --out {d}/a", 2, "usage", {"--seed"},
       {"a"}},
      {"robustness_seed_negative", valid_model, "robustness --models a={d}/m.dlm --seed -1", 2, "usage", {"--seed"}},
      // ---- quantize: the report's options checked before the model is written ----
      {"quantize_report_extension", valid_model,
       "quantize --weights {d}/m.dlm --out {d}/q.dlm --report {d}/r.txt --calib 4", 1, "quantize",
       {"--report \\{d\\}/r\\.txt must end in \\.json, \\.csv or \\.md"}, {"q.dlm", "r.txt"}},
      {"quantize_report_inputs_zero", valid_model,
       "quantize --weights {d}/m.dlm --out {d}/q.dlm --report {d}/r.json --report-inputs 0", 2, "usage",
       {"--report-inputs"}, {"q.dlm", "r.json"}},
      // ---- int8 model files: every zero point a value of its type, biases the accumulator holds ----
      {"int8_dequantize_zero_point_int32_min", int8_with("7.dequantize.zero_point", 0, INT32_MIN), kPredictInt8, 1,
       "model file", {"\\{d\\}/q\\.dlm: layer 7 \\(dequantize\\)", "zero point -2147483648 is outside int8's -128\\.\\.127"},
       {"y.npy"}},
      {"int8_conv_input_zero_point_100000", int8_with("1.qconv2d.in_zero_point", 0, 100000), kPredictInt8, 1,
       "model file", {"layer 1 \\(qconv2d\\)", "input zero point 100000 is outside int8's"}, {"y.npy"}},
      {"int8_conv_output_zero_point_300", int8_with("3.qconv2d.out_zero_point", 0, 300), kPredictInt8, 1, "model file",
       {"layer 3 \\(qconv2d\\)", "output zero point 300"}, {"y.npy"}},
      {"int8_quantize_zero_point_negative", int8_with("0.quantize.zero_point", 0, -129), kPredictInt8, 1, "model file",
       {"layer 0 \\(quantize\\)", "zero point -129"}, {"y.npy"}},
      {"int8_dense_bias_int32_max", int8_with("6.qdense.bias", 0, INT32_MAX), kPredictInt8, 1, "model file",
       {"layer 6 \\(qdense\\)", "int32 bias\\[0\\] = 2147483647 could overflow the accumulator"}, {"y.npy"}},
      // ---- export: a failed TF.js export leaves no weight shard behind ----
      {"export_tfjs_model_json_taken",
       [](const fs::path& d) {
         write_model(d / "m.dlm");
         fs::create_directories(d / "tj" / "model.json" / "occupied");
       },
       "export --weights {d}/m.dlm --format tfjs --out {d}/tj", 1, "write", {"\\{d\\}/tj/model\\.json"},
       {"tj/group1-shard1of1.bin"}},
      // ---- study: specs and folders, refused before a cell runs ----
      {"study_unknown_kind",
       [spec_head](const fs::path& d) { write_all(d / "s.yaml", spec_head + "  t: {do: trian}\n"); },
       "study run {d}/s.yaml --out {d}/out", 1, "{d}/s.yaml:3", {"unknown kind 'trian'"}, {"out"}},
      {"study_same_cell_twice",
       [spec_head](const fs::path& d) {
         write_all(d / "s.yaml", spec_head + "  t: {do: train, set: {model: lenet1}}\n  u: {do: train, set: {model: lenet1}}\n");
       },
       "study run {d}/s.yaml --out {d}/out", 1, "{d}/s.yaml:4", {"step 'u' makes the same cell as step 't'"},
       {"out"}},
      {"study_reuse_not_a_study",
       [spec_head](const fs::path& d) { write_all(d / "s.yaml", spec_head + "  t: {do: train, set: {model: lenet1}}\n"); },
       "study run {d}/s.yaml --out {d}/out --reuse {d}/nowhere", 1, "study run --reuse {d}/nowhere",
       {"not a study folder"}, {"out"}},
      // ---- import: bad ONNX graphs, each refused naming its node, nothing written ----
      {"import_cycle", bad_graphs, "import {d}/cycle.onnx --as graph --out {d}/o.dlm", 1, "import onnx",
       {"topologically sorted, however input 'b' of node: name: first OpType: Relu"}, {"o.dlm"}},
      {"import_dangling", bad_graphs, "import {d}/dangling.onnx --out {d}/o.dlm", 1, "import onnx",
       {"input 'nowhere' of node: name: reads_nowhere OpType: Add"}, {"o.dlm"}},
      {"import_shape_mismatch", bad_graphs, "import {d}/shape_mismatch.onnx --as graph --out {d}/o.dlm", 1,
       "import onnx", {"node 'mismatched_add': shapes \\[4,6,6\\] and \\[4,2,2\\] do not broadcast"}, {"o.dlm"}},
      {"import_unsupported_attribute", bad_graphs, "import {d}/ceil_mode.onnx --as graph --out {d}/o.dlm", 1,
       "import onnx", {"node 'pool' \\(MaxPool; ceil_mode=1, kernel_shape=\\[2,2\\]\\): ceil_mode 1 is not supported"},
       {"o.dlm"}},
      {"import_unknown_op", bad_graphs, "import {d}/unknown_op.onnx --as graph --out {d}/o.dlm", 1, "import onnx",
       {"node 'soft' \\(Softsign\\): op Softsign is not supported"}, {"o.dlm"}},
      // ---- import: Keras / TF.js layers models, refused naming the layer, nothing written ----
      {"import_keras_unknown_layer",
       [](const fs::path& d) {
         write_all(d / "k.json", R"({"class_name": "Sequential", "config": {"layers": [
             {"class_name": "InputLayer", "config": {"name": "in", "batch_input_shape": [null, 8, 8, 1]}},
             {"class_name": "Conv2DTranspose", "config": {"name": "up", "filters": 2, "kernel_size": 3}}]}})");
       },
       "import {d}/k.json --out {d}/o.dlm", 1, "import keras",
       {"\\{d\\}/k\\.json: layer 'up' \\(Conv2DTranspose\\): layer class not implemented"}, {"o.dlm"}},
      {"import_keras_short_shard",
       [](const fs::path& d) {
         write_all(d / "model.json", R"({"modelTopology": {"class_name": "Sequential", "config": {"layers": [
             {"class_name": "Dense", "config": {"name": "d", "units": 2, "batch_input_shape": [null, 3]}}]}},
             "weightsManifest": [{"paths": ["w.bin"], "weights": [
               {"name": "d/kernel", "shape": [3, 2], "dtype": "float32"},
               {"name": "d/bias", "shape": [2], "dtype": "float32"}]}]})");
         write_all(d / "w.bin", std::string(20, '\0'));
       },
       "import {d}/model.json --out {d}/o.dlm", 1, "import keras",
       {"weight 'd/kernel' ends at byte 24; the shards hold 20"}, {"o.dlm"}},
      // ---- localise: ONNX Runtime never started on a file that is not there ----
      {"localise_missing_onnx", nothing, "localise --onnx {d}/none.onnx --input {d}/x.npy --out {d}/loc", 1,
       "localise", {"cannot open \\{d\\}/none\\.onnx"}, {"loc/probed.onnx"}},
      {"study_convert_takes_an_attack_second",
       [spec_head](const fs::path& d) {
         write_all(d / "s.yaml", spec_head + "  t: {do: train, set: {model: lenet1}}\n  c: {do: convert, needs: [t, t]}\n");
       },
       "study run {d}/s.yaml --out {d}/out", 1, "{d}/s.yaml:4", {"cannot take step 't' \\(train\\) as its further need"},
       {"out"}},
  };
}

class BadInputCommands : public ::testing::TestWithParam<Row> {};

TEST_P(BadInputCommands, FailsCleanly) { check_row(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Catalogue, BadInputCommands, ::testing::ValuesIn(catalogue()),
                         [](const ::testing::TestParamInfo<Row>& info) { return info.param.name; });

// Every family of the new commands has rows, and names are unique.
TEST(BadInputCommandsCatalogue, CoversEveryNewCommand) {
  const std::vector<Row> rows = catalogue();
  std::map<std::string, int> families;
  for (const Row& r : rows) {
    families[r.name.substr(0, r.name.find('_'))]++;
    EXPECT_EQ(std::count_if(rows.begin(), rows.end(), [&](const Row& o) { return o.name == r.name; }), 1) << r.name;
  }
  for (const char* f : {"convert", "convertreport", "attack", "robustness", "quantize", "int8", "export", "study", "import",
                        "localise"})
    EXPECT_GT(families[f], 0) << "no row of family " << f;
  std::cout << rows.size() << " rows:";
  for (const auto& [f, n] : families) std::cout << " " << f << " " << n;
  std::cout << "\n";
}

}  // namespace
