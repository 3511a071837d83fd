// The own CUDA int8 GEMM that qconv2d_forward_own and qdense_forward_own share (kernels/cuda/qconv2d.cu,
// qdense.cu call qgemm_run): one implicit-GEMM body whose int32 dot products are __dp4a (four byte
// products and the accumulator in one instruction). Layouts: x NCHW (the dense layer's (N,in) is N
// images of `in` channels, 1x1), w (K,C,R,S) or (out,in), y NCHW or (N,out); every output is
// written (=). Every integer sum is exact, so the results must be the reference kernels' bytes
// (kernels/cpu/ref/qconv2d_ref.cpp, qdense_ref.cpp): the requantization of each element is the
// DL_HOST_DEVICE requantize_one() of core/ops/requant.h that the CPU kernels call, and this file is
// built with -fmad=false so that oneDNN's (acc + bias)*scale + zp rounds twice, as on the CPU
// (built with -ffp-contract=off).
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

#include "kernels/cuda/quant_common.cuh"

namespace driftlab {
namespace cuda {
namespace {

using quant_common::QGemmDims;

static_assert(std::is_trivially_copyable<RequantChannel>::value, "RequantChannel is copied to the device as bytes");

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

}  // namespace

namespace quant_common {

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

}  // namespace quant_common
}  // namespace cuda
}  // namespace driftlab
