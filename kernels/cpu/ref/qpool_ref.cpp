// Reference int8 pooling, int8|uint8 in and out, every output written (=): qmaxpool2d x (N,C,H,W)
// -> y (N,C,P,Q) (the integer max of each window; a window wholly in the padding gives the type's
// minimum) and qglobal_avg_pool x (N,C,H,W) -> y (N,C) (each plane's integer sum, then qgap_one()
// of core/ops/qpool.h, shared with every other backend). One thread, loops in the plainest order;
// the fast and CUDA kernels (kernels/cpu/fast/qpool_fast.cpp, kernels/cuda/qpool.cu) must match
// these bytes.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "kernels/cpu/pool2d_loops.h"
#include "kernels/cpu/quant_loops.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

namespace {

using quant_loops::check_tensor;
using quant_loops::dispatch_xy;

void qmaxpool2d_forward_ref_impl(const QPool2dParams& p, const Tensor& x, Tensor& y) {
  p.g.validate();
  check_tensor("qmaxpool2d", "input", x, p.g.x_shape(), p.dtype);
  check_tensor("qmaxpool2d", "output", y, p.g.y_shape(), p.dtype);
  dispatch_xy(p.dtype, p.dtype, "qmaxpool2d", [&](auto xt, auto) {
    using T = decltype(xt);
    const T* xs = x.data<T>();
    T* ys = y.data<T>();
    const int64_t P = p.g.out_h(), Q = p.g.out_w();
    for (int64_t nc = 0; nc < p.g.n * p.g.c; ++nc) {
      const T* xp = xs + nc * p.g.h * p.g.w;
      for (int64_t oh = 0; oh < P; ++oh)
        for (int64_t ow = 0; ow < Q; ++ow) {
          T m = std::numeric_limits<T>::lowest();  // a window wholly in the padding gives the type's minimum
          pool2d_loops::for_window(p.g, oh, ow, [&](int64_t i) { m = std::max(m, xp[i]); });
          ys[(nc * P + oh) * Q + ow] = m;
        }
    }
  });
}

void qgap_ref_impl(const QGlobalAvgPoolParams& p, const Tensor& x, Tensor& y) {
  check_tensor("qglobal_avg_pool", "input", x, {p.n, p.c, p.h, p.w}, p.dtype);
  check_tensor("qglobal_avg_pool", "output", y, {p.n, p.c}, p.dtype);
  const int64_t count = p.h * p.w;
  const QGlobalAvgPoolParams::Resolved r = p.resolve();  // checks count and scales too
  dispatch_xy(p.dtype, p.dtype, "qglobal_avg_pool", [&](auto tag, auto) {
    using T = decltype(tag);
    const T* xs = x.data<T>();
    T* ys = y.data<T>();
    const int32_t qmin = std::numeric_limits<T>::min(), qmax = std::numeric_limits<T>::max();
    for (int64_t nc = 0; nc < p.n * p.c; ++nc) {
      int64_t sum = 0;
      for (int64_t i = 0; i < count; ++i) sum += xs[nc * count + i];
      ys[nc] = static_cast<T>(qgap_one(r, sum, qmin, qmax));
    }
  });
}

}  // namespace

void qmaxpool2d_forward_ref(const QPool2dParams& p, const Tensor& x, Tensor& y) { qmaxpool2d_forward_ref_impl(p, x, y); }
void qglobal_avg_pool_forward_ref(const QGlobalAvgPoolParams& p, const Tensor& x, Tensor& y) { qgap_ref_impl(p, x, y); }

void register_qpool_ref(KernelRegistry& reg) {
  reg.qmaxpool2d.at(KernelBackend::reference) = {"reference", "every params field, int8 and uint8",
                                                 [](const QPool2dParams&, DType) { return true; },
                                                 qmaxpool2d_forward_ref};
  reg.qglobal_avg_pool.at(KernelBackend::reference) = {"reference", "every params field, int8 and uint8",
                                                       [](const QGlobalAvgPoolParams&, DType) { return true; },
                                                       qglobal_avg_pool_forward_ref};
}

}  // namespace driftlab
