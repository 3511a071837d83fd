// The CUDA knobs resolve into the device exec params (engine/cuda/device_net.h
// resolve_cuda_exec) per preset and when flipped; the CPU path never reads them. Runs without
// a device: resolution is plain C++.
#include <gtest/gtest.h>

#include "engine/cuda/device_net.h"
#include "engine/policy.h"

namespace {

using namespace driftlab;

TEST(CudaKnobs, PresetsResolveToTheirFrameworksDefaults) {
  const cuda::CudaExecParams torch = resolve_cuda_exec(Policy::torch());
  EXPECT_EQ(torch.conv_backend, cuda::CudaBackend::vendor);
  EXPECT_EQ(torch.gemm_backend, cuda::CudaBackend::vendor);
  EXPECT_EQ(torch.rnn_backend, cuda::CudaBackend::vendor) << "nn.LSTM/nn.GRU on CUDA call cuDNN's RNN";
  EXPECT_FALSE(torch.tf32_matmul) << "PyTorch >= 1.12: matmul.allow_tf32 = False";
  EXPECT_TRUE(torch.tf32_conv) << "PyTorch: cudnn.allow_tf32 = True";
  EXPECT_FALSE(torch.deterministic);
  EXPECT_EQ(torch.algo_search, cuda::CudnnAlgoSearch::heuristic) << "cudnn.benchmark = False";
  const cuda::CudaExecParams tf = resolve_cuda_exec(Policy::tensorflow());
  EXPECT_FALSE(tf.tf32_matmul);
  EXPECT_FALSE(tf.tf32_conv) << "TF 1.x predates TF32";
  EXPECT_EQ(tf.algo_search, cuda::CudnnAlgoSearch::exhaustive) << "TF autotunes cuDNN by default";
  EXPECT_FALSE(tf.rnn_persist_small_h) << "TF's cuDNN RNN runs the default (standard) algorithm";
  EXPECT_TRUE(resolve_cuda_exec(Policy::torch()).rnn_persist_small_h) << "PyTorch's get_algo picks small-h";
  const cuda::CudaExecParams th = resolve_cuda_exec(Policy::theano());
  EXPECT_FALSE(th.tf32_conv);
  EXPECT_EQ(th.algo_search, cuda::CudnnAlgoSearch::heuristic);
}

TEST(CudaKnobs, EachKnobFlipsItsField) {
  const cuda::CudaExecParams own = resolve_cuda_exec(Policy::parse("torch,cuda_kernels=own"));
  for (cuda::CudaBackend b : {own.gemm_backend, own.conv_backend, own.pool_backend, own.bn_backend, own.softmax_backend,
                              own.rnn_backend})
    EXPECT_EQ(b, cuda::CudaBackend::own);
  EXPECT_TRUE(resolve_cuda_exec(Policy::parse("torch,tf32_matmul=true")).tf32_matmul);
  EXPECT_FALSE(resolve_cuda_exec(Policy::parse("torch,tf32_conv=false")).tf32_conv);
  EXPECT_TRUE(resolve_cuda_exec(Policy::parse("torch,cuda_deterministic=true")).deterministic);
  EXPECT_EQ(resolve_cuda_exec(Policy::parse("torch,cudnn_algo_search=exhaustive")).algo_search,
            cuda::CudnnAlgoSearch::exhaustive);
  EXPECT_FALSE(resolve_cuda_exec(Policy::parse("torch,cudnn_rnn_algo=standard")).rnn_persist_small_h);
  EXPECT_TRUE(resolve_cuda_exec(Policy::parse("tensorflow,cudnn_rnn_algo=torch_heuristic")).rnn_persist_small_h);
  // TF >= 2.4's TF32 defaults are two knobs away from the tensorflow preset.
  const cuda::CudaExecParams tf2 = resolve_cuda_exec(Policy::parse("tensorflow,tf32_matmul=true,tf32_conv=true"));
  EXPECT_TRUE(tf2.tf32_matmul && tf2.tf32_conv);
  EXPECT_NE(resolve_cuda_exec(Policy::torch()).str(), own.str()) << "reports show the backend";
}

TEST(CudaKnobs, UnknownValueIsRefusedNamingTheKnob) {
  try {
    Policy::parse("torch,cuda_kernels=cudnn");
    FAIL() << "cuda_kernels=cudnn was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda_kernels"), std::string::npos) << e.what();
  }
}

}  // namespace
