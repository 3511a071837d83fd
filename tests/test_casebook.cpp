// The casebook (driftlab/casebook.h, docs/casebook/): every case's symptom shows under the
// reporter's setting and is gone with its knob(s) flipped; every case has its page and a row in
// the casebook's index; `driftlab case` runs them and refuses an unknown name by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "driftlab/casebook.h"
#include "tests/cli/cli_util.h"

namespace driftlab {
namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

const std::filesystem::path kDocs = std::filesystem::path(DRIFTLAB_SOURCE_DIR) / "docs" / "casebook";

class Casebook : public ::testing::TestWithParam<std::string> {};

TEST_P(Casebook, SymptomUnderTheReportersSettingGoneWithTheKnobFlipped) {
  const CaseRun r = run_case(GetParam());
  std::cout << case_report(r);
  EXPECT_GT(r.result.reporter, r.info->present_above) << GetParam() << ": the symptom does not show";
  EXPECT_LE(r.result.flipped, r.info->gone_at_most) << GetParam() << ": the knob does not remove it";
  // the setting is stated; the thread is a real owner/repo#number form
  EXPECT_NE(r.info->thread.find('#'), std::string::npos);
  EXPECT_NE(r.info->thread.find('/'), std::string::npos);
  EXPECT_FALSE(r.info->quote.empty());
  EXPECT_FALSE(r.info->fix.empty());
}

TEST_P(Casebook, HasItsPageNamingTheThreadAndTheCommand) {
  const CaseInfo& c = case_named(GetParam());
  const std::filesystem::path page = kDocs / (c.name + ".md");
  ASSERT_TRUE(std::filesystem::exists(page)) << page;
  const std::string text = read_text(page);
  EXPECT_NE(text.find(c.thread), std::string::npos) << page << " does not name " << c.thread;
  EXPECT_NE(text.find("driftlab case run " + c.name), std::string::npos) << page << " does not give its command";
}

std::vector<std::string> case_names() {
  std::vector<std::string> v;
  for (const CaseInfo& c : casebook()) v.push_back(c.name);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, Casebook, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

// docs/casebook/README.md lists every case, and its count by area is the registry's.
TEST(CasebookIndex, ListsEveryCaseAndCountsThemByArea) {
  const std::string index = read_text(kDocs / "README.md");
  std::map<std::string, int> by_area;
  for (const CaseInfo& c : casebook()) {
    ++by_area[c.area];
    EXPECT_NE(index.find("(" + c.name + ".md)"), std::string::npos) << c.name << " is not in docs/casebook/README.md";
  }
  for (const auto& [area, n] : by_area)
    EXPECT_NE(index.find("| " + area + " | " + std::to_string(n) + " |"), std::string::npos)
        << "docs/casebook/README.md's count for " << area << " is not " << n;
}

TEST(CasebookCli, ListRunAndUnknownName) {
  using driftlab::cli_test::run_driftlab;
  const auto list = run_driftlab("case list");
  EXPECT_EQ(list.code, 0) << list.out;
  for (const CaseInfo& c : casebook()) EXPECT_NE(list.out.find(c.name), std::string::npos) << c.name;
  const auto one = run_driftlab("case run qnnpack-qadd-rounding");
  EXPECT_EQ(one.code, 0) << one.out;
  EXPECT_NE(one.out.find("reproduced"), std::string::npos) << one.out;
  const auto bad = run_driftlab("case run no-such-case");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("unknown case 'no-such-case'"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("keras-same-padding-stride2"), std::string::npos) << "the known cases are listed: " << bad.out;
  const auto none = run_driftlab("case run");
  EXPECT_EQ(none.code, 1) << none.out;
}

}  // namespace
}  // namespace driftlab
