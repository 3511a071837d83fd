// Global average pooling (C,H,W) -> (C): the mean of each channel's H*W values, as an average
// pool whose window is the whole map (the avgpool2d op: sum in row-major order, then divide by
// H*W); backward spreads dy/(H*W) over the map. Same formula in every framework; pool_backend
// picks the kernel. Where that kernel takes channel-blocked tensors (Pool2dKernel::any_block) the
// layer reads x in the block the layer before it computed in (kAsProduced, engine/layers/layout.h)
// and gives dx in it; its (N,C) result is plain either way.
#pragma once
#include "engine/layers/layer.h"
#include "core/ops/pool2d.h"
#include "engine/policy.h"

namespace driftlab {

class GlobalAvgPoolLayer : public Layer {
 public:
  DL_ACCEPT_VISITOR(global_avg_pool)
  GlobalAvgPoolLayer(const Shape& in, const Policy& policy);
  std::string kind() const override { return "global_avg_pool"; }
  std::string describe() const override { return "global_avg_pool"; }
  Shape output_shape() const override { return {in_[0]}; }
  int input_block(const ExecContext& exec, DType dt) const override;
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  Tensor backward(RunContext& ctx, const Tensor& dy) override;
  const Shape& input_shape() const { return in_; }

 private:
  Shape in_;
  Pool2dParams p_;  // window (H,W), stride 1, no padding; n set per call
  KernelBackend backend_;
  bool recorded_ = false;
  int recorded_block_ = 0;  // the recorded forward's input block: dx's
};

}  // namespace driftlab
