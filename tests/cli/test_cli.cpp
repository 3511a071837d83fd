// End-to-end tests of the driftlab command: run the built binary, check its output and
// exit code. Error cases must give one line naming the file, offset or knob, a non-zero
// exit code and no crash (exit code 1 from main's handler, never a signal).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/cli/cli_util.h"
#include "tests/require_util.h"

namespace {

using namespace driftlab::cli_test;
namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) { return fresh_dir(name); }

void write_bytes(const fs::path& p, const std::vector<unsigned char>& b) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

std::vector<unsigned char> idx_header(uint32_t magic, const std::vector<uint32_t>& dims) {
  std::vector<unsigned char> b;
  auto be = [&](uint32_t v) {
    for (int i = 3; i >= 0; --i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
  };
  be(magic);
  for (uint32_t d : dims) be(d);
  return b;
}

// A tiny valid IDX set: n images of 28x28 and n labels, in dir (raw files).
void write_idx_set(const fs::path& dir, const std::string& prefix, uint32_t n_images, uint32_t n_labels) {
  auto img = idx_header(0x803, {n_images, 28, 28});
  for (uint32_t i = 0; i < n_images * 784; ++i) img.push_back(static_cast<unsigned char>(i * 7));
  write_bytes(dir / (prefix + "-images-idx3-ubyte"), img);
  auto lab = idx_header(0x801, {n_labels});
  for (uint32_t i = 0; i < n_labels; ++i) lab.push_back(static_cast<unsigned char>(i % 10));
  write_bytes(dir / (prefix + "-labels-idx1-ubyte"), lab);
}

bool one_line(const std::string& s) {
  std::size_t first = s.find('\n');
  return first != std::string::npos && first + 1 == s.size();
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

bool have_fashion_mnist() { return fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"); }

TEST(Cli, ModelShowParameterCounts) {
  CliRun r1 = run_driftlab("model show lenet1");
  EXPECT_EQ(r1.code, 0) << r1.out;
  EXPECT_NE(r1.out.find("trainable parameters: 3246\n"), std::string::npos) << r1.out;
  CliRun r5 = run_driftlab("model show lenet5");
  EXPECT_EQ(r5.code, 0) << r5.out;
  EXPECT_NE(r5.out.find("trainable parameters: 44426\n"), std::string::npos) << r5.out;
  // The count does not depend on the preset (only layouts and padding rules do).
  for (const char* p : {"tensorflow", "theano"})
    EXPECT_NE(run_driftlab(std::string("model show lenet5 --policy ") + p).out.find("trainable parameters: 44426"),
              std::string::npos);
}

TEST(Cli, UnknownModelIsOneLineError) {
  CliRun r = run_driftlab("model show lenet7");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(one_line(r.out)) << r.out;
  EXPECT_NE(r.out.find("unknown model 'lenet7'"), std::string::npos) << r.out;
}

TEST(Cli, UnknownKnobAndValueAreOneLineErrors) {
  CliRun r = run_driftlab("policy show torch,bn_epsilon=1e-3");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(one_line(r.out)) << r.out;
  EXPECT_NE(r.out.find("unknown knob 'bn_epsilon'"), std::string::npos) << r.out;
  CliRun v = run_driftlab("policy show tensorflow,conv_backend=mkl");
  EXPECT_EQ(v.code, 1);
  EXPECT_NE(v.out.find("'conv_backend' has no value 'mkl'"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("reference, eigen, onednn"), std::string::npos) << v.out;
  CliRun t = run_driftlab("train --model lenet5 --policy pytorch --limit 10");
  EXPECT_EQ(t.code, 1);
  EXPECT_NE(t.out.find("unknown preset 'pytorch'"), std::string::npos) << t.out;
}

TEST(Cli, PolicyShowAndDiff) {
  CliRun s = run_driftlab("policy show theano");
  EXPECT_EQ(s.code, 0);
  EXPECT_NE(s.out.find("conv_kernel_flip"), std::string::npos);
  EXPECT_NE(s.out.find("relu_grad_at_zero        = 0.5"), std::string::npos) << s.out;
  CliRun d = run_driftlab("policy diff tensorflow theano");
  EXPECT_EQ(d.code, 0);
  EXPECT_NE(d.out.find("conv_kernel_flip"), std::string::npos);
  EXPECT_EQ(d.out.find("flatten_order"), std::string::npos) << "both presets flatten hwc";
}

TEST(Cli, MissingDataDirectory) {
  CliRun r = run_driftlab("train --model lenet1 --data-dir /nonexistent/driftlab-data --no-progress");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(one_line(r.out.substr(r.out.find("driftlab: error"))));
  EXPECT_NE(r.out.find("/nonexistent/driftlab-data"), std::string::npos) << r.out;
}

TEST(Cli, CorruptIdxFilesNameFileAndOffset) {
  fs::path d = temp_dir("idx");
  // Truncated image data: the header promises 5 images, the file holds 4.5.
  write_idx_set(d, "train", 5, 5);
  write_idx_set(d, "t10k", 5, 5);
  {
    std::string img = read_all(d / "train-images-idx3-ubyte");
    img.resize(img.size() - 392);
    std::ofstream(d / "train-images-idx3-ubyte", std::ios::binary) << img;
  }
  CliRun r = run_driftlab("train --model lenet1 --no-progress --data-dir " + d.string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("train-images-idx3-ubyte"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("truncated at offset 16+"), std::string::npos) << r.out;

  // Wrong magic number.
  write_idx_set(d, "train", 5, 5);
  {
    std::string img = read_all(d / "train-images-idx3-ubyte");
    img[2] = 0x09;
    img[3] = 0x01;
    std::ofstream(d / "train-images-idx3-ubyte", std::ios::binary) << img;
  }
  r = run_driftlab("train --model lenet1 --no-progress --data-dir " + d.string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("at offset 2"), std::string::npos) << r.out;

  // Image/label count mismatch.
  write_idx_set(d, "train", 5, 4);
  r = run_driftlab("train --model lenet1 --no-progress --data-dir " + d.string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("has 5 items but labels"), std::string::npos) << r.out;

  // Corrupt gzip stream: a valid gzip file with a flipped byte in its payload.
  write_idx_set(d, "train", 5, 5);
  {
    std::string raw = read_all(d / "train-labels-idx1-ubyte");
    gzFile g = gzopen((d / "train-labels-idx1-ubyte.gz").c_str(), "wb");
    gzwrite(g, raw.data(), static_cast<unsigned>(raw.size()));
    gzclose(g);
    fs::remove(d / "train-labels-idx1-ubyte");
    std::string gz = read_all(d / "train-labels-idx1-ubyte.gz");
    gz[gz.size() - 6] = static_cast<char>(gz[gz.size() - 6] ^ 0x55);  // inside the CRC/payload tail
    std::ofstream(d / "train-labels-idx1-ubyte.gz", std::ios::binary) << gz;
  }
  r = run_driftlab("train --model lenet1 --no-progress --data-dir " + d.string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("train-labels-idx1-ubyte.gz"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gzip"), std::string::npos) << r.out;
  fs::remove_all(d);
}

TEST(Cli, TruncatedModelFileIsRefused) {
  if (!have_fashion_mnist()) DRIFTLAB_SKIP_OR_REQUIRE("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)");
  fs::path d = temp_dir("model");
  CliRun t = run_driftlab("train --model lenet1 --limit 256 --batch 64 --no-progress --threads 1 --out " + d.string());
  ASSERT_EQ(t.code, 0) << t.out;
  std::string bytes = read_all(d / "model.dlm");
  std::ofstream(d / "cut.dlm", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  CliRun e = run_driftlab("eval --limit 100 --weights " + (d / "cut.dlm").string());
  EXPECT_EQ(e.code, 1) << e.out;
  EXPECT_TRUE(one_line(e.out)) << e.out;
  EXPECT_NE(e.out.find("cut.dlm"), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("offset"), std::string::npos) << e.out;
  std::string flipped = bytes;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 1);
  std::ofstream(d / "flip.dlm", std::ios::binary) << flipped;
  CliRun f = run_driftlab("eval --limit 100 --weights " + (d / "flip.dlm").string());
  EXPECT_EQ(f.code, 1) << f.out;
  EXPECT_NE(f.out.find("CRC mismatch"), std::string::npos) << f.out;
  // A model file that cannot be written leaves nothing behind: model.dlm is a directory here.
  fs::path blocked = temp_dir("blocked");
  fs::create_directories(blocked / "model.dlm" / "occupied");
  CliRun b = run_driftlab("train --model lenet1 --limit 64 --no-progress --out " + blocked.string());
  EXPECT_EQ(b.code, 1) << b.out;
  for (const auto& entry : fs::directory_iterator(blocked))
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << entry.path();
  fs::remove_all(d);
  fs::remove_all(blocked);
}

TEST(Cli, PredictNpyRoundTrip) {
  if (!have_fashion_mnist()) DRIFTLAB_SKIP_OR_REQUIRE("Fashion-MNIST not installed");
  fs::path d = temp_dir("predict");
  ASSERT_EQ(run_driftlab("train --model lenet1 --limit 256 --no-progress --threads 1 --out " + d.string()).code, 0);
  CliRun wrong = run_driftlab("predict --weights " + (d / "model.dlm").string() + " --input " + (d / "model.dlm").string() +
                       " --output " + (d / "y.npy").string());
  EXPECT_EQ(wrong.code, 1) << wrong.out;
  EXPECT_NE(wrong.out.find("npy"), std::string::npos) << wrong.out;
  CliRun timing = run_driftlab("predict --sizes 10,100 --weights " + (d / "model.dlm").string());
  EXPECT_EQ(timing.code, 0) << timing.out;
  EXPECT_NE(timing.out.find("100 inputs:"), std::string::npos) << timing.out;
  fs::remove_all(d);
}

// Weights leave and re-enter as .npy in the preset's framework layout (HWIO for tensorflow):
// export, import into a new model file, and both files evaluate identically.
TEST(Cli, WeightsExportImportRoundTrip) {
  if (!have_fashion_mnist()) DRIFTLAB_SKIP_OR_REQUIRE("Fashion-MNIST not installed");
  fs::path d = temp_dir("weights");
  ASSERT_EQ(run_driftlab("train --model lenet5 --policy tensorflow --limit 256 --no-progress --threads 1 --out " +
                     d.string()).code, 0);
  CliRun ex = run_driftlab("weights export --weights " + (d / "model.dlm").string() + " --out " + (d / "w").string());
  ASSERT_EQ(ex.code, 0) << ex.out;
  EXPECT_NE(ex.out.find("0.conv2d.weight.npy [5,5,1,6]"), std::string::npos) << "HWIO expected:\n" << ex.out;
  EXPECT_NE(ex.out.find("7.dense.weight.npy [256,120]"), std::string::npos) << "(in,out) expected:\n" << ex.out;
  CliRun im = run_driftlab("weights import --model lenet5 --policy tensorflow --from " + (d / "w").string() + " --out " +
                       (d / "back.dlm").string());
  ASSERT_EQ(im.code, 0) << im.out;
  // An .npy input of the wrong shape is refused with both shapes named.
  std::string x = (d / "w" / "0.conv2d.weight.npy").string();
  CliRun bad = run_driftlab("predict --weights " + (d / "back.dlm").string() + " --input " + x + " --output " +
                        (d / "y.npy").string());
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("takes [5,1,28,28]"), std::string::npos) << bad.out;
  CliRun e1 = run_driftlab("eval --limit 500 --weights " + (d / "model.dlm").string());
  CliRun e2 = run_driftlab("eval --limit 500 --weights " + (d / "back.dlm").string());
  ASSERT_EQ(e1.code, 0) << e1.out;
  EXPECT_EQ(e1.out, e2.out) << "imported weights evaluate differently";
  fs::remove_all(d);
}

// drift and attribute on a small trained model: the JSON reports, and --model must match.
TEST(Cli, DriftAttributeExplain) {
  if (!have_fashion_mnist()) DRIFTLAB_SKIP_OR_REQUIRE("Fashion-MNIST not installed");
  fs::path d = temp_dir("drift");
  ASSERT_EQ(run_driftlab("train --model lenet1 --limit 512 --no-progress --threads 1 --out " + d.string()).code, 0);
  std::string w = (d / "model.dlm").string();
  CliRun dr = run_driftlab("drift --model lenet1 --weights " + w + " --limit 200 --json " + (d / "drift.json").string());
  ASSERT_EQ(dr.code, 0) << dr.out;
  EXPECT_NE(dr.out.find("torch vs tensorflow"), std::string::npos) << dr.out;
  EXPECT_NE(dr.out.find("no layer diverges beyond the tolerance"), std::string::npos) << dr.out;
  std::string json = read_all(d / "drift.json");
  EXPECT_NE(json.find("\"misclassification\""), std::string::npos);
  EXPECT_NE(json.find("\"first_divergent\": -1"), std::string::npos) << json.substr(0, 400);
  CliRun raw = run_driftlab("drift --weights " + w + " --limit 200 --no-convert --policies theano,torch");
  ASSERT_EQ(raw.code, 0) << raw.out;
  EXPECT_NE(raw.out.find("<- first beyond tolerance"), std::string::npos) << raw.out;
  CliRun mismatch = run_driftlab("drift --model lenet5 --weights " + w);
  EXPECT_EQ(mismatch.code, 1);
  EXPECT_NE(mismatch.out.find("--model lenet5 does not match"), std::string::npos) << mismatch.out;
  CliRun at = run_driftlab("attribute --weights " + w + " --from tensorflow --to torch --limit 200 --json " +
                       (d / "attr.json").string());
  ASSERT_EQ(at.code, 0) << at.out;
  EXPECT_NE(at.out.find("changes nothing on this model"), std::string::npos) << at.out;
  EXPECT_NE(read_all(d / "attr.json").find("\"path\""), std::string::npos);
  // The GPU variants differ in every framework knob and in math_matmul (TensorFlow's TF32 matmuls,
  // PyTorch's float32 ones): the math mode is what moves the outputs. TF32 rounds each operand to
  // 2^-11 of itself, a kernel's summation order each sum to ~2^-24: 100x apart at least (measured:
  // 1.4e-6 against 1.2e-9, conv_backend).
  CliRun gpu = run_driftlab("attribute --weights " + w + " --from torch_gpu --to tensorflow_gpu --limit 200 --json " +
                            (d / "gpu.json").string());
  ASSERT_EQ(gpu.code, 0) << gpu.out;
  const nlohmann::json g = nlohmann::json::parse(read_all(d / "gpu.json"));
  std::string top;
  double top_d = -1, second = 0;
  for (const auto& k : g.at("single")) {
    const double m = k.at("vs_from").at("mean_abs").get<double>();
    if (m > top_d) {
      second = std::max(second, top_d);
      top_d = m;
      top = k.at("knob").get<std::string>();
    } else {
      second = std::max(second, m);
    }
  }
  EXPECT_EQ(top, "math_matmul") << gpu.out;
  EXPECT_GT(top_d, 100 * second) << gpu.out;
  CliRun ex = run_driftlab("explain conv_same_pad");
  EXPECT_EQ(ex.code, 0);
  EXPECT_NE(ex.out.find("pads top/bottom/left/right 0/1/0/1"), std::string::npos) << ex.out;
  CliRun bad = run_driftlab("explain bn_epsilon");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("unknown knob 'bn_epsilon'"), std::string::npos) << bad.out;
  fs::remove_all(d);
}

// The bar driftlab must meet: LeNet-5, one epoch of Fashion-MNIST at batch 128 under the torch
// preset reaches 85% test accuracy, and the same seed and thread count give byte-identical models.
// Recipe: inputs standardised with the training set's mean/std, SGD lr 0.05, Nesterov momentum 0.9
// (PyTorch 1.13 itself reaches 84-86% with this recipe, depending on seed).
TEST(Cli, LeNet5OneEpochAccuracyAndByteIdenticalModels) {
  if (!have_fashion_mnist()) DRIFTLAB_SKIP_OR_REQUIRE("Fashion-MNIST not installed (apt-get install dataset-fashion-mnist)");
  fs::path a = temp_dir("acc_a"), b = temp_dir("acc_b");
  const std::string args =
      "train --model lenet5 --policy torch --epochs 1 --batch 128 --lr 0.05 --momentum 0.9 --nesterov --normalize "
      "--seed 1 --threads 2 --no-progress --out ";
  CliRun ra = run_driftlab(args + a.string());
  ASSERT_EQ(ra.code, 0) << ra.out;
  CliRun rb = run_driftlab(args + b.string());
  ASSERT_EQ(rb.code, 0) << rb.out;
  std::size_t pos = ra.out.find("test accuracy ");
  ASSERT_NE(pos, std::string::npos) << ra.out;
  double acc = std::stod(ra.out.substr(pos + 14));
  std::cout << "LeNet-5 torch preset, 1 epoch, B-128: test accuracy " << acc << "\n";
  EXPECT_GE(acc, 0.85);
  std::string ma = read_all(a / "model.dlm"), mb = read_all(b / "model.dlm");
  ASSERT_FALSE(ma.empty());
  EXPECT_TRUE(ma == mb) << "model files differ between two identical runs";
  fs::remove_all(a);
  fs::remove_all(b);
}

}  // namespace

// The recurrent models end to end on sequential Fashion-MNIST: train, eval, weights export in
// the Keras layout (kernel (in,4u) / (in,3u), one bias) and import back, drift and attribute.
TEST(Cli, RecurrentModelsTrainEvalExportDrift) {
  if (!have_fashion_mnist()) DRIFTLAB_SKIP_OR_REQUIRE("Fashion-MNIST not installed");
  fs::path d = temp_dir("rnn");
  const std::string data = " --dataset seq-fashion-mnist --limit 256 --threads 1";
  for (const char* m : {"lstm", "gru"}) {
    const std::string G = std::string(m) == "lstm" ? "512" : "384";
    fs::path md = d / m;
    CliRun tr = run_driftlab(std::string("train --model ") + m + " --policy tensorflow --no-progress --out " + md.string() + data);
    ASSERT_EQ(tr.code, 0) << tr.out;
    EXPECT_NE(tr.out.find("test accuracy"), std::string::npos) << tr.out;
    std::string w = (md / "model.dlm").string();
    CliRun wrong = run_driftlab("eval --limit 100 --weights " + w);  // plain fashion-mnist: (1,28,28) images
    EXPECT_EQ(wrong.code, 1) << wrong.out;
    CliRun ex = run_driftlab("weights export --weights " + w + " --out " + (md / "w").string());
    ASSERT_EQ(ex.code, 0) << ex.out;
    EXPECT_NE(ex.out.find(std::string("0.") + m + ".weight_ih.npy [28," + G + "]"), std::string::npos) << ex.out;
    EXPECT_NE(ex.out.find(std::string("0.") + m + ".weight_hh.npy [128," + G + "]"), std::string::npos) << ex.out;
    EXPECT_EQ(ex.out.find("bias_hh"), std::string::npos) << "one bias under tensorflow:\n" << ex.out;
    CliRun im = run_driftlab(std::string("weights import --model ") + m + " --policy tensorflow --from " +
                         (md / "w").string() + " --out " + (md / "back.dlm").string());
    ASSERT_EQ(im.code, 0) << im.out;
    CliRun e1 = run_driftlab("eval --weights " + w + data);
    CliRun e2 = run_driftlab("eval --weights " + (md / "back.dlm").string() + data);
    ASSERT_EQ(e1.code, 0) << e1.out;
    EXPECT_EQ(e1.out, e2.out) << "imported weights evaluate differently";
    CliRun dr = run_driftlab("drift --weights " + w + " --policies tensorflow,theano,torch" + data);
    ASSERT_EQ(dr.code, 0) << dr.out;
    EXPECT_NE(dr.out.find("torch vs tensorflow"), std::string::npos) << dr.out;
    CliRun at = run_driftlab("attribute --weights " + w + " --from tensorflow --to torch" + data);
    ASSERT_EQ(at.code, 0) << at.out;
    EXPECT_NE(at.out.find("rnn_recurrent_activation"), std::string::npos) << at.out;
  }
  fs::remove_all(d);
}
