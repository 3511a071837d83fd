#include "engine/layers/conv2d_layer.h"

#include <sstream>

#include "engine/layers/init.h"

namespace driftlab {

void check_input(const char* layer, const Tensor& x, const Shape& per_sample) {
  Shape want{x.rank() > 0 ? x.dim(0) : 0};
  want.insert(want.end(), per_sample.begin(), per_sample.end());
  if (!(x.rank() == static_cast<int>(per_sample.size()) + 1 && x.shape() == want))
    fail(layer, ": input has shape ", shape_str(x.shape()), ", expected [N,", shape_str(per_sample).substr(1));
}

Conv2dParams resolve_conv2d(const Policy& policy, const Shape& in, const Conv2dSpec& spec) {
  check(in.size() == 3, "conv2d: input must be (C,H,W), got ", shape_str(in));
  Conv2dParams p;
  p.algorithm = policy.conv_algorithm;
  if (p.algorithm == ConvAlgorithm::winograd) {
    // Only oneDNN's kernel has the algorithm: another backend (or the reference a float64 call
    // falls back to) would run direct sums under a knob that says otherwise.
    check(policy.conv_backend == KernelBackend::onednn, "conv2d: conv_algorithm=winograd runs on conv_backend=onednn "
          "only (oneDNN's Winograd primitives), not conv_backend=", backend_name(policy.conv_backend));
    check(policy.dtype == FloatType::float32, "conv2d: conv_algorithm=winograd needs dtype=float32 (oneDNN has no "
          "float64 convolution)");
  }
  p.c = in[0];
  p.h = in[1];
  p.w = in[2];
  p.k = spec.out_channels;
  p.r = spec.kernel_h;
  p.s = spec.kernel_w;
  p.stride_h = spec.stride;
  p.stride_w = spec.stride_w > 0 ? spec.stride_w : spec.stride;
  p.dil_h = spec.dilation;
  p.dil_w = spec.dilation_w > 0 ? spec.dilation_w : spec.dilation;
  p.groups = spec.groups;
  p.flip = policy.conv_kernel_flip;
  p.sum_order = policy.acc_order;
  switch (spec.pad) {
    case PadMode::valid:
      break;
    case PadMode::explicit_pad:
      p.pad_t = p.pad_b = spec.pad_h;
      p.pad_l = p.pad_r = spec.pad_w;
      break;
    case PadMode::explicit4:
      p.pad_t = spec.pads4[0];
      p.pad_b = spec.pads4[1];
      p.pad_l = spec.pads4[2];
      p.pad_r = spec.pads4[3];
      break;
    case PadMode::same: {
      check(!(policy.conv_same_pad == SamePad::after_stride1 && (p.stride_h > 1 || p.stride_w > 1)),
            "conv2d: padding='same' with stride ", spec.stride,
            " is refused under conv_same_pad=after_stride1 (PyTorch: \"padding='same' is not supported for "
            "strided convolutions\"); use explicit padding or conv_same_pad=after|before|half_strided");
      bool after = policy.conv_same_pad != SamePad::before;
      AxisPad ph = same_padding(p.h, p.r, p.stride_h, p.dil_h, after);
      AxisPad pw = same_padding(p.w, p.s, p.stride_w, p.dil_w, after);
      if (policy.conv_same_pad == SamePad::half_strided) {
        // what PyTorch code writes for a strided 'same' conv: padding=(k-1)//2*dilation on every
        // side (torchvision's ConvNormActivation, conv3x3); it keeps ceil(n/s) for odd kernels only
        auto half = [&](int64_t k, int64_t stride, int64_t dil, AxisPad same) {
          if (stride == 1) return same;
          const int64_t dk = (k - 1) * dil + 1;
          check(dk % 2 == 1, "conv2d: padding='same' with stride ", stride, " and the even effective kernel ", dk,
                " is refused under conv_same_pad=half_strided (padding=(k-1)//2 on every side would not keep "
                "ceil(n/s)); use explicit padding or conv_same_pad=after|before");
          return AxisPad{dk / 2, dk / 2};
        };
        ph = half(p.r, p.stride_h, p.dil_h, ph);
        pw = half(p.s, p.stride_w, p.dil_w, pw);
      }
      p.pad_t = ph.before;
      p.pad_b = ph.after;
      p.pad_l = pw.before;
      p.pad_r = pw.after;
      break;
    }
  }
  p.validate();
  return p;
}

Conv2dLayer::Conv2dLayer(const Conv2dSpec& spec, const Shape& in, const Policy& policy, Rng& rng)
    : p_(resolve_conv2d(policy, in, spec)), backend_(policy.conv_backend), block_backend_(policy.conv_block_backend), has_bias_(spec.bias),
      math_(conv_math(policy)) {
  DType dt = policy.dtype == FloatType::float64 ? DType::f64 : DType::f32;
  weight_ = {"weight", Tensor(p_.w_shape(), dt), Tensor(p_.w_shape(), dt), false};
  // fan_in is what one output reads (C/G channels), fan_out K*R*S, as torch's
  // _calculate_fan_in_and_fan_out reads a grouped weight (K, C/G, R, S)
  init_weight(weight_.value, p_.c_per_group() * p_.r * p_.s, p_.k * p_.r * p_.s, policy, rng);
  if (has_bias_) {
    bias_ = {"bias", Tensor({p_.k}, dt), Tensor({p_.k}, dt), true};
    init_bias(bias_.value, p_.c_per_group() * p_.r * p_.s, policy, rng);
  }
}

std::string Conv2dLayer::describe() const {
  std::ostringstream os;
  os << "conv2d " << p_.k << "@" << p_.r << "x" << p_.s << " stride " << p_.stride_h;
  if (p_.stride_w != p_.stride_h) os << "x" << p_.stride_w;
  if (p_.dil_h != 1 || p_.dil_w != 1) os << " dilation " << p_.dil_h << "x" << p_.dil_w;
  if (p_.groups != 1) os << " groups " << p_.groups;
  os << " pad t/b/l/r " << p_.pad_t
     << "/" << p_.pad_b << "/" << p_.pad_l << "/" << p_.pad_r << (p_.flip ? " flipped" : "") << " ["
     << (block_note_.empty() ? backend_name(backend_) : block_note_) << "]";
  if (math_.active()) os << " math " << math_.str();
  return os.str();
}

int Conv2dLayer::input_block(const ExecContext& exec, DType dt) const {
  const Conv2dKernel& k = exec.kernels.conv2d.select(backend_, p_, dt);
  if (k.any_block && k.any_block(p_, dt)) return kAnyBlock;
  const int b = kernel_block(k);
  return b > 0 && p_.c % b == 0 ? b : 0;
}

Tensor Conv2dLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input("conv2d", x, {p_.c, p_.h, p_.w});
  p_.n = x.dim(0);
  const Conv2dKernel& k = ctx.exec.pick(ctx.exec.kernels.conv2d, backend_, p_, x.dtype());
  const int kb = kernel_block(k);
  const bool any = k.any_block && k.any_block(p_, x.dtype());  // y in x's layout
  if (x.channel_block() != 0 && x.channel_block() != kb && !any)
    fail("conv2d: input in channel block ", x.channel_block(), ", kernel ", k.name, " takes ",
         kb ? "that block or plain" : "plain only");
  const bool asked = ctx.out_block == kb || ctx.out_block == kAsProduced;
  const int yb = any ? x.channel_block() : kb > 0 && asked && p_.k % kb == 0 ? kb : 0;
  Tensor y = Tensor::empty(p_.y_shape(), x.dtype()).with_block(yb);
  kept_.reset();
  // A training step's forward keeps, where the kernel offers it, what its weight gradient would
  // redo (oneDNN: x in the primitive's layout: one activation reorder per layer and step saved).
  // A reduced math mode: the kernel takes rounded operands (the bias in the storage format only)
  // and its result, bias added, is rounded; under bias rounding `twice` the kernel runs without
  // the bias, its result is rounded, then the bias added and the sum rounded again.
  const Tensor xo = math_operand(x, math_), wo = math_operand(weight_.value, math_);
  const Tensor bo = has_bias_ ? math_bias(bias_.value, math_) : Tensor();
  const bool bias_after = has_bias_ && math_.bias_after_result();
  const Tensor* kb_bias = has_bias_ && !bias_after ? &bo : nullptr;
  if (ctx.record && ctx.param_grads && k.forward_keep)
    k.forward_keep(p_, xo, wo, kb_bias, y, &kept_);
  else
    k.forward(p_, xo, wo, kb_bias, y);
  if (bias_after) {
    math_result(y, math_);
    add_channel_bias(y, bo);
  }
  math_result(y, math_);
  x_ = ctx.record ? xo : Tensor();
  return y;
}

bool Conv2dLayer::takes_channel_ops(const ExecContext& exec, DType dt, int block) const {
  if (block == 0 || math_.active()) return false;
  const Conv2dKernel& k = exec.kernels.conv2d.select(backend_, p_, dt);
  return k.forward_fused && k.any_block && k.any_block(p_, dt);
}

Tensor Conv2dLayer::forward_fused(RunContext& ctx, const Tensor& x, const ConvChannelOp* pre,
                                  const ConvChannelOp* post) {
  check(ctx.semantics == Semantics::inference && !ctx.record,
        "conv2d: the fused per-channel ops are a prediction's op (inference semantics, nothing recorded)");
  check(!math_.active(), "conv2d: the fused per-channel ops run without a reduced math mode");
  check_input("conv2d", x, {p_.c, p_.h, p_.w});
  p_.n = x.dim(0);
  const Conv2dKernel& k = ctx.exec.pick(ctx.exec.kernels.conv2d, backend_, p_, x.dtype());
  check(k.forward_fused != nullptr, "conv2d: kernel ", k.name, " has no fused per-channel ops");
  Tensor y = Tensor::empty(p_.y_shape(), x.dtype()).with_block(x.channel_block());
  kept_.reset();
  x_ = Tensor();
  k.forward_fused(p_, x, weight_.value, has_bias_ ? &bias_.value : nullptr, pre, post, y);
  return y;
}

Tensor Conv2dLayer::backward(RunContext& ctx, const Tensor& dy) {
  check(x_.defined(), "conv2d: backward without a recorded forward");
  p_.n = x_.dim(0);
  const Conv2dKernel& k = ctx.exec.pick(ctx.exec.kernels.conv2d, backend_, p_, dy.dtype());
  Tensor dx;  // left undefined when nobody needs it (the first layer while training); x's layout
  if (ctx.need_dx) dx = Tensor::empty(p_.x_shape(), dy.dtype()).with_block(x_.channel_block());
  Tensor* db = ctx.param_grads && has_bias_ ? &bias_.grad : nullptr;
  // x_ is the forward's operand (already rounded in a reduced math mode); dy and w are rounded
  // here, and each gradient is rounded as the op's result: the weight gradients of this call are
  // computed apart (the kernels add into dw and db), rounded, then added.
  const Tensor dyo = math_operand(dy, math_), wo = math_operand(weight_.value, math_);
  Tensor* dw = ctx.param_grads ? &weight_.grad : nullptr;
  Tensor dw_call, db_call;
  if (math_.active() && dw) {
    dw_call = Tensor(weight_.grad.shape(), weight_.grad.dtype());
    dw = &dw_call;
    if (db) db_call = Tensor(bias_.grad.shape(), bias_.grad.dtype()), db = &db_call;
  }
  if (k.backward_both) {  // dy reordered once for both gradients, the forward's keep for x
    k.backward_both(p_, x_, dyo, wo, ctx.need_dx ? &dx : nullptr, dw, db, kept_);
  } else {
    if (ctx.need_dx) k.backward_data(p_, dyo, wo, dx);
    if (dw) k.backward_weight(p_, x_, dyo, *dw, db);
  }
  if (math_.active()) {
    if (ctx.need_dx) math_result(dx, math_);
    math_add_result(weight_.grad, dw_call, math_);
    math_add_result(bias_.grad, db_call, math_);
  }
  kept_.reset();
  x_ = Tensor();  // the backward takes the recording (engine/layers/layer.h)
  return dx;
}

std::vector<Param*> Conv2dLayer::params() {
  if (has_bias_) return {&weight_, &bias_};
  return {&weight_};
}

}  // namespace driftlab
