// Sequential container: runs children forward in order and backward in reverse.
//
// Channel-blocked activations (engine/layers/layout.h): before calling layer i, forward tells it
// through RunContext::out_block which block its output may have: the block that the next layer
// not taking any layout takes (Layer::input_block), looking past the ones that take any; after the
// last layer, what the caller allowed (RunContext::out_block, 0 by default: the model's output is
// plain); kAsProduced where that layer takes any and asks none (a global pool: the block the layer
// computes in). A tensor in a layout the next layer does not take is converted to plain before it. Each
// layer's output layout is recorded, and backward converts the incoming gradient to it before the
// layer's backward; the input gradient comes back in the input's layout.
// Layers are appended with their input shape known, so every Policy decision that depends
// on shapes ('same' padding) is resolved at build time.
//
// Fused blocks: a conv2d -> activation -> max-pool run of three layers whose conv2d layer has
// conv_block_backend != reference is a conv_block (core/ops/conv_block.h). Each forward asks
// the registry for that backend's kernel; where it supports the block (params and dtype), the
// three layers run as that one op, recorded for the backward here; where not, they run one by
// one on their own kernels, as with conv_block_backend=reference. The conv layer's describe()
// says which (set when the block is appended). Parameters, buffers and names are the layers'
// either way: the model file does not know about blocks.
//
// Residual + ReLU, in predictions (inference semantics, not recorded): a residual block whose main
// path ends in a batchnorm, followed by a ReLU layer, runs that batchnorm, the block's add and the
// ReLU as one op (ResidualLayer::forward_relu, the three ops' bits), under the same conditions.
//
// BatchNorm + ReLU: a batchnorm layer followed by a ReLU layer runs as one op
// (BatchNormLayer::forward_relu, the two layers' bits) where ExecContext::fuse_bn_relu allows it,
// both keep float32 formats and no test tap (ExecContext::layer_inputs, replace_layer_input) wants
// the ReLU's input; otherwise, and on any device, as the two layers.
//
// Autocast (engine/layers/math_mode.h): each layer's output format is found when it is added
// (Layer::set_input_format, from the format of its input); forward rounds a layer's result where
// that format is reduced, backward rounds the gradient of such an output before the layer's
// backward. Off (every format float32), nothing is rounded.
#pragma once
#include <memory>
#include <vector>

#include "engine/layers/layer.h"

namespace driftlab {

class BatchNormLayer;
class Conv2dLayer;
class ResidualLayer;
class ActivationLayer;
class Pool2dLayer;
struct Policy;

class Sequential {
 public:
  explicit Sequential(Shape input_shape) : input_(std::move(input_shape)) {}
  // The per-sample shape the next layer receives.
  const Shape& current_shape() const { return layers_.empty() ? input_ : out_; }
  Layer& add(std::unique_ptr<Layer> layer);

  Tensor forward(RunContext& ctx, const Tensor& x);
  // The first `upto` layers only, their output left in the layout it has (a residual block runs
  // all but its last batchnorm so, to fuse that with its add and the ReLU after it).
  Tensor forward_prefix(RunContext& ctx, const Tensor& x, std::size_t upto);
  // Layers `from` to the last on h, the output of the first `from` layers (forward_prefix's, or
  // several of its outputs joined along the batch); from = 0 is forward.
  Tensor forward_from(RunContext& ctx, const Tensor& h, std::size_t from);
  // Returns dx of the network input, or an undefined Tensor when !ctx.input_grad.
  Tensor backward(RunContext& ctx, const Tensor& dy);
  // Parameters in layer order, named "<index>.<kind>.<weight|bias>".
  std::vector<std::pair<std::string, Param*>> named_params();
  // Saved, untrained state, named the same way ("<index>.batchnorm.running_mean").
  std::vector<std::pair<std::string, Param*>> named_buffers();
  void zero_grad();
  // The channel block its first layer that does not take any layout takes (kAnyBlock where all do).
  int input_block(const ExecContext& exec, DType dt) const;
  // Autocast: the format of the network's input (float32 at the top; a residual path gets its
  // block's input's), which sets every layer's output format again; returns the last one's.
  MathMode set_input_format(MathMode in);
  // A model's network under autocast_input_cast=every_layer (Keras): its input is rounded to the
  // autocast format before the first layer, and its input gradient to the same format (the cast's
  // gradient). Nothing under listed_ops or with autocast off. Called once the model is built.
  void apply_input_cast(const Policy& policy);
  // The format layer i's output is held in (float32 where autocast is off).
  MathMode output_format(std::size_t i) const { return formats_.at(i); }

  std::size_t size() const { return layers_.size(); }
  Layer& layer(std::size_t i) { return *layers_.at(i); }
  const Shape& input_shape() const { return input_; }

 private:
  // A conv -> activation -> max-pool run starting at layer `first` (its three layers, found once
  // when the block is appended), and what its last fused forward recorded (fused: whether the
  // last forward ran it as one op).
  struct Block {
    std::size_t first = 0;
    Conv2dLayer* conv = nullptr;
    ActivationLayer* act = nullptr;
    Pool2dLayer* pool = nullptr;
    bool fused = false;
    Tensor x, z;  // the block's input and pre-activation, for the backward
  };
  // Layer i is a batchnorm and layer i + 1 a ReLU (found when appended): the pair may fuse.
  BatchNormLayer* bn_relu_at(std::size_t i) const;
  ResidualLayer* res_relu_at(std::size_t i) const;
  Block* block_at(std::size_t first);
  Block* block_ending_at(std::size_t last);
  bool forward_block(RunContext& ctx, Block& b, Tensor& h);  // false: not supported, run the layers
  // Layers [from, upto) on x: forward, forward_prefix and forward_from.
  Tensor run(RunContext& ctx, const Tensor& x, std::size_t from, std::size_t upto);
  void note_block(const Block& b);

  bool cast_input_ = false;  // apply_input_cast: the input and its gradient rounded to in_format_
  Shape input_, out_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Block> blocks_;
  MathMode in_format_ = MathMode::float32;
  std::vector<MathMode> formats_;  // each layer's output format (autocast)
  // The last forward's layouts: its input's, each layer's output's, and its own output's.
  int in_block_ = 0, final_block_ = 0;
  std::vector<int> out_blocks_;
  std::vector<std::size_t> bn_relu_;      // the first index of every batchnorm -> ReLU pair
  std::vector<std::size_t> res_relu_;     // ... and of every residual -> ReLU pair
  std::vector<uint8_t> fused_bn_relu_;    // per layer: the last forward ran the pair starting there as one op
};

}  // namespace driftlab
