// cuDNN convolution (legacy cudnnConvolution* API, as PyTorch 1.13 and TF use it), float and
// double, NCHW/KCRS. Forward writes y (=) then adds the bias; backward_data writes dx (=);
// backward_weight and backward_bias ADD (beta = 1), the driftlab contract.
// Algorithm: per (pass, params, dtype, math) the first algorithm that cuDNN's heuristics
// (cudnnGet*_v7, PyTorch benchmark=False) or timing (cudnnFind*, TF autotune / torch
// benchmark=True) rank first among those that succeed, fit the workspace limit and, when
// deterministic is asked, are CUDNN_DETERMINISTIC. Each choice is cached and logged in the context.
#include <cudnn.h>

#include <string>

#include "kernels/cuda/cudnn/cudnn_util.h"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {
namespace {

const char* fwd_algo_name(int a) {
  static const char* names[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                "FFT",           "FFT_TILING",            "WINOGRAD", "WINOGRAD_NONFUSED"};
  return a >= 0 && a < 8 ? names[a] : "?";
}
const char* bwd_data_algo_name(int a) {
  static const char* names[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  return a >= 0 && a < 6 ? names[a] : "?";
}
const char* bwd_filter_algo_name(int a) {
  static const char* names[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
  return a >= 0 && a < 7 ? names[a] : "?";
}

// The descriptors of one convolution (each destroyed with the struct, also when a Set throws).
struct ConvDescs {
  TensorDesc x, y;
  CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor> filter;
  CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>
      convolution;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  bool tf32 = false;
  ConvDescs(const Conv2dParams& p, DType dt, bool allow_tf32)
      : x(dt, p.n, p.c, p.h, p.w), y(dt, p.n, p.k, p.out_h(), p.out_w()), w(filter.get()), conv(convolution.get()) {
    DL_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, cudnn_type(dt), CUDNN_TENSOR_NCHW, static_cast<int>(p.k),
                                              static_cast<int>(p.c), static_cast<int>(p.r), static_cast<int>(p.s)));
    DL_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        conv, static_cast<int>(p.pad_t), static_cast<int>(p.pad_l), static_cast<int>(p.stride_h),
        static_cast<int>(p.stride_w), static_cast<int>(p.dil_h), static_cast<int>(p.dil_w),
        p.flip ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION, cudnn_type(dt)));
    // PyTorch: CUDNN_FMA_MATH for float unless allow_tf32; DEFAULT_MATH lets cuDNN use TF32.
    tf32 = dt == DType::f32 && allow_tf32;
    DL_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, tf32 || dt == DType::f64 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  }
};

std::string signature(const Conv2dParams& p, DType dt, const ConvDescs& d) {
  return p.str() + " " + dtype_name(dt) + (d.tf32 ? " tf32" : " fma");
}

// Picks from a perf list (sorted best first by cuDNN): success, workspace, determinism.
template <typename Perf>
const Perf* pick(const Perf* perf, int count, const CudaExecParams& ep) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (perf[i].memory > ep.workspace_limit) continue;
    if (ep.deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    return &perf[i];
  }
  return nullptr;
}

template <typename Perf>
AlgoRecord choose(CudaContext& ctx, const char* op, const std::string& sig, const Perf* perf, int count,
                  const char* (*name)(int), const ConvDescs& d) {
  const Perf* best = pick(perf, count, ctx.params());
  if (!best)
    fail("cudnn: ", op, ": no algorithm among ", count, " fits (workspace limit ", ctx.params().workspace_limit,
         " bytes", ctx.params().deterministic ? ", deterministic only" : "", ") for ", sig);
  AlgoRecord r;
  r.op = op;
  r.signature = sig;
  r.algo = static_cast<int>(best->algo);
  r.algo_name = name(r.algo);
  r.workspace = best->memory;
  r.deterministic = best->determinism == CUDNN_DETERMINISTIC;
  r.math = d.tf32 ? "DEFAULT(tf32 allowed)" : "FMA";
  ctx.record_algo(r);
  return r;
}

void check_supported(const char* fn, const Conv2dParams& p, DType dt) {
  p.validate();
  if (!conv2d_cudnn_supports(p, dt))
    fail(fn, ": cuDNN needs symmetric pads (pad_t=pad_b, pad_l=pad_r), got ", p.str());
}

}  // namespace

bool conv2d_cudnn_supports(const Conv2dParams& p, DType) { return p.pad_t == p.pad_b && p.pad_l == p.pad_r; }

void conv2d_forward_cudnn(CudaContext& ctx, const Conv2dParams& p, const DeviceTensor& x, const DeviceTensor& w,
                          const DeviceTensor* b, DeviceTensor& y) {
  const char* fn = "conv2d_forward_cudnn";
  check_supported(fn, p, x.dtype());
  check_device_shape(fn, "x", x, p.x_shape());
  check_device_shape(fn, "w", w, p.w_shape());
  check_device_shape(fn, "y", y, p.y_shape());
  if (b) check_device_shape(fn, "b", *b, {p.k});
  cudnnHandle_t h = static_cast<cudnnHandle_t>(ctx.cudnn());
  ConvDescs d(p, x.dtype(), ctx.params().tf32_conv);
  const std::string sig = signature(p, x.dtype(), d);
  const AlgoRecord* rec = ctx.find_algo("conv2d_forward", sig);
  AlgoRecord chosen;
  if (!rec) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int count = 0;
    if (ctx.params().algo_search == CudnnAlgoSearch::heuristic)
      DL_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x.get(), d.w, d.conv, d.y.get(),
                                                            CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
    else
      DL_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(h, d.x.get(), d.w, d.conv, d.y.get(),
                                                          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf));
    chosen = choose(ctx, "conv2d_forward", sig, perf, count, fwd_algo_name, d);
    rec = &chosen;
  }
  void* ws = rec->workspace ? ctx.workspace(rec->workspace) : nullptr;
  CudnnScalars s(x.dtype(), 1.0, 0.0), add(x.dtype(), 1.0, 1.0);
  DL_CUDNN_CHECK(cudnnConvolutionForward(h, s.alpha(), d.x.get(), x.raw(), d.w, w.raw(), d.conv,
                                         static_cast<cudnnConvolutionFwdAlgo_t>(rec->algo), ws, rec->workspace,
                                         s.beta(), d.y.get(), y.raw()));
  if (b) {
    TensorDesc bd(x.dtype(), 1, p.k, 1, 1);
    DL_CUDNN_CHECK(cudnnAddTensor(h, add.alpha(), bd.get(), b->raw(), add.beta(), d.y.get(), y.raw()));
  }
}

void conv2d_backward_data_cudnn(CudaContext& ctx, const Conv2dParams& p, const DeviceTensor& dy,
                                const DeviceTensor& w, DeviceTensor& dx) {
  const char* fn = "conv2d_backward_data_cudnn";
  check_supported(fn, p, dy.dtype());
  check_device_shape(fn, "dy", dy, p.y_shape());
  check_device_shape(fn, "w", w, p.w_shape());
  check_device_shape(fn, "dx", dx, p.x_shape());
  cudnnHandle_t h = static_cast<cudnnHandle_t>(ctx.cudnn());
  ConvDescs d(p, dy.dtype(), ctx.params().tf32_conv);
  const std::string sig = signature(p, dy.dtype(), d);
  const AlgoRecord* rec = ctx.find_algo("conv2d_backward_data", sig);
  AlgoRecord chosen;
  if (!rec) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    int count = 0;
    if (ctx.params().algo_search == CudnnAlgoSearch::heuristic)
      DL_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y.get(), d.conv, d.x.get(),
                                                                 CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf));
    else
      DL_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(h, d.w, d.y.get(), d.conv, d.x.get(),
                                                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf));
    chosen = choose(ctx, "conv2d_backward_data", sig, perf, count, bwd_data_algo_name, d);
    rec = &chosen;
  }
  void* ws = rec->workspace ? ctx.workspace(rec->workspace) : nullptr;
  CudnnScalars s(dy.dtype(), 1.0, 0.0);
  DL_CUDNN_CHECK(cudnnConvolutionBackwardData(h, s.alpha(), d.w, w.raw(), d.y.get(), dy.raw(), d.conv,
                                              static_cast<cudnnConvolutionBwdDataAlgo_t>(rec->algo), ws,
                                              rec->workspace, s.beta(), d.x.get(), dx.raw()));
}

void conv2d_backward_weight_cudnn(CudaContext& ctx, const Conv2dParams& p, const DeviceTensor& x,
                                  const DeviceTensor& dy, DeviceTensor& dw, DeviceTensor* db) {
  const char* fn = "conv2d_backward_weight_cudnn";
  check_supported(fn, p, x.dtype());
  check_device_shape(fn, "x", x, p.x_shape());
  check_device_shape(fn, "dy", dy, p.y_shape());
  check_device_shape(fn, "dw", dw, p.w_shape());
  if (db) check_device_shape(fn, "db", *db, {p.k});
  cudnnHandle_t h = static_cast<cudnnHandle_t>(ctx.cudnn());
  ConvDescs d(p, x.dtype(), ctx.params().tf32_conv);
  const std::string sig = signature(p, x.dtype(), d);
  const AlgoRecord* rec = ctx.find_algo("conv2d_backward_weight", sig);
  AlgoRecord chosen;
  if (!rec) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int count = 0;
    if (ctx.params().algo_search == CudnnAlgoSearch::heuristic)
      DL_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          h, d.x.get(), d.y.get(), d.conv, d.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
    else
      DL_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(
          h, d.x.get(), d.y.get(), d.conv, d.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf));
    chosen = choose(ctx, "conv2d_backward_weight", sig, perf, count, bwd_filter_algo_name, d);
    rec = &chosen;
  }
  void* ws = rec->workspace ? ctx.workspace(rec->workspace) : nullptr;
  CudnnScalars acc(x.dtype(), 1.0, 1.0);  // dw += , db +=
  DL_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, acc.alpha(), d.x.get(), x.raw(), d.y.get(), dy.raw(), d.conv,
                                                static_cast<cudnnConvolutionBwdFilterAlgo_t>(rec->algo), ws,
                                                rec->workspace, acc.beta(), d.w, dw.raw()));
  if (db) {
    TensorDesc bd(x.dtype(), 1, p.k, 1, 1);
    DL_CUDNN_CHECK(cudnnConvolutionBackwardBias(h, acc.alpha(), d.y.get(), dy.raw(), acc.beta(), bd.get(), db->raw()));
  }
}

}  // namespace cuda
}  // namespace driftlab
