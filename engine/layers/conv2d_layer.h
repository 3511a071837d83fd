// Conv2d layer: resolves padding mode, kernel flip, summation order and backend from the
// Policy into Conv2dParams once; forward/backward call the selected kernel.
#pragma once
#include "engine/layers/layer.h"
#include "engine/ops/conv2d.h"
#include "engine/policy.h"

namespace driftlab {

enum class PadMode { valid, same, explicit_pad };

struct Conv2dSpec {
  int64_t out_channels = 1;
  int64_t kernel_h = 3, kernel_w = 3;
  int64_t stride = 1, dilation = 1;
  PadMode pad = PadMode::valid;
  int64_t pad_h = 0, pad_w = 0;  // symmetric, for PadMode::explicit_pad
  bool bias = true;
};

// The explicit op parameters this spec means under `policy` for a (C,H,W) input.
// Throws for 'same' with stride > 1 under conv_same_pad=after_stride1 (as PyTorch does).
Conv2dParams resolve_conv2d(const Policy& policy, const Shape& in_chw, const Conv2dSpec& spec);

class Conv2dLayer : public Layer {
 public:
  Conv2dLayer(const Conv2dSpec& spec, const Shape& in_chw, const Policy& policy, Rng& rng);
  std::string kind() const override { return "conv2d"; }
  std::string describe() const override;
  Shape output_shape() const override { return {p_.k, p_.out_h(), p_.out_w()}; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  Tensor backward(RunContext& ctx, const Tensor& dy) override;
  std::vector<Param*> params() override;
  const Conv2dParams& op_params() const { return p_; }

 private:
  Conv2dParams p_;  // n is set per call
  KernelBackend backend_;
  bool has_bias_;
  Param weight_, bias_;
  Tensor x_;  // forward input, kept for backward
};

}  // namespace driftlab
