// Elementwise activations with every framework constant explicit.
//   relu:         y = max(x,0), NaN for NaN;  dy/dx = 1 (x>0), relu_grad_at_zero (x==0), 0 (x<0),
//                 and at NaN either dy passed through or NaN (relu_nan_grad)
//   tanh, sigmoid: y = tanh(x), 1/(1+exp(-x)); gradients from y
//   hard_sigmoid: y = clip(slope*x + offset, 0, 1), or with hs_divide the same function as
//                 PyTorch's Hardsigmoid and Keras 3 compute it, clip(x + offset/slope, 0, 1/slope)
//                 / (1/slope); dy/dx = slope inside the linear region, including its end points
//                 when grad_edges_inclusive.
//   clip:         y = min(max(x, lo), hi) (ReLU6: lo 0, hi 6; ONNX Clip), NaN for NaN;
//                 dy/dx = 1 for lo < x < hi, and at x = lo or hi when clip_grad_edges_inclusive.
// forward writes y (=), backward writes dx (=). One kernel serves both float and double.
#pragma once
#include <cmath>

#include "core/host_device.h"
#include "core/tensor.h"

namespace driftlab {

enum class ActKind { relu, tanh, sigmoid, hard_sigmoid, clip };
// dReLU at x = NaN: `dy` passes the incoming gradient (PyTorch's threshold_backward tests the
// output, `y <= 0 ? 0 : dy`, false for NaN); `nan` gives NaN (TF.js dy*step(x) with step(NaN) =
// NaN; Theano 0.5*(dy + dy*sgn(x)) with sgn(NaN) = NaN).
enum class ReluNanGrad { dy, nan };

struct ActivationParams {
  ActKind kind = ActKind::relu;
  double relu_grad_at_zero = 0.0;
  double hs_slope = 0.2, hs_offset = 0.5;
  bool hs_grad_edges_inclusive = true;
  // PyTorch's hardsigmoid (min(max(x + 3, 0), 6) / 6) and Keras 3's relu6(x + 3) / 6 shift, clamp
  // and divide: mathematically slope*x + offset with slope 1/6, but other floats (x/6 + 0.5 differs
  // from it in the last bit on about a third of N(0, 9) inputs). ONNX's HardSigmoid and Keras 2
  // compute alpha*x + beta: false.
  bool hs_divide = false;
  ReluNanGrad relu_nan_grad = ReluNanGrad::dy;  // last: positional initialisers predate it
  double clip_min = 0.0, clip_max = 6.0;
  // torch's nn.ReLU6/Hardtanh backward passes the gradient only strictly inside (lo, hi)
  // (PyTorch 1.13: ReLU6'(0) = ReLU6'(6) = 0); torch.clamp's backward at the bounds too (1).
  bool clip_grad_edges_inclusive = false;
};

const char* act_name(ActKind k);

// The formulas, one element at a time: every activation kernel (CPU reference and fast, CUDA)
// calls these very functions, so they agree by construction.
// A NaN input stays NaN, as in every framework copied (PyTorch's clamp_min, Theano's
// 0.5*(x+|x|), TF.js's x<0?0:x); -0 gives +0. `x != x` is the NaN test that also compiles in
// device code.
template <typename T>
DL_HOST_DEVICE inline T relu_value(T x) {
  return (x > T(0) || x != x) ? x : T(0);
}
// nan_is_nan: ReluNanGrad::nan (else a NaN input passes dy).
template <typename T>
DL_HOST_DEVICE inline T relu_grad(T x, T dy, T grad_at_zero, bool nan_is_nan) {
  if (x != x) return nan_is_nan ? x : dy;
  return x > T(0) ? dy : (x == T(0) ? grad_at_zero * dy : T(0));
}
// dReLU from the output y = relu_value(x) alone, for an x that is not +-0: relu_grad(x, dy, g, nan_is_nan)
// for every g. y > 0 exactly when x > 0; y is NaN exactly when x is, with x's bits; with x == +-0
// excluded, y == +0 means x < 0, where relu_grad gives +0. (At x == +-0 relu_grad gives g * dy,
// which y cannot tell from x < 0: there a ReLU layer keeps x instead.)
template <typename T>
DL_HOST_DEVICE inline T relu_grad_of_output(T y, T dy, bool nan_is_nan) {
  if (y != y) return nan_is_nan ? y : dy;
  return y > T(0) ? dy : T(0);
}
template <typename T>
DL_HOST_DEVICE inline T tanh_value(T x) {
  return std::tanh(x);
}
template <typename T>
DL_HOST_DEVICE inline T tanh_grad(T y, T dy) {
  return dy * (T(1) - y * y);
}
template <typename T>
DL_HOST_DEVICE inline T sigmoid_value(T x) {
  return T(1) / (T(1) + std::exp(-x));
}
template <typename T>
DL_HOST_DEVICE inline T sigmoid_grad(T y, T dy) {
  return dy * y * (T(1) - y);
}
template <typename T>
DL_HOST_DEVICE inline T hard_sigmoid_value(T x, T slope, T offset) {
  const T v = slope * x + offset;
  return v < T(0) ? T(0) : (v > T(1) ? T(1) : v);
}
// hs_divide's form: (x + shift) clamped to [0, range], divided by range (shift = offset/slope,
// range = 1/slope: 3 and 6 for PyTorch's hardsigmoid, aten/src/ATen/native/cpu/Activation.cpp).
template <typename T>
DL_HOST_DEVICE inline T hard_sigmoid_divide_value(T x, T shift, T range) {
  const T v = x + shift;
  return (v < T(0) ? T(0) : (v > range ? range : v)) / range;
}
// Either form, as p says (the RNN gates and the activation kernels call this).
template <typename T>
DL_HOST_DEVICE inline T hard_sigmoid_of(const ActivationParams& p, T x) {
  if (p.hs_divide)
    return hard_sigmoid_divide_value(x, static_cast<T>(p.hs_offset / p.hs_slope), static_cast<T>(1.0 / p.hs_slope));
  return hard_sigmoid_value(x, static_cast<T>(p.hs_slope), static_cast<T>(p.hs_offset));
}
// The linear region is slope*x+offset in [0,1]; its end points are where the framework's clip
// gradient either still passes (inclusive) or is already zero (exclusive).
// Inclusive (TF/Keras, Theano): their clip's gradient tests the clipped value v = slope*x +
// offset, computed in T exactly as the forward does, against [0, 1]; so x = 2.50000024f, where
// 0.2x+0.5 rounds to exactly 1, still passes the gradient.
// Exclusive (PyTorch hardsigmoid_backward): tests x itself, lo < x < hi, in double.
template <typename T>
DL_HOST_DEVICE inline T hard_sigmoid_grad(const ActivationParams& p, T x, T dy) {
  const T slope = static_cast<T>(p.hs_slope);
  if (p.hs_grad_edges_inclusive) {
    const T v = slope * x + static_cast<T>(p.hs_offset);
    return (v >= T(0) && v <= T(1)) ? slope * dy : T(0);
  }
  const double lo = -p.hs_offset / p.hs_slope, hi = (1.0 - p.hs_offset) / p.hs_slope;
  const double v = static_cast<double>(x);
  return (v > lo && v < hi) ? slope * dy : T(0);
}
// NaN stays NaN (torch.clamp and Hardtanh propagate it; so does ONNX Clip's reference, np.clip).
template <typename T>
DL_HOST_DEVICE inline T clip_value(T x, T lo, T hi) {
  if (x != x) return x;
  return x < lo ? lo : (x > hi ? hi : x);
}
template <typename T>
DL_HOST_DEVICE inline T clip_grad(const ActivationParams& p, T x, T dy) {
  const T lo = static_cast<T>(p.clip_min), hi = static_cast<T>(p.clip_max);
  if (p.clip_grad_edges_inclusive) return (x >= lo && x <= hi) ? dy : T(0);
  return (x > lo && x < hi) ? dy : T(0);
}
// x and y are the forward input and output (each formula uses whichever is exact).
template <typename T>
DL_HOST_DEVICE inline T activation_value(const ActivationParams& p, T x) {
  switch (p.kind) {
    case ActKind::relu: return relu_value(x);
    case ActKind::tanh: return tanh_value(x);
    case ActKind::sigmoid: return sigmoid_value(x);
    case ActKind::clip: return clip_value(x, static_cast<T>(p.clip_min), static_cast<T>(p.clip_max));
    case ActKind::hard_sigmoid: break;
  }
  return hard_sigmoid_of(p, x);
}
template <typename T>
DL_HOST_DEVICE inline T activation_grad(const ActivationParams& p, T x, T y, T dy) {
  switch (p.kind) {
    case ActKind::relu:
      return relu_grad(x, dy, static_cast<T>(p.relu_grad_at_zero), p.relu_nan_grad == ReluNanGrad::nan);
    case ActKind::tanh: return tanh_grad(y, dy);
    case ActKind::sigmoid: return sigmoid_grad(y, dy);
    case ActKind::clip: return clip_grad(p, x, dy);
    case ActKind::hard_sigmoid: break;
  }
  return hard_sigmoid_grad(p, x, dy);
}

// x, y, dy, dx: the same shape; forward writes y (=), backward dx (=).
struct ActivationKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const ActivationParams&, DType) = nullptr;
  void (*forward)(const ActivationParams&, const Tensor& x, Tensor& y) = nullptr;
  void (*backward)(const ActivationParams&, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) = nullptr;
  // ReLU only (null where a kernel has none): the forward's y that also says whether any x was
  // +-0, and the backward from y alone (relu_grad_of_output), the backward's bits wherever the
  // forward said no x was. A recorded ReLU layer keeps y instead of x with them, so that an input
  // nothing else keeps (a residual block's sum) is freed at once (engine/layers/activation_layer.cpp).
  bool (*relu_forward_any_zero)(const ActivationParams&, const Tensor& x, Tensor& y) = nullptr;
  void (*relu_backward_of_output)(const ActivationParams&, const Tensor& y, const Tensor& dy, Tensor& dx) = nullptr;
};


}  // namespace driftlab
