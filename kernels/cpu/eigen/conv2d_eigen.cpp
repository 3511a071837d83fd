// Eigen conv2d: im2col + Eigen GEMM, float and double, every Conv2dParams field honoured
// (sum_order is a reference-kernel knob and is ignored here: the GEMM sums in its own order).
// Layouts x (N,C,H,W), w (K,C,R,S), y (N,K,P,Q). forward and backward_data write (=);
// backward_weight adds (+=) into dw and db.
//
// Per image: col (C*R*S, P*Q) holds the input pixels each kernel tap meets, and
//   forward          y_n  (K,PQ)   = W (K,CRS) * col            then + b[k] (bias last, as the reference)
//   backward_data    dcol (CRS,PQ) = W^T * dy_n                 then col2im (scatter-add) into dx_n
//   backward_weight  dW   (K,CRS) += dy_n * col^T,  db[k] += sum_pq dy_n[k,pq]
// Flip is handled inside im2col/col2im: the pixel met by window tap (r,s) is stored in the row of
// kernel element (R-1-r, S-1-s), so W is always the weight tensor as stored and dW lands in the
// stored orientation too; a flipped conv costs nothing extra. A 1x1 kernel with stride 1 and no
// padding skips im2col/col2im: col is x_n (and dcol is dx_n) itself.
//
// Threading: the batch is cut into min(omp_get_max_threads(), N) contiguous chunks run under
// `omp parallel for schedule(static)`; each chunk calls Eigen, which runs single-threaded inside
// a parallel region. backward_weight keeps one partial dW/db per chunk and sums the partials in
// chunk order, so results are bitwise reproducible for a fixed thread count. With one chunk
// (batch 1 or one thread) the loop runs outside any parallel region and Eigen may split each
// GEMM over the threads itself.
#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/eigen.h"
#include "core/ops/conv2d.h"
#include "kernels/cpu/registry.h"

namespace driftlab {
namespace {

template <typename T>
using RowMajorMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using MatMap = Eigen::Map<RowMajorMatrix<T>>;
template <typename T>
using ConstMatMap = Eigen::Map<const RowMajorMatrix<T>>;

inline int64_t tap(int64_t i, int64_t n, bool flip) { return flip ? n - 1 - i : i; }
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Output columns ow whose input column iw = ow*stride_w - pad_l + s*dil_w lies in [0, W):
// [lo, hi). Outside it the window hangs over the padding.
struct ColRange {
  int64_t lo, hi;
};
inline ColRange valid_cols(const Conv2dParams& p, int64_t s) {
  const int64_t q = p.out_w(), off = s * p.dil_w - p.pad_l;
  int64_t lo = off >= 0 ? 0 : ceil_div(-off, p.stride_w);
  int64_t hi = p.w - off <= 0 ? 0 : ceil_div(p.w - off, p.stride_w);
  lo = std::min(lo, q);
  hi = std::max(lo, std::min(hi, q));
  return {lo, hi};
}

// True when col would be x itself: a 1x1 kernel, stride 1, no padding.
inline bool col_is_input(const Conv2dParams& p) {
  return p.r == 1 && p.s == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_t == 0 && p.pad_b == 0 &&
         p.pad_l == 0 && p.pad_r == 0;
}

// x:(C,H,W) one image -> col:(C*R*S, P*Q). Row (c, tap(r), tap(s)) holds the pixels window tap
// (r,s) meets, zero where it meets padding.
template <typename T>
void im2col(const Conv2dParams& p, const T* x, T* col) {
  const int64_t P = p.out_h(), Q = p.out_w();
  for (int64_t c = 0; c < p.c; ++c)
    for (int64_t r = 0; r < p.r; ++r)
      for (int64_t s = 0; s < p.s; ++s) {
        T* dst = col + ((c * p.r + tap(r, p.r, p.flip)) * p.s + tap(s, p.s, p.flip)) * P * Q;
        const ColRange cr = valid_cols(p, s);
        const int64_t off = s * p.dil_w - p.pad_l;
        for (int64_t oh = 0; oh < P; ++oh, dst += Q) {
          const int64_t ih = oh * p.stride_h - p.pad_t + r * p.dil_h;
          if (ih < 0 || ih >= p.h) {
            std::fill(dst, dst + Q, T(0));
            continue;
          }
          const T* src = x + (c * p.h + ih) * p.w + off;
          std::fill(dst, dst + cr.lo, T(0));
          if (p.stride_w == 1)
            std::copy(src + cr.lo, src + cr.hi, dst + cr.lo);
          else
            for (int64_t ow = cr.lo; ow < cr.hi; ++ow) dst[ow] = src[ow * p.stride_w];
          std::fill(dst + cr.hi, dst + Q, T(0));
        }
      }
}

// col:(C*R*S, P*Q) -> dx:(C,H,W) one image, written (=): the adjoint of im2col.
template <typename T>
void col2im(const Conv2dParams& p, const T* col, T* dx) {
  const int64_t P = p.out_h(), Q = p.out_w();
  std::fill(dx, dx + p.c * p.h * p.w, T(0));
  for (int64_t c = 0; c < p.c; ++c)
    for (int64_t r = 0; r < p.r; ++r)
      for (int64_t s = 0; s < p.s; ++s) {
        const T* src = col + ((c * p.r + tap(r, p.r, p.flip)) * p.s + tap(s, p.s, p.flip)) * P * Q;
        const ColRange cr = valid_cols(p, s);
        const int64_t off = s * p.dil_w - p.pad_l;
        for (int64_t oh = 0; oh < P; ++oh, src += Q) {
          const int64_t ih = oh * p.stride_h - p.pad_t + r * p.dil_h;
          if (ih < 0 || ih >= p.h) continue;
          T* dst = dx + (c * p.h + ih) * p.w + off;
            for (int64_t ow = cr.lo; ow < cr.hi; ++ow) dst[ow * p.stride_w] += src[ow];
        }
      }
}

// Runs f(chunk, n_begin, n_end) for min(threads, N) contiguous batch chunks; chunk i always gets
// the same images, whichever thread runs it.
template <typename F>
void for_each_batch_chunk(int64_t n, int64_t chunks, const F& f) {
  if (chunks <= 1) {
    f(int64_t{0}, int64_t{0}, n);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(static_cast<int>(chunks))
  for (int64_t i = 0; i < chunks; ++i) f(i, n * i / chunks, n * (i + 1) / chunks);
}

int64_t batch_chunks(const Conv2dParams& p) {
  return std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), p.n));
}

// x:(N,C,H,W) w:(K,C,R,S) b:(K) or null -> y:(N,K,P,Q) (=)
template <typename T>
void forward(const Conv2dParams& p, const T* x, const T* w, const T* b, T* y) {
  const int64_t PQ = p.out_h() * p.out_w(), CRS = p.c * p.r * p.s, CHW = p.c * p.h * p.w;
  const bool direct = col_is_input(p);
  const int64_t chunks = batch_chunks(p);
  std::vector<T> scratch(direct ? 0 : static_cast<std::size_t>(chunks * CRS * PQ));
  const ConstMatMap<T> wm(w, p.k, CRS);
  for_each_batch_chunk(p.n, chunks, [&](int64_t chunk, int64_t n0, int64_t n1) {
    T* col = direct ? nullptr : scratch.data() + chunk * CRS * PQ;
    for (int64_t n = n0; n < n1; ++n) {
      if (!direct) im2col(p, x + n * CHW, col);
      MatMap<T> yn(y + n * p.k * PQ, p.k, PQ);
      yn.noalias() = wm * ConstMatMap<T>(direct ? x + n * CHW : col, CRS, PQ);
      if (b)  // after the products, as the reference; row by row so it vectorises
        for (int64_t k = 0; k < p.k; ++k) yn.row(k).array() += b[k];
    }
  });
}

// dy:(N,K,P,Q) w:(K,C,R,S) -> dx:(N,C,H,W) (=)
template <typename T>
void backward_data(const Conv2dParams& p, const T* dy, const T* w, T* dx) {
  const int64_t PQ = p.out_h() * p.out_w(), CRS = p.c * p.r * p.s, CHW = p.c * p.h * p.w;
  const bool direct = col_is_input(p);
  const int64_t chunks = batch_chunks(p);
  std::vector<T> scratch(direct ? 0 : static_cast<std::size_t>(chunks * CRS * PQ));
  const ConstMatMap<T> wm(w, p.k, CRS);
  for_each_batch_chunk(p.n, chunks, [&](int64_t chunk, int64_t n0, int64_t n1) {
    T* chunk_col = direct ? nullptr : scratch.data() + chunk * CRS * PQ;
    for (int64_t n = n0; n < n1; ++n) {
      T* col = direct ? dx + n * CHW : chunk_col;  // direct: dcol is dx_n itself
      MatMap<T>(col, CRS, PQ).noalias() = wm.transpose() * ConstMatMap<T>(dy + n * p.k * PQ, p.k, PQ);
      if (!direct) col2im(p, col, dx + n * CHW);
    }
  });
}

// x:(N,C,H,W) dy:(N,K,P,Q) -> dw:(K,C,R,S) (+=), db:(K) or null (+=)
template <typename T>
void backward_weight(const Conv2dParams& p, const T* x, const T* dy, T* dw, T* db) {
  const int64_t PQ = p.out_h() * p.out_w(), CRS = p.c * p.r * p.s, CHW = p.c * p.h * p.w;
  const int64_t KCRS = p.k * CRS;
  const bool direct = col_is_input(p);
  const int64_t chunks = batch_chunks(p);
  std::vector<T> scratch(direct ? 0 : static_cast<std::size_t>(chunks * CRS * PQ));
  // One partial dW (K*CRS) and db (K) per chunk, zeroed: chunk i's images only.
  std::vector<T> partial(static_cast<std::size_t>(chunks * (KCRS + p.k)), T(0));
  for_each_batch_chunk(p.n, chunks, [&](int64_t chunk, int64_t n0, int64_t n1) {
    T* col = direct ? nullptr : scratch.data() + chunk * CRS * PQ;
    T* pw = partial.data() + chunk * (KCRS + p.k);
    MatMap<T> dwm(pw, p.k, CRS);
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>> dbv(pw + KCRS, p.k);
    for (int64_t n = n0; n < n1; ++n) {
      if (!direct) im2col(p, x + n * CHW, col);
      const ConstMatMap<T> dyn(dy + n * p.k * PQ, p.k, PQ);
      dwm.noalias() += dyn * ConstMatMap<T>(direct ? x + n * CHW : col, CRS, PQ).transpose();
      if (db) dbv += dyn.rowwise().sum();
    }
  });
  // Sum the partials in chunk order first, then add once: dw_new = dw_old + gradient.
  const int64_t len = db ? KCRS + p.k : KCRS;
  for (int64_t i = 0; i < len; ++i) {
    T total = partial[static_cast<std::size_t>(i)];
    for (int64_t c = 1; c < chunks; ++c) total += partial[static_cast<std::size_t>(c * (KCRS + p.k) + i)];
    if (i < KCRS)
      dw[i] += total;
    else
      db[i - KCRS] += total;
  }
}

void check_args(const char* fn, const Conv2dParams& p, const Tensor& in, const char* in_name, const Shape& in_shape,
                const Tensor& w) {
  p.validate();
  check_shape(fn, in_name, in, in_shape);
  check_shape(fn, "w", w, p.w_shape());
  check_same_dtype(fn, in, w);
}

}  // namespace

void conv2d_forward_eigen(const Conv2dParams& p, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y) {
  check_args("conv2d_forward_eigen", p, x, "x", p.x_shape(), w);
  check_shape("conv2d_forward_eigen", "y", y, p.y_shape());
  check_same_dtype("conv2d_forward_eigen", x, y);
  if (b) check_shape("conv2d_forward_eigen", "b", *b, {p.k});
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    forward<T>(p, x.data<T>(), w.data<T>(), b ? b->data<T>() : nullptr, y.data<T>());
  });
}

void conv2d_backward_data_eigen(const Conv2dParams& p, const Tensor& dy, const Tensor& w, Tensor& dx) {
  check_args("conv2d_backward_data_eigen", p, dy, "dy", p.y_shape(), w);
  check_shape("conv2d_backward_data_eigen", "dx", dx, p.x_shape());
  check_same_dtype("conv2d_backward_data_eigen", dy, dx);
  dispatch_dtype(dy.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward_data<T>(p, dy.data<T>(), w.data<T>(), dx.data<T>());
  });
}

void conv2d_backward_weight_eigen(const Conv2dParams& p, const Tensor& x, const Tensor& dy, Tensor& dw,
                                  Tensor* db) {
  check_args("conv2d_backward_weight_eigen", p, x, "x", p.x_shape(), dw);
  check_shape("conv2d_backward_weight_eigen", "dy", dy, p.y_shape());
  check_same_dtype("conv2d_backward_weight_eigen", x, dy);
  if (db) check_shape("conv2d_backward_weight_eigen", "db", *db, {p.k});
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward_weight<T>(p, x.data<T>(), dy.data<T>(), dw.data<T>(), db ? db->data<T>() : nullptr);
  });
}

void register_conv2d_eigen(KernelRegistry& reg) {
  Conv2dKernel k;
  k.name = "eigen";
  k.supports_doc = "every params field but groups > 1, float32 and float64";
  k.supports = [](const Conv2dParams& p, DType) { return p.groups == 1; };
  k.forward = conv2d_forward_eigen;
  k.backward_data = conv2d_backward_data_eigen;
  k.backward_weight = conv2d_backward_weight_eigen;
  reg.conv2d.at(KernelBackend::eigen) = k;
}

}  // namespace driftlab
