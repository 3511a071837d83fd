// CIFAR-10 binary reader on files the test writes: good files (values, plane order, the
// 5-batch concatenation), truncated records, bad labels, missing files and folders.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/data/cifar.h"
#include "tests/test_util.h"

namespace {

using namespace driftlab;
namespace fs = std::filesystem;

fs::path temp_dir() {
  fs::path d = fs::temp_directory_path() / ("driftlab_cifar_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// n records; record i has label i%10 and pixel j = (i + j) % 256.
std::vector<unsigned char> records(int n, int first = 0) {
  std::vector<unsigned char> b;
  for (int i = first; i < first + n; ++i) {
    b.push_back(static_cast<unsigned char>(i % 10));
    for (int j = 0; j < 3072; ++j) b.push_back(static_cast<unsigned char>((i + j) % 256));
  }
  return b;
}

void write(const fs::path& p, const std::vector<unsigned char>& b) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

TEST(Cifar, ReadsRecordsInPlaneOrder) {
  fs::path d = temp_dir();
  write(d / "test_batch.bin", records(3));
  Dataset t = load_cifar10(d.string(), false);
  ASSERT_EQ(t.images.shape(), (Shape{3, 3, 32, 32}));
  EXPECT_EQ(t.labels, (std::vector<int32_t>{0, 1, 2}));
  // Record 2, green plane (offset 1024), row 0 col 5: byte (2 + 1024 + 5) % 256.
  EXPECT_FLOAT_EQ(t.images.at(((2 * 3 + 1) * 32 + 0) * 32 + 5), static_cast<float>((2 + 1024 + 5) % 256) / 255.0f);
  fs::remove_all(d);
}

TEST(Cifar, TrainConcatenatesFiveBatches) {
  fs::path d = temp_dir();
  for (int i = 1; i <= 5; ++i) write(d / ("data_batch_" + std::to_string(i) + ".bin"), records(2, 2 * (i - 1)));
  Dataset t = load_cifar10(d.string(), true);
  EXPECT_EQ(t.images.dim(0), 10);
  EXPECT_EQ(t.labels, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  fs::remove_all(d);
}

TEST(Cifar, CorruptFilesNameFileAndOffset) {
  fs::path d = temp_dir();
  auto b = records(2);
  b.resize(b.size() - 100);
  write(d / "test_batch.bin", b);
  std::string e = error_of([&] { load_cifar10(d.string(), false); });
  EXPECT_NE(e.find("test_batch.bin: truncated record at offset 3073"), std::string::npos) << e;
  b = records(2);
  b[3073] = 12;
  write(d / "test_batch.bin", b);
  e = error_of([&] { load_cifar10(d.string(), false); });
  EXPECT_NE(e.find("label 12 at offset 3073"), std::string::npos) << e;
  e = error_of([&] { load_cifar10(d.string(), true); });
  EXPECT_NE(e.find("has no data_batch_1.bin"), std::string::npos) << e;
  e = error_of([&] { load_cifar10((d / "nope").string(), false); });
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
  write(d / "test_batch.bin", {});
  e = error_of([&] { load_cifar10(d.string(), false); });
  EXPECT_NE(e.find("is empty"), std::string::npos) << e;
  fs::remove_all(d);
}

TEST(Cifar, SyntheticIsLabelledAndReproducible) {
  Dataset a = synthetic_cifar10(5, 3), b = synthetic_cifar10(5, 3);
  EXPECT_EQ(a.name, "synthetic-cifar10");
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(std::memcmp(a.images.raw(), b.images.raw(), a.images.nbytes()), 0);
}

}  // namespace
