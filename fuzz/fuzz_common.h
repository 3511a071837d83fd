// What every fuzz target shares: run one reader on the fuzzer's bytes and accept exactly one
// outcome besides success, driftlab::Error (the library's error type for bad bytes). Anything
// else — another exception type, a crash, a sanitizer report, a leak, an allocation over
// libFuzzer's -malloc_limit_mb — is a finding (docs/RELIABILITY.md, "Fuzzing").
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/core/error.h"

namespace driftlab {

template <typename F>
void fuzz_one(F&& f) {
  try {
    f();
  } catch (const Error&) {
    // bad bytes refused by name: the expected outcome for most inputs
  }
}

// A property the reader promises on success; its failure aborts, which libFuzzer reports.
inline void fuzz_require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz: property violated: %s\n", what);
    std::abort();
  }
}

inline std::string fuzz_bytes(const uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

}  // namespace driftlab
