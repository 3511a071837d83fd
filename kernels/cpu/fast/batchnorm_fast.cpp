// Fast float32 batch normalisation, layout (N, C, S): training forward and backward, and the
// inference forward and backward (elementwise with a per-channel scale, the reference's formulas,
// so their y and dx equal the reference's bit for bit; dgamma/dbeta sum like the training ones).
// Differs from the reference kernels only in summation order: each contiguous row of S values
// of a channel is summed by an OpenMP SIMD reduction (vector lanes, then the lanes), and the
// N row sums are added in double. That is as accurate as the reference's ascending float sum
// or better, and ~10x faster: the reference's one-chain float sum is bound by the latency of
// one add per value. Channels are split over threads, each channel summed on one thread, so
// the bits do not depend on the thread count. The per-element formulas are the reference's.
//
// Channel-blocked tensors (engine/layers/layout.h, (N, C/B, S, B)) take their own loops: there a
// plane of one image holds B channels side by side, so the sums run per (image, channel block),
// B channels in the B lanes of one vector, over the plane in four interleaved partial sums (chains
// of S/4 adds); each (image, channel)'s float sum is added over the images in double, in image
// order. Tasks are (image, channel block) pairs, so the bits do not depend on the thread count
// either; they differ from the plain layout's (another summation order, as accurate).
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

// sum_i f(row[i]) over one row, vectorised.
template <typename F>
inline double row_sum(const float* row, int64_t s, F&& f) {
  float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < s; ++i) acc += f(row[i], i);
  return static_cast<double>(acc);
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
template <int B, typename PlaneFn>
std::vector<double> blocked_channel_sums(int64_t n, int64_t c, int64_t s, PlaneFn&& plane_fn) {
  std::vector<double> part(static_cast<std::size_t>(n * c));
  blocked_map<B>(n, c, s, [&](int64_t off, int64_t c0) { plane_fn(off, c0, part.data() + off / s); });
  std::vector<double> sums(static_cast<std::size_t>(c), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch) sums[static_cast<std::size_t>(ch)] += part[static_cast<std::size_t>(i * c + ch)];
  return sums;
}

// Per channel, over images in order: sdy = sum dy, sdyx = sum dy * (x - m) * inv.
template <int B>
void dy_sums(const BatchNormParams& p, const float* xd, const float* dyd, const float* md, const float* id,
             std::vector<double>& sdy, std::vector<double>& sdyx) {
  const int64_t s = p.s;
  sdy = blocked_channel_sums<B>(p.n, p.c, s, [&](int64_t off, int64_t, double* out) {
    plane_lane_sums<B>(dyd + off, dyd + off, s, [](float v, float, int) { return v; }, out);
  });
  sdyx = blocked_channel_sums<B>(p.n, p.c, s, [&](int64_t off, int64_t c0, double* out) {
    const float *m = md + c0, *inv = id + c0;
    plane_lane_sums<B>(dyd + off, xd + off, s, [m, inv](float d, float x, int l) { return d * ((x - m[l]) * inv[l]); },
                       out);
  });
}

// y = g * ((x - m) * inv) + b per element, m and inv per channel (the batch's or the running ones).
template <int B>
void write_normalised(const BatchNormParams& p, const float* xd, const float* m, const float* inv, const float* g,
                      const float* b, float* yd) {
  const int64_t s = p.s;
  blocked_map<B>(p.n, p.c, s, [&](int64_t off, int64_t c0) {
    const float *xr = xd + off, *mc = m + c0, *ic = inv + c0, *gc = g + c0, *bc = b + c0;
    float* yr = yd + off;
    for (int64_t k = 0; k < s; ++k)
#pragma omp simd
      for (int l = 0; l < B; ++l) yr[k * B + l] = gc[l] * ((xr[k * B + l] - mc[l]) * ic[l]) + bc[l];
  });
}

template <int B>
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
  write_normalised<B>(p, xd, md, id, g, b, yd);
}

template <int B>
void backward_train_blocked(const BatchNormParams& p, const float* xd, const float* dyd, const float* g,
                            const float* md, const float* id, float* dxd, float* dg, float* db) {
  const int64_t n = p.n, c = p.c, s = p.s;
  const float count = static_cast<float>(n * s);
  std::vector<double> sdy, sdyx;
  dy_sums<B>(p, xd, dyd, md, id, sdy, sdyx);
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
    const float *xr = xd + off, *dr = dyd + off, *m = md + c0, *inv = id + c0;
    const float *sc = scale.data() + c0, *sd = sum_dy.data() + c0, *sx = sum_dy_xhat.data() + c0;
    float* out = dxd + off;
    for (int64_t k = 0; k < s; ++k)
#pragma omp simd
      for (int l = 0; l < B; ++l) {
        const float xhat = (xr[k * B + l] - m[l]) * inv[l];
        out[k * B + l] = sc[l] * (count * dr[k * B + l] - sd[l] - xhat * sx[l]);
      }
  });
}

template <int B>
void forward_infer_blocked(const BatchNormParams& p, const float* xd, const float* g, const float* b,
                           const float* rmd, const float* rvd, float* yd) {
  std::vector<float> inv(static_cast<std::size_t>(p.c));
  for (int64_t ch = 0; ch < p.c; ++ch) inv[static_cast<std::size_t>(ch)] = infer_invstd(p, rvd[ch]);
  write_normalised<B>(p, xd, rmd, inv.data(), g, b, yd);
}

template <int B>
void backward_infer_blocked(const BatchNormParams& p, const float* xd, const float* dyd, const float* g,
                            const float* rmd, const float* rvd, float* dxd, float* dg, float* db) {
  const int64_t n = p.n, c = p.c, s = p.s;
  std::vector<float> inv(static_cast<std::size_t>(c)), scale(static_cast<std::size_t>(c));
  for (int64_t ch = 0; ch < c; ++ch) {
    inv[static_cast<std::size_t>(ch)] = infer_invstd(p, rvd[ch]);
    scale[static_cast<std::size_t>(ch)] = g[ch] * inv[static_cast<std::size_t>(ch)];
  }
  blocked_map<B>(n, c, s, [&](int64_t off, int64_t c0) {
    const float* dr = dyd + off;
    const float* sc = scale.data() + c0;
    float* out = dxd + off;
    for (int64_t k = 0; k < s; ++k)
#pragma omp simd
      for (int l = 0; l < B; ++l) out[k * B + l] = dr[k * B + l] * sc[l];
  });
  std::vector<double> sdy, sdyx;
  dy_sums<B>(p, xd, dyd, rmd, inv.data(), sdy, sdyx);
  for (int64_t ch = 0; ch < c; ++ch) {
    dg[ch] += static_cast<float>(sdyx[static_cast<std::size_t>(ch)]);
    db[ch] += static_cast<float>(sdy[static_cast<std::size_t>(ch)]);
  }
}

// Calls f(std::integral_constant<int, B>) for the tensor's channel block (8 or 16).
template <typename F>
void for_block(const char* fn, const Tensor& x, F&& f) {
  switch (x.channel_block()) {
    case 8: return f(std::integral_constant<int, 8>{});
    case 16: return f(std::integral_constant<int, 16>{});
    default: fail(fn, ": channel block ", x.channel_block(), " (the fast kernel takes plain, 8 or 16)");
  }
}

void check_same_block(const char* fn, const Tensor& x, const Tensor& other, const char* name) {
  if (other.channel_block() != x.channel_block())
    fail(fn, ": ", name, " in channel block ", other.channel_block(), ", x in ", x.channel_block());
}

void batchnorm_forward_train_fast(const BatchNormParams& p, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  Tensor& y, Tensor& mean, Tensor& var, Tensor& invstd) {
  check_f32("batchnorm_forward_train_fast", p, x);
  check_shape("batchnorm_forward_train_fast", "y", y, x.shape());
  if (x.channel_block() != 0) {
    check_same_block("batchnorm_forward_train_fast", x, y, "y");
    return for_block("batchnorm_forward_train_fast", x, [&](auto blk) {
      forward_train_blocked<decltype(blk)::value>(p, x.blocked_data<float>(), gamma.data<float>(), beta.data<float>(),
                                                  y.blocked_data<float>(), mean.data<float>(), var.data<float>(),
                                                  invstd.data<float>());
    });
  }
  const float* xd = x.data<float>();
  const float *g = gamma.data<float>(), *b = beta.data<float>();
  float *yd = y.data<float>(), *md = mean.data<float>(), *vd = var.data<float>(), *id = invstd.data<float>();
  const int64_t n = p.n, c = p.c, s = p.s;
  const double count = static_cast<double>(n * s);
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += row_sum(xd + (i * c + ch) * s, s, [](float v, int64_t) { return v; });
    const float mu = static_cast<float>(sum / count);
    double sq = 0;
    for (int64_t i = 0; i < n; ++i)
      sq += row_sum(xd + (i * c + ch) * s, s, [mu](float v, int64_t) { return (v - mu) * (v - mu); });
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
      for (int64_t k = 0; k < s; ++k) yr[k] = gc * ((xr[k] - mu) * inv) + bc;
    }
  }
}

void batchnorm_backward_train_fast(const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                             const Tensor& mean, const Tensor& invstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  check_f32("batchnorm_backward_fast", p, x);
  check_shape("batchnorm_backward_fast", "dy", dy, x.shape());
  check_shape("batchnorm_backward_fast", "dx", dx, x.shape());
  if (x.channel_block() != 0) {
    check_same_block("batchnorm_backward_fast", x, dy, "dy");
    check_same_block("batchnorm_backward_fast", x, dx, "dx");
    return for_block("batchnorm_backward_fast", x, [&](auto blk) {
      backward_train_blocked<decltype(blk)::value>(p, x.blocked_data<float>(), dy.blocked_data<float>(),
                                                   gamma.data<float>(), mean.data<float>(), invstd.data<float>(),
                                                   dx.blocked_data<float>(), dgamma.data<float>(), dbeta.data<float>());
    });
  }
  const float *xd = x.data<float>(), *dyd = dy.data<float>(), *g = gamma.data<float>();
  const float *md = mean.data<float>(), *id = invstd.data<float>();
  float *dxd = dx.data<float>(), *dg = dgamma.data<float>(), *db = dbeta.data<float>();
  const int64_t n = p.n, c = p.c, s = p.s;
  const float count = static_cast<float>(n * s);
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    const float mu = md[ch], inv = id[ch];
    double sdy = 0, sdyx = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = xd + (i * c + ch) * s;
      const float* dr = dyd + (i * c + ch) * s;
      float a = 0.0f, b = 0.0f;
#pragma omp simd reduction(+ : a, b)
      for (int64_t k = 0; k < s; ++k) {
        a += dr[k];
        b += dr[k] * ((xr[k] - mu) * inv);
      }
      sdy += static_cast<double>(a);
      sdyx += static_cast<double>(b);
    }
    const float sum_dy = static_cast<float>(sdy), sum_dy_xhat = static_cast<float>(sdyx);
    dg[ch] += sum_dy_xhat;
    db[ch] += sum_dy;
    const float scale = g[ch] * inv / count;
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = xd + (i * c + ch) * s;
      const float* dr = dyd + (i * c + ch) * s;
      float* out = dxd + (i * c + ch) * s;
#pragma omp simd
      for (int64_t k = 0; k < s; ++k) {
        const float xhat = (xr[k] - mu) * inv;
        out[k] = scale * (count * dr[k] - sum_dy - xhat * sum_dy_xhat);
      }
    }
  }
}

void batchnorm_forward_infer_fast(const BatchNormParams& p, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& rm, const Tensor& rv, Tensor& y) {
  check_infer_f32("batchnorm_forward_infer_fast", p, x);
  check_shape("batchnorm_forward_infer_fast", "y", y, x.shape());
  if (x.channel_block() != 0) {
    check_same_block("batchnorm_forward_infer_fast", x, y, "y");
    return for_block("batchnorm_forward_infer_fast", x, [&](auto blk) {
      forward_infer_blocked<decltype(blk)::value>(p, x.blocked_data<float>(), gamma.data<float>(), beta.data<float>(),
                                                  rm.data<float>(), rv.data<float>(), y.blocked_data<float>());
    });
  }
  const float *xd = x.data<float>(), *g = gamma.data<float>(), *b = beta.data<float>();
  const float *rmd = rm.data<float>(), *rvd = rv.data<float>();
  float* yd = y.data<float>();
  const int64_t n = p.n, c = p.c, s = p.s;
#pragma omp parallel for schedule(static) collapse(2)
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch) {
      const float mu = rmd[ch], inv = infer_invstd(p, rvd[ch]), gc = g[ch], bc = b[ch];
      const float* xr = xd + (i * c + ch) * s;
      float* yr = yd + (i * c + ch) * s;
#pragma omp simd
      for (int64_t k = 0; k < s; ++k) yr[k] = gc * ((xr[k] - mu) * inv) + bc;
    }
}

// dx = dy*(gamma*s); dgamma += sum(dy*xhat); dbeta += sum(dy), xhat = (x - running_mean)*s.
void batchnorm_backward_infer_fast(const BatchNormParams& p, const Tensor& x, const Tensor& dy, const Tensor& gamma,
                                   const Tensor& rm, const Tensor& rv, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  check_infer_f32("batchnorm_backward_infer_fast", p, x);
  check_shape("batchnorm_backward_infer_fast", "dy", dy, x.shape());
  check_shape("batchnorm_backward_infer_fast", "dx", dx, x.shape());
  if (x.channel_block() != 0) {
    check_same_block("batchnorm_backward_infer_fast", x, dy, "dy");
    check_same_block("batchnorm_backward_infer_fast", x, dx, "dx");
    return for_block("batchnorm_backward_infer_fast", x, [&](auto blk) {
      backward_infer_blocked<decltype(blk)::value>(p, x.blocked_data<float>(), dy.blocked_data<float>(),
                                                   gamma.data<float>(), rm.data<float>(), rv.data<float>(),
                                                   dx.blocked_data<float>(), dgamma.data<float>(), dbeta.data<float>());
    });
  }
  const float *xd = x.data<float>(), *dyd = dy.data<float>(), *g = gamma.data<float>();
  const float *rmd = rm.data<float>(), *rvd = rv.data<float>();
  float *dxd = dx.data<float>(), *dg = dgamma.data<float>(), *db = dbeta.data<float>();
  const int64_t n = p.n, c = p.c, s = p.s;
#pragma omp parallel for schedule(static)
  for (int64_t ch = 0; ch < c; ++ch) {
    const float mu = rmd[ch], inv = infer_invstd(p, rvd[ch]);
    const float scale = g[ch] * inv;
    double sdy = 0, sdyx = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* xr = xd + (i * c + ch) * s;
      const float* dr = dyd + (i * c + ch) * s;
      float* out = dxd + (i * c + ch) * s;
      float a = 0.0f, bsum = 0.0f;
#pragma omp simd reduction(+ : a, bsum)
      for (int64_t k = 0; k < s; ++k) {
        a += dr[k];
        bsum += dr[k] * ((xr[k] - mu) * inv);
        out[k] = dr[k] * scale;
      }
      sdy += static_cast<double>(a);
      sdyx += static_cast<double>(bsum);
    }
    dg[ch] += static_cast<float>(sdyx);
    db[ch] += static_cast<float>(sdy);
  }
}

}  // namespace

void register_batchnorm_fast(KernelRegistry& reg) {
  BatchNormKernel k;
  k.name = "fast";
  k.supports_doc = "float32, plain or channel-blocked, every params field but sum_order (SIMD row sums added in double); the running "
                   "update is the reference's";
  k.supports = [](const BatchNormParams&, DType dt) { return dt == DType::f32; };
  k.forward_train = batchnorm_forward_train_fast;
  k.backward_train = batchnorm_backward_train_fast;
  k.forward_infer = batchnorm_forward_infer_fast;
  k.backward_infer = batchnorm_backward_infer_fast;
  k.update_running = batchnorm_update_running;
  k.any_block = true;
  reg.batchnorm.at(KernelBackend::fast) = k;
}

}  // namespace driftlab
