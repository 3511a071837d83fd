// Fast quantize and dequantize, per tensor (registry slot `fast`): x float32 <-> q int8|uint8|int32
// of one shape, every element written (=).
//
// Bit-exact with kernels/cpu/ref/quantize_ref.cpp for every call supports() accepts, for any thread
// count: every element goes through the same quantize_one() / dequantize_one() of
// core/ops/quantize.h, the scale op and rounding fixed at compile time so that the loop vectorises,
// which changes no bit: the same float operations, no contraction (-ffp-contract=off).
//
// This file is compiled as if with -fno-trapping-math (the pragma below): GCC 12 vectorises
// std::floor (round_with) only then. It changes no value, only whether FP exception flags may be
// raised differently; -ffp-contract=off and everything else of the build stay as they are.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "kernels/cpu/quant_loops.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

using quant_loops::check_tensor;
using quant_loops::kChunk;

// ---------------------------------------------------------------------------------------------
// quantize / dequantize, per tensor: quantize_one / dequantize_one per element, OpenMP over chunks.

bool quantize_supports(const QuantizeParams& p, DType) { return p.axis < 0 && p.scale.size() == 1; }

template <ScaleOp S, RoundRule RR, typename Q>
void quantize_run(const float* __restrict x, int64_t n, float scale, float inv, int32_t zp, int32_t qmin,
                  int32_t qmax, Q* __restrict q) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<Q>(quantize_one(x[i], scale, inv, zp, S, RR, qmin, qmax));
}

template <typename Q>
using QuantizeRunFn = void (*)(const float*, int64_t, float, float, int32_t, int32_t, int32_t, Q*);

template <typename Q>
QuantizeRunFn<Q> quantize_run_for(ScaleOp op, RoundRule round) {
  const bool even = round == RoundRule::half_even;
  if (op == ScaleOp::divide)
    return even ? quantize_run<ScaleOp::divide, RoundRule::half_even, Q>
                : quantize_run<ScaleOp::divide, RoundRule::half_away, Q>;
  return even ? quantize_run<ScaleOp::mul_reciprocal, RoundRule::half_even, Q>
              : quantize_run<ScaleOp::mul_reciprocal, RoundRule::half_away, Q>;
}

template <typename Q>
void quantize_fast_t(const QuantizeParams& p, const float* x, int64_t n, Q* q) {
  const float scale = p.scale[0], inv = 1.0f / scale;  // float32, as ATen forms it (and the reference)
  const QuantizeRunFn<Q> run = quantize_run_for<Q>(p.op, p.round);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i0 = c * kChunk;
    run(x + i0, std::min(kChunk, n - i0), scale, inv, p.zero_point[0], p.qmin, p.qmax, q + i0);
  }
}

// x: float32, q: p.dtype, same shape
void quantize_forward_fast(const QuantizeParams& p, const Tensor& x, Tensor& q) {
  p.validate("quantize");
  check_tensor("quantize", "output", q, x.shape(), p.dtype);
  check(x.dtype() == DType::f32, "quantize: input is ", dtype_name(x.dtype()), ", expected float32");
  check(quantize_supports(p, x.dtype()), "quantize fast: per tensor only (axis ", p.axis, ")");
  const float* xs = x.data<float>();
  switch (p.dtype) {
    case DType::u8: return quantize_fast_t(p, xs, x.numel(), q.data<uint8_t>());
    case DType::i8: return quantize_fast_t(p, xs, x.numel(), q.data<int8_t>());
    case DType::i32: return quantize_fast_t(p, xs, x.numel(), q.data<int32_t>());
    default: fail("quantize: ", dtype_name(p.dtype), " is not a quantized dtype (int8, uint8, int32)");
  }
}

template <typename Q>
void dequantize_fast_t(const QuantizeParams& p, const Q* __restrict q, int64_t n, float* __restrict x) {
  const int32_t zp = p.zero_point[0];
  const float scale = p.scale[0];
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i1 = std::min(n, (c + 1) * kChunk);
    for (int64_t i = c * kChunk; i < i1; ++i) x[i] = dequantize_one(q[i], zp, scale);
  }
}

// q: p.dtype, x: float32, same shape
void dequantize_forward_fast(const QuantizeParams& p, const Tensor& q, Tensor& x) {
  p.validate("dequantize");
  check(q.dtype() == p.dtype, "dequantize: input is ", dtype_name(q.dtype()), ", expected ", dtype_name(p.dtype));
  check_tensor("dequantize", "output", x, q.shape(), DType::f32);
  check(quantize_supports(p, q.dtype()), "dequantize fast: per tensor only (axis ", p.axis, ")");
  float* xs = x.data<float>();
  switch (p.dtype) {
    case DType::u8: return dequantize_fast_t(p, q.data<uint8_t>(), q.numel(), xs);
    case DType::i8: return dequantize_fast_t(p, q.data<int8_t>(), q.numel(), xs);
    case DType::i32: return dequantize_fast_t(p, q.data<int32_t>(), q.numel(), xs);
    default: fail("dequantize: ", dtype_name(p.dtype), " is not a quantized dtype (int8, uint8, int32)");
  }
}

}  // namespace

void register_quantize_fast(KernelRegistry& reg) {
  reg.quantize.at(KernelBackend::fast) = {"fast", "per tensor; int8, uint8, int32", quantize_supports,
                                          quantize_forward_fast, dequantize_forward_fast};
}

}  // namespace driftlab
