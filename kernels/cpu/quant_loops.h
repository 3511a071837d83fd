// Shared by the reference and fast int8 kernels (kernels/cpu/ref/q*_ref.cpp, quantize_ref.cpp;
// kernels/cpu/fast/q*_fast.cpp, quantize_fast.cpp): the dtype dispatch, the tensor checks with
// the reference's messages, and the reference's int16 pair sums (DotRule, core/ops/requant.h).
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"

namespace driftlab {
namespace quant_loops {

// Calls f(TX{}, TY{}) with the input and output integer types (int8 or uint8 each); any other
// dtype is refused naming the op.
template <typename F>
void dispatch_xy(DType xt, DType yt, const char* op, F&& f) {
  auto out = [&](auto xtag) {
    if (yt == DType::u8) return f(xtag, uint8_t{});
    if (yt == DType::i8) return f(xtag, int8_t{});
    fail(op, ": output dtype ", dtype_name(yt), " (int8 or uint8)");
  };
  if (xt == DType::u8) return out(uint8_t{});
  if (xt == DType::i8) return out(int8_t{});
  fail(op, ": input dtype ", dtype_name(xt), " (int8 or uint8)");
}

// The checks of every int8 entry point (the reference's messages).
inline void check_tensor(const char* op, const char* name, const Tensor& t, const Shape& shape, DType dtype) {
  check(t.dtype() == dtype, op, ": ", name, " is ", dtype_name(t.dtype()), ", expected ", dtype_name(dtype));
  check_shape(op, name, t, shape);
}

inline void check_q_io(const char* op, DType x_dtype, DType y_dtype, const Tensor& x, const Shape& xs, const Tensor& w,
                       const Shape& ws, const Tensor* bias, int64_t k, bool has_bias, const Tensor& y, const Shape& ys) {
  check_tensor(op, "input", x, xs, x_dtype);
  check_tensor(op, "weight", w, ws, DType::i8);
  check((bias != nullptr) == has_bias, op, ": params say ", has_bias ? "a" : "no", " bias, the call passes ",
        bias ? "one" : "none");
  if (bias) check_tensor(op, "bias", *bias, {k}, DType::i32);
  check_tensor(op, "output", y, ys, y_dtype);
}

inline bool is_q8(DType t) { return t == DType::u8 || t == DType::i8; }

constexpr int64_t kChunk = 4096;  // elements per OpenMP work item (the fast kernels)

// DotRule's int16 pairs: the products of stored uint8 values (int8 activations shifted to uint8 +
// 128, as ONNX Runtime's x86 QDQ rewrite runs them) and int8 weights, added two at a time into an
// int16 with saturation (VPMADDUBSW), the pairs added in int32; zp_u * sum(w) of the terms
// subtracted at the end. end_group() closes a pair early (a lone last term pairs with nothing).
class Int16Pairs {
 public:
  void add(int32_t u, int32_t w) {
    wsum_ += static_cast<uint32_t>(w);
    if (open_) {
      acc_ += static_cast<uint32_t>(std::min<int32_t>(32767, std::max<int32_t>(-32768, first_ + u * w)));
      open_ = false;
    } else {
      first_ = u * w, open_ = true;
    }
  }
  void end_group() {
    if (open_) acc_ += static_cast<uint32_t>(first_);  // one product fits int16's range: |255 * 128| < 2^15
    open_ = false;
  }
  int32_t result(int32_t zp_u) {
    end_group();
    return static_cast<int32_t>(acc_ - static_cast<uint32_t>(zp_u) * wsum_);  // wraps as int32 would
  }

 private:
  uint32_t acc_ = 0, wsum_ = 0;
  int32_t first_ = 0;
  bool open_ = false;
};
inline int32_t stored_u8(uint8_t v) { return v; }
inline int32_t stored_u8(int8_t v) { return static_cast<int32_t>(v) + 128; }

}  // namespace quant_loops
}  // namespace driftlab
