// Shared by the reference and fast dynamic-range dense kernels (kernels/cpu/ref/quant_dynamic_ref.cpp,
// kernels/cpu/fast/quant_dynamic_fast.cpp): the call's checks and the two per-element formulas of
// core/ops/quant_dynamic.h, written once. The fast kernel's AVX-512 path restates these two formulas
// with intrinsics, the same float32 operations in the same order; its tests hold it to these bits.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "core/ops/quant_dynamic.h"

namespace driftlab {
namespace quant_dynamic_loops {

// The checks every qdense_dynamic kernel makes, with the reference's messages.
inline void check_call(const QDenseDynamicParams& p, const Tensor& x, const Tensor& w, const Tensor& w_scale,
                       const Tensor* bias, const Tensor& y) {
  auto check_f32 = [](const char* name, const Tensor& t, const Shape& shape) {
    check(t.dtype() == DType::f32, "qdense_dynamic: ", name, " is ", dtype_name(t.dtype()), ", expected float32");
    check_shape("qdense_dynamic", name, t, shape);
  };
  p.validate();
  check_f32("input", x, {p.n, p.in});
  check(w.dtype() == DType::i8, "qdense_dynamic: weight is ", dtype_name(w.dtype()), ", expected int8");
  check_shape("qdense_dynamic", "weight", w, {p.out, p.in});
  check(w_scale.dtype() == DType::f32 && (w_scale.numel() == 1 || w_scale.numel() == p.out),
        "qdense_dynamic: weight scales must be float32, one or one per output (", p.out, "), got ",
        dtype_name(w_scale.dtype()), " ", shape_str(w_scale.shape()));
  check(p.has_bias == (bias != nullptr), "qdense_dynamic: has_bias is ", p.has_bias, " but a bias was",
        bias ? "" : " not", " given");
  if (bias) check_f32("bias", *bias, {p.out});
  check_f32("output", y, {p.n, p.out});
}

// The input's integer for value v of a row quantized with scale s, multiplier inv (DynInputQ::inv_of)
// and zero point zp: int8 for the per-row rules, uint8 for the affine ones.
inline int32_t quantize_input_one(const QDenseDynamicParams& p, float v, float s, float inv, int32_t zp) {
  switch (p.act) {
    case DynActRule::symmetric_per_row:
      return quantize_one(v, s, inv, 0, ScaleOp::mul_reciprocal, p.x_round, -p.qmax, p.qmax);
    case DynActRule::affine_per_row: {  // round(zp + x * (1/s)): the zero point before the rounding
      float f = round_with(static_cast<float>(zp) + v * inv, p.x_round);
      f = std::min(std::max(f, static_cast<float>(p.qmin)), static_cast<float>(p.qmax));
      return static_cast<int32_t>(f);
    }
    default: return quantize_one(v, s, inv, zp, p.x_op, p.x_round, 0, 255);
  }
}

// The float output of the exact int32 sum acc (input scale s_x, weight scale s_w, bias b or null).
inline float output_one(DynOutRule rule, int32_t acc, float s_x, float s_w, const float* b) {
  const float facc = static_cast<float>(acc);
  if (rule == DynOutRule::scale_then_bias) {
    const float m = s_x * s_w;
    const float v = facc * m;
    return b ? v + *b : v;
  }
  const float bs = (1.0f / s_x) * (1.0f / s_w);
  return b ? (facc + *b * bs) * (1.0f / bs) : facc * (1.0f / bs);
}

}  // namespace quant_dynamic_loops
}  // namespace driftlab
