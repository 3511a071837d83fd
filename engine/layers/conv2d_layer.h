// Conv2d layer: resolves padding mode, kernel flip, summation order and backend from the
// Policy into Conv2dParams once; forward/backward call the selected kernel.
#pragma once
#include <memory>
#include "engine/layers/layer.h"
#include "engine/layers/math_mode.h"
#include "core/ops/conv2d.h"
#include "engine/policy.h"

namespace driftlab {

// explicit_pad: pad_h/pad_w on both sides; explicit4: pads t/b/l/r as given (an ONNX file's pads).
enum class PadMode { valid, same, explicit_pad, explicit4 };

struct Conv2dSpec {
  int64_t out_channels = 1;
  int64_t kernel_h = 3, kernel_w = 3;
  int64_t stride = 1, dilation = 1;
  PadMode pad = PadMode::valid;
  int64_t pad_h = 0, pad_w = 0;  // symmetric, for PadMode::explicit_pad
  bool bias = true;
  int64_t groups = 1;                    // grouped (depthwise: groups = input channels)
  int64_t stride_w = 0, dilation_w = 0;  // 0: the same as stride / dilation (square)
  int64_t pads4[4] = {0, 0, 0, 0};       // t, b, l, r for PadMode::explicit4
};

// The explicit op parameters this spec means under `policy` for a (C,H,W) input.
// Throws for 'same' with stride > 1 under conv_same_pad=after_stride1 (as PyTorch does), and under
// half_strided for an even effective kernel on a strided axis.
Conv2dParams resolve_conv2d(const Policy& policy, const Shape& in_chw, const Conv2dSpec& spec);

class Conv2dLayer : public Layer {
 public:
  DL_ACCEPT_VISITOR(conv2d)
  Conv2dLayer(const Conv2dSpec& spec, const Shape& in_chw, const Policy& policy, Rng& rng);
  std::string kind() const override { return "conv2d"; }
  std::string describe() const override;
  Shape output_shape() const override { return {p_.k, p_.out_h(), p_.out_w()}; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  Tensor backward(RunContext& ctx, const Tensor& dy) override;
  std::vector<Param*> params() override;
  // Its kernel's channel block (Conv2dKernel::channel_block) where the input channels fill whole
  // blocks; the output is blocked the same way where RunContext::out_block asks for that block.
  // kAnyBlock where the kernel takes any block for these params (Conv2dKernel::any_block: a
  // per-channel convolution), the output and dx then in the input's layout.
  int input_block(const ExecContext& exec, DType dt) const override;
  // Whether a prediction can run this convolution with per-channel ops before and after it as one
  // op (ConvChannelOp: a batchnorm and its ReLU or clip) on an input in channel block `block`:
  // its kernel offers Conv2dKernel::forward_fused for these params, x blocked, no reduced math mode.
  bool takes_channel_ops(const ExecContext& exec, DType dt, int block) const;
  // That op (inference, nothing recorded): pre on x's values, post on the outputs (either may be
  // null, not both); y in x's block.
  Tensor forward_fused(RunContext& ctx, const Tensor& x, const ConvChannelOp* pre, const ConvChannelOp* post);
  // Under autocast its result is in the autocast format whatever its input's (math_mode.h).
  MathMode set_input_format(MathMode) override { return math_.autocast ? math_.mode : MathMode::float32; }
  const Conv2dParams& op_params() const { return p_; }
  // The channel block the selected kernel computes in, 0 where it has none.
  static int kernel_block(const Conv2dKernel& k) { return k.channel_block ? k.channel_block() : 0; }
  // What a fused conv_block (Sequential) needs of this layer: its knob, its parameters, and a note
  // for describe() saying whether the block runs fused.
  KernelBackend block_backend() const { return block_backend_; }
  KernelBackend op_backend() const { return backend_; }
  bool has_bias() const { return has_bias_; }
  Param& weight() { return weight_; }
  Param& bias() { return bias_; }
  void set_block_note(std::string note) { block_note_ = std::move(note); }
  // The Policy's math_conv (engine/layers/math_mode.h); a reduced mode runs unfused.
  const MathSpec& math() const { return math_; }

 private:
  Conv2dParams p_;  // n is set per call
  KernelBackend backend_, block_backend_;
  bool has_bias_;
  MathSpec math_;
  std::string block_note_;
  Param weight_, bias_;
  Tensor x_;  // forward input, kept for backward
  std::shared_ptr<void> kept_;  // the kernel's keep of x_ (Conv2dKernel::forward_keep), until the backward
};

}  // namespace driftlab
