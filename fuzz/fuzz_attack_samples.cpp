// The label column of an attack folder's samples.csv as `driftlab convert --adversarial` reads it
// (driftlab/convert.h read_attack_labels): what it accepts is a list of class indices of the model
// (10 classes here), one per data line.
#include <sstream>

#include "driftlab/convert.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  fuzz_one([&] {
    const std::string text = fuzz_bytes(data, size);
    std::istringstream in(text);
    const std::vector<int32_t> labels = read_attack_labels(in, "fuzz/samples.csv", 10);
    for (int32_t l : labels) fuzz_require(l >= 0 && l < 10, "samples.csv: a label is a class index");
    std::size_t lines = 0;
    for (char c : text) lines += c == '\n';
    fuzz_require(labels.size() <= lines, "samples.csv: at most one label per data line");
  });
  return 0;
}
