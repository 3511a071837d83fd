// Keras / TF.js layers-model import (convert/keras_import.h): the zoo's models as
// `driftlab export --format tfjs` writes them read back as graph models compute the zoo model's
// logits; Keras 2 and Keras 3 functional configs, Sequential models, architecture-only files;
// what the file states frozen and what it leaves to the Policy; refusals naming the layer.
// TF.js itself as the oracle on a hand-written Keras graph: tests/oracles/test_keras_import_tfjs.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "convert/keras_import.h"
#include "convert/tfjs_export.h"
#include "engine/layers/all.h"
#include "engine/train/cpu_runner.h"
#include "models/graph.h"
#include "models/models.h"
#include "tests/oracles/oracle_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

using nlohmann::json;

Tensor logits_of(Model& m, const Tensor& x) {
  CpuRunner runner(m);
  return runner.logits(x);
}

// The zoo's models (random weights and BatchNorm statistics) exported as TF.js layers models under
// each preset, imported back under the same preset: the graph computes the zoo model's logits
// (the LSTM/GRU classifiers too: Keras's gate columns back to the layer's layout, the two PyTorch
// LSTM biases that the export sums read back as one).
// Bound: 1e-6 of the largest |logit|: the same kernels on the same products; the graph's
// convolutions read the exported (rotated, transposed) weights with flip frozen off, and a flip
// by index and a rotated copy sum the same products in the same order, but the residual blocks'
// option-A shortcut becomes a 1x1 pool and a 0/1 convolution (exact) and BatchNorm's Lasagne
// statistics a variance (theano: 1/s^2 - eps, then back), one rounding each.
TEST(KerasImport, TheZoosTfjsExportsReadBackComputeTheZoosLogits) {
  struct Case {
    const char* arch;
    const char* preset;
    Shape x;
  };
  for (const Case& c : {Case{"lenet1", "torch", {8, 1, 28, 28}}, Case{"lenet5", "tensorflow", {8, 1, 28, 28}},
                        Case{"lenet5", "theano", {8, 1, 28, 28}}, Case{"resnet20", "tensorflow", {2, 3, 32, 32}},
                        Case{"resnet20", "torch", {2, 3, 32, 32}}, Case{"resnet20b", "theano", {2, 3, 32, 32}},
                        Case{"vgg16", "tensorflow", {1, 3, 32, 32}}, Case{"lstm", "tensorflow", {8, 28, 28}},
                        Case{"lstm", "torch", {8, 28, 28}}, Case{"gru", "theano", {8, 28, 28}},
                        Case{"lstm-imdb", "torch", {4, 80}}, Case{"gru-imdb", "tensorflow", {4, 80}}}) {
    SCOPED_TRACE(std::string(c.arch) + " " + c.preset);
    Model zoo = oracle::model_with_random_state(c.arch, Policy::preset_named(c.preset), 41);
    const convert::TfjsExport ex = convert::export_tfjs(zoo);
    convert::KerasGraph g = convert::import_keras_bytes(ex.model_json, ex.weights, "model.json", c.preset);
    EXPECT_TRUE(g.has_weights);
    EXPECT_EQ(g.input_shape, zoo.input_shape);
    Model m = convert::keras_graph_model(std::move(g), c.preset);
    Tensor x = random_tensor(c.x, DType::f32, 7, 0.0, 1.0);
    if (c.x.size() == 2)  // token ids below the table's 20,002 rows
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::floor(x.data<float>()[i] * 20002.f);
    const Tensor want = logits_of(zoo, x), got = logits_of(m, x);
    const oracle::LogitAgreement a = oracle::logit_agreement(want, got);
    std::cout << c.arch << " " << c.preset << ": max |d| / max |logit| = " << a.rel << "\n";
    EXPECT_LE(a.rel, 1e-6);
    EXPECT_EQ(a.flips, 0);
  }
}

// A Keras 3 functional config (model.to_json() of Keras 3: inbound_nodes as {args, kwargs},
// DTypePolicy objects, batch_shape), architecture only: the Policy draws the weights and decides
// what the file leaves open.
const char* kKeras3 = R"({
  "module": "keras", "class_name": "Functional", "registered_name": "Functional",
  "config": {"name": "k3", "trainable": true,
    "layers": [
      {"module": "keras.layers", "class_name": "InputLayer", "registered_name": null, "name": "input_layer",
       "config": {"batch_shape": [null, 9, 9, 3], "dtype": "float32", "sparse": false, "name": "input_layer"},
       "inbound_nodes": []},
      {"module": "keras.layers", "class_name": "Conv2D", "registered_name": null, "name": "conv",
       "build_config": {"input_shape": [null, 9, 9, 3]},
       "config": {"name": "conv", "trainable": true,
         "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
         "filters": 4, "kernel_size": [3, 3], "strides": [2, 2], "padding": "same", "data_format": "channels_last",
         "dilation_rate": [1, 1], "groups": 1, "activation": "relu", "use_bias": true,
         "kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null}},
         "bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {}},
         "kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
         "kernel_constraint": null, "bias_constraint": null},
       "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 9, 9, 3],
         "dtype": "float32", "keras_history": ["input_layer", 0, 0]}}], "kwargs": {}}]},
      {"module": "keras.layers", "class_name": "BatchNormalization", "registered_name": null, "name": "bn",
       "config": {"name": "bn", "trainable": true, "dtype": "float32", "axis": -1, "center": true, "scale": true},
       "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 5, 5, 4],
         "dtype": "float32", "keras_history": ["conv", 0, 0]}}], "kwargs": {"training": null}}]},
      {"module": "keras.layers", "class_name": "Flatten", "registered_name": null, "name": "flat",
       "config": {"name": "flat", "trainable": true, "dtype": "float32"},
       "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 5, 5, 4],
         "dtype": "float32", "keras_history": ["bn", 0, 0]}}], "kwargs": {}}]},
      {"module": "keras.layers", "class_name": "Dense", "registered_name": null, "name": "out",
       "config": {"name": "out", "trainable": true, "dtype": "float32", "units": 10, "activation": "softmax",
                  "use_bias": true, "lora_rank": null},
       "inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 100],
         "dtype": "float32", "keras_history": ["flat", 0, 0]}}], "kwargs": {}}]}
    ],
    "input_layers": ["input_layer", 0, 0], "output_layers": ["out", 0, 0]}
})";

TEST(KerasImport, AKeras3ArchitectureIsBuiltUnderEachPresetWithWhatTheFileLeavesOpenThePolicys) {
  for (const char* preset : {"tensorflow", "theano", "torch"}) {
    SCOPED_TRACE(preset);
    const Policy p = Policy::preset_named(preset);
    convert::KerasGraph g = convert::import_keras_bytes(kKeras3, "", "k3.json", preset);
    EXPECT_FALSE(g.has_weights);
    EXPECT_EQ(g.input_shape, Shape({3, 9, 9}));  // fed channels-first
    EXPECT_EQ(g.output_shape, Shape({10}));
    GraphLayer& gl = *g.graph;
    const Conv2dParams& conv = layer_as<Conv2dLayer>(*gl.node(0).layer)->op_params();
    // 'same' at stride 2 on 9 (odd: total pad 2) is 1/1 under every rule; the flip is the
    // Policy's (no weights in the file)
    EXPECT_EQ(conv.pad_t, 1);
    EXPECT_EQ(conv.pad_b, 1);
    EXPECT_EQ(conv.flip, p.conv_kernel_flip);
    // BatchNormalization states no epsilon or momentum: the Policy's
    EXPECT_EQ(layer_as<BatchNormLayer>(*gl.node(2).layer)->op_params().eps, p.bn_eps);
    // data_format stated (channels_last): the flatten order is the file's (h,w,c) under every preset
    EXPECT_EQ(layer_as<FlattenLayer>(*gl.node(3).layer)->order(), FlattenOrder::hwc);
    // the final softmax is left to the loss: the last node is the Dense
    EXPECT_EQ(gl.num_nodes(), 5u);
    EXPECT_NE(layer_as<DenseLayer>(*gl.node(4).layer), nullptr);
    bool noted = false;
    for (const std::string& n : g.notes) noted |= n.find("final softmax") != std::string::npos;
    EXPECT_TRUE(noted);
  }
}

// 'same' with stride 2 on an even input (keras#19291's case): TF pads 0/1, the torch preset 1/1
// (padding=k//2, what the PyTorch port writes), Theano 1/0; a Sequential model with the input on
// its first layer and no data_format: the flatten order is the Policy's.
TEST(KerasImport, StridedSameOnAnEvenInputSplitsByThePreset) {
  const std::string seq = R"({"class_name": "Sequential", "config": {"name": "s", "layers": [
      {"class_name": "Conv2D", "config": {"name": "c", "batch_input_shape": [null, 8, 8, 1], "filters": 2,
        "kernel_size": 3, "strides": 2, "padding": "same"}},
      {"class_name": "Flatten", "config": {"name": "f"}},
      {"class_name": "Dense", "config": {"name": "d", "units": 3}}]}})";
  const std::map<std::string, std::array<int64_t, 2>> want = {{"tensorflow", {0, 1}}, {"theano", {1, 0}}, {"torch", {1, 1}}};
  for (const auto& [preset, pads] : want) {
    SCOPED_TRACE(preset);
    convert::KerasGraph g = convert::import_keras_bytes(seq, "", "s.json", preset);
    const Conv2dParams& conv = layer_as<Conv2dLayer>(*g.graph->node(0).layer)->op_params();
    EXPECT_EQ(conv.pad_t, pads[0]);
    EXPECT_EQ(conv.pad_b, pads[1]);
    EXPECT_EQ(conv.pad_l, pads[0]);
    EXPECT_EQ(conv.pad_r, pads[1]);
    EXPECT_EQ(layer_as<FlattenLayer>(*g.graph->node(1).layer)->order(), Policy::preset_named(preset).flatten_order);
  }
}

// A file's weights go where Keras's layouts say: a depthwise kernel (H,W,C,multiplier) whose output
// channel c*m + j reads input channel c, a grouped kernel, a Dense kernel (in, out), BatchNorm's
// four vectors; ZeroPadding2D folds into the valid conv after it. Checked against a direct
// computation from the Keras-layout arrays (small integers: exact sums).
TEST(KerasImport, WeightsLandWhereKerasLayoutsPutThem) {
  // input 1x2x2x2 (H,W,C); depthwise 1x1, multiplier 2: out[h,w,c*2+j] = x[h,w,c] * K[0,0,c,j] + b
  const json model = {
      {"format", "layers-model"},
      {"modelTopology",
       {{"class_name", "Model"},
        {"config",
         {{"name", "m"},
          {"layers",
           {{{"class_name", "InputLayer"}, {"name", "in"}, {"config", {{"batch_input_shape", {nullptr, 2, 2, 2}}, {"name", "in"}}},
             {"inbound_nodes", json::array()}},
            {{"class_name", "ZeroPadding2D"}, {"name", "zp"}, {"config", {{"name", "zp"}, {"padding", {{0, 1}, {1, 0}}}}},
             {"inbound_nodes", {{{"in", 0, 0, json::object()}}}}},
            {{"class_name", "DepthwiseConv2D"}, {"name", "dw"},
             {"config", {{"name", "dw"}, {"kernel_size", {1, 1}}, {"depth_multiplier", 2}, {"padding", "valid"}}},
             {"inbound_nodes", {{{"zp", 0, 0, json::object()}}}}},
            {{"class_name", "GlobalAveragePooling2D"}, {"name", "gap"}, {"config", {{"name", "gap"}}},
             {"inbound_nodes", {{{"dw", 0, 0, json::object()}}}}},
            {{"class_name", "Dense"}, {"name", "fc"}, {"config", {{"name", "fc"}, {"units", 2}, {"use_bias", false}}},
             {"inbound_nodes", {{{"gap", 0, 0, json::object()}}}}}}},
          {"input_layers", {{"in", 0, 0}}},
          {"output_layers", {{"fc", 0, 0}}}}}}},
      {"weightsManifest",
       {{{"paths", {"w.bin"}},
         {"weights",
          {{{"name", "dw/depthwise_kernel"}, {"shape", {1, 1, 2, 2}}, {"dtype", "float32"}},
           {{"name", "dw/bias"}, {"shape", {4}}, {"dtype", "float32"}},
           {{"name", "fc/kernel"}, {"shape", {4, 2}}, {"dtype", "float32"}}}}}}}};
  const std::vector<float> K = {1, 2, 3, 4};        // K[0,0,c,j]: c=0 -> (1,2), c=1 -> (3,4)
  const std::vector<float> b = {10, 20, 30, 40};
  const std::vector<float> F = {1, 0, 0, 1, 1, 1, -1, 2};  // (in 4, out 2), row-major
  std::string bytes;
  for (const auto* v : {&K, &b, &F}) bytes.append(reinterpret_cast<const char*>(v->data()), v->size() * 4);
  convert::KerasGraph g = convert::import_keras_bytes(model.dump(), bytes, "m.json", "tensorflow");
  Model m = convert::keras_graph_model(std::move(g), "tensorflow");
  // x (C,H,W) = channel 0: [[1,2],[3,4]], channel 1: [[5,6],[7,8]]
  const Tensor x = Tensor::from<float>({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  // padded 3x3 (a zero row below, a zero column left): 9 pixels, 5 of them zero
  // channel means over 9: c0 sum 10, c1 sum 26
  // dw out channel o = c*2+j: mean = (K[c,j] * sum_c + 9 * b[o]) / 9
  const double s0 = 10, s1 = 26;
  const double d[4] = {(1 * s0 + 90) / 9, (2 * s0 + 180) / 9, (3 * s1 + 270) / 9, (4 * s1 + 360) / 9};
  const double y0 = d[0] * 1 + d[1] * 0 + d[2] * 1 + d[3] * -1, y1 = d[0] * 0 + d[1] * 1 + d[2] * 1 + d[3] * 2;
  const Tensor y = logits_of(m, x);
  // float32 sums of a handful of terms of size ~100: within 1e-5 relative
  EXPECT_NEAR(y.data<float>()[0], y0, 1e-5 * std::abs(y0) + 1e-5);
  EXPECT_NEAR(y.data<float>()[1], y1, 1e-5 * std::abs(y1) + 1e-5);
}

TEST(KerasImport, UnknownLayersKeysAndBadGraphsAreRefusedNamingTheLayer) {
  auto err = [](const std::string& text, const std::string& weights = "") {
    return error_of([&] { convert::import_keras_bytes(text, weights, "bad.json", "tensorflow"); });
  };
  const std::string head = R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "InputLayer", "config": {"name": "in", "batch_input_shape": [null, 4, 4, 1]}},)";
  auto seq = [&](const std::string& layer) { return head + layer + "]}}"; };
  std::string e = err(seq(R"({"class_name": "Conv2DTranspose", "config": {"name": "up"}})"));
  EXPECT_NE(e.find("layer 'up' (Conv2DTranspose): layer class not implemented"), std::string::npos) << e;
  e = err(seq(R"({"class_name": "Conv2D", "config": {"name": "c", "filters": 2, "kernel_size": 3, "fancy": 1}})"));
  EXPECT_NE(e.find("layer 'c' (Conv2D): unknown config key 'fancy'"), std::string::npos) << e;
  e = err(seq(R"({"class_name": "Conv2D", "config": {"name": "c", "filters": 2, "kernel_size": 3,
                  "kernel_regularizer": {"class_name": "L2", "config": {"l2": 0.01}}}})"));
  EXPECT_NE(e.find("kernel_regularizer"), std::string::npos) << e;
  e = err(seq(R"({"class_name": "Conv2D", "config": {"name": "c", "filters": 2, "kernel_size": 3, "padding": "causal"}})"));
  EXPECT_NE(e.find("layer 'c' (Conv2D): padding 'causal'"), std::string::npos) << e;
  e = err(seq(R"({"class_name": "Activation", "config": {"name": "a", "activation": "softmax"}},
                 {"class_name": "Flatten", "config": {"name": "f"}})"));
  EXPECT_NE(e.find("layer 'a' (Activation): softmax inside the model"), std::string::npos) << e;
  e = err(seq(R"({"class_name": "Conv2D", "config": {"name": "c", "filters": 2, "kernel_size": 3, "trainable": false}})"));
  EXPECT_NE(e.find("trainable false"), std::string::npos) << e;
  // a functional layer reading a layer that does not exist, and one read before it is written
  const std::string fn = R"({"class_name": "Model", "config": {"layers": [
      {"class_name": "InputLayer", "name": "in", "config": {"name": "in", "batch_input_shape": [null, 4]}, "inbound_nodes": []},
      {"class_name": "Dense", "name": "a", "config": {"name": "a", "units": 2}, "inbound_nodes": [[["ghost", 0, 0, {}]]]}],
      "input_layers": [["in", 0, 0]], "output_layers": [["a", 0, 0]]}})";
  e = err(fn);
  EXPECT_NE(e.find("layer 'a' (Dense) reads 'ghost', which no earlier layer writes"), std::string::npos) << e;
  // shape mismatch: Add of a (2,) and a (3,) value
  const std::string mismatch = R"({"class_name": "Model", "config": {"layers": [
      {"class_name": "InputLayer", "name": "in", "config": {"name": "in", "batch_input_shape": [null, 4]}, "inbound_nodes": []},
      {"class_name": "Dense", "name": "a", "config": {"name": "a", "units": 2}, "inbound_nodes": [[["in", 0, 0, {}]]]},
      {"class_name": "Dense", "name": "b", "config": {"name": "b", "units": 3}, "inbound_nodes": [[["in", 0, 0, {}]]]},
      {"class_name": "Add", "name": "s", "config": {"name": "s"}, "inbound_nodes": [[["a", 0, 0, {}], ["b", 0, 0, {}]]]}],
      "input_layers": [["in", 0, 0]], "output_layers": [["s", 0, 0]]}})";
  e = err(mismatch);
  EXPECT_NE(e.find("'s'"), std::string::npos) << e;
  // weights: a shard shorter than the manifest, a weight of the wrong shape, a weight no layer reads
  const std::string dense = R"({"modelTopology": {"class_name": "Sequential", "config": {"layers": [
      {"class_name": "Dense", "config": {"name": "d", "units": 2, "batch_input_shape": [null, 3]}}]}},
      "weightsManifest": [{"paths": ["w.bin"], "weights": [
        {"name": "d/kernel", "shape": [3, 2], "dtype": "float32"}, {"name": "d/bias", "shape": [SHAPE], "dtype": "float32"}
        EXTRA]}]})";
  auto with = [&](const std::string& shape, const std::string& extra) {
    std::string s = dense;
    s.replace(s.find("SHAPE"), 5, shape);
    s.replace(s.find("EXTRA"), 5, extra);
    return s;
  };
  e = err(with("2", ""), std::string(20, '\0'));
  EXPECT_NE(e.find("the shards hold 20"), std::string::npos) << e;
  e = err(with("3", ""), std::string(36, '\0'));
  EXPECT_NE(e.find("weight 'd/bias' has shape [3]"), std::string::npos) << e;
  e = err(with("2", R"(, {"name": "e/kernel", "shape": [1], "dtype": "float32"})"), std::string(36, '\0'));
  EXPECT_NE(e.find("weight 'e/kernel' of the manifest belongs to no layer"), std::string::npos) << e;
  e = err("{\"class_name\": ");
  EXPECT_NE(e.find("bad.json: not JSON at byte"), std::string::npos) << e;
}

}  // namespace
}  // namespace driftlab

namespace driftlab {
namespace {

// fuzz_keras_import's first finding (2026-11-29, 60 s in): a number too large for a double in the
// JSON made nlohmann's parser throw out_of_range, which is no parse_error and was not caught (the
// fuzz build aborted on it; this test fails on the code before the fix). Every JSON exception of
// the parse is now refused as "not JSON we can read".
TEST(KerasImportFuzzRegressions, ANumberBeyondADoubleIsRefused) {
  const std::string path =
      std::string(DRIFTLAB_SOURCE_DIR) + "/tests/data/fuzz-regressions/fuzz_keras_import/number_overflow.bin";
  std::ifstream f(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(bytes.empty()) << path;
  const std::size_t nul = bytes.find('\0');
  const std::string e = error_of([&] {
    convert::import_keras_bytes(bytes.substr(0, nul), nul == std::string::npos ? "" : bytes.substr(nul + 1), "crash.json");
  });
  EXPECT_NE(e.find("crash.json: not JSON"), std::string::npos) << e;
}

}  // namespace
}  // namespace driftlab

namespace driftlab {
namespace {

// Squeeze-and-excitation's Keras pieces and the swish activations, against formulas written here:
// GlobalAveragePooling2D(keepdims=True) then Multiply with the image (broadcast over H and W), a
// second pooling, Reshape to (C,); Activation swish = x * sigmoid(x), hard_swish = x *
// clip(x/6 + 1/2, 0, 1) (Keras 3's hard_silu), summed by a Dense of ones.
TEST(KerasImport, SqueezeExcitePiecesAndSwishComputeTheirFormulas) {
  const std::string model = R"({"class_name": "Model", "config": {"layers": [
    {"class_name": "InputLayer", "name": "in", "config": {"name": "in", "batch_input_shape": [null, 2, 2, 3]}, "inbound_nodes": []},
    {"class_name": "GlobalAveragePooling2D", "name": "se", "config": {"name": "se", "keepdims": true},
     "inbound_nodes": [[["in", 0, 0, {}]]]},
    {"class_name": "Multiply", "name": "scaled", "config": {"name": "scaled"}, "inbound_nodes": [[["in", 0, 0, {}], ["se", 0, 0, {}]]]},
    {"class_name": "GlobalAveragePooling2D", "name": "gap", "config": {"name": "gap", "keepdims": true},
     "inbound_nodes": [[["scaled", 0, 0, {}]]]},
    {"class_name": "Reshape", "name": "flat", "config": {"name": "flat", "target_shape": [3]}, "inbound_nodes": [[["gap", 0, 0, {}]]]},
    {"class_name": "Activation", "name": "sw", "config": {"name": "sw", "activation": "swish"}, "inbound_nodes": [[["flat", 0, 0, {}]]]},
    {"class_name": "Activation", "name": "hsw", "config": {"name": "hsw", "activation": "hard_silu"}, "inbound_nodes": [[["flat", 0, 0, {}]]]},
    {"class_name": "Concatenate", "name": "cat", "config": {"name": "cat", "axis": -1}, "inbound_nodes": [[["sw", 0, 0, {}], ["hsw", 0, 0, {}]]]}],
    "input_layers": [["in", 0, 0]], "output_layers": [["cat", 0, 0]]}})";
  convert::KerasGraph g = convert::import_keras_bytes(model, "", "se.json", "tensorflow");
  Model m = convert::keras_graph_model(std::move(g), "tensorflow");
  // x (C,H,W) = 3 channels of 2x2
  const std::vector<float> xs = {1, -2, 3, 0.5f, -4, 2, 0, 1, 6, -1, 2, -3};
  const Tensor x = Tensor::from<float>({1, 3, 2, 2}, xs);
  const Tensor y = logits_of(m, x);
  ASSERT_EQ(y.shape(), Shape({1, 6}));
  for (int c = 0; c < 3; ++c) {
    double mean = 0, scaled = 0;
    for (int i = 0; i < 4; ++i) mean += xs[static_cast<std::size_t>(c * 4 + i)] / 4.0;
    for (int i = 0; i < 4; ++i) scaled += xs[static_cast<std::size_t>(c * 4 + i)] * mean / 4.0;
    const double swish = scaled / (1 + std::exp(-scaled));
    const double hard = scaled * std::min(1.0, std::max(0.0, scaled / 6 + 0.5));
    // float32 arithmetic on a few terms of size ~10: within 1e-5 relative
    EXPECT_NEAR(y.data<float>()[c], swish, 1e-5 * std::max(1.0, std::abs(swish))) << c;
    EXPECT_NEAR(y.data<float>()[3 + c], hard, 1e-5 * std::max(1.0, std::abs(hard))) << c;
  }
  // a reshape that would move elements between the two orders is refused by name
  const std::string bad = R"({"class_name": "Sequential", "config": {"layers": [
    {"class_name": "InputLayer", "config": {"name": "in", "batch_input_shape": [null, 12]}},
    {"class_name": "Reshape", "config": {"name": "r", "target_shape": [2, 2, 3]}}]}})";
  const std::string e = error_of([&] { convert::import_keras_bytes(bad, "", "bad.json", "tensorflow"); });
  EXPECT_NE(e.find("layer 'r' (Reshape): reshape [12] -> [3,2,2] moves elements"), std::string::npos) << e;
}

}  // namespace
}  // namespace driftlab
