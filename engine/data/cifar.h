// CIFAR-10, binary version: data_batch_1.bin .. data_batch_5.bin (training, 10,000 records
// each) and test_batch.bin. A record is 1 label byte (0..9) then 3,072 pixel bytes: the
// 32x32 red plane, then green, then blue, each row-major — which is NCHW, so images load as
// float32 [N,3,32,32] scaled to [0,1] by /255. Errors name the file and the byte offset.
// Also a synthetic CIFAR-shaped generator for benchmarks, named "synthetic-cifar10"
// everywhere it appears.
#pragma once
#include <istream>
#include <string>

#include "engine/data/dataset.h"

namespace driftlab {

constexpr int64_t kCifarRecordBytes = 1 + 3 * 32 * 32;

// Reads one .bin file of whole records. A read error (EIO, a folder) is an error naming the
// offset where it happened, never taken for the end of the file.
Dataset read_cifar_bin(const std::string& path);
// The same from a stream; `name` stands for the file in messages (the fuzz target's entry).
Dataset read_cifar_bin(std::istream& in, const std::string& name);
// train: data_batch_1..5.bin concatenated; test: test_batch.bin. Missing files are an error
// naming the folder and the file.
Dataset load_cifar10(const std::string& dir, bool train);
// n uniform-random images with uniform labels from `seed`: timing work, not learning.
Dataset synthetic_cifar10(int64_t n, uint64_t seed);

}  // namespace driftlab
