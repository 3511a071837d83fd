// pool2d: max and average pooling with explicit pads. x (N,C,H,W) -> y (N,C,P,Q).
// Max: padding never wins (it is outside the window's candidates). The window is scanned in
// row-major order and an element takes the lead when max_scan_takes says so: the first max
// wins among numbers, and any NaN makes the max NaN with the LAST NaN as the winner (PyTorch's
// cpu_max_pool and max_pool2d_with_indices CUDA kernel: `val > maxval || isnan(val)`).
// Backward (`ties`): dy to that winner, or to every element equal to the max (none for NaN).
// Average: divides by kh*kw (count_include_pad) or by the number of real elements. Each window's
// sum (forward) and each input's sum over the windows covering it (backward) runs in sum_order
// over the terms in row-major order.
// Kernels write dx with '=' (overlapping windows accumulate inside the kernel).
#pragma once
#include <cstdint>
#include <string>

#include "core/host_device.h"
#include "core/tensor.h"
#include "core/ops/common.h"

namespace driftlab {

enum class PoolTies { first, all };

// The max-pool scan step every kernel (reference, fast, CUDA) calls: does v take the lead from
// the current max `cur`? Strictly greater keeps the first of equal maxima; a NaN always takes
// it, so a window with NaN has max NaN and its last NaN is the winner.
template <typename T>
DL_HOST_DEVICE inline bool max_scan_takes(T v, T cur) {
  return v > cur || v != v;
}

struct Pool2dParams {
  int64_t n = 1, c = 1, h = 1, w = 1;
  int64_t kh = 2, kw = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_t = 0, pad_b = 0, pad_l = 0, pad_r = 0;
  PoolTies ties = PoolTies::first;  // max pooling backward
  bool count_include_pad = true;    // average pooling divisor
  SumOrder sum_order = SumOrder::ascending;  // average pooling sums

  int64_t out_h() const { return (h + pad_t + pad_b - kh) / stride_h + 1; }
  int64_t out_w() const { return (w + pad_l + pad_r - kw) / stride_w + 1; }
  Shape x_shape() const { return {n, c, h, w}; }
  Shape y_shape() const { return {n, c, out_h(), out_w()}; }
  std::string str() const;
  void validate() const;
};

// x (N,C,H,W), y and dy (N,C,P,Q): forward writes y (=), backward dx (=); backward takes the
// forward input x (max pooling finds the window's winner again; average pooling ignores it).
// One struct serves the max and the average tables.
struct Pool2dKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const Pool2dParams&, DType) = nullptr;
  void (*forward)(const Pool2dParams&, const Tensor& x, Tensor& y) = nullptr;
  void (*backward)(const Pool2dParams&, const Tensor& x, const Tensor& dy, Tensor& dx) = nullptr;
  // Whether forward and backward take a channel-blocked x (engine/layers/layout.h; y, dy and dx in
  // x's layout). Kernels without it take plain tensors only.
  bool any_block = false;
};


}  // namespace driftlab
