// Reference qadd: a, b, y int8|uint8 of one shape, elementwise, every output written (=). One
// thread, one loop: each element is qadd_one() of core/ops/qadd.h (every QAddRule), shared with the
// CUDA kernel; the fast kernel (kernels/cpu/fast/qadd_fast.cpp) must match these bytes.
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "kernels/cpu/quant_loops.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

namespace {

using quant_loops::dispatch_xy;

void qadd_ref_impl(const QAddParams& p0, const Tensor& a, const Tensor& b, Tensor& y) {
  QAddParams p = p0;
  p.resolve();
  check(a.shape() == b.shape() && y.shape() == a.shape(), "qadd: shapes ", shape_str(a.shape()), ", ",
        shape_str(b.shape()), " -> ", shape_str(y.shape()), " must agree");
  for (const Tensor* t : {&a, &b, static_cast<const Tensor*>(&y)})
    check(t->dtype() == p.dtype, "qadd: ", dtype_name(t->dtype()), " tensor, expected ", dtype_name(p.dtype));
  const int64_t numel = a.numel();
  const bool nhwc = p.n > 0;
  if (nhwc) check(p.n * p.c * p.h * p.w == numel, "qadd: layout (", p.n, ",", p.c, ",", p.h, ",", p.w, ") for ", numel,
                  " elements");
  const int64_t body = numel - numel % 64;  // ATen's vectorised loop: 64 quint8 values per step
  dispatch_xy(p.dtype, p.dtype, "qadd", [&](auto tag, auto) {
    using T = decltype(tag);
    const T* as = a.data<T>();
    const T* bs = b.data<T>();
    T* ys = y.data<T>();
    const int32_t tmin = std::numeric_limits<T>::min(), tmax = std::numeric_limits<T>::max();
    for (int64_t i = 0; i < numel; ++i)
      ys[i] = static_cast<T>(qadd_one(p, as[i], bs[i], qadd_memory_pos(p, i), body, tmin, tmax));
  });
}

}  // namespace

void qadd_forward_ref(const QAddParams& p, const Tensor& a, const Tensor& b, Tensor& y) { qadd_ref_impl(p, a, b, y); }

void register_qadd_ref(KernelRegistry& reg) {
  reg.qadd.at(KernelBackend::reference) = {"reference", "every params field, int8 and uint8",
                                           [](const QAddParams&, DType) { return true; }, qadd_forward_ref};
}

}  // namespace driftlab
