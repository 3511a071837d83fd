// Fast binary ops (a graph's add, sub, mul) where both operands have the output's shape (a
// residual add): one element at a time from the same formula as the reference (binary_value),
// split over OpenMP threads for large tensors, so the result equals the reference bit for bit for
// any thread count. A broadcast falls back to the reference. forward writes y (=). The three
// tensors may be channel-blocked alike (BinaryKernel::any_block): the same loop over their storage.
#include "core/ops/binary.h"
#include "core/parallel.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

namespace {

template <typename T>
void same_shape(BinaryOp op, const T* a, const T* b, T* y, int64_t n) {
  switch (op) {  // one loop per op, so that each vectorises
    case BinaryOp::add:
#pragma omp parallel for schedule(static) if (n > kParallelMinElements)
      for (int64_t i = 0; i < n; ++i) y[i] = binary_value(BinaryOp::add, a[i], b[i]);
      return;
    case BinaryOp::sub:
#pragma omp parallel for schedule(static) if (n > kParallelMinElements)
      for (int64_t i = 0; i < n; ++i) y[i] = binary_value(BinaryOp::sub, a[i], b[i]);
      return;
    case BinaryOp::mul:
#pragma omp parallel for schedule(static) if (n > kParallelMinElements)
      for (int64_t i = 0; i < n; ++i) y[i] = binary_value(BinaryOp::mul, a[i], b[i]);
      return;
  }
}

void forward(const BinaryParams& p, const Tensor& a, const Tensor& b, Tensor& y) {
  check(a.shape() == p.a && b.shape() == p.b && p.a == p.b && y.shape() == p.a, binary_op_name(p.op),
        " (fast): operands and output of one shape are needed, got ", shape_str(a.shape()), ", ", shape_str(b.shape()),
        " -> ", shape_str(y.shape()));
  check(a.dtype() == b.dtype() && a.dtype() == y.dtype(), binary_op_name(p.op), " (fast): one dtype is needed");
  const int blk = a.channel_block();
  check(b.channel_block() == blk && y.channel_block() == blk, binary_op_name(p.op), " (fast): operands in channel blocks ",
        blk, " and ", b.channel_block(), ", output in ", y.channel_block(), " (one layout for all three)");
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    if (blk)  // elementwise: the blocked storage holds the same elements in another order
      return same_shape(p.op, a.blocked_data<T>(), b.blocked_data<T>(), y.blocked_data<T>(), a.numel());
    same_shape(p.op, a.data<T>(), b.data<T>(), y.data<T>(), a.numel());
  });
}

}  // namespace

void register_binary_fast(KernelRegistry& reg) {
  BinaryKernel k;
  k.name = "fast";
  k.supports_doc =
      "operands of one shape (no broadcast), plain or channel-blocked alike, float32 and float64; the reference's bits "
      "(OpenMP)";
  k.supports = [](const BinaryParams& p, DType dt) { return p.a == p.b && (dt == DType::f32 || dt == DType::f64); };
  k.forward = forward;
  k.any_block = true;
  reg.binary.at(KernelBackend::fast) = k;
}

}  // namespace driftlab
