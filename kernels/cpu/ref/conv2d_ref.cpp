// Reference conv2d: single-threaded loops, float and double, every Conv2dParams field
// honoured; the terms of each output are collected and summed in params.sum_order.
// Layouts x (N,C,H,W), w (K,C/G,R,S), y (N,K,P,Q); output channel k reads input channels
// g*C/G .. (g+1)*C/G - 1 of its group g = k/(K/G). forward/backward_data write (=);
// backward_weight adds (+=) into dw and db. This is the oracle for every fast conv kernel.
//
// One case is computed by other loops with the same bits: a depthwise convolution (one input
// channel per group, any multiplier) summed in ascending order, the case of MobileNet's
// depthwise layers, which no library backend here takes (oneDNN's and Eigen's kernels refuse
// groups). Every output still adds the same terms (padding's zero products included where the
// generic loops include them, skipped where they skip them) in the same order from 0, but
// without the term buffer and the per-tap bounds checks: with 8 channels or more (multiplier 1) the
// forward and the input gradient make the channels the innermost axis (vector lanes over
// channels, no per-plane costs on MobileNet's many small planes); otherwise the forward reads a
// zero-padded copy of each plane, one pass per tap; the weight gradient sums each weight's terms
// in order, one channel per thread (a channels-inner weight gradient was tried 2026-11-29 and
// measured no faster on MobileNetV2's training step). Each output is written by one thread. Test:
// ConvRef.DepthwiseLoopsGiveTheGenericLoopsBits (tests/ops/test_conv2d.cpp), every field varied.
// The channels-inner case also takes channel-blocked tensors (Conv2dKernel::any_block: blocks of 8
// or 16 channels, y and dx in x's and dy's block), whose (image, block) planes already have the
// channels innermost: a graph keeps its activations blocked through its depthwise layers instead
// of converting around each. Same bits (ConvRef.BlockedDepthwiseGivesThePlainBits).
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/ops/conv2d.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

// Index of the kernel tap actually applied at (r,s): rotated 180 degrees when flipping.
inline int64_t tap(int64_t i, int64_t n, bool flip) { return flip ? n - 1 - i : i; }

// ---- the depthwise case (see the file comment): the generic loops' bits, other loops ----

std::atomic<int> g_generic_only{0};
// Layers of at least this many channels (multiplier 1) take the channels-inner forward: enough
// for the vector lanes (measured 2026-11-29 on MobileNetV2 at 32x32, 1000 images, 2 threads: the
// prediction 0.70 s with the plane loops for every layer, 0.49 s with channels-inner for planes of
// up to 8x8, 0.40-0.43 s with it for every layer).
constexpr int64_t kChannelsInnerMin = 8;
bool generic_loops_only() { return g_generic_only.load(std::memory_order_relaxed) > 0; }

bool depthwise_case(const Conv2dParams& p) {
  return p.groups == p.c && p.sum_order == SumOrder::ascending && !generic_loops_only();
}

// The case whose loops read and write channel-blocked tensors: the channels-inner one (multiplier 1).
bool blocked_case(const Conv2dParams& p) { return depthwise_case(p) && p.k == p.c && p.k >= kChannelsInnerMin; }

// A depthwise weight (K,1,R,S) as (R*S, K): the tap applied at (r,s) (flipped where the params say),
// the channels innermost: what the channels-inner loops read.
template <typename T>
std::vector<T> taps_channels_last(const Conv2dParams& p, const T* w) {
  const int64_t K = p.k, RS = p.r * p.s;
  std::vector<T> wt(static_cast<std::size_t>(RS * K));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t r = 0; r < p.r; ++r)
      for (int64_t s = 0; s < p.s; ++s)
        wt[static_cast<std::size_t>((r * p.s + s) * K + k)] = w[k * RS + tap(r, p.r, p.flip) * p.s + tap(s, p.s, p.flip)];
  return wt;
}

// Multiplier 1 and enough channels (MobileNet's layers: 4x4 down to 1x1 planes of hundreds of
// channels, where the plane loops' per-plane costs dominate): per image, the channels made the
// innermost axis (the input and the taps transposed once), every output position's taps in the
// generic loops' order, each a pass over the channels (contiguous: the compiler's vector lanes); a
// tap reading padding adds 0 * w as the generic loops do.
template <typename T>
void depthwise_forward_channels_inner(const Conv2dParams& p, const T* x, const T* w, const T* b, T* y) {
  const int64_t P = p.out_h(), Q = p.out_w(), K = p.k, HW = p.h * p.w, PQ = P * Q;
  const std::vector<T> wt = taps_channels_last(p, w);
#pragma omp parallel
  {
    std::vector<T> xt(static_cast<std::size_t>(HW * K)), acc(static_cast<std::size_t>(PQ * K));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < p.n; ++n) {
      const T* xn = x + n * K * HW;
      for (int64_t k = 0; k < K; ++k)
        for (int64_t i = 0; i < HW; ++i) xt[static_cast<std::size_t>(i * K + k)] = xn[k * HW + i];
      std::fill(acc.begin(), acc.end(), T(0));
      for (int64_t r = 0; r < p.r; ++r)
        for (int64_t s = 0; s < p.s; ++s) {
          const T* wr = wt.data() + (r * p.s + s) * K;
          for (int64_t oh = 0; oh < P; ++oh) {
            const int64_t ih = oh * p.stride_h - p.pad_t + r * p.dil_h;
            for (int64_t ow = 0; ow < Q; ++ow) {
              const int64_t iw = ow * p.stride_w - p.pad_l + s * p.dil_w;
              T* a = acc.data() + (oh * Q + ow) * K;
              if (ih >= 0 && ih < p.h && iw >= 0 && iw < p.w) {
                const T* xr = xt.data() + (ih * p.w + iw) * K;
                for (int64_t k = 0; k < K; ++k) a[k] += xr[k] * wr[k];
              } else {
                for (int64_t k = 0; k < K; ++k) a[k] += T(0) * wr[k];
              }
            }
          }
        }
      T* yn = y + n * K * PQ;
      for (int64_t k = 0; k < K; ++k)
        for (int64_t o = 0; o < PQ; ++o) {
          const T v = acc[static_cast<std::size_t>(o * K + k)];
          yn[k * PQ + o] = b ? v + b[k] : v;
        }
    }
  }
}

// A ConvChannelOp's values as T pointers (indexed by channel) and its activation.
template <typename T>
struct ChannelOpArgs {
  const T *mean = nullptr, *scale = nullptr, *gamma = nullptr, *beta = nullptr;
  ConvChannelOp::Act act = ConvChannelOp::Act::none;
  T lo = T(0), hi = T(0);
};

// A ChannelOpArgs for one block of B channels as vectors V of B lanes: the batchnorm's operations
// in its order on the lanes, then the activation lane by lane as vector selects (a scalar loop
// here made the whole op twice as slow): the same comparisons choose the same values, NaN kept.
template <typename T, int B>
struct ChannelOpLanes {
  typedef T V __attribute__((vector_size(sizeof(T) * B)));  // the loops' vector of B lanes
  V mean{}, scale{}, gamma{}, beta{}, lo{}, hi{};
  ConvChannelOp::Act act = ConvChannelOp::Act::none;
  ChannelOpLanes() = default;
  ChannelOpLanes(const ChannelOpArgs<T>& a, int64_t c0) : act(a.act) {
    std::memcpy(&mean, a.mean + c0, sizeof(V)), std::memcpy(&scale, a.scale + c0, sizeof(V));
    std::memcpy(&gamma, a.gamma + c0, sizeof(V)), std::memcpy(&beta, a.beta + c0, sizeof(V));
    lo = V{} + a.lo, hi = V{} + a.hi;
  }
  V operator()(V v) const {
    v = gamma * ((v - mean) * scale) + beta;  // gamma * ((v - mean) * scale) + beta, as the batchnorm
    if (act == ConvChannelOp::Act::relu) return ((v > V{}) | (v != v)) ? v : V{};
    if (act == ConvChannelOp::Act::clip) {
      const V z = v;
      v = z > hi ? hi : z;
      return z < lo ? lo : v;  // x < lo first in clip_value: lo wins where lo > hi
    }
    return v;
  }
};

// The channels-inner loops on channel-blocked tensors ((N, K/B, H, W, B), engine/layers/layout.h):
// each (image, block) is already a (H*W, B) plane with the channels innermost, so the forward reads
// it with no transposes and sums each output position's B channels in registers over its taps;
// every element's terms, their order and the bias after them are the channels-inner loops', so the
// bits are theirs.
// KR x KS: the kernel's size when known at compile time (3 x 3, MobileNet's: the taps unrolled, the
// weights in registers), 0 x 0 for any size.
// Each (image, block) input plane is copied into a buffer the thread reuses with its padding
// written as zeros around it (Hp x Wp positions: 16 KB for 16 lanes of a 16x16 plane), through the
// ConvChannelOp `pre` where given (one pass over the input instead of the separate op's write and
// this loop's read of its output). Every output position then reads only the buffer, a padding tap
// reading 0 and adding 0 * w: the generic loops' term. kU positions at a time, each its own sum in
// its own register with the taps in the same (r, s) order: the same bits, kU independent chains of
// adds (one position's nine dependent adds bounded the loop: MobileNetV2's prediction 3% faster,
// docs/BENCHMARKS.md). post (may be null): each output position's B values, bias added, go through
// it before they are stored.
template <typename T, int B, int KR, int KS>
void depthwise_forward_blocked(const Conv2dParams& p, const T* x, const T* w, const T* b, T* y,
                               const ChannelOpArgs<T>* pre = nullptr, const ChannelOpArgs<T>* post = nullptr) {
  // B lanes as one vector (GCC's vector extension: one AVX-512 register for 16 floats, two AVX2
  // ones); with -ffp-contract=off a product and a sum stay two roundings, as in the scalar loops
  typedef T V __attribute__((vector_size(sizeof(T) * B)));
  static_assert(sizeof(V) == sizeof(T) * B, "B lanes in one vector");
  auto load = [](const T* q) {
    V v;
    std::memcpy(&v, q, sizeof(V));
    return v;
  };
  const int64_t P = p.out_h(), Q = p.out_w(), K = p.k, HW = p.h * p.w, PQ = P * Q, nb = K / B;
  const int64_t R = KR ? KR : p.r, S = KS ? KS : p.s;
  const int64_t Hp = p.h + p.pad_t + p.pad_b, Wp = p.w + p.pad_l + p.pad_r;  // pads >= 0 (validate)
  const std::vector<T> wt = taps_channels_last(p, w);
  constexpr int kU = 4;
#pragma omp parallel
  {
    std::vector<T> xt(static_cast<std::size_t>(Hp * Wp * B));  // zeros: the padding stays
#pragma omp for schedule(static)
    for (int64_t nc = 0; nc < p.n * nb; ++nc) {
      const int64_t cb = nc % nb;
      const T* xb = x + nc * HW * B;
      {
        ChannelOpLanes<T, B> op;
        if (pre) op = ChannelOpLanes<T, B>(*pre, cb * B);
        T* inner = xt.data() + (p.pad_t * Wp + p.pad_l) * B;
        for (int64_t ih = 0; ih < p.h; ++ih)
          for (int64_t iw = 0; iw < p.w; ++iw) {
            const V v = pre ? op(load(xb + (ih * p.w + iw) * B)) : load(xb + (ih * p.w + iw) * B);
            std::memcpy(inner + (ih * Wp + iw) * B, &v, sizeof(V));
          }
      }
      T* yb = y + nc * PQ * B;
      const T* wc = wt.data() + cb * B;  // tap t's B weights at wc + t * K
      const V bias = b ? load(b + cb * B) : V{};
      ChannelOpLanes<T, B> op;
      if (post) op = ChannelOpLanes<T, B>(*post, cb * B);
      // output position o: its first tap in the buffer; its sum, the bias and the op after it stored
      auto first_tap = [&](int64_t o) { return xt.data() + ((o / Q) * p.stride_h * Wp + (o % Q) * p.stride_w) * B; };
      auto store = [&](V acc, int64_t o) {
        if (b) acc += bias;
        if (post) acc = op(acc);
        std::memcpy(yb + o * B, &acc, sizeof(V));
      };
      // U positions from o, side by side
      auto positions = [&](auto u_count, int64_t o) {
        constexpr int U = decltype(u_count)::value;
        const T* at[U];
        V acc[U];
        for (int u = 0; u < U; ++u) at[u] = first_tap(o + u), acc[u] = V{};
        for (int64_t r = 0; r < R; ++r)
          for (int64_t s = 0; s < S; ++s) {
            const V wv = load(wc + (r * S + s) * K);
            const int64_t off = (r * p.dil_h * Wp + s * p.dil_w) * B;
            for (int u = 0; u < U; ++u) acc[u] += load(at[u] + off) * wv;
          }
        for (int u = 0; u < U; ++u) store(acc[u], o + u);
      };
      int64_t o = 0;
      for (; o + kU <= PQ; o += kU) positions(std::integral_constant<int, kU>(), o);
      for (; o < PQ; ++o) positions(std::integral_constant<int, 1>(), o);
    }
  }
}

// The channels-inner input gradient on channel-blocked dy and dx (as the forward above).
template <typename T, int B>
void depthwise_backward_data_blocked(const Conv2dParams& p, const T* dy, const T* w, T* dx) {
  const int64_t P = p.out_h(), Q = p.out_w(), K = p.k, HW = p.h * p.w, PQ = P * Q, nb = K / B;
  const std::vector<T> wt = taps_channels_last(p, w);
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < p.n * nb; ++nc) {
    const int64_t cb = nc % nb;
    const T* dyb = dy + nc * PQ * B;
    T* dxb = dx + nc * HW * B;
    for (int64_t ih = 0; ih < p.h; ++ih)
      for (int64_t iw = 0; iw < p.w; ++iw) {
        T acc[B] = {};  // one input position's B sums in registers, its valid taps in (r, s) order
        for (int64_t r = 0; r < p.r; ++r) {
          const int64_t num_h = ih + p.pad_t - r * p.dil_h;
          if (num_h < 0 || num_h % p.stride_h) continue;
          const int64_t oh = num_h / p.stride_h;
          if (oh >= P) continue;
          for (int64_t s = 0; s < p.s; ++s) {
            const int64_t num_w = iw + p.pad_l - s * p.dil_w;
            if (num_w < 0 || num_w % p.stride_w) continue;
            const int64_t ow = num_w / p.stride_w;
            if (ow >= Q) continue;
            const T* d = dyb + (oh * Q + ow) * B;
            const T* wr = wt.data() + (r * p.s + s) * K + cb * B;
            for (int k = 0; k < B; ++k) acc[k] += d[k] * wr[k];
          }
        }
        T* o = dxb + (ih * p.w + iw) * B;
        for (int k = 0; k < B; ++k) o[k] = acc[k];
      }
  }
}

template <typename T>
void depthwise_forward(const Conv2dParams& p, const T* x, const T* w, const T* b, T* y) {
  const int64_t P = p.out_h(), Q = p.out_w(), m = p.k / p.groups;
  if (m == 1 && p.k >= kChannelsInnerMin) return depthwise_forward_channels_inner(p, x, w, b, y);
  // Each (image, channel) plane is copied into a zero-padded one large enough for every tap: a tap
  // that reads padding then adds the zero product the generic loops add (0 * w, its sign
  // included), and every tap is one branch-free pass over the output plane, the taps in the
  // generic loops' (r, s) order.
  const int64_t Hp = std::max(p.h + p.pad_t, (P - 1) * p.stride_h + (p.r - 1) * p.dil_h + 1);
  const int64_t Wp = std::max(p.w + p.pad_l, (Q - 1) * p.stride_w + (p.s - 1) * p.dil_w + 1);
#pragma omp parallel
  {
    std::vector<T> pad(static_cast<std::size_t>(Hp * Wp), T(0)), acc(static_cast<std::size_t>(P * Q));
    int64_t filled = -1;  // the input plane pad holds (planes of one channel repeat for m > 1)
#pragma omp for schedule(static)
    for (int64_t nk = 0; nk < p.n * p.k; ++nk) {
      const int64_t n = nk / p.k, k = nk % p.k, c = k / m, plane = n * p.c + c;
      if (plane != filled) {
        const T* xc = x + plane * p.h * p.w;
        for (int64_t ih = 0; ih < p.h; ++ih)
          std::copy(xc + ih * p.w, xc + (ih + 1) * p.w, pad.data() + (ih + p.pad_t) * Wp + p.pad_l);
        filled = plane;
      }
      const T* wk = w + k * p.r * p.s;
      std::fill(acc.begin(), acc.end(), T(0));
      T* a = acc.data();
      for (int64_t r = 0; r < p.r; ++r)
        for (int64_t s = 0; s < p.s; ++s) {
          const T wv = wk[tap(r, p.r, p.flip) * p.s + tap(s, p.s, p.flip)];
          for (int64_t oh = 0; oh < P; ++oh) {
            const T* xr = pad.data() + (oh * p.stride_h + r * p.dil_h) * Wp + s * p.dil_w;
            T* ar = a + oh * Q;
            if (p.stride_w == 1) {
              for (int64_t ow = 0; ow < Q; ++ow) ar[ow] += xr[ow] * wv;
            } else {
              for (int64_t ow = 0; ow < Q; ++ow) ar[ow] += xr[ow * p.stride_w] * wv;
            }
          }
        }
      T* yk = y + nk * P * Q;
      if (b) {
        for (int64_t i = 0; i < P * Q; ++i) yk[i] = a[i] + b[k];
      } else {
        std::copy(acc.begin(), acc.end(), yk);
      }
    }
  }
}

// The input gradient with the channels innermost (multiplier 1, as the forward's): per image, dy and
// the taps transposed once, every input position's valid taps in the generic loops' (r, s) order,
// each a pass over the channels; taps off the output grid skipped as there.
template <typename T>
void depthwise_backward_data_channels_inner(const Conv2dParams& p, const T* dy, const T* w, T* dx) {
  const int64_t P = p.out_h(), Q = p.out_w(), K = p.k, HW = p.h * p.w, PQ = P * Q;
  const std::vector<T> wt = taps_channels_last(p, w);
#pragma omp parallel
  {
    std::vector<T> dyt(static_cast<std::size_t>(PQ * K)), acc(static_cast<std::size_t>(HW * K));
#pragma omp for schedule(static)
    for (int64_t n = 0; n < p.n; ++n) {
      const T* dyn = dy + n * K * PQ;
      for (int64_t k = 0; k < K; ++k)
        for (int64_t o = 0; o < PQ; ++o) dyt[static_cast<std::size_t>(o * K + k)] = dyn[k * PQ + o];
      std::fill(acc.begin(), acc.end(), T(0));
      for (int64_t ih = 0; ih < p.h; ++ih)
        for (int64_t iw = 0; iw < p.w; ++iw) {
          T* a = acc.data() + (ih * p.w + iw) * K;
          for (int64_t r = 0; r < p.r; ++r) {
            const int64_t num_h = ih + p.pad_t - r * p.dil_h;
            if (num_h < 0 || num_h % p.stride_h) continue;
            const int64_t oh = num_h / p.stride_h;
            if (oh >= P) continue;
            for (int64_t s = 0; s < p.s; ++s) {
              const int64_t num_w = iw + p.pad_l - s * p.dil_w;
              if (num_w < 0 || num_w % p.stride_w) continue;
              const int64_t ow = num_w / p.stride_w;
              if (ow >= Q) continue;
              const T* d = dyt.data() + (oh * Q + ow) * K;
              const T* wr = wt.data() + (r * p.s + s) * K;
              for (int64_t k = 0; k < K; ++k) a[k] += d[k] * wr[k];
            }
          }
        }
      T* dxn = dx + n * K * HW;
      for (int64_t k = 0; k < K; ++k)
        for (int64_t i = 0; i < HW; ++i) dxn[k * HW + i] = acc[static_cast<std::size_t>(i * K + k)];
    }
  }
}

template <typename T>
void depthwise_backward_data(const Conv2dParams& p, const T* dy, const T* w, T* dx) {
  const int64_t P = p.out_h(), Q = p.out_w(), m = p.k / p.groups;
  if (m == 1 && p.k >= kChannelsInnerMin) return depthwise_backward_data_channels_inner(p, dy, w, dx);
#pragma omp parallel
  {
    std::vector<T> acc(static_cast<std::size_t>(p.w));
#pragma omp for schedule(static)
    for (int64_t nc = 0; nc < p.n * p.c; ++nc) {
      const int64_t n = nc / p.c, c = nc % p.c;
      T* dxc = dx + nc * p.h * p.w;
      for (int64_t ih = 0; ih < p.h; ++ih) {
        std::fill(acc.begin(), acc.end(), T(0));
        // the terms of dx[ih, iw] in the generic loops' order: k of the channel, r, s; a tap
        // whose output position is off the grid or out of range is skipped, as there
        for (int64_t k = c * m; k < (c + 1) * m; ++k) {
          const T* dyk = dy + (n * p.k + k) * P * Q;
          const T* wk = w + k * p.r * p.s;
          for (int64_t r = 0; r < p.r; ++r) {
            const int64_t num_h = ih + p.pad_t - r * p.dil_h;
            if (num_h < 0 || num_h % p.stride_h) continue;
            const int64_t oh = num_h / p.stride_h;
            if (oh >= P) continue;
            const T* dyr = dyk + oh * Q;
            for (int64_t s = 0; s < p.s; ++s) {
              const T wv = wk[tap(r, p.r, p.flip) * p.s + tap(s, p.s, p.flip)];
              const int64_t off = p.pad_l - s * p.dil_w;  // num_w = iw + off
              // iw with 0 <= num_w, num_w % stride_w == 0, num_w / stride_w < Q
              int64_t iw = off >= 0 ? 0 : -off;
              if (p.stride_w == 1) {
                const int64_t end = std::min<int64_t>(p.w, Q - off);
                T* a = acc.data();
                for (int64_t i = iw; i < end; ++i) a[i] += dyr[i + off] * wv;
              } else {
                for (; iw < p.w; ++iw) {
                  const int64_t num_w = iw + off;
                  if (num_w % p.stride_w) continue;
                  const int64_t ow = num_w / p.stride_w;
                  if (ow >= Q) break;
                  acc[static_cast<std::size_t>(iw)] += dyr[ow] * wv;
                }
              }
            }
          }
        }
        std::copy(acc.begin(), acc.end(), dxc + ih * p.w);
      }
    }
  }
}

template <typename T>
void depthwise_backward_weight(const Conv2dParams& p, const T* x, const T* dy, T* dw, T* db) {
  const int64_t P = p.out_h(), Q = p.out_w(), m = p.k / p.groups;
  // each weight's terms over (n, oh, ow) in order, the taps reading padding skipped (as the
  // generic loops skip them); one thread per output channel
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < p.k; ++k) {
    const int64_t c = k / m;
    for (int64_t r = 0; r < p.r; ++r)
      for (int64_t s = 0; s < p.s; ++s) {
        T acc = 0;
        for (int64_t n = 0; n < p.n; ++n) {
          const T* xc = x + (n * p.c + c) * p.h * p.w;
          const T* dyk = dy + (n * p.k + k) * P * Q;
          for (int64_t oh = 0; oh < P; ++oh) {
            const int64_t ih = oh * p.stride_h - p.pad_t + r * p.dil_h;
            if (ih < 0 || ih >= p.h) continue;
            for (int64_t ow = 0; ow < Q; ++ow) {
              const int64_t iw = ow * p.stride_w - p.pad_l + s * p.dil_w;
              if (iw < 0 || iw >= p.w) continue;
              acc += xc[ih * p.w + iw] * dyk[oh * Q + ow];
            }
          }
        }
        dw[(k * p.r + tap(r, p.r, p.flip)) * p.s + tap(s, p.s, p.flip)] += acc;
      }
    if (db) {
      T a = 0;
      for (int64_t n = 0; n < p.n; ++n)
        for (int64_t i = 0; i < P * Q; ++i) a += dy[(n * p.k + k) * P * Q + i];
      db[k] += a;
    }
  }
}

// The weight gradient on channel-blocked x and dy: each lane is one channel's scalar loop above
// (its terms over (n, oh, ow) in order, the taps reading padding skipped; db's over (n, oh, ow)),
// so the bits are the same; B channels a vector, and up to kTaps taps of a kernel row summed side
// by side, each its own chain. One task per (block, kernel row), reading the block's planes.
template <typename T, int B>
void depthwise_backward_weight_blocked(const Conv2dParams& p, const T* x, const T* dy, T* dw, T* db) {
  typedef T V __attribute__((vector_size(sizeof(T) * B)));
  auto load = [](const T* q) {
    V v;
    std::memcpy(&v, q, sizeof(V));
    return v;
  };
  constexpr int64_t kTaps = 8;
  const int64_t P = p.out_h(), Q = p.out_w(), HW = p.h * p.w, PQ = P * Q, nb = p.k / B;
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < nb * p.r; ++task) {
    const int64_t cb = task / p.r, r = task % p.r;
    for (int64_t s0 = 0; s0 < p.s; s0 += kTaps) {  // a row's taps s0 .. s1 - 1
      const int64_t s1 = std::min(p.s, s0 + kTaps);
      V acc[kTaps] = {};
      V bsum{};
      const bool with_db = db && r == 0 && s0 == 0;  // the block's db once, by its first task
      for (int64_t n = 0; n < p.n; ++n) {
        const T* xb = x + (n * nb + cb) * HW * B;
        const T* dyb = dy + (n * nb + cb) * PQ * B;
        for (int64_t oh = 0; oh < P; ++oh) {
          const int64_t ih = oh * p.stride_h - p.pad_t + r * p.dil_h;
          const bool row_in = ih >= 0 && ih < p.h;
          for (int64_t ow = 0; ow < Q; ++ow) {
            const V g = load(dyb + (oh * Q + ow) * B);
            if (with_db) bsum += g;
            if (!row_in) continue;
            for (int64_t s = s0; s < s1; ++s) {
              const int64_t iw = ow * p.stride_w - p.pad_l + s * p.dil_w;
              if (iw >= 0 && iw < p.w) acc[s - s0] += load(xb + (ih * p.w + iw) * B) * g;
            }
          }
        }
      }
      for (int l = 0; l < B; ++l) {
        const int64_t k = cb * B + l;
        for (int64_t s = s0; s < s1; ++s) dw[(k * p.r + tap(r, p.r, p.flip)) * p.s + tap(s, p.s, p.flip)] += acc[s - s0][l];
        if (with_db) db[k] += bsum[l];
      }
    }
  }
}

// ---- the generic loops ----

template <typename T>
void forward(const Conv2dParams& p, const T* x, const T* w, const T* b, T* y) {
  if (depthwise_case(p)) return depthwise_forward(p, x, w, b, y);
  const int64_t P = p.out_h(), Q = p.out_w();
  const int64_t cg = p.c_per_group(), kg = p.k / p.groups;
  std::vector<T> terms(static_cast<std::size_t>(cg * p.r * p.s) + 1);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t k = 0; k < p.k; ++k)
      for (int64_t oh = 0; oh < P; ++oh)
        for (int64_t ow = 0; ow < Q; ++ow) {
          int64_t t = 0;
          const int64_t c0 = (k / kg) * cg;
          for (int64_t cw = 0; cw < cg; ++cw)
            for (int64_t r = 0; r < p.r; ++r) {
              const int64_t c = c0 + cw;
              int64_t ih = oh * p.stride_h - p.pad_t + r * p.dil_h;
              for (int64_t s = 0; s < p.s; ++s) {
                int64_t iw = ow * p.stride_w - p.pad_l + s * p.dil_w;
                T xv = (ih >= 0 && ih < p.h && iw >= 0 && iw < p.w) ? x[((n * p.c + c) * p.h + ih) * p.w + iw] : T(0);
                T wv = w[((k * cg + cw) * p.r + tap(r, p.r, p.flip)) * p.s + tap(s, p.s, p.flip)];
                terms[t++] = xv * wv;
              }
            }
          // The bias is added last, after the products: the order PyTorch's and oneDNN's
          // GEMM-based paths also use (output initialised by the product, bias added after).
          T acc = ordered_sum(terms.data(), t, p.sum_order);
          y[((n * p.k + k) * P + oh) * Q + ow] = b ? acc + b[k] : acc;
        }
}

template <typename T>
void backward_data(const Conv2dParams& p, const T* dy, const T* w, T* dx) {
  if (depthwise_case(p)) return depthwise_backward_data(p, dy, w, dx);
  const int64_t P = p.out_h(), Q = p.out_w();
  const int64_t cg = p.c_per_group(), kg = p.k / p.groups;
  std::vector<T> terms(static_cast<std::size_t>(kg * p.r * p.s));
  // dx[n,c,ih,iw] = sum over (k in c's group, r, s) with ih = oh*sh - pt + r*dh for an integer oh in range.
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t c = 0; c < p.c; ++c)
      for (int64_t ih = 0; ih < p.h; ++ih)
        for (int64_t iw = 0; iw < p.w; ++iw) {
          int64_t t = 0;
          const int64_t g = c / cg, cw = c % cg;
          for (int64_t k = g * kg; k < (g + 1) * kg; ++k)
            for (int64_t r = 0; r < p.r; ++r) {
              int64_t num_h = ih + p.pad_t - r * p.dil_h;
              if (num_h < 0 || num_h % p.stride_h) continue;
              int64_t oh = num_h / p.stride_h;
              if (oh >= P) continue;
              for (int64_t s = 0; s < p.s; ++s) {
                int64_t num_w = iw + p.pad_l - s * p.dil_w;
                if (num_w < 0 || num_w % p.stride_w) continue;
                int64_t ow = num_w / p.stride_w;
                if (ow >= Q) continue;
                T wv = w[((k * cg + cw) * p.r + tap(r, p.r, p.flip)) * p.s + tap(s, p.s, p.flip)];
                terms[t++] = dy[((n * p.k + k) * P + oh) * Q + ow] * wv;
              }
            }
          dx[((n * p.c + c) * p.h + ih) * p.w + iw] = ordered_sum(terms.data(), t, p.sum_order);
        }
}

template <typename T>
void backward_weight(const Conv2dParams& p, const T* x, const T* dy, T* dw, T* db) {
  if (depthwise_case(p)) return depthwise_backward_weight(p, x, dy, dw, db);
  const int64_t P = p.out_h(), Q = p.out_w();
  const int64_t cg = p.c_per_group(), kg = p.k / p.groups;
  std::vector<T> terms(static_cast<std::size_t>(p.n * P * Q));
  for (int64_t k = 0; k < p.k; ++k)
    for (int64_t cw = 0; cw < cg; ++cw)
      for (int64_t r = 0; r < p.r; ++r)
        for (int64_t s = 0; s < p.s; ++s) {
          const int64_t c = (k / kg) * cg + cw;
          int64_t t = 0;
          for (int64_t n = 0; n < p.n; ++n)
            for (int64_t oh = 0; oh < P; ++oh) {
              int64_t ih = oh * p.stride_h - p.pad_t + r * p.dil_h;
              if (ih < 0 || ih >= p.h) continue;
              for (int64_t ow = 0; ow < Q; ++ow) {
                int64_t iw = ow * p.stride_w - p.pad_l + s * p.dil_w;
                if (iw < 0 || iw >= p.w) continue;
                terms[t++] = x[((n * p.c + c) * p.h + ih) * p.w + iw] * dy[((n * p.k + k) * P + oh) * Q + ow];
              }
            }
          dw[((k * cg + cw) * p.r + tap(r, p.r, p.flip)) * p.s + tap(s, p.s, p.flip)] +=
              ordered_sum(terms.data(), t, p.sum_order);
        }
  if (!db) return;
  for (int64_t k = 0; k < p.k; ++k) {
    int64_t t = 0;
    for (int64_t n = 0; n < p.n; ++n)
      for (int64_t i = 0; i < P * Q; ++i) terms[t++] = dy[(n * p.k + k) * P * Q + i];
    db[k] += ordered_sum(terms.data(), t, p.sum_order);
  }
}

void check_args(const char* fn, const Conv2dParams& p, const Tensor& x, const char* xn, const Shape& xs,
                const Tensor& w) {
  p.validate();
  check_shape(fn, xn, x, xs);
  check_shape(fn, "w", w, p.w_shape());
  check_same_dtype(fn, x, w);
}

// The channel block of a call's two activations (a, b: x and y, dy and dx, x and dy): 0 when both
// are plain; else the block they share, for the blocked case only (Conv2dKernel::any_block).
int blocked_args(const char* fn, const Conv2dParams& p, const Tensor& a, const char* an, const Tensor& b, const char* bn) {
  const int ab = a.channel_block(), bb = b.channel_block();
  if (ab == 0 && bb == 0) return 0;
  check(ab == bb, fn, ": ", an, " in channel block ", ab, ", ", bn, " in ", bb, " (one layout for both)");
  check(blocked_case(p), fn, ": ", an, " in channel block ", ab,
        "; only a depthwise convolution of one output channel per input channel (at least ", kChannelsInnerMin,
        ", summed in ascending order) takes blocked tensors");
  check(ab == 8 || ab == 16, fn, ": channel block ", ab, " (8 or 16 taken)");
  return ab;
}

// f(std::integral_constant<int, B>) for a block of 8 or 16.
template <typename F>
void with_block(int b, F&& f) {
  if (b == 16) return f(std::integral_constant<int, 16>());
  f(std::integral_constant<int, 8>());
}

}  // namespace

void conv2d_forward_ref(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
  check_args("conv2d_forward_ref", p, x, "x", p.x_shape(), w);
  check_shape("conv2d_forward_ref", "y", y, p.y_shape());
  if (b) check_shape("conv2d_forward_ref", "b", *b, {p.k});
  if (const int cb = blocked_args("conv2d_forward_ref", p, x, "x", y, "y"))
    return dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      with_block(cb, [&](auto blk) {
        constexpr int B = decltype(blk)::value;
        const T* bp = b ? b->data<T>() : nullptr;
        if (p.r == 3 && p.s == 3) return depthwise_forward_blocked<T, B, 3, 3>(p, x.blocked_data<T>(), w.data<T>(), bp, y.blocked_data<T>());
        depthwise_forward_blocked<T, B, 0, 0>(p, x.blocked_data<T>(), w.data<T>(), bp, y.blocked_data<T>());
      });
    });
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    forward<T>(p, x.data<T>(), w.data<T>(), b ? b->data<T>() : nullptr, y.data<T>());
  });
}

// The depthwise forward with ConvChannelOps before and after it, on channel-blocked x and y (the
// blocked loops above; Conv2dKernel::forward_fused).
void conv2d_forward_fused_ref(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor* b,
                              const ConvChannelOp* pre, const ConvChannelOp* post, Tensor& y) {
  const char* fn = "conv2d_forward_fused_ref";
  check_args(fn, p, x, "x", p.x_shape(), w);
  check_shape(fn, "y", y, p.y_shape());
  if (b) check_shape(fn, "b", *b, {p.k});
  const int cb = blocked_args(fn, p, x, "x", y, "y");
  check(cb != 0, fn, ": x and y plain; the fused ops run on channel-blocked tensors only");
  check(pre || post, fn, ": neither an op before nor one after the convolution");
  // one op's values: four per-channel tensors of x's dtype, `channels` long
  auto check_op = [&](const char* where, const ConvChannelOp& e, int64_t channels) {
    const std::pair<const char*, const Tensor*> vals[] = {{"mean", &e.mean}, {"scale", &e.scale}, {"gamma", &e.gamma}, {"beta", &e.beta}};
    for (const auto& [name, t] : vals) {
      check(t->defined(), fn, ": ", where, " ", name, " missing");
      check_shape(fn, (std::string(where) + " " + name).c_str(), *t, {channels});
      check_same_dtype(fn, x, *t);
    }
  };
  if (pre) check_op("op before", *pre, p.c);
  if (post) check_op("op after", *post, p.k);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    auto args = [](const ConvChannelOp& e) {
      ChannelOpArgs<T> a;
      a.mean = e.mean.data<T>(), a.scale = e.scale.data<T>(), a.gamma = e.gamma.data<T>(), a.beta = e.beta.data<T>();
      a.act = e.act, a.lo = static_cast<T>(e.clip_min), a.hi = static_cast<T>(e.clip_max);
      return a;
    };
    ChannelOpArgs<T> before, after;
    if (pre) before = args(*pre);
    if (post) after = args(*post);
    const ChannelOpArgs<T>* pa = pre ? &before : nullptr;
    const ChannelOpArgs<T>* qa = post ? &after : nullptr;
    with_block(cb, [&](auto blk) {
      constexpr int B = decltype(blk)::value;
      const T* bp = b ? b->data<T>() : nullptr;
      if (p.r == 3 && p.s == 3)
        return depthwise_forward_blocked<T, B, 3, 3>(p, x.blocked_data<T>(), w.data<T>(), bp, y.blocked_data<T>(), pa, qa);
      depthwise_forward_blocked<T, B, 0, 0>(p, x.blocked_data<T>(), w.data<T>(), bp, y.blocked_data<T>(), pa, qa);
    });
  });
}

void conv2d_backward_data_ref(const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx) {
  check_args("conv2d_backward_data_ref", p, dy, "dy", p.y_shape(), w);
  check_shape("conv2d_backward_data_ref", "dx", dx, p.x_shape());
  if (const int cb = blocked_args("conv2d_backward_data_ref", p, dy, "dy", dx, "dx"))
    return dispatch_dtype(dy.dtype(), [&](auto tag) {
      using T = decltype(tag);
      with_block(cb, [&](auto blk) {
        depthwise_backward_data_blocked<T, decltype(blk)::value>(p, dy.blocked_data<T>(), w.data<T>(),
                                                                 dx.blocked_data<T>());
      });
    });
  dispatch_dtype(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward_data<T>(p, dy.data<T>(), w.data<T>(), dx.data<T>());
  });
}

void conv2d_backward_weight_ref(const Conv2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dw, Tensor* db) {
  check_args("conv2d_backward_weight_ref", p, x, "x", p.x_shape(), dw);
  check_shape("conv2d_backward_weight_ref", "dy", dy, p.y_shape());
  if (db) check_shape("conv2d_backward_weight_ref", "db", *db, {p.k});
  if (const int cb = blocked_args("conv2d_backward_weight_ref", p, x, "x", dy, "dy"))
    return dispatch_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      with_block(cb, [&](auto blk) {
        depthwise_backward_weight_blocked<T, decltype(blk)::value>(p, x.blocked_data<T>(), dy.blocked_data<T>(),
                                                                   dw.data<T>(), db ? db->data<T>() : nullptr);
      });
    });
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward_weight<T>(p, x.data<T>(), dy.data<T>(), dw.data<T>(), db ? db->data<T>() : nullptr);
  });
}

Conv2dRefGenericLoops::Conv2dRefGenericLoops() { ++g_generic_only; }
Conv2dRefGenericLoops::~Conv2dRefGenericLoops() { --g_generic_only; }

void register_conv2d_ref(KernelRegistry& reg) {
  Conv2dKernel k;
  k.name = "reference";
  k.supports_doc =
      "every params field (groups included), float32 and float64; a depthwise convolution (one output channel "
      "per input channel, at least 8, ascending sums) also in channel blocks of 8 or 16, there with a fused "
      "per-channel epilogue (a batchnorm and its ReLU or clip) in predictions";
  k.supports = [](const Conv2dParams&, DType) { return true; };
  k.forward = conv2d_forward_ref;
  k.backward_data = conv2d_backward_data_ref;
  k.backward_weight = conv2d_backward_weight_ref;
  k.any_block = [](const Conv2dParams& p, DType) { return blocked_case(p); };
  k.forward_fused = conv2d_forward_fused_ref;
  reg.conv2d.at(KernelBackend::reference) = k;
}

}  // namespace driftlab
