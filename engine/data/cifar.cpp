#include "engine/data/cifar.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "engine/random.h"

namespace driftlab {

Dataset read_cifar_bin(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  check(f.good(), "cifar10: cannot open ", path);
  return read_cifar_bin(f, path);
}

Dataset read_cifar_bin(std::istream& in, const std::string& path) {
  // istream::read, not istreambuf_iterator: a failing read(2) sets badbit here, where the
  // iterator would end as if at EOF (or let the filebuf's std::ios_base::failure escape). One
  // record per read: a failed read reports no count, so the offset named is the start of the
  // record that could not be read.
  std::vector<unsigned char> bytes;
  for (;;) {
    const std::size_t have = bytes.size();
    bytes.resize(have + kCifarRecordBytes);
    errno = 0;
    in.read(reinterpret_cast<char*>(bytes.data() + have), kCifarRecordBytes);
    const int err = errno;
    if (in.bad())
      fail("cifar10: ", path, ": read error at offset ", have, err ? " (" : "", err ? std::strerror(err) : "",
           err ? ")" : "");
    bytes.resize(have + static_cast<std::size_t>(in.gcount()));
    if (!in) break;  // end of the stream (eofbit and failbit)
  }
  const int64_t size = static_cast<int64_t>(bytes.size());
  check(size > 0, "cifar10: ", path, " is empty");
  check(size % kCifarRecordBytes == 0, "cifar10: ", path, ": truncated record at offset ",
        size / kCifarRecordBytes * kCifarRecordBytes, " (", size % kCifarRecordBytes, " of ", kCifarRecordBytes,
        " bytes; records are 1 label byte + 3072 pixel bytes)");
  const int64_t n = size / kCifarRecordBytes;
  Dataset d;
  d.name = "cifar10";
  d.num_classes = 10;
  d.images = Tensor::empty({n, 3, 32, 32}, DType::f32);
  d.labels.resize(static_cast<std::size_t>(n));
  float* img = d.images.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const unsigned char* rec = bytes.data() + i * kCifarRecordBytes;
    check(rec[0] < 10, "cifar10: ", path, ": label ", static_cast<int>(rec[0]), " at offset ", i * kCifarRecordBytes,
          " is outside 0..9");
    d.labels[static_cast<std::size_t>(i)] = rec[0];
    for (int64_t j = 0; j < kCifarRecordBytes - 1; ++j) img[i * (kCifarRecordBytes - 1) + j] = rec[1 + j] / 255.0f;
  }
  return d;
}

Dataset load_cifar10(const std::string& dir, bool train) {
  namespace fs = std::filesystem;
  check(fs::is_directory(dir), "cifar10: data directory ", dir, " does not exist");
  std::vector<std::string> files;
  if (train) {
    for (int i = 1; i <= 5; ++i) files.push_back("data_batch_" + std::to_string(i) + ".bin");
  } else {
    files.push_back("test_batch.bin");
  }
  std::vector<Dataset> parts;
  int64_t total = 0;
  for (const auto& name : files) {
    fs::path p = fs::path(dir) / name;
    check(fs::exists(p), "cifar10: ", dir, " has no ", name, " (the CIFAR-10 binary version)");
    parts.push_back(read_cifar_bin(p.string()));
    total += parts.back().images.dim(0);
  }
  Dataset d;
  d.name = train ? "cifar10/train" : "cifar10/test";
  d.num_classes = 10;
  d.images = Tensor::empty({total, 3, 32, 32}, DType::f32);
  int64_t at = 0;
  for (const auto& p : parts) {
    std::memcpy(d.images.data<float>() + at * 3072, p.images.data<float>(), p.images.nbytes());
    d.labels.insert(d.labels.end(), p.labels.begin(), p.labels.end());
    at += p.images.dim(0);
  }
  return d;
}

Dataset synthetic_cifar10(int64_t n, uint64_t seed) {
  check(n >= 1, "synthetic-cifar10: n=", n, " must be >= 1");
  Dataset d;
  d.name = "synthetic-cifar10";
  d.num_classes = 10;
  d.images = Tensor::empty({n, 3, 32, 32}, DType::f32);
  Rng rng(RngEngine::mt19937_u24, seed);
  float* x = d.images.data<float>();
  for (int64_t i = 0; i < d.images.numel(); ++i) x[i] = rng.uniform_f32();
  for (int64_t i = 0; i < n; ++i) d.labels.push_back(static_cast<int32_t>(rng.next_u32() % 10));
  return d;
}

}  // namespace driftlab
