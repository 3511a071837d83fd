// Helpers for tests of readers and writers: a scratch folder per test, and the check that a
// call throws one driftlab::Error whose one-line message names what it must (the file, the
// parameter, the offset). Header-only.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>

#include "core/error.h"

namespace driftlab {

// A fresh folder <tmp>/driftlab_<pid>_<suite>_<test>, removed at the end of the test.
struct ScratchDir {
  std::filesystem::path dir;
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir = std::filesystem::temp_directory_path() /
          ("driftlab_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

// Passes when f throws driftlab::Error whose single-line message contains every part.
inline ::testing::AssertionResult throws_error_with(const std::function<void()>& f,
                                                    std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts)
      if (msg.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message \"" << msg << "\" lacks \"" << p << "\"";
    if (msg.find('\n') != std::string::npos)
      return ::testing::AssertionFailure() << "message is not one line: \"" << msg << "\"";
    return ::testing::AssertionSuccess() << msg;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-driftlab exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "nothing was thrown";
}

}  // namespace driftlab
