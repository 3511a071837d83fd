#include "core/ops/binary.h"

#include "core/error.h"

namespace driftlab {

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
  }
  fail("binary_op_name: unknown op ", static_cast<int>(op));
}

Shape broadcast_shape(const Shape& a, const Shape& b, const std::string& who) {
  const std::size_t r = std::max(a.size(), b.size());
  Shape y(r);
  for (std::size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (!(da == db || da == 1 || db == 1))
      fail(who, ": shapes ", shape_str(a), " and ", shape_str(b), " do not broadcast (axis ", i, ": ", da, " vs ", db,
           ")");
    y[i] = da == 1 ? db : da;
  }
  return y;
}

Shape concat_shape(const std::vector<Shape>& xs, int axis, const std::string& who, int shown_axis) {
  if (shown_axis < 0) shown_axis = axis;
  check(!xs.empty(), who, ": concat of no inputs");
  const Shape& first = xs[0];
  check(axis >= 0 && axis < static_cast<int>(first.size()), who, ": concat axis ", axis, " outside rank ",
        first.size());
  Shape y = first;
  y[axis] = 0;
  for (const Shape& s : xs) {
    bool same = s.size() == first.size();
    for (std::size_t i = 0; same && i < s.size(); ++i) same = static_cast<int>(i) == axis || s[i] == first[i];
    check(same, who, ": concat inputs ", shape_str(first), " and ", shape_str(s), " differ outside axis ", shown_axis,
          " (per-sample shapes)");
    y[axis] += s[axis];
  }
  return y;
}

}  // namespace driftlab
