// Flatten (C,H,W) -> (C*H*W) in the Policy's flatten_order: chw is a plain view of NCHW
// (PyTorch); hwc permutes to channels-last first (Keras), so feature (h*W+w)*C+c.
#pragma once
#include "engine/layers/layer.h"
#include "engine/policy.h"

namespace driftlab {

class FlattenLayer : public Layer {
 public:
  DL_ACCEPT_VISITOR(flatten)
  FlattenLayer(const Shape& in, const Policy& policy);
  std::string kind() const override { return "flatten"; }
  std::string describe() const override;
  Shape output_shape() const override { return {shape_numel(in_)}; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  Tensor backward(RunContext& ctx, const Tensor& dy) override;
  const Shape& input_shape() const { return in_; }
  FlattenOrder order() const { return order_; }
  // An output of this layer (N, C*H*W) with its features re-indexed to (c,h,w) order, so that
  // flatten outputs of different flatten_orders can be compared index by index.
  Tensor to_chw_order(const Tensor& y) const;

 private:
  Shape in_;
  FlattenOrder order_;
};

}  // namespace driftlab
