// Element-wise binary ops under NumPy broadcasting (ONNX Add, Sub, Mul: "multidirectional
// broadcasting", onnx/docs/Broadcasting.md) and concatenation along one axis.
//   add: y = a + b;  sub: y = a - b;  mul: y = a * b, each element computed once in T.
// Broadcasting aligns the shapes at their last axes; an axis of size 1 (or a missing leading
// axis) repeats. The backward of an operand is dy (times the other operand for mul, negated for
// sub's b) summed over the axes it was repeated along, in ascending order of the output's flat
// index (the reference's fixed order).
// concat: y = [x_0, x_1, ...] along `axis`; the backward slices dy back.
// forward writes y (=); backward writes da, db, dx_i (=).
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace driftlab {

enum class BinaryOp { add, sub, mul };
const char* binary_op_name(BinaryOp op);

// The broadcast shape of a and b; throws naming `who` and both shapes when they do not broadcast.
Shape broadcast_shape(const Shape& a, const Shape& b, const std::string& who);

// The elementwise formula, one element at a time (every kernel of the op calls it).
template <typename T>
inline T binary_value(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: break;
  }
  return a * b;
}

// The registry's binary forward (a graph's add, sub, mul). The backward stays the reference's.
struct BinaryParams {
  BinaryOp op = BinaryOp::add;
  Shape a, b;  // the operands' shapes (broadcast as above)
};
struct BinaryKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const BinaryParams&, DType) = nullptr;
  void (*forward)(const BinaryParams&, const Tensor& a, const Tensor& b, Tensor& y) = nullptr;
  // Whether forward takes a, b and y channel-blocked alike (engine/layers/layout.h) where it
  // supports the call: an op of operands of one shape is the same per element in any storage order.
  bool any_block = false;
};

// The shape y of concatenating shapes along `axis` (all other axes equal); throws naming `who`
// and the axis as `shown_axis` (the caller's numbering, e.g. counting a batch axis; -1: `axis`).
Shape concat_shape(const std::vector<Shape>& xs, int axis, const std::string& who, int shown_axis = -1);

}  // namespace driftlab
