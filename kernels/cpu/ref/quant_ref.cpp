// Reference integer kernels: quantize, dequantize, quantized conv2d / dense / max pooling. One
// thread, loops in the plainest order; every sum is of integers in int32 and therefore exact in
// any order, so the fast kernels (kernels/cpu/fast/quant_fast.cpp, kernels/cuda) must match these bit
// for bit. The rounding and requantization rules are the DL_HOST_DEVICE functions of
// core/ops/quant.h, shared with every other backend.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "kernels/cpu/pool2d_loops.h"
#include "kernels/cpu/quant_loops.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

namespace {

template <typename F>
void dispatch_q(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::i8: f(int8_t{}); return;
    case DType::u8: f(uint8_t{}); return;
    case DType::i32: f(int32_t{}); return;
    case DType::f32:
    case DType::f64:
    case DType::i64: break;
  }
  fail(op, ": ", dtype_name(t), " is not a quantized dtype (int8, uint8, int32)");
}

void check_tensor(const char* op, const char* name, const Tensor& t, const Shape& shape, DType dtype) {
  check(t.dtype() == dtype, op, ": ", name, " is ", dtype_name(t.dtype()), ", expected ", dtype_name(dtype));
  check_shape(op, name, t, shape);
}

// Channel of flat element i for a quantize along `axis` (per tensor: 0).
struct ChannelOf {
  int64_t inner = 1, count = 1;
  ChannelOf(const QuantizeParams& p, const Shape& s) {
    if (p.axis < 0) return;
    check(p.axis < static_cast<int>(s.size()), "quantize: axis ", p.axis, " of a rank-", s.size(), " tensor");
    count = s[p.axis];
    check(static_cast<int64_t>(p.scale.size()) == count, "quantize: ", p.scale.size(), " scales for ", count,
          " channels on axis ", p.axis);
    for (std::size_t d = p.axis + 1; d < s.size(); ++d) inner *= s[d];
  }
  int64_t operator()(int64_t i) const { return count == 1 ? 0 : (i / inner) % count; }
};

void quantize_ref(const QuantizeParams& p, const Tensor& x, Tensor& q) {
  p.validate("quantize");
  check_tensor("quantize", "output", q, x.shape(), p.dtype);
  check(x.dtype() == DType::f32, "quantize: input is ", dtype_name(x.dtype()), ", expected float32");
  const ChannelOf ch(p, x.shape());
  std::vector<float> inv(p.scale.size());
  for (std::size_t c = 0; c < inv.size(); ++c) inv[c] = 1.0f / p.scale[c];  // float32, as ATen forms it
  const float* xs = x.data<float>();
  dispatch_q(p.dtype, "quantize", [&](auto tag) {
    using Q = decltype(tag);
    Q* qs = q.data<Q>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t c = ch(i);
      qs[i] = static_cast<Q>(quantize_one(xs[i], p.scale[c], inv[c], p.zero_point[c], p.op, p.round, p.qmin, p.qmax));
    }
  });
}

void dequantize_ref(const QuantizeParams& p, const Tensor& q, Tensor& x) {
  p.validate("dequantize");
  check(q.dtype() == p.dtype, "dequantize: input is ", dtype_name(q.dtype()), ", expected ", dtype_name(p.dtype));
  check_tensor("dequantize", "output", x, q.shape(), DType::f32);
  const ChannelOf ch(p, q.shape());
  float* xs = x.data<float>();
  dispatch_q(p.dtype, "dequantize", [&](auto tag) {
    using Q = decltype(tag);
    const Q* qs = q.data<Q>();
    for (int64_t i = 0; i < q.numel(); ++i) {
      const int64_t c = ch(i);
      xs[i] = dequantize_one(qs[i], p.zero_point[c], p.scale[c]);
    }
  });
}

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

template <typename TX, typename TY>
void qconv_loops(const QConv2dParams& p, const TX* x, const int8_t* w, const int32_t* bias, TY* y) {
  const Conv2dParams& g = p.g;
  const int32_t zp_u = p.x_zero_point + (std::is_same<TX, int8_t>::value ? 128 : 0);  // the int16 pairs' zero point
  const int64_t P = g.out_h(), Q = g.out_w();
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t k = 0; k < g.k; ++k) {
      const RequantChannel& rc = p.rq.channel(k);
      for (int64_t oh = 0; oh < P; ++oh)
        for (int64_t ow = 0; ow < Q; ++ow) {
          int32_t acc = 0;
          if (p.dot == DotRule::exact) {
            for (int64_t c = 0; c < g.c; ++c)
              for (int64_t r = 0; r < g.r; ++r)
                for (int64_t s = 0; s < g.s; ++s) {
                  const int64_t ih = oh * g.stride_h - g.pad_t + r * g.dil_h;
                  const int64_t iw = ow * g.stride_w - g.pad_l + s * g.dil_w;
                  if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;  // padding: x_zp - x_zp = 0
                  const int32_t xv = static_cast<int32_t>(x[((n * g.c + c) * g.h + ih) * g.w + iw]) - p.x_zero_point;
                  acc += xv * static_cast<int32_t>(w[((k * g.c + c) * g.r + r) * g.s + s]);
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
                for (int64_t c = 0; c < g.c; ++c)  // hwc: a padding tap reads the zero point
                  pairs.add(pad ? zp_u : stored_u8(x[((n * g.c + c) * g.h + ih) * g.w + iw]),
                            w[((k * g.c + c) * g.r + r) * g.s + s]);
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

void check_q_io(const char* op, DType x_dtype, DType y_dtype, const Tensor& x, const Shape& xs, const Tensor& w,
                const Shape& ws, const Tensor* bias, int64_t k, bool has_bias, const Tensor& y, const Shape& ys) {
  check_tensor(op, "input", x, xs, x_dtype);
  check_tensor(op, "weight", w, ws, DType::i8);
  check((bias != nullptr) == has_bias, op, ": params say ", has_bias ? "a" : "no", " bias, the call passes ",
        bias ? "one" : "none");
  if (bias) check_tensor(op, "bias", *bias, {k}, DType::i32);
  check_tensor(op, "output", y, ys, y_dtype);
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

void qmaxpool2d_forward_ref_impl(const QPool2dParams& p, const Tensor& x, Tensor& y) {
  p.g.validate();
  check_tensor("qmaxpool2d", "input", x, p.g.x_shape(), p.dtype);
  check_tensor("qmaxpool2d", "output", y, p.g.y_shape(), p.dtype);
  dispatch_xy(p.dtype, p.dtype, "qmaxpool2d", [&](auto xt, auto) {
    using T = decltype(xt);
    const T* xs = x.data<T>();
    T* ys = y.data<T>();
    const int64_t P = p.g.out_h(), Q = p.g.out_w();
    for (int64_t nc = 0; nc < p.g.n * p.g.c; ++nc) {
      const T* xp = xs + nc * p.g.h * p.g.w;
      for (int64_t oh = 0; oh < P; ++oh)
        for (int64_t ow = 0; ow < Q; ++ow) {
          T m = std::numeric_limits<T>::lowest();  // a window wholly in the padding gives the type's minimum
          pool2d_loops::for_window(p.g, oh, ow, [&](int64_t i) { m = std::max(m, xp[i]); });
          ys[(nc * P + oh) * Q + ow] = m;
        }
    }
  });
}

void qadd_ref_impl(const QAddParams& p0, const Tensor& a, const Tensor& b, Tensor& y) {
  QAddParams p = p0;
  p.resolve();
  check(a.shape() == b.shape() && y.shape() == a.shape(), "qadd: shapes ", shape_str(a.shape()), ", ",
        shape_str(b.shape()), " -> ", shape_str(y.shape()), " must agree");
  for (const Tensor* t : {&a, &b, static_cast<const Tensor*>(&y)})
    check(t->dtype() == p.dtype, "qadd: ", dtype_name(t->dtype()), " tensor, expected ", dtype_name(p.dtype));
  const int64_t numel = a.numel();
  const bool nhwc = p.n > 0;
  if (nhwc) check(p.n * p.c * p.h * p.w == numel, "qadd: layout (", p.n, ",", p.c, ",", p.h, ",", p.w, ") for ", numel,
                  " elements");
  const int64_t body = numel - numel % 64;  // ATen's vectorised loop: 64 quint8 values per step
  dispatch_xy(p.dtype, p.dtype, "qadd", [&](auto tag, auto) {
    using T = decltype(tag);
    const T* as = a.data<T>();
    const T* bs = b.data<T>();
    T* ys = y.data<T>();
    const int32_t tmin = std::numeric_limits<T>::min(), tmax = std::numeric_limits<T>::max();
    for (int64_t i = 0; i < numel; ++i)
      ys[i] = static_cast<T>(qadd_one(p, as[i], bs[i], qadd_memory_pos(p, i), body, tmin, tmax));
  });
}

void qgap_ref_impl(const QGlobalAvgPoolParams& p, const Tensor& x, Tensor& y) {
  check_tensor("qglobal_avg_pool", "input", x, {p.n, p.c, p.h, p.w}, p.dtype);
  check_tensor("qglobal_avg_pool", "output", y, {p.n, p.c}, p.dtype);
  const int64_t count = p.h * p.w;
  const QGlobalAvgPoolParams::Resolved r = p.resolve();  // checks count and scales too
  dispatch_xy(p.dtype, p.dtype, "qglobal_avg_pool", [&](auto tag, auto) {
    using T = decltype(tag);
    const T* xs = x.data<T>();
    T* ys = y.data<T>();
    const int32_t qmin = std::numeric_limits<T>::min(), qmax = std::numeric_limits<T>::max();
    for (int64_t nc = 0; nc < p.n * p.c; ++nc) {
      int64_t sum = 0;
      for (int64_t i = 0; i < count; ++i) sum += xs[nc * count + i];
      ys[nc] = static_cast<T>(qgap_one(r, sum, qmin, qmax));
    }
  });
}

}  // namespace

void qadd_forward_ref(const QAddParams& p, const Tensor& a, const Tensor& b, Tensor& y) { qadd_ref_impl(p, a, b, y); }
void qglobal_avg_pool_forward_ref(const QGlobalAvgPoolParams& p, const Tensor& x, Tensor& y) { qgap_ref_impl(p, x, y); }

void quantize_forward_ref(const QuantizeParams& p, const Tensor& x, Tensor& q) { quantize_ref(p, x, q); }
void dequantize_forward_ref(const QuantizeParams& p, const Tensor& q, Tensor& x) { dequantize_ref(p, q, x); }
void qconv2d_forward_ref(const QConv2dParams& p, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  qconv2d_forward_ref_impl(p, x, w, bias, y);
}
void qdense_forward_ref(const QDenseParams& p, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  qdense_forward_ref_impl(p, x, w, bias, y);
}
void qmaxpool2d_forward_ref(const QPool2dParams& p, const Tensor& x, Tensor& y) { qmaxpool2d_forward_ref_impl(p, x, y); }

void register_quant_ref(KernelRegistry& reg) {
  const char* doc = "every params field; int8 and uint8 activations, int8 weights, int32 bias";
  reg.qconv2d.at(KernelBackend::reference) = {"reference", doc, [](const QConv2dParams&, DType) { return true; },
                                              qconv2d_forward_ref};
  reg.qdense.at(KernelBackend::reference) = {"reference", doc, [](const QDenseParams&, DType) { return true; },
                                             qdense_forward_ref};
  reg.qmaxpool2d.at(KernelBackend::reference) = {"reference", "every params field, int8 and uint8",
                                                 [](const QPool2dParams&, DType) { return true; },
                                                 qmaxpool2d_forward_ref};
  reg.qadd.at(KernelBackend::reference) = {"reference", "every params field, int8 and uint8",
                                           [](const QAddParams&, DType) { return true; }, qadd_forward_ref};
  reg.qglobal_avg_pool.at(KernelBackend::reference) = {"reference", "every params field, int8 and uint8",
                                                       [](const QGlobalAvgPoolParams&, DType) { return true; },
                                                       qglobal_avg_pool_forward_ref};
  reg.quantize.at(KernelBackend::reference) = {"reference", "per tensor and per channel; int8, uint8, int32",
                                               [](const QuantizeParams&, DType) { return true; },
                                               quantize_forward_ref, dequantize_forward_ref};
}

}  // namespace driftlab
