#include "engine/layers/residual_layer.h"

#include <sstream>

#include "engine/core/parallel.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"

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

// Every (output, input) element pair of the option-A shortcut; each output and each input element
// is in at most one pair, so f may run for different images on different threads.
template <typename F>
void ResidualLayer::for_each_option_a_pair(int64_t n, F&& f) const {
  const int64_t c = in_[0], h = in_[1], w = in_[2], oc = out_[0], oh = out_[1], ow = out_[2];
#pragma omp parallel for schedule(static) if (n * c * oh * ow > kParallelMinElements)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j)
          f(((b * oc + ci + pad_before_) * oh + i) * ow + j, ((b * c + ci) * h + i * stride_) * w + j * stride_);
}

std::string ResidualLayer::describe() const {
  std::ostringstream os;
  os << "residual (" << main_->size() << " layers) + "
     << (shortcut_ == Shortcut::identity ? "identity" : (shortcut_ == Shortcut::option_a ? "option A (subsample, zero channels)" : "option B (1x1 conv + BN)"));
  return os.str();
}

Tensor ResidualLayer::forward(RunContext& ctx, const Tensor& x) {
  check_input("residual", x, in_);
  Tensor y = main_->forward(ctx, x);
  Tensor s;
  if (shortcut_ == Shortcut::option_b) s = proj_->forward(ctx, x);
  dispatch_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* yd = y.data<T>();
    const T* xd = x.data<T>();
    if (shortcut_ == Shortcut::identity) {
      add_into(yd, xd, y.numel());
    } else if (shortcut_ == Shortcut::option_b) {
      add_into(yd, s.data<T>(), y.numel());
    } else {
      for_each_option_a_pair(x.dim(0), [&](int64_t out, int64_t in) { yd[out] += xd[in]; });
    }
  });
  return y;
}

Tensor ResidualLayer::backward(RunContext& ctx, const Tensor& dy) {
  // The inner paths need their input gradient exactly when this block's dx is needed:
  // Sequential::backward reads that from ctx.input_grad for its first layer.
  const bool saved = ctx.input_grad;
  ctx.input_grad = ctx.need_dx;
  Tensor dx = main_->backward(ctx, dy);
  Tensor ds = shortcut_ == Shortcut::option_b ? proj_->backward(ctx, dy) : Tensor();
  ctx.input_grad = saved;
  if (!dx.defined()) return dx;  // nobody needs dx (the block is the network's first layer)
  if (shortcut_ == Shortcut::option_b) {
    dispatch_dtype(dx.dtype(), [&](auto tag) {
      using T = decltype(tag);
      add_into(dx.data<T>(), ds.data<T>(), dx.numel());
    });
    return dx;
  }
  dispatch_dtype(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = dx.data<T>();
    const T* g = dy.data<T>();
    if (shortcut_ == Shortcut::identity) {
      add_into(d, g, dx.numel());
      return;
    }
    for_each_option_a_pair(dy.dim(0), [&](int64_t out, int64_t in) { d[in] += g[out]; });
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
