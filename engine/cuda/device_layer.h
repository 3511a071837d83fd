// The device layers: each CPU layer kind (engine/layers/) has a counterpart here, one file per
// layer in engine/cuda/layers/ with the CPU layer's file name, made from the op parameters the
// CPU layer resolved from the Policy in its constructor (so the Policy is resolved once, for both
// devices) and from device copies of its weights. They run forward(run, x) / backward(run, dy) as
// on the CPU (engine/layers/layer.h): forward keeps what backward needs when run.record is set,
// backward returns dx and ADDS into the parameter gradients; semantics (train | inference) decide
// BatchNorm's statistics and dropout, as on the CPU.
//
// To add a layer: 1) engine/cuda/layers/<name>_layer.cpp with a DeviceLayer subclass built from
// the CPU layer's accessors (add one to the CPU layer's header if a resolved field is private)
// and its make_device_<name> factory, declared below; 2) a branch in DeviceNetBuilder::make_layer
// (device_net.cpp); 3) a case in tests/cuda/test_model_cuda.cpp comparing a training step with the
// CPU layer.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/layers/layer.h"
#include "kernels/cuda/runtime.h"

namespace driftlab {

class Rng;
class Conv2dLayer;
class Pool2dLayer;
class ActivationLayer;
class FlattenLayer;
class DropoutLayer;
class BatchNormLayer;
class GlobalAvgPoolLayer;
class ResidualLayer;
class EmbeddingLayer;
class RnnLayer;

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
  Semantics semantics = Semantics::inference;
  bool record = false;  // keep what the backward needs
  Rng* rng = nullptr;   // dropout's stream under train semantics
  bool input_grad = true;
  bool need_dx = true;
  bool param_grads = true;  // false: conv2d and dense skip dW and db (an input gradient only: attacks)
  // The padding mask an embedding published for the recurrent layer after it (RunContext's).
  StepMask step_mask{};

  static DeviceRunContext training(cuda::CudaContext& c, Rng* rng) { return {c, Semantics::train, true, rng}; }
  static DeviceRunContext inference(cuda::CudaContext& c) { return {c, Semantics::inference, false, nullptr}; }
  static DeviceRunContext recorded(cuda::CudaContext& c, Semantics s, Rng* rng = nullptr) { return {c, s, true, rng}; }
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

// Helpers of the device layers (device_layer.cpp).
DeviceValue make_value(cuda::CudaContext& ctx, Shape shape, DType dtype);
// A reshaped view that keeps the viewed block alive.
DeviceValue view_of(const DeviceValue& base, Shape shape);
// Full shape (N, per_sample...) of a device input, checked like check_input on the CPU.
void check_device_input(const char* layer, const cuda::DeviceTensor& x, const Shape& per_sample);
// y already holds one sum term; when some layer still keeps y, work on a copy instead.
DeviceValue writable(cuda::CudaContext& ctx, const DeviceValue& y);

// One factory per layer kind (engine/cuda/layers/<kind>_layer.cpp). Parameters are adopted by
// the builder, in the CPU model's named_params order, and passed in.
std::unique_ptr<DeviceLayer> make_device_conv2d(Conv2dLayer& l, DeviceParam* w, DeviceParam* b);
std::unique_ptr<DeviceLayer> make_device_pool2d(Pool2dLayer& l);
std::unique_ptr<DeviceLayer> make_device_dense(DeviceParam* w, DeviceParam* b);
std::unique_ptr<DeviceLayer> make_device_activation(ActivationLayer& l);
std::unique_ptr<DeviceLayer> make_device_flatten(FlattenLayer& l);
std::unique_ptr<DeviceLayer> make_device_dropout(DropoutLayer& l);
// state: running_mean, running_var, biased_mean, biased_var, steps (the last three only when
// zero_debias; else null).
std::unique_ptr<DeviceLayer> make_device_batchnorm(BatchNormLayer& l, DeviceParam* gamma, DeviceParam* beta,
                                                   std::vector<DeviceParam*> state);
std::unique_ptr<DeviceLayer> make_device_global_avg_pool(GlobalAvgPoolLayer& l);
std::unique_ptr<DeviceLayer> make_device_residual(ResidualLayer& l, std::unique_ptr<DeviceSequential> main,
                                                  std::unique_ptr<DeviceSequential> proj);
std::unique_ptr<DeviceLayer> make_device_embedding(EmbeddingLayer& l, DeviceParam* table);
std::unique_ptr<DeviceLayer> make_device_rnn(RnnLayer& l, const std::vector<DeviceParam*>& params);

}  // namespace driftlab
