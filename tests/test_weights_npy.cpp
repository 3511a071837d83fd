// The .npy weight exchange (models/weights_npy.h): export then import into a differently
// initialised model gives back every parameter bit for bit, for LeNet-5, LSTM and GRU under
// the tensorflow and torch presets, in both layouts; the framework layout really is the
// framework's (HWIO conv kernels, Keras (in, 4u) LSTM kernels); a file of the wrong shape is
// refused naming the file and the parameter, a missing file names its path, and a refused
// import leaves the model as it was.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/io/npy.h"
#include "models/models.h"
#include "models/weights_npy.h"
#include "tests/scratch_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

namespace fs = std::filesystem;

struct ExchangeCase {
  const char* model;
  const char* policy;
  std::size_t files;         // trainable parameters: one file each
  Shape first_framework;     // the first weight's file in the framework layout
};

// Shapes: LeNet-5's first conv is 6@5x5 on 1 channel; the RNNs have 128 units over 28
// features (G = 4 gates for the LSTM, 3 for the GRU). Under tensorflow the RNNs have one bias
// (rnn_num_bias), so one file fewer.
const ExchangeCase kCases[] = {
    {"lenet5", "tensorflow", 10, {5, 5, 1, 6}}, {"lenet5", "torch", 10, {6, 1, 5, 5}},
    {"lstm", "tensorflow", 5, {28, 512}},       {"lstm", "torch", 6, {512, 28}},
    {"gru", "tensorflow", 5, {28, 384}},        {"gru", "torch", 6, {384, 28}},
};

std::vector<Tensor> snapshot(const Model& m) {
  std::vector<Tensor> v;
  for (auto& np : m.net->named_params()) v.push_back(np.second->value.clone());
  return v;
}

::testing::AssertionResult params_equal(const Model& m, const std::vector<Tensor>& want) {
  auto params = m.net->named_params();
  if (params.size() != want.size()) return ::testing::AssertionFailure() << params.size() << " parameters vs " << want.size();
  for (std::size_t i = 0; i < params.size(); ++i) {
    ::testing::AssertionResult r = bitwise_equal(params[i].second->value, want[i]);
    if (!r) return r << " (parameter " << params[i].first << ")";
  }
  return ::testing::AssertionSuccess();
}

TEST(WeightsNpy, RoundTripIsBitExact) {
  for (const ExchangeCase& c : kCases)
    for (NpyLayout layout : {NpyLayout::framework, NpyLayout::driftlab}) {
      const bool framework = layout == NpyLayout::framework;
      SCOPED_TRACE(std::string(c.model) + " " + c.policy + (framework ? " framework" : " driftlab") + " layout");
      ScratchDir tmp;
      const Policy policy = Policy::parse(c.policy);
      const Model a = build_model(c.model, policy, 1);
      const std::vector<NpyFile> files = export_weights_npy(a, tmp.path("w"), layout);
      auto params = a.net->named_params();
      ASSERT_EQ(files.size(), c.files);
      ASSERT_EQ(params.size(), c.files);
      for (std::size_t i = 0; i < files.size(); ++i) {
        EXPECT_EQ(files[i].path, (tmp.dir / "w" / (params[i].first + ".npy")).string());
        EXPECT_EQ(read_npy(files[i].path).shape(), files[i].shape) << files[i].path;
      }
      EXPECT_EQ(files[0].shape, framework ? c.first_framework : params[0].second->value.shape());

      Model b = build_model(c.model, policy, 2);
      ASSERT_FALSE(params_equal(b, snapshot(a))) << "seeds 1 and 2 must differ, or the round trip proves nothing";
      import_weights_npy(b, tmp.path("w"), layout);
      EXPECT_TRUE(params_equal(b, snapshot(a)));
    }
}

// The framework layout is the framework's, not driftlab's written under another name.
TEST(WeightsNpy, FrameworkLayoutIsTheFrameworks) {
  ScratchDir tmp;
  const Model lenet = build_model("lenet5", Policy::parse("tensorflow"), 1);
  export_weights_npy(lenet, tmp.path("lenet"), NpyLayout::framework);
  const Tensor w = lenet.net->named_params()[0].second->value;  // OIHW (6,1,5,5)
  const Tensor hwio = read_npy(tmp.path("lenet/0.conv2d.weight.npy"));  // Keras: (5,5,1,6)
  ASSERT_EQ(hwio.shape(), (Shape{5, 5, 1, 6}));
  for (int64_t o = 0; o < 6; ++o)
    for (int64_t h = 0; h < 5; ++h)
      for (int64_t x = 0; x < 5; ++x) ASSERT_EQ(hwio.at((h * 5 + x) * 6 + o), w.at((o * 5 + h) * 5 + x));

  // Keras's LSTM kernel is (features, 4u) with gate column blocks i,f,c,o: the transpose of the
  // canonical (4u, features) row blocks i,f,g,o, the same gate order.
  const Model lstm = build_model("lstm", Policy::parse("tensorflow"), 1);
  export_weights_npy(lstm, tmp.path("lstm"), NpyLayout::framework);
  const Tensor wih = lstm.net->named_params()[0].second->value;  // (512, 28)
  const Tensor kernel = read_npy(tmp.path("lstm/0.lstm.weight_ih.npy"));
  ASSERT_EQ(kernel.shape(), (Shape{28, 512}));
  for (int64_t f = 0; f < 28; ++f)
    for (int64_t j = 0; j < 512; ++j) ASSERT_EQ(kernel.at(f * 512 + j), wih.at(j * 28 + f));
}

TEST(WeightsNpy, WrongShapeNamesFileAndParameter) {
  struct Bad {
    const char* model;
    const char* policy;
    const char* param;
    Shape shape;
    const char* want;  // the shape the file needs, in the file's (framework) layout
  };
  // A kernel one column short (OIHW); a 3-D array where Keras's HWIO kernel must be 4-D (a
  // rank the layout conversion cannot take); an LSTM recurrent kernel one gate column short.
  const Bad bad[] = {
      {"lenet5", "torch", "3.conv2d.weight", {16, 6, 5, 4}, "[16,6,5,5]"},
      {"lenet5", "tensorflow", "0.conv2d.weight", {5, 5, 6}, "[5,5,1,6]"},
      {"lstm", "tensorflow", "0.lstm.weight_hh", {128, 511}, "[128,512]"},
  };
  for (const Bad& c : bad) {
    SCOPED_TRACE(std::string(c.model) + " " + c.policy + " " + c.param);
    ScratchDir tmp;
    const Policy policy = Policy::parse(c.policy);
    export_weights_npy(build_model(c.model, policy, 1), tmp.path("w"), NpyLayout::framework);
    const std::string path = tmp.path(std::string("w/") + c.param + ".npy");
    write_npy(path, random_tensor(c.shape, DType::f32, 3));
    Model m = build_model(c.model, policy, 2);
    const std::vector<Tensor> before = snapshot(m);
    EXPECT_TRUE(throws_error_with([&] { import_weights_npy(m, tmp.path("w"), NpyLayout::framework); },
                                  {"weights import: ", path, " has shape " + shape_str(c.shape),
                                   std::string("parameter ") + c.param, std::string("needs ") + c.want}));
    EXPECT_TRUE(params_equal(m, before)) << "a refused import changes nothing";
  }
}

TEST(WeightsNpy, MissingFileNamesThePath) {
  ScratchDir tmp;
  const Policy policy = Policy::parse("torch");
  export_weights_npy(build_model("gru", policy, 1), tmp.path("w"), NpyLayout::framework);
  const std::string missing = tmp.path("w/1.dense.bias.npy");  // the last file: every other one is read first
  fs::remove(missing);
  Model m = build_model("gru", policy, 2);
  const std::vector<Tensor> before = snapshot(m);
  EXPECT_TRUE(throws_error_with([&] { import_weights_npy(m, tmp.path("w"), NpyLayout::framework); },
                                {missing, "cannot open"}));
  EXPECT_TRUE(params_equal(m, before));
  EXPECT_TRUE(throws_error_with([&] { import_weights_npy(m, tmp.path("nowhere"), NpyLayout::driftlab); },
                                {tmp.path("nowhere/0.gru.weight_ih.npy")}));
}

// Files are converted to the model's dtype: float32 files into a float64 model keep their values.
TEST(WeightsNpy, ImportConvertsToTheModelsDtype) {
  ScratchDir tmp;
  const Model a = build_model("lenet5", Policy::parse("torch"), 1);
  export_weights_npy(a, tmp.path("w"), NpyLayout::driftlab);
  Model b = build_model("lenet5", Policy::parse("torch,dtype=float64"), 2);
  import_weights_npy(b, tmp.path("w"), NpyLayout::driftlab);
  std::vector<Tensor> want;
  for (const Tensor& t : snapshot(a)) want.push_back(t.to(DType::f64));  // float32 -> float64 is exact
  EXPECT_TRUE(params_equal(b, want));
}

}  // namespace
}  // namespace driftlab
