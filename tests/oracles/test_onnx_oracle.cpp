// ONNX export round trip: every model of the zoo under each preset, exported by
// convert/onnx_export.h, checked by ONNX's checker (python3-onnx, full_check) and run in ONNX
// Runtime (onnxruntime-node 1.23, CPU, default graph optimizations, one thread;
// tests/oracles/ort/run_models.sh), against driftlab's logits on the same inputs.
//
// Inputs: the first 1,000 Fashion-MNIST test images (LeNet-1/5; as 28 steps of 28 features for
// the LSTM/GRU classifiers); CIFAR-shaped models get synthetic-cifar10 pixels (CIFAR-10 is not
// installable here: these are not real inputs either way), 200 for ResNet-20 and 50 for ResNet-18
// and VGG-16, and the IMDb models 500 rows of random token ids: their arithmetic on one thread on
// both sides would add minutes to CI, and the graph is the same for 50 inputs as for 1,000. Weights: each
// preset's initialisers with random biases and BatchNorm statistics (oracle::model_with_random_state),
// so that every BatchNorm is visible.
//
// What must hold: outputs within 1e-5 of driftlab's relative to the largest |logit| (the required
// bound: ORT's kernels sum in other orders and fuse Conv+BatchNorm+ReLU, float32 rounding of ~1e-7
// relative per op over up to 20 layers) and the same predicted class on every input. And
// the negative cases: the same graphs written without the Policy's padding (ResNet-20 under the
// tensorflow preset, whose stride-2 'same' pads are TF's asymmetric (0,1)) or with the stored
// (PyTorch) gate order for the Keras-preset LSTM and GRU make ORT disagree; the size is printed.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>

#include "attacks/stats.h"
#include "convert/onnx_export.h"
#include "convert/onnx_import.h"
#include "engine/data/cifar.h"
#include "engine/data/idx.h"
#include "engine/train/cpu_runner.h"
#include "models/model_file.h"
#include "models/models.h"
#include "tests/cli/cli_util.h"
#include "tests/oracles/oracle_util.h"

namespace driftlab {
namespace {

using oracle::CaseDir;
namespace fs = std::filesystem;

constexpr uint64_t kSeed = 31;
const char* const kPresets[] = {"torch", "tensorflow", "theano"};

struct ArchCase {
  const char* arch;
  int64_t n;  // inputs
};
const ArchCase kArchs[] = {{"lenet1", 1000}, {"lenet5", 1000},   {"resnet20", 200}, {"resnet20b", 200},
                           {"resnet18", 50},  {"vgg16", 50},      {"lstm", 1000},    {"gru", 1000},
                           {"lstm-imdb", 500}, {"gru-imdb", 500}};

Tensor fashion_test(int64_t n) {
  static const Tensor all = load_mnist_like("/usr/share/datasets/fashion-mnist", false, "fashion-mnist").images;
  Tensor x({n, 1, 28, 28}, DType::f32);
  std::copy(all.data<float>(), all.data<float>() + x.numel(), x.data<float>());
  return x;
}

Tensor inputs_for(const std::string& arch, int64_t n) {
  if (arch == "lenet1" || arch == "lenet5") return fashion_test(n);
  if (arch == "lstm" || arch == "gru") return fashion_test(n).reshape({n, 28, 28});
  if (arch == "lstm-imdb" || arch == "gru-imdb") {
    Tensor ids({n, 80}, DType::f32);
    std::mt19937 g(7);
    for (int64_t i = 0; i < ids.numel(); ++i) ids.data<float>()[i] = static_cast<float>(g() % 20002);
    return ids;
  }
  return synthetic_cifar10(n, 11).images;
}

std::string case_name(const std::string& arch, const std::string& preset, const std::string& variant = "") {
  return arch + "." + preset + (variant.empty() ? "" : "." + variant);
}

Model model_for(const std::string& arch, const std::string& preset) {
  return oracle::model_with_random_state(arch, Policy::preset_named(preset), kSeed);
}

void add_export(CaseDir& d, const std::string& arch, const std::string& preset, const std::string& variant,
                const convert::OnnxExportOptions& o) {
  Model m = model_for(arch, preset);
  const std::string name = case_name(arch, preset, variant);
  convert::write_onnx((d.dir() / (name + ".onnx")).string(), convert::export_onnx(m, o).bytes);
  d.add_case({{"name", name}, {"kind", "run"}, {"model", name + ".onnx"}, {"x", arch + ".x.npy"}});
}

const CaseDir& export_run() {
  static const CaseDir run(oracle::ort_oracle("run_models.sh"), "onnx_export", [](CaseDir& d) {
    for (const ArchCase& a : kArchs) {
      d.input(std::string(a.arch) + ".x", inputs_for(a.arch, a.n));
      for (const char* preset : kPresets) add_export(d, a.arch, preset, "", {});
    }
    convert::OnnxExportOptions naive_pads;
    naive_pads.symmetric_pads = true;
    // (under theano the pads are symmetric already: Lasagne's 'same' is k//2 on both sides)
    add_export(d, "resnet20", "tensorflow", "naive_pads", naive_pads);
    convert::OnnxExportOptions naive_gates;
    naive_gates.rnn_gates_as_stored = true;
    for (const char* arch : {"lstm", "gru"}) add_export(d, arch, "tensorflow", "naive_gates", naive_gates);
  });
  return run;
}

Tensor driftlab_logits(const std::string& arch, const std::string& preset, const Tensor& x) {
  Model m = model_for(arch, preset);
  CpuRunner runner(m);
  return runner.logits(x);
}

TEST(OrtExport, EveryModelUnderEveryPresetRunsInOnnxRuntimeAsInDriftlab) {
  ORACLE_GROUP(run, export_run);
  EXPECT_NE(run.log().find("models passed"), std::string::npos) << run.log();
  std::cout << run.log();
  std::cout << "| model | preset | inputs | max |d| / max |logit| | predictions that differ |\n|---|---|---|---|---|\n";
  for (const ArchCase& a : kArchs) {
    const Tensor x = run.in(std::string(a.arch) + ".x");
    for (const char* preset : kPresets) {
      SCOPED_TRACE(case_name(a.arch, preset));
      const oracle::LogitAgreement g =
          oracle::logit_agreement(run.out(case_name(a.arch, preset), "logits"), driftlab_logits(a.arch, preset, x));
      std::cout << "| " << a.arch << " | " << preset << " | " << a.n << " | " << g.rel << " | " << g.flips << " |\n";
      EXPECT_LE(g.rel, 1e-5);  // the required bound; see the file comment
      EXPECT_EQ(g.flips, 0);
    }
  }
}

TEST(OrtExport, WithoutThePolicysPaddingOrGateOrderOnnxRuntimeDisagrees) {
  ORACLE_GROUP(run, export_run);
  struct Neg {
    const char *arch, *preset, *variant, *what;
  };
  const Neg negs[] = {{"resnet20", "tensorflow", "naive_pads", "stride-2 pads written symmetric (1,1) instead of TF's (0,1)"},
                      {"lstm", "tensorflow", "naive_gates", "LSTM gates in PyTorch's i,f,g,o instead of ONNX's i,o,f,c"},
                      {"gru", "tensorflow", "naive_gates", "GRU gates in PyTorch's r,z,n instead of ONNX's z,r,h"}};
  for (const Neg& ng : negs) {
    SCOPED_TRACE(case_name(ng.arch, ng.preset, ng.variant));
    const Tensor x = run.in(std::string(ng.arch) + ".x");
    const oracle::LogitAgreement g = oracle::logit_agreement(run.out(case_name(ng.arch, ng.preset, ng.variant), "logits"),
                                                              driftlab_logits(ng.arch, ng.preset, x));
    std::cout << ng.arch << " under " << ng.preset << ", " << ng.what << ": max |d| / max |logit| = " << g.rel << ", "
              << g.flips << " of " << x.dim(0) << " predictions differ\n";
    // far beyond the 1e-5 of a faithful export: the semantics carry the agreement
    EXPECT_GT(g.rel, 1e-2);
  }
}

}  // namespace
}  // namespace driftlab

// ---------------------------------------------------------------------------------------------
// Import: files written by torch.onnx.export (Debian's PyTorch 1.13, opset 14, eval mode: each
// BatchNorm folded into its conv) from PyTorch's own initialisation, read by
// convert/onnx_import.h and run by driftlab under the torch preset, against the PyTorch model's
// logits on the same inputs (tests/oracles/torch/oracle.py run_onnx_export). Bound: 1e-5 of the
// largest |logit|, as for the export; the sums run in other orders on the two sides, and the folded
// BatchNorm rounds the weights once more.

namespace driftlab {
namespace {

struct ImportCase {
  const char* arch;
  Shape x;
};
const ImportCase kImports[] = {{"lenet1", {64, 1, 28, 28}}, {"lenet5", {64, 1, 28, 28}}, {"resnet20", {16, 3, 32, 32}},
                               {"vgg16", {8, 3, 32, 32}},   {"lstm", {64, 28, 28}},      {"gru", {64, 28, 28}}};

const CaseDir& import_run() {
  static const CaseDir run(oracle::torch_oracle("oracle.py"), "torch_onnx_import", [](CaseDir& d) {
    uint64_t seed = 60;
    for (const ImportCase& c : kImports) {
      const std::string n = std::string(c.arch) + "_onnx";
      d.input(n, "x", random_tensor(c.x, DType::f32, ++seed, 0.0, 1.0));
      d.add_case({{"name", n}, {"kind", "onnx_export"}, {"arch", c.arch}, {"seed", seed}, {"opset", 14}});
    }
    d.input("lenet1_leaky", "x", random_tensor({4, 1, 28, 28}, DType::f32, 99, 0.0, 1.0));
    d.add_case({{"name", "lenet1_leaky"}, {"kind", "onnx_export"}, {"arch", "lenet1"}, {"seed", 1}, {"opset", 14},
                {"leaky", true}});
  });
  return run;
}

TEST(TorchOnnxImport, TorchExportedModelsImportAndComputePytorchsLogits) {
  ORACLE_GROUP(run, import_run);
  for (const ImportCase& c : kImports) {
    const std::string n = std::string(c.arch) + "_onnx";
    SCOPED_TRACE(n);
    convert::OnnxImport im = convert::import_onnx((run.dir() / "out" / (n + ".model.onnx")).string());
    EXPECT_EQ(im.model.name, c.arch);
    EXPECT_EQ(im.opset, 14);
    CpuRunner runner(im.model);
    const oracle::LogitAgreement g = oracle::logit_agreement(run.out(n, "logits"), runner.logits(run.in(n, "x")));
    std::cout << c.arch << " (" << im.producer << "): max |d| / max |logit| = " << g.rel << ", " << g.flips
              << " predictions differ; " << im.mapping.size() << " weighted nodes mapped\n";
    EXPECT_LE(g.rel, 1e-5);  // the required bound; see above
    EXPECT_EQ(g.flips, 0);
  }
  // a node with no driftlab layer: named, with its op type and attributes
  try {
    convert::import_onnx((run.dir() / "out" / "lenet1_leaky.model.onnx").string());
    ADD_FAILURE() << "a LeakyRelu graph was imported";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("LeakyRelu"), std::string::npos) << what;
    EXPECT_NE(what.find("alpha=0.1"), std::string::npos) << what;
    EXPECT_NE(what.find("cannot be mapped"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace driftlab

// ---------------------------------------------------------------------------------------------
// driftlab convert: the measurements of Openja et al.'s conversion study (docs/GLOSSARY.md) in one
// command (export, ONNX Runtime on the same test inputs).


namespace driftlab {
namespace {

TEST(OrtConvert, MeasuresS3sQuantitiesInOneCommand) {
  DRIFTLAB_SKIP_UNLESS(oracle::ort_unavailable());
  const fs::path d = cli_test::fresh_dir("ort_convert");
  Model m = model_for("lenet5", "tensorflow");  // a channels-last flatten: the Transpose must be there
  const std::string w = (d / "m.dlm").string();
  save_model(w, m, {});
  const cli_test::CliRun r =
      cli_test::run_driftlab("convert --weights " + w + " --to onnx --check --limit 200 --threads 1 --repeats 1 --out " +
                             (d / "conv").string());
  ASSERT_EQ(r.code, 0) << r.out;
  std::cout << r.out;
  std::ifstream f(d / "conv" / "convert.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  EXPECT_EQ(j["n"], 200);
  EXPECT_EQ(j["misclassification"], 0.0);
  EXPECT_EQ(j["accuracy_before"], j["accuracy_after"]);
  EXPECT_LE(j["logits_max_rel"].get<double>(), 1e-5);  // the round trip's bound (above)
  EXPECT_GT(j["size_before"].get<double>(), 0);
  EXPECT_GT(j["size_after"].get<double>(), 0);
  EXPECT_GT(j["inference_ms_after"].get<double>(), 0);
  EXPECT_TRUE(fs::exists(d / "conv" / "convert.csv"));

  // Openja et al.'s robustness before and after conversion: FGSM examples crafted on the model,
  // judged by both
  const cli_test::CliRun a = cli_test::run_driftlab("attack --weights " + w + " --attack fgsm --eps 0.1 --limit 40 "
                                                    "--threads 1 --out " + (d / "adv").string());
  ASSERT_EQ(a.code, 0) << a.out;
  const cli_test::CliRun c = cli_test::run_driftlab("convert --weights " + w + " --limit 40 --threads 1 --repeats 1 "
                                                    "--adversarial " + (d / "adv").string() + " --out " +
                                                    (d / "conv_adv").string());
  ASSERT_EQ(c.code, 0) << c.out;
  std::ifstream fa(d / "conv_adv" / "convert.json");
  const nlohmann::json ja = nlohmann::json::parse(fa)["adversarial"];
  EXPECT_EQ(ja["n"], 40);
  EXPECT_EQ(ja["predictions_differ"], 0);  // a faithful conversion judges every example alike
  EXPECT_EQ(ja["success_before"], ja["success_after"]);
}

// Openja et al.'s R(m, c) over several conversions: the LSTM classifier under the tensorflow preset
// converted faithfully and with the gate blocks in the stored order (--naive-rnn-gates, the round
// trip's negative case: 530 of 1,000 clean predictions flip), each judged on FGSM and BIM examples
// crafted on the model. (ResNet-20's --naive-pads, 2.2e-2 of the logit range, moved no judgement of
// 40 such examples: too small a fault to show here.)
TEST(OrtConvert, RobustnessVariationOverConversionsAndAttacks) {
  DRIFTLAB_SKIP_UNLESS(oracle::ort_unavailable());
  const fs::path d = cli_test::fresh_dir("ort_convert_report");
  Model m = model_for("lstm", "tensorflow");
  const std::string w = (d / "r.dlm").string(), data = " --dataset seq-fashion-mnist --limit 40 --threads 1";
  save_model(w, m, {});
  std::string dirs;
  for (const char* attack : {"fgsm", "bim"}) {
    const std::string adv = (d / (std::string("adv_") + attack)).string();
    const cli_test::CliRun a =
        cli_test::run_driftlab("attack --weights " + w + " --attack " + attack + " --eps 0.03" + data + " --out " + adv);
    ASSERT_EQ(a.code, 0) << a.out;
    for (const char* naive : {"", " --naive-rnn-gates"}) {
      const std::string out = (d / (std::string("conv_") + attack + (*naive ? "_naive" : ""))).string();
      const cli_test::CliRun c = cli_test::run_driftlab("convert --weights " + w + data + " --repeats 1" + naive +
                                                        " --adversarial " + adv + " --out " + out);
      ASSERT_EQ(c.code, 0) << c.out;
      dirs += " " + out;
      const nlohmann::json j = nlohmann::json::parse(std::ifstream(out + "/convert.json"));
      EXPECT_EQ(j["conversion"], *naive ? "onnx+naive-rnn-gates" : "onnx");
      if (!*naive) EXPECT_EQ(j["adversarial"]["variation"], 0.0) << attack;  // faithful: the same judgements
      // the wrong gate order must change the model, or this would compare a conversion with itself
      if (*naive) EXPECT_GT(j["misclassification"].get<double>(), 0.0) << attack;
    }
  }
  const std::string report = (d / "report.json").string();
  const cli_test::CliRun r = cli_test::run_driftlab("convert-report" + dirs + " --out " + report);
  ASSERT_EQ(r.code, 0) << r.out;
  std::cout << r.out;
  EXPECT_NE(r.out.find("| " + w + " | onnx+naive-rnn-gates |"), std::string::npos) << r.out;
  const nlohmann::json rows = nlohmann::json::parse(std::ifstream(report))["rows"];
  ASSERT_EQ(rows.size(), 2u);
  // R as attacks/stats.h's min-max indicator of the variations the rows carry (its formula has its
  // own tests); the faithful row has the least variation on every attack, so R = 0 there
  std::vector<std::vector<double>> v;
  for (const auto& row : rows) {
    std::vector<double> per;
    for (const char* a : {"fgsm eps 0.03", "bim eps 0.03"}) per.push_back(row["attacks"][a]["variation"].get<double>());
    v.push_back(per);
  }
  const std::vector<double> R = attacks::min_max_indicator(v);
  for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i]["R"].get<double>(), R[i]);
  EXPECT_EQ(rows[0]["conversion"], "onnx");
  EXPECT_EQ(rows[0]["R"].get<double>(), 0.0);
  // the naive row: each attack whose examples it judges otherwise adds 1 (it is that attack's max)
  double expect_naive = 0;
  for (double x : v[1]) expect_naive += x > 0 ? 1.0 : 0.0;
  EXPECT_GT(rows[1]["R"].get<double>(), 0.0) << "the naive gates changed no judgement";
  EXPECT_EQ(rows[1]["R"].get<double>(), expect_naive);
  // a folder without adversarial results is named
  const cli_test::CliRun bad = cli_test::run_driftlab("convert-report " + (d / "missing").string());
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find((d / "missing").string() + "/convert.json"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace driftlab
