// A study's convert and convert_robustness cells (study/cells.cpp) with ONNX Runtime as the other
// side (ctest oracles.Ort): LeNet-1 and the LSTM, each converted faithfully and by a converter that
// keeps driftlab's recurrent gate order (naive_rnn_gates), each judged on its own FGSM and BIM
// examples; R(m, c) gathered over the four (model, conversion) rows. The checks do not take the
// study's numbers on trust: driftlab's judgement in a convert cell (S_orig) is recomputed by another
// path (the attack cell's own judgement of the same examples), the knob that touches no LeNet layer
// must leave every LeNet number as it was, and R is recomputed from the rows' variations.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "attacks/stats.h"
#include "tests/cli/cli_util.h"
#include "tests/oracles/oracle_util.h"

namespace driftlab {
namespace {

namespace fs = std::filesystem;

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(std::ifstream(p)); }

// manifest.jsonl as hash -> cell
std::map<std::string, nlohmann::json> manifest(const fs::path& study) {
  std::map<std::string, nlohmann::json> out;
  std::ifstream f(study / "manifest.jsonl");
  for (std::string line; std::getline(f, line);) {
    nlohmann::json c = nlohmann::json::parse(line);
    out[c["hash"].get<std::string>()] = c;
  }
  return out;
}

TEST(OrtStudy, ConvertCellsJudgeTheirModelsOwnExamplesAndGatherRmc) {
  DRIFTLAB_SKIP_UNLESS(oracle::ort_unavailable());
  const fs::path d = cli_test::fresh_dir("ort_study_convert");
  std::ofstream(d / "s.yaml") << R"(study: conv
defaults: {limit: 300}
steps:
  train: {do: train, grid: {model: [lenet1, lstm]}, set: {policy: tensorflow, epochs: 1, optimizer: adam, lr: 0.003}}
  attack: {do: attack, needs: train, grid: {attack: [fgsm, bim]}, set: {eps: 0.05, limit: 40}}
  convert: {do: convert, needs: [train, attack], grid: {naive_rnn_gates: [false, true]}, set: {repeats: 1}}
  r_mc: {do: convert_robustness, needs: convert, gather: [model, attack, naive_rnn_gates]}
)";
  const fs::path out = d / "out";
  const cli_test::CliRun r =
      cli_test::run_driftlab("study run " + (d / "s.yaml").string() + " --out " + out.string() + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto cells = manifest(out);
  ASSERT_EQ(cells.size(), 2u + 4u + 8u + 1u);
  auto results = [&](const std::string& hash) { return read_json(out / "cells" / hash / "results.json"); };

  // The LSTM's training read the sequential form of the data without the spec naming it.
  for (const auto& [h, c] : cells)
    if (c["kind"] == "train")
      EXPECT_EQ(c["params"]["dataset"], c["params"]["model"] == "lstm" ? "seq-fashion-mnist" : "fashion-mnist");

  // Per (model, attack): the faithful and the naive conversion's results.
  std::map<std::string, nlohmann::json> faithful, naive;
  for (const auto& [h, c] : cells) {
    if (c["kind"] != "convert") continue;
    const nlohmann::json j = results(h);
    const std::string attack_hash = c["inputs"][1];
    const nlohmann::json a = results(attack_hash);
    const std::string model = cells.at(c["inputs"][0].get<std::string>())["params"]["model"];
    const std::string key = model + " " + a["attack"].get<std::string>();
    // S_orig: the attack cell judged its examples on the model; the convert cell judged the same
    // examples again (read back from adversarial.npy, through the model's own runner)
    EXPECT_EQ(j["adversarial"]["success_before"], a["over_all"]["success_rate"]) << key;
    EXPECT_EQ(j["adversarial"]["n"], 40) << key;
    EXPECT_EQ(j["adversarial"]["cell"], attack_hash);
    EXPECT_FALSE(fs::exists(out / "cells" / h / "inputs.npy")) << "the test inputs written for ONNX Runtime are removed";
    EXPECT_TRUE(fs::exists(out / "cells" / h / "model.onnx"));
    (c["params"]["naive_rnn_gates"] == "true" ? naive : faithful)[key] = j;
  }
  ASSERT_EQ(faithful.size(), 4u);
  ASSERT_EQ(naive.size(), 4u);
  for (const auto& [key, j] : faithful) {
    EXPECT_EQ(j["conversion"], "onnx");
    EXPECT_EQ(j["misclassification"], 0.0) << key;
    EXPECT_EQ(j["accuracy_before"], j["accuracy_after"]) << key;
    EXPECT_EQ(j["adversarial"]["predictions_differ"], 0) << key;
    EXPECT_EQ(j["adversarial"]["variation"], 0.0) << key;
  }
  for (const char* attack : {"fgsm", "bim"}) {
    const std::string lenet = std::string("lenet1 ") + attack, lstm = std::string("lstm ") + attack;
    // the gate order is no part of LeNet-1: every number but the conversion's name is the faithful one's
    nlohmann::json a = faithful.at(lenet), b = naive.at(lenet);
    EXPECT_EQ(b["conversion"], "onnx+naive-rnn-gates");
    a.erase("conversion");
    b.erase("conversion");
    EXPECT_EQ(a, b) << lenet;
    // the LSTM's gates swapped: the converted model decides otherwise on clean inputs
    EXPECT_GT(naive.at(lstm)["misclassification"].get<double>(), 0.0) << lstm;
    EXPECT_GT(naive.at(lstm)["adversarial"]["predictions_differ"].get<int>(), 0) << lstm;
  }

  // R(m, c): one row per (model, conversion), a column per attack; R the min-max indicator of the
  // variations the convert cells measured
  std::string r_hash;
  for (const auto& [h, c] : cells)
    if (c["kind"] == "convert_robustness") r_hash = h;
  const nlohmann::json t = results(r_hash);
  ASSERT_EQ(t["attacks"], nlohmann::json({"fgsm eps 0.05", "bim eps 0.05"}));
  ASSERT_EQ(t["rows"].size(), 4u);
  std::vector<std::vector<double>> v;
  for (const auto& row : t["rows"]) {
    const std::string name = row["name"], model = row["model"];
    const bool is_naive = row["conversion"] == "onnx+naive-rnn-gates";
    // named by the model and the conversion (the policy, the same in every row, left out)
    EXPECT_EQ(name, model + "/" + row["conversion"].get<std::string>());
    std::vector<double> per;
    for (const char* attack : {"fgsm", "bim"}) {
      const nlohmann::json& conv = (is_naive ? naive : faithful).at(model + " " + attack);
      const nlohmann::json& cell = row["attacks"][std::string(attack) + " eps 0.05"];
      EXPECT_EQ(cell["variation"], conv["adversarial"]["variation"]) << name;
      EXPECT_EQ(cell["success_before"], conv["adversarial"]["success_before"]) << name;
      per.push_back(cell["variation"].get<double>());
    }
    v.push_back(per);
  }
  const std::vector<double> R = attacks::min_max_indicator(v);
  for (std::size_t i = 0; i < R.size(); ++i) {
    EXPECT_EQ(t["rows"][i]["R"].get<double>(), R[i]);
    if (t["rows"][i]["conversion"] == "onnx") EXPECT_EQ(R[i], 0.0) << t["rows"][i]["name"];
  }
  const cli_test::CliRun rep = cli_test::run_driftlab("study report " + out.string() + " --no-figures");
  ASSERT_EQ(rep.code, 0) << rep.out;
  EXPECT_NE(rep.out.find("| model | bim eps 0.05 |S_conv - S_orig| | fgsm eps 0.05 |S_conv - S_orig| | R |"),
            std::string::npos) << rep.out;
  EXPECT_NE(rep.out.find("\n| lstm/onnx+naive-rnn-gates | "), std::string::npos) << rep.out;
  fs::remove_all(d);
}

// A convert cell judges its model's own examples: an attack crafted on another model (the fp32 one,
// when the int8 model is converted) is refused by name when the cell runs.
TEST(OrtStudy, ConvertRefusesExamplesCraftedOnAnotherModel) {
  DRIFTLAB_SKIP_UNLESS(oracle::ort_unavailable());
  const fs::path d = cli_test::fresh_dir("ort_study_convert_other");
  std::ofstream(d / "s.yaml") << R"(study: conv-other
defaults: {limit: 200}
steps:
  train: {do: train, set: {model: lenet1, epochs: 1}}
  int8: {do: quantize, needs: train, set: {calib: 50}}
  attack: {do: attack, needs: train, set: {limit: 20}}
  convert: {do: convert, needs: [int8, attack], set: {repeats: 1}}
)";
  const cli_test::CliRun r = cli_test::run_driftlab("study run " + (d / "s.yaml").string() + " --out " +
                                                    (d / "out").string() + " --quiet");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("was crafted on another model than the one this cell converts"), std::string::npos) << r.out;
  fs::remove_all(d);
}

}  // namespace
}  // namespace driftlab
