// Graph models (engine/layers/graph_layer.h, models/graph.h): the DAG's forward and backward
// (float64 central differences through every node kind: grouped and depthwise convolution,
// clip, add/sub/mul under broadcasting with constants, concat, reshape, values read by several
// nodes), the grouped reference convolution against per-group convolutions, the spec's errors
// naming the node, and the model file round trip.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "drift/drift.h"
#include "engine/layers/all.h"
#include "engine/random.h"
#include "kernels/cpu/ref/ref.h"
#include "models/graph.h"
#include "models/model_file.h"
#include "models/models.h"
#include "models/reparam.h"
#include "tests/layers/gradcheck_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

using nlohmann::json;

ModelArgs graph_args(const json& spec) {
  ModelArgs a;
  a.graph = spec.dump();
  return a;
}

Policy f64_torch() {
  Policy p = Policy::torch();
  p.dtype = FloatType::float64;
  return p;
}

// conv -> clip -> depthwise conv -> (add of the conv's output: a value read twice) -> mul by a
// per-channel constant -> concat with a sub branch -> reshape -> dense: every op and both
// gradient sums.
json mixed_spec() {
  return json::parse(R"({
    "input": "x", "input_shape": [4, 6, 6],
    "constants": [{"name": "scale", "shape": [1, 4, 1, 1]}, {"name": "shift", "shape": [6]}],
    "nodes": [
      {"name": "c1", "op": "conv2d", "inputs": ["x"], "output": "a", "out_channels": 4, "kernel": [3, 3],
       "pads": [1, 1, 0, 2], "groups": 2},
      {"name": "r6", "op": "clip", "inputs": ["a"], "output": "b", "min": -0.5, "max": 0.5},
      {"name": "dw", "op": "conv2d", "inputs": ["b"], "output": "c", "out_channels": 4, "kernel": [3, 3],
       "pads": [1, 1, 1, 1], "groups": 4, "stride": [1, 1]},
      {"name": "res", "op": "add", "inputs": ["c", "a"], "output": "d"},
      {"name": "sc", "op": "mul", "inputs": ["d", "scale"], "output": "e"},
      {"name": "sh", "op": "sub", "inputs": ["a", "shift"], "output": "f"},
      {"name": "m2", "op": "mul", "inputs": ["e", "f"], "output": "g"},
      {"name": "cat", "op": "concat", "inputs": ["g", "f"], "axis": 1, "output": "h"},
      {"name": "pool", "op": "avgpool", "inputs": ["h"], "output": "i", "kernel": [2, 2], "stride": [2, 2],
       "pads": [1, 1, 0, 0], "count_include_pad": false},
      {"name": "flat", "op": "reshape", "inputs": ["i"], "output": "j", "shape": [96]},
      {"name": "fc", "op": "dense", "inputs": ["j"], "output": "y", "units": 3}
    ]})");
}

TEST(GraphLayer, GradientsOfEveryNodeKindMatchCentralDifferences) {
  Policy p = f64_torch();
  Rng rng(p.rng_engine, 3);
  Sequential net({4, 6, 6});
  auto g = build_graph(mixed_spec(), p, rng);
  // the constants: not zero (the spec builds them zero-filled; a file or importer sets them)
  const_cast<Tensor&>(g->constant(g->find_value("scale"))) = random_tensor({1, 4, 1, 1}, DType::f64, 5, 0.5, 1.5);
  const_cast<Tensor&>(g->constant(g->find_value("shift"))) = random_tensor({6}, DType::f64, 6, -0.3, 0.3);
  EXPECT_EQ(g->output_shape(), Shape({3}));
  net.add(std::move(g));
  Tensor x = random_tensor({2, 4, 6, 6}, DType::f64, 7, -1.0, 1.0);
  // float64 with h = 1e-6: truncation and rounding of the differences ~1e-8 on losses of order 1;
  // the clip's kinks are 1e-6 wide at most, and no input lands on them at these seeds (a kink
  // would fail by ~1e-1, not 1e-6)
  gradcheck_sequential(net, x, 1e-6, 3, 1, Semantics::inference);
}

TEST(GraphLayer, ValuesAreDroppedAfterTheirLastReaderAndTheOutputStays) {
  Policy p = Policy::torch();
  Rng rng(p.rng_engine, 3);
  auto g = build_graph(mixed_spec(), p, rng);
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  Tensor x = random_tensor({3, 4, 6, 6}, DType::f32, 7, -1.0, 1.0);
  Tensor y1 = g->forward(ctx, x);
  Tensor y2 = g->forward(ctx, x);
  ASSERT_EQ(y1.shape(), Shape({3, 3}));
  for (int64_t i = 0; i < y1.numel(); ++i) EXPECT_EQ(y1.at(i), y2.at(i));
}

// How many kernels of `op` a traced pass picked.
int picks(const std::vector<KernelChoice>& trace, const std::string& op) {
  int k = 0;
  for (const KernelChoice& c : trace) k += c.op == op;
  return k;
}

// A MobileNet/ResNet-like graph: the test below and the training one after it. conv_bias false:
// the convolutions without a bias, as torchvision's before a batchnorm (whose train-mode forward
// removes it: its exact gradient is 0, and both layouts' results are rounding noise no relative
// bound can compare).
json mobile_like_spec(bool conv_bias = true) {
  json spec = json::parse(R"({
    "input": "x", "input_shape": [3, 8, 8],
    "nodes": [
      {"name": "stem", "op": "conv2d", "inputs": ["x"], "output": "a", "out_channels": 32, "kernel": [3, 3], "pads": [1, 1, 1, 1]},
      {"name": "bn1", "op": "batchnorm", "inputs": ["a"], "output": "b"},
      {"name": "r1", "op": "relu", "inputs": ["b"], "output": "c"},
      {"name": "dw", "op": "conv2d", "inputs": ["c"], "output": "d", "out_channels": 32, "kernel": [3, 3],
       "pads": [1, 1, 1, 1], "groups": 32},
      {"name": "bn2", "op": "batchnorm", "inputs": ["d"], "output": "e"},
      {"name": "r2", "op": "clip", "inputs": ["e"], "output": "f", "min": 0, "max": 6},
      {"name": "pw", "op": "conv2d", "inputs": ["f"], "output": "g", "out_channels": 32, "kernel": [1, 1]},
      {"name": "bn3", "op": "batchnorm", "inputs": ["g"], "output": "h"},
      {"name": "res", "op": "add", "inputs": ["h", "c"], "output": "h2"},
      {"name": "r3", "op": "relu", "inputs": ["h2"], "output": "i"},
      {"name": "pw2", "op": "conv2d", "inputs": ["i"], "output": "p2", "out_channels": 32, "kernel": [1, 1]},
      {"name": "bn4", "op": "batchnorm", "inputs": ["p2"], "output": "q"},
      {"name": "res2", "op": "add", "inputs": ["q", "i"], "output": "i2"},
      {"name": "cat", "op": "concat", "inputs": ["i2", "c"], "axis": 1, "output": "j"},
      {"name": "gap", "op": "global_avg_pool", "inputs": ["j"], "output": "k"},
      {"name": "fc", "op": "dense", "inputs": ["k"], "output": "y", "units": 10}
    ]})");
  for (json& node : spec["nodes"])
    if (node["op"] == "conv2d") node["bias"] = conv_bias;
  return spec;
}

// A MobileNetV2-shaped graph (stem, BatchNorm, ReLU, depthwise, ReLU6, 1x1, a residual add and a
// ReLU, another 1x1 and a residual add without one) then a concat, pooling and a dense layer: a
// prediction keeps the values channel-blocked from the stem to the second 1x1 convolution's input
// (oneDNN's convolutions, the BatchNorms, the activations and the reference's depthwise loops take
// the block) and plain from there, runs bn1 + r1, dw + bn2 + r2 (the batchnorm and clip in the
// depthwise loops' stores), bn3 + res + r3 and bn4 + res2 as one op each, and gives the bits of the same prediction with every value plain and every node apart; a
// recorded forward keeps the blocks and runs every node apart.
TEST(GraphLayer, PredictionKeepsValuesChannelBlockedAndFusesWithTheSameBits) {
  const json spec = mobile_like_spec();
  const Policy p = Policy::torch();
  Rng rng(p.rng_engine, 3);
  auto g = build_graph(spec, p, rng);
  uint64_t seed = 10;
  for (Param* q : g->buffers())  // running statistics away from 0 and 1 (variances positive)
    q->value = random_tensor(q->value.shape(), q->value.dtype(), seed++, 0.2, 1.5);
  const Tensor x = random_tensor({5, 3, 8, 8}, DType::f32, 7, -1.0, 1.0);
  std::vector<KernelChoice> trace0, trace1;
  ExecContext plain_exec;
  plain_exec.channel_blocks = false;
  plain_exec.fuse_bn_relu = false;
  plain_exec.trace = &trace0;
  RunContext plain_ctx = RunContext::inference(plain_exec);
  const Tensor y0 = g->forward(plain_ctx, x);
  for (std::size_t v = 0; v < g->num_values(); ++v) EXPECT_EQ(g->last_block(static_cast<int>(v)), 0);
  EXPECT_EQ(picks(trace0, "activation"), 3);  // r1, r2, r3
  ExecContext exec;
  exec.trace = &trace1;
  RunContext ctx = RunContext::inference(exec);
  const Tensor y1 = g->forward(ctx, x);
  EXPECT_TRUE(bitwise_equal(y0, y1));
  EXPECT_EQ(y1.channel_block(), 0);
  const int cb = Conv2dLayer::kernel_block(exec.kernels.conv2d.at(KernelBackend::onednn));
  ASSERT_GT(cb, 0) << "oneDNN's convolution computes in a channel-blocked layout on AVX2 and AVX-512";
  // blocked: what the convolutions read (c: the depthwise one, read by the add and the concat too)
  for (const char* v : {"a", "c", "f", "g", "i"}) EXPECT_EQ(g->last_block(g->find_value(v)), cb) << v;
  for (const char* v : {"b", "d", "e", "h", "h2", "q"})
    EXPECT_EQ(g->last_block(g->find_value(v)), 0) << v << " (inside a fused op)";
  // plain: what only plain readers (the concat, the pooling) read, from pw2 on
  for (const char* v : {"p2", "i2", "j", "k", "y"}) EXPECT_EQ(g->last_block(g->find_value(v)), 0) << v;
  // fused: r1, r2 and r3 run inside their batchnorms' kernels, both adds too, and bn2 (with r2)
  // inside the depthwise convolution's stores
  EXPECT_EQ(picks(trace1, "activation"), 0);
  EXPECT_EQ(picks(trace0, "batchnorm"), 4);
  EXPECT_EQ(picks(trace1, "batchnorm"), 3);
  EXPECT_EQ(picks(trace0, "conv2d"), picks(trace1, "conv2d"));
  std::vector<KernelChoice> trace2;  // the knob: that batchnorm (and its clip) on its own again
  ExecContext apart_exec;
  apart_exec.fuse_conv_channel_ops = false;
  apart_exec.trace = &trace2;
  RunContext apart = RunContext::inference(apart_exec);
  EXPECT_TRUE(bitwise_equal(y0, g->forward(apart, x)));
  EXPECT_EQ(picks(trace2, "batchnorm"), 4);
  EXPECT_EQ(g->last_block(g->find_value("d")), cb);
  EXPECT_EQ(picks(trace0, "binary"), 2);
  EXPECT_EQ(picks(trace1, "binary"), 0);
  std::vector<KernelChoice> trace3;
  exec.trace = &trace3;
  RunContext rec = RunContext::recorded(exec, Semantics::inference);
  EXPECT_TRUE(bitwise_equal(y0, g->forward(rec, x)));
  for (const char* v : {"a", "b", "c", "d", "e", "f", "g", "h", "h2", "i"})
    EXPECT_EQ(g->last_block(g->find_value(v)), cb) << v << " (recorded: blocked, apart)";
  EXPECT_EQ(picks(trace3, "activation"), 3);
  EXPECT_EQ(picks(trace3, "batchnorm"), 4);
}

// MobileNetV2's inverted residual block and around it: a depthwise convolution runs the
// batchnorm and ReLU or clip before it (its input planes go through them into a buffer), the ones
// after it, both, or a batchnorm without an activation before it, as one op with the bits of every
// node apart; the global pool reads the last depthwise convolution's output in its block.
//   stem -> bn0 -> r0 -> dw0 (read twice: no op after) -> pw0 -> bn1 -> r1 -> dw1 -> bn2 -> r2 ->
//   pw1 -> bn3 -> + dw0's -> bn4 -> dw2 -> global pool -> dense
TEST(GraphLayer, DepthwiseConvolutionRunsTheBatchnormsBeforeAndAfterItWithTheSameBits) {
  const json spec = json::parse(R"({
    "input": "x", "input_shape": [3, 8, 8],
    "nodes": [
      {"name": "stem", "op": "conv2d", "inputs": ["x"], "output": "a", "out_channels": 32, "kernel": [3, 3], "pads": [1, 1, 1, 1]},
      {"name": "bn0", "op": "batchnorm", "inputs": ["a"], "output": "b"},
      {"name": "r0", "op": "relu", "inputs": ["b"], "output": "c"},
      {"name": "dw0", "op": "conv2d", "inputs": ["c"], "output": "d", "out_channels": 32, "kernel": [3, 3],
       "pads": [1, 1, 1, 1], "groups": 32},
      {"name": "pw0", "op": "conv2d", "inputs": ["d"], "output": "e", "out_channels": 64, "kernel": [1, 1]},
      {"name": "bn1", "op": "batchnorm", "inputs": ["e"], "output": "f"},
      {"name": "r1", "op": "clip", "inputs": ["f"], "output": "g", "min": 0, "max": 6},
      {"name": "dw1", "op": "conv2d", "inputs": ["g"], "output": "h", "out_channels": 64, "kernel": [3, 3],
       "pads": [1, 1, 1, 1], "groups": 64},
      {"name": "bn2", "op": "batchnorm", "inputs": ["h"], "output": "i"},
      {"name": "r2", "op": "clip", "inputs": ["i"], "output": "j", "min": 0, "max": 6},
      {"name": "pw1", "op": "conv2d", "inputs": ["j"], "output": "k", "out_channels": 32, "kernel": [1, 1]},
      {"name": "bn3", "op": "batchnorm", "inputs": ["k"], "output": "l"},
      {"name": "res", "op": "add", "inputs": ["l", "d"], "output": "m"},
      {"name": "bn4", "op": "batchnorm", "inputs": ["m"], "output": "n"},
      {"name": "dw2", "op": "conv2d", "inputs": ["n"], "output": "o", "out_channels": 32, "kernel": [3, 3],
       "pads": [1, 1, 1, 1], "groups": 32},
      {"name": "gap", "op": "global_avg_pool", "inputs": ["o"], "output": "p"},
      {"name": "fc", "op": "dense", "inputs": ["p"], "output": "y", "units": 10}
    ]})");
  const Policy p = Policy::torch();
  Rng rng(p.rng_engine, 4);
  auto g = build_graph(spec, p, rng);
  uint64_t seed = 20;
  for (Param* q : g->buffers())  // running statistics away from 0 and 1 (variances positive)
    q->value = random_tensor(q->value.shape(), q->value.dtype(), seed++, 0.2, 1.5);
  for (Param* q : g->params())  // gammas and betas away from 1 and 0 too
    if (q->value.rank() == 1) q->value = random_tensor(q->value.shape(), q->value.dtype(), seed++, -1.5, 1.5);
  Tensor x = random_tensor({5, 3, 8, 8}, DType::f32, 7, -1.0, 1.0);
  x.data<float>()[70] = std::numeric_limits<float>::quiet_NaN();  // image 0: NaN kept through every op
  auto predict = [&](bool blocks, bool fuse, bool conv_ops, std::vector<KernelChoice>& trace) {
    ExecContext exec;
    exec.channel_blocks = blocks;
    exec.fuse_bn_relu = fuse;
    exec.fuse_conv_channel_ops = conv_ops;
    exec.trace = &trace;
    RunContext ctx = RunContext::inference(exec);
    return g->forward(ctx, x);
  };
  std::vector<KernelChoice> apart, fused, no_conv_ops;
  const Tensor y0 = predict(false, false, false, apart);
  const Tensor y1 = predict(true, true, true, fused);
  EXPECT_TRUE(bitwise_equal(y0, y1));
  EXPECT_TRUE(std::isnan(y1.at(0))) << "image 0's NaN reaches its logits";
  EXPECT_FALSE(std::isnan(y1.at(10))) << "and only image 0's";
  const int cb = Conv2dLayer::kernel_block(make_cpu_registry().conv2d.at(KernelBackend::onednn));
  ASSERT_GT(cb, 0) << "oneDNN's convolution computes in a channel-blocked layout on AVX2 and AVX-512";
  // apart: 5 batchnorms, 3 activations, the add; fused: bn0 + r0 in dw0, bn1 + r1 and bn2 + r2 in
  // dw1, bn4 in dw2, bn3 with the add as one batchnorm op
  EXPECT_EQ(picks(apart, "batchnorm"), 5);
  EXPECT_EQ(picks(apart, "activation"), 3);
  EXPECT_EQ(picks(fused, "batchnorm"), 1);
  EXPECT_EQ(picks(fused, "activation"), 0);
  EXPECT_EQ(picks(fused, "binary"), 0);
  EXPECT_EQ(picks(fused, "conv2d"), picks(apart, "conv2d"));
  for (const char* v : {"b", "c", "f", "g", "h", "i", "l", "n"})
    EXPECT_EQ(g->last_block(g->find_value(v)), 0) << v << " (inside a fused op: never held)";
  for (const char* v : {"a", "d", "e", "j", "k", "m", "o"}) EXPECT_EQ(g->last_block(g->find_value(v)), cb) << v;
  // the knob: the batchnorms around the convolutions on their own again (bn0 + r0, bn1 + r1 and
  // bn2 + r2 as batchnorm-and-activation ops, bn3 + add, bn4)
  const Tensor y2 = predict(true, true, false, no_conv_ops);
  EXPECT_TRUE(bitwise_equal(y0, y2));
  EXPECT_EQ(picks(no_conv_ops, "batchnorm"), 5);
  EXPECT_EQ(picks(no_conv_ops, "activation"), 0);
  EXPECT_EQ(g->last_block(g->find_value("c")), cb);
}

// A training step through the graph (GraphLayer::backward in the forward's layouts) against the
// same step with every value plain (ExecContext::channel_blocks off), as
// tests/layers/test_blocked.cpp compares Sequential's: under inference semantics (the attacks'
// input gradient) the same bits; under train semantics within BatchNorm's summation order (the
// blocked kernel sums each plane per lane: 2e-5 against float64 in tests/ops/test_batchnorm.cpp;
// through 4 BatchNorms 1e-4 of each tensor's largest entry leaves margin, and channels mixed up
// would be off by O(1)), and the same bits twice.
TEST(GraphLayer, TrainingStepInTheForwardsBlocksGivesThePlainResults) {
  const int cb = Conv2dLayer::kernel_block(make_cpu_registry().conv2d.at(KernelBackend::onednn));
  if (cb == 0) GTEST_SKIP() << "oneDNN computes in no channel block on this CPU";
  ThreadCountGuard threads(2);
  struct Pass {
    Tensor y, dx;
    std::vector<Tensor> grads, buffers;
    int held_c = -1;
  };
  auto pass = [&](Semantics sem, bool blocks, bool param_grads) {
    const Policy p = Policy::torch();
    Rng rng(p.rng_engine, 3);
    auto g = build_graph(mobile_like_spec(false), p, rng);
    uint64_t seed = 10;
    for (Param* q : g->buffers()) q->value = random_tensor(q->value.shape(), q->value.dtype(), seed++, 0.2, 1.5);
    ExecContext exec;
    exec.channel_blocks = blocks;
    Rng drop(p.rng_engine, 1);
    RunContext ctx = RunContext::recorded(exec, sem, &drop);
    ctx.param_grads = param_grads;
    const Tensor x = random_tensor({5, 3, 8, 8}, DType::f32, 7, -1.0, 1.0);
    Pass r;
    r.y = g->forward(ctx, x);
    r.held_c = g->last_block(g->find_value("c"));
    r.dx = g->backward(ctx, random_tensor(r.y.shape(), DType::f32, 8));
    for (Param* q : g->params()) r.grads.push_back(q->grad.clone());
    for (Param* q : g->buffers()) r.buffers.push_back(q->value.clone());
    return r;
  };
  const Pass plain_inf = pass(Semantics::inference, false, false), blocked_inf = pass(Semantics::inference, true, false);
  EXPECT_EQ(blocked_inf.held_c, cb);
  EXPECT_EQ(plain_inf.held_c, 0);
  EXPECT_TRUE(bitwise_equal(blocked_inf.y, plain_inf.y));
  EXPECT_TRUE(bitwise_equal(blocked_inf.dx, plain_inf.dx));
  EXPECT_EQ(blocked_inf.dx.channel_block(), 0) << "the input gradient comes back plain";
  const Pass plain = pass(Semantics::train, false, true), blocked = pass(Semantics::train, true, true);
  const Pass again = pass(Semantics::train, true, true);
  EXPECT_EQ(blocked.held_c, cb);
  const double tol = 1e-4;  // BatchNorm's summation order through 4 layers (above)
  EXPECT_TRUE(near_normwise(blocked.y, plain.y, tol));
  EXPECT_TRUE(near_normwise(blocked.dx, plain.dx, tol));
  ASSERT_EQ(blocked.grads.size(), plain.grads.size());
  for (std::size_t i = 0; i < plain.grads.size(); ++i) {
    EXPECT_TRUE(near_normwise(blocked.grads[i], plain.grads[i], tol)) << "gradient " << i;
    EXPECT_TRUE(bitwise_equal(again.grads[i], blocked.grads[i])) << "gradient " << i << " twice";
  }
  for (std::size_t i = 0; i < plain.buffers.size(); ++i)
    EXPECT_TRUE(near_normwise(blocked.buffers[i], plain.buffers[i], tol)) << "running statistic " << i;
}

// A grouped convolution is G independent convolutions over channel slices: the reference with
// groups against the reference run per group on sliced tensors, bit for bit (the same products
// summed in the same order).
TEST(GroupedConv, ReferenceEqualsPerGroupConvolutions) {
  for (int64_t groups : {2, 3, 6}) {
    Conv2dParams p;
    p.n = 2, p.c = 6, p.h = 7, p.w = 5, p.k = 6, p.r = 3, p.s = 2, p.stride_h = 2, p.pad_t = 1, p.pad_b = 0,
    p.pad_l = 1, p.pad_r = 1, p.groups = groups;
    Tensor x = random_tensor(p.x_shape(), DType::f32, 1, -1, 1), w = random_tensor(p.w_shape(), DType::f32, 2, -1, 1);
    Tensor b = random_tensor({p.k}, DType::f32, 3, -1, 1), y(p.y_shape(), DType::f32);
    conv2d_forward_ref(p, x, w, &b, y);
    Tensor dy = random_tensor(p.y_shape(), DType::f32, 4, -1, 1), dx(p.x_shape(), DType::f32);
    Tensor dw(p.w_shape(), DType::f32), db({p.k}, DType::f32);
    conv2d_backward_data_ref(p, dy, w, dx);
    conv2d_backward_weight_ref(p, x, dy, dw, &db);
    Conv2dParams q = p;
    q.groups = 1, q.c = p.c / groups, q.k = p.k / groups;
    const int64_t cg = q.c, kg = q.k, P = p.out_h(), Q = p.out_w();
    for (int64_t g = 0; g < groups; ++g) {
      Tensor xs(q.x_shape(), DType::f32), ws(q.w_shape(), DType::f32), bs({kg}, DType::f32), dys(q.y_shape(), DType::f32);
      for (int64_t n = 0; n < p.n; ++n)
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t i = 0; i < p.h * p.w; ++i)
            xs.data<float>()[(n * cg + c) * p.h * p.w + i] = x.data<float>()[(n * p.c + g * cg + c) * p.h * p.w + i];
      for (int64_t i = 0; i < ws.numel(); ++i) ws.data<float>()[i] = w.data<float>()[g * ws.numel() + i];
      for (int64_t k = 0; k < kg; ++k) bs.data<float>()[k] = b.data<float>()[g * kg + k];
      for (int64_t n = 0; n < p.n; ++n)
        for (int64_t k = 0; k < kg; ++k)
          for (int64_t i = 0; i < P * Q; ++i)
            dys.data<float>()[(n * kg + k) * P * Q + i] = dy.data<float>()[(n * p.k + g * kg + k) * P * Q + i];
      Tensor ys(q.y_shape(), DType::f32), dxs(q.x_shape(), DType::f32), dws(q.w_shape(), DType::f32), dbs({kg}, DType::f32);
      conv2d_forward_ref(q, xs, ws, &bs, ys);
      conv2d_backward_data_ref(q, dys, ws, dxs);
      conv2d_backward_weight_ref(q, xs, dys, dws, &dbs);
      for (int64_t n = 0; n < p.n; ++n)
        for (int64_t k = 0; k < kg; ++k)
          for (int64_t i = 0; i < P * Q; ++i)
            ASSERT_EQ(ys.data<float>()[(n * kg + k) * P * Q + i], y.data<float>()[(n * p.k + g * kg + k) * P * Q + i])
                << "groups " << groups << " group " << g;
      for (int64_t n = 0; n < p.n; ++n)
        for (int64_t c = 0; c < cg; ++c)
          for (int64_t i = 0; i < p.h * p.w; ++i)
            ASSERT_EQ(dxs.data<float>()[(n * cg + c) * p.h * p.w + i], dx.data<float>()[(n * p.c + g * cg + c) * p.h * p.w + i]);
      for (int64_t i = 0; i < dws.numel(); ++i) ASSERT_EQ(dws.data<float>()[i], dw.data<float>()[g * dws.numel() + i]);
      for (int64_t k = 0; k < kg; ++k) ASSERT_EQ(dbs.data<float>()[k], db.data<float>()[g * kg + k]);
    }
  }
}

// The fast conv kernels refuse groups (the registry then runs the reference): a grouped layer
// under the torch preset's onednn backend gives the reference's bits.
TEST(GroupedConv, FastBackendsFallBackToTheReference) {
  ExecContext exec;
  Conv2dParams p;
  p.c = 4, p.k = 8, p.groups = 4;
  for (KernelBackend b : {KernelBackend::onednn, KernelBackend::eigen})
    EXPECT_STREQ(exec.kernels.conv2d.select(b, p, DType::f32).name, "reference") << backend_name(b);
  p.groups = 1;
  EXPECT_STRNE(exec.kernels.conv2d.select(KernelBackend::onednn, p, DType::f32).name, "reference");
}

TEST(ClipActivation, Relu6ValuesAndTorchHardtanhGradientEdges) {
  ActivationParams a;
  a.kind = ActKind::clip;
  a.clip_min = 0.0, a.clip_max = 6.0;
  Tensor x = Tensor::from<float>({6}, {-1.f, 0.f, 3.f, 6.f, 7.f, std::nanf("")});
  Tensor y(x.shape(), DType::f32), dy = Tensor::from<float>({6}, {1, 1, 1, 1, 1, 1}), dx(x.shape(), DType::f32);
  activation_forward_ref(a, x, y);
  activation_backward_ref(a, x, y, dy, dx);
  const float want_y[] = {0, 0, 3, 6, 6};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(y.data<float>()[i], want_y[i]);
  EXPECT_TRUE(std::isnan(y.data<float>()[5]));  // torch.clamp / Hardtanh propagate NaN
  // nn.ReLU6 (Hardtanh) passes nothing at the bounds: PyTorch 1.13's gradient at [-1, 0, 3, 6, 7]
  // is [0, 0, 1, 0, 0] (torch.clamp's would be [0, 1, 1, 1, 0]; docs/GRAPH_MODELS.md)
  const float want_dx[] = {0, 0, 1, 0, 0};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(dx.data<float>()[i], want_dx[i]) << "x = " << x.data<float>()[i];
}

std::string error_of(const json& spec) {
  Policy p = Policy::torch();
  Rng rng(p.rng_engine, 1);
  try {
    build_graph(spec, p, rng);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GraphSpec, BadGraphsAreRefusedNamingTheNode) {
  json s = mixed_spec();
  s["nodes"][3]["inputs"] = {"c", "later"};  // a dangling name (or a cycle: read before written)
  EXPECT_THAT(error_of(s), testing::HasSubstr("node 'res' reads 'later', which no earlier node writes"));
  s = mixed_spec();
  std::swap(s["nodes"][0], s["nodes"][1]);  // out of order: the clip reads 'a' before c1 writes it
  EXPECT_THAT(error_of(s), testing::HasSubstr("node 'r6' reads 'a'"));
  s = mixed_spec();
  s["nodes"][1]["op"] = "softsign";
  EXPECT_THAT(error_of(s), testing::HasSubstr("node 'r6': unknown op 'softsign'"));
  s = mixed_spec();
  s["nodes"][0]["ceil_mode"] = 1;
  EXPECT_THAT(error_of(s), testing::HasSubstr("node 'c1': unknown attribute 'ceil_mode'"));
  s = mixed_spec();
  s["nodes"][0]["groups"] = 3;
  EXPECT_THAT(error_of(s), testing::HasSubstr("node 'c1': groups 3"));
  s = mixed_spec();
  s["nodes"][7]["inputs"] = {"g", "scale"};
  EXPECT_THAT(error_of(s), testing::HasSubstr("node 'cat': concat inputs [4,6,6] and [4,1,1] differ outside axis 1 (per-sample shapes)"));
  s = mixed_spec();
  s["nodes"][9]["shape"] = {95};
  EXPECT_THAT(error_of(s), testing::HasSubstr("node 'flat' reshapes"));
  s = mixed_spec();
  s["nodes"][3]["inputs"] = {"c", "j"};
  EXPECT_THAT(error_of(s), testing::HasSubstr("node 'res'"));
  s = mixed_spec();
  s["nodes"][1]["name"] = "c1x";
  s["nodes"][1]["output"] = "a";  // written twice
  EXPECT_THAT(error_of(s), testing::HasSubstr("value 'a' is written twice"));
}

TEST(GraphModelFile, RoundTripKeepsTheSpecWeightsAndConstants) {
  Policy p = Policy::torch();
  json spec = mixed_spec();
  Model m = build_model(kGraphModelName, p, 5, graph_args(spec));
  GraphLayer* g = layer_as<GraphLayer>(m.net->layer(0));
  ASSERT_NE(g, nullptr);
  const_cast<Tensor&>(g->constant(g->find_value("shift"))) = random_tensor({6}, DType::f32, 6, -0.3, 0.3);
  const std::string path = (std::filesystem::temp_directory_path() / "dl_graph_model.dlm").string();
  save_model(path, m, {});
  LoadedModel back = load_model(path);
  std::filesystem::remove(path);
  EXPECT_EQ(back.model.name, "graph");
  Tensor x = random_tensor({2, 4, 6, 6}, DType::f32, 9, -1, 1);
  ExecContext exec;
  RunContext c1 = RunContext::inference(exec), c2 = RunContext::inference(exec);
  Tensor y1 = m.forward(c1, x), y2 = back.model.forward(c2, x);
  for (int64_t i = 0; i < y1.numel(); ++i) EXPECT_EQ(y1.at(i), y2.at(i));
  // the same graph under another preset (drift's rebuild): model_args carries the spec
  Model t = build_model(m.name, Policy::preset_named("tensorflow"), 0, model_args(m));
  EXPECT_EQ(t.num_params(), m.num_params());
}

// The reader bounds a graph's parameters by the bytes its file holds, counting exactly what is
// saved: a bias-free convolution and BatchNorm's four tensors (under tensorflow's zero-debias,
// six and a count) load; one byte fewer than the tensors need is refused before building.
TEST(GraphModelFile, TheParameterBoundCountsExactlyWhatTheFileHolds) {
  const json spec = json::parse(R"({
    "input": "x", "input_shape": [3, 6, 6],
    "nodes": [
      {"name": "c", "op": "conv2d", "inputs": ["x"], "output": "a", "out_channels": 4, "kernel": [3, 3], "bias": false},
      {"name": "bn", "op": "batchnorm", "inputs": ["a"], "output": "b"},
      {"name": "gap", "op": "global_avg_pool", "inputs": ["b"], "output": "g"},
      {"name": "fc", "op": "dense", "inputs": ["g"], "output": "y", "units": 5, "bias": false}
    ]})");
  for (const char* preset : {"torch", "tensorflow"}) {
    const Policy p = Policy::preset_named(preset);
    Model m = build_model(kGraphModelName, p, 5, graph_args(spec));
    uint64_t bytes = 0;
    for (auto& np : m.net->named_params()) bytes += np.second->value.nbytes();
    for (auto& np : m.net->named_buffers()) bytes += np.second->value.nbytes();
    Rng rng(p.rng_engine, 1);
    EXPECT_NO_THROW(build_graph(spec, p, rng, bytes)) << preset;
    try {
      build_graph(spec, p, rng, bytes - 1);
      ADD_FAILURE() << preset << ": one byte short was accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), testing::HasSubstr("the graph's parameters need more than")) << e.what();
    }
    const std::string path = (std::filesystem::temp_directory_path() / "dl_graph_bound.dlm").string();
    save_model(path, m, {});
    EXPECT_NO_THROW(load_model(path)) << preset;
    std::filesystem::remove(path);
  }
}



// What a spec states freezes the knob for its node; what it leaves out, the Policy decides (the
// importers' tables in docs/GRAPH_MODELS.md rest on this).
TEST(GraphSpec, StatedAttributesFreezeKnobsAndOmittedOnesFollowThePolicy) {
  const json spec = json::parse(R"({
    "input": "x", "input_shape": [2, 5, 5],
    "nodes": [
      {"name": "stated", "op": "conv2d", "inputs": ["x"], "output": "a", "out_channels": 2, "kernel": [3, 3],
       "stride": [2, 2], "pads": [0, 1, 0, 1], "flip": false},
      {"name": "open", "op": "conv2d", "inputs": ["a"], "output": "b", "out_channels": 2, "kernel": [3, 3],
       "stride": [2, 2], "padding": "same"},
      {"name": "bn_stated", "op": "batchnorm", "inputs": ["b"], "output": "c", "eps": 0.01, "momentum": 0.5},
      {"name": "bn_open", "op": "batchnorm", "inputs": ["c"], "output": "d"},
      {"name": "flat", "op": "flatten", "inputs": ["d"], "output": "e"},
      {"name": "flat_stated", "op": "flatten", "inputs": ["d"], "output": "f", "order": "chw"},
      {"name": "sum", "op": "add", "inputs": ["e", "f"], "output": "y"}
    ]})");
  for (const char* preset : {"torch", "tensorflow", "theano"}) {
    const Policy p = Policy::preset_named(preset);
    Rng rng(p.rng_engine, 1);
    auto g = build_graph(spec, p, rng);
    auto* stated = layer_as<Conv2dLayer>(*g->node(0).layer);
    auto* open = layer_as<Conv2dLayer>(*g->node(1).layer);
    EXPECT_FALSE(stated->op_params().flip) << preset;
    EXPECT_EQ(stated->op_params().pad_b, 1) << preset;
    EXPECT_EQ(open->op_params().flip, p.conv_kernel_flip) << preset;
    // the open node's 'same' (k=3, stride 2, 2x2 input: total pad 1) splits by the preset's rule:
    // TF 0/1, Theano's half-then-crop 1/0, PyTorch code's padding=1 1/1
    const std::pair<int64_t, int64_t> want = std::string(preset) == "tensorflow" ? std::make_pair(0, 1)
                                             : std::string(preset) == "theano"   ? std::make_pair(1, 0)
                                                                                 : std::make_pair(1, 1);
    EXPECT_EQ(open->op_params().pad_t, want.first) << preset;
    EXPECT_EQ(open->op_params().pad_b, want.second) << preset;
    EXPECT_EQ(layer_as<BatchNormLayer>(*g->node(2).layer)->op_params().eps, 0.01) << preset;
    EXPECT_EQ(layer_as<BatchNormLayer>(*g->node(3).layer)->op_params().eps, p.bn_eps) << preset;
    EXPECT_EQ(layer_as<FlattenLayer>(*g->node(4).layer)->order(), p.flatten_order) << preset;
    EXPECT_EQ(layer_as<FlattenLayer>(*g->node(5).layer)->order(), FlattenOrder::chw) << preset;
  }
}



// Localisation opens a graph into its nodes: the same weights under the tensorflow and theano
// presets (weights converted: theano's flip rotates them) agree through a convolution whose pads
// the spec states and part at the one whose 'same' padding each preset splits its own way
// (after vs before the odd pixel), which localise() names first.
TEST(GraphDrift, LocalisationNamesTheFirstNodeWhosePolicyDecidedSemanticsDiffer) {
  // 9 is odd: 'same' with a 2x2 kernel and stride 2 pads one pixel, which the presets split apart
  const json spec = json::parse(R"({
    "input": "x", "input_shape": [2, 9, 9],
    "nodes": [
      {"name": "stated_pads", "op": "conv2d", "inputs": ["x"], "output": "a", "out_channels": 3, "kernel": [3, 3],
       "pads": [1, 1, 1, 1]},
      {"name": "act", "op": "relu", "inputs": ["a"], "output": "b"},
      {"name": "same_s2", "op": "conv2d", "inputs": ["b"], "output": "c", "out_channels": 3, "kernel": [2, 2],
       "stride": [2, 2], "padding": "same"},
      {"name": "flat", "op": "flatten", "inputs": ["c"], "output": "d"},
      {"name": "fc", "op": "dense", "inputs": ["d"], "output": "y", "units": 4}
    ]})");
  Model tf = build_model(kGraphModelName, Policy::preset_named("tensorflow"), 3, graph_args(spec));
  Model th = rebuild_under(tf, Policy::preset_named("theano"), true);
  ExecContext exec;
  const Tensor x = random_tensor({4, 2, 9, 9}, DType::f32, 11, -1, 1);
  const Localisation loc = localise(tf, th, exec, x, 1e-5);
  ASSERT_EQ(loc.layers.size(), 5u);
  ASSERT_GE(loc.first_divergent, 0);
  EXPECT_EQ(loc.layers[static_cast<std::size_t>(loc.first_divergent)].layer.rfind("same_s2: conv2d", 0), 0u)
      << loc.layers[static_cast<std::size_t>(loc.first_divergent)].layer;
  // the stated-pads convolution before it agrees (float32 rounding: kernels rotated exactly)
  EXPECT_LE(loc.layers[0].max_rel, 1e-5);
}



// The same weights under a preset whose BatchNorm keeps more state (tensorflow's zero-debias: five
// buffers against torch's two): drift's rebuild carries the layers and the constants over (it
// compared the graph's whole buffer lists and refused, found by running docs/GRAPH_MODELS.md's
// example).
TEST(GraphDrift, RebuildUnderAPresetWithOtherBatchNormStateCarriesWeightsAndConstants) {
  const json spec = json::parse(R"({
    "input": "x", "input_shape": [2, 5, 5],
    "constants": [{"name": "shift", "shape": [1, 3, 1, 1]}],
    "nodes": [
      {"name": "c", "op": "conv2d", "inputs": ["x"], "output": "a", "out_channels": 3, "kernel": [3, 3], "bias": false,
       "flip": false},
      {"name": "bn", "op": "batchnorm", "inputs": ["a"], "output": "b", "eps": 0.001},
      {"name": "s", "op": "add", "inputs": ["b", "shift"], "output": "d"},
      {"name": "gap", "op": "global_avg_pool", "inputs": ["d"], "output": "y"}
    ]})");
  Model torch = build_model(kGraphModelName, Policy::torch(), 2, graph_args(spec));
  GraphLayer* g = layer_as<GraphLayer>(torch.net->layer(0));
  const_cast<Tensor&>(g->constant(g->find_value("shift"))) = random_tensor({1, 3, 1, 1}, DType::f32, 3, -1, 1);
  g->node(1).layer->buffers()[0]->value = random_tensor({3}, DType::f32, 4, -0.5, 0.5);  // running mean
  Model tf = rebuild_under(torch, Policy::preset_named("tensorflow"), true);
  EXPECT_EQ(layer_as<GraphLayer>(tf.net->layer(0))->node(1).layer->buffers().size(), 5u);  // zero-debias state
  ExecContext exec;
  const Tensor x = random_tensor({3, 2, 5, 5}, DType::f32, 5, -1, 1);
  RunContext c1 = RunContext::inference(exec), c2 = RunContext::inference(exec);
  const Tensor a = torch.forward(c1, x), b = tf.forward(c2, x);
  // inference semantics: the same running statistics, eps stated, no flip: the same outputs up to
  // the kernels' rounding (the presets pick other conv and BatchNorm backends)
  for (int64_t i = 0; i < a.numel(); ++i) EXPECT_NEAR(a.at(i), b.at(i), 1e-5) << i;
}

}  // namespace
}  // namespace driftlab
