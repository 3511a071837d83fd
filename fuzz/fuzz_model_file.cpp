// Model file reader (models/model_file.cpp) through its istream entry. A mutated file almost
// never carries a valid CRC-32, which would stop the fuzzer at the CRC check; so each input is
// read twice: as it is, and with its last 4 bytes replaced by the CRC of the rest, which takes
// the fuzzer past the CRC into the header and tensor checks.
#include <sstream>

#include "fuzz/fuzz_common.h"
#include "models/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  const std::string bytes = fuzz_bytes(data, size);
  fuzz_one([&] {
    std::istringstream in(bytes);
    load_model(in, "fuzz.dlm");
  });
  if (size >= 24) {
    std::string fixed = bytes.substr(0, size - 4);
    const uint32_t crc = model_file_crc32(0, fixed.data(), fixed.size());
    for (int i = 0; i < 4; ++i) fixed.push_back(static_cast<char>((crc >> (8 * i)) & 0xff));
    fuzz_one([&] {
      std::istringstream in(fixed);
      load_model(in, "fuzz.dlm");
    });
  }
  return 0;
}
