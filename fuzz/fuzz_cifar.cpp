// CIFAR-10 binary reader (engine/data/cifar.cpp) through its istream entry. On success: whole
// records, labels 0..9, pixels in [0,1].
#include <sstream>

#include "engine/data/cifar.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  fuzz_one([&] {
    std::istringstream in(fuzz_bytes(data, size));
    Dataset d = read_cifar_bin(in, "fuzz.bin");
    fuzz_require(static_cast<std::size_t>(d.images.dim(0)) * kCifarRecordBytes == size, "cifar: whole records");
    for (int32_t l : d.labels) fuzz_require(l >= 0 && l < 10, "cifar: label in 0..9");
    const float* x = d.images.data<float>();
    for (int64_t i = 0; i < d.images.numel(); ++i) fuzz_require(x[i] >= 0.0f && x[i] <= 1.0f, "cifar: pixel in [0,1]");
  });
  return 0;
}
