// Keras / TF.js layers-model import (convert/keras_import.cpp) through import_keras_bytes: the
// input is model.json's text, then (after the first NUL byte, when there is one) the shard's
// bytes. Any input is either refused with a driftlab::Error or gives a graph whose forward on a
// zero batch of one has the output shape the import reported. An architecture alone may ask for
// 64 MiB of parameters here (the CLI's bound is 1 GiB: the fuzzer's memory limit is not the
// reader's); graphs with a value over 2^20 elements per sample are not run.
// Seeds: fuzz/corpus/keras_import (docs/RELIABILITY.md says how they were made).
#include "convert/keras_import.h"
#include "fuzz/fuzz_graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  fuzz_one([&] {
    const std::string bytes = fuzz_bytes(data, size);
    const std::size_t nul = bytes.find('\0');
    const std::string text = bytes.substr(0, nul);
    const std::string weights = nul == std::string::npos ? "" : bytes.substr(nul + 1);
    convert::KerasGraph g = convert::import_keras_bytes(text, weights, "fuzz.json", "tensorflow", uint64_t{64} << 20);
    fuzz_forward_graph(*g.graph, g.input_shape, g.output_shape, "keras import: output shape");
  });
  return 0;
}
