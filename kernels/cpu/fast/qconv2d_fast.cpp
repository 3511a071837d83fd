// Fast qconv2d (registry slot `fast`): x (N,C,H,W) int8|uint8, w (K,C,R,S) int8, bias (K) int32 |
// null -> y (N,K,P,Q) int8|uint8, every output written (=).
//
// Bit-exact with kernels/cpu/ref/qconv2d_ref.cpp for every call supports() accepts, for any thread
// count: the accumulators are integers (the u8 x s8 GEMM of kernels/cpu/fast/qgemm_fast.h, whose
// opening says why they are the reference's), and every output element goes through the same
// requantize_one() of core/ops/requant.h (or its intrinsic form: the same operations per element).
// Where the build targets AVX-512 the plane row copy and the panel interleave are written with
// intrinsics (the same bytes).
//
// The convolution reads no panel (but for small output planes, qconv_gathered): the image is
// copied once into a quad plane (four channels' bytes per pixel, split into the stride's phases,
// padded: QuadPlane below), where each group
// (four channels of one kernel tap) over the GEMM's columns m = oh * ws + ow is one contiguous
// shifted window. The ws - Q columns past each output row are computed and dropped. Where the
// requantization is a float rule with round-half-even (both PyTorch schemes) it runs on each
// tile as it leaves the GEMM, into the output pixels; other rules requantize the tile's int32.
//
// This file is compiled as if with -fno-trapping-math (the pragma below): GCC 12 vectorises
// std::floor (round_with) only then. It changes no value, only whether FP exception flags may be
// raised differently; -ffp-contract=off and everything else of the build stay as they are.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <cstring>
#include <vector>

#include <omp.h>

#include "core/error.h"
#include "kernels/cpu/fast/qgemm_fast.h"
#include "kernels/cpu/quant_loops.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

using namespace qgemm_fast;
using quant_loops::check_q_io;
using quant_loops::is_q8;

#if defined(__AVX512BW__) && defined(__AVX512VL__)
// The first min(n, 16) bytes of a 16-byte store.
inline __mmask16 quad_bytes_mask(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}
#endif
#if defined(__SSE2__)
// Four rows' 16 bytes a, b, c, d as quads: q[j] holds columns 4j..4j+3, each as (a, b, c, d).
inline void quads4(__m128i a, __m128i b, __m128i c, __m128i d, __m128i (&q)[4]) {
  const __m128i ab_lo = _mm_unpacklo_epi8(a, b), ab_hi = _mm_unpackhi_epi8(a, b);
  const __m128i cd_lo = _mm_unpacklo_epi8(c, d), cd_hi = _mm_unpackhi_epi8(c, d);
  q[0] = _mm_unpacklo_epi16(ab_lo, cd_lo), q[1] = _mm_unpackhi_epi16(ab_lo, cd_lo);
  q[2] = _mm_unpacklo_epi16(ab_hi, cd_hi), q[3] = _mm_unpackhi_epi16(ab_hi, cd_hi);
}
#endif
#if DL_QFAST_X86
// The int32 lanes of q whose bit is set in `mask`, narrowed to bytes and packed to dst (store_mask:
// the first popcount(mask) bytes): AVX-512 F's vpcompressd, not VBMI2's vpcompressb, which
// Skylake-SP and Cascade Lake lack.
template <typename TY>
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void store_lanes_packed(__m512i q, uint32_t mask,
                                                                                    __mmask16 store_mask, TY* dst) {
  _mm_mask_storeu_epi8(dst, store_mask, _mm512_cvtepi32_epi8(_mm512_maskz_compress_epi32(static_cast<__mmask16>(mask), q)));
}
#endif

// dst[m*4 + t] = src_t[m] ^ flip for m < len, t < 4: four byte rows into one panel group.
void interleave4(const uint8_t* s0, const uint8_t* s1, const uint8_t* s2, const uint8_t* s3, int64_t len,
                 uint8_t flip, uint8_t* dst) {
  int64_t m = 0;
#if defined(__AVX512VBMI__)
  // 16 columns of the four rows in one register's four 128-bit lanes, one byte permutation to
  // [m][t] order: output byte 4m + t is lane t's byte m
  const __m512i idx = _mm512_set_epi8(63, 47, 31, 15, 62, 46, 30, 14, 61, 45, 29, 13, 60, 44, 28, 12, 59, 43, 27, 11,
                                      58, 42, 26, 10, 57, 41, 25, 9, 56, 40, 24, 8, 55, 39, 23, 7, 54, 38, 22, 6, 53,
                                      37, 21, 5, 52, 36, 20, 4, 51, 35, 19, 3, 50, 34, 18, 2, 49, 33, 17, 1, 48, 32,
                                      16, 0);
  const __m512i f512 = _mm512_set1_epi8(static_cast<char>(flip));
  for (; m + 16 <= len; m += 16) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + m)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s1 + m)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s2 + m)), 2);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s3 + m)), 3);
    _mm512_storeu_si512(dst + 4 * m, _mm512_xor_si512(_mm512_permutexvar_epi8(idx, v), f512));
  }
  if (m < len) {  // the last len - m < 16 columns: masked loads, one masked store (rows of 8 in ResNet-20)
    const int64_t rem = len - m;
    const __mmask16 lm = static_cast<__mmask16>((1u << rem) - 1);
    __m512i v = _mm512_castsi128_si512(_mm_maskz_loadu_epi8(lm, s0 + m));
    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(lm, s1 + m), 1);
    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(lm, s2 + m), 2);
    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(lm, s3 + m), 3);
    const __mmask64 sm = (__mmask64{1} << (4 * rem)) - 1;
    _mm512_mask_storeu_epi8(dst + 4 * m, sm, _mm512_xor_si512(_mm512_permutexvar_epi8(idx, v), f512));
    return;
  }
#endif
#if defined(__SSE2__)
  const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
  auto ld = [&](const uint8_t* s) { return _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)), f); };
  __m128i q[4];
  for (; m + 16 <= len; m += 16) {
    quads4(ld(s0 + m), ld(s1 + m), ld(s2 + m), ld(s3 + m), q);
    __m128i* o = reinterpret_cast<__m128i*>(dst + 4 * m);
    for (int j = 0; j < 4; ++j) _mm_storeu_si128(o + j, q[j]);
  }
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  if (m < len) {  // the last len - m < 16 columns without VBMI: masked loads, the same unpacks, masked stores
    const int64_t rem = len - m;
    const __mmask16 lm = static_cast<__mmask16>((1u << rem) - 1);
    auto ldm = [&](const uint8_t* s) { return _mm_xor_si128(_mm_maskz_loadu_epi8(lm, s), f); };
    quads4(ldm(s0 + m), ldm(s1 + m), ldm(s2 + m), ldm(s3 + m), q);
    for (int j = 0; j < 4 && 4 * rem > 16 * j; ++j)  // chunk j: bytes [16j, 16j + 16) of the 4 * rem
      _mm_mask_storeu_epi8(dst + 4 * m + 16 * j, quad_bytes_mask(4 * rem - 16 * j), q[j]);
    return;
  }
#endif
#endif
  for (; m < len; ++m) {
    dst[4 * m + 0] = s0[m] ^ flip;
    dst[4 * m + 1] = s1[m] ^ flip;
    dst[4 * m + 2] = s2[m] ^ flip;
    dst[4 * m + 3] = s3[m] ^ flip;
  }
}

// Four byte rows split by column parity into two quad rows: even[u*4 + t] = src_t[2u] ^ flip,
// odd[u*4 + t] = src_t[2u + 1] ^ flip (a stride-2 convolution's phase planes).
void interleave4_pairs(const uint8_t* s0, const uint8_t* s1, const uint8_t* s2, const uint8_t* s3, int64_t len,
                       uint8_t flip, uint8_t* even, uint8_t* odd) {
  int64_t m = 0;
#if defined(__AVX512VBMI__)
  // 16 columns of the four rows in one register's four 128-bit lanes; one byte permutation puts
  // the 8 even columns' quads in the low 256 bits (byte 4u + t = lane t's byte 2u) and the odd
  // ones' in the high 256 bits
  const __m512i idx = _mm512_set_epi8(63, 47, 31, 15, 61, 45, 29, 13, 59, 43, 27, 11, 57, 41, 25, 9, 55, 39, 23, 7, 53,
                                      37, 21, 5, 51, 35, 19, 3, 49, 33, 17, 1, 62, 46, 30, 14, 60, 44, 28, 12, 58, 42,
                                      26, 10, 56, 40, 24, 8, 54, 38, 22, 6, 52, 36, 20, 4, 50, 34, 18, 2, 48, 32, 16, 0);
  const __m512i f512 = _mm512_set1_epi8(static_cast<char>(flip));
  for (; m < len; m += 16) {
    const int64_t rem = std::min<int64_t>(16, len - m);
    const __mmask16 lm = static_cast<__mmask16>((1u << rem) - 1);
    __m512i v = _mm512_castsi128_si512(_mm_maskz_loadu_epi8(lm, s0 + m));
    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(lm, s1 + m), 1);
    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(lm, s2 + m), 2);
    v = _mm512_inserti32x4(v, _mm_maskz_loadu_epi8(lm, s3 + m), 3);
    v = _mm512_xor_si512(_mm512_permutexvar_epi8(idx, v), f512);
    const int64_t ne = (rem + 1) / 2, no = rem / 2;  // even and odd columns in this step
    _mm256_mask_storeu_epi8(even + 2 * m, static_cast<__mmask32>((uint64_t{1} << (4 * ne)) - 1),
                            _mm512_castsi512_si256(v));
    _mm256_mask_storeu_epi8(odd + 2 * m, static_cast<__mmask32>((uint64_t{1} << (4 * no)) - 1),
                            _mm512_extracti64x4_epi64(v, 1));
  }
#elif defined(__SSSE3__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  // Without VBMI: each row's 16 columns split into [8 even | 8 odd] by one byte shuffle, then the
  // four rows interleaved into quads by the unpacks of interleave4; the last columns by masked loads
  // and stores
  const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
  const __m128i split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  for (; m < len; m += 16) {
    const int64_t rem = std::min<int64_t>(16, len - m);
    const __mmask16 lm = static_cast<__mmask16>((1u << rem) - 1);
    auto ld = [&](const uint8_t* s) { return _mm_shuffle_epi8(_mm_xor_si128(_mm_maskz_loadu_epi8(lm, s), f), split); };
    const __m128i a = ld(s0 + m), b = ld(s1 + m), c = ld(s2 + m), d = ld(s3 + m);
    const __m128i ab_e = _mm_unpacklo_epi8(a, b), ab_o = _mm_unpackhi_epi8(a, b);
    const __m128i cd_e = _mm_unpacklo_epi8(c, d), cd_o = _mm_unpackhi_epi8(c, d);
    const int64_t ne = (rem + 1) / 2, no = rem / 2;  // even and odd columns in this step
    _mm_mask_storeu_epi8(even + 2 * m, quad_bytes_mask(4 * ne), _mm_unpacklo_epi16(ab_e, cd_e));
    if (ne > 4) _mm_mask_storeu_epi8(even + 2 * m + 16, quad_bytes_mask(4 * ne - 16), _mm_unpackhi_epi16(ab_e, cd_e));
    if (no > 0) _mm_mask_storeu_epi8(odd + 2 * m, quad_bytes_mask(4 * no), _mm_unpacklo_epi16(ab_o, cd_o));
    if (no > 4) _mm_mask_storeu_epi8(odd + 2 * m + 16, quad_bytes_mask(4 * no - 16), _mm_unpackhi_epi16(ab_o, cd_o));
  }
#endif
  for (; m < len; ++m) {
    uint8_t* d = (m % 2 ? odd : even) + 4 * (m / 2);
    d[0] = s0[m] ^ flip, d[1] = s1[m] ^ flip, d[2] = s2[m] ^ flip, d[3] = s3[m] ^ flip;
  }
}

// ---------------------------------------------------------------------------------------------
// qconv2d

bool has_padding(const Conv2dParams& g) { return g.pad_t || g.pad_b || g.pad_l || g.pad_r; }

// Depthwise: groups = C = K, one input channel per output channel.
bool is_depthwise(const Conv2dParams& g) { return g.groups > 1 && g.groups == g.c && g.k == g.c; }

bool qconv2d_supports(const QConv2dParams& p, DType dt) {
  if (dt != p.x_dtype || !is_q8(p.x_dtype) || !is_q8(p.y_dtype) || p.g.flip) return false;
  // Depthwise convolutions (qconv_depthwise): exact sums, and oneDNN's channel pairs, which with one
  // channel a group pair each product with nothing (|x w| <= 255 * 128 fits int16: the exact sum).
  // ONNX Runtime's (kh, kw, c) pairs span taps there and can saturate: the reference keeps them.
  if (p.g.groups != 1) return is_depthwise(p.g) && p.dot != DotRule::int16_pairs_hwc;
  // int16 pairs: oneDNN's channels (2j, 2j+1) of one tap are the quad's (c0,c1), (c2,c3); with an
  // odd C the last channel pairs with a channel the quad fills with weight 0 ("pairs with
  // nothing", as oneDNN's). With C even ORT's adjacent (kh, kw, c) terms are the same pairs; an odd
  // C with ORT's rule takes the im2col path (qconv_im2col_pairs): its rows are ORT's (kh, kw, c)
  // order itself. A padding tap enters as the stored zero point in ORT's rule, as the plane's
  // padding bytes do; oneDNN's rule skips it, which the plane's zero-point bytes reproduce exactly
  // when their pair cannot saturate: |zp * (w0 + w1)| <= 128 * 256 = 32768 fits int16 (and is
  // then taken off by the zero-point correction like any other term) for zp <= 128. Larger zero
  // points with padding stay with the reference.
  if (p.dot == DotRule::int16_pairs_channels &&
      (p.x_dtype != DType::u8 || (has_padding(p.g) && p.x_zero_point > 128)))
    return false;
  // Padding is written as the shifted zero point, which must be a byte.
  const int32_t zp_u = shifted_zero_point(p.x_dtype, p.x_zero_point);
  return !has_padding(p.g) || (zp_u >= 0 && zp_u <= 255);
}

// The quad plane: the padded image of one input, four channels' bytes per pixel (channel 4*c4 + t
// at byte t), split by the stride into sh * sw phase planes (pixel (i, j) of the padded image in
// phase (i % sh, j % sw) at row i / sh, column j / sw). Column m = oh * ws + ow of the GEMM then
// reads, for tap (r, s) and channel quad c4, the 4-byte word at a fixed offset + m: each group of
// the reduction is one contiguous shifted window of the plane, read by the tile in place (no
// panel). At unit column stride the left and right padding share columns (a row is W + max(pad_l,
// pad_r) long; a tap past the right edge reads the next row's left padding), so fewer columns
// are computed and dropped; one slack row below holds the padding such reads meet last.
struct QuadPlane {
  int64_t sh = 1, sw = 1, c4 = 1;
  int64_t lw = 0;        // padded row length before the split
  int64_t hs = 0, ws = 0;  // rows and columns of one phase plane
  int64_t phase_px = 0, block_px = 0;  // pixels in one phase plane; in one channel quad's phases
  // pixel index of padded (row i, column j) in channel quad q
  int64_t pixel(int64_t q, int64_t i, int64_t j) const {
    return q * block_px + ((i % sh) * sw + j % sw) * phase_px + (i / sh) * ws + j / sw;
  }
};

QuadPlane quad_plane(const Conv2dParams& g) {
  QuadPlane qp;
  qp.sh = g.stride_h, qp.sw = g.stride_w, qp.c4 = (g.c + 3) / 4;
  qp.lw = g.stride_w == 1 ? g.w + std::max(g.pad_l, g.pad_r) : g.w + g.pad_l + g.pad_r;
  const int64_t hp = g.h + g.pad_t + g.pad_b;
  qp.hs = (hp + qp.sh - 1) / qp.sh + 1;
  qp.ws = (qp.lw + qp.sw - 1) / qp.sw;
  qp.phase_px = qp.hs * qp.ws;
  qp.block_px = qp.sh * qp.sw * qp.phase_px;
  return qp;
}

// Image xn (C, H, W) into the quad plane, shifted to unsigned (its padding and slack already hold
// the shifted zero point, written once); zeros: W bytes of 0 (channels past C, weight 0).
void fill_plane(const QuadPlane& qp, const uint8_t* xn, int64_t C, int64_t H, int64_t W, int64_t pad_t, int64_t pad_l,
                uint8_t flip, const uint8_t* zeros, uint8_t* plane) {
  for (int64_t q = 0; q < qp.c4; ++q)
    for (int64_t ih = 0; ih < H; ++ih) {
      const uint8_t* src[4];
      for (int t = 0; t < 4; ++t) src[t] = 4 * q + t < C ? xn + ((4 * q + t) * H + ih) * W : zeros;
      const int64_t i = ih + pad_t;
      if (qp.sw == 1) {
        interleave4(src[0], src[1], src[2], src[3], W, flip, plane + 4 * qp.pixel(q, i, pad_l));
      } else if (qp.sw == 2) {
        interleave4_pairs(src[0], src[1], src[2], src[3], W, flip, plane + 4 * qp.pixel(q, i, pad_l),
                          plane + 4 * qp.pixel(q, i, pad_l + 1));
      } else {
        for (int64_t iw = 0; iw < W; ++iw) {
          uint8_t* d = plane + 4 * qp.pixel(q, i, iw + pad_l);
          for (int t = 0; t < 4; ++t) d[t] = src[t][iw] ^ flip;
        }
      }
    }
}

// The plane's bytes: the phases of every channel quad, then slack for the columns past the last
// valid one (a tile reads up to round_up(P * ws, 16) words past a window's start).
int64_t plane_bytes(const QuadPlane& qp, int64_t P) { return 4 * (qp.c4 * qp.block_px + round_up(P * qp.ws, 16) + 16); }

// Each group's byte offset in the plane: tap (r, s) of quad c4 at column 0, group (c4 * R + r) * S + s.
std::vector<int64_t> plane_group_offsets(const QuadPlane& qp, const Conv2dParams& g) {
  std::vector<int64_t> goff(static_cast<std::size_t>(qp.c4 * g.r * g.s));
  for (int64_t q = 0; q < qp.c4; ++q)
    for (int64_t r = 0; r < g.r; ++r)
      for (int64_t s = 0; s < g.s; ++s) goff[(q * g.r + r) * g.s + s] = 4 * qp.pixel(q, r * g.dil_h, s * g.dil_w);
  return goff;
}

// The weights in the quad plane's reduction order: group (c4 * R + r) * S + s holds channels
// 4*c4 .. 4*c4 + 3 of tap (r, s), channels past C weighing 0; corr as pack_weights forms it (an
// integer sum: the order does not matter). One pass over w (this runs on every call).
PackedWeights pack_conv_weights(const int8_t* w, const Conv2dParams& g, const int32_t* bias, int32_t zp_u) {
  const int64_t C = g.c, RS = g.r * g.s, K = g.k, c4 = (C + 3) / 4;
  PackedWeights p;
  p.k = K, p.j = C * RS, p.j4 = c4 * RS * 4;
  p.w.assign(static_cast<std::size_t>(K * p.j4), 0);
  p.corr.resize(static_cast<std::size_t>(K));
  for (int64_t k = 0; k < K; ++k) {
    const int8_t* wk = w + k * C * RS;
    int8_t* pk = p.w.data() + k * p.j4;
    const uint32_t sum = wrapping_sum(wk, C * RS);
    for (int64_t c = 0; c < C; ++c) {
      int8_t* dst = pk + (c / 4) * RS * 4 + c % 4;
      for (int64_t rs = 0; rs < RS; ++rs) dst[4 * rs] = wk[c * RS + rs];
    }
    const uint32_t b = bias ? static_cast<uint32_t>(bias[k]) : 0u;
    p.corr[k] = static_cast<int32_t>(b - static_cast<uint32_t>(zp_u) * sum);
  }
  return p;
}

// The 16 bytes at src whose bit is set in `mask`, packed, to dst (a vector of GEMM columns into
// its output pixels: the columns past a row's Q are dropped).
template <typename TY>
inline void store_valid(const TY* src, uint32_t mask, TY* dst) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  if (mask == 0xFFFFu) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), v);
    return;
  }
  // the bytes widened to int32 lanes, packed, narrowed back
  store_lanes_packed(_mm512_cvtepu8_epi32(v), mask, static_cast<__mmask16>((1u << __builtin_popcount(mask)) - 1), dst);
#else
  if (mask == 0xFFFFu) {  // a vector inside one output row: all 16 columns
    std::memcpy(dst, src, 16 * sizeof(TY));
    return;
  }
  for (int i = 0, o = 0; i < 16; ++i)
    if (mask >> i & 1u) dst[o++] = src[i];
#endif
}

// The float rules' requantization of one GEMM tile as it leaves the GEMM, into the output pixels
// (no image-sized int32 buffer, no call per row): requant_row_avx512's operations per lane, then
// each vector's valid columns packed (vpcompressd, then narrowed) and stored at their first pixel.
struct RqTileArgs {
  const float* scale = nullptr;  // per output channel, from the tile's first
  const float* bias = nullptr;   // (0 where the channel has none: float(acc) + 0 is float(acc), never -0)
  float fzp = 0, flo = 0, fhi = 0;
  int32_t izp = 0;
  const uint32_t* vmask = nullptr;  // per 16-column vector, from the tile's first: its valid columns
  const int64_t* vstart = nullptr;  // and the pixel of the first
  int64_t ystride = 0;              // between output channels' planes
};

// The fused tiles' arguments but the per-tile pointers (scale, bias, vmask, vstart): the float rule's
// constants, and each output channel's scale and bias into scales / biases (K each).
RqTileArgs rq_tile_args(const Requant& rq, int64_t K, int64_t ystride, std::vector<float>& scales,
                        std::vector<float>& biases) {
  const bool add_zp = rq.rule == RequantRule::float_multiply_add_zp;
  scales.resize(static_cast<std::size_t>(K)), biases.resize(static_cast<std::size_t>(K));
  for (int64_t k = 0; k < K; ++k) scales[k] = rq.channel(k).scale, biases[k] = rq.channel(k).bias;
  RqTileArgs ra;
  ra.fzp = static_cast<float>(rq.zero_point);
  ra.flo = static_cast<float>(add_zp ? rq.lo : rq.lo - rq.zero_point);
  ra.fhi = static_cast<float>(add_zp ? rq.hi : rq.hi - rq.zero_point);
  ra.izp = add_zp ? 0 : rq.zero_point;
  ra.ystride = ystride;
  return ra;
}

template <typename TY>
using RqTileFn = void (*)(const int8_t* w, int64_t j4, const int32_t* corr, const uint8_t* xp, const int64_t* goff,
                          const RqTileArgs& ra, TY* y);

#if DL_QFAST_X86
template <int KB, int NV, RequantRule R, typename TY>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))) void tile_vnni_rq(
    const int8_t* w, int64_t j4, const int32_t* corr, const uint8_t* xp, const int64_t* goff, const RqTileArgs& ra,
    TY* y) {
  static_assert(R == RequantRule::float_multiply || R == RequantRule::float_multiply_add_zp, "float rules only");
  constexpr bool kAddZp = R == RequantRule::float_multiply_add_zp;
  // The accumulators pass through 64-byte-aligned stack (L1, 1.5 KB): with the requantization
  // inlined after the reduction loop, GCC 12 spilled accumulators inside that loop (measured
  // 1.5x slower).
  alignas(64) int32_t c[KB][16 * NV];
  tile_vnni<KB, NV>(w, j4, corr, xp, goff, &c[0][0], 16 * NV);
  const __m512 fzp = _mm512_set1_ps(ra.fzp), flo = _mm512_set1_ps(ra.flo), fhi = _mm512_set1_ps(ra.fhi);
  const __m512i izp = _mm512_set1_epi32(ra.izp);
  // Everything read from ra as locals first: the byte stores below may alias it (a char type).
  uint32_t vmask[NV];
  __mmask16 smask[NV];
  TY* yv[NV];
  float scale_s[KB], bias_s[KB];
  const int64_t ystride = ra.ystride;
  for (int v = 0; v < NV; ++v) {
    vmask[v] = ra.vmask[v];
    smask[v] = static_cast<__mmask16>((1u << __builtin_popcount(vmask[v])) - 1);
    yv[v] = y + ra.vstart[v];
  }
  for (int kb = 0; kb < KB; ++kb) scale_s[kb] = ra.scale[kb], bias_s[kb] = ra.bias[kb];
#pragma GCC unroll 8
  for (int kb = 0; kb < KB; ++kb) {
    const __m512 scale = _mm512_set1_ps(scale_s[kb]), bias = _mm512_set1_ps(bias_s[kb]);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const uint32_t m = vmask[v];
      if (!m) continue;
      __m512 f = _mm512_mul_ps(_mm512_add_ps(_mm512_cvtepi32_ps(_mm512_load_si512(&c[kb][16 * v])), bias), scale);
      if (kAddZp) f = _mm512_add_ps(f, fzp);
      f = _mm512_min_ps(_mm512_max_ps(f, flo), fhi);  // a NaN f becomes flo (max returns its second operand)
      const __m512i q = _mm512_add_epi32(_mm512_cvt_roundps_epi32(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), izp);
      TY* dst = yv[v] + kb * ystride;
      if (m == 0xFFFFu)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(q));
      else
        store_lanes_packed(q, m, smask[v], dst);
    }
  }
}

template <RequantRule R, typename TY>
struct RqTiles {
  RqTileFn<TY> fn[kMaxKb + 1][kMaxNv + 1] = {};
  template <int KB>
  void fill_row() {
    fn[KB][1] = tile_vnni_rq<KB, 1, R, TY>, fn[KB][2] = tile_vnni_rq<KB, 2, R, TY>, fn[KB][3] = tile_vnni_rq<KB, 3, R, TY>;
  }
  RqTiles() {
    fill_row<1>(), fill_row<2>(), fill_row<3>(), fill_row<4>(), fill_row<5>(), fill_row<6>(), fill_row<7>(),
        fill_row<8>();
  }
};
#endif

// The fused tiles for rq, or null where they do not apply (then the tile's int32 go through
// requant_row_for's row functions): the float rules with round-half-even, on a CPU with AVX-512
// VNNI (and VL: the masked 16-byte stores).
template <typename TY>
const RqTileFn<TY> (*rq_tiles_for(const Requant& rq))[kMaxNv + 1] {
#if DL_QFAST_X86
  static const bool ok = tiles().vnni && cpu_supports(CpuFeature::avx512vl);
  if (!ok || rq.round != RoundRule::half_even) return nullptr;
  if (rq.rule == RequantRule::float_multiply) {
    static const RqTiles<RequantRule::float_multiply, TY> t;
    return t.fn;
  }
  if (rq.rule == RequantRule::float_multiply_add_zp) {
    static const RqTiles<RequantRule::float_multiply_add_zp, TY> t;
    return t.fn;
  }
#else
  (void)rq;
#endif
  return nullptr;
}

template <typename TX, typename TY>
void qconv_fast(const QConv2dParams& p, const TX* x, const int8_t* w, const int32_t* bias, TY* y) {
  const Conv2dParams& g = p.g;
  // Locals, not g's fields: every byte store below may alias g (a char type), which would
  // reload them in each inner loop.
  const int64_t C = g.c, H = g.h, W = g.w, K = g.k, pad_t = g.pad_t, pad_l = g.pad_l;
  const int64_t P = g.out_h(), Q = g.out_w();
  const uint8_t flip = sign_flip(p.x_dtype);
  const int32_t zp_u = shifted_zero_point(p.x_dtype, p.x_zero_point);
  const uint8_t pad_byte = static_cast<uint8_t>(zp_u);  // only read when has_padding (then a byte: supports)
  const PackedWeights pw = pack_conv_weights(w, g, bias, zp_u);
  const QuadPlane qp = quad_plane(g);
  const int64_t ld = qp.ws, M = P * ld, mpad = round_up(M, 16);
  const RequantRowFn<TY> requant = requant_row_for<TY>(p.rq);
  const int32_t rq_zp = p.rq.zero_point, rq_lo = p.rq.lo, rq_hi = p.rq.hi;
  const std::vector<int64_t> goff = plane_group_offsets(qp, g);
  // Each 16-column vector's valid columns (oh < P, ow < Q) and where the first lands in y.
  std::vector<uint32_t> vmask(static_cast<std::size_t>(mpad / 16), 0);
  std::vector<int64_t> vstart(static_cast<std::size_t>(mpad / 16), 0);
  for (int64_t v = 0; v < mpad / 16; ++v) {
    const int64_t m0 = 16 * v;
    vstart[v] = std::min(m0 / ld, P) * Q + (m0 / ld < P ? std::min(m0 % ld, Q) : 0);
    for (int i = 0; i < 16; ++i)
      if (m0 + i < M && (m0 + i) % ld < Q) vmask[v] |= 1u << i;
  }
  const auto tile_fn = tiles().table(p.dot);
  const int64_t nblocks = (mpad / 16 + kMaxNv - 1) / kMaxNv;
  // the fused VNNI tiles sum exactly: the pairs rule requantizes the tile's int32 instead
  const auto rq_tiles = p.dot == DotRule::exact ? rq_tiles_for<TY>(p.rq) : nullptr;
  std::vector<float> scales, biases;
  const RqTileArgs ra = rq_tiles ? rq_tile_args(p.rq, K, P * Q, scales, biases) : RqTileArgs{};

#pragma omp parallel
  {
    std::vector<uint8_t> plane(static_cast<std::size_t>(plane_bytes(qp, P)), pad_byte);
    std::vector<int32_t> cbuf(static_cast<std::size_t>(kMaxKb * 16 * kMaxNv));
    alignas(64) TY row[16 * kMaxNv];
    const std::vector<uint8_t> zeros(static_cast<std::size_t>(W), 0);  // channels past C (weights 0)
#pragma omp for schedule(static)
    for (int64_t n = 0; n < g.n; ++n) {
      // 1) the image into the plane (padding and slack already hold zp_u)
      const uint8_t* xn = reinterpret_cast<const uint8_t*>(x) + n * C * H * W;
      fill_plane(qp, xn, C, H, W, pad_t, pad_l, flip, zeros.data(), plane.data());
#if DL_QFAST_X86
      // the next image's bytes towards L2 while this one's GEMM runs: from a batch too large for
      // the caches the copy above otherwise waits on memory (measured: ResNet-20's stride-2
      // 16->32 conv took 3x as long per image at batch 1000 as at batch 100)
      if (n + 1 < g.n)
        for (int64_t i = 0; i < C * H * W; i += 64)
          _mm_prefetch(reinterpret_cast<const char*>(xn + C * H * W + i), _MM_HINT_T1);
#endif
      // 2) per tile of output channels x columns: the accumulators, requantized into y's pixels
      for (int64_t k0 = 0; k0 < K; k0 += kMaxKb) {
        const int kb = static_cast<int>(std::min<int64_t>(kMaxKb, K - k0));
        for (int64_t b = 0; b < nblocks; ++b) {
          const int64_t v0 = b * kMaxNv;
          const int nv = static_cast<int>(std::min<int64_t>(kMaxNv, mpad / 16 - v0));
          if (rq_tiles) {
            RqTileArgs a = ra;
            a.scale = scales.data() + k0, a.bias = biases.data() + k0;
            a.vmask = vmask.data() + v0, a.vstart = vstart.data() + v0;
            rq_tiles[kb][nv](pw.data() + k0 * pw.j4, pw.j4, pw.corr.data() + k0, plane.data() + 64 * v0,
                             goff.data(), a, y + (n * K + k0) * P * Q);
            continue;
          }
          const int64_t ldc = 16 * nv;
          tile_fn[kb][nv](pw.data() + k0 * pw.j4, pw.j4, pw.corr.data() + k0, plane.data() + 64 * v0, goff.data(),
                          cbuf.data(), ldc);
          for (int i = 0; i < kb; ++i) {
            TY* yk = y + (n * K + k0 + i) * P * Q;
            requant(cbuf.data() + i * ldc, ldc, p.rq.channel(k0 + i), rq_zp, rq_lo, rq_hi, row);
            for (int v = 0; v < nv; ++v)
              if (vmask[v0 + v]) store_valid(row + 16 * v, vmask[v0 + v], yk + vstart[v0 + v]);
          }
        }
      }
    }
  }
}

// The share of the quad plane's GEMM columns that are outputs: P * Q of round_up(P * ws, 16). Small
// planes waste most of a tile (VGG-16's 4x4 layers: 16 of 32 columns, its 2x2 ones 4 of 16: the
// ws - Q columns past each row and the rounding to 16).
double plane_column_share(const Conv2dParams& g) {
  const QuadPlane qp = quad_plane(g);
  return static_cast<double>(g.out_h() * g.out_w()) / static_cast<double>(round_up(g.out_h() * qp.ws, 16));
}

// Below this share the convolution gathers its output columns (qconv_gathered). A property of the
// shape only, so which path runs never depends on a timing (and both give the same bytes).
constexpr double kGatherBelowShare = 0.85;

// The output columns' words of every group, row by row: output pixel (oh, ow) is plane column
// oh * ws + ow, so each output row is Q consecutive words of the group's window. dst[g * ld + i]
// = the word of pixel i (i = oh * Q + ow) in group g. kQ > 0: Q known at compile time, so the row
// copies have a constant size (vector moves, the small planes' widths); 0: Q at run time.
template <int kQ>
void gather_rows_q(const uint8_t* plane, const int64_t* goff, int64_t groups, int64_t P, int64_t Q, int64_t ws,
                   uint32_t* dst, int64_t ld) {
  const int64_t q = kQ > 0 ? kQ : Q;
  for (int64_t gi = 0; gi < groups; ++gi) {
    const uint8_t* src = plane + goff[gi];
    uint32_t* d = dst + gi * ld;
    for (int64_t oh = 0; oh < P; ++oh) std::memcpy(d + oh * q, src + 4 * oh * ws, static_cast<std::size_t>(4 * q));
  }
}
void gather_rows(const uint8_t* plane, const int64_t* goff, int64_t groups, int64_t P, int64_t Q, int64_t ws,
                 uint32_t* dst, int64_t ld) {
  switch (Q) {
    case 2: return gather_rows_q<2>(plane, goff, groups, P, Q, ws, dst, ld);
    case 4: return gather_rows_q<4>(plane, goff, groups, P, Q, ws, dst, ld);
    case 8: return gather_rows_q<8>(plane, goff, groups, P, Q, ws, dst, ld);
    default: return gather_rows_q<0>(plane, goff, groups, P, Q, ws, dst, ld);
  }
}

// Small output planes: each image still goes into its quad plane, but then only its P * Q output
// columns are gathered, group by group (the 4-byte word the tile would read for that column: the
// same word, padding included), into a group-major panel (gemm_panel's Xp[g][m][4]) holding the
// columns of several images, and the GEMM runs over those columns only. The same words meet the
// same weights: the same integers, requantized by qconv_fast's fused tiles or its row function.
template <typename TX, typename TY>
void qconv_gathered(const QConv2dParams& p, const TX* x, const int8_t* w, const int32_t* bias, TY* y) {
  const Conv2dParams& g = p.g;
  const int64_t C = g.c, H = g.h, W = g.w, K = g.k, pad_t = g.pad_t, pad_l = g.pad_l;
  const int64_t P = g.out_h(), Q = g.out_w(), PQ = P * Q;
  const uint8_t flip = sign_flip(p.x_dtype);
  const int32_t zp_u = shifted_zero_point(p.x_dtype, p.x_zero_point);
  const uint8_t pad_byte = static_cast<uint8_t>(zp_u);
  const PackedWeights pw = pack_conv_weights(w, g, bias, zp_u);
  const QuadPlane qp = quad_plane(g);
  const int64_t groups = pw.j4 / 4;
  const std::vector<int64_t> goff = plane_group_offsets(qp, g);
  // Images per panel: about 128 columns, and at least one panel per thread.
  const int64_t threads = omp_get_max_threads();
  const int64_t per = std::max<int64_t>(1, std::min<int64_t>(128 / PQ, (g.n + threads - 1) / threads));
  const int64_t chunks = (g.n + per - 1) / per, mpad = round_up(per * PQ, 16);
  const RequantRowFn<TY> requant = requant_row_for<TY>(p.rq);
  // The fused requantizing tiles (qconv_fast's) where a 16-column vector never spans two images
  // (P * Q a multiple of 16): each vector's first pixel is then one image's, at vstart.
  const auto rq_tiles = p.dot == DotRule::exact && PQ % 16 == 0 ? rq_tiles_for<TY>(p.rq) : nullptr;
  std::vector<float> scales, biases;
  const RqTileArgs ra = rq_tiles ? rq_tile_args(p.rq, K, PQ, scales, biases) : RqTileArgs{};
  std::vector<int64_t> panel_goff(static_cast<std::size_t>(groups));  // group gi's columns in the panel
  for (int64_t gi = 0; gi < groups; ++gi) panel_goff[gi] = gi * mpad * 4;
#pragma omp parallel
  {
    std::vector<uint8_t> plane(static_cast<std::size_t>(plane_bytes(qp, P)), pad_byte);
    std::vector<uint32_t> panel(static_cast<std::size_t>(groups * mpad), 0);
    std::vector<uint32_t> vmask(static_cast<std::size_t>(mpad / 16));
    std::vector<int64_t> vstart(static_cast<std::size_t>(mpad / 16));
    std::vector<int32_t> acc(static_cast<std::size_t>(K * mpad));
    std::vector<TY> row(static_cast<std::size_t>(mpad));
    const std::vector<uint8_t> zeros(static_cast<std::size_t>(W), 0);
#pragma omp for schedule(static)
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t n0 = ch * per, nb = std::min(per, g.n - n0);
      for (int64_t b = 0; b < nb; ++b) {
        fill_plane(qp, reinterpret_cast<const uint8_t*>(x) + (n0 + b) * C * H * W, C, H, W, pad_t, pad_l, flip,
                   zeros.data(), plane.data());
        gather_rows(plane.data(), goff.data(), groups, P, Q, qp.ws, panel.data() + b * PQ, mpad);
      }
      if (rq_tiles) {
        const uint8_t* xp = reinterpret_cast<const uint8_t*>(panel.data());
        for (int64_t v = 0; v < mpad / 16; ++v) {  // vector v: image n0 + 16v / PQ, its pixel 16v % PQ
          vmask[v] = 16 * v < nb * PQ ? 0xFFFFu : 0u;
          vstart[v] = (n0 + 16 * v / PQ) * K * PQ + 16 * v % PQ;
        }
        for (int64_t k0 = 0; k0 < K; k0 += kMaxKb) {
          const int kb = static_cast<int>(std::min<int64_t>(kMaxKb, K - k0));
          for (int64_t v0 = 0; v0 < mpad / 16; v0 += kMaxNv) {
            const int nv = static_cast<int>(std::min<int64_t>(kMaxNv, mpad / 16 - v0));
            RqTileArgs a = ra;
            a.scale = scales.data() + k0, a.bias = biases.data() + k0;
            a.vmask = vmask.data() + v0, a.vstart = vstart.data() + v0;
            rq_tiles[kb][nv](pw.data() + k0 * pw.j4, pw.j4, pw.corr.data() + k0, xp + 64 * v0, panel_goff.data(), a,
                             y + k0 * PQ);
          }
        }
        continue;
      }
      gemm_panel(pw, reinterpret_cast<const uint8_t*>(panel.data()), mpad, acc.data(), p.dot);
      for (int64_t k = 0; k < K; ++k) {
        requant(acc.data() + k * mpad, nb * PQ, p.rq.channel(k), p.rq.zero_point, p.rq.lo, p.rq.hi, row.data());
        for (int64_t b = 0; b < nb; ++b) std::memcpy(y + ((n0 + b) * K + k) * PQ, row.data() + b * PQ, PQ * sizeof(TY));
      }
    }
  }
}

// ORT's int16 pairs with an odd C (LeNet's and CIFAR's first convolutions: C = 1, 3): ORT pairs
// adjacent terms of the im2col row in (kh, kw, c) order, so a pair can span two taps, which the
// quad plane (four channels of one tap per group) cannot hold. Here each output pixel's im2col row
// is written in that order into a panel of quads (Xp[j/4][m][4], terms past R*S*C zero with weight
// 0, a padding tap the shifted zero point) and run by the pair tiles: their (t0,t1), (t2,t3) are
// then ORT's pairs.
template <typename TX, typename TY>
void qconv_im2col_pairs(const QConv2dParams& p, const TX* x, const int8_t* w, const int32_t* bias, TY* y) {
  const Conv2dParams& g = p.g;
  const int64_t C = g.c, H = g.h, W = g.w, K = g.k, R = g.r, S = g.s, P = g.out_h(), Q = g.out_w();
  const int64_t J = R * S * C, M = P * Q, mpad = round_up(M, 16);
  const uint8_t flip = sign_flip(p.x_dtype);
  const int32_t zp_u = shifted_zero_point(p.x_dtype, p.x_zero_point);
  // weights (K,C,R,S) to the row order (K, R,S,C)
  std::vector<int8_t> w_rsc(static_cast<std::size_t>(K * J));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t rs = 0; rs < R * S; ++rs) w_rsc[k * J + rs * C + c] = w[(k * C + c) * R * S + rs];
  const PackedWeights pw = pack_weights(w_rsc.data(), K, J, bias, zp_u);
  const RequantRowFn<TY> requant = requant_row_for<TY>(p.rq);
#pragma omp parallel
  {
    std::vector<uint8_t> panel(static_cast<std::size_t>(pw.j4 * mpad), 0);
    std::vector<int32_t> acc(static_cast<std::size_t>(K * mpad));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < g.n; ++n) {
      const uint8_t* xn = reinterpret_cast<const uint8_t*>(x + n * C * H * W);
      for (int64_t m = 0; m < M; ++m) {
        const int64_t oh = m / Q, ow = m % Q;
        int64_t j = 0;
        for (int64_t r = 0; r < R; ++r)
          for (int64_t s2 = 0; s2 < S; ++s2) {
            const int64_t ih = oh * g.stride_h - g.pad_t + r * g.dil_h, iw = ow * g.stride_w - g.pad_l + s2 * g.dil_w;
            const bool pad = ih < 0 || ih >= H || iw < 0 || iw >= W;
            for (int64_t c = 0; c < C; ++c, ++j)
              panel[((j / 4) * mpad + m) * 4 + j % 4] =
                  pad ? static_cast<uint8_t>(zp_u) : static_cast<uint8_t>(xn[(c * H + ih) * W + iw] ^ flip);
          }
      }
      gemm_panel(pw, panel.data(), mpad, acc.data(), DotRule::int16_pairs_hwc);
      for (int64_t k = 0; k < K; ++k)
        requant(acc.data() + k * mpad, M, p.rq.channel(k), p.rq.zero_point, p.rq.lo, p.rq.hi, y + (n * K + k) * M);
    }
  }
}

// A depthwise convolution (MobileNet's): each (image, channel) plane with its own R x S taps, the
// planes in parallel. Each output is the reference's int32 sum (integers: the same in any order) plus
// the bias, requantized by the shared requantize_one: the reference's bytes.
template <typename TX, typename TY>
void qconv_depthwise(const QConv2dParams& p, const TX* x, const int8_t* w, const int32_t* bias, TY* y) {
  const Conv2dParams& g = p.g;
  const int64_t C = g.c, H = g.h, W = g.w, P = g.out_h(), Q = g.out_w(), R = g.r, S = g.s;
  const int64_t sh = g.stride_h, sw = g.stride_w, dh = g.dil_h, dw = g.dil_w, pt = g.pad_t, pl = g.pad_l;
  const int32_t zp = p.x_zero_point;
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < g.n * C; ++nc) {
    const int64_t c = nc % C;
    const TX* xp = x + nc * H * W;
    const int8_t* wp = w + c * R * S;
    TY* yp = y + nc * P * Q;
    const RequantChannel& rc = p.rq.channel(c);
    const int32_t b = bias ? bias[c] : 0;
    for (int64_t oh = 0; oh < P; ++oh)
      for (int64_t ow = 0; ow < Q; ++ow) {
        int32_t acc = 0;
        for (int64_t r = 0; r < R; ++r) {
          const int64_t ih = oh * sh - pt + r * dh;
          if (ih < 0 || ih >= H) continue;  // padding: x_zp - x_zp = 0
          const TX* row = xp + ih * W;
          const int8_t* wr = wp + r * S;
          for (int64_t t = 0; t < S; ++t) {
            const int64_t iw = ow * sw - pl + t * dw;
            if (iw >= 0 && iw < W) acc += (static_cast<int32_t>(row[iw]) - zp) * static_cast<int32_t>(wr[t]);
          }
        }
        yp[oh * Q + ow] =
            static_cast<TY>(requantize_one(acc + b, rc, p.rq.rule, p.rq.round, p.rq.zero_point, p.rq.lo, p.rq.hi));
      }
  }
}

using quant_loops::dispatch_xy;

// x:(N,C,H,W) w:(K,C,R,S) int8, bias:(K) int32, y:(N,K,P,Q)
void qconv2d_forward_fast(const QConv2dParams& p, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  p.validate();
  check_q_io("qconv2d", p.x_dtype, p.y_dtype, x, p.g.x_shape(), w, p.g.w_shape(), bias, p.g.k, p.has_bias, y,
             p.g.y_shape());
  check(qconv2d_supports(p, x.dtype()), "qconv2d fast: called outside supports() (", p.g.str(), ")");
  dispatch_xy(p.x_dtype, p.y_dtype, "qconv2d", [&](auto xt, auto yt) {
    using TX = decltype(xt);
    using TY = decltype(yt);
    const int32_t* b = bias ? bias->data<int32_t>() : nullptr;
    if (p.g.groups != 1)
      qconv_depthwise(p, x.data<TX>(), w.data<int8_t>(), b, y.data<TY>());
    else if (p.dot == DotRule::int16_pairs_hwc && p.g.c % 2 == 1)
      qconv_im2col_pairs(p, x.data<TX>(), w.data<int8_t>(), b, y.data<TY>());
    else if (plane_column_share(p.g) < kGatherBelowShare)
      qconv_gathered(p, x.data<TX>(), w.data<int8_t>(), b, y.data<TY>());
    else
      qconv_fast(p, x.data<TX>(), w.data<int8_t>(), b, y.data<TY>());
  });
}

}  // namespace

void register_qconv2d_fast(KernelRegistry& reg) {
  reg.qconv2d.at(KernelBackend::fast) = {
      "fast",
      "int8/uint8 in and out, any geometry of one group, and depthwise (other groupings: the reference); padding only where the zero point (+128 for int8) is a byte; "
      "exact sums, and the int16 pair rules where the layout allows (oneDNN's channel pairs; ORT's (kh, kw, c) pairs, "
      "an odd channel count over an im2col panel; not depthwise); AVX-512 VNNI where the CPU has it",
      qconv2d_supports, qconv2d_forward_fast};
}

}  // namespace driftlab
