// Elementwise activations, float and double. Plain loops the compiler vectorises, split
// over OpenMP threads for large tensors: each element is computed alone, so the result is
// the same for any thread count, and these loops are both the reference and the kernel the
// engine runs. forward/backward write (=).
#include <cmath>

#include "engine/ops/activation.h"

namespace driftlab {

const char* act_name(ActKind k) {
  switch (k) {
    case ActKind::relu: return "relu";
    case ActKind::tanh: return "tanh";
    case ActKind::sigmoid: return "sigmoid";
    case ActKind::hard_sigmoid: return "hard_sigmoid";
  }
  return "?";
}

namespace {

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;

template <typename T>
void forward(const ActivationParams& p, const T* x, T* y, int64_t n) {
  const T slope = static_cast<T>(p.hs_slope), offset = static_cast<T>(p.hs_offset);
  switch (p.kind) {
    case ActKind::relu:
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
      break;
    case ActKind::tanh:
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
      break;
    case ActKind::sigmoid:
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) y[i] = T(1) / (T(1) + std::exp(-x[i]));
      break;
    case ActKind::hard_sigmoid:
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) {
        T v = slope * x[i] + offset;
        y[i] = v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
      }
      break;
  }
}

template <typename T>
void backward(const ActivationParams& p, const T* x, const T* y, const T* dy, T* dx, int64_t n) {
  const T slope = static_cast<T>(p.hs_slope);
  const T g0 = static_cast<T>(p.relu_grad_at_zero);
  switch (p.kind) {
    case ActKind::relu:
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > T(0) ? dy[i] : (x[i] == T(0) ? g0 * dy[i] : T(0));
      break;
    case ActKind::tanh:
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (T(1) - y[i] * y[i]);
      break;
    case ActKind::sigmoid:
#pragma omp parallel for schedule(static) if (n > kParallelMin)
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * y[i] * (T(1) - y[i]);
      break;
    case ActKind::hard_sigmoid:
      // The linear region is slope*x+offset in [0,1]; its end points are where the
      // framework's clip gradient either still passes (inclusive) or is already zero.
      // Inclusive (TF/Keras, Theano): their clip's gradient tests the clipped value
      // v = slope*x + offset, computed in T exactly as the forward does, against [0, 1]; so
      // x = 2.50000024f, where 0.2x+0.5 rounds to exactly 1, still passes the gradient.
      // Exclusive (PyTorch hardsigmoid_backward): tests x itself, -3 < x < 3, in double.
      if (p.hs_grad_edges_inclusive) {
        const T offset = static_cast<T>(p.hs_offset);
#pragma omp parallel for schedule(static) if (n > kParallelMin)
        for (int64_t i = 0; i < n; ++i) {
          const T v = slope * x[i] + offset;
          dx[i] = (v >= T(0) && v <= T(1)) ? slope * dy[i] : T(0);
        }
      } else {
        const double lo = -p.hs_offset / p.hs_slope, hi = (1.0 - p.hs_offset) / p.hs_slope;
#pragma omp parallel for schedule(static) if (n > kParallelMin)
        for (int64_t i = 0; i < n; ++i) {
          const double v = static_cast<double>(x[i]);
          dx[i] = (v > lo && v < hi) ? slope * dy[i] : T(0);
        }
      }
      break;
  }
}

}  // namespace

void activation_forward_ref(const ActivationParams& p, const Tensor& x, Tensor& y) {
  check_shape(act_name(p.kind), "y", y, x.shape());
  check_same_dtype(act_name(p.kind), x, y);
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    forward<T>(p, x.data<T>(), y.data<T>(), x.numel());
  });
}

void activation_backward_ref(const ActivationParams& p, const Tensor& x, const Tensor& y, const Tensor& dy,
                             Tensor& dx) {
  check_shape(act_name(p.kind), "dy", dy, x.shape());
  check_shape(act_name(p.kind), "dx", dx, x.shape());
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward<T>(p, x.data<T>(), y.data<T>(), dy.data<T>(), dx.data<T>(), x.numel());
  });
}

}  // namespace driftlab
