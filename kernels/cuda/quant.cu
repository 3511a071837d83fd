// Own CUDA int8 kernels: quantized conv2d and dense layer (one implicit-GEMM body whose int32 dot
// products are __dp4a: four byte products and the accumulator in one instruction), quantized max
// pooling, quantize and dequantize. Layouts: NCHW (conv, pool), x (N,in) and w (out,in) (dense);
// every output is written (=). Every integer sum is exact, so the results must be the reference
// kernels' bytes (kernels/cpu/ref/quant_ref.cpp): the requantization, rounding, quantize and
// dequantize of each element are the DL_HOST_DEVICE functions of core/ops/quant.h that the CPU
// kernels call, and this file is built with -fmad=false so that oneDNN's (acc + bias)*scale + zp
// rounds twice, as on the CPU (built with -ffp-contract=off).
//
// The dot product. dp4a multiplies signed bytes by signed bytes (or unsigned by unsigned); the
// activations may be uint8 against int8 weights. So every activation byte is shifted to int8,
// s = x - o (o = 128 for uint8, a flip of the top bit; 0 for int8), and
//   acc = sum (x - zp) w = sum s w + (o - zp) sum w,
// both sums over the window. Padding stands for x = zp (the real value 0): it is packed as the byte
// zp - o, so that both sums run over the whole window and `sum w` is the output channel's weight
// sum, formed once per call. A zero point outside the type's range cannot be packed as a byte: then
// (kMaskPad) padding packs 0 and a second dp4a sums the weights under a 0/1 byte mask of the real
// positions. The reduction index j = (c, r, s) is taken 4 bytes to a 32-bit word; the last word's
// missing bytes have weight 0. The correction, bias and accumulator are added in uint32 (wrapping:
// the same int32 as the reference's sum whenever that fits, which QConv2dParams::validate ensures).
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/ops.h"

namespace driftlab {
namespace cuda {
namespace {

static_assert(std::is_trivially_copyable<RequantChannel>::value, "RequantChannel is copied to the device as bytes");

cudaStream_t stream_of(CudaContext& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }

// The conv as a GEMM: rows m = (n, oh, ow) of the output, columns = output channels k, reduction
// j = (c, r, s) in the weights' order. The dense layer is the 1x1 case (C = in, H = W = 1).
struct QGemmDims {
  long long m, k, j, j4;  // j4 = ceil(j / 4) packed words per row
  long long c, h, w, r, s, p, q;
  long long sh, sw, dh, dw, pt, pl;
};

// What the epilogue needs besides the per-channel numbers (RequantChannel, on the device).
struct QEpilogue {
  RequantRule rule;
  RoundRule round;
  int32_t zp, lo, hi;  // output zero point and clamp
  int per_channel;     // channels has K entries (else one)
  long long x_shift;   // o - x_zp: the weight-sum correction's factor
  unsigned pad_byte;   // the packed byte of a padded position (zp - o, or 0 with kMaskPad)
};

constexpr int kBK = 8;        // packed words (32 reduction bytes) per shared-memory stage
constexpr int kThreads = 256; // TM x TN threads, 4 x 4 outputs each
// Two tile shapes, TM threads along the pixels and TN along the channels: 16 x 16 (64 pixels x 64
// channels per block) for wide layers; 64 x 4 (256 pixels x 16 channels) for layers of at most 16
// output channels (LeNet's: a 64-channel tile computed 4-16x padding there).
constexpr int kWideTM = 16, kNarrowTM = 64;

// The activation byte shifted to int8 (as the low byte of an unsigned).
__device__ __forceinline__ unsigned s8_bits(uint8_t v) { return static_cast<unsigned>(v) ^ 0x80u; }
__device__ __forceinline__ unsigned s8_bits(int8_t v) { return static_cast<unsigned>(static_cast<uint8_t>(v)); }

// Row m's packed word j4 of the implicit im2col matrix, and (kMaskPad) its 0/1 mask of real
// positions. j past the end packs 0 (its weight byte is 0 too).
template <typename TX, bool kMaskPad>
__device__ void gather_word(const QGemmDims& d, const TX* __restrict__ x, unsigned pad_byte, long long m,
                            long long j4, unsigned* xw, unsigned* mw) {
  const long long pq = d.p * d.q;
  const long long n = m / pq, oh = (m % pq) / d.q, ow = m % d.q;
  const long long rs = d.r * d.s;
  unsigned word = 0, mask = 0;
  for (int t = 0; t < 4; ++t) {
    const long long j = j4 * 4 + t;
    if (j >= d.j) break;
    const long long c = j / rs, r = (j % rs) / d.s, s = j % d.s;
    const long long ih = oh * d.sh - d.pt + r * d.dh, iw = ow * d.sw - d.pl + s * d.dw;
    unsigned b = pad_byte, real = 0;
    if (ih >= 0 && ih < d.h && iw >= 0 && iw < d.w) {
      b = s8_bits(x[((n * d.c + c) * d.h + ih) * d.w + iw]);
      real = 1;
    }
    word |= (b & 0xFFu) << (8 * t);
    mask |= real << (8 * t);
  }
  *xw = word;
  if (kMaskPad) *mw = mask;
}

// y (M rows of K channels, NCHW) from x and the packed weights wp (K, j4): a (4 TM) x (4 TN) output
// tile per block, the reduction in stages of 8 words through shared memory, each thread 4 pixels
// (tm + TM i: neighbouring threads, neighbouring pixels) by 4 channels (tn + TN jn), one dp4a per
// pair and word.
template <typename TX, typename TY, bool kMaskPad, int TM>
__global__ void qgemm_dp4a_kernel(QGemmDims d, QEpilogue e, const TX* __restrict__ x, const int* __restrict__ wp,
                                  const int* __restrict__ wsum, const int* __restrict__ bias,
                                  const RequantChannel* __restrict__ ch, TY* __restrict__ y) {
  constexpr int TN = kThreads / TM, BM = 4 * TM, BN = 4 * TN;
  __shared__ int xs[kBK][BM];
  __shared__ int ms[kBK][BM];  // kMaskPad only
  __shared__ int ws[kBK][BN];
  const int tid = threadIdx.x, tm = tid % TM, tn = tid / TM;
  const long long m0 = blockIdx.x * static_cast<long long>(BM), k0 = blockIdx.y * static_cast<long long>(BN);
  int acc[4][4], macc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int jn = 0; jn < 4; ++jn) acc[i][jn] = 0, macc[i][jn] = 0;
  for (long long jb = 0; jb < d.j4; jb += kBK) {
    for (int el = tid; el < BM * kBK; el += kThreads) {  // activations: neighbouring threads, neighbouring pixels
      const int ml = el % BM, kk = el / BM;
      const long long m = m0 + ml, j4 = jb + kk;
      unsigned xw = 0, mw = 0;
      if (m < d.m && j4 < d.j4) gather_word<TX, kMaskPad>(d, x, e.pad_byte, m, j4, &xw, &mw);
      xs[kk][ml] = static_cast<int>(xw);
      if (kMaskPad) ms[kk][ml] = static_cast<int>(mw);
    }
    for (int el = tid; el < BN * kBK; el += kThreads) {  // weights: neighbouring words of one channel
      const int kk = el % kBK, nl = el / kBK;
      const long long kc = k0 + nl, j4 = jb + kk;
      ws[kk][nl] = kc < d.k && j4 < d.j4 ? wp[kc * d.j4 + j4] : 0;
    }
    __syncthreads();
    for (int kk = 0; kk < kBK; ++kk) {
      int a[4], b[4];
      for (int i = 0; i < 4; ++i) a[i] = xs[kk][tm + TM * i];
      for (int jn = 0; jn < 4; ++jn) b[jn] = ws[kk][tn + TN * jn];
      for (int i = 0; i < 4; ++i)
        for (int jn = 0; jn < 4; ++jn) acc[i][jn] = __dp4a(a[i], b[jn], acc[i][jn]);
      if (kMaskPad) {
        for (int i = 0; i < 4; ++i) a[i] = ms[kk][tm + TM * i];
        for (int i = 0; i < 4; ++i)
          for (int jn = 0; jn < 4; ++jn) macc[i][jn] = __dp4a(a[i], b[jn], macc[i][jn]);
      }
    }
    __syncthreads();
  }
  const long long pq = d.p * d.q;
  for (int i = 0; i < 4; ++i) {
    const long long m = m0 + tm + TM * i;
    if (m >= d.m) continue;
    const long long n = m / pq, pix = m % pq;
    for (int jn = 0; jn < 4; ++jn) {
      const long long k = k0 + tn + TN * jn;
      if (k >= d.k) continue;
      const long long weights = kMaskPad ? macc[i][jn] : wsum[k];
      unsigned a = static_cast<unsigned>(acc[i][jn]) + static_cast<unsigned>(e.x_shift * weights);
      if (bias) a += static_cast<unsigned>(bias[k]);
      const int32_t v = requantize_one(static_cast<int32_t>(a), ch[e.per_channel ? k : 0], e.rule, e.round, e.zp,
                                       e.lo, e.hi);
      y[(n * d.k + k) * pq + pix] = static_cast<TY>(v);
    }
  }
}

// w (K, J) int8 -> wp (K, j4) words, the last word's missing bytes 0; wsum[k] = sum_j w[k, j].
__global__ void qpack_weights_kernel(long long k, long long j, long long j4, const int8_t* __restrict__ w,
                                     int* __restrict__ wp) {
  DL_GRID_STRIDE(i, k * j4) {
    const long long kc = i / j4, q = i % j4;
    unsigned word = 0;
    for (int t = 0; t < 4; ++t) {
      const long long jj = q * 4 + t;
      if (jj < j) word |= static_cast<unsigned>(static_cast<uint8_t>(w[kc * j + jj])) << (8 * t);
    }
    wp[i] = static_cast<int>(word);
  }
}

__global__ void qweight_sums_kernel(long long k, long long j, const int8_t* __restrict__ w, int* __restrict__ wsum) {
  DL_GRID_STRIDE(kc, k) {
    int s = 0;  // |s| <= 128 * J: int32 (QConv2dParams::validate bounds J far lower)
    for (long long jj = 0; jj < j; ++jj) s += w[kc * j + jj];
    wsum[kc] = s;
  }
}

void check_dev(const char* op, const char* name, const DeviceTensor& t, const Shape& shape, DType dtype) {
  check(t.dtype() == dtype, op, ": ", name, " is ", dtype_name(t.dtype()), ", expected ", dtype_name(dtype));
  check_device_shape(op, name, t, shape);
}

void check_q_io(const char* op, DType x_dtype, DType y_dtype, const DeviceTensor& x, const Shape& xs,
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

// The shared body of qconv2d and qdense: packs the weights, then one launch of the dp4a kernel.
void qgemm_run(CudaContext& ctx, const char* op, const QGemmDims& d, DType xt, DType yt, int32_t x_zp,
               const Requant& rq, const DeviceTensor& x, const DeviceTensor& w, const DeviceTensor* bias,
               DeviceTensor& y) {
  if (y.numel() == 0) return;  // a batch of 0: no grid to launch
  cudaStream_t st = stream_of(ctx);
  DeviceBytes packed(ctx, static_cast<std::size_t>(d.k * d.j4 + d.k) * sizeof(int));
  int* wp = static_cast<int*>(packed.get());
  int* wsum = wp + d.k * d.j4;
  qpack_weights_kernel<<<dl_blocks(d.k * d.j4, 256), 256, 0, st>>>(d.k, d.j, d.j4, w.data<int8_t>(), wp);
  DL_CUDA_LAUNCH_CHECK("qpack_weights_kernel");
  qweight_sums_kernel<<<dl_blocks(d.k, 128), 128, 0, st>>>(d.k, d.j, w.data<int8_t>(), wsum);
  DL_CUDA_LAUNCH_CHECK("qweight_sums_kernel");
  const DeviceBytes chans = bytes_to_device(ctx, rq.channels.data(), rq.channels.size() * sizeof(RequantChannel));

  const int32_t o = xt == DType::u8 ? 128 : 0;
  const int32_t tmin = xt == DType::u8 ? 0 : -128, tmax = xt == DType::u8 ? 255 : 127;
  const bool mask_pad = x_zp < tmin || x_zp > tmax;  // padding cannot be packed as the byte zp - o
  QEpilogue e;
  e.rule = rq.rule, e.round = rq.round, e.zp = rq.zero_point, e.lo = rq.lo, e.hi = rq.hi;
  e.per_channel = rq.channels.size() == 1 ? 0 : 1;
  e.x_shift = static_cast<long long>(o) - x_zp;
  e.pad_byte = mask_pad ? 0u : static_cast<unsigned>(x_zp - o) & 0xFFu;
  const bool narrow = d.k <= 4 * (kThreads / kNarrowTM);  // at most 16 output channels: the 256 x 16 tile
  const long long bm = narrow ? 4 * kNarrowTM : 4 * kWideTM, bn = narrow ? 4 * (kThreads / kNarrowTM) : 4 * (kThreads / kWideTM);
  const long long gx = (d.m + bm - 1) / bm, gy = (d.k + bn - 1) / bn;
  check(gx <= 2147483647LL && gy <= 65535, op, ": ", d.m, " output pixels x ", d.k,
        " channels exceed one launch's grid");
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  const RequantChannel* chp = static_cast<const RequantChannel*>(chans.get());
  const int* bp = bias ? bias->data<int32_t>() : nullptr;
  dispatch_q_xy(xt, yt, op, [&](auto xtag, auto ytag) {
    using TX = decltype(xtag);
    using TY = decltype(ytag);
    auto launch = [&](auto kernel) {
      kernel<<<grid, kThreads, 0, st>>>(d, e, x.data<TX>(), wp, wsum, bp, chp, y.data<TY>());
      DL_CUDA_LAUNCH_CHECK("qgemm_dp4a_kernel");
    };
    if (mask_pad)
      narrow ? launch(qgemm_dp4a_kernel<TX, TY, true, kNarrowTM>) : launch(qgemm_dp4a_kernel<TX, TY, true, kWideTM>);
    else
      narrow ? launch(qgemm_dp4a_kernel<TX, TY, false, kNarrowTM>) : launch(qgemm_dp4a_kernel<TX, TY, false, kWideTM>);
  });
  // `packed` and `chans` return to the allocator here: it hands them out again only to work on this
  // same stream, which runs after the launch above.
}

// ---- quantize / dequantize ----

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

// ---- max pooling ----

struct QPoolDims {
  long long n, c, h, w, kh, kw, sh, sw, pt, pl, p, q;
};

template <typename T>
__device__ __forceinline__ T type_lowest() {
  return static_cast<T>(static_cast<T>(-1) < static_cast<T>(0) ? -128 : 0);
}

template <typename T>
__global__ void qmaxpool_kernel(QPoolDims d, const T* __restrict__ x, T* __restrict__ y) {
  DL_GRID_STRIDE(i, d.n * d.c * d.p * d.q) {
    const long long ow = i % d.q, oh = (i / d.q) % d.p, nc = i / (d.q * d.p);
    const T* xp = x + nc * d.h * d.w;
    T m = type_lowest<T>();  // a window wholly in the padding gives the type's minimum, as the reference
    for (long long r = 0; r < d.kh; ++r) {
      const long long ih = oh * d.sh - d.pt + r;
      if (ih < 0 || ih >= d.h) continue;
      for (long long s = 0; s < d.kw; ++s) {
        const long long iw = ow * d.sw - d.pl + s;
        if (iw >= 0 && iw < d.w && xp[ih * d.w + iw] > m) m = xp[ih * d.w + iw];
      }
    }
    y[i] = m;
  }
}

// The quantized add, one element per thread: qadd_one of core/ops/quant.h, as the reference.
template <typename T>
__global__ void qadd_kernel(QAddParams p, long long numel, long long body, const T* __restrict__ a,
                            const T* __restrict__ b, T* __restrict__ y) {
  const int32_t tmin = type_lowest<T>(), tmax = tmin == 0 ? 255 : 127;
  DL_GRID_STRIDE(i, numel) {
    y[i] = static_cast<T>(qadd_one(p, a[i], b[i], qadd_memory_pos(p, i), body, tmin, tmax));
  }
}

// Global average pooling, one (n, c) plane per thread (ResNet's planes are 8x8: a thread sums 64
// bytes; the int64 sum is exact in any order), then qgap_one (every rule) as the reference.
template <typename T>
__global__ void qgap_kernel(long long planes, QGlobalAvgPoolParams::Resolved r, const T* __restrict__ x,
                            T* __restrict__ y) {
  const int32_t tmin = type_lowest<T>(), tmax = tmin == 0 ? 255 : 127;
  DL_GRID_STRIDE(nc, planes) {
    long long sum = 0;
    for (long long i = 0; i < r.count; ++i) sum += x[nc * r.count + i];
    y[nc] = static_cast<T>(qgap_one(r, sum, tmin, tmax));
  }
}

template <typename T>
__global__ void qrelu_kernel(long long numel, T z, const T* __restrict__ x, T* __restrict__ y) {
  DL_GRID_STRIDE(i, numel) { y[i] = x[i] < z ? z : x[i]; }
}

// The option-A shortcut: s[n][pad + c][oh][ow] = x[n][c][oh*stride][ow*stride] where that lies in
// x, the zero point everywhere else (the channels before and after x's, rows and columns past it).
struct QShortcutDims {
  long long n, c, h, w, oc, oh, ow, stride, pad_before;
};
template <typename T>
__global__ void qshortcut_kernel(QShortcutDims d, T z, const T* __restrict__ x, T* __restrict__ s) {
  DL_GRID_STRIDE(i, d.n * d.oc * d.oh * d.ow) {
    const long long ow = i % d.ow, oh = (i / d.ow) % d.oh, oc = (i / (d.ow * d.oh)) % d.oc, n = i / (d.ow * d.oh * d.oc);
    const long long c = oc - d.pad_before, ih = oh * d.stride, iw = ow * d.stride;
    s[i] = (c >= 0 && c < d.c && ih < d.h && iw < d.w) ? x[((n * d.c + c) * d.h + ih) * d.w + iw] : z;
  }
}

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

void qmaxpool2d_forward_own(CudaContext& ctx, const QPool2dParams& p, const DeviceTensor& x, DeviceTensor& y) {
  p.g.validate();
  check_dev("qmaxpool2d_forward_own", "input", x, p.g.x_shape(), p.dtype);
  check_dev("qmaxpool2d_forward_own", "output", y, p.g.y_shape(), p.dtype);
  if (y.numel() == 0) return;
  const QPoolDims d{p.g.n,       p.g.c,     p.g.h,     p.g.w,       p.g.kh,      p.g.kw,
                    p.g.stride_h, p.g.stride_w, p.g.pad_t, p.g.pad_l, p.g.out_h(), p.g.out_w()};
  dispatch_q_xy(p.dtype, p.dtype, "qmaxpool2d_forward_own", [&](auto tag, auto) {
    using T = decltype(tag);
    qmaxpool_kernel<T><<<dl_blocks(y.numel(), 256), 256, 0, stream_of(ctx)>>>(d, x.data<T>(), y.data<T>());
    DL_CUDA_LAUNCH_CHECK("qmaxpool_kernel");
  });
}

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

void qadd_own(CudaContext& ctx, const QAddParams& p0, const DeviceTensor& a, const DeviceTensor& b, DeviceTensor& y) {
  QAddParams p = p0;
  p.resolve();
  check_dev("qadd_own", "a", a, a.shape(), p.dtype);
  check_dev("qadd_own", "b", b, a.shape(), p.dtype);
  check_dev("qadd_own", "output", y, a.shape(), p.dtype);
  const long long numel = a.numel();
  if (p.n > 0) check(p.n * p.c * p.h * p.w == numel, "qadd_own: layout (", p.n, ",", p.c, ",", p.h, ",", p.w, ") for ",
                     numel, " elements");
  if (numel == 0) return;
  const long long body = numel - numel % 64;  // the reference's vectorised body (float_fma_tail64)
  dispatch_q_xy(p.dtype, p.dtype, "qadd_own", [&](auto tag, auto) {
    using T = decltype(tag);
    qadd_kernel<T><<<dl_blocks(numel, 256), 256, 0, stream_of(ctx)>>>(p, numel, body, a.data<T>(), b.data<T>(),
                                                                      y.data<T>());
    DL_CUDA_LAUNCH_CHECK("qadd_kernel");
  });
}

void qglobal_avg_pool_own(CudaContext& ctx, const QGlobalAvgPoolParams& p, const DeviceTensor& x, DeviceTensor& y) {
  check_dev("qglobal_avg_pool_own", "input", x, {p.n, p.c, p.h, p.w}, p.dtype);
  check_dev("qglobal_avg_pool_own", "output", y, {p.n, p.c}, p.dtype);
  const QGlobalAvgPoolParams::Resolved r = p.resolve();  // checks the scales and the count, as the reference
  if (y.numel() == 0) return;
  dispatch_q_xy(p.dtype, p.dtype, "qglobal_avg_pool_own", [&](auto tag, auto) {
    using T = decltype(tag);
    qgap_kernel<T><<<dl_blocks(y.numel(), 128), 128, 0, stream_of(ctx)>>>(y.numel(), r, x.data<T>(), y.data<T>());
    DL_CUDA_LAUNCH_CHECK("qgap_kernel");
  });
}

void qrelu_own(CudaContext& ctx, DType dtype, int32_t zero_point, const DeviceTensor& x, DeviceTensor& y) {
  check_dev("qrelu_own", "input", x, x.shape(), dtype);
  check_dev("qrelu_own", "output", y, x.shape(), dtype);
  if (x.numel() == 0) return;
  dispatch_q_xy(dtype, dtype, "qrelu_own", [&](auto tag, auto) {
    using T = decltype(tag);
    qrelu_kernel<T><<<dl_blocks(x.numel(), 256), 256, 0, stream_of(ctx)>>>(x.numel(), static_cast<T>(zero_point),
                                                                          x.data<T>(), y.data<T>());
    DL_CUDA_LAUNCH_CHECK("qrelu_kernel");
  });
}

void qshortcut_option_a_own(CudaContext& ctx, DType dtype, int32_t zero_point, int64_t stride, int64_t pad_before,
                            const DeviceTensor& x, DeviceTensor& s) {
  check(x.shape().size() == 4 && s.shape().size() == 4 && x.dim(0) == s.dim(0) && stride >= 1 && pad_before >= 0 &&
            pad_before + x.dim(1) <= s.dim(1),
        "qshortcut_option_a_own: ", shape_str(x.shape()), " -> ", shape_str(s.shape()), " with stride ", stride,
        ", ", pad_before, " channels before: not an option-A shortcut");
  check_dev("qshortcut_option_a_own", "input", x, x.shape(), dtype);
  check_dev("qshortcut_option_a_own", "output", s, s.shape(), dtype);
  if (s.numel() == 0) return;
  const QShortcutDims d{x.dim(0), x.dim(1), x.dim(2), x.dim(3), s.dim(1), s.dim(2), s.dim(3), stride, pad_before};
  dispatch_q_xy(dtype, dtype, "qshortcut_option_a_own", [&](auto tag, auto) {
    using T = decltype(tag);
    qshortcut_kernel<T><<<dl_blocks(s.numel(), 256), 256, 0, stream_of(ctx)>>>(d, static_cast<T>(zero_point),
                                                                              x.data<T>(), s.data<T>());
    DL_CUDA_LAUNCH_CHECK("qshortcut_kernel");
  });
}

}  // namespace cuda
}  // namespace driftlab
