// qdense_forward_own (kernels/cuda/ops.h): x (N,in) int8|uint8, w (out,in) int8, bias (out) int32 |
// null -> y (N,out) int8|uint8, every output written (=). The dense layer is the 1x1 case of the
// dp4a implicit GEMM of kernels/cuda/qgemm.cu: the reference's bytes
// (kernels/cpu/ref/qdense_ref.cpp) under DotRule::exact; the int16 pair rules are refused.
#include "kernels/cuda/quant_common.cuh"

namespace driftlab {
namespace cuda {
namespace {

using quant_common::check_q_io;
using quant_common::QGemmDims;
using quant_common::qgemm_run;

}  // namespace

void qdense_forward_own(CudaContext& ctx, const QDenseParams& p, const DeviceTensor& x, const DeviceTensor& w,
                        const DeviceTensor* bias, DeviceTensor& y) {
  p.validate();
  check(p.dot == DotRule::exact, "qdense_forward_own: the int16 product pairs of DotRule (x86 without VNNI) are emulated by "
        "the CPU reference kernels only");
  check_q_io("qdense_forward_own", p.x_dtype, p.y_dtype, x, {p.n, p.in}, w, {p.out, p.in}, bias, p.out, p.has_bias,
             y, {p.n, p.out});
  QGemmDims d;  // a 1x1 convolution of `in` channels on a 1x1 image
  d.m = p.n, d.k = p.out, d.j = p.in, d.j4 = (d.j + 3) / 4;
  d.c = p.in, d.h = d.w = d.r = d.s = d.p = d.q = 1;
  d.sh = d.sw = d.dh = d.dw = 1, d.pt = d.pl = 0;
  qgemm_run(ctx, "qdense_forward_own", d, p.x_dtype, p.y_dtype, p.x_zero_point, p.rq, x, w, bias, y);
}

}  // namespace cuda
}  // namespace driftlab
