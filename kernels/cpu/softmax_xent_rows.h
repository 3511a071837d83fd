// Softmax cross-entropy of the CPU kernels, row by row as the reference writes it: shared by the
// reference (rows in order on one thread, kernels/cpu/ref/softmax_xent_ref.cpp) and the fast
// kernel (rows over OpenMP threads, Parallel, kernels/cpu/fast/softmax_xent_fast.cpp). Each row is computed
// alone and the per-row losses are reduced on one thread in params.sum_order, so the two give
// the same bits for any thread count.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/ops/softmax_xent.h"

namespace driftlab {
namespace xent_rows {

// z (N,K) and N labels in 0..K-1, or an error naming the sample.
inline void check_args(const char* fn, const Tensor& z, const std::vector<int32_t>& labels) {
  // if/fail: the shape strings are built only for the message
  if (z.rank() != 2) fail(fn, ": logits must be (N,K), got ", shape_str(z.shape()));
  if (static_cast<int64_t>(labels.size()) != z.dim(0))
    fail(fn, ": ", labels.size(), " labels for logits ", shape_str(z.shape()));
  for (std::size_t i = 0; i < labels.size(); ++i)
    check(labels[i] >= 0 && labels[i] < z.dim(1), fn, ": label ", labels[i], " of sample ", i, " is outside 0..",
          z.dim(1) - 1);
}

// p = softmax(row) with max subtraction; the normaliser summed in `order`.
template <typename T>
void softmax_row(const T* z, int64_t k, SumOrder order, T* p) {
  T m = z[0];
  for (int64_t j = 1; j < k; ++j) m = z[j] > m ? z[j] : m;
  for (int64_t j = 0; j < k; ++j) p[j] = std::exp(z[j] - m);
  T s = ordered_sum(p, k, order);
  for (int64_t j = 0; j < k; ++j) p[j] /= s;
}

template <typename T>
T clip(T v, T lo, T hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// The loss of one row z (k logits) with label y; p: k values of scratch.
template <typename T>
T row_loss(const SoftmaxXentParams& prm, const T* z, int64_t k, int32_t y, T* p) {
  const T eps = static_cast<T>(prm.clip_eps);
  if (prm.form == CeFormulation::log_softmax) {
    T m = z[0];
    for (int64_t j = 1; j < k; ++j) m = z[j] > m ? z[j] : m;
    for (int64_t j = 0; j < k; ++j) p[j] = std::exp(z[j] - m);
    return std::log(ordered_sum(p, k, prm.sum_order)) + m - z[y];
  }
  softmax_row(z, k, prm.sum_order, p);
  if (prm.form == CeFormulation::softmax_clip) {
    T s = ordered_sum(p, k, prm.sum_order);
    return -std::log(clip(p[y] / s, eps, T(1) - eps));
  }
  return -std::log(p[y]);
}

// dz of one row, times `scale` (1/N for the mean); p, dp, t: k values of scratch each.
// Each backward is the chain rule of its own forward, written out step by step.
template <typename T>
void row_grad(const SoftmaxXentParams& prm, const T* z, int64_t k, int32_t y, T scale, T* dz, T* p, T* dp, T* t) {
  const T eps = static_cast<T>(prm.clip_eps);
  softmax_row(z, k, prm.sum_order, p);
  if (prm.form == CeFormulation::log_softmax) {
    // d/dz (logsumexp(z) - z_y) = softmax(z) - onehot(y)
    for (int64_t j = 0; j < k; ++j) dz[j] = (p[j] - (j == y ? T(1) : T(0))) * scale;
    return;
  }
  // dL/dp for the probability formulations (only the target entry of t is non-zero).
  if (prm.form == CeFormulation::softmax_clip) {
    // q = p/S, S = sum p; L = -log clip(q_y). Outside [eps,1-eps] the clip has zero slope.
    T s = ordered_sum(p, k, prm.sum_order);
    T qy = p[y] / s;
    T dq = (qy >= eps && qy <= T(1) - eps) ? -T(1) / qy : T(0);
    // dq_y/dp_j = (delta_yj - q_y) / S
    for (int64_t j = 0; j < k; ++j) dp[j] = dq * ((j == y ? T(1) : T(0)) - qy) / s;
  } else {
    for (int64_t j = 0; j < k; ++j) dp[j] = j == y ? -T(1) / p[j] : T(0);
  }
  // Softmax Jacobian: dz_j = p_j * (dp_j - sum_l p_l dp_l)
  for (int64_t j = 0; j < k; ++j) t[j] = p[j] * dp[j];
  T dot = ordered_sum(t, k, prm.sum_order);
  for (int64_t j = 0; j < k; ++j) dz[j] = p[j] * (dp[j] - dot) * scale;
}

// Rows below which one thread does all (a 10-class row is ~50 ns).
constexpr int64_t kParallelMinRows = 512;

template <bool Parallel, typename T>
double forward(const SoftmaxXentParams& prm, const T* z, int64_t n, int64_t k, const int32_t* y) {
  std::vector<T> losses(static_cast<std::size_t>(n));
#pragma omp parallel if (Parallel && n >= kParallelMinRows)
  {
    std::vector<T> p(static_cast<std::size_t>(k));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) losses[i] = row_loss(prm, z + i * k, k, y[i], p.data());
  }
  double total = static_cast<double>(ordered_sum(losses.data(), n, prm.sum_order));
  return prm.mean ? total / static_cast<double>(n) : total;
}

template <bool Parallel, typename T>
void backward(const SoftmaxXentParams& prm, const T* z, int64_t n, int64_t k, const int32_t* y, T* dz) {
  const T scale = prm.mean ? T(1) / static_cast<T>(n) : T(1);
#pragma omp parallel if (Parallel && n >= kParallelMinRows)
  {
    std::vector<T> p(static_cast<std::size_t>(k)), dp(p), t(p);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) row_grad(prm, z + i * k, k, y[i], scale, dz + i * k, p.data(), dp.data(), t.data());
  }
}

// The Tensor entry points: logits, labels and dz checked, then the rows for T.
template <bool Parallel>
double run_forward(const SoftmaxXentParams& prm, const Tensor& z, const std::vector<int32_t>& labels) {
  check_args("softmax_xent_forward", z, labels);
  return dispatch_dtype(z.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return forward<Parallel, T>(prm, z.data<T>(), z.dim(0), z.dim(1), labels.data());
  });
}

template <bool Parallel>
void run_backward(const SoftmaxXentParams& prm, const Tensor& z, const std::vector<int32_t>& labels, Tensor& dz) {
  check_args("softmax_xent_backward", z, labels);
  check_shape("softmax_xent_backward", "dz", dz, z.shape());
  dispatch_dtype(z.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward<Parallel, T>(prm, z.data<T>(), z.dim(0), z.dim(1), labels.data(), dz.data<T>());
  });
}

}  // namespace xent_rows
}  // namespace driftlab
