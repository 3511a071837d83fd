// Reference qdense: x (n,in) int8|uint8, w (out,in) int8, bias (out) int32 | null -> y (n,out)
// int8|uint8, every output written (=). One thread, loops in the plainest order; every sum is of
// integers in int32 and therefore exact in any order, so the fast and CUDA kernels
// (kernels/cpu/fast/qdense_fast.cpp, kernels/cuda/qdense.cu) must match these bytes. The
// requantization is requantize_one() of core/ops/requant.h, shared with every other backend; the
// int16 pair rules (DotRule) are kernels/cpu/quant_loops.h's Int16Pairs.
#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "kernels/cpu/quant_loops.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

namespace {

using quant_loops::check_q_io;
using quant_loops::dispatch_xy;
using quant_loops::Int16Pairs;
using quant_loops::stored_u8;

void qdense_forward_ref_impl(const QDenseParams& p, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  p.validate();
  check_q_io("qdense", p.x_dtype, p.y_dtype, x, {p.n, p.in}, w, {p.out, p.in}, bias, p.out, p.has_bias, y,
             {p.n, p.out});
  dispatch_xy(p.x_dtype, p.y_dtype, "qdense", [&](auto xt, auto yt) {
    using TX = decltype(xt);
    using TY = decltype(yt);
    const TX* xs = x.data<TX>();
    const int8_t* ws = w.data<int8_t>();
    const int32_t* bs = bias ? bias->data<int32_t>() : nullptr;
    TY* ys = y.data<TY>();
    for (int64_t i = 0; i < p.n; ++i)
      for (int64_t o = 0; o < p.out; ++o) {
        int32_t acc = 0;
        const TX* xr = xs + i * p.in;
        const int8_t* wr = ws + o * p.in;
        if (p.dot == DotRule::exact) {
          for (int64_t j = 0; j < p.in; ++j) acc += (static_cast<int32_t>(xr[j]) - p.x_zero_point) * static_cast<int32_t>(wr[j]);
        } else {  // int16 pairs of stored values, inputs 2j and 2j+1 (both rules), zp * sum(w) after
          const int32_t zp_u = p.x_zero_point + (std::is_same<TX, int8_t>::value ? 128 : 0);
          Int16Pairs pairs;
          for (int64_t j = 0; j < p.in; ++j) pairs.add(stored_u8(xr[j]), wr[j]);
          acc = pairs.result(zp_u);
        }
        if (bs) acc += bs[o];
        ys[i * p.out + o] = static_cast<TY>(
            requantize_one(acc, p.rq.channel(o), p.rq.rule, p.rq.round, p.rq.zero_point, p.rq.lo, p.rq.hi));
      }
  });
}

}  // namespace

void qdense_forward_ref(const QDenseParams& p, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  qdense_forward_ref_impl(p, x, w, bias, y);
}

void register_qdense_ref(KernelRegistry& reg) {
  const char* doc = "every params field; int8 and uint8 activations, int8 weights, int32 bias";
  reg.qdense.at(KernelBackend::reference) = {"reference", doc, [](const QDenseParams&, DType) { return true; },
                                             qdense_forward_ref};
}

}  // namespace driftlab
