// ONNX export of graph models (convert/onnx_export.cpp emit_graph): a graph of every node kind the
// importer reads (grouped and depthwise conv, BatchNorm, clip, ReLU, max and padded average pools,
// add/sub/mul with broadcast constants, concat, reshape, flatten, global average pool, dense)
// written as ONNX, passing ONNX's checker, and read back by the ONNX graph importer computes the
// same logits. ONNX Runtime on exported graphs: tests/oracles/test_graph_oracle_torch.cpp
// (OrtGraph.ExportedGraphsRunInOnnxRuntime).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "convert/onnx_export.h"
#include "convert/onnx_graph_import.h"
#include "engine/layers/all.h"
#include "engine/random.h"
#include "engine/train/cpu_runner.h"
#include "models/graph.h"
#include "tests/oracles/oracle_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

using nlohmann::json;

const char* kSpec = R"({
  "input": "x", "input_shape": [4, 7, 7],
  "constants": [{"name": "scale", "shape": [1, 8, 1, 1]}, {"name": "shift", "shape": [7]}],
  "nodes": [
    {"name": "c1", "op": "conv2d", "inputs": ["x"], "output": "a", "out_channels": 8, "kernel": [3, 3],
     "pads": [1, 1, 0, 2], "groups": 2, "flip": false},
    {"name": "bn", "op": "batchnorm", "inputs": ["a"], "output": "b", "eps": 0.001},
    {"name": "r6", "op": "clip", "inputs": ["b"], "output": "c", "min": 0, "max": 6},
    {"name": "dw", "op": "conv2d", "inputs": ["c"], "output": "d", "out_channels": 8, "kernel": [3, 3],
     "pads": [1, 1, 1, 1], "groups": 8, "flip": false},
    {"name": "res", "op": "add", "inputs": ["d", "a"], "output": "e"},
    {"name": "sc", "op": "mul", "inputs": ["e", "scale"], "output": "f"},
    {"name": "sh", "op": "sub", "inputs": ["a", "shift"], "output": "g"},
    {"name": "relu", "op": "relu", "inputs": ["g"], "output": "h"},
    {"name": "cat", "op": "concat", "inputs": ["f", "h"], "axis": 1, "output": "i"},
    {"name": "mp", "op": "maxpool", "inputs": ["i"], "output": "j", "kernel": [3, 3], "stride": [2, 2],
     "pads": [1, 1, 1, 1]},
    {"name": "ap", "op": "avgpool", "inputs": ["j"], "output": "k", "kernel": [2, 2], "stride": [2, 2],
     "pads": [1, 0, 1, 0], "count_include_pad": false},
    {"name": "gap", "op": "global_avg_pool", "inputs": ["k"], "output": "l"},
    {"name": "flat", "op": "flatten", "inputs": ["k"], "output": "m", "order": "chw"},
    {"name": "fc1", "op": "dense", "inputs": ["m"], "output": "n", "units": 16},
    {"name": "rs", "op": "reshape", "inputs": ["n"], "output": "o", "shape": [16]},
    {"name": "cat2", "op": "concat", "inputs": ["o", "l"], "axis": 1, "output": "p"},
    {"name": "fc2", "op": "dense", "inputs": ["p"], "output": "y", "units": 5}
  ]})";

TEST(GraphExport, EveryImportedNodeKindRoundTripsThroughOnnx) {
  const Policy p = Policy::torch();
  Rng rng(p.rng_engine, 11);
  Model m;
  m.name = kGraphModelName;
  m.policy = p;
  m.graph = json::parse(kSpec).dump();
  build_graph_model(m, rng);
  // non-trivial constants and BatchNorm statistics (the spec builds them zero / identity)
  GraphLayer& g = *layer_as<GraphLayer>(m.net->layer(0));
  const_cast<Tensor&>(g.constant(g.find_value("scale"))) = random_tensor({1, 8, 1, 1}, DType::f32, 5, 0.5, 1.5);
  const_cast<Tensor&>(g.constant(g.find_value("shift"))) = random_tensor({7}, DType::f32, 6, -0.3, 0.3);
  auto* bn = layer_as<BatchNormLayer>(*g.node(1).layer);
  bn->running_state()[0]->value = random_tensor({8}, DType::f32, 7, -0.2, 0.2);
  bn->running_state()[1]->value = random_tensor({8}, DType::f32, 8, 0.5, 1.5);
  bn->params()[0]->value = random_tensor({8}, DType::f32, 9, 0.5, 1.5);

  const convert::OnnxExport ex = convert::export_onnx(m, convert::OnnxExportOptions{});  // ONNX's checker passes it (export checks)
  convert::OnnxGraph back = convert::import_onnx_graph_bytes(ex.bytes, "exported.onnx");
  Model m2 = convert::onnx_graph_model(std::move(back), "torch");
  const Tensor x = random_tensor({3, 4, 7, 7}, DType::f32, 12, -1.0, 1.0);
  CpuRunner r1(m), r2(m2);
  const oracle::LogitAgreement a = oracle::logit_agreement(r1.logits(x), r2.logits(x));
  std::cout << "graph -> ONNX -> graph: max |d| / max |logit| = " << a.rel << "\n";
  // the same kernels on the same weights; BatchNorm goes out as BatchNormalization and comes back
  // (the same formula), so only the importer's shortest-decimal epsilon could move a value: 1e-6
  EXPECT_LE(a.rel, 1e-6);
  EXPECT_EQ(a.flips, 0);
}

}  // namespace
}  // namespace driftlab
