// Reference dynamic-range dense kernel (engine/ops/quant_dynamic.h): choose the input's
// quantization from its values, quantize it, sum (x_q - zp) * w_q exactly in int32, then form the
// float output by the params' rule. One thread, plain loops; the rounding is engine/ops/quant.h's.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/core/error.h"
#include "engine/ops/quant_dynamic.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

namespace {

void check_f32(const char* name, const Tensor& t, const Shape& shape) {
  check(t.dtype() == DType::f32, "qdense_dynamic: ", name, " is ", dtype_name(t.dtype()), ", expected float32");
  check_shape("qdense_dynamic", name, t, shape);
}

void qdense_dynamic_ref(const QDenseDynamicParams& p, const Tensor& x, const Tensor& w, const Tensor& w_scale,
                        const Tensor* bias, Tensor& y) {
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

  const float* xs = x.data<float>();
  const DynInputQ q = choose_dynamic_input_q(p, xs);
  // The input's integers minus its zero point (exact: both are small integers).
  std::vector<int32_t> xq(static_cast<std::size_t>(p.n * p.in));
  for (int64_t r = 0; r < p.n; ++r) {
    const float s = q.scale_of(r);
    const int32_t zp = q.zero_point_of(r);
    for (int64_t k = 0; k < p.in; ++k) {
      const float v = xs[r * p.in + k];
      int32_t iv;
      switch (p.act) {
        case DynActRule::symmetric_per_row:
          iv = quantize_one(v, s, q.inv_of(r), 0, ScaleOp::mul_reciprocal, p.x_round, -p.qmax, p.qmax);
          break;
        case DynActRule::affine_per_row: {  // round(zp + x * (1/s)): the zero point before the rounding
          float f = round_with(static_cast<float>(zp) + v * q.inv_of(r), p.x_round);
          f = std::min(std::max(f, static_cast<float>(p.qmin)), static_cast<float>(p.qmax));
          iv = static_cast<int32_t>(f);
          break;
        }
        default: iv = quantize_one(v, s, q.inv_of(r), zp, p.x_op, p.x_round, 0, 255);
      }
      xq[static_cast<std::size_t>(r * p.in + k)] = iv - zp;
    }
  }
  const int8_t* ws = w.data<int8_t>();
  const float* sw = w_scale.data<float>();
  const float* b = bias ? bias->data<float>() : nullptr;
  float* ys = y.data<float>();
  for (int64_t r = 0; r < p.n; ++r)
    for (int64_t c = 0; c < p.out; ++c) {
      int32_t acc = 0;
      for (int64_t k = 0; k < p.in; ++k) acc += xq[static_cast<std::size_t>(r * p.in + k)] * ws[c * p.in + k];
      const float s_x = q.scale_of(r), s_w = w_scale.numel() == 1 ? sw[0] : sw[c];
      const float facc = static_cast<float>(acc);
      float v;
      if (p.out_rule == DynOutRule::scale_then_bias) {
        const float m = s_x * s_w;
        v = facc * m;
        if (b) v = v + b[c];
      } else {
        const float bs = (1.0f / s_x) * (1.0f / s_w);
        v = b ? (facc + b[c] * bs) * (1.0f / bs) : facc * (1.0f / bs);
      }
      ys[r * p.out + c] = v;
    }
}

}  // namespace

void register_quant_dynamic_ref(KernelRegistry& reg) {
  reg.qdense_dynamic.at(KernelBackend::reference) = {
      "reference", "every params field", [](const QDenseDynamicParams&, DType) { return true; }, qdense_dynamic_ref};
}

}  // namespace driftlab
