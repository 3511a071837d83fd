#include "engine/layers/residual_layer.h"

#include <sstream>

#include "core/parallel.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/layout.h"
#include "engine/layers/math_mode.h"

namespace driftlab {

ResidualLayer::ResidualLayer(std::unique_ptr<Sequential> main, Shortcut shortcut, const Policy& policy, Rng& rng)
    : main_(std::move(main)), shortcut_(shortcut), in_(main_->input_shape()), out_(main_->current_shape()) {
  check(in_.size() == 3 && out_.size() == 3, "residual: main path must map (C,H,W) to (C,H,W), got ", shape_str(in_),
        " -> ", shape_str(out_));
  stride_ = (in_[1] + out_[1] - 1) / out_[1];
  check((in_[1] + stride_ - 1) / stride_ == out_[1] && (in_[2] + stride_ - 1) / stride_ == out_[2],
        "residual: main path output ", shape_str(out_), " is not the input ", shape_str(in_), " subsampled by ", stride_);
  if (in_ == out_) shortcut_ = Shortcut::identity;
  if (shortcut_ == Shortcut::identity)
    check(in_ == out_, "residual: identity shortcut needs equal shapes, got ", shape_str(in_), " -> ", shape_str(out_));
  if (shortcut_ == Shortcut::option_a) {
    check(out_[0] >= in_[0] && (out_[0] - in_[0]) % 2 == 0, "residual: option A pads ", in_[0], " channels to ",
          out_[0], " equally on both sides");
    pad_before_ = (out_[0] - in_[0]) / 2;
  }
  if (shortcut_ == Shortcut::option_b) {
    proj_ = std::make_unique<Sequential>(in_);
    Conv2dSpec s;
    s.out_channels = out_[0];
    s.kernel_h = s.kernel_w = 1;
    s.stride = stride_;
    s.bias = false;
    proj_->add(std::make_unique<Conv2dLayer>(s, in_, policy, rng));
    proj_->add(std::make_unique<BatchNormLayer>(proj_->current_shape(), policy));
  }
}

namespace {

// a[i] += b[i]: each element alone, so the bits do not depend on the thread count. Split over the
// OpenMP threads: run on one, the other thread waited through it (2.3% of a ResNet-20 training
// step in this loop and its backward, plus the waiting).
template <typename T>
void add_into(T* a, const T* b, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > kParallelMinElements)
  for (int64_t i = 0; i < n; ++i) a[i] += b[i];
}

}  // namespace

// Every (output, input) element pair of the option-A shortcut, with the output in channel block yb
// and the input in xb (engine/layers/layout.h); each output and each input element is in at most
// one pair, so f may run for different images on different threads.
template <typename F>
void ResidualLayer::for_each_option_a_pair(int64_t n, int xb, int yb, F&& f) const {
  const int64_t c = in_[0], h = in_[1], w = in_[2], oc = out_[0], oh = out_[1], ow = out_[2];
#pragma omp parallel for schedule(static) if (n * c * oh * ow > kParallelMinElements)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ci = 0; ci < c; ++ci) {
      // Within one channel's plane, position s sits at the plane's offset + s * (block, or 1 plain).
      const int64_t y0 = blocked_offset(b, ci + pad_before_, 0, oc, oh * ow, yb), ys = yb > 0 ? yb : 1;
      const int64_t x0 = blocked_offset(b, ci, 0, c, h * w, xb), xs = xb > 0 ? xb : 1;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) f(y0 + (i * ow + j) * ys, x0 + (i * stride_ * w + j * stride_) * xs);
    }
}

std::string ResidualLayer::describe() const {
  std::ostringstream os;
  os << "residual (" << main_->size() << " layers) + "
     << (shortcut_ == Shortcut::identity ? "identity" : (shortcut_ == Shortcut::option_a ? "option A (subsample, zero channels)" : "option B (1x1 conv + BN)"));
  return os.str();
}

int ResidualLayer::input_block(const ExecContext& exec, DType dt) const {
  const int a = main_->input_block(exec, dt);
  if (!proj_) return a;
  const int b = proj_->input_block(exec, dt);
  if (a == kAnyBlock) return b;
  return b == kAnyBlock || b == a ? a : 0;
}

MathMode ResidualLayer::set_input_format(MathMode in) {
  const MathMode main = main_->set_input_format(in);
  const MathMode shortcut = proj_ ? proj_->set_input_format(in) : in;
  out_format_ = main == shortcut ? main : MathMode::float32;
  return out_format_;
}

// The shortcut's term in channel block `block`: x itself (identity) or the projection's output
// (option B); undefined for option A, whose elements are mapped pair by pair.
Tensor ResidualLayer::shortcut_term(RunContext& ctx, const Tensor& x, int block) {
  if (shortcut_ == Shortcut::option_b) return to_block(proj_->forward(ctx, x), block);
  if (shortcut_ == Shortcut::identity) return to_block(x, block);
  return Tensor();
}

// The main path's output y and the shortcut's term are added in y's layout (elementwise, labelled
// plain); x keeps its own (option A maps each element).
Tensor ResidualLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input("residual", x, in_);
  Tensor y = main_->forward(ctx, x);
  const int yb = y.channel_block();
  const Tensor s = shortcut_term(ctx, x, yb);
  dispatch_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* yd = y.blocked_data<T>();
    if (s.defined()) {
      add_into(yd, s.blocked_data<T>(), y.numel());
    } else {
      const T* xd = x.blocked_data<T>();
      for_each_option_a_pair(x.dim(0), x.channel_block(), yb, [&](int64_t out, int64_t in) { yd[out] += xd[in]; });
    }
  });
  round_to_format(y, out_format_);  // autocast: the sum in the paths' 16-bit format
  x_block_ = x.channel_block();
  y_block_ = yb;
  return y;
}

bool ResidualLayer::fuses_tail(const ExecContext& exec, DType dt) {
  if (out_format_ != MathMode::float32 || main_->size() < 2) return false;
  const auto* bn = layer_as<BatchNormLayer>(main_->layer(main_->size() - 1));
  return bn && main_->output_format(main_->size() - 1) == MathMode::float32 && bn->has_infer_add(exec, dt);
}

// The shortcut term is made in the main path's layout (option A: zero channels and the subsampled
// input, written out once), then the batchnorm writes relu(bn(z) + s).
Tensor ResidualLayer::forward_relu(RunContext& ctx, const Tensor& x, const ActivationParams& relu) {
  check_input("residual", x, in_);
  check(fuses_tail(ctx.exec, x.dtype()), "residual: forward_relu where the tail does not fuse");
  const std::size_t last = main_->size() - 1;
  const Tensor z = main_->forward_prefix(ctx, x, last);
  const int zb = z.channel_block();
  Tensor s = shortcut_term(ctx, x, zb);
  if (shortcut_ == Shortcut::option_a) {
    Tensor sp(z.shape(), z.dtype());  // zeros
    s = sp.with_block(zb);
    dispatch_dtype(z.dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* sd = s.blocked_data<T>();
      const T* xd = x.blocked_data<T>();
      for_each_option_a_pair(x.dim(0), x.channel_block(), zb, [&](int64_t out, int64_t in) { sd[out] = xd[in]; });
    });
  }
  Tensor y = layer_as<BatchNormLayer>(main_->layer(last))->forward_infer_add_relu(ctx, z, s, relu);
  x_block_ = x.channel_block();
  y_block_ = zb;
  return y;
}

Tensor ResidualLayer::backward(RunContext& ctx, const Tensor& dy_in) {
  // The inner paths need their input gradient exactly when this block's dx is needed:
  // Sequential::backward reads that from ctx.input_grad for its first layer.
  const Tensor dy = to_block(dy_in, y_block_);
  const bool saved = ctx.input_grad;
  ctx.input_grad = ctx.need_dx;
  Tensor dx = main_->backward(ctx, dy);
  Tensor ds = shortcut_ == Shortcut::option_b ? proj_->backward(ctx, dy) : Tensor();
  ctx.input_grad = saved;
  if (!dx.defined()) return dx;  // nobody needs dx (the block is the network's first layer)
  dx = to_block(dx, x_block_);
  if (shortcut_ != Shortcut::option_a) {
    const Tensor g = to_block(shortcut_ == Shortcut::option_b ? ds : dy, x_block_);
    dispatch_dtype(dx.dtype(), [&](auto tag) {
      using T = decltype(tag);
      add_into(dx.blocked_data<T>(), g.blocked_data<T>(), dx.numel());
    });
    return dx;
  }
  dispatch_dtype(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = dx.blocked_data<T>();
    const T* g = dy.blocked_data<T>();
    for_each_option_a_pair(dy.dim(0), x_block_, y_block_, [&](int64_t out, int64_t in) { d[in] += g[out]; });
  });
  return dx;
}

static std::vector<Param*> unnamed(std::vector<std::pair<std::string, Param*>> named) {
  std::vector<Param*> out;
  for (auto& np : named) out.push_back(np.second);
  return out;
}

std::vector<Param*> ResidualLayer::params() {
  std::vector<std::pair<std::string, Param*>> named;
  collect("", false, named);
  return unnamed(named);
}

std::vector<Param*> ResidualLayer::buffers() {
  std::vector<std::pair<std::string, Param*>> named;
  collect("", true, named);
  return unnamed(named);
}

void ResidualLayer::collect(const std::string& prefix, bool want_buffers,
                            std::vector<std::pair<std::string, Param*>>& out) {
  for (auto& np : want_buffers ? main_->named_buffers() : main_->named_params())
    out.emplace_back(prefix + ".residual.main." + np.first, np.second);
  if (proj_)
    for (auto& np : want_buffers ? proj_->named_buffers() : proj_->named_params())
      out.emplace_back(prefix + ".residual.shortcut." + np.first, np.second);
}

}  // namespace driftlab
