// Reference max/average pooling, float and double, NCHW, one thread (average pooling: the shared
// loops of kernels/cpu/pool2d_loops.h). Forward writes y (=); backward writes dx (=),
// accumulating over overlapping windows inside the kernel.
#include <cmath>

#include "kernels/cpu/pool2d_loops.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

namespace {

using pool2d_loops::for_window;

// The window's winner (core/ops/pool2d.h max_scan_takes): the first max, or the last NaN.
template <typename T>
int64_t argmax_first(const Pool2dParams& p, const T* xp, int64_t oh, int64_t ow) {
  int64_t best = -1;
  for_window(p, oh, ow, [&](int64_t i) {
    if (best < 0 || max_scan_takes(xp[i], xp[best])) best = i;
  });
  return best;
}

template <typename T>
void max_forward(const Pool2dParams& p, const T* x, T* y) {
  const int64_t P = p.out_h(), Q = p.out_w();
  for (int64_t nc = 0; nc < p.n * p.c; ++nc) {
    const T* xp = x + nc * p.h * p.w;
    for (int64_t oh = 0; oh < P; ++oh)
      for (int64_t ow = 0; ow < Q; ++ow) y[(nc * P + oh) * Q + ow] = xp[argmax_first(p, xp, oh, ow)];
  }
}

template <typename T>
void max_backward(const Pool2dParams& p, const T* x, const T* dy, T* dx) {
  const int64_t P = p.out_h(), Q = p.out_w();
  for (int64_t i = 0; i < p.n * p.c * p.h * p.w; ++i) dx[i] = 0;
  for (int64_t nc = 0; nc < p.n * p.c; ++nc) {
    const T* xp = x + nc * p.h * p.w;
    T* dxp = dx + nc * p.h * p.w;
    for (int64_t oh = 0; oh < P; ++oh)
      for (int64_t ow = 0; ow < Q; ++ow) {
        T g = dy[(nc * P + oh) * Q + ow];
        int64_t first = argmax_first(p, xp, oh, ow);
        if (p.ties == PoolTies::first) {
          dxp[first] += g;
        } else {
          T m = xp[first];
          for_window(p, oh, ow, [&](int64_t i) {
            if (xp[i] == m) dxp[i] += g;
          });
        }
      }
  }
}

void check_io(const char* fn, const Pool2dParams& p, const Tensor& in, const Shape& in_shape, const char* in_name,
              const Tensor& out, const Shape& out_shape, const char* out_name) {
  p.validate();
  check_shape(fn, in_name, in, in_shape);
  check_shape(fn, out_name, out, out_shape);
  check_same_dtype(fn, in, out);
}

}  // namespace

void maxpool2d_forward_ref(const Pool2dParams& p, const Tensor& x, Tensor& y) {
  check_io("maxpool2d_forward_ref", p, x, p.x_shape(), "x", y, p.y_shape(), "y");
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    max_forward<T>(p, x.data<T>(), y.data<T>());
  });
}

void maxpool2d_backward_ref(const Pool2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dx) {
  check_io("maxpool2d_backward_ref", p, x, p.x_shape(), "x", dy, p.y_shape(), "dy");
  check_shape("maxpool2d_backward_ref", "dx", dx, p.x_shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    max_backward<T>(p, x.data<T>(), dy.data<T>(), dx.data<T>());
  });
}

void avgpool2d_forward_ref(const Pool2dParams& p, const Tensor& x, Tensor& y) {
  pool2d_loops::run_avg_forward<false>(p, x, y);
}

void avgpool2d_backward_ref(const Pool2dParams& p, const Tensor& dy, Tensor& dx) {
  pool2d_loops::run_avg_backward<false>(p, Tensor(), dy, dx);
}

void register_pool2d_ref(KernelRegistry& reg) {
  Pool2dKernel k;
  k.name = "reference";
  k.supports_doc = "every params field, float32 and float64";
  k.supports = [](const Pool2dParams&, DType) { return true; };
  k.forward = maxpool2d_forward_ref;
  k.backward = maxpool2d_backward_ref;
  reg.maxpool2d.at(KernelBackend::reference) = k;
  k.forward = pool2d_loops::run_avg_forward<false>;
  k.backward = pool2d_loops::run_avg_backward<false>;
  reg.avgpool2d.at(KernelBackend::reference) = k;
}

}  // namespace driftlab
