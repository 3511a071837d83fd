// cuBLAS is opened on the first device gemm, not linked (kernels/cuda/cublas/cublas_api.h): linking
// it made every process run libcublasLt's static initialisers (about 0.6 s and 210 MB) before
// main(), GPU or not.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

#if DRIFTLAB_HAVE_CUDA
#include "kernels/cuda/cublas/cublas_api.h"
#endif

namespace {

std::string output_of(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  pclose(p);
  return out;
}

// The dynamic loader's list of what it loads for `driftlab policy show torch` (LD_DEBUG=libs):
// oneDNN and cuDNN (linked), no cuBLAS.
TEST(CublasLoader, TheCliLoadsNoCublas) {
  const std::string libs = output_of("LD_DEBUG=libs " DRIFTLAB_CLI_PATH " policy show torch");
  ASSERT_NE(libs.find("libdnnl"), std::string::npos) << "LD_DEBUG=libs listed nothing known:\n" << libs.substr(0, 2000);
  EXPECT_EQ(libs.find("libcublas"), std::string::npos) << libs.substr(0, 4000);
}

#if DRIFTLAB_HAVE_CUDA
// Opening it needs no device: every function driftlab calls resolves, and libcublasLt is then mapped.
TEST(CublasLoader, OpensTheLibraryWithEveryFunctionDriftlabCalls) {
  const driftlab::cuda::CublasApi& a = driftlab::cuda::cublas_api();
  EXPECT_TRUE(a.create && a.destroy && a.set_stream && a.set_math_mode && a.set_atomics_mode && a.sgemm && a.dgemm &&
              a.status_string);
  EXPECT_TRUE(driftlab::cuda::cublas_loaded());
  // The library's own text for a status (cuBLAS 13): the resolved function is the real one.
  EXPECT_STREQ(a.status_string(CUBLAS_STATUS_NOT_INITIALIZED), "the library was not initialized");
}
#endif

}  // namespace
