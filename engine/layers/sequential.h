// Sequential container: runs children forward in order and backward in reverse.
// Layers are appended with their input shape known, so every Policy decision that depends
// on shapes ('same' padding) is resolved at build time.
#pragma once
#include <memory>
#include <vector>

#include "engine/layers/layer.h"

namespace driftlab {

class Sequential {
 public:
  explicit Sequential(Shape input_shape) : input_(std::move(input_shape)) {}
  // The per-sample shape the next layer receives.
  const Shape& current_shape() const { return layers_.empty() ? input_ : out_; }
  Layer& add(std::unique_ptr<Layer> layer);

  Tensor forward(RunContext& ctx, const Tensor& x);
  // Returns dx of the network input, or an undefined Tensor when !ctx.input_grad.
  Tensor backward(RunContext& ctx, const Tensor& dy);
  // Parameters in layer order, named "<index>.<kind>.<weight|bias>".
  std::vector<std::pair<std::string, Param*>> named_params();
  // Saved, untrained state, named the same way ("<index>.batchnorm.running_mean").
  std::vector<std::pair<std::string, Param*>> named_buffers();
  void zero_grad();

  std::size_t size() const { return layers_.size(); }
  Layer& layer(std::size_t i) { return *layers_.at(i); }
  const Shape& input_shape() const { return input_; }

 private:
  Shape input_, out_;
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace driftlab
