// Static int8 quantization of graph models (quant/graph_ptq.h; the grouped qconv2d kernel:
// tests/ops/test_quant_kernels.cpp QuantConv.GroupedIsItsGroupsConvolvedApart): the zoo's LeNet-1,
// LeNet-5 and VGG-16 exported to ONNX and imported as graphs quantize to the zoo's own int8 bits
// under every scheme (the zoo's int8 is PyTorch's and
// ONNX Runtime's bit for bit: tests/oracles); int8 graphs round-trip through the model file;
// nodes with no int8 form are refused by name. PyTorch's quantizable torchvision models:
// tests/oracles/test_quant_graph_oracle_torch.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "convert/onnx_export.h"
#include "convert/onnx_graph_import.h"
#include "core/error.h"
#include "engine/layers/graph_layer.h"
#include "engine/layers/visit.h"
#include "models/graph.h"
#include "models/model_file.h"
#include "models/models.h"
#include "quant/model_io.h"
#include "quant/ptq.h"
#include "quant/qlayers.h"
#include "quant/report.h"
#include "tests/model_test_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

Tensor logits(Model& m, const Tensor& x) {
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  return m.forward(ctx, x);
}

// The zoo model exported to ONNX by driftlab and imported back as a graph (convert/onnx_export.h,
// convert/onnx_graph_import.h).
Model as_graph(Model& zoo) {
  const convert::OnnxExport e = convert::export_onnx(zoo, {});
  convert::OnnxGraph g = convert::import_onnx_graph_bytes(e.bytes, zoo.name + ".onnx");
  return convert::onnx_graph_model(std::move(g), "torch");
}

// The same network quantized as a zoo Sequential and as an imported graph: the same points (the
// graph's named by node), the same scales and zero points from the same calibration, and the same
// integer activations and logits, bit for bit, under every scheme.
TEST(QuantGraph, ImportedZooModelsQuantizeToTheZoosBits) {
  for (const char* arch : {"lenet1", "lenet5", "vgg16"}) {
    Model zoo = build_model(arch, Policy::torch(), 5);
    const bool cifar = std::string(arch) == "vgg16";
    if (cifar) randomise_running_stats(zoo, 50);
    Model g = as_graph(zoo);
    const Shape in = zoo.input_shape;
    Shape cs = in, xs = in;
    cs.insert(cs.begin(), 16);
    xs.insert(xs.begin(), 5);
    const Tensor calib = random_tensor(cs, DType::f32, 51, cifar ? -1.0 : 0.0, 1.0);
    const Tensor x = random_tensor(xs, DType::f32, 52, cifar ? -1.0 : 0.0, 1.0);
    for (const char* t : {"tflite", "torch_qnnpack", "torch_onednn", "ort"}) {
      SCOPED_TRACE(std::string(arch) + " " + t);
      const Policy p = Policy::parse(std::string("torch,quant_scheme=") + t);
      quant::PtqOptions o;
      o.calib_batch = 8;
      quant::PtqResult rz = quant::quantize_model(zoo, p, calib, o);
      quant::PtqResult rg = quant::quantize_model(g, p, calib, o);
      ASSERT_EQ(rg.points.size(), rz.points.size());
      for (std::size_t i = 0; i < rz.points.size(); ++i) {
        EXPECT_EQ(rg.points[i].q.scale, rz.points[i].q.scale) << rz.points[i].name << " / " << rg.points[i].name;
        EXPECT_EQ(rg.points[i].q.zero_point, rz.points[i].q.zero_point) << rz.points[i].name;
      }
      const std::vector<Tensor> az = quant::int8_activations(rz.model, x), ag = quant::int8_activations(rg.model, x);
      ASSERT_EQ(ag.size(), az.size());
      for (std::size_t i = 0; i < az.size(); ++i) EXPECT_TRUE(bitwise_equal(ag[i], az[i])) << rz.points[i].name;
      EXPECT_TRUE(bitwise_equal(logits(rg.model, x), logits(rz.model, x)));
    }
  }
}

// A small graph with every int8 graph node kind: conv + BatchNorm + ReLU, a depthwise conv, an
// add of two values with its ReLU fused, max pooling, global average pooling, flatten, dense.
const char* kBlockSpec = R"({"input": "x", "input_shape": [4, 8, 8], "num_classes": 3, "output": "y", "nodes": [
  {"name": "c1", "op": "conv2d", "inputs": ["x"], "output": "c1", "out_channels": 8, "kernel": [3, 3], "pads": [1, 1, 1, 1]},
  {"name": "b1", "op": "batchnorm", "inputs": ["c1"], "output": "b1"},
  {"name": "r1", "op": "relu", "inputs": ["b1"], "output": "r1"},
  {"name": "dw", "op": "conv2d", "inputs": ["r1"], "output": "dw", "out_channels": 8, "kernel": [3, 3], "groups": 8,
   "pads": [1, 1, 1, 1]},
  {"name": "b2", "op": "batchnorm", "inputs": ["dw"], "output": "b2"},
  {"name": "sum", "op": "add", "inputs": ["r1", "b2"], "output": "sum"},
  {"name": "r2", "op": "relu", "inputs": ["sum"], "output": "r2"},
  {"name": "mp", "op": "maxpool", "inputs": ["r2"], "output": "mp", "kernel": [2, 2], "stride": [2, 2]},
  {"name": "gap", "op": "global_avg_pool", "inputs": ["mp"], "output": "gap"},
  {"name": "fl", "op": "flatten", "inputs": ["gap"], "output": "fl"},
  {"name": "fc", "op": "dense", "inputs": ["fl"], "output": "y", "units": 3}]})";

Model block_model() {
  ModelArgs a;
  a.graph = kBlockSpec;
  Model m = build_model(kGraphModelName, Policy::torch(), 8, a);
  randomise_running_stats(m, 9);
  return m;
}

// Each node kind becomes its int8 node (BatchNorm folded, ReLU fused into the conv and the add);
// the points are the input, the convs, the add and the dense; the int8 logits follow fp32's; the
// model file round-trips the int8 graph bit for bit.
TEST(QuantGraph, BlockQuantizesRoundTripsAndFollowsFp32) {
  Model m = block_model();
  const Tensor calib = random_tensor({16, 4, 8, 8}, DType::f32, 60);
  const Tensor x = random_tensor({6, 4, 8, 8}, DType::f32, 61);
  const Tensor ref = logits(m, x);
  for (const char* t : {"tflite", "torch_qnnpack", "torch_onednn", "ort"}) {
    SCOPED_TRACE(t);
    const Policy p = Policy::parse(std::string("torch,quant_scheme=") + t);
    quant::PtqResult r = quant::quantize_model(m, p, calib);
    std::vector<std::string> names;
    for (const auto& pt : r.points) names.push_back(pt.name);
    std::vector<std::string> want{"input", "0.graph.r1", "0.graph.b2", "0.graph.r2", "0.graph.fc"};
    if (std::string(t) == "ort" || std::string(t) == "tflite") want.insert(want.end() - 1, "0.graph.gap");
    EXPECT_EQ(names, want);
    auto* g = layer_as<GraphLayer>(r.model.net->layer(1));
    ASSERT_NE(g, nullptr);
    std::vector<std::string> kinds;
    for (std::size_t i = 0; i < g->num_nodes(); ++i) kinds.push_back(g->node(i).layer ? g->node(i).layer->kind() : "");
    EXPECT_EQ(kinds, (std::vector<std::string>{"qconv2d", "qconv2d", "qadd", "qmaxpool2d", "qglobal_avg_pool",
                                               "flatten", "qdense"}));
    const Tensor y = logits(r.model, x);
    double worst = 0, range = 0;
    for (int64_t i = 0; i < y.numel(); ++i) {
      worst = std::max(worst, std::fabs(y.at(i) - ref.at(i)));
      range = std::max(range, std::fabs(ref.at(i)));
    }
    std::cout << t << ": max |int8 - fp32| " << worst << " of max |logit| " << range << "\n";
    // five requantized points of 8 bits each: a few percent of the logits' scale, far from the 100%
    // a wrong wiring (a swapped add input's scale, an unfolded BatchNorm) gives
    EXPECT_LT(worst, 0.1 * range);
    const std::string path = (std::filesystem::temp_directory_path() / ("qg_" + std::to_string(::getpid()) + ".dlm")).string();
    quant::save_quantized_model(path, r.model, nlohmann::json::object(), {{"scheme", t}});
    LoadedModel lm = quant::load_any_model(path);
    std::filesystem::remove(path);
    EXPECT_TRUE(bitwise_equal(logits(lm.model, x), y));
    // the same integers with the scales and zero points given instead of calibrated
    quant::PtqOptions given;
    for (const auto& pt : r.points) given.qparams.push_back(pt.q);
    quant::PtqResult r2 = quant::quantize_model(m, p, Tensor(), given);
    EXPECT_TRUE(bitwise_equal(logits(r2.model, x), y));
    given.qparams.pop_back();
    EXPECT_THROW(quant::quantize_model(m, p, Tensor(), given), Error);
  }
}

// Nodes with no int8 form are refused naming the node (and, for ReLU6, the way out).
TEST(QuantGraph, NodesWithNoInt8FormAreRefusedByName) {
  auto refusal = [](const std::string& spec) {
    ModelArgs a;
    a.graph = spec;
    Model m = build_model(kGraphModelName, Policy::torch(), 8, a);
    try {
      quant::quantize_model(m, Policy::parse("torch,quant_scheme=torch_qnnpack"), random_tensor({4, 2, 4, 4}, DType::f32, 1));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string head = R"({"input": "x", "input_shape": [2, 4, 4], "num_classes": 2, "output": "y", "nodes": [
    {"name": "c", "op": "conv2d", "inputs": ["x"], "output": "c", "out_channels": 2, "kernel": [1, 1]},)";
  const std::string tail = R"(
    {"name": "gap", "op": "global_avg_pool", "inputs": ["z"], "output": "g"},
    {"name": "fl", "op": "flatten", "inputs": ["g"], "output": "f"},
    {"name": "fc", "op": "dense", "inputs": ["f"], "output": "y", "units": 2}]})";
  std::string e = refusal(head + R"({"name": "six", "op": "clip", "inputs": ["c"], "output": "z", "min": 0, "max": 6},)" + tail);
  EXPECT_NE(e.find("graph node 'six' (clip)"), std::string::npos) << e;
  EXPECT_NE(e.find("ReLU6"), std::string::npos) << e;
  e = refusal(head + R"({"name": "cat", "op": "concat", "inputs": ["c", "x"], "output": "z", "axis": 1},)" + tail);
  EXPECT_NE(e.find("graph node 'cat' (concat) has no int8 form yet"), std::string::npos) << e;
  e = refusal(head + R"({"name": "m", "op": "mul", "inputs": ["c", "x"], "output": "z"},)" + tail);
  EXPECT_NE(e.find("graph node 'm' (mul) has no int8 form yet"), std::string::npos) << e;
}

}  // namespace
}  // namespace driftlab
