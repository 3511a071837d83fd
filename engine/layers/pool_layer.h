// Max and average pooling layers. The Policy's maxpool_grad_ties is resolved into
// Pool2dParams.ties; stride defaults to the window (every framework's default); pool_backend
// picks the kernel. Where that kernel takes channel-blocked tensors (Pool2dKernel::any_block) the
// layer takes any layout and answers in its input's; otherwise plain.
#pragma once
#include "engine/layers/layer.h"
#include "core/ops/pool2d.h"
#include "engine/policy.h"

namespace driftlab {

enum class PoolKind { max, avg };

struct Pool2dSpec {
  PoolKind kind = PoolKind::max;
  int64_t window = 2;
  int64_t stride = 0;  // 0: the window size
  // Rectangular windows, strides and pads as a file states them (0: as window / stride above).
  int64_t window_w = 0, stride_w = 0;
  int64_t pads4[4] = {0, 0, 0, 0};  // t, b, l, r; max pooling never picks the padding
  bool count_include_pad = true;    // average pooling: divide by the window (true) or its real inputs
};

Pool2dParams resolve_pool2d(const Policy& policy, const Shape& in_chw, const Pool2dSpec& spec);

class Pool2dLayer : public Layer {
 public:
  DL_ACCEPT_VISITOR(pool2d)
  Pool2dLayer(const Pool2dSpec& spec, const Shape& in_chw, const Policy& policy);
  std::string kind() const override { return kind_ == PoolKind::max ? "maxpool2d" : "avgpool2d"; }
  std::string describe() const override;
  Shape output_shape() const override { return {p_.c, p_.out_h(), p_.out_w()}; }
  Tensor forward(RunContext& ctx, const Tensor& x) override;
  Tensor backward(RunContext& ctx, const Tensor& dy) override;
  int input_block(const ExecContext& exec, DType dt) const override;
  PoolKind pool_kind() const { return kind_; }
  const Pool2dParams& op_params() const { return p_; }  // n is set per call

 private:
  const OpTable<Pool2dKernel>& table(const ExecContext& exec) const;
  PoolKind kind_;
  Pool2dParams p_;
  KernelBackend backend_;
  Tensor x_;
};

}  // namespace driftlab
