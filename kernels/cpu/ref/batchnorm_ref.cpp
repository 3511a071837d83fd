// Reference batch normalisation, float and double, layout (N, C, S). Sums over (N, S) in
// params.sum_order. Forward writes y (=); backward writes dx (=) and adds dgamma, dbeta (+=).
// Training and inference semantics each have a forward and a backward; the running-statistics
// update is the reference for every backend (C values per step: nothing to speed up).
// Channels are independent and each channel's sums run on one thread in the written order,
// so splitting channels over OpenMP threads gives the same bits for any thread count.
// Under params.relu (a ReLU fused after the op): the forwards write relu_value(z) and the
// backwards first turn dy into relu_grad(z, dy), z recomputed from x by the forward's expression.
#include <cmath>
#include <vector>

#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

void check_x(const char* fn, const BatchNormParams& p, const Tensor& x) {
  check(x.numel() == p.n * p.c * p.s && x.dim(0) == p.n, fn, ": x has shape ", shape_str(x.shape()), ", expected N=",
        p.n, " C=", p.c, " S=", p.s);
  check(p.n * p.s > 1, fn, ": batch statistics need more than one value per channel (N*S=", p.n * p.s,
        "), as in every framework");
}

// Gathers channel c's N*S values (optionally transformed) and sums them in order.
template <typename T, typename F>
T channel_sum(const BatchNormParams& p, int64_t c, std::vector<T>& buf, F&& value) {
  int64_t t = 0;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t i = 0; i < p.s; ++i) buf[t++] = value((n * p.c + c) * p.s + i);
  return ordered_sum(buf.data(), t, p.sum_order);
}

// The fused ReLU's output, or z itself.
template <typename T>
T act(const BatchNormParams& p, T z) {
  if (p.clip) return clip_value(z, static_cast<T>(p.clip_min), static_cast<T>(p.clip_max));  // forward_infer only
  return p.relu ? relu_value(z) : z;
}

// The entries other than forward_infer take no fused clip.
void check_no_clip(const char* fn, const BatchNormParams& p) {
  check(!p.clip, fn, ": a fused clip is the inference forward's only (BatchNormParams::clip)");
}

// The fused ReLU's gradient rule at z, or dy itself.
template <typename T>
T act_grad(const BatchNormParams& p, T z, T dy) {
  return p.relu ? relu_grad(z, dy, static_cast<T>(p.relu_grad_at_zero), p.relu_nan_grad == ReluNanGrad::nan) : dy;
}

template <typename T>
void forward_train(const BatchNormParams& p, const T* x, const T* g, const T* b, T* y, T* mean, T* var, T* invstd) {
  const T count = static_cast<T>(p.n * p.s);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < p.c; ++c) {
    std::vector<T> buf(static_cast<std::size_t>(p.n * p.s));
    T mu = channel_sum<T>(p, c, buf, [&](int64_t i) { return x[i]; }) / count;
    T v = channel_sum<T>(p, c, buf, [&](int64_t i) { return (x[i] - mu) * (x[i] - mu); }) / count;
    T inv = T(1) / std::sqrt(v + static_cast<T>(p.eps));
    mean[c] = mu;
    var[c] = v;
    invstd[c] = inv;
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t i = 0; i < p.s; ++i) {
        int64_t k = (n * p.c + c) * p.s + i;
        y[k] = act(p, g[c] * ((x[k] - mu) * inv) + b[c]);
      }
  }
}

// The inference scale 1/sqrt(running_var + eps), or the running inverse std itself (Lasagne).
template <typename T>
T infer_invstd(const BatchNormParams& p, T rv) {
  return p.estimator == BnVarEstimator::inv_std ? rv : T(1) / std::sqrt(rv + static_cast<T>(p.eps));
}

// r (may be null): a residual term added before the fused ReLU (batchnorm_forward_infer_add_ref).
template <typename T>
void forward_infer(const BatchNormParams& p, const T* x, const T* g, const T* b, const T* rm, const T* rv, T* y,
                   const T* r = nullptr) {
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < p.c; ++c) {
    const T inv = infer_invstd(p, rv[c]);
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t i = 0; i < p.s; ++i) {
        int64_t k = (n * p.c + c) * p.s + i;
        const T z = g[c] * ((x[k] - rm[c]) * inv) + b[c];
        y[k] = act(p, r ? z + r[k] : z);
      }
  }
}

// dx = gamma*invstd/n * (n*dy - sum(dy) - xhat*sum(dy*xhat)); dgamma += sum(dy*xhat); dbeta += sum(dy)
// (dy: the fused ReLU's gradient at z where params.relu).
template <typename T>
void backward(const BatchNormParams& p, const T* x, const T* dy_in, const T* g, const T* b, const T* mean,
              const T* invstd, T* dx, T* dg, T* db) {
  const T count = static_cast<T>(p.n * p.s);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < p.c; ++c) {
    std::vector<T> buf(static_cast<std::size_t>(p.n * p.s));
    const T mu = mean[c], inv = invstd[c];
    auto dy = [&](int64_t k) { return act_grad(p, g[c] * ((x[k] - mu) * inv) + b[c], dy_in[k]); };
    T sum_dy = channel_sum<T>(p, c, buf, [&](int64_t i) { return dy(i); });
    T sum_dy_xhat = channel_sum<T>(p, c, buf, [&](int64_t i) { return dy(i) * ((x[i] - mu) * inv); });
    dg[c] += sum_dy_xhat;
    db[c] += sum_dy;
    const T scale = g[c] * inv / count;
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t i = 0; i < p.s; ++i) {
        int64_t k = (n * p.c + c) * p.s + i;
        T xhat = (x[k] - mu) * inv;
        dx[k] = scale * (count * dy(k) - sum_dy - xhat * sum_dy_xhat);
      }
  }
}

// Inference semantics: xhat = (x - running_mean)*s with s constant, so
// dx = dy*(gamma*s); dgamma += sum(dy*xhat); dbeta += sum(dy).
template <typename T>
void backward_infer(const BatchNormParams& p, const T* x, const T* dy_in, const T* g, const T* b, const T* rm,
                    const T* rv, T* dx, T* dg, T* db) {
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < p.c; ++c) {
    std::vector<T> buf(static_cast<std::size_t>(p.n * p.s));
    const T mu = rm[c], inv = infer_invstd(p, rv[c]);
    auto dy = [&](int64_t k) { return act_grad(p, g[c] * ((x[k] - mu) * inv) + b[c], dy_in[k]); };
    dg[c] += channel_sum<T>(p, c, buf, [&](int64_t i) { return dy(i) * ((x[i] - mu) * inv); });
    db[c] += channel_sum<T>(p, c, buf, [&](int64_t i) { return dy(i); });
    const T scale = g[c] * inv;
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t i = 0; i < p.s; ++i) {
        const int64_t k = (n * p.c + c) * p.s + i;
        dx[k] = dy(k) * scale;
      }
  }
}

}  // namespace

void batchnorm_forward_train_ref(const BatchNormParams& p, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 Tensor& y, Tensor& mean, Tensor& var, Tensor& invstd) {
  check_no_clip("batchnorm_forward_train", p);
  check_x("batchnorm_forward_train", p, x);
  check_shape("batchnorm_forward_train", "y", y, x.shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    forward_train<T>(p, x.data<T>(), gamma.data<T>(), beta.data<T>(), y.data<T>(), mean.data<T>(), var.data<T>(),
                     invstd.data<T>());
  });
}

void batchnorm_forward_infer_ref(const BatchNormParams& p, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                 const Tensor& rm, const Tensor& rv, Tensor& y) {
  check(x.numel() == p.n * p.c * p.s, "batchnorm_forward_infer: x has shape ", shape_str(x.shape()));
  check_shape("batchnorm_forward_infer", "y", y, x.shape());
  check(!(p.clip && p.relu), "batchnorm_forward_infer: a fused ReLU and a fused clip together");
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    forward_infer<T>(p, x.data<T>(), gamma.data<T>(), beta.data<T>(), rm.data<T>(), rv.data<T>(), y.data<T>());
  });
}

void batchnorm_forward_infer_add_ref(const BatchNormParams& p, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                     const Tensor& rm, const Tensor& rv, const Tensor& residual, Tensor& y) {
  check_no_clip("batchnorm_forward_infer_add", p);
  check(x.numel() == p.n * p.c * p.s, "batchnorm_forward_infer_add: x has shape ", shape_str(x.shape()));
  check_shape("batchnorm_forward_infer_add", "y", y, x.shape());
  check_shape("batchnorm_forward_infer_add", "residual", residual, x.shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    forward_infer<T>(p, x.data<T>(), gamma.data<T>(), beta.data<T>(), rm.data<T>(), rv.data<T>(), y.data<T>(),
                     residual.data<T>());
  });
}

void batchnorm_backward_ref(const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                            const Tensor& beta, const Tensor& mean, const Tensor& invstd, Tensor& dx, Tensor& dgamma,
                            Tensor& dbeta) {
  check_no_clip("batchnorm_backward", p);
  check_x("batchnorm_backward", p, x);
  check_shape("batchnorm_backward", "dy", dy, x.shape());
  check_shape("batchnorm_backward", "dx", dx, x.shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward<T>(p, x.data<T>(), dy.data<T>(), gamma.data<T>(), beta.data<T>(), mean.data<T>(), invstd.data<T>(),
                dx.data<T>(), dgamma.data<T>(), dbeta.data<T>());
  });
}

void batchnorm_backward_infer_ref(const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                  const Tensor& beta, const Tensor& rm, const Tensor& rv, Tensor& dx, Tensor& dgamma,
                                  Tensor& dbeta) {
  check_no_clip("batchnorm_backward_infer", p);
  check(x.numel() == p.n * p.c * p.s && x.dim(0) == p.n, "batchnorm_backward_infer: x has shape ",
        shape_str(x.shape()), ", expected N=", p.n, " C=", p.c, " S=", p.s);
  check_shape("batchnorm_backward_infer", "dy", dy, x.shape());
  check_shape("batchnorm_backward_infer", "dx", dx, x.shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward_infer<T>(p, x.data<T>(), dy.data<T>(), gamma.data<T>(), beta.data<T>(), rm.data<T>(), rv.data<T>(),
                      dx.data<T>(), dgamma.data<T>(), dbeta.data<T>());
  });
}

void batchnorm_update_running(const BatchNormParams& p, const Tensor& mean, const Tensor& var, Tensor& rm, Tensor& rv,
                              Tensor& biased_mean, Tensor& biased_var, Tensor& steps) {
  const double n = static_cast<double>(p.n * p.s);
  dispatch_dtype(mean.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T keep = static_cast<T>(p.keep), upd = static_cast<T>(1.0 - p.keep);
    const T unbias = static_cast<T>(n / (n - 1.0)), keras = static_cast<T>(n / (n - 1.0 - p.eps));
    const T eps = static_cast<T>(p.eps);
    const T* m = mean.data<T>();
    const T* v = var.data<T>();
    T* rmd = rm.data<T>();
    T* rvd = rv.data<T>();
    double step = 0;
    if (p.zero_debias) step = (steps.data<T>()[0] += T(1));
    for (int64_t c = 0; c < p.c; ++c) {
      T stat = v[c];
      switch (p.estimator) {
        case BnVarEstimator::biased: break;
        case BnVarEstimator::unbiased: stat = v[c] * unbias; break;
        case BnVarEstimator::keras_scaled: stat = v[c] * keras; break;
        case BnVarEstimator::keras_double: stat = v[c] * unbias * keras; break;
        case BnVarEstimator::keras_var_plus_eps: stat = (v[c] + eps) * keras; break;
        case BnVarEstimator::inv_std: stat = T(1) / std::sqrt(v[c] + eps); break;
      }
      if (!p.zero_debias) {
        rmd[c] = keep * rmd[c] + upd * m[c];
        rvd[c] = keep * rvd[c] + upd * stat;
        continue;
      }
      // TF assign_moving_average(zero_debias=True): a hidden average started at 0, divided
      // by 1 - keep^t, so after the first step the running value is the batch statistic.
      T* bm = biased_mean.data<T>();
      T* bv = biased_var.data<T>();
      bm[c] -= (bm[c] - m[c]) * upd;
      bv[c] -= (bv[c] - stat) * upd;
      const T debias = static_cast<T>(1.0 - std::pow(p.keep, step));
      rmd[c] = bm[c] / debias;
      rvd[c] = bv[c] / debias;
    }
  });
}

// Each channel's scale as forward_infer computes it (BatchNormKernel::infer_scale).
static void batchnorm_infer_scale_ref(const BatchNormParams& p, const Tensor& rv, Tensor& scale) {
  check_shape("batchnorm_infer_scale", "running_var", rv, {p.c});
  check_shape("batchnorm_infer_scale", "scale", scale, {p.c});
  check_same_dtype("batchnorm_infer_scale", rv, scale);
  dispatch_dtype(rv.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (int64_t c = 0; c < p.c; ++c) scale.data<T>()[c] = infer_invstd(p, rv.data<T>()[c]);
  });
}

void register_batchnorm_ref(KernelRegistry& reg) {
  BatchNormKernel k;
  k.name = "reference";
  k.supports_doc = "every params field (the fused ReLU too), float32 and float64";
  k.supports = [](const BatchNormParams&, DType) { return true; };
  k.forward_train = batchnorm_forward_train_ref;
  k.backward_train = batchnorm_backward_ref;
  k.forward_infer = batchnorm_forward_infer_ref;
  k.backward_infer = batchnorm_backward_infer_ref;
  k.update_running = batchnorm_update_running;
  k.forward_infer_add = batchnorm_forward_infer_add_ref;
  k.infer_scale = batchnorm_infer_scale_ref;
  reg.batchnorm.at(KernelBackend::reference) = k;
}

}  // namespace driftlab
