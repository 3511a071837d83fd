// Reference qconv2d: x (N,C,H,W) int8|uint8, w (K,C/G,R,S) int8, bias (K) int32 | null ->
// y (N,K,P,Q) int8|uint8, every output written (=); G groups (output channel k reads input
// channels [g*C/G, (g+1)*C/G) of its group g = k / (K/G); depthwise: G = C). One thread, loops in the plainest order; every
// sum is of integers in int32 and therefore exact in any order, so the fast and CUDA kernels
// (kernels/cpu/fast/qconv2d_fast.cpp, kernels/cuda/qconv2d.cu) must match these bytes. The
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
using quant_loops::Int16Pairs;
using quant_loops::stored_u8;

template <typename TX, typename TY>
void qconv_loops(const QConv2dParams& p, const TX* x, const int8_t* w, const int32_t* bias, TY* y) {
  const Conv2dParams& g = p.g;
  const int32_t zp_u = p.x_zero_point + (std::is_same<TX, int8_t>::value ? 128 : 0);  // the int16 pairs' zero point
  const int64_t P = g.out_h(), Q = g.out_w();
  const int64_t cpg = g.c_per_group(), kpg = g.k / g.groups;
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t k = 0; k < g.k; ++k) {
      const RequantChannel& rc = p.rq.channel(k);
      const int64_t c0 = (k / kpg) * cpg;  // the group's first input channel
      for (int64_t oh = 0; oh < P; ++oh)
        for (int64_t ow = 0; ow < Q; ++ow) {
          int32_t acc = 0;
          if (p.dot == DotRule::exact) {
            for (int64_t c = 0; c < cpg; ++c)
              for (int64_t r = 0; r < g.r; ++r)
                for (int64_t s = 0; s < g.s; ++s) {
                  const int64_t ih = oh * g.stride_h - g.pad_t + r * g.dil_h;
                  const int64_t iw = ow * g.stride_w - g.pad_l + s * g.dil_w;
                  if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;  // padding: x_zp - x_zp = 0
                  const int32_t xv =
                      static_cast<int32_t>(x[((n * g.c + c0 + c) * g.h + ih) * g.w + iw]) - p.x_zero_point;
                  acc += xv * static_cast<int32_t>(w[((k * cpg + c) * g.r + r) * g.s + s]);
                }
          } else {
            // int16 pairs of stored values (uint8; int8 shifted to uint8 + 128), zp * sum(w) after: the
            // terms walked in the rule's order, each pair's sum saturated to int16
            const bool hwc = p.dot == DotRule::int16_pairs_hwc;
            Int16Pairs pairs;
            for (int64_t r = 0; r < g.r; ++r)
              for (int64_t s = 0; s < g.s; ++s) {
                const int64_t ih = oh * g.stride_h - g.pad_t + r * g.dil_h;
                const int64_t iw = ow * g.stride_w - g.pad_l + s * g.dil_w;
                const bool pad = ih < 0 || ih >= g.h || iw < 0 || iw >= g.w;
                if (pad && !hwc) continue;  // channel pairs: a padding tap adds nothing
                for (int64_t c = 0; c < cpg; ++c)  // hwc: a padding tap reads the zero point
                  pairs.add(pad ? zp_u : stored_u8(x[((n * g.c + c0 + c) * g.h + ih) * g.w + iw]),
                            w[((k * cpg + c) * g.r + r) * g.s + s]);
                if (!hwc) pairs.end_group();  // channel pairs never span two taps
              }
            acc = pairs.result(zp_u);
          }
          if (bias) acc += bias[k];
          y[((n * g.k + k) * P + oh) * Q + ow] = static_cast<TY>(
              requantize_one(acc, rc, p.rq.rule, p.rq.round, p.rq.zero_point, p.rq.lo, p.rq.hi));
        }
    }
}

using quant_loops::dispatch_xy;

void qconv2d_forward_ref_impl(const QConv2dParams& p, const Tensor& x, const Tensor& w, const Tensor* bias,
                              Tensor& y) {
  p.validate();
  check_q_io("qconv2d", p.x_dtype, p.y_dtype, x, p.g.x_shape(), w, p.g.w_shape(), bias, p.g.k, p.has_bias, y,
             p.g.y_shape());
  dispatch_xy(p.x_dtype, p.y_dtype, "qconv2d", [&](auto xt, auto yt) {
    using TX = decltype(xt);
    using TY = decltype(yt);
    qconv_loops(p, x.data<TX>(), w.data<int8_t>(), bias ? bias->data<int32_t>() : nullptr, y.data<TY>());
  });
}

}  // namespace

void qconv2d_forward_ref(const QConv2dParams& p, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  qconv2d_forward_ref_impl(p, x, w, bias, y);
}

void register_qconv2d_ref(KernelRegistry& reg) {
  const char* doc = "every params field; int8 and uint8 activations, int8 weights, int32 bias";
  reg.qconv2d.at(KernelBackend::reference) = {"reference", doc, [](const QConv2dParams&, DType) { return true; },
                                              qconv2d_forward_ref};
}

}  // namespace driftlab
