// Fast softmax cross-entropy, float and double: the reference's row formulas
// (kernels/cpu/softmax_xent_rows.h), rows split over OpenMP threads, each row computed alone;
// the forward's per-row losses are then reduced on one thread in params.sum_order, as the
// reference reduces them. So the loss and dz equal the reference's bit for bit, whatever the
// thread count.
#include <vector>

#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "kernels/cpu/softmax_xent_rows.h"

namespace driftlab {

namespace {

// Rows per thread below which one thread does all (a 10-class row is ~50 ns).
constexpr int64_t kParallelMinRows = 512;

template <typename T>
double forward(const SoftmaxXentParams& prm, const T* z, int64_t n, int64_t k, const int32_t* y) {
  std::vector<T> losses(static_cast<std::size_t>(n));
#pragma omp parallel if (n >= kParallelMinRows)
  {
    std::vector<T> p(static_cast<std::size_t>(k));
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) losses[i] = xent_rows::row_loss(prm, z + i * k, k, y[i], p.data());
  }
  double total = static_cast<double>(ordered_sum(losses.data(), n, prm.sum_order));
  return prm.mean ? total / static_cast<double>(n) : total;
}

template <typename T>
void backward(const SoftmaxXentParams& prm, const T* z, int64_t n, int64_t k, const int32_t* y, T* dz) {
  const T scale = prm.mean ? T(1) / static_cast<T>(n) : T(1);
#pragma omp parallel if (n >= kParallelMinRows)
  {
    std::vector<T> p(static_cast<std::size_t>(k)), dp(p), t(p);
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      xent_rows::row_grad(prm, z + i * k, k, y[i], scale, dz + i * k, p.data(), dp.data(), t.data());
  }
}

double softmax_xent_forward_fast(const SoftmaxXentParams& prm, const Tensor& z, const std::vector<int32_t>& labels) {
  xent_rows::check_args("softmax_xent_forward", z, labels);
  return dispatch_dtype(z.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return forward<T>(prm, z.data<T>(), z.dim(0), z.dim(1), labels.data());
  });
}

void softmax_xent_backward_fast(const SoftmaxXentParams& prm, const Tensor& z, const std::vector<int32_t>& labels,
                                Tensor& dz) {
  xent_rows::check_args("softmax_xent_backward", z, labels);
  check_shape("softmax_xent_backward", "dz", dz, z.shape());
  dispatch_dtype(z.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward<T>(prm, z.data<T>(), z.dim(0), z.dim(1), labels.data(), dz.data<T>());
  });
}

}  // namespace

void register_softmax_xent_fast(KernelRegistry& reg) {
  SoftmaxXentKernel k;
  k.name = "fast";
  k.supports_doc = "every params field, float32 and float64; the reference's bits (rows over OpenMP threads)";
  k.supports = [](const SoftmaxXentParams&, DType) { return true; };
  k.forward = softmax_xent_forward_fast;
  k.backward = softmax_xent_backward_fast;
  reg.softmax_xent.at(KernelBackend::fast) = k;
}

}  // namespace driftlab
