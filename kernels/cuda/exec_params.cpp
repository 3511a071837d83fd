// The CUDA exec params' names and report string: plain C++, so that every build (with or
// without nvcc) prints the same resolution (driftlab explain, reports).
#include <sstream>

#include "kernels/cuda/runtime.h"

namespace driftlab {
namespace cuda {

const char* cuda_backend_name(CudaBackend b) { return b == CudaBackend::own ? "own" : "vendor"; }

std::string CudaExecParams::str() const {
  std::ostringstream os;
  os << "gemm=" << (gemm_backend == CudaBackend::own ? "own" : "cublas")
     << " conv=" << (conv_backend == CudaBackend::own ? "own" : "cudnn")
     << " pool=" << (pool_backend == CudaBackend::own ? "own" : "cudnn")
     << " bn=" << (bn_backend == CudaBackend::own ? "own" : "cudnn")
     << " softmax=" << (softmax_backend == CudaBackend::own ? "own" : "cudnn")
     << " rnn=" << (rnn_backend == CudaBackend::own ? "own" : "cudnn") << " tf32_matmul=" << tf32_matmul
     << " tf32_conv=" << tf32_conv << " deterministic=" << deterministic
     << " algo_search=" << (algo_search == CudnnAlgoSearch::heuristic ? "heuristic" : "exhaustive")
     << " rnn_algo=" << (rnn_persist_small_h ? "torch_heuristic" : "standard")
     << " workspace_limit=" << workspace_limit;
  return os.str();
}

}  // namespace cuda
}  // namespace driftlab
