// Shared by the own CUDA int8 kernels (kernels/cuda/qgemm.cu, qconv2d.cu, qdense.cu, qpool.cu,
// quantize.cu, qadd.cu, qrelu.cu, qshortcut.cu; entry points in kernels/cuda/ops.h): the stream,
// the tensor checks with the reference's messages, the int8/uint8 dispatch, a type's minimum on
// the device, and the dp4a implicit GEMM that qconv2d and qdense share (qgemm_run, defined in
// kernels/cuda/qgemm.cu). No launch here: the CUDA emulation (tests/emu/launches_to_calls.cmake)
// rewrites the launches of the .cu files only.
#pragma once
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {
namespace quant_common {

inline cudaStream_t stream_of(CudaContext& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

// The conv as a GEMM: rows m = (n, oh, ow) of the output, columns = output channels k, reduction
// j = (c, r, s) in the weights' order. The dense layer is the 1x1 case (C = in, H = W = 1).
struct QGemmDims {
  long long m, k, j, j4;  // j4 = ceil(j / 4) packed words per row
  long long c, h, w, r, s, p, q;
  long long sh, sw, dh, dw, pt, pl;
};

inline void check_dev(const char* op, const char* name, const DeviceTensor& t, const Shape& shape, DType dtype) {
  check(t.dtype() == dtype, op, ": ", name, " is ", dtype_name(t.dtype()), ", expected ", dtype_name(dtype));
  check_device_shape(op, name, t, shape);
}

inline void check_q_io(const char* op, DType x_dtype, DType y_dtype, const DeviceTensor& x, const Shape& xs,
                       const DeviceTensor& w, const Shape& ws, const DeviceTensor* bias, int64_t k, bool has_bias,
                       const DeviceTensor& y, const Shape& ys) {
  check_dev(op, "input", x, xs, x_dtype);
  check_dev(op, "weight", w, ws, DType::i8);
  check((bias != nullptr) == has_bias, op, ": params say ", has_bias ? "a" : "no", " bias, the call passes ",
        bias ? "one" : "none");
  if (bias) check_dev(op, "bias", *bias, {k}, DType::i32);
  check_dev(op, "output", y, ys, y_dtype);
}

// Calls f(TX{}, TY{}) for int8/uint8 input and output (anything else refused, naming op).
template <typename F>
void dispatch_q_xy(DType xt, DType yt, const char* op, F&& f) {
  auto out = [&](auto xtag) {
    if (yt == DType::u8) return f(xtag, uint8_t{});
    if (yt == DType::i8) return f(xtag, int8_t{});
    fail(op, ": output dtype ", dtype_name(yt), " (int8 or uint8)");
  };
  if (xt == DType::u8) return out(uint8_t{});
  if (xt == DType::i8) return out(int8_t{});
  fail(op, ": input dtype ", dtype_name(xt), " (int8 or uint8)");
}

template <typename T>
__device__ __forceinline__ T type_lowest() {
  return static_cast<T>(static_cast<T>(-1) < static_cast<T>(0) ? -128 : 0);
}

// The shared body of qconv2d and qdense (kernels/cuda/qgemm.cu): packs the weights, then one launch of
// the dp4a kernel.
void qgemm_run(CudaContext& ctx, const char* op, const QGemmDims& d, DType xt, DType yt, int32_t x_zp,
               const Requant& rq, const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor* bias,
               DeviceTensor& y);

}  // namespace quant_common
}  // namespace cuda
}  // namespace driftlab
