// The study report's tables (study/report.h) on a study folder written here with known results:
// the groups are what varies apart from seeds (an attack's train.policy included), each measure
// is mean and sample standard deviation over the group's seeds, cells without results are
// counted apart, and the CSV and Markdown say the same numbers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "study/report.h"

namespace driftlab {
namespace {

namespace fs = std::filesystem;

struct Folder {
  fs::path dir = fs::temp_directory_path() / ("driftlab_study_report_" + std::to_string(::getpid()));
  std::ofstream manifest;
  Folder() {
    fs::remove_all(dir);
    fs::create_directories(dir / "cells");
    manifest.open(dir / "manifest.jsonl");
  }
  ~Folder() { fs::remove_all(dir); }
  void cell(const std::string& hash, const std::string& step, const std::string& kind, nlohmann::json params,
            std::vector<std::string> inputs, const nlohmann::json& results, const nlohmann::json& timings = nullptr) {
    manifest << nlohmann::json{{"hash", hash}, {"step", step}, {"kind", kind}, {"params", params}, {"inputs", inputs}}
                    .dump()
             << "\n";
    fs::create_directories(dir / "cells" / hash);
    if (!results.is_null()) std::ofstream(dir / "cells" / hash / "results.json") << results.dump();
    if (!timings.is_null()) std::ofstream(dir / "cells" / hash / "timings.json") << timings.dump();
  }
};

const study::Stat& stat(const study::ReportRow& r, const std::string& m) {
  for (const study::Stat& s : r.stats)
    if (s.measure == m) return s;
  throw std::runtime_error("no measure " + m);
}

TEST(StudyReport, GroupsBySettingsAndAveragesOverSeeds) {
  Folder f;
  // train: two policies x three seeds; torch's seed 3 has no results yet.
  const double acc[2][3] = {{0.90, 0.92, 0.94}, {0.80, 0.85, -1}};
  const char* pols[2] = {"tensorflow", "torch"};
  for (int p = 0; p < 2; ++p)
    for (int s = 0; s < 3; ++s) {
      const std::string h = "t" + std::to_string(p) + std::to_string(s);
      nlohmann::json res = nullptr, times = nullptr;
      if (acc[p][s] >= 0) {
        res = {{"test", {{"accuracy", acc[p][s]}, {"loss", 1.0 - acc[p][s]}}},
               {"epochs", {{{"train_loss", 0.5}, {"train_acc", 0.8}}}}};
        times = {{"epochs", {{{"seconds", 4.0 + s}}, {{"seconds", 2.0 + s}}}}};
      }
      f.cell(h, "train", "train", {{"model", "lenet1"}, {"policy", pols[p]}, {"seed", std::to_string(s + 1)}}, {}, res,
             times);
      // an attack on each trained model (same settings): grouped by the model's policy
      if (acc[p][s] >= 0)
        f.cell("a" + h.substr(1), "fgsm", "attack", {{"attack", "fgsm"}, {"eps", "0.1"}, {"seed", "1"}}, {h},
               {{"clean_accuracy", acc[p][s]}, {"over_all", {{"success_rate", 0.5 + 0.1 * s}}}});
    }
  f.manifest.close();
  const std::vector<study::ReportTable> t = study::study_tables(f.dir.string());
  ASSERT_EQ(t.size(), 2u);
  const study::ReportTable& tr = t[0];
  EXPECT_EQ(tr.step, "train");
  EXPECT_EQ(tr.keys, std::vector<std::string>{"policy"});  // model is the same everywhere; seeds are repeats
  EXPECT_EQ(tr.cells, 6);
  EXPECT_EQ(tr.missing, 1);
  ASSERT_EQ(tr.rows.size(), 2u);
  EXPECT_EQ(tr.rows[0].values, std::vector<std::string>{"tensorflow"});
  const study::Stat& a0 = stat(tr.rows[0], "test accuracy");
  EXPECT_EQ(a0.n, 3);
  EXPECT_NEAR(a0.mean, 0.92, 1e-15);
  EXPECT_NEAR(a0.sd, 0.02, 1e-15);  // sqrt((0.02^2 + 0 + 0.02^2) / 2)
  const study::Stat& a1 = stat(tr.rows[1], "test accuracy");
  EXPECT_EQ(a1.n, 2);
  EXPECT_NEAR(a1.mean, 0.825, 1e-15);
  EXPECT_NEAR(a1.sd, std::sqrt(2 * 0.025 * 0.025), 1e-15);
  EXPECT_EQ(tr.rows[1].seeds, (std::vector<std::string>{"1", "2"}));
  // seconds per epoch: each cell's mean over its epochs (3, 4, 5 for tensorflow), then over seeds
  EXPECT_NEAR(stat(tr.rows[0], "seconds per epoch").mean, 4.0, 1e-15);
  EXPECT_NEAR(stat(tr.rows[0], "seconds per epoch").sd, 1.0, 1e-15);
  // and each cell's fastest epoch (its second: 2, 3, 4), then over seeds
  EXPECT_NEAR(stat(tr.rows[0], "seconds of the fastest epoch").mean, 3.0, 1e-15);
  EXPECT_NEAR(stat(tr.rows[0], "seconds of the fastest epoch").sd, 1.0, 1e-15);

  const study::ReportTable& at = t[1];
  EXPECT_EQ(at.keys, std::vector<std::string>{"train.policy"});  // the attack's own seed is 1 everywhere
  ASSERT_EQ(at.rows.size(), 2u);
  EXPECT_EQ(at.rows[0].seeds, (std::vector<std::string>{"1", "2", "3"}));  // the trained models' seeds
  EXPECT_NEAR(stat(at.rows[0], "success rate").mean, 0.6, 1e-15);
  EXPECT_NEAR(stat(at.rows[1], "success rate").mean, 0.55, 1e-15);

  // tensorflow against torch, paired by seed: seeds 1 and 2 (torch has no seed 3), both
  // differences positive: exact Wilcoxon over 2 pairs, p = 2 * P(R+ >= 3) = 2 * 1/4; A12 = 1.
  const std::vector<study::Comparison> cs = study::study_comparisons(t);
  const study::Comparison* acc_cmp = nullptr;
  for (const study::Comparison& c : cs)
    if (c.step == "train" && c.measure == "test accuracy") acc_cmp = &c;
  ASSERT_NE(acc_cmp, nullptr);
  EXPECT_EQ(acc_cmp->a, "tensorflow");
  EXPECT_EQ(acc_cmp->b, "torch");
  EXPECT_EQ(acc_cmp->pairs, 2);
  EXPECT_NEAR(acc_cmp->mean_a - acc_cmp->mean_b, 0.92 - 0.825, 1e-15);
  EXPECT_DOUBLE_EQ(acc_cmp->p, 0.5);
  EXPECT_DOUBLE_EQ(acc_cmp->a12, 1.0);
  EXPECT_FALSE(acc_cmp->within_spread);  // 0.095 > sqrt(0.02^2 + 0.0354^2) = 0.041
  for (const study::Comparison& c : cs) {
    EXPECT_NE(c.measure, "seconds per epoch");
    if (c.measure == "final train loss") {  // 0.5 in every cell: equal seed by seed (SciPy refuses that)
      EXPECT_EQ(c.p, 1.0);
      EXPECT_EQ(c.a12, 0.5);
      EXPECT_TRUE(c.within_spread);
    }
  }

  const std::string md = study::tables_markdown(t), csv = study::tables_csv(t);
  EXPECT_NE(md.find("| tensorflow | 0.9200 ± 0.0200 (3) |"), std::string::npos) << md;
  EXPECT_NE(md.find("6 cells, 1 without results yet"), std::string::npos) << md;
  const std::string row = "train,train,policy=torch,test accuracy,";
  const std::size_t at_row = csv.find(row);
  ASSERT_NE(at_row, std::string::npos) << csv;
  char* end = nullptr;
  EXPECT_NEAR(std::strtod(csv.c_str() + at_row + row.size(), &end), 0.825, 1e-15) << csv;
  EXPECT_NEAR(std::strtod(end + 1, &end), std::sqrt(2 * 0.025 * 0.025), 1e-15) << csv;
  EXPECT_EQ(std::string(end, 7), ",2,1;2\n") << csv;
}

}  // namespace
}  // namespace driftlab

namespace driftlab {
namespace {

// S2's comparison, by hand: three seeds where the int8 judge is fooled more than the attacked fp32
// model every time (0.3/0.4/0.5 against 0.6/0.7/0.8): the means, 3 pairs, A12 = 0 (no fp32 value
// above an int8 one), and the exact two-sided Wilcoxon p of three negative differences, 2/8. And the
// papers' layout of a table over models: a row per model, a column per measure, R last.
// A cell that failed is not "without results yet": the table names it, its seed and its error's
// first line, so that a row with fewer seeds than the others says why (S1's robustness on the
// collapsed models is such a row).
// The table's numbers: 4 decimals, 1 from 1,000 up (a model's size in bytes), 3 significant digits
// below 0.001.
TEST(StudyReport, NumbersKeepTheDigitsTheyNeed) {
  EXPECT_EQ(study::stat_text({"m", 181425.4, 0.5477, 5}), "181425.4 ± 0.5477 (5)");
  EXPECT_EQ(study::stat_text({"m", 0.8791, 0.0064, 5}), "0.8791 ± 0.0064 (5)");
  EXPECT_EQ(study::stat_text({"m", 2.42e-89, 0, 5}), "2.42e-89 ± 0.0000 (5)");
  EXPECT_EQ(study::stat_text({"m", 999.99994, 0, 1}), "999.9999 (1)");
}

TEST(StudyReport, SeedsInNumericOrder) {
  std::vector<std::string> s = {"10", "2", "1", "10/10", "2/10", "2/2", "x", "9"};
  std::stable_sort(s.begin(), s.end(), study::seed_less);
  EXPECT_EQ(s, (std::vector<std::string>{"1", "2", "2/2", "2/10", "9", "10", "10/10", "x"}));
}

TEST(StudyReport, AFailedCellIsNamedWithItsError) {
  Folder f;
  for (int s = 1; s <= 3; ++s)
    f.cell("t" + std::to_string(s), "train", "train", {{"model", "lenet1"}, {"seed", std::to_string(s)}}, {},
           s == 2 ? nlohmann::json(nullptr)
                  : nlohmann::json{{"test", {{"accuracy", 0.9}, {"loss", 0.1}}}, {"epochs", nlohmann::json::array()}});
  std::ofstream(f.dir / "cells" / "t2" / "error.txt") << "train: loss is NaN at step 7\nmore detail\n";
  f.cell("t4", "train", "train", {{"model", "lenet1"}, {"seed", "4"}}, {}, nullptr);  // not run yet
  f.manifest.close();
  const std::vector<study::ReportTable> t = study::study_tables(f.dir.string());
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].cells, 4);
  EXPECT_EQ(t[0].missing, 1);
  EXPECT_EQ(t[0].failed, std::vector<std::string>{"seed=2: train: loss is NaN at step 7"});
  const std::string md = study::tables_markdown(t);
  EXPECT_NE(md.find("4 cells, 1 without results yet, 1 failed"), std::string::npos) << md;
  EXPECT_NE(md.find("- failed: seed=2: train: loss is NaN at step 7\n"), std::string::npos) << md;
  EXPECT_NE(study::tables_json(t).find("\"seed=2: train: loss is NaN at step 7\""), std::string::npos);
}

TEST(StudyReport, RegularAgainstQuantizedAndTablesOverModels) {
  Folder f;
  const double regular[3] = {0.3, 0.4, 0.5}, quantized[3] = {0.6, 0.7, 0.8};
  for (int s = 0; s < 3; ++s) {
    const std::string seed = std::to_string(s + 1), t = "t" + seed, q = "q" + seed;
    f.cell(t, "train", "train", {{"model", "lenet5"}, {"seed", seed}}, {}, {{"test", {{"accuracy", 0.9}}}});
    f.cell(q, "tflite", "quantize", {{"scheme", "tflite"}}, {t}, {{"test", {{"accuracy", 0.9}}}});
    f.cell("a" + seed, "transfer", "attack", {{"attack", "fgsm"}}, {t, q},
           {{"over_correct_by_all", {{"success_rate", regular[s]}}}, {"judges", {{{"rate_all", quantized[s]}}}}});
    f.cell("r" + seed, "rob", "robustness", {{"attacks", "fgsm"}}, {t},
           {{"rows",
             {{{"model", "tensorflow"}, {"R", 0.0}, {"attacks", {{"fgsm", {{"mean", 0.5 + 0.1 * s}}}}}},
              {{"model", "torch"}, {"R", 1.0}, {"attacks", {{"fgsm", {{"mean", 0.7}}}}}}}}});
  }
  f.manifest.close();
  const std::vector<study::ReportTable> t = study::study_tables(f.dir.string());
  const std::vector<study::Comparison> c = study::judge_comparisons(t);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].step, "transfer");
  EXPECT_EQ(c[0].a, "the attacked model");
  EXPECT_EQ(c[0].b, "tflite");
  EXPECT_NEAR(c[0].mean_a, 0.4, 1e-12);
  EXPECT_NEAR(c[0].mean_b, 0.7, 1e-12);
  EXPECT_EQ(c[0].pairs, 3);
  EXPECT_EQ(c[0].a12, 0.0);
  EXPECT_NEAR(c[0].p, 0.25, 1e-12);
  EXPECT_FALSE(c[0].within_spread);  // |0.4 - 0.7| > sqrt(0.1^2 + 0.1^2)
  EXPECT_NE(study::comparisons_markdown(c).find("| transfer |  | success rate on the inputs all models get right | "
                                                 "the attacked model | tflite | -0.3000 | no | 3 | 0.25 | 0.00 |"),
            std::string::npos)
      << study::comparisons_markdown(c);

  const study::ReportTable* rob = nullptr;
  for (const study::ReportTable& x : t)
    if (x.step == "rob") rob = &x;
  ASSERT_NE(rob, nullptr);
  const std::vector<study::ModelTable> mt = study::model_tables(*rob);
  ASSERT_EQ(mt.size(), 1u);
  EXPECT_EQ(mt[0].models, (std::vector<std::string>{"tensorflow", "torch"}));
  EXPECT_EQ(mt[0].columns, (std::vector<std::string>{"fgsm success", "R"}));
  EXPECT_EQ(mt[0].seeds, "1, 2, 3");
  EXPECT_NEAR(mt[0].cells[0][0].mean, 0.6, 1e-12);
  EXPECT_NEAR(mt[0].cells[0][0].sd, 0.1, 1e-12);
  EXPECT_EQ(mt[0].cells[1][1].mean, 1.0);
  EXPECT_EQ(mt[0].cells[1][0].n, 3);
  EXPECT_NE(study::tables_markdown(t).find("| model | fgsm success | R |\n| --- | --- | --- |\n| tensorflow | 0.6000 ± "
                                           "0.1000 (3) | 0.0000 ± 0.0000 (3) |"),
            std::string::npos)
      << study::tables_markdown(t);
  // tables.json carries the same layout for the figures (by_model: models, columns, cells)
  const nlohmann::json js = nlohmann::json::parse(study::tables_json({*rob}));
  const nlohmann::json& bm = js[0]["rows"][0]["by_model"];
  EXPECT_EQ(bm["models"], nlohmann::json({"tensorflow", "torch"}));
  EXPECT_EQ(bm["columns"], nlohmann::json({"fgsm success", "R"}));
  EXPECT_NEAR(bm["cells"][0][0]["mean"].get<double>(), 0.6, 1e-12);
  EXPECT_EQ(bm["cells"][1][0]["n"].get<int>(), 3);
}

}  // namespace
}  // namespace driftlab

namespace driftlab {
namespace {

// S1's layout of a training table: a row per model and policy, a column per batch size (sorted as
// numbers: B-32 before B-128), each cell the group's mean and sd over seeds.
TEST(StudyReport, TrainingTablesByBatchSize) {
  Folder f;
  int h = 0;
  for (const char* policy : {"tensorflow", "torch"})
    for (const char* batch : {"128", "32"})
      for (int s = 0; s < 2; ++s)
        f.cell("t" + std::to_string(h++), "train", "train",
               {{"model", "lenet1"}, {"policy", policy}, {"batch", batch}, {"seed", std::to_string(s + 1)}}, {},
               {{"test", {{"accuracy", (batch[0] == '1' ? 0.8 : 0.9) + 0.02 * s}}}});
  f.manifest.close();
  const std::vector<study::ReportTable> t = study::study_tables(f.dir.string());
  const std::vector<study::BatchTable> b = study::batch_tables(t.at(0));
  ASSERT_EQ(b.size(), 1u);  // no timings: accuracy only
  EXPECT_EQ(b[0].measure, "test accuracy");
  EXPECT_EQ(b[0].row_keys, std::vector<std::string>{"policy"});
  EXPECT_EQ(b[0].batches, (std::vector<std::string>{"32", "128"}));
  ASSERT_EQ(b[0].rows.size(), 2u);
  EXPECT_NEAR(b[0].cells[1][0].mean, 0.91, 1e-12);  // torch, B-32: 0.90 and 0.92
  EXPECT_NEAR(b[0].cells[1][1].mean, 0.81, 1e-12);
  EXPECT_EQ(b[0].cells[0][1].n, 2);
  EXPECT_NE(study::batch_tables_markdown(t).find("| policy | B-32 | B-128 |\n| --- | --- | --- |\n| tensorflow | 0.9100 ± "
                                                 "0.0141 (2) | 0.8100 ± 0.0141 (2) |"),
            std::string::npos)
      << study::batch_tables_markdown(t);
}

}  // namespace
}  // namespace driftlab
