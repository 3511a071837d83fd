// CIFAR-10 binary reader on files the test writes: good files (values, plane order, the
// 5-batch concatenation), truncated records, bad labels, missing files and folders.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <streambuf>
#include <vector>

#include "engine/data/cifar.h"
#include "tests/scratch_util.h"
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

// A read error is not the end of the file: reading a folder fails in read(2) (EISDIR) at offset 0,
// which must be a driftlab error naming the path and the offset, not an empty or a foreign
// (std::ios_base::failure) result.
TEST(Cifar, ReadErrorIsNotEndOfFile) {
  fs::path d = temp_dir();
  fs::create_directories(d / "batch.bin");
  EXPECT_TRUE(throws_error_with([&] { read_cifar_bin((d / "batch.bin").string()); },
                                {"batch.bin", "read error at offset 0"}));
  fs::remove_all(d);
}

// A stream that serves its bytes and then fails as a disk does: its underflow throws, which
// istream turns into badbit, as libstdc++'s filebuf does on a failing read(2).
struct FailingAfter : std::streambuf {
  std::vector<unsigned char> bytes;
  bool served = false;
  int_type underflow() override {
    if (served) throw std::ios_base::failure("simulated EIO");
    served = true;
    char* p = reinterpret_cast<char*>(bytes.data());
    setg(p, p, p + bytes.size());
    return traits_type::to_int_type(*p);
  }
};

// An error right after a whole record must not pass for the end of a one-record file.
TEST(Cifar, ReadErrorAtARecordBoundaryIsNotEndOfFile) {
  FailingAfter buf;
  buf.bytes = records(1);
  std::istream in(&buf);
  EXPECT_TRUE(throws_error_with([&] { read_cifar_bin(in, "disk.bin"); }, {"disk.bin", "read error at offset 3073"}));
  std::istringstream ok(std::string(buf.bytes.begin(), buf.bytes.end()));
  EXPECT_EQ(read_cifar_bin(ok, "mem.bin").labels, (std::vector<int32_t>{0}));
}

TEST(Cifar, SyntheticIsLabelledAndReproducible) {
  Dataset a = synthetic_cifar10(5, 3), b = synthetic_cifar10(5, 3);
  EXPECT_EQ(a.name, "synthetic-cifar10");
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(std::memcmp(a.images.raw(), b.images.raw(), a.images.nbytes()), 0);
}

}  // namespace
