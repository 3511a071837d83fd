// cuBLAS, opened on first use instead of linked. libcublas.so needs libcublasLt.so, whose static
// initialisers take about 0.6 s and 210 MB in every process that links it, before main() (measured
// here: an empty C program linked against libcublasLt.so.13 runs 0.6-1.6 s and peaks at 211 MB;
// against libcudnn.so.9, 0.03 s). Every driftlab process (each of ctest's ~2,100 test processes,
// every CLI call) paid that, GPU or not. driftlab links neither now: the first cuBLAS call of a
// device run opens libcublas.so.<major> by name, else the toolkit's copy that the build found, and
// resolves the few functions driftlab calls.
#pragma once
#include <cublas_v2.h>

namespace driftlab {
namespace cuda {

struct CublasApi {
  // cublas_v2.h maps these names to their _v2 symbols; decltype follows the macros.
  decltype(&cublasCreate) create = nullptr;
  decltype(&cublasDestroy) destroy = nullptr;
  decltype(&cublasSetStream) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetAtomicsMode) set_atomics_mode = nullptr;
  decltype(&cublasSgemm) sgemm = nullptr;
  decltype(&cublasDgemm) dgemm = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// The library's functions, opened once; throws naming the library and the loader's error.
const CublasApi& cublas_api();
// Whether this process has libcublasLt mapped (it has once cublas_api() ran).
bool cublas_loaded();

}  // namespace cuda
}  // namespace driftlab
