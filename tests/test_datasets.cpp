// Datasets by name (engine/data/datasets.h) on small files each test writes: the names and
// their errors, --limit, the seq-* view of IDX images, synthetic-cifar10's sizes, and IMDb read
// once for both splits through one DatasetLoader, with its options from the spec, the model
// file's metadata or the Keras defaults. Also the input transform a model file records.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/data/datasets.h"
#include "engine/data/transform.h"
#include "tests/scratch_util.h"
#include "tests/test_util.h"

namespace driftlab {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& p, const std::string& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream os(p, std::ios::binary);
  os.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(os.good()) << p;
}

// An IDX file: 0, 0, type 0x08 (unsigned byte), ndim, big-endian dims, then the bytes.
std::string idx_file(const std::vector<uint32_t>& dims, const std::string& data) {
  std::string b = {0, 0, 8, static_cast<char>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<char>(d >> s));
  return b + data;
}

// MNIST-named IDX files in dir: n_train and n_test 28x28 images whose pixel j of image i is
// (i*31 + j) mod 256 (each image differs), labels i mod 10.
void write_mnist_like(const fs::path& dir, uint32_t n_train, uint32_t n_test) {
  for (const auto& [prefix, n] : {std::pair<std::string, uint32_t>{"train", n_train}, {"t10k", n_test}}) {
    std::string pixels, labels;
    for (uint32_t i = 0; i < n; ++i) {
      for (uint32_t j = 0; j < 28 * 28; ++j) pixels.push_back(static_cast<char>((i * 31 + j) % 256));
      labels.push_back(static_cast<char>(i % 10));
    }
    write_file(dir / (prefix + "-images-idx3-ubyte"), idx_file({n, 28, 28}, pixels));
    write_file(dir / (prefix + "-labels-idx1-ubyte"), idx_file({n}, labels));
  }
}

// A four-review aclImdb corpus. Training counts: good 2, film 2, bad 1 (good seen first), so
// the ids are good=2, film=3, bad=4; "plot" occurs only in the test split: out of vocabulary.
void write_imdb(const fs::path& dir) {
  write_file(dir / "train/pos/a.txt", "Good, good film.");
  write_file(dir / "train/neg/b.txt", "Bad film");
  write_file(dir / "test/pos/c.txt", "good plot");
  write_file(dir / "test/neg/d.txt", "bad bad bad film!");
}

std::vector<int> row_ids(const Tensor& t, int64_t i) {
  std::vector<int> r;
  for (int64_t j = 0; j < t.dim(1); ++j) r.push_back(static_cast<int>(t.at(i * t.dim(1) + j)));
  return r;
}

DataSpec spec_of(const std::string& dataset, const fs::path& dir, int64_t limit = 0) {
  DataSpec s;
  s.dataset = dataset;
  s.data_dir = dir.string();
  s.limit = limit;
  return s;
}

TEST(Datasets, UnknownNameListsTheKnownOnes) {
  DatasetLoader loader;
  const DataSpec s = spec_of("kmnist", "/nonexistent");
  EXPECT_TRUE(throws_error_with([&] { loader.load(s, Split::test); }, {"data: unknown dataset 'kmnist' (known: "}));
  ASSERT_EQ(dataset_names().size(), 7u);
  for (const std::string& name : dataset_names()) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(throws_error_with([&] { loader.load(s, Split::test); }, {name}));
  }
}

TEST(Datasets, MissingDataDirNamesTheOption) {
  DatasetLoader loader;
  for (const char* name : {"mnist", "seq-mnist", "cifar10", "imdb"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(throws_error_with([&] { loader.load(spec_of(name, ""), Split::train); },
                                  {std::string("--dataset ") + name + " needs --data-dir DIR"}));
  }
  // A folder that is not there is named by the reader of each format.
  const std::string nowhere = "/nonexistent/driftlab-datasets";
  for (const char* name : {"fashion-mnist", "mnist", "seq-fashion-mnist", "cifar10", "imdb"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(throws_error_with([&] { loader.load(spec_of(name, nowhere), Split::test); }, {nowhere}));
  }
}

TEST(Datasets, LimitKeepsTheFirstSamples) {
  ScratchDir tmp;
  write_mnist_like(tmp.dir, 5, 4);
  DatasetLoader loader;
  const Dataset all = loader.load(spec_of("mnist", tmp.dir), Split::train);
  EXPECT_EQ(all.name, "mnist/train");
  EXPECT_EQ(all.num_classes, 10);
  ASSERT_EQ(all.images.shape(), (Shape{5, 1, 28, 28}));
  EXPECT_EQ(all.labels, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(all.images.at(2 * 784 + 10), ((2 * 31 + 10) % 256) / 255.0f);  // what the IDX reader scales

  const Dataset three = loader.load(spec_of("mnist", tmp.dir, 3), Split::train);
  ASSERT_EQ(three.images.shape(), (Shape{3, 1, 28, 28}));
  EXPECT_EQ(three.labels, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(std::memcmp(three.images.raw(), all.images.raw(), three.images.nbytes()), 0);
  EXPECT_EQ(three.name, "mnist/train");
  // A limit at or above the split's size keeps it whole; so does 0.
  for (int64_t limit : {0, 5, 9}) EXPECT_EQ(loader.load(spec_of("mnist", tmp.dir, limit), Split::train).images.dim(0), 5);
  const Dataset test = loader.load(spec_of("mnist", tmp.dir, 2), Split::test);
  EXPECT_EQ(test.name, "mnist/test");
  EXPECT_EQ(test.images.dim(0), 2);
}

TEST(Datasets, TakeFirstCopiesRowsOfAnyDtype) {
  Dataset d;
  d.images = Tensor({4, 2}, DType::f64);
  for (int64_t i = 0; i < 8; ++i) d.images.data<double>()[i] = static_cast<double>(i);
  d.labels = {7, 6, 5, 4};
  const Dataset t = take_first(d, 2);
  ASSERT_EQ(t.images.shape(), (Shape{2, 2}));
  EXPECT_EQ(t.images.dtype(), DType::f64);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(t.images.at(i), static_cast<double>(i));
  EXPECT_EQ(t.labels, (std::vector<int32_t>{7, 6}));
  EXPECT_EQ(d.images.dim(0), 4);  // the source is untouched
  EXPECT_EQ(take_first(d, 0).images.dim(0), 4);
  EXPECT_EQ(take_first(d, -1).images.dim(0), 4);
}

TEST(Datasets, SeqViewIsTheSameImagesAsSteps) {
  ScratchDir tmp;
  write_mnist_like(tmp.dir, 5, 4);
  DatasetLoader loader;
  for (Split split : {Split::train, Split::test}) {
    const Dataset img = loader.load(spec_of("mnist", tmp.dir, 3), split);
    const Dataset seq = loader.load(spec_of("seq-mnist", tmp.dir, 3), split);
    ASSERT_EQ(seq.images.shape(), (Shape{3, 28, 28}));
    EXPECT_TRUE(bitwise_equal(seq.images, img.images.reshape({3, 28, 28})));
    EXPECT_EQ(seq.labels, img.labels);
    EXPECT_EQ(seq.name, split == Split::train ? "seq-mnist/train" : "seq-mnist/test");
  }
}

TEST(Datasets, SyntheticCifarSizes) {
  DatasetLoader loader;
  DataSpec s;
  s.dataset = "synthetic-cifar10";
  s.limit = 6;  // the limit is the size
  const Dataset train = loader.load(s, Split::train), test = loader.load(s, Split::test);
  ASSERT_EQ(train.images.shape(), (Shape{6, 3, 32, 32}));
  ASSERT_EQ(test.images.shape(), (Shape{6, 3, 32, 32}));
  EXPECT_EQ(train.name, "synthetic-cifar10/train");
  EXPECT_EQ(test.name, "synthetic-cifar10/test");
  EXPECT_EQ(train.num_classes, 10);
  EXPECT_EQ(train.labels.size(), 6u);
  for (int32_t l : train.labels) EXPECT_TRUE(l >= 0 && l < 10) << l;
  EXPECT_FALSE(bitwise_equal(train.images, test.images)) << "the splits come from different seeds";
  EXPECT_TRUE(bitwise_equal(loader.load(s, Split::train).images, train.images)) << "same seed, same images";
  s.limit = 0;  // CIFAR-10's test split size
  EXPECT_EQ(loader.load(s, Split::test).images.shape(), (Shape{10000, 3, 32, 32}));
}

TEST(Datasets, ImdbBothSplitsFromOneRead) {
  ScratchDir tmp;
  write_imdb(tmp.dir);
  std::vector<std::string> reads;
  DatasetLoader loader([&](const std::string& dir, const ImdbOptions& o, const ImdbData& d) {
    reads.push_back(imdb_summary(dir, o, d));
  });
  DataSpec s = spec_of("imdb", tmp.dir);
  s.max_len = 3;
  s.seq_pad = "post";
  s.seq_truncate = "post";
  const Dataset train = loader.load(s, Split::train);
  const Dataset test = loader.load(s, Split::test);
  ASSERT_EQ(reads.size(), 1u) << "the test split comes from the same read";
  // 11 tokens (3+2 train, 2+4 test), "plot" out of vocabulary, d.txt cut from 4 to 3.
  EXPECT_EQ(reads[0], "imdb: 4 reviews from " + tmp.dir.string() +
                          ", vocabulary 3 words (of 3 in train), 11 tokens, 9.09% out of vocabulary, 1 reviews cut to "
                          "3 tokens (post), padding post");
  EXPECT_EQ(train.name, "imdb/train");
  EXPECT_EQ(test.name, "imdb/test");
  ASSERT_EQ(train.images.shape(), (Shape{2, 3}));
  ASSERT_EQ(test.images.shape(), (Shape{2, 3}));
  EXPECT_EQ(train.labels, (std::vector<int32_t>{1, 0}));  // pos, then neg
  EXPECT_EQ(row_ids(train.images, 0), (std::vector<int>{2, 2, 3}));  // good good film
  EXPECT_EQ(row_ids(train.images, 1), (std::vector<int>{4, 3, 0}));  // bad film, padded after
  // The test split maps with the training vocabulary: plot is out of vocabulary.
  EXPECT_EQ(row_ids(test.images, 0), (std::vector<int>{2, kOovId, 0}));
  EXPECT_EQ(row_ids(test.images, 1), (std::vector<int>{4, 4, 4}));  // bad bad bad (film cut)

  // --limit cuts the cached split, without a read.
  s.limit = 1;
  const Dataset one = loader.load(s, Split::train);
  ASSERT_EQ(one.images.shape(), (Shape{1, 3}));
  EXPECT_EQ(row_ids(one.images, 0), (std::vector<int>{2, 2, 3}));
  EXPECT_EQ(reads.size(), 1u);
  // Other options are another corpus: read again; then asking for it again is not.
  s.max_len = 2;
  EXPECT_EQ(loader.load(s, Split::test).images.shape(), (Shape{1, 2}));
  EXPECT_EQ(loader.load(s, Split::train).images.shape(), (Shape{1, 2}));
  EXPECT_EQ(reads.size(), 2u);
  // A second loader owns its own corpus.
  DatasetLoader other;
  EXPECT_EQ(other.load(s, Split::train).images.shape(), (Shape{1, 2}));
  EXPECT_EQ(reads.size(), 2u);
}

TEST(Datasets, ImdbOptionsFromSpecThenModelFileThenKeras) {
  const ImdbOptions keras = imdb_options(DataSpec{}, nullptr);
  EXPECT_EQ(keras.vocab_size, 20000);
  EXPECT_EQ(keras.max_len, 80);
  EXPECT_EQ(keras.pad, SeqSide::pre);
  EXPECT_EQ(keras.truncate, SeqSide::pre);
  const nlohmann::json no_imdb = {{"input_mean", 0.5}};
  EXPECT_EQ(imdb_json(imdb_options(DataSpec{}, &no_imdb)), imdb_json(keras));

  ImdbOptions trained;
  trained.vocab_size = 7;
  trained.max_len = 5;
  trained.pad = SeqSide::post;
  trained.truncate = SeqSide::post;
  const nlohmann::json meta = {{"imdb", imdb_json(trained)}};
  EXPECT_EQ(imdb_json(imdb_options(DataSpec{}, &meta)), imdb_json(trained));  // the file's, read back
  DataSpec s;
  s.vocab_size = 9;
  s.seq_pad = "pre";
  const ImdbOptions mixed = imdb_options(s, &meta);
  EXPECT_EQ(mixed.vocab_size, 9);         // the spec wins
  EXPECT_EQ(mixed.pad, SeqSide::pre);
  EXPECT_EQ(mixed.max_len, 5);            // the rest from the file
  EXPECT_EQ(mixed.truncate, SeqSide::post);
  s.seq_truncate = "middle";
  EXPECT_TRUE(throws_error_with([&] { imdb_options(s, &meta); }, {"'middle'"}));

  // The loader reads a model file's length when the spec leaves it open.
  ScratchDir tmp;
  write_imdb(tmp.dir);
  DatasetLoader loader;
  EXPECT_EQ(loader.load(spec_of("imdb", tmp.dir), Split::test, &meta).images.shape(), (Shape{2, 5}));
  EXPECT_EQ(loader.load(spec_of("imdb", tmp.dir), Split::test).images.shape(), (Shape{2, 80}));
}

TEST(Datasets, InputNormFromModelMetadata) {
  EXPECT_TRUE(input_norm_from_metadata(nlohmann::json::object()).identity());
  const InputNorm n = input_norm_from_metadata({{"input_mean", 0.25}, {"input_std", 2.0}, {"epochs", 1}});
  EXPECT_EQ(n.mean, 0.25);
  EXPECT_EQ(n.std, 2.0);
}

}  // namespace
}  // namespace driftlab
