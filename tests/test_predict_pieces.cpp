// A prediction in pieces (engine/train/predict_pieces.h): the rule's decisions worked out from its
// constants and the models' shapes, and the logits the same bits as the whole batch at once, under
// each preset (their layouts and fusions differ), under autocast, with a last piece shorter than
// the others.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "engine/train/predict_pieces.h"
#include "models/graph.h"
#include "models/models.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

TEST(PredictPieces, TheRuleFromTheModelsShapes) {
  // ResNet-20: its largest activation is the stem's 16 x 32 x 32 floats, 64 KiB an input; its
  // convolutions and BatchNorms hold 0.27 M floats (1.1 MB). 1,000 inputs (64 MB) run in pieces
  // of 64 (64 x 64 KiB = 4 MiB), up to its dense layer, the last; 200 inputs (12.5 MiB) at once.
  Model r = build_model("resnet20", Policy::torch(), 1);
  const PredictPieces p = predict_pieces(*r.net, 1000, DType::f32);
  EXPECT_EQ(p.activation_bytes, 16 * 32 * 32 * 4);
  EXPECT_LT(p.weight_bytes, kReusedWeightBytes);
  EXPECT_EQ(p.piece, 64);
  EXPECT_EQ(p.split, r.net->size() - 1);
  EXPECT_EQ(r.net->layer(p.split).kind(), "dense");
  EXPECT_EQ(predict_pieces(*r.net, 200, DType::f32).split, 0u) << "12.5 MiB of activations: at once";
  // VGG-16: 15 M weights in its convolutions (59 MB): at once, whatever the batch.
  Model v = build_model("vgg16", Policy::torch(), 1);
  const PredictPieces pv = predict_pieces(*v.net, 1000, DType::f32);
  EXPECT_GT(pv.weight_bytes, kReusedWeightBytes);
  EXPECT_EQ(pv.split, 0u);
  // An LSTM's first layer is not batch-invariant (its GEMMs): at once.
  Model l = build_model("lstm", Policy::torch(), 1);
  EXPECT_EQ(predict_pieces(*l.net, 10000, DType::f32).split, 0u);
}

TEST(PredictPieces, SameBitsAsTheWholeBatch) {
  struct Case {
    std::string arch, spec;
    int64_t n, piece;
  };
  // 300 ResNet-20 inputs (64 KiB each at the stem): pieces of 64, the last of 44. 2,000 LeNet-5
  // inputs (its first convolution's output, 6 x 24 x 24 floats, 13.5 KiB): pieces of 256 (3.4 MiB),
  // the last of 208. The pieces are asserted, so a change of the rule shows here.
  for (const Case& c : {Case{"resnet20", "torch", 300, 64}, Case{"resnet20", "tensorflow", 300, 64},
                        Case{"resnet20", "theano", 300, 64}, Case{"resnet20", "torch,autocast=bfloat16", 300, 64},
                        Case{"lenet5", "torch", 2000, 256}, Case{"lenet5", "tensorflow", 2000, 256}}) {
    Model m = build_model(c.arch, Policy::parse(c.spec), 5);
    const bool cifar = c.arch == "resnet20";
    const Tensor x =
        random_tensor(cifar ? Shape{c.n, 3, 32, 32} : Shape{c.n, 1, 28, 28}, DType::f32, 9, 0.0, 1.0);
    const PredictPieces rule = predict_pieces(*m.net, c.n, DType::f32);
    EXPECT_EQ(rule.piece, c.piece) << c.arch << " " << c.spec << ": " << rule.str();
    ASSERT_GT(rule.split, 0u) << c.spec;
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    const Tensor whole = m.net->forward(ctx, x);
    const Tensor pieces = predict_in_pieces(ctx, *m.net, x, rule);
    ASSERT_EQ(pieces.shape(), whole.shape()) << c.spec;
    EXPECT_EQ(std::memcmp(pieces.raw(), whole.raw(), whole.nbytes()), 0) << c.arch << " " << c.spec << ": " << rule.str();
  }
}

// A graph model (one GraphLayer, as an imported model is): its nodes up to the dense one run in
// pieces. The stem's 32 x 16 x 16 floats (32 KiB an input) make pieces of 128 of 1,000 inputs (the
// last of 104); the logits the same bits as the whole batch, under two presets.
TEST(PredictPieces, GraphModelsNodesRunInPiecesWithTheSameBits) {
  const nlohmann::json spec = nlohmann::json::parse(R"({
    "input": "x", "input_shape": [3, 16, 16],
    "nodes": [
      {"name": "stem", "op": "conv2d", "inputs": ["x"], "output": "a", "out_channels": 32, "kernel": [3, 3], "pads": [1, 1, 1, 1]},
      {"name": "bn1", "op": "batchnorm", "inputs": ["a"], "output": "b"},
      {"name": "r1", "op": "relu", "inputs": ["b"], "output": "c"},
      {"name": "dw", "op": "conv2d", "inputs": ["c"], "output": "d", "out_channels": 32, "kernel": [3, 3],
       "pads": [1, 1, 1, 1], "groups": 32, "stride": [2, 2]},
      {"name": "r2", "op": "clip", "inputs": ["d"], "output": "e", "min": 0, "max": 6},
      {"name": "pw", "op": "conv2d", "inputs": ["e"], "output": "f", "out_channels": 32, "kernel": [1, 1]},
      {"name": "res", "op": "add", "inputs": ["f", "e"], "output": "g"},
      {"name": "gap", "op": "global_avg_pool", "inputs": ["g"], "output": "h"},
      {"name": "fc", "op": "dense", "inputs": ["h"], "output": "y", "units": 10}
    ]})");
  ModelArgs args;
  args.graph = spec.dump();
  for (const char* preset : {"torch", "tensorflow"}) {
    Model m = build_model(kGraphModelName, Policy::parse(preset), 5, args);
    const PredictPieces rule = predict_pieces(*m.net, 1000, DType::f32);
    EXPECT_EQ(rule.split, 0u) << rule.str();
    EXPECT_EQ(rule.graph_nodes, 8u) << rule.str();  // every node before the dense one
    EXPECT_EQ(rule.activation_bytes, 32 * 16 * 16 * 4);
    EXPECT_EQ(rule.piece, 128);
    EXPECT_EQ(predict_pieces(*m.net, 400, DType::f32).graph_nodes, 0u) << "12.5 MiB of activations: at once";
    const Tensor x = random_tensor({1000, 3, 16, 16}, DType::f32, 9, 0.0, 1.0);
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    const Tensor whole = m.net->forward(ctx, x);
    const Tensor pieces = predict_in_pieces(ctx, *m.net, x, rule);
    ASSERT_EQ(pieces.shape(), whole.shape()) << preset;
    EXPECT_EQ(std::memcmp(pieces.raw(), whole.raw(), whole.nbytes()), 0) << preset << ": " << rule.str();
  }
}

TEST(PredictPieces, ForwardFromKeepsNothingForABackward) {
  Model m = build_model("resnet20", Policy::torch(), 1);
  ExecContext exec;
  RunContext ctx = RunContext::training(exec, nullptr);
  EXPECT_THROW(m.net->forward_from(ctx, Tensor({2, 64}, DType::f32), m.net->size() - 1), Error);
}

}  // namespace
}  // namespace driftlab
