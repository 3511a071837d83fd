// Layer: explicit forward and backward (Caffe, llm.c). forward(ctx, x) keeps what backward
// needs when ctx.record is set; backward(ctx, dy) returns dx and ADDS into each parameter's grad.
// A backward takes the recording: what the forward kept is let go as backward returns, so a
// second backward needs a new recorded forward (refused by name without one; PyTorch's autograd
// frees its saved tensors the same way unless retain_graph). A network's activations thus go back
// to the tensor allocator (core/host_memory.h) layer by layer through the backward, where the
// backward's own gradients take them, and nothing of a step is held into the next.
// Every policy knob a layer depends on is resolved in its constructor into explicit op
// parameters, the CPU kernel of each op included (the *_backend knobs, core/ops/registry.h).
//
// To add a layer: 1) a header + .cpp in engine/layers/ deriving from Layer; 2) resolve the
// Policy in the constructor (no Policy lookups in forward/backward); 3) a float64 gradient
// check: a case row in tests/layers/test_gradcheck.cpp, or gradcheck_sequential
// (tests/layers/gradcheck_util.h) in a test file of its own (test_embedding.cpp); 4) a knob
// test for every knob it reads.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "core/ops/reduced_precision.h"
#include "core/tensor.h"
#include "engine/layers/layout.h"
#include "engine/layers/visit.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

class Rng;
class DeviceLayer;  // engine/cuda/device_layer.h
namespace cuda {
class CudaContext;
}

struct Param {
  std::string name;  // "weight" or "bias"; Sequential prefixes the layer index
  Tensor value, grad;
  bool is_bias = false;
};

// Which steps of a batch of sequences hold data (1) and which hold padding (0): (N,T)
// row-major. Published by the layer that can tell (EmbeddingLayer: token id 0, the padding id
// of engine/data/imdb.h) for the recurrent layer after it, as Keras passes a layer's
// compute_mask to the next; empty (batch 0) when no layer published one.
struct StepMask {
  int64_t batch = 0, steps = 0;
  std::vector<uint8_t> keep;
  bool defined() const { return batch > 0; }
};

// The semantics a forward pass computes. train: BatchNorm normalises with the batch's statistics
// and moves its running statistics, dropout draws a mask. inference: BatchNorm uses the running
// statistics and leaves them alone, dropout is the identity. Either can be recorded for a
// backward (RunContext::record): the input gradient at inference semantics is what a white-box
// attack on a deployed model needs.
enum class Semantics { train, inference };
const char* semantics_name(Semantics s);

// What a forward/backward pass runs with: kernels, threads, semantics, whether to keep what the
// backward needs, and the stream dropout draws from.
struct RunContext {
  ExecContext& exec;
  Semantics semantics = Semantics::inference;
  bool record = false;  // keep activations for a backward (a backward without it is refused)
  Rng* rng = nullptr;   // needed only by layers that draw (dropout) under train semantics
  // Whether the caller needs the gradient with respect to the network input (attacks do,
  // training does not). Sequential turns it into need_dx for each layer's backward.
  bool input_grad = true;
  bool need_dx = true;  // set by the container: may this layer skip computing dx?
  // Whether the parameters' gradients are wanted (training: yes; an attack's input gradient: no).
  // Where false, conv2d and dense skip their weight and bias gradients (the grads keep their
  // values); dx is computed the same way either way.
  bool param_grads = true;
  // Set by a forward pass, read by the layers after the one that set it (see StepMask); a
  // recurrent layer that returns only its last step consumes it.
  StepMask step_mask{};
  // The channel block (engine/layers/layout.h) the output of the layer being called may have: 0 =
  // plain (the default: what every caller outside a container gets), kAsProduced = any (the one
  // it computes in). Set by Sequential for each layer from what the layers after it take
  // (Layer::input_block); a permission, not a demand.
  int out_block = 0;

  // A training step's pass: train semantics, recorded; `rng` feeds dropout.
  static RunContext training(ExecContext& exec, Rng* rng) { return {exec, Semantics::train, true, rng}; }
  // Prediction: inference semantics, nothing kept.
  static RunContext inference(ExecContext& exec) { return {exec, Semantics::inference, false, nullptr}; }
  // A recorded pass under the given semantics, for a backward that wants dL/dx (attacks, tests).
  static RunContext recorded(ExecContext& exec, Semantics s, Rng* rng = nullptr) { return {exec, s, true, rng}; }
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string kind() const = 0;      // the name shown in paths and messages ("maxpool2d", "lstm")
  virtual LayerKind layer_kind() const = 0;  // its kind among the visitor's (engine/layers/visit.h)
  virtual void accept(LayerVisitor& v) = 0;  // v.visit(*this) (DL_ACCEPT_VISITOR)
  virtual std::string describe() const = 0;  // one line with the resolved parameters
  virtual Shape output_shape() const = 0;    // per sample, without the batch axis
  virtual Tensor forward(RunContext& ctx, const Tensor& x) = 0;
  virtual Tensor backward(RunContext& ctx, const Tensor& dy) = 0;
  virtual std::vector<Param*> params() { return {}; }
  // The channel block its forward takes an input in besides plain (engine/layers/layout.h): 0 =
  // plain only (the default), kAnyBlock = any (elementwise and per-channel layers: output and
  // gradients in the input's layout), kAsProduced = any, asking none of the layer before it (a
  // global pool). backward() then receives dy in its output's layout and returns dx in its
  // input's. Asked by Sequential, which converts where a layer takes neither.
  virtual int input_block(const ExecContext&, DType) const { return 0; }
  // Autocast (engine/layers/math_mode.h): the format its output is held in, given its input's.
  // The default is the input's (a layer off autocast's lists runs in its input's format);
  // convolutions and dense layers give their autocast format; containers pass `in` to their paths
  // and keep what they need. Called by the container when the layer is added.
  virtual MathMode set_input_format(MathMode in) { return in; }
  // State that is saved with the model but not trained (BatchNorm running statistics).
  virtual std::vector<Param*> buffers() { return {}; }
  // Parameters (buffers when `buffers` is set) named "<prefix>.<kind>.<name>"; containers
  // override this to name their children's parameters uniquely.
  virtual void collect(const std::string& prefix, bool buffers, std::vector<std::pair<std::string, Param*>>& out);
};

// A layer of a kind defined by a library above the engine (quant/'s int8 layers, quant/visit.h):
// one kind, `external`, to the engine's visitors.
class ExternalLayer : public Layer {
 public:
  void accept(LayerVisitor& v) override { v.visit(*this); }
  LayerKind layer_kind() const override { return LayerKind::external; }
  // Its device counterpart (DeviceNet builds those of the engine's kinds itself,
  // engine/cuda/device_net.cpp; quant/device_qlayers.cpp makes the int8 layers'). device_unsupported()
  // is "" when make_device(ctx) works, else why not, which the refusal of the model names; the
  // default is "no CUDA implementation yet".
  virtual std::string device_unsupported() const;
  virtual std::unique_ptr<DeviceLayer> make_device(cuda::CudaContext& ctx);
};

template <class T>
T* layer_as(Layer& l) {
  struct As : LayerVisitor {
    T* out = nullptr;
#define DL_AS(cls, name) \
  void visit(cls& x) override { \
    if constexpr (std::is_same_v<cls, T>) out = &x; \
  }
    DRIFTLAB_LAYER_KINDS(DL_AS)
#undef DL_AS
    void visit(ExternalLayer& x) override {
      if constexpr (std::is_same_v<ExternalLayer, T>) out = &x;
    }
  } v;
  l.accept(v);
  return v.out;
}

// Shape of x without its batch axis, checked against what the layer was built for.
void check_input(const char* layer, const Tensor& x, const Shape& per_sample);

}  // namespace driftlab
