// qconv2d_forward_own (kernels/cuda/ops.h): x (N,C,H,W) int8|uint8, w (K,C,R,S) int8, bias (K)
// int32 | null -> y (N,K,P,Q) int8|uint8, every output written (=). The convolution is the dp4a
// implicit GEMM of kernels/cuda/qgemm.cu (rows m = (n, oh, ow), columns the output channels k,
// reduction j = (c, r, s) in the weights' order): the reference's bytes
// (kernels/cpu/ref/qconv2d_ref.cpp) under DotRule::exact; the int16 pair rules are refused.
#include "kernels/cuda/quant_common.cuh"

namespace driftlab {
namespace cuda {
namespace {

using quant_common::check_q_io;
using quant_common::QGemmDims;
using quant_common::qgemm_run;

}  // namespace

void qconv2d_forward_own(CudaContext& ctx, const QConv2dParams& p, const DeviceTensor& x, const DeviceTensor& w,
                         const DeviceTensor* bias, DeviceTensor& y) {
  p.validate();
  check(p.dot == DotRule::exact, "qconv2d_forward_own: the int16 product pairs of DotRule (x86 without VNNI) are emulated by "
        "the CPU reference kernels only");
  const Conv2dParams& g = p.g;
  check_q_io("qconv2d_forward_own", p.x_dtype, p.y_dtype, x, g.x_shape(), w, g.w_shape(), bias, g.k, p.has_bias, y,
             g.y_shape());
  QGemmDims d;
  d.p = g.out_h(), d.q = g.out_w();
  d.m = g.n * d.p * d.q, d.k = g.k, d.j = g.c * g.r * g.s, d.j4 = (d.j + 3) / 4;
  d.c = g.c, d.h = g.h, d.w = g.w, d.r = g.r, d.s = g.s;
  d.sh = g.stride_h, d.sw = g.stride_w, d.dh = g.dil_h, d.dw = g.dil_w, d.pt = g.pad_t, d.pl = g.pad_l;
  qgemm_run(ctx, "qconv2d_forward_own", d, p.x_dtype, p.y_dtype, p.x_zero_point, p.rq, x, w, bias, y);
}

}  // namespace cuda
}  // namespace driftlab
