// Residual block: y = main(x) + shortcut(x), the ResNet basic block without its final relu
// (add an activation layer after it). Shortcuts:
//   identity      when shapes match;
//   option A      x[:, :, ::s, ::s] with zero channels padded equally on both sides
//                 (He et al. 2016, CIFAR; akamaster/pytorch_resnet_cifar10, Lasagne Recipes);
//   option B      a 1x1 convolution with stride s, then BatchNorm (torch option='B').
#pragma once
#include <memory>

#include "core/ops/activation.h"
#include "engine/layers/sequential.h"
#include "engine/policy.h"

namespace driftlab {

enum class Shortcut { identity, option_a, option_b };

class ResidualLayer : public Layer {
 public:
  DL_ACCEPT_VISITOR(residual)
  // `main` must map in_shape to its output; the shortcut is built to match it.
  ResidualLayer(std::unique_ptr<Sequential> main, Shortcut shortcut, const Policy& policy, Rng& rng);
  std::string kind() const override { return "residual"; }
  std::string describe() const override;
  Shape output_shape() const override { return out_; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  Tensor backward(RunContext& ctx, const Tensor& dy) override;
  // relu(this block's output) in a prediction (inference semantics, nothing recorded), the main
  // path's last batchnorm, the add and the ReLU (`relu`: the ReLU layer's params) as one op
  // (BatchNormLayer::forward_infer_add_relu): the three ops' bits. Only where fuses_tail says so.
  Tensor forward_relu(RunContext& ctx, const Tensor& x, const ActivationParams& relu);
  // Whether forward_relu can run: the main path ends in a batchnorm whose kernel for dt has the
  // fused add, and the sum is not rounded to a 16-bit format (autocast).
  bool fuses_tail(const ExecContext& exec, DType dt);
  // What both paths take (the main path's first convolution's block, in ResNets).
  int input_block(const ExecContext& exec, DType dt) const override;
  // Autocast: both paths get the block's input format; the sum is in the paths' common format
  // (a 16-bit one when both are, as PyTorch's add keeps it; float32 otherwise: type promotion),
  // rounded to it in the forward.
  MathMode set_input_format(MathMode in) override;
  std::vector<Param*> params() override;
  std::vector<Param*> buffers() override;
  void collect(const std::string& prefix, bool buffers, std::vector<std::pair<std::string, Param*>>& out) override;
  Sequential& main() { return *main_; }
  Sequential* projection() { return proj_.get(); }  // option B's 1x1 conv + BN, else null
  Shortcut shortcut() const { return shortcut_; }
  const Shape& input_shape() const { return in_; }
  int64_t stride() const { return stride_; }
  int64_t pad_before() const { return pad_before_; }  // option A: zero channels before the input's

 private:
  // Calls f(output index, input index) for every element option A carries: channel ci of the
  // input subsampled by the stride lands in channel ci + pad_before_ of the output.
  template <typename F>
  void for_each_option_a_pair(int64_t n, int xb, int yb, F&& f) const;
  Tensor shortcut_term(RunContext& ctx, const Tensor& x, int block);

  std::unique_ptr<Sequential> main_;
  std::unique_ptr<Sequential> proj_;  // option B only
  Shortcut shortcut_;
  Shape in_, out_;
  int64_t stride_ = 1, pad_before_ = 0;
  MathMode out_format_ = MathMode::float32;
  int x_block_ = 0, y_block_ = 0;  // the last forward's input and output channel blocks
};

}  // namespace driftlab
