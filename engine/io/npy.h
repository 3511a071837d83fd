// NumPy .npy files for Tensor: float32 as '<f4', float64 as '<f8', C order.
// write_npy writes format 1.0 (2.0 only when the header passes 64 KiB) byte for byte as
// numpy >= 1.24 np.save does: the dict with sorted keys, spare spaces for growing the
// first axis, space padding and a '\n' so that the data starts at a multiple of 64.
// read_npy reads formats 1.0, 2.0 and 3.0; big-endian, Fortran order and every other dtype
// are refused. Errors name the file and the byte offset where the problem was found.
#pragma once
#include <string>

#include "core/tensor.h"

namespace driftlab {

// Writes atomically: into path + ".tmp.<pid>", then std::rename over path. On failure the
// temporary file is removed and path is left as it was.
void write_npy(const std::string& path, const Tensor& t);

// Throws Error unless the file is a little-endian f4/f8 C-order array whose data size
// matches its shape exactly.
Tensor read_npy(const std::string& path);
// The same from bytes in memory; `name` stands for the file in messages. The fuzz target's
// entry (fuzz/fuzz_npy.cpp).
Tensor read_npy_bytes(const std::string& bytes, const std::string& name);

// The complete header numpy writes for this dtype and shape (magic, version, length,
// dict, padding, '\n'); its size is a multiple of 64. Exposed for tests.
std::string npy_header(DType dtype, const Shape& shape);

}  // namespace driftlab
