// Policy string parser (engine/policy.cpp, Policy::parse). On success the canonical string
// parses back to the same Policy (to_full_string names every knob).
#include <cstdio>

#include "engine/policy.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  Policy p;
  bool parsed = false;
  fuzz_one([&] {
    p = Policy::parse(fuzz_bytes(data, size));
    parsed = true;
  });
  if (!parsed) return 0;
  // Outside fuzz_one: an error parsing our own canonical string is a finding, not a refusal.
  std::string back_full;
  try {
    back_full = Policy::parse(p.to_string()).to_full_string();
  } catch (const Error& e) {
    std::fprintf(stderr, "fuzz: '%s' does not parse back: %s\n", p.to_string().c_str(), e.what());
    std::abort();
  }
  fuzz_require(back_full == p.to_full_string(), "policy: to_string round-trips");
  return 0;
}
