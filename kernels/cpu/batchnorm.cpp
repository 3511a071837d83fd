// Fast float32 batch normalisation, layout (N, C, S): training forward and backward, and the
// inference forward and backward (elementwise with a per-channel scale, the reference's formulas,
// so their y and dx equal the reference's bit for bit; dgamma/dbeta sum like the training ones).
// Differs from the reference kernels only in summation order: each contiguous row of S values
// of a channel is summed by an OpenMP SIMD reduction (vector lanes, then the lanes), and the
// N row sums are added in double. That is as accurate as the reference's ascending float sum
// or better, and ~10x faster: the reference's one-chain float sum is bound by the latency of
// one add per value. Channels are split over threads, each channel summed on one thread, so
// the bits do not depend on the thread count. The per-element formulas are the reference's.
#include <cmath>

#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

// sum_i f(row[i]) over one row, vectorised.
template <typename F>
inline double row_sum(const float* row, int64_t s, F&& f) {
  float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < s; ++i) acc += f(row[i], i);
  return static_cast<double>(acc);
}

void check_f32(const char* fn, const BatchNormParams& p, const Tensor& x) {
  if (x.dtype() != DType::f32) fail(fn, ": the fast kernel is float32 only (use the reference for float64)");
  if (!(x.numel() == p.n * p.c * p.s && x.dim(0) == p.n))  // if/fail: no shape string per call
    fail(fn, ": x has shape ", shape_str(x.shape()), ", expected N=", p.n, " C=", p.c, " S=", p.s);
  check(p.n * p.s > 1, fn, ": batch statistics need more than one value per channel (N*S=", p.n * p.s, ")");
}

void batchnorm_forward_train_fast(const BatchNormParams& p, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  Tensor& y, Tensor& mean, Tensor& var, Tensor& invstd) {
  check_f32("batchnorm_forward_train_fast", p, x);
  check_shape("batchnorm_forward_train_fast", "y", y, x.shape());
  const float* xd = x.data<float>();
  const float *g = gamma.data<float>(), *b = beta.data<float>();
  float *yd = y.data<float>(), *md = mean.data<float>(), *vd = var.data<float>(), *id = invstd.data<float>();
  const int64_t n = p.n, c = p.c, s = p.s;
  const double count = static_cast<double>(n * s);
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += row_sum(xd + (i * c + ch) * s, s, [](float v, int64_t) { return v; });
    const float mu = static_cast<float>(sum / count);
    double sq = 0;
    for (int64_t i = 0; i < n; ++i)
      sq += row_sum(xd + (i * c + ch) * s, s, [mu](float v, int64_t) { return (v - mu) * (v - mu); });
    const float v = static_cast<float>(sq / count);
    const float inv = 1.0f / std::sqrt(v + static_cast<float>(p.eps));
    md[ch] = mu;
    vd[ch] = v;
    id[ch] = inv;
    const float gc = g[ch], bc = b[ch];
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = xd + (i * c + ch) * s;
      float* yr = yd + (i * c + ch) * s;
#pragma omp simd
      for (int64_t k = 0; k < s; ++k) yr[k] = gc * ((xr[k] - mu) * inv) + bc;
    }
  }
}

void batchnorm_backward_train_fast(const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                             const Tensor& mean, const Tensor& invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  check_f32("batchnorm_backward_fast", p, x);
  check_shape("batchnorm_backward_fast", "dy", dy, x.shape());
  check_shape("batchnorm_backward_fast", "dx", dx, x.shape());
  const float *xd = x.data<float>(), *dyd = dy.data<float>(), *g = gamma.data<float>();
  const float *md = mean.data<float>(), *id = invstd.data<float>();
  float *dxd = dx.data<float>(), *dg = dgamma.data<float>(), *db = dbeta.data<float>();
  const int64_t n = p.n, c = p.c, s = p.s;
  const float count = static_cast<float>(n * s);
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    const float mu = md[ch], inv = id[ch];
    double sdy = 0, sdyx = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = xd + (i * c + ch) * s;
      const float* dr = dyd + (i * c + ch) * s;
      float a = 0.0f, b = 0.0f;
#pragma omp simd reduction(+ : a, b)
      for (int64_t k = 0; k < s; ++k) {
        a += dr[k];
        b += dr[k] * ((xr[k] - mu) * inv);
      }
      sdy += static_cast<double>(a);
      sdyx += static_cast<double>(b);
    }
    const float sum_dy = static_cast<float>(sdy), sum_dy_xhat = static_cast<float>(sdyx);
    dg[ch] += sum_dy_xhat;
    db[ch] += sum_dy;
    const float scale = g[ch] * inv / count;
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = xd + (i * c + ch) * s;
      const float* dr = dyd + (i * c + ch) * s;
      float* out = dxd + (i * c + ch) * s;
#pragma omp simd
      for (int64_t k = 0; k < s; ++k) {
        const float xhat = (xr[k] - mu) * inv;
        out[k] = scale * (count * dr[k] - sum_dy - xhat * sum_dy_xhat);
      }
    }
  }
}

// The inference scale of channel ch: 1/sqrt(running_var + eps), or the running inverse std.
float infer_invstd(const BatchNormParams& p, float rv) {
  return p.estimator == BnVarEstimator::inv_std ? rv : 1.0f / std::sqrt(rv + static_cast<float>(p.eps));
}

void check_infer_f32(const char* fn, const BatchNormParams& p, const Tensor& x) {
  if (x.dtype() != DType::f32) fail(fn, ": the fast kernel is float32 only (use the reference for float64)");
  if (!(x.numel() == p.n * p.c * p.s && x.dim(0) == p.n))  // if/fail: no shape string per call
    fail(fn, ": x has shape ", shape_str(x.shape()), ", expected N=", p.n, " C=", p.c, " S=", p.s);
}

void batchnorm_forward_infer_fast(const BatchNormParams& p, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& rm, const Tensor& rv, Tensor& y) {
  check_infer_f32("batchnorm_forward_infer_fast", p, x);
  check_shape("batchnorm_forward_infer_fast", "y", y, x.shape());
  const float *xd = x.data<float>(), *g = gamma.data<float>(), *b = beta.data<float>();
  const float *rmd = rm.data<float>(), *rvd = rv.data<float>();
  float* yd = y.data<float>();
  const int64_t n = p.n, c = p.c, s = p.s;
#pragma omp parallel for schedule(static) collapse(2)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float mu = rmd[ch], inv = infer_invstd(p, rvd[ch]), gc = g[ch], bc = b[ch];
      const float* xr = xd + (i * c + ch) * s;
      float* yr = yd + (i * c + ch) * s;
#pragma omp simd
      for (int64_t k = 0; k < s; ++k) yr[k] = gc * ((xr[k] - mu) * inv) + bc;
    }
}

// dx = dy*(gamma*s); dgamma += sum(dy*xhat); dbeta += sum(dy), xhat = (x - running_mean)*s.
void batchnorm_backward_infer_fast(const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                   const Tensor& rm, const Tensor& rv, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  check_infer_f32("batchnorm_backward_infer_fast", p, x);
  check_shape("batchnorm_backward_infer_fast", "dy", dy, x.shape());
  check_shape("batchnorm_backward_infer_fast", "dx", dx, x.shape());
  const float *xd = x.data<float>(), *dyd = dy.data<float>(), *g = gamma.data<float>();
  const float *rmd = rm.data<float>(), *rvd = rv.data<float>();
  float *dxd = dx.data<float>(), *dg = dgamma.data<float>(), *db = dbeta.data<float>();
  const int64_t n = p.n, c = p.c, s = p.s;
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    const float mu = rmd[ch], inv = infer_invstd(p, rvd[ch]);
    const float scale = g[ch] * inv;
    double sdy = 0, sdyx = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = xd + (i * c + ch) * s;
      const float* dr = dyd + (i * c + ch) * s;
      float* out = dxd + (i * c + ch) * s;
      float a = 0.0f, bsum = 0.0f;
#pragma omp simd reduction(+ : a, bsum)
      for (int64_t k = 0; k < s; ++k) {
        a += dr[k];
        bsum += dr[k] * ((xr[k] - mu) * inv);
        out[k] = dr[k] * scale;
      }
      sdy += static_cast<double>(a);
      sdyx += static_cast<double>(bsum);
    }
    dg[ch] += static_cast<float>(sdyx);
    db[ch] += static_cast<float>(sdy);
  }
}

}  // namespace

void register_batchnorm_fast(KernelRegistry& reg) {
  BatchNormKernel k;
  k.name = "fast";
  k.supports_doc = "float32, every params field but sum_order (SIMD row sums added in double); the running "
                   "update is the reference's";
  k.supports = [](const BatchNormParams&, DType dt) { return dt == DType::f32; };
  k.forward_train = batchnorm_forward_train_fast;
  k.backward_train = batchnorm_backward_train_fast;
  k.forward_infer = batchnorm_forward_infer_fast;
  k.backward_infer = batchnorm_backward_infer_fast;
  k.update_running = batchnorm_update_running;
  reg.batchnorm.at(KernelBackend::fast) = k;
}

}  // namespace driftlab
