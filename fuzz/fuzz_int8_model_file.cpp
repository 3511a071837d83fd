// int8 model files (quant/model_io.cpp load_any_model: the model-file reader, the int8 network
// rebuilt from the policy and metadata, each layer's op params re-resolved from the stored scales,
// zero points and biases, which are validated: docs/MODEL_FORMAT.md step 5). Read twice as
// fuzz_model_file reads (as is, and CRC-fixed), then, on success, one forward pass of a zero input
// through the int8 layers (instrumented; the kernels they call are not, docs/RELIABILITY.md, so a
// signed overflow inside a kernel goes unseen here: the loader's checks are what this tests).
#include <sstream>

#include "engine/layers/layer.h"
#include "fuzz/fuzz_common.h"
#include "models/model_file.h"
#include "quant/model_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  fuzz_with_fixed_crc(fuzz_bytes(data, size), container_crc32, [](const std::string& b) {
    std::istringstream in(b);
    LoadedModel m = quant::load_any_model(in, "fuzz.dlm");
    Shape shape{1};
    shape.insert(shape.end(), m.model.input_shape.begin(), m.model.input_shape.end());
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    m.model.forward(ctx, Tensor::zeros(shape, m.model.dtype()));
  });
  return 0;
}
