// Reference binary ops (add, sub, mul) under NumPy broadcasting, and concatenation: single
// threaded, float and double, sums in ascending order of the output's flat index.
#include <vector>

#include "core/ops/binary.h"
#include "core/ops/common.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

// Strides of `s` read as a tensor of y's rank (leading axes added, repeated axes stride 0).
std::vector<int64_t> broadcast_strides(const Shape& s, const Shape& y) {
  std::vector<int64_t> st(y.size(), 0);
  int64_t stride = 1;
  for (std::size_t j = s.size(); j-- > 0;) {
    const std::size_t i = j + (y.size() - s.size());
    st[i] = s[j] == 1 ? 0 : stride;
    stride *= s[j];
  }
  return st;
}

// Calls f(flat index into y, offset into a, offset into b) for every element of y in order.
template <typename F>
void for_each_broadcast(const Shape& a, const Shape& b, const Shape& y, F&& f) {
  const std::vector<int64_t> sa = broadcast_strides(a, y), sb = broadcast_strides(b, y);
  const int r = static_cast<int>(y.size());
  std::vector<int64_t> idx(static_cast<std::size_t>(r), 0);
  const int64_t n = shape_numel(y);
  int64_t oa = 0, ob = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(i, oa, ob);
    for (int d = r - 1; d >= 0; --d) {  // advance the multi-index
      oa += sa[d];
      ob += sb[d];
      if (++idx[d] < y[d]) break;
      oa -= sa[d] * y[d];
      ob -= sb[d] * y[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

void binary_forward_ref(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  const Shape ys = broadcast_shape(a.shape(), b.shape(), binary_op_name(op));
  check_shape(binary_op_name(op), "y", y, ys);
  check_same_dtype(binary_op_name(op), a, b);
  check_same_dtype(binary_op_name(op), a, y);
  dispatch_dtype(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* py = y.data<T>();
    for_each_broadcast(a.shape(), b.shape(), ys, [&](int64_t i, int64_t ia, int64_t ib) { py[i] = binary_value(op, pa[ia], pb[ib]); });
  });
}

void binary_backward_ref(BinaryOp op, const Shape& a_shape, const Shape& b_shape, const Tensor* a, const Tensor* b,
                         const Tensor& dy, Tensor* da, Tensor* db) {
  const Shape ys = broadcast_shape(a_shape, b_shape, binary_op_name(op));
  check_shape(binary_op_name(op), "dy", dy, ys);
  if (da) check_shape(binary_op_name(op), "da", *da, a_shape);
  if (db) check_shape(binary_op_name(op), "db", *db, b_shape);
  if (op == BinaryOp::mul) {  // the only op whose gradients read the operands
    check(a && b, "mul backward: the operands are needed");
    check_shape("mul", "a", *a, a_shape);
    check_shape("mul", "b", *b, b_shape);
  }
  dispatch_dtype(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* pa = op == BinaryOp::mul ? a->data<T>() : nullptr;
    const T* pb = op == BinaryOp::mul ? b->data<T>() : nullptr;
    const T* g = dy.data<T>();
    T* ga = da ? da->data<T>() : nullptr;
    T* gb = db ? db->data<T>() : nullptr;
    if (ga) std::fill(ga, ga + da->numel(), T(0));
    if (gb) std::fill(gb, gb + db->numel(), T(0));
    for_each_broadcast(a_shape, b_shape, ys, [&](int64_t i, int64_t ia, int64_t ib) {
      switch (op) {
        case BinaryOp::add:
          if (ga) ga[ia] += g[i];
          if (gb) gb[ib] += g[i];
          break;
        case BinaryOp::sub:
          if (ga) ga[ia] += g[i];
          if (gb) gb[ib] -= g[i];
          break;
        case BinaryOp::mul:
          if (ga) ga[ia] += g[i] * pb[ib];
          if (gb) gb[ib] += g[i] * pa[ia];
          break;
      }
    });
  });
}

void concat_forward_ref(int axis, const std::vector<const Tensor*>& xs, Tensor& y) {
  std::vector<Shape> shapes;
  for (const Tensor* x : xs) shapes.push_back(x->shape());
  check_shape("concat", "y", y, concat_shape(shapes, axis, "concat"));
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= y.dim(i);
  for (int i = axis + 1; i < y.rank(); ++i) inner *= y.dim(i);
  dispatch_dtype(y.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* py = y.data<T>();
    const int64_t row = y.dim(axis) * inner;
    int64_t at = 0;
    for (const Tensor* x : xs) {
      check_same_dtype("concat", *x, y);
      const int64_t len = x->dim(axis) * inner;
      const T* px = x->data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < len; ++j) py[o * row + at + j] = px[o * len + j];
      at += len;
    }
  });
}

void concat_backward_ref(int axis, const Tensor& dy, const std::vector<Tensor*>& dxs) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= dy.dim(i);
  for (int i = axis + 1; i < dy.rank(); ++i) inner *= dy.dim(i);
  dispatch_dtype(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g = dy.data<T>();
    const int64_t row = dy.dim(axis) * inner;
    int64_t at = 0;
    for (Tensor* dx : dxs) {
      const int64_t len = dx->dim(axis) * inner;
      check(at + len <= row, "concat backward: the inputs' gradients are wider than dy");
      T* px = dx->data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < len; ++j) px[o * len + j] = g[o * row + at + j];
      at += len;
    }
    check(at == row, "concat backward: the inputs' gradients do not fill dy's axis");
  });
}

void register_binary_ref(KernelRegistry& reg) {
  BinaryKernel k;
  k.name = "reference";
  k.supports_doc = "every broadcast, float32 and float64";
  k.supports = [](const BinaryParams&, DType) { return true; };
  k.forward = [](const BinaryParams& p, const Tensor& a, const Tensor& b, Tensor& y) { binary_forward_ref(p.op, a, b, y); };
  reg.binary.at(KernelBackend::reference) = k;
}

}  // namespace driftlab
