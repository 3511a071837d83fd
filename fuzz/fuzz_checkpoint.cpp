// Checkpoint reader (train/checkpoint.cpp, what `train --resume` reads) through its istream entry.
// As for the model file, each input is read twice: as it is, and with its last 4 bytes replaced
// by the CRC-32 of the rest, which takes the fuzzer past the CRC into the header, the run spec,
// the training state and the tensor table. The schedule parser (--schedule) gets the same bytes.
#include <sstream>

#include "train/checkpoint.h"
#include "engine/train/schedule.h"
#include "fuzz/fuzz_common.h"
#include "models/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  const std::string bytes = fuzz_bytes(data, size);
  fuzz_with_fixed_crc(bytes, container_crc32, [](const std::string& b) {
    std::istringstream in(b);
    read_checkpoint(in, "fuzz.dlc");
  });
  if (size < 256) {
    fuzz_one([&] {
      const ScheduleSpec s = parse_schedule(bytes);
      // What parses prints back to a string that parses to the same spec.
      fuzz_require(schedule_string(parse_schedule(schedule_string(s))) == schedule_string(s),
                   "schedule_string round trip");
    });
  }
  return 0;
}
