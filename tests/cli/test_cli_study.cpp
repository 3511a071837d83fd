// driftlab study run / status (study/run.h) on small real studies (Fashion-MNIST cut to a few
// hundred images): a finished study rerun does no work (no cell's files are written again), an
// edited cell reruns with its dependants only, worker processes give the same results as one
// process, a study killed with SIGKILL mid-training finishes only what was missing (its train cell
// going on from its checkpoint) with the results of an uninterrupted run, SIGINT and SIGTERM stop it
// with 130 and 143, and a failing cell blocks its dependants only.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "models/graph.h"
#include "models/model_file.h"
#include "models/models.h"
#include "tests/cli/cli_util.h"
#include "tests/require_util.h"

namespace driftlab {
namespace {

using cli_test::fresh_dir;
using cli_test::run_driftlab;
namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

struct CliRunResult {
  int code;
  std::string out;
};
CliRunResult run_shell(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

// Every cell's results.json: hash -> (bytes, modification time).
std::map<std::string, std::pair<std::string, fs::file_time_type>> results_of(const fs::path& study) {
  std::map<std::string, std::pair<std::string, fs::file_time_type>> out;
  for (const auto& e : fs::directory_iterator(study / "cells")) {
    const fs::path r = e.path() / "results.json";
    if (fs::exists(r)) out[e.path().filename().string()] = {read(r), fs::last_write_time(r)};
  }
  return out;
}

const char* kSpec = R"(study: cli-small
title: "LeNet-1 under two presets, int8 and FGSM"
defaults: {limit: 300}
steps:
  train:
    do: train
    grid: {policy: [tensorflow, torch]}
    set: {model: lenet1, epochs: 1, batch: 64}
  eval:
    do: evaluate
    needs: train
  int8:
    do: quantize
    needs: train
    set: {scheme: tflite, calib: 100}
  fgsm:
    do: attack
    needs: [train, int8]
    set: {attack: fgsm, eps: 0.1, limit: 100}
)";

TEST(StudyCli, RerunDoesNoWorkAndAnEditRerunsThatCellAndItsDependantsOnly) {
  const fs::path d = fresh_dir("study_rerun");
  write(d / "s.yaml", kSpec);
  const std::string run = "study run " + (d / "s.yaml").string() + " --out " + (d / "out").string();
  auto r = run_driftlab(run);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("8 cells: 0 done before, 8 run now"), std::string::npos) << r.out;
  const auto first = results_of(d / "out");
  ASSERT_EQ(first.size(), 8u);

  // The results database (collected at the end of the run): the cells by state, and every
  // results.json number under its JSON pointer (test accuracy: 2 train + 2 eval + 2 int8 cells).
  const std::string q = "study query " + (d / "out").string() + " ";
  r = run_driftlab(q + "\"SELECT step, count(*) FROM cells WHERE state = 'done' GROUP BY step ORDER BY step\"");
  EXPECT_EQ(r.out, "step\tcount(*)\neval\t2\nfgsm\t2\nint8\t2\ntrain\t2\n");
  r = run_driftlab(q + "\"SELECT count(*) FROM measures WHERE path = '/test/accuracy'\"");
  EXPECT_EQ(r.out, "count(*)\n6\n");
  r = run_driftlab(q + "\"DELETE FROM cells\"");
  EXPECT_EQ(r.code, 1) << r.out;  // read-only
  EXPECT_NE(r.out.find("readonly"), std::string::npos) << r.out;

  // Again: nothing runs, and no results file is written again (same bytes, same time).
  r = run_driftlab(run);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("8 cells: 8 done before, 0 run now"), std::string::npos) << r.out;
  EXPECT_EQ(results_of(d / "out"), first);

  // One edit in the int8 step: its two cells and the two attacks judged on them are new cells;
  // the training and evaluation cells are the ones already done.
  std::string edited = kSpec;
  edited.replace(edited.find("calib: 100"), 10, "calib: 150");
  write(d / "s.yaml", edited);
  r = run_driftlab(run);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("8 cells: 4 done before, 4 run now"), std::string::npos) << r.out;
  const auto after = results_of(d / "out");
  EXPECT_EQ(after.size(), 12u);  // the four old int8/attack cells stay, unused by this spec
  for (const auto& [hash, v] : first) EXPECT_EQ(after.at(hash), v) << hash << " was written again";

  r = run_driftlab("study status " + (d / "out").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("int8             done 2 partial 0 failed 0 missing 0"), std::string::npos) << r.out;

  // Worker processes: the same results, byte for byte, as the one-process run.
  r = run_driftlab(run + "-jobs --jobs 3");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto jobs = results_of(d / "out-jobs");
  ASSERT_EQ(jobs.size(), 8u);
  for (const auto& [hash, v] : jobs) EXPECT_EQ(v.first, after.at(hash).first) << hash;
  fs::remove_all(d);
}

// The report's page in a real browser: headless Chromium loads DIR/report/index.html, runs the
// page's own check (every <img> decoded, data-broken on <body> empty), and takes a screenshot;
// every src/href of the page names a file that exists.
TEST(StudyCli, ReportPageLoadsEveryFigureInHeadlessChromium) {
  const char* env = std::getenv("CHROMIUM");
  const std::string chromium = env && *env ? env : "/usr/bin/chromium";
  if (!fs::exists(chromium)) DRIFTLAB_SKIP_OR_REQUIRE(chromium + " not installed (apt-get install chromium)");
  const fs::path d = fresh_dir("study_page");
  write(d / "s.yaml", R"(study: page
title: "two presets, two seeds"
adaptations: ["300 images"]
defaults: {limit: 300}
steps:
  train: {do: train, grid: {policy: [tensorflow, torch], seed: [1, 2]}, set: {model: lenet1, epochs: 2, batch: 16}}
  int8: {do: quantize, needs: train, set: {scheme: tflite, calib: 100}}
  rob: {do: robustness, needs: train, gather: [policy], set: {attacks: fgsm, eps: 0.1, repeats: 1, samples: 30}}
)");
  auto r = run_driftlab("study run " + (d / "s.yaml").string() + " --out " + (d / "out").string() + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  r = run_driftlab("study report " + (d / "out").string());
  ASSERT_EQ(r.code, 0) << r.out;
  const fs::path page = d / "out" / "report" / "index.html";
  const std::string html = read(page);
  // Every link of the page is a file beside it.
  const std::regex link("(?:src|href)=\"([^\"]+)\"");
  std::set<std::string> links;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), link); it != std::sregex_iterator(); ++it)
    links.insert((*it)[1].str());
  EXPECT_EQ(links, (std::set<std::string>{"train_train_loss.svg", "train_val_acc.svg", "train_divergence.svg",
                                          "train_bars.svg", "int8_bars.svg", "rob_bars.svg"}));
  for (const std::string& l : links) EXPECT_TRUE(fs::exists(page.parent_path() / l)) << l;
  // A report made again from the same results writes the same figures, byte for byte (no date in
  // them, fixed SVG ids): republishing a study changes no file it need not.
  std::map<std::string, std::string> figures;
  for (const std::string& l : links) {
    figures[l] = read(page.parent_path() / l);
    const std::string png = l.substr(0, l.size() - 3) + "png";
    figures[png] = read(page.parent_path() / png);
  }
  r = run_driftlab("study report " + (d / "out").string());
  ASSERT_EQ(r.code, 0) << r.out;
  for (const auto& [name, bytes] : figures) EXPECT_EQ(read(page.parent_path() / name), bytes) << name << " changed";
  const std::string flags = " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
                            " --user-data-dir=" + (d / "profile").string() + " --virtual-time-budget=5000";
  const CliRunResult dom = run_shell(chromium + flags + " --dump-dom file://" + page.string() + " 2>/dev/null");
  ASSERT_EQ(dom.code, 0) << dom.out;
  EXPECT_NE(dom.out.find("data-figures=\"6\""), std::string::npos) << dom.out.substr(0, 2000);
  EXPECT_NE(dom.out.find("data-broken=\"\""), std::string::npos) << dom.out.substr(0, 2000);
  EXPECT_NE(dom.out.find("<td>tensorflow</td>"), std::string::npos);
  const fs::path shot = d / "page.png";
  const CliRunResult s = run_shell(chromium + flags + " --window-size=1300,1800 --screenshot=" + shot.string() +
                                   " file://" + page.string() + " 2>&1");
  ASSERT_EQ(s.code, 0) << s.out;
  EXPECT_EQ(read(shot).substr(1, 3), "PNG");
  if (const char* keep = std::getenv("DRIFTLAB_KEEP_SCREENSHOT")) fs::copy_file(shot, keep, fs::copy_options::overwrite_existing);
  fs::remove_all(d);
}

// predict_time (S1's RQ2): the sizes in results.json, the seconds in timings.json only.
TEST(StudyCli, PredictionTimeGoesToTheTimings) {
  const fs::path d = fresh_dir("study_predict");
  write(d / "s.yaml", R"(study: pt
defaults: {limit: 200}
steps:
  train: {do: train, set: {model: lenet1, epochs: 1}}
  time: {do: predict_time, needs: train, set: {sizes: "10,100"}}
)");
  auto r = run_driftlab("study run " + (d / "s.yaml").string() + " --out " + (d / "out").string() + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  r = run_driftlab("study query " + (d / "out").string() +
                   " \"SELECT t.path, t.value > 0 FROM timings t JOIN cells c USING (hash) WHERE c.step = 'time'"
                   " AND t.path LIKE '/predictions/%/seconds' ORDER BY t.path\"");
  EXPECT_EQ(r.out, "path\tt.value > 0\n/predictions/0/seconds\t1\n/predictions/1/seconds\t1\n");
  r = run_driftlab("study query " + (d / "out").string() +
                   " \"SELECT m.path, m.value FROM measures m JOIN cells c USING (hash) WHERE c.step = 'time'"
                   " ORDER BY m.path\"");
  EXPECT_EQ(r.out, "path\tvalue\n/sizes/0\t10.0\n/sizes/1\t100.0\n");  // no time among the results
  fs::remove_all(d);
}

// A robustness cell over the presets' models (gather: [policy]): the table of driftlab robustness
// (success rates per attack and repeat, R(m), the pairs against the first model) in results.json.
TEST(StudyCli, RobustnessGathersThePresetsModels) {
  const fs::path d = fresh_dir("study_robust");
  write(d / "s.yaml", R"(study: rob
defaults: {limit: 300}
steps:
  train: {do: train, grid: {policy: [tensorflow, torch]}, set: {model: lenet1, epochs: 1}}
  rob:
    do: robustness
    needs: train
    gather: [policy]
    set: {attacks: "fgsm,bim", repeats: 2, samples: 50}
)");
  auto r = run_driftlab("study run " + (d / "s.yaml").string() + " --out " + (d / "out").string() + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  r = run_driftlab("study query " + (d / "out").string() +
                   " \"SELECT m.path FROM measures m JOIN cells c USING (hash) WHERE c.step = 'rob' AND"
                   " (m.path LIKE '/rows/%/R' OR m.path LIKE '/rows/%/attacks/%/rates/%') ORDER BY m.path\"");
  EXPECT_EQ(r.out, "path\n/rows/0/R\n/rows/0/attacks/bim/rates/0\n/rows/0/attacks/bim/rates/1\n"
                   "/rows/0/attacks/fgsm/rates/0\n/rows/0/attacks/fgsm/rates/1\n/rows/1/R\n"
                   "/rows/1/attacks/bim/rates/0\n/rows/1/attacks/bim/rates/1\n/rows/1/attacks/fgsm/rates/0\n"
                   "/rows/1/attacks/fgsm/rates/1\n");
  r = run_driftlab("study report " + (d / "out").string() + " --no-figures");
  // the papers' layout: a row per model, a column per attack, R last
  EXPECT_NE(r.out.find("| model | bim success | fgsm success | R |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n| tensorflow | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n| torch | "), std::string::npos) << r.out;
  fs::remove_all(d);
}

// --any-build: the hashes carry "any" instead of this binary's commit (cells reused across
// builds); the default hashes differ from them, and each is stable.
TEST(StudyCli, AnyBuildLeavesTheCommitOutOfTheHashes) {
  const fs::path d = fresh_dir("study_anybuild");
  write(d / "s.yaml", kSpec);
  const std::string plan = "study plan " + (d / "s.yaml").string() + " --manifest ";
  auto r = run_driftlab(plan + (d / "any1").string() + " --any-build");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(build any)"), std::string::npos) << r.out;
  ASSERT_EQ(run_driftlab(plan + (d / "any2").string() + " --any-build").code, 0);
  ASSERT_EQ(run_driftlab(plan + (d / "commit").string()).code, 0);
  EXPECT_EQ(read(d / "any1"), read(d / "any2"));
  EXPECT_NE(read(d / "any1"), read(d / "commit"));
  EXPECT_EQ(read(d / "any1").size(), read(d / "commit").size());  // the same cells, other hashes
  fs::remove_all(d);
}

// --reuse: a second study whose train step is the first's, cell for cell (another step name, the
// same parameters), takes those cells instead of training again, and runs only its own.
TEST(StudyCli, ReuseTakesAnotherStudysCellsOfTheSameHash) {
  const fs::path d = fresh_dir("study_reuse");
  write(d / "a.yaml", R"(study: a
defaults: {limit: 300}
steps:
  train: {do: train, grid: {policy: [tensorflow, torch]}, set: {model: lenet1, epochs: 1}}
)");
  write(d / "b.yaml", R"(study: b
defaults: {limit: 300}
steps:
  fit: {do: train, grid: {policy: [tensorflow, torch]}, set: {model: lenet1, epochs: 1}}
  eval: {do: evaluate, needs: fit}
)");
  auto r = run_driftlab("study run " + (d / "a.yaml").string() + " --out " + (d / "a").string() + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  r = run_driftlab("study run " + (d / "b.yaml").string() + " --out " + (d / "b").string() + " --reuse " +
                   (d / "a").string() + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("4 cells: 2 done before (2 taken from --reuse folders), 2 run now"), std::string::npos) << r.out;
  const auto a = results_of(d / "a"), b = results_of(d / "b");
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 4u);
  for (const auto& [hash, res] : a) {
    ASSERT_TRUE(b.count(hash)) << hash;
    EXPECT_EQ(b.at(hash).first, res.first);
    EXPECT_TRUE(fs::exists(d / "b" / "cells" / hash / "run" / "model.dlm"));
    EXPECT_NE(read(d / "b" / "cells" / hash / "attempts.txt").find("adopted from " + (d / "a").string()),
              std::string::npos);
  }
  // the evaluations read the adopted models: the test accuracy the training measured
  for (const auto& [hash, res] : b) {
    if (a.count(hash)) continue;
    const std::string cell = read(d / "b" / "cells" / hash / "cell.json");
    const std::string fit = cell.substr(cell.find("\"inputs\"") + 17, 16);
    ASSERT_TRUE(a.count(fit)) << cell;
    const auto acc = [](const std::string& json) {
      const std::size_t at = json.find("\"accuracy\": ");
      return json.substr(at, json.find_first_of(",\n}", at) - at);
    };
    EXPECT_EQ(acc(res.first), acc(a.at(fit).first));
  }
  r = run_driftlab("study run " + (d / "b.yaml").string() + " --out " + (d / "c").string() + " --reuse " +
                   (d / "nowhere").string() + " --quiet");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find((d / "nowhere").string() + ": not a study folder"), std::string::npos) << r.out;
  fs::remove_all(d);
}

// study report --explain: a gap beyond the seeds' spread gets its explanation study (study explain's
// spec) run into DIR/explain/..., the study's own cells taken from DIR, and a sentence in the report.
// The two presets' accuracies are written apart here so that the gap is certain; the one-knob
// variants train for real.
TEST(StudyCli, ReportExplainRunsTheExplanationStudyOfEachGap) {
  const fs::path d = fresh_dir("study_report_explain");
  write(d / "s.yaml", R"(study: ex
defaults: {limit: 100}
steps:
  train: {do: train, grid: {policy: [torch, tensorflow], seed: [1, 2]}, set: {model: lenet1, epochs: 1}}
)");
  auto r = run_driftlab("study run " + (d / "s.yaml").string() + " --out " + (d / "out").string() + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const auto& e : fs::directory_iterator(d / "out" / "cells")) {
    const std::string cell = read(e.path() / "cell.json");
    const bool torch = cell.find("\"policy\": \"torch\"") != std::string::npos;
    const bool seed2 = cell.find("\"seed\": \"2\"") != std::string::npos;
    std::string res = read(e.path() / "results.json");
    const std::size_t at = res.find("\"accuracy\": ");
    ASSERT_NE(at, std::string::npos) << res;
    const std::size_t end = res.find_first_of(",\n}", at);
    res.replace(at, end - at, std::string("\"accuracy\": ") + (torch ? "0.1" : "0.9") + (seed2 ? "2" : "1"));
    write(e.path() / "results.json", res);
  }
  r = run_driftlab("study report " + (d / "out").string() + " --explain --no-figures");
  ASSERT_EQ(r.code, 0) << r.out;
  const fs::path sub = d / "out" / "explain" / "train-lenet1-torch-tensorflow";
  ASSERT_TRUE(fs::exists(sub / "spec.yaml")) << r.out;
  EXPECT_TRUE(fs::exists(sub / "tables.md"));
  EXPECT_NE(r.out.find("- **test accuracy: torch 0.1150, tensorflow 0.9150** (gap +0.8000, beyond the seeds' spread)"),
            std::string::npos)
      << r.out;
  // the study's four cells were taken, not trained again
  int adopted = 0;
  for (const auto& e : fs::directory_iterator(sub / "cells"))
    adopted += read(e.path() / "attempts.txt").find("adopted from") != std::string::npos;
  EXPECT_EQ(adopted, 4);
  fs::remove_all(d);
}

// drift (S1's RQ2): a model trained under tensorflow, its weights converted to each preset's
// conventions, decides alike under all three; the raw tensors (no conversion: Theano's flipped
// kernels, PyTorch's flatten order) do not.
TEST(StudyCli, SameWeightsUnderEveryPresetDecideAlikeOnlyConverted) {
  const fs::path d = fresh_dir("study_drift");
  write(d / "s.yaml", R"(study: dr
defaults: {limit: 300}
steps:
  train: {do: train, set: {model: lenet5, policy: tensorflow, epochs: 1}}
  same: {do: drift, needs: train}
  raw: {do: drift, needs: train, set: {convert: false}}
)");
  auto r = run_driftlab("study run " + (d / "s.yaml").string() + " --out " + (d / "out").string() + " --quiet");
  ASSERT_EQ(r.code, 0) << r.out;
  r = run_driftlab("study query " + (d / "out").string() +
                   " \"SELECT c.step, m.path, m.value FROM measures m JOIN cells c USING (hash) WHERE c.kind = 'drift'"
                   " AND m.path LIKE '/pairs/%/misclassification' ORDER BY c.step, m.path\"");
  ASSERT_EQ(r.code, 0) << r.out;
  // three pairs per step: converted all 0; raw: torch (the flatten order) against both others not
  std::istringstream rows(r.out);
  std::string line;
  std::getline(rows, line);  // header
  std::map<std::string, double> mis;
  while (std::getline(rows, line)) {
    std::istringstream f(line);
    std::string step, path, value;
    std::getline(f, step, '\t');
    std::getline(f, path, '\t');
    std::getline(f, value, '\t');
    mis[step + path] = std::stod(value);
  }
  ASSERT_EQ(mis.size(), 6u) << r.out;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(mis["same/pairs/" + std::to_string(i) + "/misclassification"], 0.0) << r.out;
  EXPECT_GT(mis["raw/pairs/1/misclassification"], 0.0) << r.out;  // torch vs tensorflow
  EXPECT_GT(mis["raw/pairs/2/misclassification"], 0.0) << r.out;  // torch vs theano
  fs::remove_all(d);
}

TEST(StudyCli, AFailingCellBlocksItsDependantsOnly) {
  const fs::path d = fresh_dir("study_fail");
  // An int8 step calibrated on a CIFAR folder that does not exist fails for both trained models;
  // the attacks judged on those int8 models are blocked; every other cell runs.
  const std::string spec = std::string(kSpec) + R"(  bad8:
    do: quantize
    needs: train
    set: {scheme: tflite, dataset: cifar10, data_dir: /nonexistent/cifar}
  badfgsm:
    do: attack
    needs: [train, bad8]
    set: {attack: fgsm, eps: 0.2, limit: 50}
)";
  write(d / "s.yaml", spec);
  auto r = run_driftlab("study run " + (d / "s.yaml").string() + " --out " + (d / "out").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("12 cells: 0 done before, 8 run now (0 resumed from a checkpoint), 2 failed, 2 blocked"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/cifar"), std::string::npos) << r.out;
  r = run_driftlab("study status " + (d / "out").string());
  EXPECT_NE(r.out.find("bad8             done 0 partial 0 failed 2 missing 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("badfgsm          done 0 partial 0 failed 0 missing 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fgsm             done 2 partial 0 failed 0 missing 0"), std::string::npos) << r.out;
  fs::remove_all(d);
}

TEST(StudyCli, AKilledStudyFinishesOnlyWhatWasMissing) {
  const fs::path d = fresh_dir("study_kill");
  // One train cell long enough to be killed in (8 epochs of 1,000 images, a checkpoint every 4
  // steps), and an evaluation after it.
  write(d / "s.yaml", R"(study: kill
steps:
  train: {do: train, set: {model: lenet1, epochs: 8, limit: 1000, batch: 64, checkpoint_every: 4}}
  eval: {do: evaluate, needs: train}
)");
  const std::string args = "study run " + (d / "s.yaml").string() + " --out " + (d / "killed").string();
  // Started in the background; SIGKILL as soon as a checkpoint of the train cell is in place.
  const std::string cmd = std::string(DRIFTLAB_CLI_PATH) + " " + args + " > " + (d / "log").string() + " 2>&1 & echo $!";
  FILE* p = popen(cmd.c_str(), "r");
  int pid = 0;
  ASSERT_EQ(std::fscanf(p, "%d", &pid), 1);
  pclose(p);
  fs::path ckpt;
  for (int i = 0; i < 3000 && ckpt.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (fs::exists(d / "killed" / "cells"))
      for (const auto& e : fs::directory_iterator(d / "killed" / "cells"))
        if (fs::exists(e.path() / "run" / "checkpoint.dlc")) ckpt = e.path();
  }
  ASSERT_FALSE(ckpt.empty()) << read(d / "log");
  ::kill(pid, SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_FALSE(fs::exists(ckpt / "results.json")) << "the train cell finished before the kill; make it longer";

  auto r = run_driftlab("study status " + (d / "killed").string());
  EXPECT_NE(r.out.find("partial"), std::string::npos) << r.out;
  r = run_driftlab(args);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("2 cells: 0 done before, 2 run now (1 resumed from a checkpoint)"), std::string::npos) << r.out;
  // The same results as a study that was never killed.
  r = run_driftlab("study run " + (d / "s.yaml").string() + " --out " + (d / "whole").string());
  ASSERT_EQ(r.code, 0) << r.out;
  const auto killed = results_of(d / "killed"), whole = results_of(d / "whole");
  ASSERT_EQ(killed.size(), 2u);
  for (const auto& [hash, v] : whole) EXPECT_EQ(killed.at(hash).first, v.first) << hash;
  fs::remove_all(d);
}

// SIGINT and SIGTERM stop a study at its cells' next checkpoint (cli/cmd_study.cpp): the process
// exits 130 or 143, its summary says to run it again, and the next run finishes it, the train cell
// going on from its checkpoint.
TEST(StudyCli, SigintAndSigtermStopAtTheNextCheckpointWith130And143) {
  const fs::path d = fresh_dir("study_signal");
  const fs::path spec = d / "s.yaml";
  write(spec, R"(study: signal
steps:
  train: {do: train, set: {model: lenet1, epochs: 8, limit: 1000, batch: 64, checkpoint_every: 4}}
  eval: {do: evaluate, needs: train}
)");
  for (const int sig : {SIGINT, SIGTERM}) {
    const fs::path out = d / (sig == SIGINT ? "int" : "term"), log = d / (sig == SIGINT ? "int.log" : "term.log");
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execl(DRIFTLAB_CLI_PATH, DRIFTLAB_CLI_PATH, "study", "run", spec.c_str(), "--out", out.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    bool checkpointed = false;  // signalled once the train cell has a checkpoint: mid-training
    for (int i = 0; i < 3000 && !checkpointed; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (fs::exists(out / "cells"))
        for (const auto& e : fs::directory_iterator(out / "cells"))
          checkpointed = checkpointed || fs::exists(e.path() / "run" / "checkpoint.dlc");
    }
    ::kill(pid, sig);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(checkpointed) << read(log);
    ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status) << ": " << read(log);
    EXPECT_EQ(WEXITSTATUS(status), sig == SIGINT ? 130 : 143) << read(log);
    EXPECT_NE(read(log).find("stopped by a signal: run it again to finish"), std::string::npos) << read(log);
    const auto r = run_driftlab("study run " + spec.string() + " --out " + out.string());
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("2 cells: 0 done before, 2 run now (1 resumed from a checkpoint)"), std::string::npos) << r.out;
  }
  fs::remove_all(d);
}

// A graph model in a study: the train step takes model graph with init (a graph model file, what
// driftlab import writes: here a small residual graph over Fashion-MNIST written by hand), trains
// it, quantizes it (an int8 graph) and attacks it, judged on the int8 graph. Without init, or
// without a dataset, the study is refused naming what is missing.
TEST(StudyCli, AGraphModelTrainsQuantizesAndIsAttackedJudgedOnItsInt8Graph) {
  const fs::path d = fresh_dir("study_graph");
  ModelArgs a;
  a.graph = R"({"input": "x", "input_shape": [1, 28, 28], "num_classes": 10, "output": "y", "nodes": [
    {"name": "c1", "op": "conv2d", "inputs": ["x"], "output": "c1", "out_channels": 4, "kernel": [3, 3], "stride": [2, 2], "pads": [1, 1, 1, 1]},
    {"name": "b1", "op": "batchnorm", "inputs": ["c1"], "output": "b1"},
    {"name": "r1", "op": "relu", "inputs": ["b1"], "output": "r1"},
    {"name": "dw", "op": "conv2d", "inputs": ["r1"], "output": "dw", "out_channels": 4, "kernel": [3, 3], "groups": 4, "pads": [1, 1, 1, 1]},
    {"name": "sum", "op": "add", "inputs": ["r1", "dw"], "output": "sum"},
    {"name": "gap", "op": "global_avg_pool", "inputs": ["sum"], "output": "g"},
    {"name": "fl", "op": "flatten", "inputs": ["g"], "output": "f"},
    {"name": "fc", "op": "dense", "inputs": ["f"], "output": "y", "units": 10}]})";
  Model m = build_model(kGraphModelName, Policy::torch(), 3, a);
  save_model((d / "g.dlm").string(), m, nlohmann::json::object());
  const std::string spec = std::string(R"(study: cli-graph
defaults: {limit: 300}
steps:
  train:
    do: train
    set: {model: graph, init: )") + (d / "g.dlm").string() + R"(, dataset: fashion-mnist, epochs: 1, batch: 64}
  int8:
    do: quantize
    needs: train
    set: {scheme: torch_qnnpack, calib: 100}
  fgsm:
    do: attack
    needs: [train, int8]
    set: {attack: fgsm, eps: 0.1, limit: 100}
)";
  write(d / "s.yaml", spec);
  auto r = run_driftlab("study run " + (d / "s.yaml").string() + " --out " + (d / "out").string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("3 cells: 0 done before, 3 run now"), std::string::npos) << r.out;
  const std::string q = "study query " + (d / "out").string() + " ";
  r = run_driftlab(q + "\"SELECT step, count(*) FROM cells WHERE state = 'done' GROUP BY step ORDER BY step\"");
  EXPECT_EQ(r.out, "step\tcount(*)\nfgsm\t1\nint8\t1\ntrain\t1\n");
  // the attack's results name the int8 model it was judged on
  bool judged = false;
  for (const auto& [hash, v] : results_of(d / "out"))
    if (v.first.find("\"attack\"") != std::string::npos && v.first.find("int8") != std::string::npos) judged = true;
  EXPECT_TRUE(judged);
  // an int8 graph file the CLI reads back: its predictions on the test split
  std::string int8_model;
  for (const auto& e : fs::recursive_directory_iterator(d / "out" / "cells"))
    if (e.path().filename() == "model.dlm" && read(e.path()).find("quantized") != std::string::npos) int8_model = e.path().string();
  ASSERT_FALSE(int8_model.empty());
  r = run_driftlab("eval --weights " + int8_model + " --limit 100");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("accuracy"), std::string::npos) << r.out;

  std::string no_dataset = spec;
  no_dataset.erase(no_dataset.find(", dataset: fashion-mnist"), std::string(", dataset: fashion-mnist").size());
  write(d / "s2.yaml", no_dataset);
  r = run_driftlab("study run " + (d / "s2.yaml").string() + " --out " + (d / "out2").string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("model graph has no default dataset"), std::string::npos) << r.out;
  std::string no_init = spec;
  no_init.replace(no_init.find("init: "), std::string("init: ").size() + (d / "g.dlm").string().size(), "epochs: 1");
  no_init.replace(no_init.find(", epochs: 1, batch"), std::string(", epochs: 1, batch").size(), ", batch");
  write(d / "s3.yaml", no_init);
  r = run_driftlab("study run " + (d / "s3.yaml").string() + " --out " + (d / "out3").string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--model graph needs --init"), std::string::npos) << r.out;
  fs::remove_all(d);
}

}  // namespace
}  // namespace driftlab
