// `driftlab import` of a Keras / TF.js layers model, then `drift` and `attribute` on it: the
// must-show of keras#19291's case. A hand-written Keras functional model with Conv2D
// padding='same' strides 2 on even inputs (tests/convert/keras_cases.h) imported under the
// tensorflow preset; the tensorflow and torch presets give it different logits, and `attribute`
// puts the whole difference on conv_same_pad, the one semantic the file leaves open (the
// kernels' choices differ by rounding only).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/io/container.h"
#include "tests/cli/cli_util.h"
#include "tests/convert/keras_cases.h"

namespace driftlab {
namespace {

std::string write_keras_case(const std::filesystem::path& d) {
  const keras_cases::KerasFile f = keras_cases::same_stride2_model(90);
  std::filesystem::create_directories(d / "keras");
  write_file_atomic((d / "keras" / "model.json").string(), f.model_json);
  write_file_atomic((d / "keras" / "group1-shard1of1.bin").string(), f.weights);
  return (d / "keras" / "model.json").string();
}

TEST(KerasCli, ImportedSameStride2GraphDiffersBetweenPresetsAndAttributeNamesConvSamePad) {
  const std::filesystem::path d = cli_test::fresh_dir("keras_cli");
  const std::string model = write_keras_case(d);
  const std::string dlm = (d / "k.dlm").string();
  const cli_test::CliRun im = cli_test::run_driftlab("import " + model + " --out " + dlm);
  ASSERT_EQ(im.code, 0) << im.out;
  EXPECT_NE(im.out.find("import keras: " + model), std::string::npos) << im.out;
  EXPECT_NE(im.out.find("as a graph model under tensorflow"), std::string::npos) << im.out;
  EXPECT_NE(im.out.find("layer 'down' (Conv2D) -> conv2d, padding 'same'"), std::string::npos) << im.out;
  EXPECT_NE(im.out.find("layer 'zp' (ZeroPadding2D) -> folded"), std::string::npos) << im.out;

  const std::string json_path = (d / "attribute.json").string();
  const cli_test::CliRun at = cli_test::run_driftlab("attribute --weights " + dlm +
                                           " --from tensorflow --to torch --dataset synthetic-cifar10 --limit 64 --json " +
                                           json_path);
  ASSERT_EQ(at.code, 0) << at.out;
  std::cout << at.out;
  std::ifstream f(json_path);
  const nlohmann::json j = nlohmann::json::parse(f);
  // the two presets give different logits: well beyond rounding (a shifted window grid in two
  // convolutions moves the logits by a sizeable fraction of their size)
  const double total = j["total"]["max_abs"].get<double>();
  EXPECT_GT(total, 1e-3) << at.out;
  // conv_same_pad flipped alone moves the outputs by nearly as much as all knobs together; the
  // semantic knobs the file froze (bn_eps, bn_momentum, flatten_order, conv_kernel_flip) change
  // nothing, the kernel choices no more than rounding (1e-5 of the total)
  bool seen = false;
  for (const auto& e : j["single"]) {
    const std::string knob = e["knob"].get<std::string>();
    const double m = e["vs_from"]["max_abs"].get<double>();
    if (knob == "conv_same_pad") {
      seen = true;
      EXPECT_EQ(e["to"].get<std::string>(), "half_strided");
      EXPECT_GT(m, 0.5 * total) << at.out;
    } else {
      EXPECT_LT(m, 1e-5 * total + 1e-6) << knob << "\n" << at.out;
    }
  }
  EXPECT_TRUE(seen) << at.out;
  // ... and the cumulative path credits it with (nearly) all of the distance
  double share = 0;
  for (const auto& s : j["path"])
    if (s["knob"].get<std::string>() == "conv_same_pad") share = s["share"].get<double>();
  EXPECT_GT(share, 0.99) << at.out;
}

}  // namespace
}  // namespace driftlab
