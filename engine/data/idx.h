// IDX reader: the file format of MNIST and Fashion-MNIST, raw or gzip-compressed.
// Layout: 2 zero bytes, a type byte (only 0x08 = unsigned byte is supported), an ndim
// byte, ndim big-endian uint32 dimensions, then the data in row-major order and nothing
// after it. Gzip is detected by its 0x1f 0x8b magic, never by the file name.
// Every error is one line naming the file and the byte offset in the uncompressed stream,
// written "header+k" inside the data ("truncated at offset 16+4704 ...").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "engine/data/dataset.h"

namespace driftlab {

// Where the Fashion-MNIST .gz files live on the machines we run on.
inline constexpr const char* kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";
// MNIST and Fashion-MNIST both have labels 0..9.
inline constexpr int kMnistNumClasses = 10;

struct IdxArray {
  std::vector<int64_t> dims;  // as declared in the header
  std::vector<uint8_t> data;  // product(dims) bytes, row-major
};

// Reads one IDX file (raw or gzip). Throws Error on any mismatch between header and bytes.
IdxArray read_idx(const std::string& path);
// The same from bytes in memory (raw or gzip); `name` stands for the file in messages. The
// fuzz target's entry (fuzz/fuzz_idx.cpp).
IdxArray read_idx_bytes(const std::string& bytes, const std::string& name);

// Pairs an image file ([n,rows,cols]) with a label file ([n]); labels must be 0..9. The
// images load as float32 [n,1,rows,cols], pixel/255 in [0,1]. limit > 0 keeps the first `limit`
// items (at most n): both files are still read and checked to their last byte, every label too,
// but only the items kept become float32 (the first 12,800 of Fashion-MNIST's 60,000: 40 MB
// instead of 188).
Dataset load_idx_dataset(const std::string& images_path, const std::string& labels_path,
                         const std::string& name, int64_t limit = 0);

// Returns dir/stem if it exists, else dir/stem.gz (stem like "train-images-idx3-ubyte").
std::string find_idx_file(const std::string& dir, const std::string& stem);

// Loads train-{images-idx3,labels-idx1}-ubyte[.gz] (train) or t10k-... (test) from dir.
Dataset load_mnist_like(const std::string& dir, bool train, const std::string& name, int64_t limit = 0);

}  // namespace driftlab
