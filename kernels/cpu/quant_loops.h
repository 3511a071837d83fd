// Shared by the reference and fast int8 kernels (kernels/cpu/ref/quant_ref.cpp,
// kernels/cpu/fast/quant_fast.cpp).
#pragma once
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

}  // namespace quant_loops
}  // namespace driftlab
