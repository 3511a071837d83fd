// Tests that need something outside the repository (the PyTorch and TensorFlow.js oracles, the
// real Fashion-MNIST files) skip without it, saying why: a developer's machine may lack them,
// and ctest lists such tests as skipped ("***Skipped"), not passed. CI installs all of them and
// sets DRIFTLAB_REQUIRE_ORACLES=1: there the same skip is a failure with the same reason, so a
// CI run where `import torch` breaks or the data set is gone cannot report 100% passed.
//
// To use: DRIFTLAB_SKIP_OR_REQUIRE(reason) where the test would GTEST_SKIP() << reason.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace driftlab {

// True when DRIFTLAB_REQUIRE_ORACLES is set to anything but "" or "0".
inline bool oracles_required() {
  const char* v = std::getenv("DRIFTLAB_REQUIRE_ORACLES");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

}  // namespace driftlab

// Skips the test with the reason, or fails it with the reason where DRIFTLAB_REQUIRE_ORACLES is
// set. Returns from the test body either way.
#define DRIFTLAB_SKIP_OR_REQUIRE(reason_expr)                                                    \
  do {                                                                                           \
    const std::string dl_why_ = (reason_expr);                                                   \
    if (::driftlab::oracles_required())                                                          \
      GTEST_FAIL() << dl_why_ << " [DRIFTLAB_REQUIRE_ORACLES is set: a missing oracle or data " \
                                 "set fails instead of skipping]";                               \
    GTEST_SKIP() << dl_why_;                                                                     \
  } while (0)
