// A built Model on a CUDA device: each CPU layer gets a device counterpart
// (engine/cuda/device_layer.h, one file per layer in engine/cuda/layers/) made from the op
// parameters the CPU layer resolved from the Policy in its constructor (so the Policy is
// resolved once, for both devices), and from its weights, which are uploaded once and live on
// the device while training. download() copies weights and BatchNorm statistics back into the
// CPU Model (for saving, or to compare with a CPU run).
//
// Covered: conv2d, max/avg pooling, dense, activations, flatten (chw and hwc), dropout (the
// mask is drawn on the host from the run's Rng, the same draws as the CPU layer), batchnorm,
// residual (identity, option A, option B), global average pooling, embedding (ids checked and
// the padding mask made on the host, as the CPU layer does) and LSTM/GRU (own kernels or cuDNN,
// rnn_mask included). A layer kind without a device counterpart is refused by name before
// anything is uploaded.
//
// To add a layer: see engine/cuda/device_layer.h.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/device_layer.h"
#include "engine/model.h"
#include "kernels/cuda/runtime.h"

namespace driftlab {

// Throws "cuda: model M: layer 3 (kind) has no CUDA implementation ..." when the model holds a
// layer the device path does not cover; needs no device.
void check_device_supported(Model& model);
// What the device path does with each layer kind (the capability table, driftlab model kinds).
SupportColumn device_support();

// The Policy's CUDA knobs (cuda_kernels, tf32_matmul, tf32_conv, cuda_deterministic,
// cudnn_algo_search) as exec params: one backend for every op family (the RNN's included).
cuda::CudaExecParams resolve_cuda_exec(const Policy& policy);

// Opens device 0 with the given switches, or throws "no CUDA device: <reason>" (the runtime's
// own words: no driver, driver too old, built without CUDA) naming what asked for it.
std::unique_ptr<cuda::CudaContext> open_cuda_device(const cuda::CudaExecParams& params, const std::string& who);

class DeviceNet {
 public:
  // Uploads the model's parameters and buffers; the model must outlive this object.
  DeviceNet(cuda::CudaContext& ctx, Model& model);
  DeviceNet(const DeviceNet&) = delete;
  DeviceNet& operator=(const DeviceNet&) = delete;

  cuda::CudaContext& ctx() { return ctx_; }
  Model& model() { return model_; }
  // Logits (N, classes) on the device; x is on the host in any float dtype (converted to the
  // model's, as Model::forward does) and copied up here.
  DeviceValue forward(DeviceRunContext& run, const Tensor& x);
  // The same from an input already on the device (in the model's dtype).
  DeviceValue forward_device(DeviceRunContext& run, const DeviceValue& x) { return net_->forward(run, x); }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dlogits);
  // Inference logits on the host. max_batch > 0 runs at most that many inputs at a time and
  // joins the chunks (for inputs whose activations do not fit the device at once).
  Tensor predict(const Tensor& x, int64_t max_batch = 0);
  void zero_grad();
  std::vector<DeviceParam*> params();
  // Weights and running statistics back into the CPU model's tensors.
  void download();

 private:
  friend struct DeviceNetBuilder;
  cuda::CudaContext& ctx_;
  Model& model_;
  std::vector<std::unique_ptr<DeviceParam>> params_, buffers_;
  std::unique_ptr<DeviceSequential> net_;
};

}  // namespace driftlab
