// The autocast knob (engine/layers/math_mode.h): which format each layer's output is held in, and
// that a network under autocast computes exactly what its float32 layers compute when every
// 16-bit tensor is rounded: the inputs and weights of convolutions and dense layers, the result of
// every layer whose output is held in the format, and in the backward every gradient of such a
// tensor and the parameter gradients of the autocast ops. The references here run the float32
// layers one by one with those roundings written out (no autocast), so the tests check the
// mechanism bit for bit; PyTorch's own autocast is the oracle in tests/oracles/test_autocast_oracle_torch.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "convert/onnx_export.h"
#include "convert/onnx_graph_import.h"
#include "core/ops/reduced_precision.h"
#include "engine/cuda/device_net.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/graph_layer.h"
#include "engine/layers/math_mode.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "engine/random.h"
#include "models/models.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

// ReLU -> conv 3x3 -> BatchNorm -> ReLU -> max-pool -> flatten -> dense 5 on 2x6x6 inputs: one
// layer before the first autocast op, BatchNorm and pooling after it.
std::unique_ptr<Sequential> small_net(const Policy& p, uint64_t seed) {
  Rng rng(p.rng_engine, seed);
  auto net = std::make_unique<Sequential>(Shape{2, 6, 6});
  net->add(std::make_unique<ActivationLayer>(ActKind::relu, net->current_shape(), p));
  Conv2dSpec cs;
  cs.out_channels = 4;
  cs.kernel_h = cs.kernel_w = 3;
  net->add(std::make_unique<Conv2dLayer>(cs, net->current_shape(), p, rng));
  net->add(std::make_unique<BatchNormLayer>(net->current_shape(), p));
  net->add(std::make_unique<ActivationLayer>(ActKind::relu, net->current_shape(), p));
  net->add(std::make_unique<Pool2dLayer>(Pool2dSpec{}, net->current_shape(), p));
  net->add(std::make_unique<FlattenLayer>(net->current_shape(), p));
  net->add(std::make_unique<DenseLayer>(5, net->current_shape(), p, rng));
  return net;
}

std::vector<std::string> formats_of(Sequential& net) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < net.size(); ++i) out.push_back(math_mode_name(net.output_format(i)));
  return out;
}

TEST(Autocast, FormatsFollowTorchAutocastsOpLists) {
  using testing::Each;
  using testing::ElementsAre;
  EXPECT_THAT(formats_of(*small_net(Policy::parse("torch,autocast=bfloat16"), 1)),
              ElementsAre("float32", "bfloat16", "bfloat16", "bfloat16", "bfloat16", "bfloat16", "bfloat16"));
  EXPECT_THAT(formats_of(*small_net(Policy::parse("torch,autocast=float16"), 1)),
              ElementsAre("float32", "float16", "float16", "float16", "float16", "float16", "float16"));
  EXPECT_THAT(formats_of(*small_net(Policy::torch(), 1)), Each("float32"));
  for (const char* arch : {"lenet5", "resnet20"}) {
    Model m = build_model(arch, Policy::parse("torch,autocast=bfloat16"), 1);
    EXPECT_THAT(formats_of(*m.net), Each("bfloat16")) << arch;  // each begins with a convolution
    EXPECT_THAT(formats_of(*build_model(arch, Policy::torch(), 1).net), Each("float32")) << arch;
  }
  // A residual block's paths take its input's format: after a convolution, bfloat16 inside and
  // out; as the first layer, the identity shortcut brings the float32 input, and bfloat16 + float32
  // is float32 (type promotion), while the main path inside is bfloat16 from its first convolution.
  const Policy p = Policy::parse("torch,autocast=bfloat16");
  Rng rng(p.rng_engine, 2);
  auto main = std::make_unique<Sequential>(Shape{4, 5, 5});
  Conv2dSpec cs;
  cs.out_channels = 4;
  cs.kernel_h = cs.kernel_w = 3;
  cs.pad = PadMode::same;
  main->add(std::make_unique<Conv2dLayer>(cs, main->current_shape(), p, rng));
  main->add(std::make_unique<BatchNormLayer>(main->current_shape(), p));
  Sequential* inner = main.get();
  Sequential first(Shape{4, 5, 5});
  first.add(std::make_unique<ResidualLayer>(std::move(main), Shortcut::identity, p, rng));
  EXPECT_THAT(formats_of(first), ElementsAre("float32"));
  EXPECT_THAT(formats_of(*inner), ElementsAre("bfloat16", "bfloat16"));
}

// Rounds every element to bfloat16 (values already in the format stay).
Tensor bf16(const Tensor& t) {
  Tensor r = t.clone();
  for (int64_t j = 0; j < r.numel(); ++j) r.data<float>()[j] = round_to_bf16(r.data<float>()[j]);
  return r;
}

// The float32 twin of an autocast network: the same parameters (the same seed), those of conv2d
// and dense layers rounded to bfloat16, which is what autocast's operand cast gives them.
void round_autocast_params(Sequential& net) {
  for (std::size_t i = 0; i < net.size(); ++i)
    if (net.layer(i).kind() == "conv2d" || net.layer(i).kind() == "dense")
      for (Param* p : net.layer(i).params()) p->value = bf16(p->value);
}

// Forward and backward of `net` layer by layer with the roundings written out: an autocast op's
// input rounded (its operand), every layer's input rounded where the previous output is 16-bit
// (`reduced`), and in the backward each incoming
// gradient of a 16-bit output rounded, conv2d / dense input and parameter gradients rounded.
struct ByHand {
  Tensor out, dx;
};
// input_reduced: the network's input is held in the format too (autocast_input_cast=every_layer),
// so it is rounded before the first layer and its gradient after the last backward.
ByHand by_hand(Sequential& net, const std::vector<bool>& reduced, const Tensor& x, const Tensor& dy, Semantics s,
               bool input_reduced = false) {
  ExecContext exec;
  exec.channel_blocks = false;
  RunContext ctx = RunContext::recorded(exec, s);
  const std::size_t n = net.size();
  auto autocast_op = [&](std::size_t i) { return net.layer(i).kind() == "conv2d" || net.layer(i).kind() == "dense"; };
  Tensor h = x;
  for (std::size_t i = 0; i < n; ++i) {
    if (autocast_op(i) || (i > 0 ? reduced[i - 1] : input_reduced)) h = bf16(h);
    h = net.layer(i).forward(ctx, h);
  }
  ByHand r;
  r.out = reduced[n - 1] ? bf16(h) : h;
  Tensor g = dy;
  for (std::size_t i = n; i-- > 0;) {
    if (reduced[i]) g = bf16(g);
    ctx.need_dx = true;
    g = net.layer(i).backward(ctx, g);
    if (autocast_op(i)) {
      g = bf16(g);
      for (Param* p : net.layer(i).params()) p->grad = bf16(p->grad);
    }
  }
  r.dx = input_reduced ? bf16(g) : g;
  return r;
}

void expect_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  int64_t differ = 0;
  for (int64_t j = 0; j < got.numel(); ++j) differ += got.data<float>()[j] != want.data<float>()[j];
  EXPECT_EQ(differ, 0) << what << ": " << differ << " of " << got.numel() << " elements differ";
}

void check_against_by_hand(Sequential& ac, Sequential& twin, const Tensor& x, Semantics s, const std::string& what,
                           bool input_reduced = false) {
  std::vector<bool> reduced;
  for (std::size_t i = 0; i < ac.size(); ++i) reduced.push_back(ac.output_format(i) == MathMode::bfloat16);
  ExecContext exec;
  exec.channel_blocks = false;
  RunContext ctx = RunContext::recorded(exec, s);
  const Tensor y = ac.forward(ctx, x);
  const Tensor dy = random_tensor(y.shape(), DType::f32, 7);
  ac.zero_grad();
  const Tensor dx = ac.backward(ctx, dy);
  twin.zero_grad();
  const ByHand want = by_hand(twin, reduced, x, dy, s, input_reduced);
  expect_bits(y, want.out, what + ": output");
  expect_bits(dx, want.dx, what + ": dL/dx");
  const auto a = ac.named_params(), b = twin.named_params();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) expect_bits(a[i].second->grad, b[i].second->grad, what + ": " + a[i].first);
}

TEST(Autocast, ForwardAndBackwardAreTheFloat32LayersWithEvery16BitTensorRounded) {
  const Tensor x = random_tensor({3, 2, 6, 6}, DType::f32, 5);
  for (Semantics s : {Semantics::train, Semantics::inference}) {
    auto ac = small_net(Policy::parse("torch,autocast=bfloat16"), 3);
    auto twin = small_net(Policy::torch(), 3);
    round_autocast_params(*twin);
    check_against_by_hand(*ac, *twin, x, s, std::string("small net, ") + semantics_name(s));
  }
  Model ac = build_model("lenet5", Policy::parse("torch,autocast=bfloat16"), 4);
  Model twin = build_model("lenet5", Policy::torch(), 4);
  round_autocast_params(*twin.net);
  check_against_by_hand(*ac.net, *twin.net, random_tensor({4, 1, 28, 28}, DType::f32, 6, 0.0, 1.0), Semantics::train,
                        "lenet5");
}

// The same network without autocast differs: the test above cannot pass by rounding nothing.
TEST(Autocast, ChangesTheResult) {
  const Tensor x = random_tensor({3, 2, 6, 6}, DType::f32, 5);
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  const Tensor a = small_net(Policy::parse("torch,autocast=bfloat16"), 3)->forward(ctx, x);
  const Tensor b = small_net(Policy::torch(), 3)->forward(ctx, x);
  int64_t differ = 0;
  for (int64_t j = 0; j < a.numel(); ++j) differ += a.data<float>()[j] != b.data<float>()[j];
  EXPECT_GT(differ, a.numel() / 2);
}

// A model's logits and dL/dx under inference semantics for dy = ((i % 7) - 3) / 8, and when asked
// every parameter's gradient.
std::pair<Tensor, Tensor> logits_and_dx(Model& m, const Tensor& x, std::vector<Tensor>* grads = nullptr) {
  ExecContext exec;
  RunContext ctx = RunContext::recorded(exec, Semantics::inference);
  ctx.input_grad = true;
  const Tensor y = m.forward(ctx, x);
  Tensor dy(y.shape(), DType::f32);
  for (int64_t i = 0; i < dy.numel(); ++i) dy.data<float>()[i] = static_cast<float>((i % 7) - 3) / 8.f;
  m.net->zero_grad();
  const Tensor dx = m.net->backward(ctx, dy);
  if (grads)
    for (auto& np : m.net->named_params()) grads->push_back(np.second->grad.clone());
  return {y, dx};
}

// A graph model under autocast computes what the same layers do in a Sequential: LeNet-5 and
// ResNet-20b exported to ONNX and imported as graphs (every node a graph node, the residual adds
// graph adds) give the zoo model's logits and input gradient under torch,autocast=bfloat16 bit
// for bit, LeNet-5 its parameter gradients too; every value the graph holds in bfloat16 is a
// bfloat16 number, and the float32 graph differs (the test tells the modes apart). The same for
// math_conv=tf32 with math_matmul=float16 (each op rounds its own operands and result).
TEST(Autocast, GraphModelsComputeWhatTheSequentialDoes) {
  for (const char* arch : {"lenet5", "resnet20b"}) {
    SCOPED_TRACE(arch);
    const std::string policy = "torch,autocast=bfloat16";
    Model source = build_model(arch, Policy::torch(), 7);
    const std::string bytes = convert::export_onnx(source, {}).bytes;
    auto graph_under = [&](const std::string& pol) {
      convert::OnnxGraphOptions o;
      o.policy = pol;
      return convert::onnx_graph_model(convert::import_onnx_graph_bytes(bytes, "m.onnx", o), pol);
    };
    Model g = graph_under(policy), g32 = graph_under("torch"), z = build_model(arch, Policy::parse(policy), 7);
    auto& graph = static_cast<GraphLayer&>(g.net->layer(0));
    EXPECT_EQ(graph.value_format(graph.output_value()), MathMode::bfloat16);
    EXPECT_EQ(graph.value_format(0), MathMode::float32);
    Shape xs{4};
    xs.insert(xs.end(), z.input_shape.begin(), z.input_shape.end());
    const Tensor x = random_tensor(xs, DType::f32, 11, 0.0, 1.0);
    std::vector<Tensor> gg, zg;
    const auto [yg, dxg] = logits_and_dx(g, x, &gg);
    const auto [yz, dxz] = logits_and_dx(z, x, &zg);
    const auto [y32, dx32] = logits_and_dx(g32, x);
    EXPECT_TRUE(bitwise_equal(yg, yz));
    EXPECT_TRUE(bitwise_equal(dxg, dxz));
    EXPECT_FALSE(bitwise_equal(yg, y32));
    for (int64_t i = 0; i < yg.numel(); ++i) EXPECT_EQ(yg.at(i), round_to_bf16(static_cast<float>(yg.at(i)))) << i;
    if (std::string(arch) == "lenet5") {
      ASSERT_EQ(gg.size(), zg.size());
      for (std::size_t i = 0; i < gg.size(); ++i) EXPECT_TRUE(bitwise_equal(gg[i], zg[i])) << "parameter " << i;
    }
    // every value the graph holds in bfloat16, as one forward computed it
    ExecContext exec;
    RunContext ctx = RunContext::inference(exec);
    const std::vector<Tensor> outs = graph.node_outputs(ctx, x);
    int reduced = 0;
    for (std::size_t i = 0; i < outs.size(); ++i) {
      if (graph.value_format(graph.node(i).output) != MathMode::bfloat16) continue;
      ++reduced;
      for (int64_t j = 0; j < outs[i].numel(); ++j)
        ASSERT_EQ(outs[i].at(j), round_to_bf16(static_cast<float>(outs[i].at(j)))) << "node " << graph.node(i).name;
    }
    EXPECT_EQ(reduced, static_cast<int>(outs.size()));  // every node: a conv first, nothing float32 after
    // The per-op math modes (no format flowing) act in a graph's layers as in the zoo's too.
    const std::string modes = "torch,math_conv=tf32,math_matmul=float16";
    Model gm = graph_under(modes), zm = build_model(arch, Policy::parse(modes), 7);
    const auto [ygm, dxgm] = logits_and_dx(gm, x);
    const auto [yzm, dxzm] = logits_and_dx(zm, x);
    EXPECT_TRUE(bitwise_equal(ygm, yzm));
    EXPECT_TRUE(bitwise_equal(dxgm, dxzm));
    EXPECT_FALSE(bitwise_equal(ygm, y32));
  }
}

// The promotion rule of a graph's multi-input ops: a 16-bit result only when every data operand
// is in that format and no float32 constant with axes joins (a 0-dim constant does not promote).
TEST(Autocast, GraphOpsPromoteAsPyTorchsTypePromotion) {
  const std::string spec = R"({"input": "x", "input_shape": [4], "nodes": [
      {"name": "d1", "op": "dense", "inputs": ["x"], "output": "a", "units": 3},
      {"name": "d2", "op": "dense", "inputs": ["x"], "output": "b", "units": 3},
      {"name": "ab", "op": "add", "inputs": ["a", "b"], "output": "ab"},
      {"name": "ax", "op": "concat", "inputs": ["a", "x"], "output": "ax", "axis": 1},
      {"name": "s", "op": "mul", "inputs": ["a", "half"], "output": "s"},
      {"name": "v", "op": "add", "inputs": ["a", "vec"], "output": "v"},
      {"name": "r", "op": "relu", "inputs": ["ab"], "output": "r"}],
    "constants": [{"name": "half", "shape": []}, {"name": "vec", "shape": [3]}],
    "output": "r"})";
  ModelArgs args;
  args.graph = spec;
  Model m = build_model("graph", Policy::parse("torch,autocast=bfloat16"), 1, args);
  auto& g = static_cast<GraphLayer&>(m.net->layer(0));
  auto fmt = [&](const char* v) { return g.value_format(g.find_value(v)); };
  EXPECT_EQ(fmt("x"), MathMode::float32);
  EXPECT_EQ(fmt("a"), MathMode::bfloat16);
  EXPECT_EQ(fmt("ab"), MathMode::bfloat16);  // bfloat16 + bfloat16
  EXPECT_EQ(fmt("ax"), MathMode::float32);   // cat(bfloat16, float32): promoted
  EXPECT_EQ(fmt("s"), MathMode::bfloat16);   // times a 0-dim constant: a scalar
  EXPECT_EQ(fmt("v"), MathMode::float32);    // plus a float32 vector
  EXPECT_EQ(fmt("r"), MathMode::bfloat16);   // ReLU keeps its input's format
}

// BatchNorm -> ReLU -> flatten -> dense 5 on 2x4x4 inputs: a first layer whose result depends on
// whether its input was cast.
std::unique_ptr<Sequential> bn_first_net(const Policy& p, uint64_t seed) {
  Rng rng(p.rng_engine, seed);
  auto net = std::make_unique<Sequential>(Shape{2, 4, 4});
  net->add(std::make_unique<BatchNormLayer>(net->current_shape(), p));
  net->add(std::make_unique<ActivationLayer>(ActKind::relu, net->current_shape(), p));
  net->add(std::make_unique<FlattenLayer>(net->current_shape(), p));
  net->add(std::make_unique<DenseLayer>(5, net->current_shape(), p, rng));
  return net;
}

// autocast_input_cast=every_layer (Keras's mixed policy: every layer casts its floating inputs to
// the compute dtype): the model's input is rounded before its first layer, whatever its kind, so
// every layer's output is held in the format, and dL/dx is the format's. Checked against the
// float32 layers with that rounding written out (forward, dL/dx, every parameter gradient, both
// semantics); listed_ops (PyTorch) keeps the layers before the first dense layer float32, and the
// two give other logits. The tensorflow preset takes every_layer, the torch preset listed_ops.
TEST(Autocast, EveryLayerCastsTheModelInputAsKerasMixedPolicyDoes) {
  using testing::Each;
  using testing::ElementsAre;
  const Policy keras = Policy::parse("torch,autocast=bfloat16,autocast_input_cast=every_layer");
  const Policy torch = Policy::parse("torch,autocast=bfloat16");
  EXPECT_EQ(Policy::tensorflow().autocast_input_cast, AutocastInputCast::every_layer);
  EXPECT_EQ(Policy::theano().autocast_input_cast, AutocastInputCast::every_layer);
  EXPECT_EQ(Policy::torch().autocast_input_cast, AutocastInputCast::listed_ops);
  auto cast = [](std::unique_ptr<Sequential> net, const Policy& p) {
    net->apply_input_cast(p);
    return net;
  };
  EXPECT_THAT(formats_of(*cast(bn_first_net(keras, 1), keras)), Each("bfloat16"));
  EXPECT_THAT(formats_of(*cast(bn_first_net(torch, 1), torch)), ElementsAre("float32", "float32", "float32", "bfloat16"));
  EXPECT_THAT(formats_of(*cast(small_net(keras, 1), keras)), Each("bfloat16"));  // its first ReLU too
  // Off, apply_input_cast does nothing whatever the rule.
  EXPECT_THAT(formats_of(*cast(bn_first_net(Policy::tensorflow(), 1), Policy::tensorflow())), Each("float32"));

  const Tensor x = random_tensor({3, 2, 4, 4}, DType::f32, 5);
  for (Semantics s : {Semantics::train, Semantics::inference}) {
    for (bool every : {true, false}) {
      const Policy& p = every ? keras : torch;
      auto ac = cast(bn_first_net(p, 3), p);
      auto twin = bn_first_net(Policy::torch(), 3);
      round_autocast_params(*twin);
      check_against_by_hand(*ac, *twin, x, s,
                            std::string(every ? "every_layer, " : "listed_ops, ") + semantics_name(s), every);
    }
    auto ac = cast(small_net(keras, 3), keras);
    auto twin = small_net(Policy::torch(), 3);
    round_autocast_params(*twin);
    check_against_by_hand(*ac, *twin, random_tensor({3, 2, 6, 6}, DType::f32, 5), s,
                          std::string("small net, every_layer, ") + semantics_name(s), true);
  }
  // Under train semantics (BatchNorm's batch statistics of the rounded or the float32 input) the two
  // rules give other logits.
  ExecContext exec;
  RunContext ctx = RunContext::recorded(exec, Semantics::train);
  const Tensor a = cast(bn_first_net(keras, 3), keras)->forward(ctx, x);
  const Tensor b = cast(bn_first_net(torch, 3), torch)->forward(ctx, x);
  int64_t differ = 0;
  for (int64_t j = 0; j < a.numel(); ++j) differ += a.data<float>()[j] != b.data<float>()[j];
  EXPECT_GT(differ, 0) << "the two rules gave the same logits";
  // A model whose first layer is a convolution computes the same under both (the convolution casts
  // its input either way): LeNet-5's logits and dL/dx under the tensorflow preset with each rule.
  const Tensor xl = random_tensor({2, 1, 28, 28}, DType::f32, 6, 0.0, 1.0);
  auto lenet = [&](const char* rule) {
    Model m = build_model("lenet5", Policy::parse(std::string("tensorflow,autocast=bfloat16,autocast_input_cast=") + rule), 4);
    return logits_and_dx(m, xl);
  };
  const auto [y1, dx1] = lenet("every_layer");
  const auto [y2, dx2] = lenet("listed_ops");
  expect_bits(y1, y2, "lenet5 logits");
  expect_bits(dx1, dx2, "lenet5 dL/dx");
}

// Under Keras's rule a graph's multi-input ops cast every operand, constants included, to the
// format (a Keras Add / Multiply / Concatenate casts its inputs; a Rescaling casts its scale):
// with the model's input cast, every value is held in bfloat16, and each op computes on the
// constants rounded. Checked against the float32 graph on those roundings written out: x rounded,
// the dense layers' operands rounded (their results are), each op's constants rounded and its
// result rounded.
TEST(Autocast, GraphOpsCastEveryOperandUnderKerasRule) {
  const std::string spec = R"({"input": "x", "input_shape": [4], "nodes": [
      {"name": "d1", "op": "dense", "inputs": ["x"], "output": "a", "units": 3},
      {"name": "s", "op": "mul", "inputs": ["a", "third"], "output": "s"},
      {"name": "v", "op": "add", "inputs": ["s", "vec"], "output": "v"},
      {"name": "c", "op": "concat", "inputs": ["v", "x"], "output": "c", "axis": 1},
      {"name": "d2", "op": "dense", "inputs": ["c"], "output": "y", "units": 2}],
    "constants": [{"name": "third", "shape": []}, {"name": "vec", "shape": [3]}],
    "output": "y"})";
  ModelArgs args;
  args.graph = spec;
  Model m = build_model("graph", Policy::parse("torch,autocast=bfloat16,autocast_input_cast=every_layer"), 1, args);
  Model f32 = build_model("graph", Policy::torch(), 1, args);
  auto& g = static_cast<GraphLayer&>(m.net->layer(0));
  auto& g32 = static_cast<GraphLayer&>(f32.net->layer(0));
  for (const char* v : {"x", "a", "s", "v", "c", "y"}) EXPECT_EQ(g.value_format(g.find_value(v)), MathMode::bfloat16) << v;
  // Constants that bfloat16 does not hold (the cast must round them), set in both models' buffers.
  auto set_constants = [](Model& model) {
    for (auto& [name, p] : model.net->named_buffers()) {
      if (name.find("constant") == std::string::npos) continue;
      if (p->value.numel() == 1) p->value.data<float>()[0] = 1.0f / 3;
      else for (int64_t i = 0; i < 3; ++i) p->value.data<float>()[i] = std::vector<float>{0.1f, -0.7f, 1.0f / 7}[i];
    }
  };
  set_constants(m);
  set_constants(f32);
  const int64_t N = 40;
  const Tensor x = random_tensor({N, 4}, DType::f32, 3);
  ExecContext exec;
  RunContext ctx = RunContext::inference(exec);
  const Tensor y = m.forward(ctx, x);
  // By hand on the float32 graph's layers (the same weights, seed 1), every rounding written out.
  auto dense = [&](const char* name, const Tensor& in) {
    for (std::size_t i = 0; i < g32.num_nodes(); ++i)
      if (g32.node(i).name == name) {
        Layer& d = *g32.node(i).layer;
        for (Param* p : d.params()) p->value = bf16(p->value);  // autocast's operand cast (idempotent)
        return bf16(d.forward(ctx, bf16(in)));
      }
    ADD_FAILURE() << "no node " << name;
    return Tensor();
  };
  const Tensor xb = bf16(x);
  const Tensor a = dense("d1", xb);
  Tensor s = a.clone(), v({N, 3}, DType::f32), c({N, 7}, DType::f32);
  const float third = round_to_bf16(1.0f / 3), vec[3] = {round_to_bf16(0.1f), round_to_bf16(-0.7f), round_to_bf16(1.0f / 7)};
  for (int64_t i = 0; i < N * 3; ++i) s.data<float>()[i] = round_to_bf16(a.data<float>()[i] * third);
  for (int64_t i = 0; i < N * 3; ++i) v.data<float>()[i] = round_to_bf16(s.data<float>()[i] + vec[i % 3]);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t j = 0; j < 7; ++j)
      c.data<float>()[r * 7 + j] = j < 3 ? v.data<float>()[r * 3 + j] : xb.data<float>()[r * 4 + j - 3];
  expect_bits(y, dense("d2", c), "graph under every_layer");
  // PyTorch's rule on the same graph: the constants enter unrounded (other logits).
  Model t = build_model("graph", Policy::parse("torch,autocast=bfloat16"), 1, args);
  set_constants(t);
  const Tensor yt = t.forward(ctx, x);
  int64_t differ = 0;
  for (int64_t j = 0; j < y.numel(); ++j) differ += y.data<float>()[j] != yt.data<float>()[j];
  EXPECT_GT(differ, 0);
}

TEST(Autocast, RefusedByNameWhereNotEmulated) {
  using testing::HasSubstr;
  EXPECT_THAT(error_of([] { build_model("lenet5", Policy::parse("torch,autocast=bfloat16,math_conv=tf32"), 1); }),
              HasSubstr("math_conv=tf32 and autocast=bfloat16 both choose the layer's format"));
  EXPECT_THAT(error_of([] { build_model("lenet5", Policy::parse("torch,autocast=float16,dtype=float64"), 1); }),
              HasSubstr("autocast=float16 rounds float32 operands: it needs dtype=float32"));
  // Recurrent layers: PyTorch's CPU rule is emulated (RnnAutocast.*), the whole-layer rule is not.
  EXPECT_THAT(error_of([] { build_model("lstm", Policy::parse("torch,autocast=bfloat16,rnn_autocast_rule=layer"), 1); }),
              HasSubstr("lstm: autocast=bfloat16 with rnn_autocast_rule=layer (the whole layer in the format"));
  EXPECT_THAT(error_of([] { resolve_cuda_exec(Policy::parse("torch,autocast=float16")); }),
              HasSubstr("cuda: autocast=float16 is emulated on the CPU only"));
  EXPECT_THAT(error_of([] { Policy::parse("torch,autocast=fp8"); }), HasSubstr("knob 'autocast' has no value 'fp8'"));
}

}  // namespace
}  // namespace driftlab
