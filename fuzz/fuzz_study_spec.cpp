// Study spec reader (study/spec.cpp, parse_spec) and the planner on what it accepts: a spec that
// parses must plan or be refused with driftlab::Error (an ambiguous need), every cell hash is 16
// hex digits and unique, and inputs come before the cells that need them.
#include <set>

#include "fuzz/fuzz_common.h"
#include "study/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  if (size > 4096) return 0;  // a spec is a page; longer inputs only slow the search down
  fuzz_one([&] {
    const study::Spec spec = study::parse_spec(fuzz_bytes(data, size), "fuzz.yaml");
    const study::Plan p = study::plan(spec, "fuzz", 4096);  // larger plans are refused (an Error)
    std::set<std::string> hashes;
    for (std::size_t i = 0; i < p.cells.size(); ++i) {
      fuzz_require(p.cells[i].hash.size() == 16, "study: a hash is 16 hex digits");
      hashes.insert(p.cells[i].hash);
      for (std::size_t in : p.cells[i].inputs) fuzz_require(in < i, "study: inputs come first");
    }
    fuzz_require(hashes.size() == p.cells.size(), "study: every cell's hash is its own");
  });
  return 0;
}
