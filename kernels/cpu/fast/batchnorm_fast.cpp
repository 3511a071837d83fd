// Fast float32 batch normalisation, layout (N, C, S): training forward and backward, and the
// inference forward and backward (elementwise with a per-channel scale, the reference's formulas,
// so their y and dx equal the reference's bit for bit; dgamma/dbeta sum like the training ones).
// Differs from the reference kernels only in summation order: each contiguous row of S values
// of a channel is summed in 32 lanes (element k in lane k % 32, then the lanes halved in a fixed
// tree: lane_sums), and the N row sums are added in double. The order is the code's, not the
// compiler's: an OpenMP SIMD reduction took the vector width GCC chose for each loop, and under
// -march=cascadelake it chose 16-byte vectors for the sums with the fused ReLU and 32-byte ones
// without, so the fused backward's bits were not the two ops' (scripts/isa-check.sh found it).
// That is as accurate as the reference's ascending float sum or better, and ~10x faster: the
// reference's one-chain float sum is bound by the latency of one add per value. Channels are split over threads, each channel summed on one thread, so
// the bits do not depend on the thread count. The per-element formulas are the reference's.
//
// Channel-blocked tensors (engine/layers/layout.h, (N, C/B, S, B)) take their own loops: there a
// plane of one image holds B channels side by side, so the sums run per (image, channel block),
// B channels in the B lanes of one vector, over the plane in four interleaved partial sums (chains
// of S/4 adds); each (image, channel)'s float sum is added over the images in double, in image
// order. Tasks are (image, channel block) pairs, so the bits do not depend on the thread count
// either; they differ from the plain layout's (another summation order, as accurate).
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/channel_blocks.h"
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

// The fused ReLU's output (Relu) or z; its gradient rule at z (Relu) or dy.
template <bool Relu>
inline float out_of(float z) {
  if constexpr (Relu) return relu_value(z);
  return z;
}
struct ReluRule {
  float g0;
  bool nan_is_nan;
  explicit ReluRule(const BatchNormParams& p)
      : g0(static_cast<float>(p.relu_grad_at_zero)), nan_is_nan(p.relu_nan_grad == ReluNanGrad::nan) {}
};
template <bool Relu>
inline float grad_of(const ReluRule& r, float z, float dy) {
  if constexpr (Relu) return relu_grad(z, dy, r.g0, r.nan_is_nan);
  return dy;
}

// 16 floats as one vector (GCC's vector extension: one AVX-512 register, two AVX2 ones; each
// lane's operations are the scalar ones, -ffp-contract=off keeps products and sums two roundings).
typedef float V16 __attribute__((vector_size(64)));
template <typename T>
inline T load_as(const float* q) {
  T v;
  std::memcpy(&v, q, sizeof(T));
  return v;
}
template <typename T>
inline void store_as(float* q, T v) {
  std::memcpy(q, &v, sizeof(T));
}
// grad_of lane by lane as vector selects: relu_grad's comparisons choosing its values.
template <bool Relu>
inline V16 grad_of(const ReluRule& r, V16 z, V16 dy) {
  if constexpr (Relu) {
    const V16 zero{};
    const V16 d = z > zero ? dy : (z == zero ? r.g0 * dy : zero);
    return z != z ? (r.nan_is_nan ? z : dy) : d;
  }
  return dy;
}

// M float sums over k in [0, s) in 32 lanes: element k goes to lane k % 32 (two vectors of 16,
// two independent chains per sum), the lanes are then halved (lane l += lane l + h, h = 16, 8, 4, 2,
// 1). f(k, t) sets t[0..M) to the terms of elements k.. (t a V16*: 16 of them, a float*: one). The
// order is the code's, the same on every build and CPU, whatever vector width runs the lanes.
template <int M, typename F>
inline void lane_sums(int64_t s, F&& f, double (&out)[M]) {
  V16 v0[M] = {}, v1[M] = {}, t[M];
  int64_t k0 = 0;
  for (; k0 + 32 <= s; k0 += 32) {
    f(k0, t);
    for (int m = 0; m < M; ++m) v0[m] += t[m];
    f(k0 + 16, t);
    for (int m = 0; m < M; ++m) v1[m] += t[m];
  }
  if (k0 < s) {  // the last s % 32 elements, each into its lane
    float acc[M][32];
    for (int m = 0; m < M; ++m) store_as(acc[m], v0[m]), store_as(acc[m] + 16, v1[m]);
    for (int l = 0; k0 + l < s; ++l) {
      float ts[M];
      f(k0 + l, ts);
      for (int m = 0; m < M; ++m) acc[m][l] += ts[m];
    }
    for (int m = 0; m < M; ++m) v0[m] = load_as<V16>(acc[m]), v1[m] = load_as<V16>(acc[m] + 16);
  }
  for (int m = 0; m < M; ++m) {
    // h = 16; then lanes l < h take lane l + h by a shuffle (__builtin_shufflevector: GCC 12 and clang)
    V16 a = v0[m] + v1[m];
    a += __builtin_shufflevector(a, a, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15);
    a += __builtin_shufflevector(a, a, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7);
    a += __builtin_shufflevector(a, a, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    a += __builtin_shufflevector(a, a, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    out[m] = static_cast<double>(a[0]);
  }
}

// sum_k f(row[k]) over one row (lane_sums); f generic over float and V16.
template <typename F>
inline double row_sum(const float* row, int64_t s, F&& f) {
  double out[1];
  lane_sums<1>(
      s,
      [&](int64_t k, auto* t) {
        using T = std::remove_pointer_t<decltype(t)>;
        t[0] = f(load_as<T>(row + k));
      },
      out);
  return out[0];
}

// One row's sums of dz and dz * xhat (lane_sums) added to sdy and sdyx: xhat = (x - mu) * inv, dz the
// fused ReLU's gradient at gamma * xhat + beta (Relu) or dy. WriteDx: also out[k] = dz * scale in the
// same pass (the inference backward's dx).
template <bool Relu, bool WriteDx>
inline void add_dz_sums(const ReluRule& rule, const float* xr, const float* dr, int64_t s, float mu, float inv,
                        float gc, float bc, float* out, float scale, double& sdy, double& sdyx) {
  double ab[2];
  lane_sums<2>(
      s,
      [&](int64_t k, auto* t) {
        using T = std::remove_pointer_t<decltype(t)>;
        const T xhat = (load_as<T>(xr + k) - mu) * inv;
        const T d = grad_of<Relu>(rule, gc * xhat + bc, load_as<T>(dr + k));
        t[0] = d, t[1] = d * xhat;
        if constexpr (WriteDx) store_as(out + k, T(d * scale));
      },
      ab);
  sdy += ab[0];
  sdyx += ab[1];
}

// f(std::bool_constant<p.relu>): the loops instantiated for the fused ReLU or without it.
template <typename F>
void with_relu(const BatchNormParams& p, F&& f) {
  if (p.relu)
    f(std::true_type{});
  else
    f(std::false_type{});
}

void check_f32(const char* fn, const BatchNormParams& p, const Tensor& x) {
  if (x.dtype() != DType::f32) fail(fn, ": the fast kernel is float32 only (use the reference for float64)");
  if (!(x.numel() == p.n * p.c * p.s && x.dim(0) == p.n))  // if/fail: no shape string per call
    fail(fn, ": x has shape ", shape_str(x.shape()), ", expected N=", p.n, " C=", p.c, " S=", p.s);
  check(p.n * p.s > 1, fn, ": batch statistics need more than one value per channel (N*S=", p.n * p.s, ")");
}

// The inference scale of channel ch: 1/sqrt(running_var + eps), or the running inverse std.
float infer_invstd(const BatchNormParams& p, float rv) {
  return p.estimator == BnVarEstimator::inv_std ? rv : 1.0f / std::sqrt(rv + static_cast<float>(p.eps));
}

void check_infer_f32(const char* fn, const BatchNormParams& p, const Tensor& x) {
  if (x.dtype() != DType::f32) fail(fn, ": the fast kernel is float32 only (use the reference for float64)");
  if (!(x.numel() == p.n * p.c * p.s && x.dim(0) == p.n))  // if/fail: no shape string per call
    fail(fn, ": x has shape ", shape_str(x.shape()), ", expected N=", p.n, " C=", p.c, " S=", p.s);
}

// ---- channel-blocked (N, C/B, S, B) ----

// The B lanes of f(a, b, lane) summed over one image's plane of one channel block (a and b walk
// two tensors of the same layout), in four partial sums over k = 0 mod 4, 1 mod 4, ...: out[l]
// (double) = that sum for lane l.
template <int B, typename F>
inline void plane_lane_sums(const float* a, const float* b, int64_t s, F&& f, double* out) {
  float acc[4][B] = {};
  int64_t k = 0;
  for (; k + 4 <= s; k += 4)
    for (int u = 0; u < 4; ++u) {
      const float *va = a + (k + u) * B, *vb = b + (k + u) * B;
#pragma omp simd
      for (int l = 0; l < B; ++l) acc[u][l] += f(va[l], vb[l], l);
    }
  for (; k < s; ++k) {
    const float *va = a + k * B, *vb = b + k * B;
#pragma omp simd
    for (int l = 0; l < B; ++l) acc[0][l] += f(va[l], vb[l], l);
  }
  for (int l = 0; l < B; ++l) out[l] = static_cast<double>((acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]));
}

// fn(off, c0) for every (image, channel block) plane: off its first element, c0 its first channel.
// One plane per task: each is written or summed on one thread, whatever the thread count.
template <int B, typename F>
void blocked_map(int64_t n, int64_t c, int64_t s, F&& fn) {
  const int64_t cb = c / B;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < cb; ++j) fn((i * cb + j) * s * B, j * B);
}

// Per channel, the sum over images, in image order, of what plane_fn(off, c0, out) writes for each
// plane (out[l]: the plane's sum for channel c0 + l). The per-(image, channel) sums are kept between the
// parallel pass and the ordered one; image i's channel ch lands at i*C + ch = off / s + l.
// Per channel, part[i * c + ch] summed over the images i in order.
std::vector<double> sum_over_images(const std::vector<double>& part, int64_t n, int64_t c) {
  std::vector<double> sums(static_cast<std::size_t>(c), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch) sums[static_cast<std::size_t>(ch)] += part[static_cast<std::size_t>(i * c + ch)];
  return sums;
}

template <int B, typename PlaneFn>
std::vector<double> blocked_channel_sums(int64_t n, int64_t c, int64_t s, PlaneFn&& plane_fn) {
  std::vector<double> part(static_cast<std::size_t>(n * c));
  blocked_map<B>(n, c, s, [&](int64_t off, int64_t c0) { plane_fn(off, c0, part.data() + off / s); });
  return sum_over_images(part, n, c);
}

// Per channel, over images in order: sdy = sum dz, sdyx = sum dz * (x - m) * inv, where dz is dy
// (or the fused ReLU's gradient at z = g * xhat + b), both in one pass over x and dy; each sum in
// plane_lane_sums' order.
template <int B, bool Relu>
void dy_sums(const BatchNormParams& p, const float* xd, const float* dyd, const float* md, const float* id,
             const float* gd, const float* bd, std::vector<double>& sdy, std::vector<double>& sdyx) {
  const int64_t n = p.n, c = p.c, s = p.s;
  const ReluRule rule(p);
  std::vector<double> part_dy(static_cast<std::size_t>(n * c)), part_dyx(static_cast<std::size_t>(n * c));
  blocked_map<B>(n, c, s, [&](int64_t off, int64_t c0) {
    const float *xr = xd + off, *dr = dyd + off, *m = md + c0, *inv = id + c0, *g = gd + c0, *b = bd + c0;
    float a[4][B] = {}, q[4][B] = {};
    auto add = [&](int u, int64_t k) {  // pixel k's B lanes into partial sum u
      const float *vx = xr + k * B, *vd = dr + k * B;
#pragma omp simd
      for (int l = 0; l < B; ++l) {
        const float xhat = (vx[l] - m[l]) * inv[l];
        const float d = grad_of<Relu>(rule, g[l] * xhat + b[l], vd[l]);
        a[u][l] += d;
        q[u][l] += d * xhat;
      }
    };
    int64_t k = 0;
    for (; k + 4 <= s; k += 4)
      for (int u = 0; u < 4; ++u) add(u, k + u);
    for (; k < s; ++k) add(0, k);
    double* pd = part_dy.data() + off / s;
    double* px = part_dyx.data() + off / s;
    for (int l = 0; l < B; ++l) {
      pd[l] = static_cast<double>((a[0][l] + a[1][l]) + (a[2][l] + a[3][l]));
      px[l] = static_cast<double>((q[0][l] + q[1][l]) + (q[2][l] + q[3][l]));
    }
  });
  sdy = sum_over_images(part_dy, n, c);
  sdyx = sum_over_images(part_dyx, n, c);
}

// y = g * ((x - m) * inv) + b per element (plus the residual term rd where given, then through the
// fused ReLU), m and inv per channel (the batch's or the running ones).
template <int B, bool Relu>
void write_normalised(const BatchNormParams& p, const float* xd, const float* m, const float* inv, const float* g,
                      const float* b, float* yd, const float* rd = nullptr) {
  const int64_t s = p.s;
  blocked_map<B>(p.n, p.c, s, [&](int64_t off, int64_t c0) {
    const float *xr = xd + off, *mc = m + c0, *ic = inv + c0, *gc = g + c0, *bc = b + c0;
    float* yr = yd + off;
    if (rd) {
      const float* rr = rd + off;
      for (int64_t k = 0; k < s; ++k)
#pragma omp simd
        for (int l = 0; l < B; ++l)
          yr[k * B + l] = out_of<Relu>((gc[l] * ((xr[k * B + l] - mc[l]) * ic[l]) + bc[l]) + rr[k * B + l]);
      return;
    }
    if (p.clip) {  // the inference forward's fused clip (BatchNormParams::clip; never with Relu)
      const float lo = static_cast<float>(p.clip_min), hi = static_cast<float>(p.clip_max);
      for (int64_t k = 0; k < s; ++k)
#pragma omp simd
        for (int l = 0; l < B; ++l) yr[k * B + l] = clip_value(gc[l] * ((xr[k * B + l] - mc[l]) * ic[l]) + bc[l], lo, hi);
      return;
    }
    for (int64_t k = 0; k < s; ++k)
#pragma omp simd
      for (int l = 0; l < B; ++l) yr[k * B + l] = out_of<Relu>(gc[l] * ((xr[k * B + l] - mc[l]) * ic[l]) + bc[l]);
  });
}

template <int B, bool Relu>
void forward_train_blocked(const BatchNormParams& p, const float* xd, const float* g, const float* b, float* yd,
                           float* md, float* vd, float* id) {
  const int64_t n = p.n, c = p.c, s = p.s;
  const double count = static_cast<double>(n * s);
  const std::vector<double> sum = blocked_channel_sums<B>(n, c, s, [&](int64_t off, int64_t, double* out) {
    plane_lane_sums<B>(xd + off, xd + off, s, [](float v, float, int) { return v; }, out);
  });
  for (int64_t ch = 0; ch < c; ++ch) md[ch] = static_cast<float>(sum[static_cast<std::size_t>(ch)] / count);
  const std::vector<double> sq = blocked_channel_sums<B>(n, c, s, [&](int64_t off, int64_t c0, double* out) {
    const float* m = md + c0;
    plane_lane_sums<B>(xd + off, xd + off, s, [m](float v, float, int l) { return (v - m[l]) * (v - m[l]); }, out);
  });
  for (int64_t ch = 0; ch < c; ++ch) {
    vd[ch] = static_cast<float>(sq[static_cast<std::size_t>(ch)] / count);
    id[ch] = 1.0f / std::sqrt(vd[ch] + static_cast<float>(p.eps));
  }
  write_normalised<B, Relu>(p, xd, md, id, g, b, yd);
}

template <int B, bool Relu>
void backward_train_blocked(const BatchNormParams& p, const float* xd, const float* dyd, const float* g, const float* bd,
                            const float* md, const float* id, float* dxd, float* dg, float* db) {
  const int64_t n = p.n, c = p.c, s = p.s;
  const float count = static_cast<float>(n * s);
  const ReluRule rule(p);
  std::vector<double> sdy, sdyx;
  dy_sums<B, Relu>(p, xd, dyd, md, id, g, bd, sdy, sdyx);
  std::vector<float> sum_dy(static_cast<std::size_t>(c)), sum_dy_xhat(static_cast<std::size_t>(c)),
      scale(static_cast<std::size_t>(c));
  for (int64_t ch = 0; ch < c; ++ch) {
    const std::size_t u = static_cast<std::size_t>(ch);
    sum_dy[u] = static_cast<float>(sdy[u]);
    sum_dy_xhat[u] = static_cast<float>(sdyx[u]);
    dg[ch] += sum_dy_xhat[u];
    db[ch] += sum_dy[u];
    scale[u] = g[ch] * id[ch] / count;
  }
  blocked_map<B>(n, c, s, [&](int64_t off, int64_t c0) {
    const float *xr = xd + off, *dr = dyd + off, *m = md + c0, *inv = id + c0, *gc = g + c0, *bc = bd + c0;
    const float *sc = scale.data() + c0, *sd = sum_dy.data() + c0, *sx = sum_dy_xhat.data() + c0;
    float* out = dxd + off;
    for (int64_t k = 0; k < s; ++k)
#pragma omp simd
      for (int l = 0; l < B; ++l) {
        const float xhat = (xr[k * B + l] - m[l]) * inv[l];
        const float d = grad_of<Relu>(rule, gc[l] * xhat + bc[l], dr[k * B + l]);
        out[k * B + l] = sc[l] * (count * d - sd[l] - xhat * sx[l]);
      }
  });
}

template <int B, bool Relu>
void forward_infer_blocked(const BatchNormParams& p, const float* xd, const float* g, const float* b,
                           const float* rmd, const float* rvd, float* yd, const float* rd = nullptr) {
  std::vector<float> inv(static_cast<std::size_t>(p.c));
  for (int64_t ch = 0; ch < p.c; ++ch) inv[static_cast<std::size_t>(ch)] = infer_invstd(p, rvd[ch]);
  write_normalised<B, Relu>(p, xd, rmd, inv.data(), g, b, yd, rd);
}

template <int B, bool Relu>
void backward_infer_blocked(const BatchNormParams& p, const float* xd, const float* dyd, const float* g, const float* bd,
                            const float* rmd, const float* rvd, float* dxd, float* dg, float* db) {
  const int64_t n = p.n, c = p.c, s = p.s;
  const ReluRule rule(p);
  std::vector<float> inv(static_cast<std::size_t>(c)), scale(static_cast<std::size_t>(c));
  for (int64_t ch = 0; ch < c; ++ch) {
    inv[static_cast<std::size_t>(ch)] = infer_invstd(p, rvd[ch]);
    scale[static_cast<std::size_t>(ch)] = g[ch] * inv[static_cast<std::size_t>(ch)];
  }
  blocked_map<B>(n, c, s, [&](int64_t off, int64_t c0) {
    const float *xr = xd + off, *dr = dyd + off, *m = rmd + c0, *iv = inv.data() + c0, *gc = g + c0, *bc = bd + c0;
    const float* sc = scale.data() + c0;
    float* out = dxd + off;
    for (int64_t k = 0; k < s; ++k)
#pragma omp simd
      for (int l = 0; l < B; ++l) {
        const float d = grad_of<Relu>(rule, gc[l] * ((xr[k * B + l] - m[l]) * iv[l]) + bc[l], dr[k * B + l]);
        out[k * B + l] = d * sc[l];
      }
  });
  std::vector<double> sdy, sdyx;
  dy_sums<B, Relu>(p, xd, dyd, rmd, inv.data(), g, bd, sdy, sdyx);
  for (int64_t ch = 0; ch < c; ++ch) {
    dg[ch] += static_cast<float>(sdyx[static_cast<std::size_t>(ch)]);
    db[ch] += static_cast<float>(sdy[static_cast<std::size_t>(ch)]);
  }
}

// The entries other than forward_infer take no fused clip.
void check_no_clip(const char* fn, const BatchNormParams& p) {
  if (p.clip) fail(fn, ": a fused clip is the inference forward's only (BatchNormParams::clip)");
}

// The plain layout's loops, one channel per task (Relu: the fused ReLU, see the file comment).
template <bool Relu>
void forward_train_plain(const BatchNormParams& p, const float* xd, const float* g, const float* b, float* yd,
                         float* md, float* vd, float* id) {
  const int64_t n = p.n, c = p.c, s = p.s;
  const double count = static_cast<double>(n * s);
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += row_sum(xd + (i * c + ch) * s, s, [](auto v) { return v; });
    const float mu = static_cast<float>(sum / count);
    double sq = 0;
    for (int64_t i = 0; i < n; ++i)
      sq += row_sum(xd + (i * c + ch) * s, s, [mu](auto v) { return (v - mu) * (v - mu); });
    const float v = static_cast<float>(sq / count);
    const float inv = 1.0f / std::sqrt(v + static_cast<float>(p.eps));
    md[ch] = mu;
    vd[ch] = v;
    id[ch] = inv;
    const float gc = g[ch], bc = b[ch];
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = xd + (i * c + ch) * s;
      float* yr = yd + (i * c + ch) * s;
#pragma omp simd
      for (int64_t k = 0; k < s; ++k) yr[k] = out_of<Relu>(gc * ((xr[k] - mu) * inv) + bc);
    }
  }
}

template <bool Relu>
void backward_train_plain(const BatchNormParams& p, const float* xd, const float* dyd, const float* g, const float* bd,
                          const float* md, const float* id, float* dxd, float* dg, float* db) {
  const int64_t n = p.n, c = p.c, s = p.s;
  const float count = static_cast<float>(n * s);
  const ReluRule rule(p);
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    const float mu = md[ch], inv = id[ch], gc = g[ch], bc = bd[ch];
    double sdy = 0, sdyx = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = xd + (i * c + ch) * s;
      const float* dr = dyd + (i * c + ch) * s;
      add_dz_sums<Relu, false>(rule, xr, dr, s, mu, inv, gc, bc, nullptr, 0.0f, sdy, sdyx);
    }
    const float sum_dy = static_cast<float>(sdy), sum_dy_xhat = static_cast<float>(sdyx);
    dg[ch] += sum_dy_xhat;
    db[ch] += sum_dy;
    const float scale = gc * inv / count;
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = xd + (i * c + ch) * s;
      const float* dr = dyd + (i * c + ch) * s;
      float* out = dxd + (i * c + ch) * s;
#pragma omp simd
      for (int64_t k = 0; k < s; ++k) {
        const float xhat = (xr[k] - mu) * inv;
        const float d = grad_of<Relu>(rule, gc * xhat + bc, dr[k]);
        out[k] = scale * (count * d - sum_dy - xhat * sum_dy_xhat);
      }
    }
  }
}

template <bool Relu>
void forward_infer_plain(const BatchNormParams& p, const float* xd, const float* g, const float* b, const float* rmd,
                         const float* rvd, float* yd, const float* rd = nullptr) {
  const int64_t n = p.n, c = p.c, s = p.s;
  // each channel's scale once (not per image and channel: a 1x1 plane's task is one element)
  std::vector<float> invs(static_cast<std::size_t>(c));
  for (int64_t ch = 0; ch < c; ++ch) invs[static_cast<std::size_t>(ch)] = infer_invstd(p, rvd[ch]);
  if (s == 1 && !rd) {  // 1x1 planes (after global pooling's convolutions): the lanes over channels
    const float* iv = invs.data();
    const float lo = static_cast<float>(p.clip_min), hi = static_cast<float>(p.clip_max);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = xd + i * c;
      float* yr = yd + i * c;
      if (p.clip) {
#pragma omp simd
        for (int64_t ch = 0; ch < c; ++ch) yr[ch] = clip_value(g[ch] * ((xr[ch] - rmd[ch]) * iv[ch]) + b[ch], lo, hi);
      } else {
#pragma omp simd
        for (int64_t ch = 0; ch < c; ++ch) yr[ch] = out_of<Relu>(g[ch] * ((xr[ch] - rmd[ch]) * iv[ch]) + b[ch]);
      }
    }
    return;
  }
#pragma omp parallel for schedule(static) collapse(2)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float mu = rmd[ch], inv = invs[static_cast<std::size_t>(ch)], gc = g[ch], bc = b[ch];
      const float* xr = xd + (i * c + ch) * s;
      float* yr = yd + (i * c + ch) * s;
      if (rd) {
        const float* rr = rd + (i * c + ch) * s;
#pragma omp simd
        for (int64_t k = 0; k < s; ++k) yr[k] = out_of<Relu>((gc * ((xr[k] - mu) * inv) + bc) + rr[k]);
        continue;
      }
      if (p.clip) {  // the fused clip (BatchNormParams::clip; never with Relu)
        const float lo = static_cast<float>(p.clip_min), hi = static_cast<float>(p.clip_max);
#pragma omp simd
        for (int64_t k = 0; k < s; ++k) yr[k] = clip_value(gc * ((xr[k] - mu) * inv) + bc, lo, hi);
        continue;
      }
#pragma omp simd
      for (int64_t k = 0; k < s; ++k) yr[k] = out_of<Relu>(gc * ((xr[k] - mu) * inv) + bc);
    }
}

// dx = dz*(gamma*s); dgamma += sum(dz*xhat); dbeta += sum(dz), xhat = (x - running_mean)*s, dz = dy
// or the fused ReLU's gradient.
template <bool Relu>
void backward_infer_plain(const BatchNormParams& p, const float* xd, const float* dyd, const float* g, const float* bd,
                          const float* rmd, const float* rvd, float* dxd, float* dg, float* db) {
  const int64_t n = p.n, c = p.c, s = p.s;
  const ReluRule rule(p);
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    const float mu = rmd[ch], inv = infer_invstd(p, rvd[ch]), gc = g[ch], bc = bd[ch];
    const float scale = gc * inv;
    double sdy = 0, sdyx = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = xd + (i * c + ch) * s;
      const float* dr = dyd + (i * c + ch) * s;
      float* out = dxd + (i * c + ch) * s;
      add_dz_sums<Relu, true>(rule, xr, dr, s, mu, inv, gc, bc, out, scale, sdy, sdyx);
    }
    dg[ch] += static_cast<float>(sdyx);
    db[ch] += static_cast<float>(sdy);
  }
}

void batchnorm_forward_train_fast(const BatchNormParams& p, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  Tensor& y, Tensor& mean, Tensor& var, Tensor& invstd) {
  check_no_clip("batchnorm_forward_train_fast", p);
  check_f32("batchnorm_forward_train_fast", p, x);
  check_shape("batchnorm_forward_train_fast", "y", y, x.shape());
  if (x.channel_block() != 0) {
    check_same_block("batchnorm_forward_train_fast", x, y, "y");
    return for_block("batchnorm_forward_train_fast", x, [&](auto blk) {
      with_relu(p, [&](auto relu) {
        forward_train_blocked<decltype(blk)::value, decltype(relu)::value>(
            p, x.blocked_data<float>(), gamma.data<float>(), beta.data<float>(), y.blocked_data<float>(),
            mean.data<float>(), var.data<float>(), invstd.data<float>());
      });
    });
  }
  with_relu(p, [&](auto relu) {
    forward_train_plain<decltype(relu)::value>(p, x.data<float>(), gamma.data<float>(), beta.data<float>(),
                                               y.data<float>(), mean.data<float>(), var.data<float>(),
                                               invstd.data<float>());
  });
}

void batchnorm_backward_train_fast(const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                   const Tensor& beta, const Tensor& mean, const Tensor& invstd, Tensor& dx,
                                   Tensor& dgamma, Tensor& dbeta) {
  check_no_clip("batchnorm_backward_train_fast", p);
  check_f32("batchnorm_backward_fast", p, x);
  check_shape("batchnorm_backward_fast", "dy", dy, x.shape());
  check_shape("batchnorm_backward_fast", "dx", dx, x.shape());
  if (x.channel_block() != 0) {
    check_same_block("batchnorm_backward_fast", x, dy, "dy");
    check_same_block("batchnorm_backward_fast", x, dx, "dx");
    return for_block("batchnorm_backward_fast", x, [&](auto blk) {
      with_relu(p, [&](auto relu) {
        backward_train_blocked<decltype(blk)::value, decltype(relu)::value>(
            p, x.blocked_data<float>(), dy.blocked_data<float>(), gamma.data<float>(), beta.data<float>(),
            mean.data<float>(), invstd.data<float>(), dx.blocked_data<float>(), dgamma.data<float>(),
            dbeta.data<float>());
      });
    });
  }
  with_relu(p, [&](auto relu) {
    backward_train_plain<decltype(relu)::value>(p, x.data<float>(), dy.data<float>(), gamma.data<float>(),
                                                beta.data<float>(), mean.data<float>(), invstd.data<float>(),
                                                dx.data<float>(), dgamma.data<float>(), dbeta.data<float>());
  });
}

void batchnorm_forward_infer_fast(const BatchNormParams& p, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& rm, const Tensor& rv, Tensor& y) {
  check_infer_f32("batchnorm_forward_infer_fast", p, x);
  check_shape("batchnorm_forward_infer_fast", "y", y, x.shape());
  if (p.clip && p.relu) fail("batchnorm_forward_infer_fast: a fused ReLU and a fused clip together");
  if (x.channel_block() != 0) {
    check_same_block("batchnorm_forward_infer_fast", x, y, "y");
    return for_block("batchnorm_forward_infer_fast", x, [&](auto blk) {
      with_relu(p, [&](auto relu) {
        forward_infer_blocked<decltype(blk)::value, decltype(relu)::value>(
            p, x.blocked_data<float>(), gamma.data<float>(), beta.data<float>(), rm.data<float>(), rv.data<float>(),
            y.blocked_data<float>());
      });
    });
  }
  with_relu(p, [&](auto relu) {
    forward_infer_plain<decltype(relu)::value>(p, x.data<float>(), gamma.data<float>(), beta.data<float>(),
                                               rm.data<float>(), rv.data<float>(), y.data<float>());
  });
}

void batchnorm_forward_infer_add_fast(const BatchNormParams& p, const Tensor& x, const Tensor& gamma,
                                      const Tensor& beta, const Tensor& rm, const Tensor& rv, const Tensor& residual,
                                      Tensor& y) {
  check_no_clip("batchnorm_forward_infer_add_fast", p);
  check_infer_f32("batchnorm_forward_infer_add_fast", p, x);
  check_shape("batchnorm_forward_infer_add_fast", "y", y, x.shape());
  check_shape("batchnorm_forward_infer_add_fast", "residual", residual, x.shape());
  if (x.channel_block() != 0) {
    check_same_block("batchnorm_forward_infer_add_fast", x, y, "y");
    check_same_block("batchnorm_forward_infer_add_fast", x, residual, "residual");
    return for_block("batchnorm_forward_infer_add_fast", x, [&](auto blk) {
      with_relu(p, [&](auto relu) {
        forward_infer_blocked<decltype(blk)::value, decltype(relu)::value>(
            p, x.blocked_data<float>(), gamma.data<float>(), beta.data<float>(), rm.data<float>(), rv.data<float>(),
            y.blocked_data<float>(), residual.blocked_data<float>());
      });
    });
  }
  check_same_block("batchnorm_forward_infer_add_fast", x, residual, "residual");
  with_relu(p, [&](auto relu) {
    forward_infer_plain<decltype(relu)::value>(p, x.data<float>(), gamma.data<float>(), beta.data<float>(),
                                               rm.data<float>(), rv.data<float>(), y.data<float>(),
                                               residual.data<float>());
  });
}

void batchnorm_backward_infer_fast(const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                   const Tensor& beta, const Tensor& rm, const Tensor& rv, Tensor& dx, Tensor& dgamma,
                                   Tensor& dbeta) {
  check_no_clip("batchnorm_backward_infer_fast", p);
  check_infer_f32("batchnorm_backward_infer_fast", p, x);
  check_shape("batchnorm_backward_infer_fast", "dy", dy, x.shape());
  check_shape("batchnorm_backward_infer_fast", "dx", dx, x.shape());
  if (x.channel_block() != 0) {
    check_same_block("batchnorm_backward_infer_fast", x, dy, "dy");
    check_same_block("batchnorm_backward_infer_fast", x, dx, "dx");
    return for_block("batchnorm_backward_infer_fast", x, [&](auto blk) {
      with_relu(p, [&](auto relu) {
        backward_infer_blocked<decltype(blk)::value, decltype(relu)::value>(
            p, x.blocked_data<float>(), dy.blocked_data<float>(), gamma.data<float>(), beta.data<float>(),
            rm.data<float>(), rv.data<float>(), dx.blocked_data<float>(), dgamma.data<float>(), dbeta.data<float>());
      });
    });
  }
  with_relu(p, [&](auto relu) {
    backward_infer_plain<decltype(relu)::value>(p, x.data<float>(), dy.data<float>(), gamma.data<float>(),
                                                beta.data<float>(), rm.data<float>(), rv.data<float>(),
                                                dx.data<float>(), dgamma.data<float>(), dbeta.data<float>());
  });
}

// Each channel's scale as the inference loops compute it (BatchNormKernel::infer_scale).
void batchnorm_infer_scale_fast(const BatchNormParams& p, const Tensor& rv, Tensor& scale) {
  if (rv.dtype() != DType::f32 || scale.dtype() != DType::f32)
    fail("batchnorm_infer_scale_fast: the fast kernel is float32 only (use the reference for float64)");
  check_shape("batchnorm_infer_scale_fast", "running_var", rv, {p.c});
  check_shape("batchnorm_infer_scale_fast", "scale", scale, {p.c});
  for (int64_t c = 0; c < p.c; ++c) scale.data<float>()[c] = infer_invstd(p, rv.data<float>()[c]);
}

}  // namespace

void register_batchnorm_fast(KernelRegistry& reg) {
  BatchNormKernel k;
  k.name = "fast";
  k.supports_doc = "float32, plain or channel-blocked, the fused ReLU, every params field but sum_order (SIMD row sums added in double); the running "
                   "update is the reference's";
  k.supports = [](const BatchNormParams&, DType dt) { return dt == DType::f32; };
  k.forward_train = batchnorm_forward_train_fast;
  k.backward_train = batchnorm_backward_train_fast;
  k.forward_infer = batchnorm_forward_infer_fast;
  k.backward_infer = batchnorm_backward_infer_fast;
  k.update_running = batchnorm_update_running;
  k.forward_infer_add = batchnorm_forward_infer_add_fast;
  k.infer_scale = batchnorm_infer_scale_fast;
  k.any_block = true;
  reg.batchnorm.at(KernelBackend::fast) = k;
}

}  // namespace driftlab
