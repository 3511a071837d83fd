#include "engine/data/transform.h"

#include <cmath>

namespace driftlab {

InputNorm compute_standardization(const Dataset& d) {
  const float* x = d.images.data<float>();
  const int64_t n = d.images.numel();
  check(n > 0, "normalize: dataset '", d.name, "' is empty");
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    s += x[i];
    s2 += static_cast<double>(x[i]) * x[i];
  }
  InputNorm r;
  r.mean = s / static_cast<double>(n);
  r.std = std::sqrt(std::max(s2 / static_cast<double>(n) - r.mean * r.mean, 0.0));
  check(r.std > 0, "normalize: dataset '", d.name, "' has zero variance");
  return r;
}

void apply_norm(Tensor& x, const InputNorm& n) {
  if (n.identity()) return;
  dispatch_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* d = x.data<T>();
    const T m = static_cast<T>(n.mean), inv = static_cast<T>(1.0 / n.std);
    for (int64_t i = 0; i < x.numel(); ++i) d[i] = (d[i] - m) * inv;
  });
}

void apply_norm(Dataset& d, const InputNorm& n) { apply_norm(d.images, n); }

InputNorm input_norm_from_metadata(const nlohmann::json& metadata) {
  InputNorm n;
  n.mean = metadata.value("input_mean", 0.0);
  n.std = metadata.value("input_std", 1.0);
  return n;
}

}  // namespace driftlab
