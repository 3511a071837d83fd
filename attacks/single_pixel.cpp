#include "attacks/single_pixel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "engine/random.h"

namespace driftlab {
namespace attacks {

void SinglePixelSpec::validate() const {
  check(max_pixels >= 1, "single-pixel: max_pixels ", max_pixels, " must be >= 1");
  check(std::isfinite(lo) && std::isfinite(hi) && lo < hi, "single-pixel: input bounds [", lo, ", ", hi,
        "] must be finite with lo < hi");
}

namespace {

constexpr int64_t kPixelsPerCall = 32;  // candidates per logits() call: 32 pixels x (min, max)

template <typename T>
void attack_sample(Runner& runner, const SinglePixelSpec& spec, const T* x, const Shape& one, int32_t label,
                   Rng& rng, T* out, int32_t* adv_pred, int64_t* row, int64_t* col, int64_t* queries) {
  const int64_t C = one[1], H = one[2], W = one[3], per = C * H * W;
  std::vector<int64_t> order(static_cast<std::size_t>(H * W));
  for (int64_t i = 0; i < H * W; ++i) order[static_cast<std::size_t>(i)] = i;
  for (int64_t i = H * W - 1; i > 0; --i) {  // Fisher-Yates, j uniform in [0, i]
    const int64_t j = std::min<int64_t>(i, static_cast<int64_t>(rng.uniform_f64() * static_cast<double>(i + 1)));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  const int64_t pixels = std::min<int64_t>(spec.max_pixels, H * W);
  const T values[2] = {static_cast<T>(spec.lo), static_cast<T>(spec.hi)};
  for (int64_t p0 = 0; p0 < pixels; p0 += kPixelsPerCall) {
    const int64_t np = std::min(kPixelsPerCall, pixels - p0);
    Shape s = one;
    s[0] = 2 * np;
    Tensor cand(s, DTypeOf<T>::value);
    std::vector<std::pair<int64_t, int64_t>> where(static_cast<std::size_t>(2 * np));
    for (int64_t k = 0; k < np; ++k) {
      const int64_t p = order[static_cast<std::size_t>(p0 + k)];
      // Foolbox 2 reads p as (x = p % w, y = p / w) and indexes (x, y): row p % w, column p / w
      const int64_t r = spec.transposed_index ? p % W : p / W, c = spec.transposed_index ? p / W : p % W;
      if (r >= H || c >= W) {  // the transposed reading of a non-square image points outside it
        where[2 * k] = where[2 * k + 1] = {-1, -1};
      } else {
        where[2 * k] = where[2 * k + 1] = {r, c};
      }
      for (int v = 0; v < 2; ++v) {
        T* img = cand.data<T>() + (2 * k + v) * per;
        std::memcpy(img, x, static_cast<std::size_t>(per) * sizeof(T));
        if (r < H && c < W)
          for (int64_t ch = 0; ch < C; ++ch) img[(ch * H + r) * W + c] = values[v];
      }
    }
    const std::vector<int32_t> pred = predictions(runner.logits(cand));
    for (int64_t q = 0; q < 2 * np; ++q) {
      if (where[q].first < 0) continue;  // Foolbox 2 would raise an IndexError there; skipped, no query
      ++*queries;
      if (pred[q] != label) {
        std::memcpy(out, cand.data<T>() + q * per, static_cast<std::size_t>(per) * sizeof(T));
        *adv_pred = pred[q], *row = where[q].first, *col = where[q].second;
        return;
      }
    }
  }
}

}  // namespace

SinglePixelResult run_single_pixel(Runner& runner, const Tensor& x, const std::vector<int32_t>& labels,
                                   const SinglePixelSpec& spec) {
  spec.validate();
  check(x.rank() == 4, "single-pixel: input must be (N, C, H, W), got ", shape_str(x.shape()));
  check(x.dtype() == DType::f32 || x.dtype() == DType::f64, "single-pixel: input must be float32 or float64, got ",
        dtype_name(x.dtype()));
  const int64_t n = x.dim(0), per = x.numel() / std::max<int64_t>(n, 1);
  check(static_cast<int64_t>(labels.size()) == n, "single-pixel: ", labels.size(), " labels for ", n, " inputs");
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.at(i);
    if (!(v >= spec.lo && v <= spec.hi))  // the message is built only on failure (this runs per element)
      fail("single-pixel: input element ", i, " (sample ", i / per, ") is ", v, ", outside the bounds [", spec.lo, ", ",
           spec.hi, "]");
  }
  SinglePixelResult r;
  r.x_adv = x.clone();
  r.clean_pred = predictions(runner.logits(x));
  r.adv_pred = r.clean_pred;
  r.success.assign(static_cast<std::size_t>(n), 0);
  r.row.assign(static_cast<std::size_t>(n), -1);
  r.col.assign(static_cast<std::size_t>(n), -1);
  r.queries.assign(static_cast<std::size_t>(n), 1);  // the clean prediction
  Shape one = x.shape();
  one[0] = 1;
  for (int64_t s = 0; s < n; ++s) {
    if (r.clean_pred[s] != labels[s]) {  // already adversarial: Foolbox 2 counts it, distance 0
      r.success[s] = 1;
      continue;
    }
    // each sample its own stream: its order does not depend on the samples before it
    Rng rng(RngEngine::mt19937_u24, spec.seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(s + 1)));
    if (x.dtype() == DType::f32)
      attack_sample<float>(runner, spec, x.data<float>() + s * per, one, labels[s], rng,
                           r.x_adv.data<float>() + s * per, &r.adv_pred[s], &r.row[s], &r.col[s], &r.queries[s]);
    else
      attack_sample<double>(runner, spec, x.data<double>() + s * per, one, labels[s], rng,
                            r.x_adv.data<double>() + s * per, &r.adv_pred[s], &r.row[s], &r.col[s], &r.queries[s]);
    r.success[s] = r.adv_pred[s] != labels[s];
  }
  return r;
}

}  // namespace attacks
}  // namespace driftlab
