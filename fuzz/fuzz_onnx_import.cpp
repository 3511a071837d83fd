// ONNX import (convert/onnx_import.cpp) through import_onnx_bytes: any bytes are either refused with
// a driftlab::Error or give a zoo model whose logits on a zero input are finite-shaped (one row of
// num_classes). The seeds are driftlab's own exports (a mapped graph and a refused one).
#include "convert/onnx_import.h"
#include "engine/train/cpu_runner.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  fuzz_one([&] {
    convert::OnnxImport im = convert::import_onnx_bytes(fuzz_bytes(data, size), "fuzz.onnx");
    Shape s{1};
    s.insert(s.end(), im.model.input_shape.begin(), im.model.input_shape.end());
    CpuRunner runner(im.model);
    const Tensor y = runner.logits(Tensor(s, DType::f32));
    fuzz_require(y.rank() == 2 && y.dim(0) == 1 && y.dim(1) == im.model.num_classes, "onnx import: logits shape");
  });
  return 0;
}
