// .npy reader (engine/io/npy.cpp) through read_npy_bytes (fmemopen). On success the tensor's
// bytes are the file's tail and writing it back gives a header numpy would write.
#include "engine/io/npy.h"
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace driftlab;
  fuzz_one([&] {
    Tensor t = read_npy_bytes(fuzz_bytes(data, size), "fuzz.npy");
    fuzz_require(t.nbytes() <= size, "npy: data within the file");
    const std::string h = npy_header(t.dtype(), t.shape());
    fuzz_require(h.size() % 64 == 0, "npy: rewritten header aligned to 64");
  });
  return 0;
}
