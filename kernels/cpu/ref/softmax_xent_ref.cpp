// Softmax cross-entropy, three formulations (see engine/ops/softmax_xent.h), float and
// double. Each backward is the chain rule of its own forward, written out step by step.
#include <cmath>
#include <vector>

#include "engine/ops/softmax_xent.h"

namespace driftlab {
namespace {

void check_args(const char* fn, const Tensor& z, const std::vector<int32_t>& labels) {
  check(z.rank() == 2, fn, ": logits must be (N,K), got ", shape_str(z.shape()));
  check(static_cast<int64_t>(labels.size()) == z.dim(0), fn, ": ", labels.size(), " labels for logits ",
        shape_str(z.shape()));
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

template <typename T>
double forward(const SoftmaxXentParams& prm, const T* z, int64_t n, int64_t k, const int32_t* y) {
  std::vector<T> p(static_cast<std::size_t>(k)), losses(static_cast<std::size_t>(n));
  const T eps = static_cast<T>(prm.clip_eps);
  for (int64_t i = 0; i < n; ++i) {
    const T* zi = z + i * k;
    T li = 0;
    if (prm.form == CeFormulation::log_softmax) {
      T m = zi[0];
      for (int64_t j = 1; j < k; ++j) m = zi[j] > m ? zi[j] : m;
      for (int64_t j = 0; j < k; ++j) p[j] = std::exp(zi[j] - m);
      li = std::log(ordered_sum(p.data(), k, prm.sum_order)) + m - zi[y[i]];
    } else {
      softmax_row(zi, k, prm.sum_order, p.data());
      if (prm.form == CeFormulation::softmax_clip) {
        T s = ordered_sum(p.data(), k, prm.sum_order);
        li = -std::log(clip(p[y[i]] / s, eps, T(1) - eps));
      } else {
        li = -std::log(p[y[i]]);
      }
    }
    losses[i] = li;
  }
  double total = static_cast<double>(ordered_sum(losses.data(), n, prm.sum_order));
  return prm.mean ? total / static_cast<double>(n) : total;
}

template <typename T>
void backward(const SoftmaxXentParams& prm, const T* z, int64_t n, int64_t k, const int32_t* y, T* dz) {
  std::vector<T> p(static_cast<std::size_t>(k)), dp(static_cast<std::size_t>(k)), t(static_cast<std::size_t>(k));
  const T scale = prm.mean ? T(1) / static_cast<T>(n) : T(1);
  const T eps = static_cast<T>(prm.clip_eps);
  for (int64_t i = 0; i < n; ++i) {
    const T* zi = z + i * k;
    T* dzi = dz + i * k;
    softmax_row(zi, k, prm.sum_order, p.data());
    if (prm.form == CeFormulation::log_softmax) {
      // d/dz (logsumexp(z) - z_y) = softmax(z) - onehot(y)
      for (int64_t j = 0; j < k; ++j) dzi[j] = (p[j] - (j == y[i] ? T(1) : T(0))) * scale;
      continue;
    }
    // dL/dp for the probability formulations (only the target entry of t is non-zero).
    if (prm.form == CeFormulation::softmax_clip) {
      // q = p/S, S = sum p; L = -log clip(q_y). Outside [eps,1-eps] the clip has zero slope.
      T s = ordered_sum(p.data(), k, prm.sum_order);
      T qy = p[y[i]] / s;
      T dq = (qy >= eps && qy <= T(1) - eps) ? -T(1) / qy : T(0);
      // dq_y/dp_j = (delta_yj - q_y) / S
      for (int64_t j = 0; j < k; ++j) dp[j] = dq * ((j == y[i] ? T(1) : T(0)) - qy) / s;
    } else {
      for (int64_t j = 0; j < k; ++j) dp[j] = j == y[i] ? -T(1) / p[j] : T(0);
    }
    // Softmax Jacobian: dz_j = p_j * (dp_j - sum_l p_l dp_l)
    for (int64_t j = 0; j < k; ++j) t[j] = p[j] * dp[j];
    T dot = ordered_sum(t.data(), k, prm.sum_order);
    for (int64_t j = 0; j < k; ++j) dzi[j] = p[j] * (dp[j] - dot) * scale;
  }
}

}  // namespace

double softmax_xent_forward_ref(const SoftmaxXentParams& prm, const Tensor& z, const std::vector<int32_t>& labels) {
  check_args("softmax_xent_forward", z, labels);
  return dispatch_dtype(z.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return forward<T>(prm, z.data<T>(), z.dim(0), z.dim(1), labels.data());
  });
}

void softmax_xent_backward_ref(const SoftmaxXentParams& prm, const Tensor& z, const std::vector<int32_t>& labels,
                               Tensor& dz) {
  check_args("softmax_xent_backward", z, labels);
  check_shape("softmax_xent_backward", "dz", dz, z.shape());
  dispatch_dtype(z.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward<T>(prm, z.data<T>(), z.dim(0), z.dim(1), labels.data(), dz.data<T>());
  });
}

}  // namespace driftlab
