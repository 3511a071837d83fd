// Inverted dropout (every framework): training y = x * mask / (1-rate), mask_i = [u_i >= rate]
// with u drawn from the run's Rng (the Policy's rng_engine); inference is the identity.
#pragma once
#include "engine/layers/layer.h"

namespace driftlab {

class DropoutLayer : public Layer {
 public:
  DL_ACCEPT_VISITOR(dropout)
  DropoutLayer(double rate, const Shape& in);
  std::string kind() const override { return "dropout"; }
  std::string describe() const override;
  Shape output_shape() const override { return shape_; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  Tensor backward(RunContext& ctx, const Tensor& dy) override;
  double rate() const { return rate_; }

 private:
  double rate_;
  Shape shape_;
  Tensor scale_;  // mask / (1-rate), kept for backward
  bool recorded_ = false;  // the last forward was recorded and no backward has taken it
};

}  // namespace driftlab
