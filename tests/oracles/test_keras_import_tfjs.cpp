// The Keras importer against TF.js: a hand-written Keras functional model (tests/convert/
// keras_cases.h: two Conv2D padding='same' strides 2 on even inputs, BatchNormalization, ReLU(6),
// DepthwiseConv2D, Add, ZeroPadding2D before a valid conv, Concatenate, MaxPooling2D, Flatten,
// Dropout, Dense) loaded by @tensorflow/tfjs 4.22 (tf.loadLayersModel through tf.io.fromMemory,
// tests/oracles/tfjs/run_layers_model.js) and imported by driftlab.
//
// - tensorflow preset: driftlab's logits are TF.js's, within 1e-5 of the largest |logit| (as the
//   TF.js export's bound: other summation orders in the convolutions) and the same predictions;
// - torch preset: the same file, the same weights, other logits (keras#19291): its 'same' at
//   stride 2 pads 1/1 where TF pads 0/1; the difference exceeds the match bound 100-fold;
// - torch with conv_same_pad=after alone matches TF.js again: the file froze every other semantic
//   (epsilon, momentum, flatten order, the flip), so that knob is the whole difference.
#include <gtest/gtest.h>

#include <filesystem>

#include "convert/keras_import.h"
#include "convert/tfjs_export.h"
#include "engine/io/container.h"
#include "engine/train/cpu_runner.h"
#include "tests/convert/keras_cases.h"
#include "tests/oracles/oracle_util.h"

namespace driftlab {
namespace {

using oracle::CaseDir;

constexpr double kMatch = 1e-5;     // see the file comment
constexpr double kMismatch = 100;   // "differs": beyond 100x the match bound

const CaseDir& keras_run() {
  static const CaseDir run(oracle::tfjs_oracle("run_layers_model.js"), "keras_import", [](CaseDir& d) {
    const keras_cases::KerasFile f = keras_cases::same_stride2_model(90);
    const std::filesystem::path dir = d.dir() / "keras";
    std::filesystem::create_directories(dir);
    write_file_atomic((dir / "model.json").string(), f.model_json);
    write_file_atomic((dir / "group1-shard1of1.bin").string(), f.weights);
    d.input("keras", "x", random_tensor({6, 3, 32, 32}, DType::f32, 91, 0.0, 1.0));
    d.add_case({{"name", "keras"}, {"kind", "layers_model"}, {"dir", "keras"}, {"x", "keras.x.npy"}, {"nchw", true}});
    // the imported graph written back out by driftlab's TF.js export (graph models: functional layers)
    convert::KerasGraph g = convert::import_keras((dir / "model.json").string(), "tensorflow");
    Model m = convert::keras_graph_model(std::move(g), "tensorflow");
    convert::write_tfjs((d.dir() / "keras_rt").string(), convert::export_tfjs(m));
    d.add_case({{"name", "keras_rt"}, {"kind", "layers_model"}, {"dir", "keras_rt"}, {"x", "keras.x.npy"}, {"nchw", true}});
    const keras_cases::KerasFile sep = keras_cases::separable_model(92);
    std::filesystem::create_directories(d.dir() / "separable");
    write_file_atomic((d.dir() / "separable" / "model.json").string(), sep.model_json);
    write_file_atomic((d.dir() / "separable" / "group1-shard1of1.bin").string(), sep.weights);
    d.input("separable", "x", random_tensor({5, 3, 12, 12}, DType::f32, 93, 0.0, 1.0));
    d.add_case({{"name", "separable"}, {"kind", "layers_model"}, {"dir", "separable"}, {"x", "separable.x.npy"},
                {"nchw", true}});
    const keras_cases::KerasFile sw = keras_cases::swish_model(94);
    std::filesystem::create_directories(d.dir() / "swish");
    write_file_atomic((d.dir() / "swish" / "model.json").string(), sw.model_json);
    write_file_atomic((d.dir() / "swish" / "group1-shard1of1.bin").string(), sw.weights);
    d.input("swish", "x", random_tensor({5, 2, 6, 6}, DType::f32, 95, -2.0, 2.0));
    d.add_case({{"name", "swish"}, {"kind", "layers_model"}, {"dir", "swish"}, {"x", "swish.x.npy"}, {"nchw", true}});
  });
  return run;
}

Tensor driftlab_logits(const CaseDir& run, const std::string& policy) {
  convert::KerasGraph g = convert::import_keras((run.dir() / "keras" / "model.json").string(), policy);
  Model m = convert::keras_graph_model(std::move(g), policy);
  CpuRunner runner(m);
  return runner.logits(run.in("keras", "x"));
}

TEST(TfjsKeras, AHandWrittenKerasGraphComputesTfjssLogitsUnderTensorflowAndOthersUnderTorch) {
  ORACLE_GROUP(run, keras_run);
  std::cout << run.log();
  const Tensor tfjs = run.out("keras", "y");
  ASSERT_EQ(tfjs.shape(), Shape({6, 10}));
  const oracle::LogitAgreement tf = oracle::logit_agreement(tfjs, driftlab_logits(run, "tensorflow"));
  const oracle::LogitAgreement torch = oracle::logit_agreement(tfjs, driftlab_logits(run, "torch"));
  const oracle::LogitAgreement fixed = oracle::logit_agreement(tfjs, driftlab_logits(run, "torch,conv_same_pad=after"));
  std::cout << "TF.js vs driftlab, max |d| / max |logit|: tensorflow " << tf.rel << " (" << tf.flips
            << " predictions differ), torch " << torch.rel << " (" << torch.flips
            << "), torch,conv_same_pad=after " << fixed.rel << " (" << fixed.flips << ")\n";
  EXPECT_LE(tf.rel, kMatch);
  EXPECT_EQ(tf.flips, 0);
  EXPECT_GT(torch.rel, kMismatch * kMatch);
  EXPECT_LE(fixed.rel, kMatch);
  EXPECT_EQ(fixed.flips, 0);
}

// SeparableConv2D (depthwise with multiplier 2, then the 1x1 pointwise convolution with the bias):
// TF.js's logits under the tensorflow preset, within the same bound.
TEST(TfjsKeras, SeparableConv2DComputesTfjssLogits) {
  ORACLE_GROUP(run, keras_run);
  convert::KerasGraph g = convert::import_keras((run.dir() / "separable" / "model.json").string(), "tensorflow");
  Model m = convert::keras_graph_model(std::move(g), "tensorflow");
  CpuRunner runner(m);
  const oracle::LogitAgreement a = oracle::logit_agreement(run.out("separable", "y"), runner.logits(run.in("separable", "x")));
  std::cout << "SeparableConv2D model, TF.js vs driftlab: " << a.rel << " (" << a.flips << " predictions differ)\n";
  EXPECT_LE(a.rel, kMatch);
  EXPECT_EQ(a.flips, 0);
}

// Activation 'swish' (imported as a sigmoid node and a mul node): TF.js's logits.
TEST(TfjsKeras, SwishComputesTfjssLogits) {
  ORACLE_GROUP(run, keras_run);
  convert::KerasGraph g = convert::import_keras((run.dir() / "swish" / "model.json").string(), "tensorflow");
  Model m = convert::keras_graph_model(std::move(g), "tensorflow");
  CpuRunner runner(m);
  const oracle::LogitAgreement a = oracle::logit_agreement(run.out("swish", "y"), runner.logits(run.in("swish", "x")));
  std::cout << "swish model, TF.js vs driftlab: " << a.rel << " (" << a.flips << " predictions differ)\n";
  EXPECT_LE(a.rel, kMatch);
  EXPECT_EQ(a.flips, 0);
}

// The imported graph exported again by driftlab (convert/tfjs_export.cpp, a graph model as a
// functional layers model: Add, Concatenate, ZeroPadding2D for the folded pads, the Dropout gone)
// runs in TF.js and gives driftlab's logits, within the same bound.
TEST(TfjsKeras, TheImportedGraphExportedAgainRunsInTfjs) {
  ORACLE_GROUP(run, keras_run);
  const Tensor tfjs = run.out("keras_rt", "y");
  const oracle::LogitAgreement a = oracle::logit_agreement(tfjs, driftlab_logits(run, "tensorflow"));
  std::cout << "Keras -> driftlab -> TF.js export, in TF.js vs driftlab: " << a.rel << " (" << a.flips
            << " predictions differ)\n";
  EXPECT_LE(a.rel, kMatch);
  EXPECT_EQ(a.flips, 0);
}

}  // namespace
}  // namespace driftlab
