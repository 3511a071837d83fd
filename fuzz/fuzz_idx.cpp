// IDX reader (engine/data/idx.cpp), raw and gzip, through read_idx_bytes: the same ByteSource
// as files, over fmemopen'ed bytes. On success the data holds exactly product(dims) bytes.
#include "engine/data/idx.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  fuzz_one([&] {
    IdxArray a = read_idx_bytes(fuzz_bytes(data, size), "fuzz.idx");
    uint64_t n = 1;
    for (int64_t d : a.dims) n *= static_cast<uint64_t>(d);
    fuzz_require(n == a.data.size(), "idx: data size == product(dims)");
  });
  return 0;
}
