// Own CUDA BatchNorm, float and double, layout (N, C, S). One thread block per channel: the
// channel's N*S values are summed in double (each thread a strided partial, then a fixed
// shared-memory tree), so results are the same on every run and no atomics are used. The
// elementwise formulas are the reference's, statement by statement (built with -fmad=false).
// y, dx written (=); dgamma, dbeta ADDED (+=); running statistics as batchnorm_update_running.
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {
namespace {

constexpr int kThreads = 256;

// Sum over the block of one double per thread; every thread gets the total.
__device__ double block_sum(double v, double* part) {
  part[threadIdx.x] = v;
  __syncthreads();
  for (int h = kThreads / 2; h > 0; h /= 2) {
    if (static_cast<int>(threadIdx.x) < h) part[threadIdx.x] += part[threadIdx.x + h];
    __syncthreads();
  }
  const double total = part[0];
  __syncthreads();  // part is reused by the next call
  return total;
}

__device__ long long bn_index(long long t, long long c, long long C, long long S) {
  return ((t / S) * C + c) * S + t % S;
}

template <typename T>
__global__ void bn_forward_train_kernel(long long N, long long C, long long S, double eps, const T* __restrict__ x,
                                        const T* __restrict__ g, const T* __restrict__ b, T* __restrict__ y,
                                        T* __restrict__ mean, T* __restrict__ var, T* __restrict__ invstd) {
  __shared__ double part[kThreads];
  const long long c = blockIdx.x, count = N * S;
  double s = 0;
  for (long long t = threadIdx.x; t < count; t += kThreads) s += static_cast<double>(x[bn_index(t, c, C, S)]);
  const T mu = static_cast<T>(block_sum(s, part) / static_cast<double>(count));
  double s2 = 0;
  for (long long t = threadIdx.x; t < count; t += kThreads) {
    const double d = static_cast<double>(x[bn_index(t, c, C, S)]) - static_cast<double>(mu);
    s2 += d * d;
  }
  const T v = static_cast<T>(block_sum(s2, part) / static_cast<double>(count));
  const T inv = T(1) / sqrt(v + static_cast<T>(eps));
  if (threadIdx.x == 0) {
    mean[c] = mu;
    var[c] = v;
    invstd[c] = inv;
  }
  for (long long t = threadIdx.x; t < count; t += kThreads) {
    const long long k = bn_index(t, c, C, S);
    y[k] = g[c] * ((x[k] - mu) * inv) + b[c];
  }
}

template <typename T>
__global__ void bn_backward_kernel(long long N, long long C, long long S, const T* __restrict__ x,
                                   const T* __restrict__ dy, const T* __restrict__ g, const T* __restrict__ mean,
                                   const T* __restrict__ invstd, T* __restrict__ dx, T* __restrict__ dg,
                                   T* __restrict__ db) {
  __shared__ double part[kThreads];
  const long long c = blockIdx.x, n_all = N * S;
  const T mu = mean[c], inv = invstd[c], count = static_cast<T>(n_all);
  double sdy = 0, sdyx = 0;
  for (long long t = threadIdx.x; t < n_all; t += kThreads) {
    const long long k = bn_index(t, c, C, S);
    sdy += static_cast<double>(dy[k]);
    sdyx += static_cast<double>(dy[k] * ((x[k] - mu) * inv));
  }
  const T sum_dy = static_cast<T>(block_sum(sdy, part));
  const T sum_dy_xhat = static_cast<T>(block_sum(sdyx, part));
  if (threadIdx.x == 0) {
    dg[c] += sum_dy_xhat;
    db[c] += sum_dy;
  }
  const T scale = g[c] * inv / count;
  for (long long t = threadIdx.x; t < n_all; t += kThreads) {
    const long long k = bn_index(t, c, C, S);
    const T xhat = (x[k] - mu) * inv;
    dx[k] = scale * (count * dy[k] - sum_dy - xhat * sum_dy_xhat);
  }
}

template <typename T>
__global__ void bn_infer_kernel(long long total, long long C, long long S, double eps, bool inv_std_stat,
                                const T* __restrict__ x, const T* __restrict__ g, const T* __restrict__ b,
                                const T* __restrict__ rm, const T* __restrict__ rv, T* __restrict__ y) {
  DL_GRID_STRIDE(k, total) {
    const long long c = (k / S) % C;
    const T inv = inv_std_stat ? rv[c] : T(1) / sqrt(rv[c] + static_cast<T>(eps));
    y[k] = g[c] * ((x[k] - rm[c]) * inv) + b[c];
  }
}

// Inference semantics: xhat = (x - rm)*s with s fixed (the running statistics'), so
// dx = dy*(g*s), dgamma += sum(dy*xhat), dbeta += sum(dy). One block per channel.
template <typename T>
__global__ void bn_backward_infer_kernel(long long N, long long C, long long S, double eps, bool inv_std_stat,
                                         const T* __restrict__ x, const T* __restrict__ dy, const T* __restrict__ g,
                                         const T* __restrict__ rm, const T* __restrict__ rv, T* __restrict__ dx,
                                         T* __restrict__ dg, T* __restrict__ db) {
  __shared__ double part[kThreads];
  const long long c = blockIdx.x, n_all = N * S;
  const T mu = rm[c], inv = inv_std_stat ? rv[c] : T(1) / sqrt(rv[c] + static_cast<T>(eps));
  const T scale = g[c] * inv;
  double sdy = 0, sdyx = 0;
  for (long long t = threadIdx.x; t < n_all; t += kThreads) {
    const long long k = bn_index(t, c, C, S);
    sdy += static_cast<double>(dy[k]);
    sdyx += static_cast<double>(dy[k] * ((x[k] - mu) * inv));
    dx[k] = dy[k] * scale;
  }
  const T sum_dy = static_cast<T>(block_sum(sdy, part));
  const T sum_dy_xhat = static_cast<T>(block_sum(sdyx, part));
  if (threadIdx.x == 0) {
    dg[c] += sum_dy_xhat;
    db[c] += sum_dy;
  }
}

__global__ void bn_step_kernel(float* steps_f, double* steps_d) {
  if (steps_f) steps_f[0] += 1.0f;
  if (steps_d) steps_d[0] += 1.0;
}

// batchnorm_update_running (kernels/cpu/ref/batchnorm_ref.cpp), one thread per channel.
template <typename T>
__global__ void bn_running_kernel(long long C, double n, double keep_d, double eps_d, int estimator,
                                  bool zero_debias, const T* __restrict__ steps, const T* __restrict__ m,
                                  const T* __restrict__ v, T* __restrict__ rm, T* __restrict__ rv,
                                  T* __restrict__ bm, T* __restrict__ bv) {
  const T keep = static_cast<T>(keep_d), upd = static_cast<T>(1.0 - keep_d);
  const T unbias = static_cast<T>(n / (n - 1.0)), keras = static_cast<T>(n / (n - 1.0 - eps_d));
  const T eps = static_cast<T>(eps_d);
  DL_GRID_STRIDE(c, C) {
    T stat = v[c];
    switch (estimator) {
      case static_cast<int>(BnVarEstimator::biased): break;
      case static_cast<int>(BnVarEstimator::unbiased): stat = v[c] * unbias; break;
      case static_cast<int>(BnVarEstimator::keras_scaled): stat = v[c] * keras; break;
      case static_cast<int>(BnVarEstimator::keras_double): stat = v[c] * unbias * keras; break;
      case static_cast<int>(BnVarEstimator::keras_var_plus_eps): stat = (v[c] + eps) * keras; break;
      default: stat = T(1) / sqrt(v[c] + eps); break;  // inv_std
    }
    if (!zero_debias) {
      rm[c] = keep * rm[c] + upd * m[c];
      rv[c] = keep * rv[c] + upd * stat;
      continue;
    }
    bm[c] -= (bm[c] - m[c]) * upd;
    bv[c] -= (bv[c] - stat) * upd;
    const T debias = static_cast<T>(1.0 - pow(keep_d, static_cast<double>(steps[0])));
    rm[c] = bm[c] / debias;
    rv[c] = bv[c] / debias;
  }
}

template <typename T>
__global__ void bn_var_from_invstd_kernel(long long C, double eps, const T* __restrict__ inv, T* __restrict__ var) {
  DL_GRID_STRIDE(c, C) { var[c] = T(1) / (inv[c] * inv[c]) - static_cast<T>(eps); }
}

cudaStream_t stream_of(CudaContext& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

void check_x(const char* fn, const BatchNormParams& p, const DeviceTensor& x, bool training) {
  check(x.numel() == p.n * p.c * p.s && x.rank() >= 1 && x.dim(0) == p.n, fn, ": x has shape ",
        shape_str(x.shape()), ", expected N=", p.n, " C=", p.c, " S=", p.s);
  if (training)
    check(p.n * p.s > 1, fn, ": batch statistics need more than one value per channel (N*S=", p.n * p.s,
          "), as in every framework");
}

void check_c(const char* fn, const BatchNormParams& p, std::initializer_list<const DeviceTensor*> ts) {
  for (const DeviceTensor* t : ts) check(t->numel() == p.c, fn, ": per-channel tensor of shape ", shape_str(t->shape()), " for C=", p.c);
}

}  // namespace

void batchnorm_forward_train_own(CudaContext& ctx, const BatchNormParams& p, const DeviceTensor& x,
                                 const DeviceTensor& gamma, const DeviceTensor& beta, DeviceTensor& y,
                                 DeviceTensor& mean, DeviceTensor& var, DeviceTensor& invstd) {
  const char* fn = "batchnorm_forward_train_cuda";
  check_x(fn, p, x, true);
  check_device_shape(fn, "y", y, x.shape());
  check_c(fn, p, {&gamma, &beta, &mean, &var, &invstd});
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    bn_forward_train_kernel<T><<<static_cast<unsigned>(p.c), kThreads, 0, stream_of(ctx)>>>(
        p.n, p.c, p.s, p.eps, x.data<T>(), gamma.data<T>(), beta.data<T>(), y.data<T>(), mean.data<T>(),
        var.data<T>(), invstd.data<T>());
    DL_CUDA_LAUNCH_CHECK("bn_forward_train_kernel");
  });
}

void batchnorm_forward_infer_own(CudaContext& ctx, const BatchNormParams& p, const DeviceTensor& x,
                                 const DeviceTensor& gamma, const DeviceTensor& beta,
                                 const DeviceTensor& running_mean, const DeviceTensor& running_var,
                                 DeviceTensor& y) {
  const char* fn = "batchnorm_forward_infer_cuda";
  check_x(fn, p, x, false);
  check_device_shape(fn, "y", y, x.shape());
  check_c(fn, p, {&gamma, &beta, &running_mean, &running_var});
  if (x.numel() == 0) return;
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    bn_infer_kernel<T><<<dl_blocks(x.numel(), 256), 256, 0, stream_of(ctx)>>>(
        x.numel(), p.c, p.s, p.eps, p.estimator == BnVarEstimator::inv_std, x.data<T>(), gamma.data<T>(),
        beta.data<T>(), running_mean.data<T>(), running_var.data<T>(), y.data<T>());
    DL_CUDA_LAUNCH_CHECK("bn_infer_kernel");
  });
}

void batchnorm_backward_own(CudaContext& ctx, const BatchNormParams& p, const DeviceTensor& x, const DeviceTensor& dy,
                            const DeviceTensor& gamma, const DeviceTensor& mean, const DeviceTensor& invstd,
                            DeviceTensor& dx, DeviceTensor& dgamma, DeviceTensor& dbeta) {
  const char* fn = "batchnorm_backward_cuda";
  check_x(fn, p, x, true);
  check_device_shape(fn, "dy", dy, x.shape());
  check_device_shape(fn, "dx", dx, x.shape());
  check_c(fn, p, {&gamma, &mean, &invstd, &dgamma, &dbeta});
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    bn_backward_kernel<T><<<static_cast<unsigned>(p.c), kThreads, 0, stream_of(ctx)>>>(
        p.n, p.c, p.s, x.data<T>(), dy.data<T>(), gamma.data<T>(), mean.data<T>(), invstd.data<T>(), dx.data<T>(),
        dgamma.data<T>(), dbeta.data<T>());
    DL_CUDA_LAUNCH_CHECK("bn_backward_kernel");
  });
}

void batchnorm_backward_infer_own(CudaContext& ctx, const BatchNormParams& p, const DeviceTensor& x,
                                  const DeviceTensor& dy, const DeviceTensor& gamma, const DeviceTensor& running_mean,
                                  const DeviceTensor& running_var, DeviceTensor& dx, DeviceTensor& dgamma,
                                  DeviceTensor& dbeta) {
  const char* fn = "batchnorm_backward_infer_cuda";
  check_x(fn, p, x, false);
  check_device_shape(fn, "dy", dy, x.shape());
  check_device_shape(fn, "dx", dx, x.shape());
  check_c(fn, p, {&gamma, &running_mean, &running_var, &dgamma, &dbeta});
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    bn_backward_infer_kernel<T><<<static_cast<unsigned>(p.c), kThreads, 0, stream_of(ctx)>>>(
        p.n, p.c, p.s, p.eps, p.estimator == BnVarEstimator::inv_std, x.data<T>(), dy.data<T>(), gamma.data<T>(),
        running_mean.data<T>(), running_var.data<T>(), dx.data<T>(), dgamma.data<T>(), dbeta.data<T>());
    DL_CUDA_LAUNCH_CHECK("bn_backward_infer_kernel");
  });
}

void batchnorm_update_running_cuda(CudaContext& ctx, const BatchNormParams& p, const DeviceTensor& mean,
                                   const DeviceTensor& var, DeviceTensor& running_mean, DeviceTensor& running_var,
                                   DeviceTensor& biased_mean, DeviceTensor& biased_var, DeviceTensor& steps) {
  const char* fn = "batchnorm_update_running_cuda";
  check_c(fn, p, {&mean, &var, &running_mean, &running_var});
  if (p.zero_debias) {
    check_c(fn, p, {&biased_mean, &biased_var});
    check(steps.numel() == 1, fn, ": steps must hold 1 element, has ", steps.numel());
  }
  dispatch_dtype(mean.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* st = nullptr;
    if (p.zero_debias) {
      bn_step_kernel<<<1, 1, 0, stream_of(ctx)>>>(steps.dtype() == DType::f32 ? steps.data<float>() : nullptr,
                                                  steps.dtype() == DType::f64 ? steps.data<double>() : nullptr);
      DL_CUDA_LAUNCH_CHECK("bn_step_kernel");
      st = steps.data<T>();
    }
    bn_running_kernel<T><<<dl_blocks(p.c, 128), 128, 0, stream_of(ctx)>>>(
        p.c, static_cast<double>(p.n * p.s), p.keep, p.eps, static_cast<int>(p.estimator), p.zero_debias, st,
        mean.data<T>(), var.data<T>(), running_mean.data<T>(), running_var.data<T>(),
        p.zero_debias ? biased_mean.data<T>() : nullptr, p.zero_debias ? biased_var.data<T>() : nullptr);
    DL_CUDA_LAUNCH_CHECK("bn_running_kernel");
  });
}

void batchnorm_var_from_invstd(CudaContext& ctx, double eps, const DeviceTensor& invstd, DeviceTensor& var) {
  check_device_shape("batchnorm_var_from_invstd", "var", var, invstd.shape());
  if (invstd.numel() == 0) return;
  dispatch_dtype(invstd.dtype(), [&](auto tag) {
    using T = decltype(tag);
    bn_var_from_invstd_kernel<T><<<dl_blocks(invstd.numel(), 128), 128, 0, stream_of(ctx)>>>(
        invstd.numel(), eps, invstd.data<T>(), var.data<T>());
    DL_CUDA_LAUNCH_CHECK("bn_var_from_invstd_kernel");
  });
}

}  // namespace cuda
}  // namespace driftlab
