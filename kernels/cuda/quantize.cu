// quantize_own / dequantize_own (kernels/cuda/ops.h): float32 x -> q int8|uint8|int32 and back,
// per tensor or per channel of p.axis, one element per thread, every element written (=). Each
// element is quantize_one() / dequantize_one() of core/ops/quantize.h, as in the reference
// (kernels/cpu/ref/quantize_ref.cpp): its bytes.
// Built with -fmad=false, as every own int8 kernel file (CMakeLists.txt): no multiply-add fusion,
// so each float operation rounds as on the CPU (built with -ffp-contract=off).
#include "kernels/cuda/quant_common.cuh"

namespace driftlab {
namespace cuda {
namespace {

using quant_common::check_dev;
using quant_common::stream_of;

// Channel of flat element i along p.axis (per tensor: one channel), the reference's ChannelOf.
struct QChannelDims {
  long long inner = 1, count = 1;
};
QChannelDims channel_dims(const char* op, const QuantizeParams& p, const Shape& s) {
  QChannelDims c;
  if (p.axis < 0) return c;
  check(p.axis < static_cast<int>(s.size()), op, ": axis ", p.axis, " of a rank-", s.size(), " tensor");
  c.count = s[p.axis];
  check(static_cast<int64_t>(p.scale.size()) == c.count, op, ": ", p.scale.size(), " scales for ", c.count,
        " channels on axis ", p.axis);
  for (std::size_t d = p.axis + 1; d < s.size(); ++d) c.inner *= s[d];
  return c;
}

struct QuantizeScalars {
  ScaleOp op;
  RoundRule round;
  int32_t qmin, qmax;
};

template <typename Q>
__global__ void quantize_kernel(long long n, QChannelDims cd, QuantizeScalars k, const float* __restrict__ scale,
                                const float* __restrict__ inv, const int* __restrict__ zp, const float* __restrict__ x,
                                Q* __restrict__ q) {
  DL_GRID_STRIDE(i, n) {
    const long long c = cd.count == 1 ? 0 : (i / cd.inner) % cd.count;
    q[i] = static_cast<Q>(quantize_one(x[i], scale[c], inv[c], zp[c], k.op, k.round, k.qmin, k.qmax));
  }
}

template <typename Q>
__global__ void dequantize_kernel(long long n, QChannelDims cd, const float* __restrict__ scale,
                                  const int* __restrict__ zp, const Q* __restrict__ q, float* __restrict__ x) {
  DL_GRID_STRIDE(i, n) {
    const long long c = cd.count == 1 ? 0 : (i / cd.inner) % cd.count;
    x[i] = dequantize_one(static_cast<int32_t>(q[i]), zp[c], scale[c]);
  }
}

template <typename F>
void dispatch_q(DType t, const char* op, F&& f) {
  if (t == DType::i8) return f(int8_t{});
  if (t == DType::u8) return f(uint8_t{});
  if (t == DType::i32) return f(int32_t{});
  fail(op, ": ", dtype_name(t), " is not a quantized dtype (int8, uint8, int32)");
}

}  // namespace

void quantize_own(CudaContext& ctx, const QuantizeParams& p, const DeviceTensor& x, DeviceTensor& q) {
  p.validate("quantize_own");
  check_dev("quantize_own", "input", x, x.shape(), DType::f32);
  check_dev("quantize_own", "output", q, x.shape(), p.dtype);
  const QChannelDims cd = channel_dims("quantize_own", p, x.shape());
  if (x.numel() == 0) return;
  std::vector<float> inv(p.scale.size());
  for (std::size_t c = 0; c < inv.size(); ++c) inv[c] = 1.0f / p.scale[c];  // float32, as the reference forms it
  const DeviceBytes scale = bytes_to_device(ctx, p.scale.data(), p.scale.size() * sizeof(float));
  const DeviceBytes inv_d = bytes_to_device(ctx, inv.data(), inv.size() * sizeof(float));
  const DeviceBytes zp = bytes_to_device(ctx, p.zero_point.data(), p.zero_point.size() * sizeof(int32_t));
  const QuantizeScalars k{p.op, p.round, p.qmin, p.qmax};
  dispatch_q(p.dtype, "quantize_own", [&](auto tag) {
    using Q = decltype(tag);
    quantize_kernel<Q><<<dl_blocks(x.numel(), 256), 256, 0, stream_of(ctx)>>>(
        x.numel(), cd, k, static_cast<const float*>(scale.get()), static_cast<const float*>(inv_d.get()),
        static_cast<const int*>(zp.get()), x.data<float>(), q.data<Q>());
    DL_CUDA_LAUNCH_CHECK("quantize_kernel");
  });
}

void dequantize_own(CudaContext& ctx, const QuantizeParams& p, const DeviceTensor& q, DeviceTensor& x) {
  p.validate("dequantize_own");
  check_dev("dequantize_own", "input", q, q.shape(), p.dtype);
  check_dev("dequantize_own", "output", x, q.shape(), DType::f32);
  const QChannelDims cd = channel_dims("dequantize_own", p, q.shape());
  if (q.numel() == 0) return;
  const DeviceBytes scale = bytes_to_device(ctx, p.scale.data(), p.scale.size() * sizeof(float));
  const DeviceBytes zp = bytes_to_device(ctx, p.zero_point.data(), p.zero_point.size() * sizeof(int32_t));
  dispatch_q(p.dtype, "dequantize_own", [&](auto tag) {
    using Q = decltype(tag);
    dequantize_kernel<Q><<<dl_blocks(q.numel(), 256), 256, 0, stream_of(ctx)>>>(
        q.numel(), cd, static_cast<const float*>(scale.get()), static_cast<const int*>(zp.get()), q.data<Q>(),
        x.data<float>());
    DL_CUDA_LAUNCH_CHECK("dequantize_kernel");
  });
}

}  // namespace cuda
}  // namespace driftlab
