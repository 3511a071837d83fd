// Calibration observers (quant/observer.h). Every arithmetic step states the precision the
// framework computes it in; the build has -ffp-contract=off, so no multiply-add is fused here
// where the framework runs separate tensor ops.
//
// Sources (paths relative to /usr/lib/python3/dist-packages/torch/ for PyTorch 1.13, read and run
// here; ATen C++ sources read through the source index at the 1.13-era code):
//   ao/quantization/observer.py   MinMaxObserver.forward, MovingAverageMinMaxObserver.forward,
//                                 HistogramObserver.{forward, _adjust_min_max, _combine_histograms,
//                                 _non_linear_param_search, _compute_quantization_error, _get_norm}
//   aten/src/ATen/native/Histogram.cpp  histc_select_outer_bin_edges (bounds fallback)
//   aten/src/ATen/native/cpu/HistogramKernel.cpp  LINEAR_INTERPOLATION bin index (histc path)
//   aten/src/ATen/native/cpu/SumKernel.cpp  cascade_sum (torch.sum of float32: float accumulators)
//   aten/src/ATen/native/cpu/ReduceOpsKernel.cpp  cumsum (float32 accumulated in double)
//   aten/src/ATen/native/cpu/BinaryOpsKernel.cpp  div_floor_kernel (Python floor-division rules)
// ONNX Runtime: onnxruntime/python/tools/quantization/calibrate.py (commit b15ffcdd, read via the
// index; not installed here) HistogramCollector.{collect_value, collect_absolute_value,
// merge_histogram, compute_percentile, get_entropy_threshold}.
#include "quant/observer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"

namespace driftlab {
namespace quant {

namespace {

struct KindName {
  ObserverKind kind;
  const char* name;
};
constexpr KindName kObserverNames[] = {{ObserverKind::minmax, "minmax"},
                                       {ObserverKind::moving_average, "moving_average"},
                                       {ObserverKind::histogram, "histogram"},
                                       {ObserverKind::percentile, "percentile"},
                                       {ObserverKind::entropy, "entropy"}};

// The observed batch as float32 values; refuses other dtypes and non-finite values (naming the
// observer and the first bad element) before any state changes.
const float* checked_values(const Tensor& x, ObserverKind kind) {
  check(x.defined(), observer_name(kind), " observer: undefined tensor");
  check(x.dtype() == DType::f32, observer_name(kind), " observer: expected a float32 tensor, got ",
        dtype_name(x.dtype()), " of shape ", shape_str(x.shape()));
  const float* v = x.data<float>();
  // if/fail rather than check(): check's message arguments (shape_str) would be built for every
  // element, which was most of a histogram calibration's time.
  for (int64_t i = 0; i < x.numel(); ++i)
    if (!std::isfinite(v[i]))
      fail(observer_name(kind), " observer: non-finite value ", v[i], " at flat index ", i, " of a tensor of shape ",
           shape_str(x.shape()),
           " (torch would propagate it into the range; refused rather than produce a meaningless range)");
  return v;
}

// torch.aminmax over finite values (exact whatever the order).
Range batch_minmax(const float* v, int64_t n) {
  Range r{v[0], v[0]};
  for (int64_t i = 1; i < n; ++i) {
    r.min = std::min(r.min, v[i]);
    r.max = std::max(r.max, v[i]);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------
// PyTorch's float32 reductions and element ops, as ATen computes them on this CPU (AVX2:
// Vectorized<float> holds 8 lanes; torch.__config__.show() reports "CPU capability usage: AVX2").

constexpr int kTorchVecLanes = 8;

int64_t ceil_log2(int64_t x) {  // c10::utils::CeilLog2
  if (x <= 2) return 1;
  int64_t bits = 0;
  for (uint64_t v = static_cast<uint64_t>(x) - 1; v != 0; v >>= 1) ++bits;
  return bits;
}

// SumKernel.cpp multi_row_sum: `nrows` interleaved rows of `lanes`-wide vector accumulators,
// summed in a 4-level cascade (level k collects 2^(4k) consecutive items). Row r, item i, lane l
// reads in[i*row_stride + r*col_stride + l]. Returns acc[r][l].
template <int nrows>
std::array<std::array<float, kTorchVecLanes>, nrows> multi_row_sum(const float* in, int64_t row_stride,
                                                                   int64_t col_stride, int64_t size, int lanes) {
  constexpr int kLevels = 4;
  const int64_t level_power = std::max<int64_t>(4, ceil_log2(size) / kLevels);
  const int64_t level_step = int64_t{1} << level_power;
  const int64_t level_mask = level_step - 1;
  float acc[kLevels][nrows][kTorchVecLanes] = {};
  auto load_add = [&](int64_t i) {
    for (int k = 0; k < nrows; ++k)
      for (int l = 0; l < lanes; ++l) acc[0][k][l] += in[i * row_stride + k * col_stride + l];
  };
  int64_t i = 0;
  while (i + level_step <= size) {
    for (int64_t j = 0; j < level_step; ++j, ++i) load_add(i);
    for (int j = 1; j < kLevels; ++j) {
      for (int k = 0; k < nrows; ++k)
        for (int l = 0; l < lanes; ++l) {
          acc[j][k][l] += acc[j - 1][k][l];
          acc[j - 1][k][l] = 0.0f;
        }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < size; ++i) load_add(i);
  for (int j = 1; j < kLevels; ++j)
    for (int k = 0; k < nrows; ++k)
      for (int l = 0; l < lanes; ++l) acc[0][k][l] += acc[j][k][l];
  std::array<std::array<float, kTorchVecLanes>, nrows> out{};
  for (int k = 0; k < nrows; ++k)
    for (int l = 0; l < lanes; ++l) out[k][l] = acc[0][k][l];
  return out;
}

// SumKernel.cpp row_sum: 4 interleaved accumulators (ILP), the leftover items into the first,
// then the four added in order.
std::array<float, kTorchVecLanes> row_sum(const float* in, int64_t stride, int64_t size, int lanes) {
  constexpr int kIlp = 4;
  const int64_t size_ilp = size / kIlp;
  auto partial = multi_row_sum<kIlp>(in, stride * kIlp, stride, size_ilp, lanes);
  for (int64_t i = size_ilp * kIlp; i < size; ++i)
    for (int l = 0; l < lanes; ++l) partial[0][l] += in[i * stride + l];
  for (int k = 1; k < kIlp; ++k)
    for (int l = 0; l < lanes; ++l) partial[0][l] += partial[k][l];
  return partial[0];
}

// torch.sum of a contiguous 1-D float32 tensor (SumKernel.cpp cascade_sum, float accumulators:
// acc_type<float, /*is_cuda=*/true> = float). n >= 8: vectorized_inner_sum (8-lane row_sum over
// the whole vectors, the scalar tail summed from 0, then the 8 lanes added to it in order);
// n < 8: scalar_inner_sum (row_sum with 1 lane). One thread: parallel_reduce does not split
// below its grain size (32768), far above the 2048 bins summed here. Copied from the source,
// not pinned by a test: the torch oracle cases also pass with a plain sequential float sum (the
// order only matters when it flips a norm comparison or a float32 quantile threshold).
float torch_sum_f32(const std::vector<float>& v) {
  const int64_t n = static_cast<int64_t>(v.size());
  if (n < kTorchVecLanes) return row_sum(v.data(), 1, n, 1)[0];
  const int64_t vec_size = n / kTorchVecLanes;
  const auto lanes = row_sum(v.data(), kTorchVecLanes, vec_size, kTorchVecLanes);
  float acc = 0.0f;
  for (int64_t k = vec_size * kTorchVecLanes; k < n; ++k) acc += v[static_cast<std::size_t>(k)];
  for (int l = 0; l < kTorchVecLanes; ++l) acc += lanes[static_cast<std::size_t>(l)];
  return acc;
}

// torch.cumsum of float32 (ReduceOpsKernel.cpp cumsum_cpu_kernel): a double accumulator
// (acc_type<float, false>), each prefix stored as float32.
std::vector<float> torch_cumsum_f32(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  double acc = 0.0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    acc += static_cast<double>(v[i]);
    out[i] = static_cast<float>(acc);
  }
  return out;
}

// torch.div(a, b, rounding_mode='floor') on float32 (BinaryOpsKernel.cpp div_floor_kernel,
// Python's floor division: (a - fmod(a, b)) / b with its fix-ups, not floor(a / b)). The
// vectorized AVX2 body computes the same for finite operands.
float torch_div_floor(float a, float b) {
  if (b == 0.0f) return a / b;
  const float mod = std::fmod(a, b);
  float div = (a - mod) / b;
  if (mod != 0.0f && (b < 0.0f) != (mod < 0.0f)) div -= 1.0f;
  float floordiv;
  if (div != 0.0f) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5f) floordiv += 1.0f;
  } else {
    floordiv = std::copysign(0.0f, a / b);
  }
  return floordiv;
}

// torch.round: half to even (std::nearbyint in the default rounding mode).
float torch_round(float x) { return std::nearbyint(x); }

// Python int(t) of a 0-d float32 tensor: truncation toward zero.
int64_t py_int(float x) { return static_cast<int64_t>(x); }

// torch.histc(x, bins, min=lo, max=hi) into float32 counts (Histogram.cpp
// histogram_histc_cpu_out + histc_select_outer_bin_edges, HistogramKernel.cpp
// LINEAR_INTERPOLATION, which is the histc path: no local search).
//  - lo == hi: the bounds become the data's min and max; still equal: lo-1, hi+1 (in double).
//  - the edges are linspace(lo, hi, bins+1) in float32, whose first and last entries are exactly
//    (float)lo and (float)hi; only those two enter the bin index.
//  - an element outside [lo, hi] is skipped; pos = int64((x - lo) * bins / (hi - lo)) in float32;
//    pos == bins (x == hi) goes into the last bin.
std::vector<float> torch_histc(const float* x, int64_t n, int64_t bins, double lo, double hi) {
  if (lo == hi && n > 0) {
    const Range r = batch_minmax(x, n);
    lo = r.min;
    hi = r.max;
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  check(lo < hi, "histogram observer: histc bounds ", lo, " >= ", hi);
  const float left = static_cast<float>(lo), right = static_cast<float>(hi);
  std::vector<float> hist(static_cast<std::size_t>(bins), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float e = x[i];
    if (e < left || right < e) continue;
    int64_t pos = static_cast<int64_t>((e - left) * static_cast<float>(bins) / (right - left));
    if (pos == bins) pos -= 1;
    hist[static_cast<std::size_t>(pos)] += 1.0f;
  }
  return hist;
}

// ---------------------------------------------------------------------------------------------

class MinMaxObserver final : public Observer {
 public:
  // torch MinMaxObserver.forward: x.to(float32); aminmax; torch.min/max with the running values.
  void observe(const Tensor& x) override {
    if (x.numel() == 0) return;  // torch returns early on an empty tensor
    const float* v = checked_values(x, kind());
    const Range b = batch_minmax(v, x.numel());
    if (!seen_) {
      r_ = b;
      seen_ = true;
    } else {
      r_.min = std::min(r_.min, b.min);
      r_.max = std::max(r_.max, b.max);
    }
  }
  Range range() const override {
    check(seen_, "minmax observer: range() before any batch was observed");
    return r_;
  }
  bool empty() const override { return !seen_; }
  ObserverKind kind() const override { return ObserverKind::minmax; }

 private:
  Range r_{0, 0};
  bool seen_ = false;
};

class MovingAverageObserver final : public Observer {
 public:
  explicit MovingAverageObserver(double c) : c_(static_cast<float>(c)) {}
  // torch MovingAverageMinMaxObserver.forward: the first batch sets min/max (aminmax); then
  // m = m + c * (cur - m), three float32 tensor ops: the Python float c is cast to float32
  // (a wrapped scalar takes the tensor's dtype), cur - m rounded, the product rounded, the sum rounded.
  void observe(const Tensor& x) override {
    if (x.numel() == 0) return;
    const float* v = checked_values(x, kind());
    const Range b = batch_minmax(v, x.numel());
    if (!seen_) {
      r_ = b;
      seen_ = true;
      return;
    }
    const float dmin = b.min - r_.min, dmax = b.max - r_.max;
    const float smin = c_ * dmin, smax = c_ * dmax;
    r_.min = r_.min + smin;
    r_.max = r_.max + smax;
  }
  Range range() const override {
    check(seen_, "moving_average observer: range() before any batch was observed");
    return r_;
  }
  bool empty() const override { return !seen_; }
  ObserverKind kind() const override { return ObserverKind::moving_average; }

 private:
  float c_;
  Range r_{0, 0};
  bool seen_ = false;
};

// torch 1.13 HistogramObserver. State: a float32 histogram of `bins` counts read as spanning
// the float32 [min_val, max_val] (even though 1.13 filled it with int-truncated histc bounds).
class HistogramObserver final : public Observer {
 public:
  explicit HistogramObserver(const ObserverConfig& c)
      : bins_(c.bins), upsample_(c.upsample_rate), dst_nbins_(int64_t{1} << c.quant_bits),
        int_bounds_(c.histc_int_bounds) {
    check(bins_ > 0 && upsample_ > 0, "histogram observer: bins=", bins_, " and upsample_rate=", upsample_,
          " must be positive");
    check(c.quant_bits >= 1 && c.quant_bits <= 16, "histogram observer: quant_bits=", c.quant_bits);
  }

  // HistogramObserver.forward.
  void observe(const Tensor& x) override {
    if (x.numel() == 0) return;
    const float* v = checked_values(x, kind());
    const int64_t n = x.numel();
    const Range b = batch_minmax(v, n);
    // `same_values = min_val.item() == max_val.item()`: an observer whose range so far is one
    // value (a constant first batch) starts over from this batch; the earlier counts are dropped.
    if (!seen_ || min_ == max_) {
      min_ = b.min;
      max_ = b.max;
      hist_ = torch_histc(v, n, bins_, bound(b.min), bound(b.max));
      seen_ = true;
      return;
    }
    const float cmin0 = std::min(b.min, min_), cmax0 = std::max(b.max, max_);
    // _adjust_min_max, float32 tensor ops throughout (the Python ints bins*upsample_rate, bins
    // and downsample_rate become float32 scalars; all exact here).
    const float hist_bin_width = (max_ - min_) / static_cast<float>(bins_ * upsample_);
    const float grid = static_cast<float>(bins_) * hist_bin_width;
    const float crange = cmax0 - cmin0;
    const int64_t downsample = static_cast<int64_t>(std::ceil(crange / grid));
    const float e = static_cast<float>(downsample) * grid - crange;
    const float cmin = cmin0, cmax = cmax0 + e;  // only the max is relaxed
    const int64_t start_idx = py_int(torch_round((min_ - cmin) / hist_bin_width));

    // A histogram of this batch alone over the new range (1.13: int-truncated bounds; when they
    // are equal, histc falls back to this batch's own min/max, not the combined range).
    std::vector<float> combined = torch_histc(v, n, bins_, bound(cmin), bound(cmax));
    if (cmin == min_ && cmax == max_) {
      for (int64_t i = 0; i < bins_; ++i) combined[i] += hist_[i];
    } else {
      combine_histograms(combined, downsample, start_idx);
    }
    hist_ = std::move(combined);
    min_ = cmin;
    max_ = cmax;
  }

  // _non_linear_param_search -> (new_min, new_max).
  Range range() const override {
    check(seen_, "histogram observer: range() before any batch was observed");
    const float bin_width = (max_ - min_) / static_cast<float>(bins_);  // float32 tensor op
    const double total = static_cast<double>(torch_sum_f32(hist_));     // torch.sum(...).item()
    const std::vector<float> csum = torch_cumsum_f32(hist_);
    const double stepsize = 1e-5;  // Python floats (double) from here on
    double alpha = 0.0, beta = 1.0;
    int64_t start_bin = 0, end_bin = bins_ - 1;
    double norm_min = std::numeric_limits<double>::infinity();
    while (alpha < beta) {
      const double next_alpha = alpha + stepsize, next_beta = beta - stepsize;
      // `cSum[l] < next_alpha * total`: a 0-d float32 tensor against a Python float, compared in
      // float32 (the scalar is cast to the tensor's dtype; checked: torch.tensor(1.0) < 1.00000001
      // is False).
      const float lo_q = static_cast<float>(next_alpha * total), hi_q = static_cast<float>(next_beta * total);
      int64_t l = start_bin, r = end_bin;
      while (l < end_bin && csum[static_cast<std::size_t>(l)] < lo_q) ++l;
      while (r > start_bin && csum[static_cast<std::size_t>(r)] > hi_q) --r;
      int64_t next_start = start_bin, next_end = end_bin;
      if ((l - start_bin) > (end_bin - r)) {
        next_start = l;
        alpha = next_alpha;
      } else {
        next_end = r;
        beta = next_beta;
      }
      if (next_start == start_bin && next_end == end_bin) continue;
      const double norm = quantization_error(next_start, next_end);
      if (norm > norm_min) break;
      norm_min = norm;
      start_bin = next_start;
      end_bin = next_end;
    }
    // new_min = min_val + bin_width * start_bin: float32 tensor ops (the int becomes float32).
    const float lo = min_ + bin_width * static_cast<float>(start_bin);
    const float hi = min_ + bin_width * static_cast<float>(end_bin + 1);
    return {lo, hi};
  }
  bool empty() const override { return !seen_; }
  ObserverKind kind() const override { return ObserverKind::histogram; }

 private:
  // Python int() of the bound when the 1.13 truncation is on, else the float bound itself.
  double bound(float v) const { return int_bounds_ ? static_cast<double>(py_int(v)) : static_cast<double>(v); }

  // _combine_histograms(orig_hist=this batch's histc, new_hist=the stored histogram).
  void combine_histograms(std::vector<float>& orig, int64_t downsample, int64_t start_idx) const {
    const int64_t up_len = bins_ * upsample_;
    const int64_t out_len = bins_ * downsample;
    // histogram_with_output_range[start_idx : start_idx + up_len] = upsampled: a Python slice
    // shorter than up_len makes torch raise a shape mismatch; so do we.
    check(start_idx >= 0 && start_idx + up_len <= out_len, "histogram observer: the stored histogram (",
          up_len, " upsampled bins at offset ", start_idx, ") does not fit the combined grid of ", out_len,
          " bins (torch 1.13 raises a shape mismatch here too)");
    // integral_histogram = cumsum(double)[downsample-1 :: downsample]: the running double sum
    // over the zero-padded, upsampled array; the zeros add nothing, so walk the upsampled part.
    std::vector<double> integral(static_cast<std::size_t>(bins_));
    double acc = 0.0;
    int64_t j = 0;  // next upsampled element, at output index start_idx + j
    for (int64_t k = 0; k < bins_; ++k) {
      const int64_t last = k * downsample + downsample - 1;
      while (j < up_len && start_idx + j <= last) {
        acc += static_cast<double>(hist_[static_cast<std::size_t>(j / upsample_)]);
        ++j;
      }
      integral[static_cast<std::size_t>(k)] = acc;
    }
    // shifted_integral_histogram is a float32 tensor: integral[k-1] is rounded to float32 when
    // stored into it; the difference is double (double - float32 promotes), / upsample_rate in
    // double, .to(float) and added to orig in float32.
    for (int64_t k = 0; k < bins_; ++k) {
      const float shifted = k == 0 ? 0.0f : static_cast<float>(integral[static_cast<std::size_t>(k - 1)]);
      const double interp = (integral[static_cast<std::size_t>(k)] - static_cast<double>(shifted)) /
                            static_cast<double>(upsample_);
      orig[static_cast<std::size_t>(k)] = orig[static_cast<std::size_t>(k)] + static_cast<float>(interp);
    }
  }

  // _get_norm(delta_begin, delta_end, density) = density * ((e*e*e - b*b*b) / 3), float32.
  static float get_norm(float b, float e, float density) {
    const float e3 = (e * e) * e, b3 = (b * b) * b;
    const float norm = (e3 - b3) / 3.0f;
    return density * norm;
  }

  // _compute_quantization_error(next_start_bin, next_end_bin).
  double quantization_error(int64_t s, int64_t e) const {
    // Python floats (double): bin_width from the .item() values, dst_bin_width.
    const double bin_width = (static_cast<double>(max_) - static_cast<double>(min_)) / static_cast<double>(bins_);
    const double dst_bin_width = bin_width * static_cast<double>(e - s + 1) / static_cast<double>(dst_nbins_);
    if (dst_bin_width == 0.0) return 0.0;
    // Every tensor below is float32; each Python float operand is cast to float32 first.
    const float bw = static_cast<float>(bin_width), dbw = static_cast<float>(dst_bin_width);
    const float half = static_cast<float>(dst_bin_width / 2);        // torch.ones(bins) * (dbw / 2)
    const float neg_half = static_cast<float>(-dst_bin_width / 2);   // torch.tensor(-dbw / 2)
    const float top = static_cast<float>(dst_nbins_ - 1);  // torch.clamp(..., 0, dst_nbins - 1)
    std::vector<float> norm(static_cast<std::size_t>(bins_));
    for (int64_t i = 0; i < bins_; ++i) {
      const float src_begin = static_cast<float>(i - s) * bw;  // (arange - s) is int64, then * float
      const float src_end = src_begin + bw;
      const float dob = std::min(std::max(torch_div_floor(src_begin, dbw), 0.0f), top);
      const float dob_center = (dob + 0.5f) * dbw;
      const float doe = std::min(std::max(torch_div_floor(src_end, dbw), 0.0f), top);
      const float density = hist_[static_cast<std::size_t>(i)] / bw;
      float n = 0.0f;
      n = n + get_norm(src_begin - dob_center, half, density);
      n = n + ((doe - dob) - 1.0f) * get_norm(neg_half, half, density);
      const float doe_center = doe * dbw + half;  // dst_bin_of_end * dbw + dbw / 2
      n = n + get_norm(neg_half, src_end - doe_center, density);
      norm[static_cast<std::size_t>(i)] = n;
    }
    return static_cast<double>(torch_sum_f32(norm));  // norm.sum().item()
  }

  int64_t bins_, upsample_, dst_nbins_;
  bool int_bounds_;
  std::vector<float> hist_;
  float min_ = 0, max_ = 0;
  bool seen_ = false;
};

// ---------------------------------------------------------------------------------------------
// ONNX Runtime HistogramCollector (calibrate.py). Counts are numpy int64; the bounds and
// thresholds are numpy float32 scalars of the float32 data; np.histogram bins with float64
// arithmetic (see ort_histogram).

// np.histogram(a, bins=n, range=(lo, hi)) for float32 a and float32 bounds, numpy's uniform-bin
// path (numpy/lib/histograms.py histogram, as recalled, NOT checked against the numpy ORT would
// run with: UNCONFIRMED): values outside [lo, hi] dropped; for float32 data and float32 bounds
// _unsigned_subtract is a plain float32 subtraction, so idx = int((a - lo) / (hi - lo) * n) in
// float32; idx == n goes into the last bin; then the fix-ups against the float32 edges
// (linspace(lo, hi, n+1) computed in float64, cast to float32): below its bin's left edge moves
// down one, at or above the next edge moves up one (never past the last bin).
// lo == hi: numpy widens the range to (lo - 0.5, hi + 0.5).
std::vector<int64_t> ort_histogram(const float* a, int64_t count, int64_t n, float lo_f, float hi_f,
                                   std::vector<float>* edges_out) {
  double lo = lo_f, hi = hi_f;
  if (lo == hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  std::vector<float> edges(static_cast<std::size_t>(n + 1));
  const double step = (hi - lo) / static_cast<double>(n);
  for (int64_t k = 0; k <= n; ++k)
    edges[static_cast<std::size_t>(k)] = static_cast<float>(static_cast<double>(k) * step + lo);
  edges[static_cast<std::size_t>(n)] = static_cast<float>(hi);
  const float first = static_cast<float>(lo), last = static_cast<float>(hi);
  const float denom = last - first;
  std::vector<int64_t> hist(static_cast<std::size_t>(n), 0);
  for (int64_t i = 0; i < count; ++i) {
    const float x = a[i];
    if (x < first || x > last) continue;
    int64_t idx = static_cast<int64_t>((x - first) / denom * static_cast<float>(n));
    if (idx == n) idx -= 1;
    if (x < edges[static_cast<std::size_t>(idx)]) idx -= 1;
    else if (x >= edges[static_cast<std::size_t>(idx + 1)] && idx != n - 1) idx += 1;
    hist[static_cast<std::size_t>(idx)] += 1;
  }
  if (edges_out) *edges_out = std::move(edges);
  return hist;
}

class OrtHistogramObserver final : public Observer {
 public:
  explicit OrtHistogramObserver(const ObserverConfig& c) : c_(c) {
    check(c.bins > 0, observer_name(c.kind), " observer: bins=", c.bins);
    if (c.kind == ObserverKind::percentile)
      check(c.percentile >= 0 && c.percentile <= 100, "percentile observer: percentile=", c.percentile,
            " outside [0, 100]");
    if (c.kind == ObserverKind::entropy)
      check(c.quantized_bins > 0 && c.quantized_bins / 2 <= c.bins / 2, "entropy observer: quantized_bins=",
            c.quantized_bins, " with bins=", c.bins);
  }

  void observe(const Tensor& x) override {
    const float* v = x.numel() > 0 ? checked_values(x, kind()) : nullptr;
    check(x.numel() > 0, observer_name(kind()), " observer: an empty batch (ORT would record [0, 0])");
    const int64_t n = x.numel();
    const Range b = batch_minmax(v, n);
    if (kind() == ObserverKind::percentile && c_.symmetric)
      collect_absolute(v, n, b);
    else
      collect_value(v, n, b);
  }

  Range range() const override {
    check(seen_, observer_name(kind()), " observer: range() before any batch was observed");
    return kind() == ObserverKind::percentile ? percentile_range() : entropy_range();
  }
  bool empty() const override { return !seen_; }
  ObserverKind kind() const override { return c_.kind; }

 private:
  // HistogramCollector.collect_value (entropy; percentile with symmetric=False): a histogram over
  // [-threshold, threshold], threshold = max(|min|, |max|) (float32), grown by merge_histogram.
  void collect_value(const float* v, int64_t n, Range b) {
    const float thr = std::max(std::fabs(b.min), std::fabs(b.max));
    if (!seen_) {
      hist_ = ort_histogram(v, n, c_.bins, -thr, thr, &edges_);
      min_ = b.min;
      max_ = b.max;
      thr_ = thr;
      seen_ = true;
      return;
    }
    min_ = std::min(min_, b.min);
    max_ = std::max(max_, b.max);
    const int64_t old_bins = static_cast<int64_t>(hist_.size());
    if (thr <= thr_) {
      const auto h = ort_histogram(v, n, old_bins, -thr_, thr_, nullptr);
      for (int64_t i = 0; i < old_bins; ++i) hist_[i] += h[i];
      return;  // the old edges are kept
    }
    if (thr_ == 0.0f) {
      auto h = ort_histogram(v, n, old_bins, -thr, thr, &edges_);
      for (int64_t i = 0; i < old_bins; ++i) h[i] += hist_[i];
      hist_ = std::move(h);
      thr_ = thr;
      return;
    }
    // old_stride = 2 * old_threshold / old_num_bins: numpy float32 scalar ops (2 * f32 -> f32,
    // f32 / int -> f32 under numpy's value-based casting of Python scalars).
    const float old_stride = (2.0f * thr_) / static_cast<float>(old_bins);
    // half_increased_bins = int((new - old) // old_stride + 1): float32 floor division.
    const float diff = thr - thr_;
    const float q = std::floor(diff / old_stride);  // numpy float32 floor_divide (exact fmod-based
                                                    // in numpy; equal to floor(a/b) except at ties,
                                                    // UNCONFIRMED for those)
    const int64_t half = static_cast<int64_t>(q + 1.0f);
    const int64_t new_bins = old_bins + 2 * half;
    const float new_thr = static_cast<float>(half) * old_stride + thr_;
    auto h = ort_histogram(v, n, new_bins, -new_thr, new_thr, &edges_);
    for (int64_t i = 0; i < old_bins; ++i) h[static_cast<std::size_t>(half + i)] += hist_[i];
    hist_ = std::move(h);
    thr_ = new_thr;
  }

  // HistogramCollector.collect_absolute_value (percentile with symmetric=True): a histogram of
  // |x| over [0, max|x|] (np.histogram(bins=n) takes the data's own min/max: min|x| is the lower
  // edge, not 0), later batches extend the edges by whole bins with np.arange.
  void collect_absolute(const float* v, int64_t n, Range b) {
    std::vector<float> a(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) a[static_cast<std::size_t>(i)] = std::fabs(v[i]);
    const Range ar = batch_minmax(a.data(), n);
    if (!seen_) {
      hist_ = ort_histogram(a.data(), n, c_.bins, ar.min, ar.max, &edges_);
      min_ = b.min;
      max_ = b.max;
      seen_ = true;
      return;
    }
    min_ = std::min(min_, b.min);
    max_ = std::max(max_, b.max);
    check(ar.max <= edges_.back(), "percentile observer (symmetric): a later batch beyond the first batch's "
          "max |x| needs ORT's np.arange edge extension, not implemented here");
    // np.histogram(a, bins=old_edges): non-uniform path in general; with the unchanged uniform
    // float32 edges, a value's bin is the last edge <= value (searchsorted right), the right
    // edge closing the last bin.
    std::vector<int64_t> h(hist_.size(), 0);
    for (float x : a) {
      if (x < edges_.front() || x > edges_.back()) continue;
      int64_t idx = static_cast<int64_t>(std::upper_bound(edges_.begin(), edges_.end(), x) - edges_.begin()) - 1;
      if (idx == static_cast<int64_t>(hist_.size())) idx -= 1;
      h[static_cast<std::size_t>(idx)] += 1;
    }
    for (std::size_t i = 0; i < h.size(); ++i) hist_[i] += h[i];
  }

  // compute_percentile: cdf = cumsum(hist / total) in float64 (int64 / int64 -> float64,
  // sequential cumsum); np.searchsorted (side='left': the first index with cdf >= target);
  // the edges at those indices, clipped to the observed min/max.
  Range percentile_range() const {
    int64_t total = 0;
    for (int64_t h : hist_) total += h;
    std::vector<double> cdf(hist_.size());
    double acc = 0.0;
    for (std::size_t i = 0; i < hist_.size(); ++i) {
      acc += static_cast<double>(hist_[i]) / static_cast<double>(total);
      cdf[i] = acc;
    }
    auto search = [&](double target) {
      return static_cast<std::size_t>(std::lower_bound(cdf.begin(), cdf.end(), target) - cdf.begin());
    };
    Range r{};
    if (c_.symmetric) {
      const float t = edges_[search(c_.percentile / 100.0)];
      r = {-t, t};
    } else {
      const double cut = (100.0 - c_.percentile) / 200.0;
      r = {edges_[search(cut)], edges_[search(1.0 - cut)]};
    }
    if (r.min < min_) r.min = min_;
    if (r.max > max_) r.max = max_;
    return r;
  }

  // get_entropy_threshold: for i = half_q .. zero_bin, the slice [zero-i, zero+i+1) of the
  // histogram (outliers added to its first/last bin) is p; q merges the slice into quantized_bins
  // bins and spreads each back uniformly over its non-empty source bins (truncated to int64:
  // `q` is an int64 array); both smoothed (quant_utils.smooth_distribution, eps 1e-4, float32)
  // and KL(p||q) (scipy.stats.entropy) taken; the first minimum wins; clipped to min/max.
  // Precision: the smoothing and KL sum are done in double here; ORT/scipy compute them in float32
  // (UNCONFIRMED order), so ties between near-equal KL values may break differently.
  Range entropy_range() const {
    const int64_t nb = static_cast<int64_t>(hist_.size());
    const int64_t zero = nb / 2, half_q = c_.quantized_bins / 2, nq = c_.quantized_bins;
    double best = std::numeric_limits<double>::infinity();
    Range best_r{0, 0};
    bool found = false;
    for (int64_t i = half_q; i <= zero; ++i) {
      const int64_t s = zero - i, e = std::min(zero + i + 1, nb);
      const int64_t len = e - s;
      std::vector<int64_t> slice(hist_.begin() + s, hist_.begin() + e);
      std::vector<int64_t> p = slice;
      for (int64_t k = 0; k < s; ++k) p.front() += hist_[k];
      for (int64_t k = e; k < nb; ++k) p.back() += hist_[k];
      const int64_t merged = len / nq;
      std::vector<int64_t> qb(static_cast<std::size_t>(nq), 0);
      for (int64_t k = 0; k < nq; ++k)
        for (int64_t t = k * merged; t < k * merged + merged; ++t) qb[k] += slice[t];
      for (int64_t t = nq * merged; t < len; ++t) qb.back() += slice[t];
      std::vector<int64_t> q(static_cast<std::size_t>(len), 0);
      for (int64_t k = 0; k < nq; ++k) {
        int64_t nz = 0;
        for (int64_t t = k * merged; t < k * merged + merged; ++t) nz += p[t] != 0;
        if (nz != 0)
          for (int64_t t = k * merged; t < k * merged + merged; ++t)
            q[t] = static_cast<int64_t>(static_cast<double>(qb[k]) / static_cast<double>(nz));
      }
      std::vector<double> ps, qs;
      const bool ok = smooth(p, &ps) && smooth(q, &qs);
      const double kl = ok ? kl_divergence(ps, qs) : std::numeric_limits<double>::infinity();
      if (!found || kl < best) {
        best = kl;
        best_r = {edges_[static_cast<std::size_t>(s)], edges_[static_cast<std::size_t>(e)]};
        found = true;
      }
    }
    if (best_r.min < min_) best_r.min = min_;
    if (best_r.max > max_) best_r.max = max_;
    return best_r;
  }

  // quant_utils.smooth_distribution(p, eps=1e-4): zeros get eps, non-zeros lose
  // eps * n_zeros / n_nonzeros; false when all are zero (ORT: None, KL = inf).
  static bool smooth(const std::vector<int64_t>& p, std::vector<double>* out) {
    int64_t zeros = 0;
    for (int64_t v : p) zeros += v == 0;
    const int64_t nonzeros = static_cast<int64_t>(p.size()) - zeros;
    if (nonzeros == 0) return false;
    const double eps = 1e-4, eps1 = eps * static_cast<double>(zeros) / static_cast<double>(nonzeros);
    check(eps1 < 1.0, "entropy observer: smoothing eps1=", eps1, " >= 1");
    out->resize(p.size());
    for (std::size_t k = 0; k < p.size(); ++k)
      (*out)[k] = p[k] == 0 ? eps : static_cast<double>(p[k]) - eps1;
    return true;
  }

  // scipy.stats.entropy(p, q): both normalised to sum 1, sum p * log(p / q).
  static double kl_divergence(const std::vector<double>& p, const std::vector<double>& q) {
    double sp = 0, sq = 0;
    for (double v : p) sp += v;
    for (double v : q) sq += v;
    double kl = 0;
    for (std::size_t k = 0; k < p.size(); ++k) {
      const double pk = p[k] / sp, qk = q[k] / sq;
      if (pk > 0) kl += pk * std::log(pk / qk);
    }
    return kl;
  }

  ObserverConfig c_;
  std::vector<int64_t> hist_;
  std::vector<float> edges_;
  float min_ = 0, max_ = 0, thr_ = 0;
  bool seen_ = false;
};

}  // namespace

const char* observer_name(ObserverKind kind) {
  for (const KindName& k : kObserverNames)
    if (k.kind == kind) return k.name;
  fail("observer_name: unknown observer kind ", static_cast<int>(kind));
}

ObserverKind observer_from_name(const std::string& name) {
  std::string known;
  for (const KindName& k : kObserverNames) {
    if (name == k.name) return k.kind;
    known += known.empty() ? k.name : std::string(", ") + k.name;
  }
  fail("unknown observer '", name, "' (known: ", known, ")");
}

std::unique_ptr<Observer> make_observer(const ObserverConfig& config) {
  switch (config.kind) {
    case ObserverKind::minmax: return std::make_unique<MinMaxObserver>();
    case ObserverKind::moving_average: return std::make_unique<MovingAverageObserver>(config.averaging_constant);
    case ObserverKind::histogram: return std::make_unique<HistogramObserver>(config);
    case ObserverKind::percentile:
    case ObserverKind::entropy: return std::make_unique<OrtHistogramObserver>(config);
  }
  fail("make_observer: unknown observer kind ", static_cast<int>(config.kind));
}

Range minmax_range(const Tensor& w) {
  check(w.numel() > 0, "minmax_range: empty tensor of shape ", shape_str(w.shape()));
  const float* v = checked_values(w, ObserverKind::minmax);
  return batch_minmax(v, w.numel());
}

// torch PerChannelMinMaxObserver(ch_axis=0): aminmax over every element of each channel.
std::vector<Range> per_channel_minmax(const Tensor& w) {
  check(w.rank() >= 1 && w.numel() > 0, "per_channel_minmax: need a non-empty tensor with an axis 0, got shape ",
        shape_str(w.shape()));
  const float* v = checked_values(w, ObserverKind::minmax);
  const int64_t channels = w.dim(0), per = w.numel() / channels;
  std::vector<Range> out(static_cast<std::size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) out[static_cast<std::size_t>(c)] = batch_minmax(v + c * per, per);
  return out;
}

}  // namespace quant
}  // namespace driftlab
