// Model file reader (models/model_file.cpp) through its istream entry. A mutated file almost
// never carries a valid CRC-32, which would stop the fuzzer at the CRC check; so each input is
// read twice: as it is, and with its last 4 bytes replaced by the CRC of the rest, which takes
// the fuzzer past the CRC into the header and tensor checks.
#include <sstream>

#include "fuzz/fuzz_common.h"
#include "models/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  fuzz_with_fixed_crc(fuzz_bytes(data, size), container_crc32, [](const std::string& b) {
    std::istringstream in(b);
    load_model(in, "fuzz.dlm");
  });
  return 0;
}
