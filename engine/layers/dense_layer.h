// Dense (fully connected) layer: y = x W^T + b with W stored (out,in). The GEMM backend and
// reference summation order come from the Policy; weight draw order from weight_layout.
#pragma once
#include "engine/layers/layer.h"
#include "engine/layers/math_mode.h"
#include "engine/policy.h"

namespace driftlab {

class DenseLayer : public Layer {
 public:
  DL_ACCEPT_VISITOR(dense)
  DenseLayer(int64_t units, const Shape& in, const Policy& policy, Rng& rng, bool bias = true);
  std::string kind() const override { return "dense"; }
  std::string describe() const override;
  Shape output_shape() const override { return {out_}; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  Tensor backward(RunContext& ctx, const Tensor& dy) override;
  std::vector<Param*> params() override;
  // Under autocast its result is in the autocast format whatever its input's (math_mode.h).
  MathMode set_input_format(MathMode) override { return math_.autocast ? math_.mode : MathMode::float32; }

 private:
  int64_t in_, out_;
  KernelBackend backend_;
  SumOrder order_;
  bool has_bias_;
  MathSpec math_;  // the Policy's math_matmul
  Param weight_, bias_;
  Tensor x_;
};

}  // namespace driftlab
