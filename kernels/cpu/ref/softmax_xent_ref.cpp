// Reference softmax cross-entropy, three formulations (see engine/ops/softmax_xent.h), float and
// double: the rows in order (kernels/cpu/softmax_xent_rows.h), the batch sum in params.sum_order.
#include <vector>

#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"
#include "kernels/cpu/softmax_xent_rows.h"

namespace driftlab {
namespace {

template <typename T>
double forward(const SoftmaxXentParams& prm, const T* z, int64_t n, int64_t k, const int32_t* y) {
  std::vector<T> p(static_cast<std::size_t>(k)), losses(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) losses[i] = xent_rows::row_loss(prm, z + i * k, k, y[i], p.data());
  double total = static_cast<double>(ordered_sum(losses.data(), n, prm.sum_order));
  return prm.mean ? total / static_cast<double>(n) : total;
}

template <typename T>
void backward(const SoftmaxXentParams& prm, const T* z, int64_t n, int64_t k, const int32_t* y, T* dz) {
  std::vector<T> p(static_cast<std::size_t>(k)), dp(p), t(p);
  const T scale = prm.mean ? T(1) / static_cast<T>(n) : T(1);
  for (int64_t i = 0; i < n; ++i)
    xent_rows::row_grad(prm, z + i * k, k, y[i], scale, dz + i * k, p.data(), dp.data(), t.data());
}

}  // namespace

double softmax_xent_forward_ref(const SoftmaxXentParams& prm, const Tensor& z, const std::vector<int32_t>& labels) {
  xent_rows::check_args("softmax_xent_forward", z, labels);
  return dispatch_dtype(z.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return forward<T>(prm, z.data<T>(), z.dim(0), z.dim(1), labels.data());
  });
}

void softmax_xent_backward_ref(const SoftmaxXentParams& prm, const Tensor& z, const std::vector<int32_t>& labels,
                               Tensor& dz) {
  xent_rows::check_args("softmax_xent_backward", z, labels);
  check_shape("softmax_xent_backward", "dz", dz, z.shape());
  dispatch_dtype(z.dtype(), [&](auto tag) {
    using T = decltype(tag);
    backward<T>(prm, z.data<T>(), z.dim(0), z.dim(1), labels.data(), dz.data<T>());
  });
}

void register_softmax_xent_ref(KernelRegistry& reg) {
  SoftmaxXentKernel k;
  k.name = "reference";
  k.supports_doc = "every params field, float32 and float64";
  k.supports = [](const SoftmaxXentParams&, DType) { return true; };
  k.forward = softmax_xent_forward_ref;
  k.backward = softmax_xent_backward_ref;
  reg.softmax_xent.at(KernelBackend::reference) = k;
}

}  // namespace driftlab
