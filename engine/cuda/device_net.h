// A built Model on a CUDA device: each CPU layer gets a device counterpart made from the op
// parameters the CPU layer resolved from the Policy in its constructor (so the Policy is
// resolved once, for both devices), and from its weights, which are uploaded once and live on
// the device while training. Layers run forward(ctx, x) / backward(ctx, dy) as on the CPU
// (engine/layers/layer.h): forward keeps what backward needs, backward returns dx and ADDS
// into the parameter gradients. download() copies weights and BatchNorm statistics back into
// the CPU Model (for saving, or to compare with a CPU run).
//
// Covered: conv2d, max/avg pooling, dense, activations, flatten (chw and hwc), dropout (the
// mask is drawn on the host from the run's Rng, the same draws as the CPU layer), batchnorm,
// residual (identity, option A, option B), global average pooling, embedding (ids checked and
// the padding mask made on the host, as the CPU layer does) and LSTM/GRU (own kernels or cuDNN,
// rnn_mask included). A layer kind without a device counterpart is refused by name before
// anything is uploaded.
//
// To add a layer: 1) a DeviceLayer subclass in device_net.cpp built from the CPU layer's
// accessors (add one to the CPU layer's header if a resolved field is private); 2) a branch in
// make_device_layer(); 3) a case in tests/cuda/test_model_cuda.cpp comparing a training step
// with the CPU layer.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/model.h"
#include "kernels/cuda/runtime.h"

namespace driftlab {

class Rng;

// Activations move between device layers as shared pointers: a layer keeps its input for
// backward without a copy, and flatten hands out a reshaped view of the same block.
using DeviceValue = std::shared_ptr<cuda::DeviceTensor>;

// A parameter (or BatchNorm running statistic) on the device, mirroring a CPU Param.
struct DeviceParam {
  std::string name;  // as Sequential::named_params / named_buffers name it
  Param* host = nullptr;
  cuda::DeviceTensor value, grad;  // grad: parameters only
  bool is_bias = false;
};

// What a device forward/backward pass runs with (the twin of RunContext).
struct DeviceRunContext {
  cuda::CudaContext& ctx;
  bool training = false;
  Rng* rng = nullptr;  // dropout's stream while training
  bool input_grad = true;
  bool need_dx = true;
  // The padding mask an embedding published for the recurrent layer after it (RunContext's).
  StepMask step_mask{};
};

class DeviceLayer {
 public:
  virtual ~DeviceLayer() = default;
  virtual DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) = 0;
  // Returns dx, or null when !run.need_dx.
  virtual DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) = 0;
  // Containers run named children and leave error context to them.
  virtual bool container() const { return false; }
};

// The Sequential on the device. Errors thrown by a layer (an out-of-memory among them) come
// back as one line naming the layer's path, kind, pass and batch:
//   "cuda: forward of layer 4.residual.main.0 (conv2d), batch 100000: cuda: out of device memory: ..."
class DeviceSequential {
 public:
  struct Entry {
    std::string path, kind;
    std::unique_ptr<DeviceLayer> layer;
  };
  explicit DeviceSequential(std::vector<Entry> layers) : layers_(std::move(layers)) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x);
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy);

 private:
  std::vector<Entry> layers_;
};

// Throws "cuda: model M: layer 3 (kind) has no CUDA implementation ..." when the model holds a
// layer the device path does not cover; needs no device.
void check_device_supported(Model& model);

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
