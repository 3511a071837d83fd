// Reference dynamic-range dense kernel (core/ops/quant_dynamic.h): choose the input's
// quantization from its values, quantize it, sum (x_q - zp) * w_q exactly in int32, then form the
// float output by the params' rule. One thread, plain loops; the per-element formulas are
// kernels/cpu/quant_dynamic_loops.h's (shared with the fast kernel), the rounding core/ops/requant.h's.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/ops/quant_dynamic.h"
#include "kernels/cpu/quant_dynamic_loops.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

namespace {

using quant_dynamic_loops::output_one;
using quant_dynamic_loops::quantize_input_one;

// x:(n,in) w:(out,in) w_scale:(1)|(out) bias:(out)|null -> y:(n,out)
void qdense_dynamic_ref(const QDenseDynamicParams& p, const Tensor& x, const Tensor& w, const Tensor& w_scale,
                        const Tensor* bias, Tensor& y) {
  quant_dynamic_loops::check_call(p, x, w, w_scale, bias, y);
  const float* xs = x.data<float>();
  const DynInputQ q = choose_dynamic_input_q(p, xs);
  // The input's integers minus its zero point (exact: both are small integers).
  std::vector<int32_t> xq(static_cast<std::size_t>(p.n * p.in));
  for (int64_t r = 0; r < p.n; ++r) {
    const float s = q.scale_of(r), inv = q.inv_of(r);
    const int32_t zp = q.zero_point_of(r);
    for (int64_t k = 0; k < p.in; ++k)
      xq[static_cast<std::size_t>(r * p.in + k)] = quantize_input_one(p, xs[r * p.in + k], s, inv, zp) - zp;
  }
  const int8_t* ws = w.data<int8_t>();
  const float* sw = w_scale.data<float>();
  const float* b = bias ? bias->data<float>() : nullptr;
  float* ys = y.data<float>();
  for (int64_t r = 0; r < p.n; ++r)
    for (int64_t c = 0; c < p.out; ++c) {
      int32_t acc = 0;
      for (int64_t k = 0; k < p.in; ++k) acc += xq[static_cast<std::size_t>(r * p.in + k)] * ws[c * p.in + k];
      ys[r * p.out + c] =
          output_one(p.out_rule, acc, q.scale_of(r), w_scale.numel() == 1 ? sw[0] : sw[c], b ? b + c : nullptr);
    }
}

}  // namespace

void register_quant_dynamic_ref(KernelRegistry& reg) {
  reg.qdense_dynamic.at(KernelBackend::reference) = {
      "reference", "every params field", [](const QDenseDynamicParams&, DType) { return true; }, qdense_dynamic_ref};
}

}  // namespace driftlab
