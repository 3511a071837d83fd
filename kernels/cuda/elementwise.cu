// Own CUDA elementwise kernels, float and double: activations (forward/backward, every
// ActivationParams field) and the SGD step (every form, weight-decay placement, Nesterov), each
// element computed by the very functions the CPU kernels call (activation_value/activation_grad,
// sgd_update: DL_HOST_DEVICE). Built with -fmad=false so that each product and sum rounds as in
// the CPU code (built with -ffp-contract=off): relu, hard sigmoid and SGD give the CPU's bits;
// tanh/sigmoid differ only by the ulps of CUDA's tanh/exp against glibc's. Outputs are written
// (=); SGD updates p and its state in place.
#include "core/ops/linf_step.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {
namespace {

// The CPU's formulas (core/ops/activation.h) one element per thread.
template <typename T>
__global__ void act_forward_kernel(ActivationParams p, long long n, const T* __restrict__ x, T* __restrict__ y) {
  DL_GRID_STRIDE(i, n) { y[i] = activation_value(p, x[i]); }
}

template <typename T>
__global__ void act_backward_kernel(ActivationParams p, long long n, const T* __restrict__ x, const T* __restrict__ y,
                                    const T* __restrict__ dy, T* __restrict__ dx) {
  DL_GRID_STRIDE(i, n) { dx[i] = activation_grad(p, x[i], y[i], dy[i]); }
}

cudaStream_t stream_of(CudaContext& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

// The CPU's SGD formula (core/ops/sgd.h) one element per thread, under rule R.
template <typename T, typename R>
__global__ void sgd_step_kernel(T lr, T mu, T wd, long long n, T* __restrict__ p, const T* __restrict__ grad,
                                T* __restrict__ s) {
  DL_GRID_STRIDE(i, n) { sgd_update<R>(lr, mu, wd, p[i], grad[i], s[i]); }
}

// The L-inf attack step (core/ops/linf_step.h) one element per thread; a frozen sample stays.
template <typename T>
__global__ void linf_step_kernel(bool fgsm, T eps, T step, T lo, T hi, long long per, long long total,
                                 const T* __restrict__ x0, const T* __restrict__ g, const uint8_t* __restrict__ frozen,
                                 T* __restrict__ xa) {
  DL_GRID_STRIDE(i, total) {
    if (!frozen[i / per]) xa[i] = linf_step(fgsm, x0[i], xa[i], g[i], eps, step, lo, hi);
  }
}

// One thread per row: 1 when every element of the row is exactly zero.
template <typename T>
__global__ void rows_all_zero_kernel(long long rows, long long per, const T* __restrict__ g, uint8_t* __restrict__ out) {
  DL_GRID_STRIDE(r, rows) {
    uint8_t z = 1;
    for (long long e = 0; e < per; ++e)
      if (g[r * per + e] != T(0)) {
        z = 0;
        break;
      }
    out[r] = z;
  }
}

// The CPU's Adam / RMSprop formulas (core/ops/adaptive.h) one element per thread, under rule R.
template <typename T, typename R>
__global__ void adam_step_kernel(AdaptiveScalars<T> k, long long n, T* __restrict__ p, const T* __restrict__ grad,
                                 T* __restrict__ m, T* __restrict__ v) {
  DL_GRID_STRIDE(i, n) { adam_update<R>(k, p[i], grad[i], m[i], v[i]); }
}
template <typename T, typename R>
__global__ void rmsprop_step_kernel(AdaptiveScalars<T> k, long long n, T* __restrict__ p, const T* __restrict__ grad,
                                    T* __restrict__ v, T* __restrict__ b) {
  DL_GRID_STRIDE(i, n) { rmsprop_update<R>(k, p[i], grad[i], v[i], b[i]); }
}

void check_adaptive(const char* fn, double lr, const DeviceTensor& p, const DeviceTensor& grad,
                    const DeviceTensor& a, const DeviceTensor& b) {
  check_device_shape(fn, "grad", grad, p.shape());
  check_device_shape(fn, "state", a, p.shape());
  check_device_shape(fn, "state", b, p.shape());
  check(p.dtype() == grad.dtype() && p.dtype() == a.dtype() && p.dtype() == b.dtype(), fn, ": mixed dtypes");
  check(lr > 0, fn, ": lr=", lr, " must be > 0");
}

}  // namespace

void activation_forward_cuda(CudaContext& ctx, const ActivationParams& p, const DeviceTensor& x, DeviceTensor& y) {
  check_device_shape(act_name(p.kind), "y", y, x.shape());
  check(x.dtype() == y.dtype(), act_name(p.kind), ": x and y dtypes differ");
  if (x.numel() == 0) return;
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    act_forward_kernel<T><<<dl_blocks(x.numel(), 256), 256, 0, stream_of(ctx)>>>(p, x.numel(),
                                                                                 x.data<T>(), y.data<T>());
    DL_CUDA_LAUNCH_CHECK("act_forward_kernel");
  });
}

void activation_backward_cuda(CudaContext& ctx, const ActivationParams& p, const DeviceTensor& x,
                              const DeviceTensor& y, const DeviceTensor& dy, DeviceTensor& dx) {
  check_device_shape(act_name(p.kind), "y", y, x.shape());
  check_device_shape(act_name(p.kind), "dy", dy, x.shape());
  check_device_shape(act_name(p.kind), "dx", dx, x.shape());
  if (x.numel() == 0) return;
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    act_backward_kernel<T><<<dl_blocks(x.numel(), 256), 256, 0, stream_of(ctx)>>>(
        p, x.numel(), x.data<T>(), y.data<T>(), dy.data<T>(), dx.data<T>());
    DL_CUDA_LAUNCH_CHECK("act_backward_kernel");
  });
}

void sgd_step_cuda(CudaContext& ctx, const SgdStepParams& prm, DeviceTensor& p, const DeviceTensor& grad,
                   DeviceTensor& state) {
  check_device_shape("sgd_step_cuda", "grad", grad, p.shape());
  check_device_shape("sgd_step_cuda", "state", state, p.shape());
  check(p.dtype() == grad.dtype() && p.dtype() == state.dtype(), "sgd_step_cuda: mixed dtypes");
  check(prm.lr > 0, "sgd_step_cuda: lr=", prm.lr, " must be > 0");
  if (p.numel() == 0) return;
  dispatch_dtype(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T lr = static_cast<T>(prm.lr), mu = static_cast<T>(prm.momentum), wd = static_cast<T>(prm.weight_decay);
    with_sgd_rule(prm, [&](auto rule) {
      using R = decltype(rule);
      sgd_step_kernel<T, R><<<dl_blocks(p.numel(), 256), 256, 0, stream_of(ctx)>>>(lr, mu, wd, p.numel(), p.data<T>(),
                                                                                   grad.data<T>(), state.data<T>());
      DL_CUDA_LAUNCH_CHECK("sgd_step_kernel");
    });
  });
}

void linf_step_cuda(CudaContext& ctx, const LinfStepParams& prm, const DeviceTensor& x0, const DeviceTensor& g,
                    const DeviceTensor& frozen, DeviceTensor& xa) {
  check(x0.rank() >= 1, "linf_step_cuda: x0 must be (N, ...)");
  check_device_shape("linf_step_cuda", "g", g, x0.shape());
  check_device_shape("linf_step_cuda", "xa", xa, x0.shape());
  check_device_shape("linf_step_cuda", "frozen", frozen, {x0.dim(0)});
  check(x0.dtype() == g.dtype() && x0.dtype() == xa.dtype() && frozen.dtype() == DType::u8,
        "linf_step_cuda: x0, g, xa of one float dtype and uint8 flags");
  if (x0.numel() == 0) return;
  const long long per = x0.numel() / x0.dim(0);
  dispatch_dtype(x0.dtype(), [&](auto tag) {
    using T = decltype(tag);
    linf_step_kernel<T><<<dl_blocks(x0.numel(), 256), 256, 0, stream_of(ctx)>>>(
        prm.fgsm, static_cast<T>(prm.eps), static_cast<T>(prm.step), static_cast<T>(prm.lo), static_cast<T>(prm.hi),
        per, x0.numel(), x0.data<T>(), g.data<T>(), frozen.data<uint8_t>(), xa.data<T>());
    DL_CUDA_LAUNCH_CHECK("linf_step_kernel");
  });
}

void rows_all_zero_cuda(CudaContext& ctx, const DeviceTensor& g, DeviceTensor& out) {
  check(g.rank() >= 1, "rows_all_zero_cuda: g must be (N, ...)");
  check_device_shape("rows_all_zero_cuda", "out", out, {g.dim(0)});
  check(out.dtype() == DType::u8, "rows_all_zero_cuda: out must be uint8");
  if (g.dim(0) == 0) return;
  const long long per = g.numel() / g.dim(0);
  dispatch_dtype(g.dtype(), [&](auto tag) {
    using T = decltype(tag);
    rows_all_zero_kernel<T><<<dl_blocks(g.dim(0), 128), 128, 0, stream_of(ctx)>>>(g.dim(0), per, g.data<T>(),
                                                                                  out.data<uint8_t>());
    DL_CUDA_LAUNCH_CHECK("rows_all_zero_kernel");
  });
}

void adam_step_cuda(CudaContext& ctx, const AdamStepParams& prm, DeviceTensor& p, const DeviceTensor& grad,
                    DeviceTensor& m, DeviceTensor& v) {
  check_adaptive("adam_step_cuda", prm.lr, p, grad, m, v);
  if (p.numel() == 0) return;
  dispatch_dtype(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const AdaptiveScalars<T> k = adaptive_scalars<T>(prm);
    with_adam_rule(prm, [&](auto rule) {
      using R = decltype(rule);
      adam_step_kernel<T, R><<<dl_blocks(p.numel(), 256), 256, 0, stream_of(ctx)>>>(
          k, p.numel(), p.data<T>(), grad.data<T>(), m.data<T>(), v.data<T>());
      DL_CUDA_LAUNCH_CHECK("adam_step_kernel");
    });
  });
}

void rmsprop_step_cuda(CudaContext& ctx, const RmspropStepParams& prm, DeviceTensor& p, const DeviceTensor& grad,
                       DeviceTensor& v, DeviceTensor& b) {
  check_adaptive("rmsprop_step_cuda", prm.lr, p, grad, v, b);
  if (p.numel() == 0) return;
  dispatch_dtype(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const AdaptiveScalars<T> k = adaptive_scalars<T>(prm);
    with_rmsprop_rule(prm, [&](auto rule) {
      using R = decltype(rule);
      rmsprop_step_kernel<T, R><<<dl_blocks(p.numel(), 256), 256, 0, stream_of(ctx)>>>(
          k, p.numel(), p.data<T>(), grad.data<T>(), v.data<T>(), b.data<T>());
      DL_CUDA_LAUNCH_CHECK("rmsprop_step_kernel");
    });
  });
}

}  // namespace cuda
}  // namespace driftlab
