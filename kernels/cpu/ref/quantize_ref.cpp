// Reference quantize and dequantize: x float32 <-> q int8|uint8|int32 of one shape, per tensor or
// per channel of p.axis, every element written (=). One thread, one loop: each element is
// quantize_one() / dequantize_one() of core/ops/quantize.h, shared with every other backend, so
// the fast and CUDA kernels (kernels/cpu/fast/quantize_fast.cpp, kernels/cuda/quantize.cu) must
// match these bytes.
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/quant_loops.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

namespace {

using quant_loops::check_tensor;

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

}  // namespace

void quantize_forward_ref(const QuantizeParams& p, const Tensor& x, Tensor& q) { quantize_ref(p, x, q); }
void dequantize_forward_ref(const QuantizeParams& p, const Tensor& q, Tensor& x) { dequantize_ref(p, q, x); }

void register_quantize_ref(KernelRegistry& reg) {
  reg.quantize.at(KernelBackend::reference) = {"reference", "per tensor and per channel; int8, uint8, int32",
                                               [](const QuantizeParams&, DType) { return true; },
                                               quantize_forward_ref, dequantize_forward_ref};
}

}  // namespace driftlab
