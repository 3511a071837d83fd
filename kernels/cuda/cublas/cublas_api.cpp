#include "kernels/cuda/cublas/cublas_api.h"

#include <dlfcn.h>

#include <fstream>
#include <string>

#include "core/error.h"

namespace driftlab {
namespace cuda {

namespace {

void* open_library() {
  // By soname first (the loader's search path, as a link would), then the file the build linked
  // its headers against (DRIFTLAB_CUBLAS_PATH, CMakeLists.txt).
  const std::string soname = "libcublas.so." DRIFTLAB_CUBLAS_MAJOR;
  if (void* h = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  const char* why = dlerror();  // dlerror() clears the error it returns: read it once
  const std::string first = why ? why : "";
  if (void* h = dlopen(DRIFTLAB_CUBLAS_PATH, RTLD_NOW | RTLD_LOCAL)) return h;
  const char* second = dlerror();
  fail("cuda: cannot open cuBLAS: ", soname, " (", first, "), ", DRIFTLAB_CUBLAS_PATH, " (", second ? second : "",
       ")");
}

template <typename F>
void resolve(void* lib, const char* name, F& out) {
  void* p = dlsym(lib, name);
  check(p != nullptr, "cuda: cuBLAS has no function ", name, " (", DRIFTLAB_CUBLAS_PATH, ")");
  out = reinterpret_cast<F>(p);
}

CublasApi load() {
  void* lib = open_library();
  CublasApi a;
  resolve(lib, "cublasCreate_v2", a.create);
  resolve(lib, "cublasDestroy_v2", a.destroy);
  resolve(lib, "cublasSetStream_v2", a.set_stream);
  resolve(lib, "cublasSetMathMode", a.set_math_mode);
  resolve(lib, "cublasSetAtomicsMode", a.set_atomics_mode);
  resolve(lib, "cublasSgemm_v2", a.sgemm);
  resolve(lib, "cublasDgemm_v2", a.dgemm);
  resolve(lib, "cublasGetStatusString", a.status_string);
  return a;
}

}  // namespace

const CublasApi& cublas_api() {
  static const CublasApi api = load();
  return api;
}

bool cublas_loaded() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libcublasLt") != std::string::npos) return true;
  return false;
}

}  // namespace cuda
}  // namespace driftlab
