// ONNX graph import (convert/onnx_graph_import.cpp) through import_onnx_graph_bytes: any bytes
// are either refused with a driftlab::Error or give a graph whose forward on a zero batch of one
// has the output shape the import reported. Graphs whose values would exceed 2^20 elements per
// sample are not run (a valid graph may be large; the fuzzer's memory limit is not the reader's).
// Seeds: ONNX's node-test models of the imported ops (fuzz/corpus/onnx_graph_import, written by
// tests/onnx_node/generate.sh; docs/RELIABILITY.md).
#include "convert/onnx_graph_import.h"
#include "fuzz/fuzz_graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  fuzz_one([&] {
    convert::OnnxGraph g = convert::import_onnx_graph_bytes(fuzz_bytes(data, size), "fuzz.onnx");
    fuzz_forward_graph(*g.graph, g.input_shape, g.output_shape, "onnx graph import: output shape");
  });
  return 0;
}
