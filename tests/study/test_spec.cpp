// Study specs (study/spec.h): a grid expands into the product of its values times the cells it
// needs; a cell's hash moves with its own parameters, its inputs and the build, and no other
// cell's does; every bad spec is refused with the file and the line of the bad value.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <set>
#include <string>

#include "core/error.h"
#include "engine/policy.h"
#include "study/kinds.h"
#include "study/spec.h"

namespace driftlab {
namespace {

// Line numbers below count from the first line of this text.
const char* kSpec = R"(study: s1-mini
title: "LeNets under three presets"
adaptations: ["Fashion-MNIST instead of MNIST"]
defaults: {limit: 500}
steps:
  train:
    do: train
    grid:
      model: [lenet1, lenet5]
      policy: [tensorflow, theano, torch]
      seed: [1, 2]
    set: {epochs: 3, batch: 64}
  fgsm:
    do: attack
    needs: train
    grid: {eps: [0.1, 0.2, 0.3]}
    set: {convention: foolbox2}
  int8:
    do: quantize
    needs: train
    grid: {scheme: [tflite, torch_qnnpack]}
  judged:
    do: attack
    needs: [train, int8]
    set: {attack: bim}
)";

std::string with(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

std::map<std::string, std::string> hashes_by_canonical_params(const study::Plan& p) {
  // step + every parameter + the input cells' parameters: what identifies a cell apart from its hash
  std::map<std::string, std::string> out;
  for (const study::Cell& c : p.cells) {
    std::string key = c.step;
    for (const auto& [k, v] : c.params) key += "|" + k + "=" + v;
    for (std::size_t in : c.inputs)
      for (const auto& [k, v] : p.cells[in].params) key += "|in." + k + "=" + v;
    out[key] = c.hash;
  }
  return out;
}

TEST(StudySpec, GridsExpandIntoTheProductOfTheirValuesTimesTheirInputs) {
  const study::Plan p = study::plan(study::parse_spec(kSpec, "s.yaml"), "build-a");
  std::map<std::string, int> per_step;
  for (const study::Cell& c : p.cells) ++per_step[c.step];
  const int trains = 2 * 3 * 2;  // models x policies x seeds
  EXPECT_EQ(per_step["train"], trains);
  EXPECT_EQ(per_step["fgsm"], trains * 3);   // x eps
  EXPECT_EQ(per_step["int8"], trains * 2);   // x schemes
  EXPECT_EQ(per_step["judged"], trains * 2);  // once per int8 cell (its first need: train; then the int8 one)
  EXPECT_EQ(p.cells.size(), static_cast<std::size_t>(trains * (1 + 3 + 2 + 2)));
  std::set<std::string> hashes;
  for (std::size_t i = 0; i < p.cells.size(); ++i) {
    const study::Cell& c = p.cells[i];
    hashes.insert(c.hash);
    for (std::size_t in : c.inputs) EXPECT_LT(in, i) << "inputs come first";
    if (c.step == "train") {
      EXPECT_EQ(c.params.at("epochs"), "3");
      EXPECT_EQ(c.params.at("batch"), "64");
      EXPECT_EQ(c.params.at("limit"), "500");  // from defaults
      EXPECT_EQ(c.params.at("lr"), "0.01");     // the kind's default
      EXPECT_EQ(c.params.at("policy"), Policy::parse(c.params.at("policy")).to_string());
    }
    if (c.step == "fgsm") {
      ASSERT_EQ(c.inputs.size(), 1u);
      EXPECT_EQ(p.cells[c.inputs[0]].step, "train");
      EXPECT_EQ(c.params.at("step"), "");  // unset: the convention's (foolbox2) at run time
    }
    if (c.step == "judged") {
      ASSERT_EQ(c.inputs.size(), 2u);
      const study::Cell& tr = p.cells[c.inputs[0]];
      const study::Cell& q = p.cells[c.inputs[1]];
      EXPECT_EQ(tr.step, "train");
      EXPECT_EQ(q.step, "int8");
      // the int8 model judged is the one quantized from the same trained model
      ASSERT_EQ(q.inputs.size(), 1u);
      EXPECT_EQ(q.inputs[0], c.inputs[0]);
    }
  }
  EXPECT_EQ(hashes.size(), p.cells.size()) << "every cell's hash is its own";
  EXPECT_EQ(p.spec.adaptations.size(), 1u);
  EXPECT_EQ(p.spec.title, "LeNets under three presets");
}

TEST(StudySpec, AHashMovesWithItsCellItsInputsAndTheBuildOnly) {
  const study::Plan a = study::plan(study::parse_spec(kSpec, "s.yaml"), "build-a");
  const study::Plan same = study::plan(study::parse_spec(kSpec, "s.yaml"), "build-a");
  ASSERT_EQ(a.cells.size(), same.cells.size());
  for (std::size_t i = 0; i < a.cells.size(); ++i) EXPECT_EQ(a.cells[i].hash, same.cells[i].hash);

  // One edit in the int8 step: its cells and the attacks judged on them change, nothing else.
  const study::Plan b =
      study::plan(study::parse_spec(with(kSpec, "grid: {scheme: [tflite, torch_qnnpack]}",
                                         "grid: {scheme: [tflite, torch_qnnpack]}\n    set: {calib: 200}"),
                                    "s.yaml"),
                  "build-a");
  ASSERT_EQ(a.cells.size(), b.cells.size());
  for (std::size_t i = 0; i < a.cells.size(); ++i) {
    const bool should_move = a.cells[i].step == "int8" || a.cells[i].step == "judged";
    EXPECT_EQ(a.cells[i].hash != b.cells[i].hash, should_move) << a.cells[i].step << " " << i;
  }
  // Writing a default value explicitly is the same cell; listing the grid in another order
  // changes the cells' order but not their hashes.
  const study::Plan c = study::plan(study::parse_spec(with(kSpec, "set: {epochs: 3, batch: 64}",
                                                           "set: {epochs: 3, batch: 64, lr: 0.010}"),
                                                      "s.yaml"),
                                    "build-a");
  EXPECT_EQ(hashes_by_canonical_params(c), hashes_by_canonical_params(a));
  const study::Plan d = study::plan(
      study::parse_spec(with(kSpec, "policy: [tensorflow, theano, torch]", "policy: [torch, theano, tensorflow]"),
                        "s.yaml"),
      "build-a");
  EXPECT_EQ(hashes_by_canonical_params(d), hashes_by_canonical_params(a));
  EXPECT_NE(d.cells[0].hash, a.cells[0].hash);  // the first cell is another one now
  // Another build: every cell is another computation.
  const study::Plan e = study::plan(study::parse_spec(kSpec, "s.yaml"), "build-b");
  for (std::size_t i = 0; i < a.cells.size(); ++i) EXPECT_NE(a.cells[i].hash, e.cells[i].hash);
}

std::string error_of(const std::string& text) {
  try {
    study::plan(study::parse_spec(text, "bad.yaml"), "b");
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string error_of_plan(const study::Spec& spec, std::size_t max_cells) {
  try {
    study::plan(spec, "b", max_cells);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

void expect_refused(const std::string& text, const std::string& where, const std::string& what) {
  const std::string e = error_of(text);
  EXPECT_EQ(e.rfind(where, 0), 0u) << "expected it to start with " << where << ": " << e;
  EXPECT_NE(e.find(what), std::string::npos) << e;
}

TEST(StudySpec, BadSpecsAreRefusedNamingTheLine) {
  expect_refused(with(kSpec, "model: [lenet1, lenet5]", "model: [lenet1, lenet7]"), "bad.yaml:9: ",
                 "unknown model 'lenet7'");
  expect_refused(with(kSpec, "policy: [tensorflow, theano, torch]", "policy: [tensorflow, \"torch,relu_grad=2\"]"),
                 "bad.yaml:10: ", "policy 'torch,relu_grad=2'");
  expect_refused(with(kSpec, "do: quantize", "do: quantise"), "bad.yaml:19: ", "unknown kind 'quantise'");
  expect_refused(with(kSpec, "set: {attack: bim}", "set: {attack: bim, epsilon: 0.1}"), "bad.yaml:25: ",
                 "unknown parameter 'epsilon'");
  expect_refused(with(kSpec, "set: {epochs: 3, batch: 64}", "set: {epochs: three, batch: 64}"), "bad.yaml:12: ",
                 "epochs: 'three' is not an integer");
  expect_refused(with(kSpec, "set: {epochs: 3, batch: 64}", "set: {epochs: 0, batch: 64}"), "bad.yaml:12: ",
                 "epochs: 0 is below 1");
  expect_refused(with(kSpec, "needs: [train, int8]", "needs: [train, int9]"), "bad.yaml:24: ",
                 "needs 'int9': no such step");
  expect_refused(with(kSpec, "needs: train\n    grid: {eps", "needs: judged\n    grid: {eps"), "bad.yaml:15: ",
                 "cannot take step 'judged' (attack)");
  expect_refused(with(kSpec, "do: train\n", "do: train\n    needs: fgsm\n"), "bad.yaml:8: ", "needs 0 step(s)");
  expect_refused(with(kSpec, "seed: [1, 2]", "seed: [1, 2, 1]"), "bad.yaml:11: ", "lists '1' twice");
  expect_refused(with(kSpec, "defaults: {limit: 500}", "defaults: {limit: 500, epoch: 3}"), "bad.yaml:4: ",
                 "'epoch' is no parameter of any kind");
  expect_refused(with(kSpec, "title:", "titel:"), "bad.yaml:2: ", "unknown key 'titel'");
  // (found by fuzz_study_spec: two steps computing the same cells would share their folders)
  expect_refused(with(kSpec, "  fgsm:\n", "  int8b:\n    do: quantize\n    needs: train\n    set: {scheme: tflite}\n  fgsm:\n"),
                 "bad.yaml:", "step 'int8' makes the same cell as step 'int8b'");
  expect_refused(with(kSpec, "  fgsm:\n", "  fgsm:\n    repeat: 3\n"), "bad.yaml:14: ", "unknown key 'repeat'");
  expect_refused(with(kSpec, "      seed: [1, 2]\n", "      seed: [1, 2]\n      seed: [3]\n"), "bad.yaml:12: ",
                 "'seed' given twice");
  expect_refused(with(kSpec, "grid: {eps: [0.1, 0.2, 0.3]}", "grid: {eps: [0.1, 0.2, 0.3}"), "bad.yaml:",
                 "not valid YAML");
  // a value that is no finite number, not true/false, not in its list; an unknown dataset; a key in both
  expect_refused(with(kSpec, "grid: {eps: [0.1, 0.2, 0.3]}", "grid: {eps: [0.1, .inf, 0.3]}"), "bad.yaml:16: ",
                 "eps: '.inf' is not a finite number");
  expect_refused(with(kSpec, "grid: {eps: [0.1, 0.2, 0.3]}", "grid: {eps: [0.1, nan, 0.3]}"), "bad.yaml:16: ",
                 "eps: 'nan' is not a finite number");
  expect_refused(with(kSpec, "set: {attack: bim}", "set: {attack: bim, random_start: maybe}"), "bad.yaml:25: ",
                 "random_start: 'maybe' is not true or false");
  expect_refused(with(kSpec, "set: {convention: foolbox2}", "set: {convention: cleverhans}"), "bad.yaml:17: ",
                 "convention: 'cleverhans' is not one of driftlab, foolbox2");
  expect_refused(with(kSpec, "defaults: {limit: 500}", "defaults: {limit: 500, dataset: cifar99}"), "bad.yaml:4: ",
                 "unknown dataset 'cifar99'");
  expect_refused(with(kSpec, "set: {convention: foolbox2}", "set: {convention: foolbox2, eps: 0.2}"), "bad.yaml:17: ",
                 "'eps' is in both grid and set");
  expect_refused("steps:\n  t: {do: train, grid: {model: [lenet1]}}\n", "bad.yaml:1: ", "no 'study:'");
  expect_refused("study: x\nsteps: {}\n", "bad.yaml:2: ", "steps: no step");
  expect_refused("- a\n- b\n", "bad.yaml:1: ", "a study spec is a map");
  expect_refused("", "bad.yaml:1: ", "a study spec is a map");
}

TEST(StudySpec, CyclesAndAmbiguousInputsAreRefused) {
  const std::string cycle = R"(study: c
steps:
  a:
    do: evaluate
    needs: b
  b:
    do: quantize
    needs: a
)";
  expect_refused(cycle, "bad.yaml:8: ", "steps depend on each other: a -> b -> a");
  const std::string loop = R"(study: c
steps:
  t: {do: train, grid: {model: [lenet1]}}
  a:
    do: attack
    needs: [t, b]
  b:
    do: attack
    needs: [t, a]
)";
  expect_refused(loop, "bad.yaml:9: ", "steps depend on each other: a -> b -> a");
  // Without the cycle, an attack still cannot take an attack's cells.
  expect_refused(with(loop, "needs: [t, a]", "needs: [t]"), "bad.yaml:6: ", "cannot take step 'b' (attack)");
  // Two int8 cells of the same trained model: the attack pairs the model with each of them.
  const std::string two = R"(study: c
steps:
  t: {do: train, grid: {model: [lenet1]}}
  q: {do: quantize, needs: t, grid: {scheme: [tflite, ort]}}
  a:
    do: attack
    needs: [t, q]
)";
  const study::Plan p = study::plan(study::parse_spec(two, "two.yaml"), "b");
  std::set<std::string> schemes;
  for (const study::Cell& c : p.cells)
    if (c.step == "a") schemes.insert(p.cells.at(c.inputs.at(1)).params.at("scheme"));
  EXPECT_EQ(schemes, (std::set<std::string>{"tflite", "ort"}));
  // A cell whose input is missing: t2 trained only LeNet-1, so t1's LeNet-5 has no partner.
  const std::string missing = R"(study: c
steps:
  t1: {do: train, grid: {model: [lenet1, lenet5]}}
  t2: {do: train, grid: {model: [lenet1]}, set: {seed: 2}}
  a:
    do: attack
    needs: [t1, t2]
)";
  expect_refused(missing, "bad.yaml:7: ", "no cell of 't2' agrees with its input (model=lenet5): that input is missing");
}

// The spec docs/STUDIES.md shows is one this reader takes, with the cells it says.
// gather: one robustness cell per model over the presets' trained models.
TEST(StudySpec, GatherTakesAllTheCellsThatDifferInTheGatheredKeys) {
  const std::string spec = R"(study: g
steps:
  train:
    do: train
    grid: {model: [lenet1, lenet5], policy: [tensorflow, theano, torch], seed: [1, 2]}
  rob:
    do: robustness
    needs: train
    gather: [policy]
)";
  const study::Plan p = study::plan(study::parse_spec(spec, "g.yaml"), "b");
  std::vector<const study::Cell*> rob;
  for (const study::Cell& c : p.cells)
    if (c.step == "rob") rob.push_back(&c);
  ASSERT_EQ(rob.size(), 4u);  // models x seeds
  for (const study::Cell* c : rob) {
    ASSERT_EQ(c->inputs.size(), 3u);
    std::set<std::string> policies, models, seeds;
    for (std::size_t in : c->inputs) {
      policies.insert(p.cells[in].params.at("policy"));
      models.insert(p.cells[in].params.at("model"));
      seeds.insert(p.cells[in].params.at("seed"));
    }
    EXPECT_EQ(policies.size(), 3u);
    EXPECT_EQ(models.size(), 1u);
    EXPECT_EQ(seeds.size(), 1u);
  }
  expect_refused(with(spec, "needs: train\n    gather", "needs: [train, train]\n    gather"), "bad.yaml:8: ",
                 "needs 'train' twice");
  // Several needs: a group holds the cells of each that agree on the coordinates not gathered (the
  // fp32 models of the three presets and their int8 models in one table).
  const std::string two = with(with(spec, "needs: train\n    gather", "needs: [train, int8]\n    gather"), "  rob:\n",
                               "  int8: {do: quantize, needs: train}\n  rob:\n");
  const study::Plan q = study::plan(study::parse_spec(two, "g.yaml"), "b");
  int groups = 0;
  for (const study::Cell& c : q.cells) {
    if (c.step != "rob") continue;
    ++groups;
    std::map<std::string, int> kinds;
    std::set<std::string> seeds;
    for (std::size_t in : c.inputs) {
      ++kinds[q.cells[in].kind];
      const study::Cell& t = q.cells[in].kind == "train" ? q.cells[in] : q.cells[q.cells[in].inputs.at(0)];
      seeds.insert(t.params.at("model") + " " + t.params.at("seed"));
    }
    EXPECT_EQ(kinds, (std::map<std::string, int>{{"quantize", 3}, {"train", 3}}));
    EXPECT_EQ(seeds.size(), 1u);
  }
  EXPECT_EQ(groups, 4);
  expect_refused(with(spec, "    gather: [policy]\n", ""), "bad.yaml:6: ", "give `gather: [KEY]`");
  expect_refused(with(spec, "do: robustness", "do: evaluate"), "bad.yaml:9: ", "this kind takes one model per cell");
  expect_refused(with(spec, "gather: [policy]", "gather: [optimizer]"), "bad.yaml:9: ", "no grid key among those gathered");
}

// A convert step takes a model first, then an attack on it; a train step without a dataset reads
// its model's own data, and the CIFAR-shaped models (no real CIFAR-10 installs here) must say which.
TEST(StudySpec, ConvertTakesAModelThenAnAttackAndTrainingReadsItsModelsData) {
  const std::string spec = R"(study: c
steps:
  train: {do: train, grid: {model: [lenet5, lstm, gru-imdb]}}
  attack: {do: attack, needs: train}
  convert:
    do: convert
    needs: [train, attack]
  r: {do: convert_robustness, needs: convert, gather: [model]}
)";
  const study::Plan p = study::plan(study::parse_spec(spec, "c.yaml"), "b");
  std::map<std::string, std::string> data;
  for (const study::Cell& c : p.cells)
    if (c.kind == "train") data[c.params.at("model")] = c.params.at("dataset");
  EXPECT_EQ(data, (std::map<std::string, std::string>{
                      {"lenet5", "fashion-mnist"}, {"lstm", "seq-fashion-mnist"}, {"gru-imdb", "imdb"}}));
  for (const study::Cell& c : p.cells)
    if (c.kind == "convert") {
      ASSERT_EQ(c.inputs.size(), 2u);
      // the attack paired with the model it was crafted on
      EXPECT_EQ(p.cells[c.inputs[1]].inputs.at(0), c.inputs[0]);
    }
  expect_refused(with(spec, "needs: [train, attack]", "needs: [attack, train]"), "bad.yaml:7: ",
                 "cannot take step 'attack' (attack) as its first need: it takes train, quantize first");
  expect_refused(with(spec, "needs: [train, attack]", "needs: [train, train]"), "bad.yaml:7: ",
                 "cannot take step 'train' (train) as its further need: it takes attack after the first");
  expect_refused(with(spec, ", gather: [model]", ""), "bad.yaml:8: ", "give `gather: [KEY]`");
  expect_refused(with(spec, "[lenet5, lstm, gru-imdb]", "[lenet5, resnet20]"), "bad.yaml:3: ",
                 "model resnet20 has no data that installs here by default: set dataset");
  // named, the dataset is the spec's (and hashes as the default's would)
  const study::Plan named = study::plan(
      study::parse_spec(with(spec, "{model: [lenet5, lstm, gru-imdb]}}", "{model: [lenet5]}, set: {dataset: fashion-mnist}}"),
                        "c.yaml"),
      "b");
  const study::Plan dflt = study::plan(study::parse_spec(with(spec, "[lenet5, lstm, gru-imdb]", "[lenet5]"), "c.yaml"), "b");
  EXPECT_EQ(named.cells.front().hash, dflt.cells.front().hash);
}

// fuzz_study_spec's finding (docs/RELIABILITY.md, Findings), minimised: two steps (one named with
// bytes that are not UTF-8) that make the same cells would have shared their folders; the planner
// refuses the second, naming its line.
TEST(StudySpec, FuzzRegressionTwoStepsOneCell) {
  const std::string path =
      std::string(DRIFTLAB_SOURCE_DIR) + "/tests/data/fuzz-regressions/fuzz_study_spec/same_cell_two_steps.yaml";
  try {
    study::plan(study::read_spec(path), "b");
    ADD_FAILURE() << "planned: " << path;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ":7: step '", 0), 0u) << what;
    EXPECT_NE(what.find("makes the same cell as step 'qc'"), std::string::npos) << what;
  }
}

TEST(StudySpec, APlanLargerThanTheLimitIsRefused) {
  const study::Spec spec = study::parse_spec(kSpec, "s.yaml");
  EXPECT_EQ(study::plan(spec, "b", 96).cells.size(), 96u);  // 12 + 36 + 24 + 24: exactly the limit
  const std::string e = error_of_plan(spec, 95);
  EXPECT_EQ(e.rfind("s.yaml:22: step 'judged' makes 24 cells, more than the 95", 0), 0u) << e;
}

TEST(StudySpec, TheDocsExampleIsAValidSpec) {
  std::ifstream f(std::string(DRIFTLAB_SOURCE_DIR) + "/docs/STUDIES.md");
  std::ostringstream os;
  os << f.rdbuf();
  const std::string doc = os.str();
  const std::size_t a = doc.find("```yaml\n"), b = doc.find("```", a + 8);
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  const study::Plan p = study::plan(study::parse_spec(doc.substr(a + 8, b - a - 8), "docs/STUDIES.md"), "b");
  std::map<std::string, int> per_step;
  for (const study::Cell& c : p.cells) ++per_step[c.step];
  EXPECT_EQ(per_step["train"], 2 * 4 * 3 * 5);     // models x policies x batches x seeds
  EXPECT_EQ(per_step["int8"], 2 * 4 * 3 * 5 * 2);  // x schemes
  EXPECT_EQ(per_step["transfer"], per_step["int8"]);
}

TEST(StudySpec, EveryKindsDefaultsAreValidValues) {
  for (const study::KindDef& k : study::kind_table())
    for (const study::ParamDef& d : k.params)
      if (d.type != study::ParamType::model) {
        EXPECT_NO_THROW(study::check_value(d, d.fallback)) << k.name << "." << d.key;
      }
}

}  // namespace
}  // namespace driftlab
