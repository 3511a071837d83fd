#include "engine/cuda/device_net.h"

#include <cstring>
#include <map>

#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/dropout_layer.h"
#include "engine/layers/embedding_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/global_avg_pool_layer.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "engine/layers/rnn_layer.h"
#include "engine/random.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

using cuda::CudaContext;
using cuda::DeviceTensor;

namespace {

DeviceValue make_value(CudaContext& ctx, Shape shape, DType dtype) {
  return std::make_shared<DeviceTensor>(ctx, std::move(shape), dtype);
}

// A reshaped view that keeps the viewed block alive.
DeviceValue view_of(const DeviceValue& base, Shape shape) {
  DeviceValue keep = base;
  return DeviceValue(new DeviceTensor(base->reshape_view(std::move(shape))), [keep](DeviceTensor* v) { delete v; });
}

// Full shape (N, per_sample...) of a device input, checked like check_input on the CPU.
void check_device_input(const char* layer, const DeviceTensor& x, const Shape& per_sample) {
  Shape want{x.rank() > 0 ? x.dim(0) : 0};
  want.insert(want.end(), per_sample.begin(), per_sample.end());
  if (!(x.rank() == static_cast<int>(per_sample.size()) + 1 && x.shape() == want))
    fail(layer, ": input has shape ", shape_str(x.shape()), ", expected [N,", shape_str(per_sample).substr(1));
}

// y already holds one sum term; when some layer still keeps y, work on a copy instead.
DeviceValue writable(CudaContext& ctx, const DeviceValue& y) {
  if (y.use_count() == 1) return y;
  DeviceValue c = make_value(ctx, y->shape(), y->dtype());
  cuda::copy_device(ctx, *y, *c);
  return c;
}

// ---------------------------------------------------------------- layers

class DeviceConv2d : public DeviceLayer {
 public:
  DeviceConv2d(Conv2dLayer& l, DeviceParam* w, DeviceParam* b) : p_(l.op_params()), w_(w), b_(b) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("conv2d", *x, {p_.c, p_.h, p_.w});
    p_.n = x->dim(0);
    DeviceValue y = make_value(run.ctx, p_.y_shape(), x->dtype());
    cuda::conv2d_forward_cuda(run.ctx, p_, *x, w_->value, b_ ? &b_->value : nullptr, *y);
    if (run.training) x_ = x;
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    check(x_ != nullptr, "conv2d: backward without a training forward");
    p_.n = x_->dim(0);
    DeviceValue dx;
    if (run.need_dx) {
      dx = make_value(run.ctx, p_.x_shape(), dy->dtype());
      cuda::conv2d_backward_data_cuda(run.ctx, p_, *dy, w_->value, *dx);
    }
    cuda::conv2d_backward_weight_cuda(run.ctx, p_, *x_, *dy, w_->grad, b_ ? &b_->grad : nullptr);
    x_.reset();
    return dx;
  }

 private:
  Conv2dParams p_;
  DeviceParam *w_, *b_;
  DeviceValue x_;
};

class DevicePool2d : public DeviceLayer {
 public:
  explicit DevicePool2d(Pool2dLayer& l) : max_(l.pool_kind() == PoolKind::max), p_(l.op_params()) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input(max_ ? "maxpool2d" : "avgpool2d", *x, {p_.c, p_.h, p_.w});
    p_.n = x->dim(0);
    DeviceValue y = make_value(run.ctx, p_.y_shape(), x->dtype());
    if (max_)
      cuda::maxpool2d_forward_cuda(run.ctx, p_, *x, *y);
    else
      cuda::avgpool2d_forward_cuda(run.ctx, p_, *x, *y);
    if (run.training) x_ = x, y_ = y;
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    check(x_ != nullptr, max_ ? "maxpool2d" : "avgpool2d", ": backward without a training forward");
    p_.n = x_->dim(0);
    DeviceValue dx = make_value(run.ctx, p_.x_shape(), dy->dtype());
    if (max_)
      cuda::maxpool2d_backward_cuda(run.ctx, p_, *x_, *y_, *dy, *dx);
    else
      cuda::avgpool2d_backward_cuda(run.ctx, p_, *x_, *y_, *dy, *dx);
    x_.reset(), y_.reset();
    return dx;
  }

 private:
  bool max_;
  Pool2dParams p_;
  DeviceValue x_, y_;
};

// y = x W^T + b with W (out,in), as DenseLayer.
class DeviceDense : public DeviceLayer {
 public:
  DeviceDense(DeviceParam* w, DeviceParam* b) : in_(w->value.dim(1)), out_(w->value.dim(0)), w_(w), b_(b) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("dense", *x, {in_});
    const int64_t n = x->dim(0);
    DeviceValue y = make_value(run.ctx, {n, out_}, x->dtype());
    GemmParams p;
    p.m = n, p.n = out_, p.k = in_, p.trans_b = true;
    cuda::gemm_cuda(run.ctx, p, *x, w_->value, *y);
    if (b_) cuda::add_row_bias_cuda(run.ctx, *y, b_->value);
    if (run.training) x_ = x;
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    check(x_ != nullptr, "dense: backward without a training forward");
    const int64_t n = x_->dim(0);
    cuda::check_device_shape("dense backward", "dy", *dy, {n, out_});
    DeviceValue dx;
    if (run.need_dx) {
      dx = make_value(run.ctx, {n, in_}, dy->dtype());
      GemmParams pd;  // dx = dy W
      pd.m = n, pd.n = in_, pd.k = out_;
      cuda::gemm_cuda(run.ctx, pd, *dy, w_->value, *dx);
    }
    GemmParams pw;  // dW += dy^T x
    pw.m = out_, pw.n = in_, pw.k = n, pw.trans_a = true, pw.beta = 1.0;
    cuda::gemm_cuda(run.ctx, pw, *dy, *x_, w_->grad);
    if (b_) cuda::add_column_sums_cuda(run.ctx, *dy, b_->grad);
    x_.reset();
    return dx;
  }

 private:
  int64_t in_, out_;
  DeviceParam *w_, *b_;
  DeviceValue x_;
};

class DeviceActivation : public DeviceLayer {
 public:
  DeviceActivation(ActivationLayer& l) : p_(l.op_params()), shape_(l.output_shape()) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input(act_name(p_.kind), *x, shape_);
    DeviceValue y = make_value(run.ctx, x->shape(), x->dtype());
    cuda::activation_forward_cuda(run.ctx, p_, *x, *y);
    if (run.training) x_ = x, y_ = y;
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    check(x_ != nullptr, act_name(p_.kind), ": backward without a training forward");
    DeviceValue dx = make_value(run.ctx, x_->shape(), x_->dtype());
    cuda::activation_backward_cuda(run.ctx, p_, *x_, *y_, *dy, *dx);
    x_.reset(), y_.reset();
    return dx;
  }

 private:
  ActivationParams p_;
  Shape shape_;
  DeviceValue x_, y_;
};

// chw: a view of NCHW; hwc: channels-last copy first, as FlattenLayer.
class DeviceFlatten : public DeviceLayer {
 public:
  explicit DeviceFlatten(FlattenLayer& l)
      : in_(l.input_shape()), hwc_(l.order() == FlattenOrder::hwc && l.input_shape().size() == 3) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("flatten", *x, in_);
    const int64_t n = x->dim(0), f = shape_numel(in_);
    if (!hwc_) return view_of(x, {n, f});
    DeviceValue y = make_value(run.ctx, {n, f}, x->dtype());
    cuda::permute_channels_cuda(run.ctx, *x, *y, in_[0], in_[1], in_[2], true);
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    Shape full{dy->dim(0)};
    full.insert(full.end(), in_.begin(), in_.end());
    if (!run.need_dx) return nullptr;
    if (!hwc_) return view_of(dy, full);
    DeviceValue dx = make_value(run.ctx, full, dy->dtype());
    cuda::permute_channels_cuda(run.ctx, *dy, *dx, in_[0], in_[1], in_[2], false);
    return dx;
  }

 private:
  Shape in_;
  bool hwc_;
};

// Inverted dropout. The mask comes from the run's Rng on the host, draw for draw as
// DropoutLayer takes it, so the CPU and the device drop the same units.
class DeviceDropout : public DeviceLayer {
 public:
  explicit DeviceDropout(DropoutLayer& l) : rate_(l.rate()), shape_(l.output_shape()) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("dropout", *x, shape_);
    if (!run.training || rate_ == 0.0) return x;
    check(run.rng != nullptr, "dropout: training forward needs a random stream (DeviceRunContext.rng)");
    Tensor scale(x->shape(), x->dtype());
    dispatch_dtype(x->dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T keep_scale = static_cast<T>(1.0 / (1.0 - rate_));
      T* s = scale.data<T>();
      for (int64_t i = 0; i < scale.numel(); ++i)
        s[i] = run.rng->uniform<T>(T(0), T(1)) >= static_cast<T>(rate_) ? keep_scale : T(0);
    });
    scale_ = std::make_shared<DeviceTensor>(cuda::to_device(run.ctx, scale));
    DeviceValue y = make_value(run.ctx, x->shape(), x->dtype());
    cuda::multiply_cuda(run.ctx, *x, *scale_, *y);
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    if (!run.training || rate_ == 0.0) return dy;
    check(scale_ != nullptr, "dropout: backward without a training forward");
    DeviceValue dx = make_value(run.ctx, dy->shape(), dy->dtype());
    cuda::multiply_cuda(run.ctx, *dy, *scale_, *dx);
    scale_.reset();
    return dx;
  }

 private:
  double rate_;
  Shape shape_;
  DeviceValue scale_;
};

class DeviceBatchNorm : public DeviceLayer {
 public:
  // state: running_mean, running_var, biased_mean, biased_var, steps (the last three only
  // when zero_debias; else null).
  DeviceBatchNorm(BatchNormLayer& l, DeviceParam* gamma, DeviceParam* beta, std::vector<DeviceParam*> state)
      : shape_(l.output_shape()), p_(l.op_params()), gamma_(gamma), beta_(beta), state_(std::move(state)) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("batchnorm", *x, shape_);
    p_.n = x->dim(0);
    DeviceValue y = make_value(run.ctx, x->shape(), x->dtype());
    if (!run.training) {
      cuda::batchnorm_forward_infer_cuda(run.ctx, p_, *x, gamma_->value, beta_->value, state_[0]->value,
                                         state_[1]->value, *y);
      return y;
    }
    mean_ = DeviceTensor(run.ctx, {p_.c}, x->dtype());
    var_ = DeviceTensor(run.ctx, {p_.c}, x->dtype());
    invstd_ = DeviceTensor(run.ctx, {p_.c}, x->dtype());
    cuda::batchnorm_forward_train_cuda(run.ctx, p_, *x, gamma_->value, beta_->value, *y, mean_, var_, invstd_);
    DeviceTensor unused;  // the zero-debias tensors when zero_debias is off (never touched)
    auto st = [&](std::size_t i) -> DeviceTensor& { return state_[i] ? state_[i]->value : unused; };
    cuda::batchnorm_update_running_cuda(run.ctx, p_, mean_, var_, st(0), st(1), st(2), st(3), st(4));
    x_ = x;
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    check(x_ != nullptr, "batchnorm: backward without a training forward");
    DeviceValue dx = make_value(run.ctx, x_->shape(), x_->dtype());
    cuda::batchnorm_backward_cuda(run.ctx, p_, *x_, *dy, gamma_->value, mean_, invstd_, *dx, gamma_->grad,
                                  beta_->grad);
    x_.reset();
    return dx;
  }

 private:
  Shape shape_;
  BatchNormParams p_;
  DeviceParam *gamma_, *beta_;
  std::vector<DeviceParam*> state_;
  DeviceValue x_;
  DeviceTensor mean_, var_, invstd_;
};

class DeviceGlobalAvgPool : public DeviceLayer {
 public:
  explicit DeviceGlobalAvgPool(GlobalAvgPoolLayer& l) : in_(l.input_shape()) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("global_avg_pool", *x, in_);
    n_ = x->dim(0);
    DeviceValue y = make_value(run.ctx, {n_, in_[0]}, x->dtype());
    cuda::spatial_mean_forward_cuda(run.ctx, *x, *y);
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    cuda::check_device_shape("global_avg_pool backward", "dy", *dy, {n_, in_[0]});
    DeviceValue dx = make_value(run.ctx, {n_, in_[0], in_[1], in_[2]}, dy->dtype());
    cuda::spatial_mean_backward_cuda(run.ctx, *dy, *dx);
    return dx;
  }

 private:
  Shape in_;
  int64_t n_ = 0;
};

// y = main(x) + shortcut(x), as ResidualLayer.
class DeviceResidual : public DeviceLayer {
 public:
  DeviceResidual(ResidualLayer& l, std::unique_ptr<DeviceSequential> main, std::unique_ptr<DeviceSequential> proj)
      : main_(std::move(main)), proj_(std::move(proj)), shortcut_(l.shortcut()), in_(l.input_shape()),
        out_(l.output_shape()), stride_(l.stride()), pad_before_(l.pad_before()) {}
  bool container() const override { return true; }
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("residual", *x, in_);
    n_ = x->dim(0);
    DeviceValue y = writable(run.ctx, main_->forward(run, x));
    if (shortcut_ == Shortcut::option_b) {
      DeviceValue s = proj_->forward(run, x);
      cuda::add_inplace_cuda(run.ctx, *y, *s);
    } else if (shortcut_ == Shortcut::identity) {
      cuda::add_inplace_cuda(run.ctx, *y, *x);
    } else {
      cuda::channel_pad_subsample_add_cuda(run.ctx, pad_params(), *x, *y);
    }
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    // The inner paths need their input gradient exactly when this block's dx is needed.
    const bool saved = run.input_grad;
    run.input_grad = run.need_dx;
    DeviceValue dx = main_->backward(run, dy);
    DeviceValue ds = shortcut_ == Shortcut::option_b ? proj_->backward(run, dy) : nullptr;
    run.input_grad = saved;
    if (!dx) return dx;  // nobody needs dx (the block is the network's first layer)
    dx = writable(run.ctx, dx);
    if (shortcut_ == Shortcut::option_b)
      cuda::add_inplace_cuda(run.ctx, *dx, *ds);
    else if (shortcut_ == Shortcut::identity)
      cuda::add_inplace_cuda(run.ctx, *dx, *dy);
    else
      cuda::channel_pad_subsample_add_backward_cuda(run.ctx, pad_params(), *dy, *dx);
    return dx;
  }

 private:
  cuda::ChannelPadSubsampleParams pad_params() const {
    cuda::ChannelPadSubsampleParams p;
    p.n = n_, p.c = in_[0], p.h = in_[1], p.w = in_[2], p.oc = out_[0], p.oh = out_[1], p.ow = out_[2];
    p.stride = stride_, p.pad_before = pad_before_;
    return p;
  }
  std::unique_ptr<DeviceSequential> main_, proj_;
  Shortcut shortcut_;
  Shape in_, out_;
  int64_t stride_, pad_before_, n_ = 0;
};

// Token ids (N,T) -> table rows (N,T,D), as EmbeddingLayer: the ids come back to the host to be
// checked and to make the padding mask (the CPU layer's own code), the gather runs on the device.
class DeviceEmbedding : public DeviceLayer {
 public:
  DeviceEmbedding(EmbeddingLayer& l, DeviceParam* table) : layer_(l), table_(table) {}
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    check_device_input("embedding", *x, {layer_.steps()});
    const int64_t n = x->dim(0), steps = layer_.steps();
    std::vector<int64_t> ids = layer_.read_ids(cuda::to_host(run.ctx, *x));
    DeviceValue y = make_value(run.ctx, {n, steps, layer_.dim()}, table_->value.dtype());
    cuda::embedding_forward_cuda(run.ctx, table_->value, ids, *y);
    run.step_mask = EmbeddingLayer::padding_mask(ids, n, steps);
    if (run.training) ids_ = std::move(ids), batch_ = n;
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    check(batch_ >= 0, "embedding: backward without a training forward");
    cuda::check_device_shape("embedding backward", "dy", *dy, {batch_, layer_.steps(), layer_.dim()});
    cuda::embedding_backward_cuda(run.ctx, ids_, *dy, table_->grad);
    DeviceValue dx;
    if (run.need_dx) {  // zero: ids are not differentiable
      dx = std::make_shared<DeviceTensor>(DeviceTensor::zeros(run.ctx, {batch_, layer_.steps()}, dy->dtype()));
    }
    batch_ = -1;
    return dx;
  }

 private:
  EmbeddingLayer& layer_;
  DeviceParam* table_;
  std::vector<int64_t> ids_;
  int64_t batch_ = -1;
};

// LSTM / GRU, as RnnLayer: the op params it resolved, rnn_mask applied to the mask an embedding
// published, last state or every state out.
class DeviceRnn : public DeviceLayer {
 public:
  DeviceRnn(RnnLayer& l, const std::vector<DeviceParam*>& ps)
      : p_(l.op_params()), steps_(l.steps()), seq_(l.return_sequences()), mask_mode_(l.mask_mode()) {
    w_.w_ih = &ps.at(0)->value, w_.w_hh = &ps.at(1)->value, w_.b_ih = &ps.at(2)->value;
    g_.dw_ih = &ps[0]->grad, g_.dw_hh = &ps[1]->grad, g_.db_ih = &ps[2]->grad;
    std::size_t next = 3;
    if (p_.two_biases) w_.b_hh = &ps.at(next)->value, g_.db_hh = &ps[next]->grad, ++next;
    if (p_.peepholes) w_.w_peep = &ps.at(next)->value, g_.dw_peep = &ps[next]->grad;
  }
  DeviceValue forward(DeviceRunContext& run, const DeviceValue& x) override {
    const char* name = rnn_cell_name(p_.cell);
    check_device_input(name, *x, {steps_, p_.input});
    RnnParams p = p_;
    p.batch = x->dim(0), p.steps = steps_;
    const int64_t n = p.batch, h = p.hidden;
    mask_.reset();
    if (run.step_mask.defined()) {
      check(run.step_mask.batch == n && run.step_mask.steps == steps_, name, ": the padding mask is (",
            run.step_mask.batch, ",", run.step_mask.steps, ") but the input ", shape_str(x->shape()));
      if (mask_mode_ != RnnMask::none) {
        Tensor m({n, steps_}, x->dtype());
        dispatch_dtype(m.dtype(), [&](auto tag) {
          using T = decltype(tag);
          T* d = m.data<T>();
          for (int64_t i = 0; i < m.numel(); ++i) d[i] = run.step_mask.keep[static_cast<std::size_t>(i)] ? T(1) : T(0);
        });
        mask_ = std::make_shared<DeviceTensor>(cuda::to_device(run.ctx, m));
      }
      if (!seq_) run.step_mask = StepMask{};  // the last step carries no per-step mask
    }
    state_.reset();
    if (run.training) state_ = std::make_unique<cuda::RnnDeviceState>();
    DeviceValue h_seq = make_value(run.ctx, {n, steps_, h}, x->dtype());
    cuda::rnn_forward_cuda(run.ctx, p, *x, mask_.get(), w_, *h_seq, state_.get());
    if (seq_) {
      if (mask_ && mask_mode_ == RnnMask::zero) cuda::rnn_zero_masked_rows_cuda(run.ctx, *mask_, *h_seq);
      return h_seq;
    }
    DeviceValue y = make_value(run.ctx, {n, h}, x->dtype());
    cuda::rnn_last_step_cuda(run.ctx, *h_seq, *y);
    return y;
  }
  DeviceValue backward(DeviceRunContext& run, const DeviceValue& dy) override {
    const char* name = rnn_cell_name(p_.cell);
    check(state_ != nullptr, name, ": backward without a training forward");
    RnnParams p = p_;
    p.batch = state_->x_tm.dim(1), p.steps = steps_;
    p.dh_last_step = !seq_;
    DeviceValue dh = dy;
    if (seq_ && mask_ && mask_mode_ == RnnMask::zero) {  // padded outputs are constant 0
      dh = writable(run.ctx, dy);
      cuda::rnn_zero_masked_rows_cuda(run.ctx, *mask_, *dh);
    }
    DeviceValue dx = run.need_dx ? make_value(run.ctx, {p.batch, steps_, p.input}, dy->dtype()) : nullptr;
    cuda::rnn_backward_cuda(run.ctx, p, w_, *state_, *dh, dx.get(), g_);
    state_.reset();
    return dx;
  }

 private:
  RnnParams p_;
  int64_t steps_;
  bool seq_;
  RnnMask mask_mode_;
  cuda::RnnDeviceWeights w_;
  cuda::RnnDeviceGrads g_;
  DeviceValue mask_;
  std::unique_ptr<cuda::RnnDeviceState> state_;
};

const char* kCovered =
    "conv2d, maxpool2d, avgpool2d, dense, relu/tanh/sigmoid/hard_sigmoid, flatten, dropout, batchnorm, residual, "
    "global_avg_pool, embedding, lstm, gru";

// The first layer (path and kind) without a device counterpart, or "" when all have one.
std::string first_unsupported(Sequential& net, const std::string& prefix) {
  for (std::size_t i = 0; i < net.size(); ++i) {
    Layer& l = net.layer(i);
    const std::string path = prefix + std::to_string(i);
    if (auto* r = dynamic_cast<ResidualLayer*>(&l)) {
      std::string bad = first_unsupported(r->main(), path + ".residual.main.");
      if (bad.empty() && r->projection()) bad = first_unsupported(*r->projection(), path + ".residual.shortcut.");
      if (!bad.empty()) return bad;
      continue;
    }
    if (dynamic_cast<Conv2dLayer*>(&l) || dynamic_cast<Pool2dLayer*>(&l) || dynamic_cast<DenseLayer*>(&l) ||
        dynamic_cast<ActivationLayer*>(&l) || dynamic_cast<FlattenLayer*>(&l) || dynamic_cast<DropoutLayer*>(&l) ||
        dynamic_cast<BatchNormLayer*>(&l) || dynamic_cast<GlobalAvgPoolLayer*>(&l) ||
        dynamic_cast<EmbeddingLayer*>(&l) || dynamic_cast<RnnLayer*>(&l))
      continue;
    return path + " (" + l.kind() + ")";
  }
  return "";
}

}  // namespace

// ---------------------------------------------------------------- DeviceSequential

DeviceValue DeviceSequential::forward(DeviceRunContext& run, const DeviceValue& x) {
  DeviceValue h = x;
  for (Entry& e : layers_) {
    if (e.layer->container()) {
      h = e.layer->forward(run, h);
      continue;
    }
    const int64_t n = h->rank() > 0 ? h->dim(0) : 0;
    try {
      h = e.layer->forward(run, h);
    } catch (const Error& err) {
      fail("cuda: forward of layer ", e.path, " (", e.kind, "), batch ", n, ": ", err.what());
    }
  }
  return h;
}

DeviceValue DeviceSequential::backward(DeviceRunContext& run, const DeviceValue& dy) {
  DeviceValue g = dy;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    Entry& e = layers_[i];
    run.need_dx = i > 0 || run.input_grad;
    if (e.layer->container()) {
      g = e.layer->backward(run, g);
      continue;
    }
    const int64_t n = g->rank() > 0 ? g->dim(0) : 0;
    try {
      g = e.layer->backward(run, g);
    } catch (const Error& err) {
      fail("cuda: backward of layer ", e.path, " (", e.kind, "), batch ", n, ": ", err.what());
    }
  }
  run.need_dx = true;
  return g;
}

// ---------------------------------------------------------------- building

void check_device_supported(Model& model) {
  std::string bad = first_unsupported(*model.net, "");
  check(bad.empty(), "cuda: model ", model.name, ": layer ", bad,
        " has no CUDA implementation yet (the device path covers ", kCovered, "); run it with --device cpu");
}

cuda::CudaExecParams resolve_cuda_exec(const Policy& policy) {
  cuda::CudaExecParams p;
  const cuda::CudaBackend b =
      policy.cuda_kernels == CudaKernels::vendor ? cuda::CudaBackend::vendor : cuda::CudaBackend::own;
  p.gemm_backend = p.conv_backend = p.pool_backend = p.bn_backend = p.softmax_backend = p.rnn_backend = b;
  p.tf32_matmul = policy.tf32_matmul;
  p.tf32_conv = policy.tf32_conv;
  p.deterministic = policy.cuda_deterministic;
  p.algo_search = policy.cudnn_algo_search == AlgoSearch::exhaustive ? cuda::CudnnAlgoSearch::exhaustive
                                                                       : cuda::CudnnAlgoSearch::heuristic;
  return p;
}

std::unique_ptr<cuda::CudaContext> open_cuda_device(const cuda::CudaExecParams& params, const std::string& who) {
  std::string why;
  if (cuda::device_count(&why) == 0) fail("no CUDA device: ", why, " (", who, " needs one; see `driftlab device`)");
  return std::make_unique<cuda::CudaContext>(params, 0);
}

struct DeviceNetBuilder {
  DeviceNet& net;
  std::map<const Param*, std::string> param_names, buffer_names;

  DeviceParam* adopt(Param* p, bool trained) {
    auto& names = trained ? param_names : buffer_names;
    auto it = names.find(p);
    check(it != names.end(), "cuda: a layer parameter '", p->name, "' is not among the model's named ",
          trained ? "parameters" : "buffers");
    auto dp = std::make_unique<DeviceParam>();
    dp->name = it->second;
    dp->host = p;
    dp->is_bias = p->is_bias;
    dp->value = cuda::to_device(net.ctx_, p->value);
    if (trained) dp->grad = DeviceTensor::zeros(net.ctx_, p->value.shape(), p->value.dtype());
    (trained ? net.params_ : net.buffers_).push_back(std::move(dp));
    return (trained ? net.params_ : net.buffers_).back().get();
  }

  std::unique_ptr<DeviceLayer> make_layer(Layer& l, const std::string& path) {
    if (auto* c = dynamic_cast<Conv2dLayer*>(&l)) {
      auto ps = c->params();
      // One statement per adopt: the order of the device parameters is the CPU model's (function
      // arguments are evaluated in an unspecified order; GCC took the bias first).
      DeviceParam* w = adopt(ps[0], true);
      DeviceParam* b = ps.size() > 1 ? adopt(ps[1], true) : nullptr;
      return std::make_unique<DeviceConv2d>(*c, w, b);
    }
    if (auto* d = dynamic_cast<DenseLayer*>(&l)) {
      auto ps = d->params();
      DeviceParam* w = adopt(ps[0], true);
      DeviceParam* b = ps.size() > 1 ? adopt(ps[1], true) : nullptr;
      return std::make_unique<DeviceDense>(w, b);
    }
    if (auto* p = dynamic_cast<Pool2dLayer*>(&l)) return std::make_unique<DevicePool2d>(*p);
    if (auto* a = dynamic_cast<ActivationLayer*>(&l)) return std::make_unique<DeviceActivation>(*a);
    if (auto* f = dynamic_cast<FlattenLayer*>(&l)) return std::make_unique<DeviceFlatten>(*f);
    if (auto* d = dynamic_cast<DropoutLayer*>(&l)) return std::make_unique<DeviceDropout>(*d);
    if (auto* g = dynamic_cast<GlobalAvgPoolLayer*>(&l)) return std::make_unique<DeviceGlobalAvgPool>(*g);
    if (auto* e = dynamic_cast<EmbeddingLayer*>(&l)) return std::make_unique<DeviceEmbedding>(*e, adopt(e->params()[0], true));
    if (auto* r = dynamic_cast<RnnLayer*>(&l)) {
      std::vector<DeviceParam*> ps;
      for (Param* q : r->params()) ps.push_back(adopt(q, true));
      return std::make_unique<DeviceRnn>(*r, ps);
    }
    if (auto* b = dynamic_cast<BatchNormLayer*>(&l)) {
      auto ps = b->params();
      DeviceParam* gamma = adopt(ps[0], true);
      DeviceParam* beta = adopt(ps[1], true);
      const bool debias = b->op_params().zero_debias;
      std::vector<DeviceParam*> state;
      auto rs = b->running_state();
      for (std::size_t i = 0; i < rs.size(); ++i) state.push_back(i < 2 || debias ? adopt(rs[i], false) : nullptr);
      return std::make_unique<DeviceBatchNorm>(*b, gamma, beta, std::move(state));
    }
    if (auto* r = dynamic_cast<ResidualLayer*>(&l)) {
      auto main = make_seq(r->main(), path + ".residual.main.");
      auto proj = r->projection() ? make_seq(*r->projection(), path + ".residual.shortcut.") : nullptr;
      return std::make_unique<DeviceResidual>(*r, std::move(main), std::move(proj));
    }
    fail("cuda: layer ", path, " (", l.kind(), ") has no CUDA implementation");
  }

  std::unique_ptr<DeviceSequential> make_seq(Sequential& seq, const std::string& prefix) {
    std::vector<DeviceSequential::Entry> entries;
    for (std::size_t i = 0; i < seq.size(); ++i) {
      const std::string path = prefix + std::to_string(i);
      entries.push_back({path, seq.layer(i).kind(), make_layer(seq.layer(i), path)});
    }
    return std::make_unique<DeviceSequential>(std::move(entries));
  }
};

// ---------------------------------------------------------------- DeviceNet

DeviceNet::DeviceNet(cuda::CudaContext& ctx, Model& model) : ctx_(ctx), model_(model) {
  check_device_supported(model);
  DeviceNetBuilder b{*this, {}, {}};
  for (auto& np : model.net->named_params()) b.param_names[np.second] = np.first;
  for (auto& np : model.net->named_buffers()) b.buffer_names[np.second] = np.first;
  // BatchNorm's zero-debias state is adopted only when used; it is then among the buffers.
  net_ = b.make_seq(*model.net, "");
}

DeviceValue DeviceNet::forward(DeviceRunContext& run, const Tensor& x) {
  const Tensor& xt = x.dtype() == model_.dtype() ? x : x.to(model_.dtype());
  DeviceValue dx;
  try {
    dx = std::make_shared<DeviceTensor>(cuda::to_device(ctx_, xt));
  } catch (const Error& err) {
    fail("cuda: copying the input ", shape_str(xt.shape()), " to the device, batch ", xt.rank() ? xt.dim(0) : 0, ": ",
         err.what());
  }
  return net_->forward(run, dx);
}

DeviceValue DeviceNet::backward(DeviceRunContext& run, const DeviceValue& dlogits) {
  return net_->backward(run, dlogits);
}

Tensor DeviceNet::predict(const Tensor& x, int64_t max_batch) {
  check(max_batch >= 0, "predict: --max-batch ", max_batch, " must be >= 0 (0: the whole input at once)");
  check(x.rank() >= 1, "predict: input has no batch axis");
  DeviceRunContext run{ctx_, false, nullptr};
  const int64_t n = x.dim(0);
  if (max_batch == 0 || max_batch >= n) return cuda::to_host(ctx_, *forward(run, x));
  const int64_t per = n > 0 ? x.numel() / n : 0;
  Tensor out;
  for (int64_t b = 0; b < n; b += max_batch) {
    const int64_t cnt = std::min(max_batch, n - b);
    Shape s = x.shape();
    s[0] = cnt;
    Tensor chunk = Tensor::empty(s, x.dtype());
    std::memcpy(chunk.raw(), static_cast<const char*>(x.raw()) + b * per * dtype_size(x.dtype()), chunk.nbytes());
    Tensor y = cuda::to_host(ctx_, *forward(run, chunk));
    if (!out.defined()) {
      Shape os = y.shape();
      os[0] = n;
      out = Tensor::empty(os, y.dtype());
    }
    std::memcpy(static_cast<char*>(out.raw()) + b * (y.numel() / cnt) * dtype_size(y.dtype()), y.raw(), y.nbytes());
  }
  return out;
}

void DeviceNet::zero_grad() {
  for (auto& p : params_) cuda::fill_zero(ctx_, p->grad);
}

std::vector<DeviceParam*> DeviceNet::params() {
  std::vector<DeviceParam*> out;
  for (auto& p : params_) out.push_back(p.get());
  return out;
}

void DeviceNet::download() {
  for (auto* list : {&params_, &buffers_})
    for (auto& p : *list) cuda::copy_to_host(ctx_, p->value, p->host->value);
}

}  // namespace driftlab
