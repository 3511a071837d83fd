// DRIFTLAB_SKIP_OR_REQUIRE (tests/require_util.h): a missing oracle or data set skips the test
// on a developer's machine and fails it, with the same reason, where DRIFTLAB_REQUIRE_ORACLES is
// set (CI).
#include <gtest/gtest-spi.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "tests/require_util.h"

namespace driftlab {
namespace {

// Sets DRIFTLAB_REQUIRE_ORACLES (or unsets it: nullopt) for one scope, then restores it.
class RequireEnv {
 public:
  explicit RequireEnv(std::optional<std::string> value) {
    if (const char* old = std::getenv(kName)) old_ = old;
    if (value) ::setenv(kName, value->c_str(), 1);
    else ::unsetenv(kName);
  }
  ~RequireEnv() {
    if (old_) ::setenv(kName, old_->c_str(), 1);
    else ::unsetenv(kName);
  }

 private:
  static constexpr const char* kName = "DRIFTLAB_REQUIRE_ORACLES";
  std::optional<std::string> old_;
};

// Runs one skip site with gtest's result reporter intercepted, so that its skip or failure is
// returned here instead of ending the test that checks it.
struct SiteResult {
  bool reached_after = false;  // the site did not return from the function
  ::testing::TestPartResultArray results;
};
void run_site(SiteResult* r) {
  ::testing::ScopedFakeTestPartResultReporter intercept(
      ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &r->results);
  [r] {
    DRIFTLAB_SKIP_OR_REQUIRE(std::string("PyTorch oracle not installed: ") + "test reason");
    r->reached_after = true;
  }();
}

TEST(RequireOracles, ValuesThatTurnItOn) {
  {
    RequireEnv env{std::nullopt};
    EXPECT_FALSE(oracles_required());
  }
  for (const char* off : {"", "0"}) {
    RequireEnv env{std::string(off)};
    EXPECT_FALSE(oracles_required()) << "'" << off << "'";
  }
  for (const char* on : {"1", "yes"}) {
    RequireEnv env{std::string(on)};
    EXPECT_TRUE(oracles_required()) << "'" << on << "'";
  }
}

TEST(RequireOracles, MissingOracleSkipsWithItsReasonByDefault) {
  RequireEnv env{std::nullopt};
  SiteResult r;
  run_site(&r);
  EXPECT_FALSE(r.reached_after);
  ASSERT_EQ(r.results.size(), 1);
  EXPECT_TRUE(r.results.GetTestPartResult(0).skipped());
  EXPECT_STREQ(r.results.GetTestPartResult(0).message(), "PyTorch oracle not installed: test reason");
}

TEST(RequireOracles, MissingOracleFailsWithItsReasonWhenRequired) {
  RequireEnv env{std::string("1")};
  SiteResult r;
  run_site(&r);
  EXPECT_FALSE(r.reached_after);
  ASSERT_EQ(r.results.size(), 1);
  EXPECT_TRUE(r.results.GetTestPartResult(0).fatally_failed());  // gtest puts "Failed\n" first
  EXPECT_THAT(std::string(r.results.GetTestPartResult(0).message()),
              ::testing::HasSubstr("PyTorch oracle not installed: test reason [DRIFTLAB_REQUIRE_ORACLES is set"));
}

}  // namespace
}  // namespace driftlab
