// Own CUDA softmax cross-entropy, the three formulations of core/ops/softmax_xent.h, float
// and double. One thread per sample row does what the reference does for that row, with the
// class sums in params.sum_order (built with -fmad=false; exp/log are CUDA's, a few ulps from
// glibc's). Forward: per-sample losses on the device, their sum on the host in sum_order as
// the reference; backward writes dz (=). Scratch rows (N,K) hold exp terms and products.
#include <vector>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {
namespace {

struct XentDev {
  int form, order;
  double eps;
  bool mean;
};

template <typename T>
__device__ T clip_dev(T v, T lo, T hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// p = softmax(z row) into p, normaliser in `order`.
template <typename T>
__device__ void softmax_row_dev(const T* z, long long k, int order, T* p) {
  T m = z[0];
  for (long long j = 1; j < k; ++j) m = z[j] > m ? z[j] : m;
  for (long long j = 0; j < k; ++j) p[j] = exp(z[j] - m);
  const T s = ordered_sum_dev(p, k, order);
  for (long long j = 0; j < k; ++j) p[j] /= s;
}

// With `given` (the vendor path) the softmax rows come from cuDNN: log-probabilities for
// log_softmax, probabilities otherwise; z is then unused.
template <typename T>
__global__ void xent_forward_kernel(XentDev c, long long n, long long k, const T* __restrict__ z,
                                    const T* __restrict__ given, const int* __restrict__ y, T* __restrict__ scratch,
                                    T* __restrict__ losses) {
  const T eps = static_cast<T>(c.eps);
  DL_GRID_STRIDE(i, n) {
    T li;
    if (given) {
      const T* gi = given + i * k;
      if (c.form == static_cast<int>(CeFormulation::log_softmax)) {
        li = -gi[y[i]];
      } else if (c.form == static_cast<int>(CeFormulation::softmax_clip)) {
        li = -log(clip_dev(gi[y[i]] / ordered_sum_dev(gi, k, c.order), eps, T(1) - eps));
      } else {
        li = -log(gi[y[i]]);
      }
      losses[i] = li;
      continue;
    }
    const T* zi = z + i * k;
    T* p = scratch + i * k;
    if (c.form == static_cast<int>(CeFormulation::log_softmax)) {
      T m = zi[0];
      for (long long j = 1; j < k; ++j) m = zi[j] > m ? zi[j] : m;
      for (long long j = 0; j < k; ++j) p[j] = exp(zi[j] - m);
      li = log(ordered_sum_dev(p, k, c.order)) + m - zi[y[i]];
    } else {
      softmax_row_dev(zi, k, c.order, p);
      if (c.form == static_cast<int>(CeFormulation::softmax_clip)) {
        const T s = ordered_sum_dev(p, k, c.order);
        li = -log(clip_dev(p[y[i]] / s, eps, T(1) - eps));
      } else {
        li = -log(p[y[i]]);
      }
    }
    losses[i] = li;
  }
}

// dz = chain rule of the row's own formulation (see kernels/cpu/ref/softmax_xent_ref.cpp).
// dz holds p, scratch holds the products p_j*dp_j for the dot's ordered sum. With `given`
// (vendor path) p is cuDNN's probabilities instead of the recomputed softmax.
template <typename T>
__global__ void xent_backward_kernel(XentDev c, long long n, long long k, const T* __restrict__ z,
                                     const T* __restrict__ given, const int* __restrict__ y, T* __restrict__ scratch,
                                     T* __restrict__ dz) {
  const T scale = c.mean ? T(1) / static_cast<T>(n) : T(1);
  const T eps = static_cast<T>(c.eps);
  DL_GRID_STRIDE(i, n) {
    const T* zi = z + i * k;
    T* p = dz + i * k;
    T* t = scratch + i * k;
    const long long yi = y[i];
    if (given) {
      for (long long j = 0; j < k; ++j) p[j] = given[i * k + j];
    } else {
      softmax_row_dev(zi, k, c.order, p);
    }
    if (c.form == static_cast<int>(CeFormulation::log_softmax)) {
      for (long long j = 0; j < k; ++j) p[j] = (p[j] - (j == yi ? T(1) : T(0))) * scale;
      continue;
    }
    // dp_j for the probability formulations, recomputed where needed (only p and t stored).
    T s = T(1), qy = T(0), dq = T(0);
    const bool clipf = c.form == static_cast<int>(CeFormulation::softmax_clip);
    if (clipf) {
      s = ordered_sum_dev(p, k, c.order);
      qy = p[yi] / s;
      dq = (qy >= eps && qy <= T(1) - eps) ? -T(1) / qy : T(0);
    }
    const T py = p[yi];
    auto dp = [&](long long j) -> T {
      if (clipf) return dq * ((j == yi ? T(1) : T(0)) - qy) / s;
      return j == yi ? -T(1) / py : T(0);
    };
    for (long long j = 0; j < k; ++j) t[j] = p[j] * dp(j);
    const T dot = ordered_sum_dev(t, k, c.order);
    for (long long j = 0; j < k; ++j) p[j] = p[j] * (dp(j) - dot) * scale;
  }
}

cudaStream_t stream_of(CudaContext& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

void check_args(const char* fn, const DeviceTensor& z, const std::vector<int32_t>& labels) {
  check(z.rank() == 2, fn, ": logits must be (N,K), got ", shape_str(z.shape()));
  check_xent_labels(fn, z.dim(0), z.dim(1), labels);
}

void check_device_labels(const char* fn, const DeviceTensor& z, const DeviceTensor& y) {
  check(z.rank() == 2, fn, ": logits must be (N,K), got ", shape_str(z.shape()));
  check(y.dtype() == DType::i32 && y.rank() == 1 && y.dim(0) == z.dim(0), fn, ": labels must be int32 (",
        z.dim(0), "), got ", dtype_name(y.dtype()), " ", shape_str(y.shape()));
}

XentDev xent_dev(const SoftmaxXentParams& p) {
  return {static_cast<int>(p.form), static_cast<int>(p.sum_order), p.clip_eps, p.mean};
}

// Labels as a device int32 array, from pageable memory: waits until the copy has read them.
DeviceTensor upload_labels(CudaContext& ctx, const std::vector<int32_t>& labels) {
  DeviceTensor d(ctx, {static_cast<int64_t>(labels.size())}, DType::i32);
  copy_to_device(ctx, labels.data(), d);
  return d;
}

void losses_impl(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z, const DeviceTensor* given,
                 const DeviceTensor& y, DeviceTensor& losses) {
  check_device_labels("softmax_xent_losses_cuda", z, y);
  check_device_shape("softmax_xent_losses_cuda", "losses", losses, {z.dim(0)});
  check(losses.dtype() == z.dtype(), "softmax_xent_losses_cuda: losses must be ", dtype_name(z.dtype()));
  const int64_t n = z.dim(0), k = z.dim(1);
  if (n == 0) return;
  dispatch_dtype(z.dtype(), [&](auto tag) {
    using T = decltype(tag);
    DeviceTensor scratch(ctx, {n, k}, z.dtype());
    xent_forward_kernel<T><<<dl_blocks(n, 128), 128, 0, stream_of(ctx)>>>(
        xent_dev(p), n, k, z.data<T>(), given ? given->data<T>() : nullptr, y.data<int32_t>(), scratch.data<T>(),
        losses.data<T>());
    DL_CUDA_LAUNCH_CHECK("xent_forward_kernel");
  });
}

void backward_impl(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z, const DeviceTensor* given,
                   const DeviceTensor& y, DeviceTensor& dz) {
  check_device_labels("softmax_xent_backward_cuda", z, y);
  check_device_shape("softmax_xent_backward_cuda", "dz", dz, z.shape());
  const int64_t n = z.dim(0), k = z.dim(1);
  if (n == 0) return;
  dispatch_dtype(z.dtype(), [&](auto tag) {
    using T = decltype(tag);
    DeviceTensor scratch(ctx, {n, k}, z.dtype());
    xent_backward_kernel<T><<<dl_blocks(n, 128), 128, 0, stream_of(ctx)>>>(
        xent_dev(p), n, k, z.data<T>(), given ? given->data<T>() : nullptr, y.data<int32_t>(), scratch.data<T>(),
        dz.data<T>());
    DL_CUDA_LAUNCH_CHECK("xent_backward_kernel");
  });
}

// The host-label forms: labels checked and uploaded (one wait), the losses read back (another).
double forward_host(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z, const DeviceTensor* given,
                    const std::vector<int32_t>& labels) {
  check_args("softmax_xent_forward_cuda", z, labels);
  if (z.dim(0) == 0) return 0.0;
  const DeviceTensor y = upload_labels(ctx, labels);
  DeviceTensor losses(ctx, {z.dim(0)}, z.dtype());
  losses_impl(ctx, p, z, given, y, losses);
  return softmax_xent_total(p, to_host(ctx, losses));
}

void backward_host(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z, const DeviceTensor* given,
                   const std::vector<int32_t>& labels, DeviceTensor& dz) {
  check_args("softmax_xent_backward_cuda", z, labels);
  check_device_shape("softmax_xent_backward_cuda", "dz", dz, z.shape());
  if (z.dim(0) == 0) return;
  backward_impl(ctx, p, z, given, upload_labels(ctx, labels), dz);
}

}  // namespace

void check_xent_labels(const char* fn, int64_t n, int64_t k, const std::vector<int32_t>& labels) {
  check(static_cast<int64_t>(labels.size()) == n, fn, ": ", labels.size(), " labels for ", n, " rows of logits");
  for (std::size_t i = 0; i < labels.size(); ++i)
    check(labels[i] >= 0 && labels[i] < k, fn, ": label ", labels[i], " of sample ", i, " is outside 0..", k - 1);
}

double softmax_xent_total(const SoftmaxXentParams& p, const Tensor& losses) {
  const int64_t n = losses.numel();
  if (n == 0) return 0.0;
  return dispatch_dtype(losses.dtype(), [&](auto tag) -> double {
    using T = decltype(tag);
    const double total = static_cast<double>(ordered_sum(losses.data<T>(), n, p.sum_order));
    return p.mean ? total / static_cast<double>(n) : total;
  });
}

double softmax_xent_forward_own(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z,
                                const std::vector<int32_t>& labels) {
  return forward_host(ctx, p, z, nullptr, labels);
}

void softmax_xent_backward_own(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z,
                               const std::vector<int32_t>& labels, DeviceTensor& dz) {
  backward_host(ctx, p, z, nullptr, labels, dz);
}

void softmax_xent_losses_own(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z,
                             const DeviceTensor& labels, DeviceTensor& losses) {
  losses_impl(ctx, p, z, nullptr, labels, losses);
}

void softmax_xent_backward_own(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& z,
                               const DeviceTensor& labels, DeviceTensor& dz) {
  backward_impl(ctx, p, z, nullptr, labels, dz);
}

double softmax_xent_forward_given(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& given,
                                  const std::vector<int32_t>& labels) {
  return forward_host(ctx, p, given, &given, labels);
}

void softmax_xent_backward_given(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& given,
                                 const std::vector<int32_t>& labels, DeviceTensor& dz) {
  backward_host(ctx, p, given, &given, labels, dz);
}

void softmax_xent_losses_given(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& given,
                               const DeviceTensor& labels, DeviceTensor& losses) {
  losses_impl(ctx, p, given, &given, labels, losses);
}

void softmax_xent_backward_given(CudaContext& ctx, const SoftmaxXentParams& p, const DeviceTensor& given,
                                 const DeviceTensor& labels, DeviceTensor& dz) {
  backward_impl(ctx, p, given, &given, labels, dz);
}

}  // namespace cuda
}  // namespace driftlab
