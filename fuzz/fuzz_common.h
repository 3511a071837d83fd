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

#include "core/error.h"

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

// For a file whose last 4 bytes are the CRC-32 of the rest (model file, checkpoint): calls read
// on the bytes as they are and, when there are at least 24, with that CRC made right, which
// takes the fuzzer past the CRC check (a mutated file almost never carries a valid one) into the
// reader's header and tensor checks. crc32(seed, data, n) is the format's CRC.
template <typename Crc, typename Read>
void fuzz_with_fixed_crc(const std::string& bytes, Crc&& crc32, Read&& read) {
  fuzz_one([&] { read(bytes); });
  if (bytes.size() < 24) return;
  std::string fixed = bytes.substr(0, bytes.size() - 4);
  const uint32_t crc = crc32(0, fixed.data(), fixed.size());
  for (int i = 0; i < 4; ++i) fixed.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
  fuzz_one([&] { read(fixed); });
}

}  // namespace driftlab
