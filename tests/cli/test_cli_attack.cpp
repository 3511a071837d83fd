// driftlab attack end to end: a trained LeNet-1 attacked on the test split and on given inputs
// (.npy + labels), the adversarial examples within the budget and the bounds, result.json's
// counts consistent with samples.csv, and bad input refused by name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/io/npy.h"
#include "tests/cli/cli_util.h"
#include "tests/require_util.h"
#include "tests/test_util.h"

namespace {

using namespace driftlab::cli_test;
namespace fs = std::filesystem;
using nlohmann::json;

// The command fails and its output says why (`why`).
void expect_refused(const std::string& args, const std::string& why) {
  const CliRun r = run_driftlab(args);
  EXPECT_TRUE(r.code == 1 || r.code == 2) << "a refusal exits 1 or 2, got " << r.code << ": " << args;
  EXPECT_NE(r.out.find(why), std::string::npos) << r.out;
}

TEST(CliAttack, FgsmAndPgdOnTheTestSplitAndOnGivenInputs) {
  const fs::path d = fresh_dir("cli_attack");
  write_idx(d, "train", 96);
  write_idx(d, "t10k", 24);
  const std::string data = " --data-dir " + d.string() + " --threads 1";
  const std::string bad = " --out " + (d / "bad").string() + data;  // a refused run's folder
  CliRun r = run_driftlab("train --model lenet1 --epochs 1 --batch 32 --no-progress --out " + (d / "run").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string w = (d / "run" / "model.dlm").string();

  r = run_driftlab("attack --weights " + w + " --attack fgsm --eps 0.1 --out " + (d / "fgsm").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("fgsm eps 0.1 (absolute) on 24 inputs"), std::string::npos) << r.out;
  std::ifstream jf(d / "fgsm" / "result.json");
  const json j = json::parse(jf);
  EXPECT_EQ(j["attack"], "fgsm");
  EXPECT_EQ(j["over_all"]["samples"], 24);
  EXPECT_EQ(j["gradient_calls"], 1);
  const driftlab::Tensor adv = driftlab::read_npy((d / "fgsm" / "adversarial.npy").string());
  ASSERT_EQ(adv.shape(), (driftlab::Shape{24, 1, 28, 28}));
  for (int64_t i = 0; i < adv.numel(); ++i) {
    ASSERT_GE(adv.at(i), 0.0);
    ASSERT_LE(adv.at(i), 1.0);
  }
  // samples.csv: a header and one row per input; its successes are result.json's
  std::ifstream cf(d / "fgsm" / "samples.csv");
  std::string line;
  std::getline(cf, line);
  EXPECT_EQ(line, "index,label,clean_pred,adv_pred,success,zero_gradient,l0,l2,linf,queries");
  int rows = 0, successes = 0;
  while (std::getline(cf, line)) {
    ++rows;
    std::stringstream ss(line);
    std::string cell;
    for (int c = 0; c < 5; ++c) std::getline(ss, cell, ',');
    successes += cell == "1";
  }
  EXPECT_EQ(rows, 24);
  EXPECT_EQ(successes, j["over_all"]["successes"].get<int>());

  // PGD on given inputs (the first 5 test images' shapes), a random start, the budget kept
  driftlab::write_npy((d / "x.npy").string(), driftlab::random_tensor({5, 1, 28, 28}, driftlab::DType::f32, 3, 0, 1));
  driftlab::write_npy((d / "y.npy").string(), driftlab::Tensor::from<int64_t>({5}, {0, 1, 2, 3, 4}));
  r = run_driftlab("attack --weights " + w + " --attack pgd --eps 0.05 --step 0.02 --steps 3 --random-start --seed 4 " +
                   "--input " + (d / "x.npy").string() + " --labels " + (d / "y.npy").string() + " --out " +
                   (d / "pgd").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  const driftlab::Tensor x = driftlab::read_npy((d / "x.npy").string());
  const driftlab::Tensor p = driftlab::read_npy((d / "pgd" / "adversarial.npy").string());
  ASSERT_EQ(p.shape(), x.shape());
  for (int64_t i = 0; i < p.numel(); ++i) ASSERT_LE(std::fabs(p.at(i) - x.at(i)), 0.05 + 1e-7) << i;
  std::ifstream pf(d / "pgd" / "result.json");
  const json pj = json::parse(pf);
  EXPECT_EQ(pj["gradient_calls"], 3);
  EXPECT_EQ(pj["random_start"], true);
  EXPECT_EQ(pj["restarts"], 1);
  EXPECT_FALSE(pj.contains("restart_select"));
  // with restarts: three runs' gradient calls, the rule named; a restart without the random start refused
  r = run_driftlab("attack --weights " + w + " --attack pgd --eps 0.05 --step 0.02 --steps 3 --random-start --seed 4 " +
                   "--restarts 3 --restart-select per-run --input " + (d / "x.npy").string() + " --labels " +
                   (d / "y.npy").string() + " --out " + (d / "pgd3").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream pf3(d / "pgd3" / "result.json");
  const json pj3 = json::parse(pf3);
  EXPECT_EQ(pj3["gradient_calls"], 9);
  EXPECT_EQ(pj3["restarts"], 3);
  EXPECT_EQ(pj3["restart_select"], "per-run");
  r = run_driftlab("attack --weights " + w + " --attack pgd --restarts 3 --limit 2 --out " + (d / "pgd4").string() + data);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--random-start"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "pgd4" / "result.json"));
  r = run_driftlab("attack --weights " + w + " --attack pgd --random-start --restarts 2 --restart-select best --limit 2 "
                   "--out " + (d / "pgd5").string() + data);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--restart-select 'best'"), std::string::npos) << r.out;

  // the decision-based attacks: queries per sample, the examples in bounds
  r = run_driftlab("attack --weights " + w + " --attack single-pixel --max-pixels 40 --limit 6 --out " +
                   (d / "sp").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream sf(d / "sp" / "result.json");
  const json sj = json::parse(sf);
  EXPECT_EQ(sj["attack"], "single-pixel");
  EXPECT_EQ(sj["max_pixels"], 40);
  EXPECT_EQ(sj["over_all"]["samples"], 6);
  EXPECT_FALSE(sj.contains("eps"));
  r = run_driftlab("attack --weights " + w + " --attack boundary --iterations 20 --limit 3 --seed 2 --out " +
                   (d / "bd").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("boundary on 3 inputs"), std::string::npos) << r.out;
  const driftlab::Tensor b = driftlab::read_npy((d / "bd" / "adversarial.npy").string());
  for (int64_t i = 0; i < b.numel(); ++i) {
    ASSERT_GE(b.at(i), 0.0);
    ASSERT_LE(b.at(i), 1.0);
  }
  std::ifstream bf(d / "bd" / "result.json");
  const json bj = json::parse(bf);
  EXPECT_EQ(bj["boundary_rules"], "foolbox2");
  EXPECT_EQ(bj["max_directions"], 25);
  // Foolbox 3's rules through its convention: one candidate per step, the samples in batches
  r = run_driftlab("attack --weights " + w + " --attack boundary --convention foolbox3 --iterations 20 --batch 2 "
                   "--limit 3 --seed 2 --out " + (d / "bd3").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream bf3(d / "bd3" / "result.json");
  const json bj3 = json::parse(bf3);
  EXPECT_EQ(bj3["boundary_rules"], "foolbox3");
  EXPECT_EQ(bj3["iterations"], 20);
  EXPECT_EQ(bj3["max_directions"], 1);
  EXPECT_EQ(bj3["boundary_batch"], 2);
  r = run_driftlab("attack --weights " + w + " --attack boundary --convention art --iterations 5 --limit 2 --out " +
                   (d / "bda").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream bfa(d / "bda" / "result.json");
  const json bja = json::parse(bfa);
  EXPECT_EQ(bja["boundary_rules"], "art");
  EXPECT_EQ(bja["max_directions"], 20);

  // refusals, by name
  expect_refused("attack --weights " + w + " --attack cw" + bad, "unknown attack 'cw'");
  expect_refused("attack --weights " + w + " --input " + (d / "x.npy").string() + bad, "--input needs --labels");
  expect_refused("attack --weights " + w + " --attack fgsm --random-start" + bad, "random_start is PGD's");
  expect_refused("attack --weights " + w + " --attack boundary --convention torchattacks" + bad,
                 "torchattacks has no Boundary attack");
  expect_refused("attack --weights " + w + " --attack boundary --boundary-rules foolbox3 --max-directions 5" + bad,
                 "one candidate per sample and step");
  expect_refused("attack --weights " + w + " --attack single-pixel --convention foolbox3" + bad,
                 "single-pixel is Foolbox 2's attack");
  driftlab::write_npy((d / "far.npy").string(), driftlab::random_tensor({2, 1, 28, 28}, driftlab::DType::f32, 3, 0, 2));
  driftlab::write_npy((d / "y2.npy").string(), driftlab::Tensor::from<int64_t>({2}, {0, 1}));
  expect_refused("attack --weights " + w + " --input " + (d / "far.npy").string() + " --labels " +
                   (d / "y2.npy").string() + bad, "outside the bounds [0, 1]");
}

// Conventions, Foolbox 2's sweep, the 8-bit round trip and PNGs (Abyane & Hemmati's,
// docs/GLOSSARY.md), and transfer to the int8 model.
TEST(CliAttack, ConventionsSweepUint8PngAndTransferToInt8) {
  const fs::path d = fresh_dir("cli_attack_conv");
  write_idx(d, "train", 96);
  write_idx(d, "t10k", 16);
  const std::string data = " --data-dir " + d.string() + " --threads 1";
  const std::string bad = " --out " + (d / "bad").string() + data;  // a refused run's folder
  CliRun r = run_driftlab("train --model lenet1 --epochs 1 --batch 32 --no-progress --out " + (d / "run").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string w = (d / "run" / "model.dlm").string(), q = (d / "q.dlm").string();
  r = run_driftlab("quantize --weights " + w + " --scheme torch_qnnpack --calib 64 --out " + q + data);
  ASSERT_EQ(r.code, 0) << r.out;

  // Foolbox 2: eps as a fraction of the range, the sweep; as 8-bit images, judged by the int8 model
  r = run_driftlab("attack --weights " + w + " --attack fgsm --convention foolbox2 --epsilons 20 --max-epsilon 0.3 "
                   "--uint8 round --png --judge " + q + " --out " + (d / "fb2").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("fgsm sweep of 20 eps up to 0.3 (fraction), foolbox2's conventions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("judged by " + q), std::string::npos) << r.out;
  std::ifstream jf(d / "fb2" / "result.json");
  const json j = json::parse(jf);
  EXPECT_EQ(j["convention"], "foolbox2");
  EXPECT_EQ(j["eps_units"], "fraction");
  EXPECT_EQ(j["eps_schedule"], "foolbox2-sweep");
  EXPECT_EQ(j["epsilons"], 20);
  EXPECT_EQ(j["success"], "label");
  EXPECT_EQ(j["uint8"], "round");
  EXPECT_FALSE(j.contains("eps"));
  ASSERT_EQ(j["transfer"].size(), 1u);
  EXPECT_EQ(j["transfer"][0]["int8"], true);
  // the examples are 8-bit images: every value k / 255
  const driftlab::Tensor adv = driftlab::read_npy((d / "fb2" / "adversarial.npy").string());
  ASSERT_EQ(adv.shape(), (driftlab::Shape{16, 1, 28, 28}));
  for (int64_t i = 0; i < adv.numel(); ++i) {
    const double k = adv.at(i) * 255;
    ASSERT_NEAR(k, std::nearbyint(k), 1e-4) << i;
  }
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(fs::exists(d / "fb2" / "png" / ("adv_" + std::to_string(i) + ".png"))) << i;
  // samples.csv: the sweep's eps and the judge's predictions; the transfer counts recomputed from them
  std::ifstream cf(d / "fb2" / "samples.csv");
  std::string line;
  std::getline(cf, line);
  EXPECT_EQ(line, "index,label,clean_pred,adv_pred,success,zero_gradient,l0,l2,linf,queries,eps_found,"
                  "judge0_clean_pred,judge0_adv_pred");
  int both = 0, transferred = 0, own = 0;
  while (std::getline(cf, line)) {
    std::vector<std::string> c;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) c.push_back(cell);
    ASSERT_EQ(c.size(), 13u) << line;
    const bool correct = c[2] == c[1], judge_correct = c[11] == c[1];
    own += judge_correct;
    if (correct && judge_correct) ++both, transferred += c[12] != c[1];
    if (c[4] == "1" && correct) {
      EXPECT_NE(c[10], "nan") << line;  // a success has its eps
    }
  }
  EXPECT_EQ(j["transfer"][0]["over_correct_by_all"]["samples"], both);
  EXPECT_EQ(j["transfer"][0]["over_correct_by_all"]["successes"], transferred);
  EXPECT_EQ(j["over_correct_by_all"]["samples"], both);
  EXPECT_NEAR(j["transfer"][0]["clean_accuracy"].get<double>(), own / 16.0, 1e-12);

  // ART: the loss against the prediction, success = the prediction changed; its eps_step, our --steps
  r = run_driftlab("attack --weights " + w + " --attack bim --convention art --eps 0.05 --steps 3 --limit 6 --out " +
                   (d / "art").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream af(d / "art" / "result.json");
  const json aj = json::parse(af);
  EXPECT_EQ(aj["labels_from"], "prediction");
  EXPECT_EQ(aj["success"], "clean-prediction");
  EXPECT_EQ(aj["step"], 0.1);
  EXPECT_EQ(aj["steps"], 3);
  EXPECT_EQ(aj["eps"], 0.05);
  // Foolbox 3: the step a fraction of eps, 40 steps and a random start for PGD (steps cut here)
  r = run_driftlab("attack --weights " + w + " --attack pgd --convention foolbox3 --eps 0.1 --steps 2 --limit 4 --out " +
                   (d / "fb3").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream f3(d / "fb3" / "result.json");
  const json j3 = json::parse(f3);
  EXPECT_EQ(j3["step_units"], "of-eps");
  EXPECT_NEAR(j3["step"].get<double>(), 0.01 / 0.3, 1e-15);
  EXPECT_EQ(j3["random_start"], true);
  EXPECT_EQ(j3["early_stop"], false);
  // torchattacks: its default eps 8/255
  r = run_driftlab("attack --weights " + w + " --attack fgsm --convention torchattacks --limit 4 --out " +
                   (d / "ta").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream ft(d / "ta" / "result.json");
  EXPECT_NEAR(json::parse(ft)["eps"].get<double>(), 8.0 / 255, 1e-15);
  // ... and its BIM's max/min projection
  r = run_driftlab("attack --weights " + w + " --attack bim --convention torchattacks --steps 2 --limit 4 --out " +
                   (d / "ta_bim").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream ftb(d / "ta_bim" / "result.json");
  EXPECT_EQ(json::parse(ftb)["projection"], "max-min");

  // the int8 model: decision-based attacks run on its integer decisions
  r = run_driftlab("attack --weights " + q + " --attack single-pixel --max-pixels 30 --limit 4 --out " +
                   (d / "q_sp").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("lenet1 int8"), std::string::npos) << r.out;
  // ... and white-box attacks on straight-through gradients of its fake-quantized graph (quant/ste.h)
  r = run_driftlab("attack --weights " + q + " --attack bim --steps 3 --step 0.05 --limit 4 --out " +
                   (d / "q_bim").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("lenet1 int8"), std::string::npos) << r.out;
  std::ifstream fq(d / "q_bim" / "result.json");
  const json jq = json::parse(fq);
  EXPECT_EQ(jq["int8"], true);
  EXPECT_NE(jq["gradient"].get<std::string>().find("straight-through"), std::string::npos) << jq["gradient"];

  // Foolbox 2's BIM: its eps search from eps 0.3 (x1.5 / bisection), step 0.05 / 0.3 of eps, early stop
  r = run_driftlab("attack --weights " + w + " --attack bim --convention foolbox2 --steps 3 --limit 4 --out " +
                   (d / "fb2_bim").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream fb(d / "fb2_bim" / "result.json");
  const json jb = json::parse(fb);
  EXPECT_EQ(jb["eps_schedule"], "foolbox2-search");
  EXPECT_EQ(jb["start_eps"], 0.3);
  EXPECT_EQ(jb["early_stop"], true);
  EXPECT_EQ(jb["eps_units"], "fraction");
  EXPECT_TRUE(jb.contains("mean_eps_found")) << jb.dump();

  // refusals, by name
  expect_refused("attack --weights " + w + " --attack fgsm --eps-schedule foolbox2-search --eps 0.1" + bad,
                 "eps search is BIM's and PGD's");
  expect_refused("attack --weights " + w + " --attack fgsm --convention foolbox3" + bad, "has no default eps");
  expect_refused("attack --weights " + w + " --convention cleverhans" + bad, "unknown convention 'cleverhans'");
  expect_refused("attack --weights " + w + " --attack fgsm --uint8 floor" + bad, "unknown 8-bit rule 'floor'");
}

// driftlab robustness: an fp32 model and its int8 version (white-box examples crafted on the fp32
// one), two attacks, two repeats: the table, JSON, CSV and the chart (matplotlib, as CI installs it).
TEST(CliRobustness, TableJsonCsvAndChartForAModelAndItsInt8Version) {
  const fs::path d = fresh_dir("cli_robustness");
  write_idx(d, "train", 96);
  write_idx(d, "t10k", 16);
  const std::string data = " --data-dir " + d.string() + " --threads 1";
  const std::string bad = " --out " + (d / "bad").string() + data;  // a refused run's folder
  CliRun r = run_driftlab("train --model lenet1 --epochs 1 --batch 32 --no-progress --out " + (d / "run").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string w = (d / "run" / "model.dlm").string(), q = (d / "q.dlm").string();
  r = run_driftlab("quantize --weights " + w + " --scheme tflite --calib 64 --out " + q + data);
  ASSERT_EQ(r.code, 0) << r.out;
  const bool chart = std::system("/usr/bin/python3 -c 'import matplotlib' > /dev/null 2>&1") == 0;
  r = run_driftlab("robustness --model fp32=" + w + " --model int8=" + q + " --craft int8=fp32 --attacks fgsm,single-pixel "
                   "--eps 0.1 --max-pixels 20 --repeats 2 --seed 5 --out " + (d / "rob").string() +
                   (chart ? "" : " --no-chart") + data);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("| int8 (int8), crafted on fp32 |"), std::string::npos) << r.out;
  std::ifstream jf(d / "rob" / "robustness.json");
  const json j = json::parse(jf);
  EXPECT_EQ(j["models"], json({"fp32", "int8"}));
  EXPECT_EQ(j["attacks"], json({"fgsm", "single-pixel"}));
  EXPECT_EQ(j["seeds"], json({5, 6}));
  EXPECT_EQ(j["model_files"][1]["int8"], true);
  EXPECT_EQ(j["model_files"][1]["crafted_on"], "fp32");
  // each model's Policy string: the trained model's preset, the int8 model's with the scheme it was quantized under
  EXPECT_EQ(j["model_files"][0]["policy"], "torch");
  EXPECT_EQ(j["model_files"][1]["policy"], "torch,quant_scheme=tflite");
  const int64_t common = static_cast<int64_t>(j["common"].size());
  ASSERT_GT(common, 0);
  ASSERT_EQ(j["R"].size(), 2u);
  for (int m = 0; m < 2; ++m)
    for (int a = 0; a < 2; ++a) {
      const json& c = j["cells"][m][a];
      ASSERT_EQ(c["rates"].size(), 2u);
      for (int rep = 0; rep < 2; ++rep)
        EXPECT_DOUBLE_EQ(c["rates"][rep].get<double>(), c["successes"][rep].get<double>() / common);
    }
  ASSERT_EQ(j["pairs"].size(), 1u);
  // CSV: 2 models x 2 attacks x 2 repeats
  std::ifstream cf(d / "rob" / "robustness.csv");
  std::string line;
  int rows = -1;
  while (std::getline(cf, line)) ++rows;
  EXPECT_EQ(rows, 8);
  EXPECT_TRUE(fs::exists(d / "rob" / "table.md"));
  if (chart) {
    for (const char* f : {"chart.png", "chart.svg"}) EXPECT_GT(fs::file_size(d / "rob" / f), 1000u) << f;
    std::ifstream pf(d / "rob" / "chart.png", std::ios::binary);
    std::string sig(8, '\0');
    pf.read(&sig[0], 8);
    EXPECT_EQ(sig, std::string("\x89PNG\r\n\x1a\n", 8));
  } else {
    DRIFTLAB_SKIP_OR_REQUIRE("the chart needs /usr/bin/python3 with matplotlib (apt-get install python3-matplotlib)");
  }

  // a convention over a one-step and an iterative attack: Foolbox 3's step relative to eps is BIM's
  // only (FGSM keeps its one step of eps); Boundary under the same convention runs Foolbox 3's rules
  r = run_driftlab("robustness --model fp32=" + w + " --convention foolbox3 --attacks fgsm,bim,boundary --eps 0.1 "
                   "--iterations 10 --no-chart --out " + (d / "fb3").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream jf3(d / "fb3" / "robustness.json");
  const json j3 = json::parse(jf3);
  EXPECT_EQ(j3["attacks"], json({"fgsm", "bim", "boundary"}));
  EXPECT_EQ(j3["settings"][2]["boundary_rules"], "foolbox3");
  EXPECT_EQ(j3["settings"][2]["iterations"], 10);
  EXPECT_EQ(j3["settings"][1]["steps"], 10);

  // refusals, by name
  // an int8 model without --craft: white-box on its own straight-through gradients
  r = run_driftlab("robustness --model fp32=" + w + " --model int8=" + q + " --attacks fgsm --no-chart --out " +
                   (d / "ste").string() + data);
  ASSERT_EQ(r.code, 0) << r.out;
  std::ifstream js(d / "ste" / "robustness.json");
  const json jst = json::parse(js);
  EXPECT_EQ(jst["model_files"][1]["gradient"], "straight-through (fake-quantized graph)");
  EXPECT_EQ(jst["model_files"][0]["gradient"], "the model's own backward");
  expect_refused("robustness --model fp32=" + w + " --craft int8=fp32 --no-chart" + bad, "no model named 'int8'");
  expect_refused("robustness --model " + w + " --no-chart" + bad, "is not NAME=FILE");
}

}  // namespace
