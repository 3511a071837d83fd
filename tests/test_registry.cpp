// The kernel registry (core/ops/registry.h, kernels/cpu/registry.h): every op listed with its
// reference and each fast kernel with what it supports; every layer's ops dispatched through it
// (a dispatch trace per layer, forward and backward, both semantics); fast kernels reachable only
// through it (no header above the kernels declares one, and a registry holding only the
// references gives the all-reference engine's bits whatever the knobs ask for).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/dropout_layer.h"
#include "engine/layers/embedding_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/global_avg_pool_layer.h"
#include "engine/layers/gru_layer.h"
#include "engine/layers/lstm_layer.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "engine/random.h"
#include "engine/train/cpu_runner.h"
#include "kernels/cpu/registry.h"
#include "models/models.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

namespace fs = std::filesystem;

// What make_cpu_registry must hold: op -> {backend: kernel name}. A kernel added without a row
// here, or a row whose kernel is gone, fails ListsEveryOpWithItsReferenceAndFastKernels.
const std::map<std::string, std::map<std::string, std::string>> kExpected = {
    {"conv2d", {{"reference", "reference"}, {"eigen", "eigen"}, {"onednn", "onednn"}}},
    {"conv_block", {{"reference", "reference"}, {"fast", "fast"}}},
    {"gemm", {{"reference", "reference"}, {"eigen", "eigen"}, {"onednn", "onednn"}}},
    {"rnn", {{"reference", "reference"}, {"fast", "fast"}}},
    {"batchnorm", {{"reference", "reference"}, {"fast", "fast"}}},
    {"maxpool2d", {{"reference", "reference"}, {"fast", "fast"}}},
    {"avgpool2d", {{"reference", "reference"}, {"fast", "fast"}}},
    {"activation", {{"reference", "reference"}, {"fast", "fast"}}},
    {"binary", {{"reference", "reference"}, {"fast", "fast"}}},
    {"softmax_xent", {{"reference", "reference"}, {"fast", "fast"}}},
    {"sgd", {{"reference", "reference"}, {"fast", "fast"}}},
    {"adam", {{"reference", "reference"}, {"fast", "fast"}}},
    {"rmsprop", {{"reference", "reference"}, {"fast", "fast"}}},
    {"qconv2d", {{"reference", "reference"}, {"fast", "fast"}}},
    {"qdense", {{"reference", "reference"}, {"fast", "fast"}}},
    {"qmaxpool2d", {{"reference", "reference"}, {"fast", "fast"}}},
    {"quantize", {{"reference", "reference"}, {"fast", "fast"}}},
    {"qadd", {{"reference", "reference"}, {"fast", "fast"}}},
    {"qglobal_avg_pool", {{"reference", "reference"}, {"fast", "fast"}}},
    {"qdense_dynamic", {{"reference", "reference"}, {"fast", "fast"}}},
};

TEST(Registry, ListsEveryOpWithItsReferenceAndFastKernels) {
  const KernelRegistry reg = make_cpu_registry();
  std::map<std::string, std::map<std::string, std::string>> got;
  std::ostringstream table;
  for (const KernelListing& k : list_kernels(reg)) {
    got[k.op][k.backend] = k.kernel;
    EXPECT_FALSE(k.supports.empty()) << k.op << "/" << k.backend << ": no supports_doc";
    table << "  " << std::left << std::setw(14) << k.op << std::setw(11) << k.backend << k.supports << "\n";
  }
  std::cout << "registered CPU kernels (op, backend, what supports() accepts):\n" << table.str();
  EXPECT_EQ(got, kExpected);
  // Every table names its op, and every registered slot has its supports() and entry points.
  int tables = 0;
  reg.for_each_op([&](const auto& t) {
    ++tables;
    ASSERT_NE(t.op, nullptr);
    EXPECT_STREQ(t.reference().name, "reference") << t.op;
    for (const auto& k : t.slot) {
      if (k.name) {
        EXPECT_NE(k.supports, nullptr) << t.op << "/" << k.name;
      }
    }
  });
  EXPECT_EQ(tables, static_cast<int>(kExpected.size()));
}

TEST(Registry, SupportsDecidesAndTheReferenceCatchesTheRest) {
  const KernelRegistry reg = make_cpu_registry();
  Conv2dParams cp;
  EXPECT_STREQ(reg.conv2d.select(KernelBackend::onednn, cp, DType::f32).name, "onednn");
  EXPECT_STREQ(reg.conv2d.select(KernelBackend::onednn, cp, DType::f64).name, "reference");  // no f64 in oneDNN
  EXPECT_STREQ(reg.conv2d.select(KernelBackend::fast, cp, DType::f32).name, "reference");    // no such slot
  EXPECT_STREQ(reg.gemm.select(KernelBackend::onednn, GemmParams{}, DType::f64).name, "reference");
  EXPECT_STREQ(reg.rnn.select(KernelBackend::fast, RnnParams{}, DType::f64).name, "reference");
  EXPECT_STREQ(reg.batchnorm.select(KernelBackend::fast, BatchNormParams{}, DType::f64).name, "reference");
  EXPECT_STREQ(reg.maxpool2d.select(KernelBackend::fast, Pool2dParams{}, DType::f64).name, "fast");
  EXPECT_STREQ(reg.sgd.select(KernelBackend::eigen, SgdStepParams{}, DType::f32).name, "reference");
}

// ---- every layer dispatches through the registry ----

// The ops a pass asked the registry for, in order.
std::vector<std::string> ops_of(const std::vector<KernelChoice>& trace) {
  std::vector<std::string> v;
  for (const KernelChoice& c : trace) v.push_back(c.op);
  return v;
}

struct LayerCase {
  const char* name;
  Shape in;  // per sample
  std::function<std::unique_ptr<Layer>(const Shape&, const Policy&, Rng&)> make;
  std::vector<std::string> forward_ops, backward_ops;  // what the layer asks the registry for
};

std::vector<LayerCase> layer_cases() {
  using V = std::vector<std::string>;
  auto conv = [](const Shape& in, const Policy& p, Rng& r) {
    Conv2dSpec s;
    s.out_channels = 3;
    return std::make_unique<Conv2dLayer>(s, in, p, r);
  };
  auto pool = [](PoolKind k) {
    return [k](const Shape& in, const Policy& p, Rng&) {
      Pool2dSpec s;
      s.kind = k;
      return std::make_unique<Pool2dLayer>(s, in, p);
    };
  };
  auto block = [](const Shape& in, const Policy& p, Rng& r) {
    auto main = std::make_unique<Sequential>(in);
    main->add(std::make_unique<BatchNormLayer>(in, p));
    main->add(std::make_unique<ActivationLayer>(ActKind::relu, in, p));
    return std::make_unique<ResidualLayer>(std::move(main), Shortcut::identity, p, r);
  };
  return {
      {"conv2d", {2, 6, 6}, conv, V{"conv2d"}, V{"conv2d"}},
      {"dense", {5}, [](const Shape& in, const Policy& p, Rng& r) { return std::make_unique<DenseLayer>(4, in, p, r); },
       V{"gemm"}, V{"gemm", "gemm"}},
      {"maxpool2d", {2, 6, 6}, pool(PoolKind::max), V{"maxpool2d"}, V{"maxpool2d"}},
      {"avgpool2d", {2, 6, 6}, pool(PoolKind::avg), V{"avgpool2d"}, V{"avgpool2d"}},
      {"global_avg_pool", {2, 3, 3},
       [](const Shape& in, const Policy& p, Rng&) { return std::make_unique<GlobalAvgPoolLayer>(in, p); },
       V{"avgpool2d"}, V{"avgpool2d"}},
      {"tanh", {7}, [](const Shape& in, const Policy& p, Rng&) {
         return std::make_unique<ActivationLayer>(ActKind::tanh, in, p); }, V{"activation"}, V{"activation"}},
      {"batchnorm", {2, 3, 3}, [](const Shape& in, const Policy& p, Rng&) {
         return std::make_unique<BatchNormLayer>(in, p); }, V{"batchnorm"}, V{"batchnorm"}},
      {"lstm", {4, 3}, [](const Shape& in, const Policy& p, Rng& r) {
         return std::make_unique<LstmLayer>(RnnSpec{5, false}, in, p, r); }, V{"rnn"}, V{"rnn"}},
      {"gru", {4, 3}, [](const Shape& in, const Policy& p, Rng& r) {
         return std::make_unique<GruLayer>(RnnSpec{5, true}, in, p, r); }, V{"rnn"}, V{"rnn"}},
      // The main path's batchnorm -> ReLU runs as one batchnorm op with the ReLU inside
      // (BatchNormParams::relu; tests/layers/test_bn_relu_fusion.cpp): no activation dispatch.
      {"residual", {2, 3, 3}, block, V{"batchnorm"}, V{"batchnorm"}},
      // Glue without kernels of their own (data movement, a mask, a gather): nothing to dispatch.
      {"flatten", {2, 3, 3}, [](const Shape& in, const Policy& p, Rng&) {
         return std::make_unique<FlattenLayer>(in, p); }, V{}, V{}},
      {"dropout", {6}, [](const Shape& in, const Policy&, Rng&) { return std::make_unique<DropoutLayer>(0.5, in); },
       V{}, V{}},
  };
}

TEST(Registry, EveryLayerDispatchesEachOfItsOpsThroughIt) {
  for (const LayerCase& c : layer_cases())
    for (Semantics s : {Semantics::train, Semantics::inference})
      for (const char* spec : {"torch", "tensorflow", "torch,dtype=float64"}) {
        SCOPED_TRACE(std::string(c.name) + " " + semantics_name(s) + " " + spec);
        const Policy p = Policy::parse(spec);
        Rng rng(p.rng_engine, 3), drop(p.rng_engine, 4);
        std::unique_ptr<Layer> layer = c.make(c.in, p, rng);
        std::vector<KernelChoice> trace;
        ExecContext exec;
        exec.trace = &trace;
        RunContext ctx = RunContext::recorded(exec, s, &drop);
        Shape full{3};
        full.insert(full.end(), c.in.begin(), c.in.end());
        const DType dt = p.dtype == FloatType::float64 ? DType::f64 : DType::f32;
        Tensor y = layer->forward(ctx, random_tensor(full, dt, 5));
        EXPECT_EQ(ops_of(trace), c.forward_ops) << "forward";
        trace.clear();
        layer->backward(ctx, random_tensor(y.shape(), dt, 6));
        EXPECT_EQ(ops_of(trace), c.backward_ops) << "backward";
      }
}

// A training step of whole models: the loss and the SGD step go through the registry too, and
// each op runs the kernel its knob names (or the reference where that kernel does not support
// the call: float64).
TEST(Registry, ATrainingStepRunsTheKernelsTheKnobsName) {
  struct ModelCase {
    const char* model;
    Shape x;
  };
  for (const ModelCase& mc : {ModelCase{"lenet5", {4, 1, 28, 28}}, ModelCase{"resnet20", {2, 3, 32, 32}},
                              ModelCase{"lstm", {3, 28, 28}}})
    for (const char* spec : {"torch", "tensorflow", "theano,dtype=float64"}) {
      SCOPED_TRACE(std::string(mc.model) + " " + spec);
      const Policy p = Policy::parse(spec);
      Model m = build_model(mc.model, p, 1);
      std::vector<KernelChoice> trace;
      ExecContext exec;
      exec.trace = &trace;
      CpuRunner runner(m, {}, exec);
      runner.train_step(random_tensor(mc.x, m.dtype(), 2, 0.0, 1.0), std::vector<int32_t>(mc.x[0], 1));
      std::set<std::string> ops;
      for (const KernelChoice& c : trace) {
        ops.insert(c.op);
        const KernelBackend want = c.asked;
        const std::string wanted = backend_name(want);
        // float64: oneDNN and the float32-only fast kernels (rnn, batchnorm) fall back to the reference.
        const bool f64_fallback =
            m.dtype() == DType::f64 && (want == KernelBackend::onednn || c.op == "rnn" || c.op == "batchnorm");
        EXPECT_EQ(c.kernel, f64_fallback ? "reference" : wanted) << c.op << " asked for " << wanted;
      }
      EXPECT_TRUE(ops.count("softmax_xent")) << "the loss";
      EXPECT_TRUE(ops.count("sgd")) << "the SGD step";
      if (std::string(mc.model) == "lstm")
        EXPECT_TRUE(ops.count("rnn"));
      else  // LeNet's conv blocks run as conv_block where conv_block_backend=fast supports them
        EXPECT_TRUE(ops.count("conv2d") || ops.count("conv_block"));
    }
}

// ---- fast kernels are reachable only through the registry ----

// No header of the engine or the kernels declares a fast kernel's entry point: registration is
// the only way to one (their definitions sit in anonymous namespaces of kernels/cpu).
TEST(Registry, NoHeaderDeclaresAFastKernel) {
  const std::regex fast_fn(R"(\b\w+_(fast|eigen|onednn)\s*\()");
  int headers = 0;
  for (const char* dir : {"engine", "kernels/cpu"})
    for (const auto& e : fs::recursive_directory_iterator(fs::path(DRIFTLAB_SOURCE_DIR) / dir)) {
      if (e.path().extension() != ".h") continue;
      ++headers;
      std::ifstream f(e.path());
      std::string line;
      for (int n = 1; std::getline(f, line); ++n) {
        const std::string code = line.substr(0, line.find("//"));
        std::smatch m;
        if (std::regex_search(code, m, fast_fn) && m.str().rfind("register_", 0) != 0)
          ADD_FAILURE() << e.path() << ":" << n << " declares " << m.str() << " outside the registry: " << line;
      }
    }
  EXPECT_GT(headers, 30);
}

// A registry holding only the references, with every knob asking for a fast kernel, gives
// exactly what the all-reference engine gives: no layer computes past the registry.
TEST(Registry, OnlyReferencesRegisteredGivesTheAllReferenceBits) {
  for (const char* model : {"lenet5", "resnet20", "gru"}) {
    SCOPED_TRACE(model);
    const Policy fast = Policy::torch();
    Policy ref = fast;
    use_reference_kernels(ref);
    Model a = build_model(model, fast, 1), b = build_model(model, ref, 1);
    ExecContext refs_only;
    auto strip = [](auto& table) {
      for (int i = 0; i < kNumKernelBackends; ++i)
        if (i != static_cast<int>(KernelBackend::reference)) table.slot[i] = {};
    };
    KernelRegistry& k = refs_only.kernels;
    strip(k.conv2d), strip(k.conv_block), strip(k.gemm), strip(k.rnn), strip(k.batchnorm), strip(k.maxpool2d), strip(k.avgpool2d),
        strip(k.activation), strip(k.softmax_xent), strip(k.sgd), strip(k.adam), strip(k.rmsprop);
    const Shape x_shape = std::string(model) == "gru" ? Shape{3, 28, 28}
                          : std::string(model) == "lenet5" ? Shape{3, 1, 28, 28}
                                                           : Shape{2, 3, 32, 32};
    const Tensor x = random_tensor(x_shape, DType::f32, 8, 0.0, 1.0);
    const std::vector<int32_t> y(static_cast<std::size_t>(x_shape[0]), 3);
    CpuRunner ra(a, {}, refs_only), rb(b, {}, ExecContext{});
    EXPECT_EQ(ra.train_step(x, y), rb.train_step(x, y));
    auto pa = a.net->named_params(), pb = b.net->named_params();
    for (std::size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(bitwise_equal(pa[i].second->value, pb[i].second->value)) << pa[i].first;
    EXPECT_TRUE(bitwise_equal(ra.input_gradient(x, y, Semantics::inference).dx,
                              rb.input_gradient(x, y, Semantics::inference).dx));
  }
}

}  // namespace
}  // namespace driftlab
