// Policy string parser (engine/policy.cpp, Policy::parse). On success the canonical string
// parses back to the same Policy (to_full_string names every knob).
#include "engine/policy.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  fuzz_one([&] {
    const Policy p = Policy::parse(fuzz_bytes(data, size));
    const Policy back = Policy::parse(p.to_string());
    fuzz_require(back.to_full_string() == p.to_full_string(), "policy: to_string round-trips");
  });
  return 0;
}
