// One element of an L-infinity attack step (attacks/gradient.h's FGSM, BIM and PGD), one
// DL_HOST_DEVICE formula shared by the host loop (attacks/gradient.cpp) and the device kernel
// (kernels/cuda/elementwise.cu, built with -fmad=false): the same bits on both. In T (the input's
// dtype); the products eps * sign and step * sign are exact (sign is -1, 0 or 1), so only the sums
// and the clamps round, in this order:
//   FGSM:      x' = clamp(x0 + eps * sign(g), lo, hi)
//   BIM / PGD: x' = clamp(x0 + clamp(xa + step * sign(g) - x0, -eps, eps), lo, hi)
//   (torchattacks' BIM projection: linf_step_max_min below; host only)
// sign(0) = 0 (an element whose gradient is exactly zero does not move); clamp as std::min(std::max)
// (a NaN stays NaN: it cannot arise from finite inputs).
#pragma once
#include "core/host_device.h"

namespace driftlab {

template <typename T>
DL_HOST_DEVICE inline T linf_sign(T g) {
  return g > T(0) ? T(1) : g < T(0) ? T(-1) : T(0);
}

template <typename T>
DL_HOST_DEVICE inline T linf_clamp(T v, T lo, T hi) {
  const T a = v < lo ? lo : v;  // std::max(v, lo): v unless lo is larger
  return hi < a ? hi : a;       // std::min(a, hi): a unless hi is smaller
}

template <typename T>
DL_HOST_DEVICE inline T linf_step(bool fgsm, T x0, T xa, T g, T eps, T step, T lo, T hi) {
  if (fgsm) return linf_clamp(x0 + eps * linf_sign(g), lo, hi);
  const T moved = xa + step * linf_sign(g);
  return linf_clamp(x0 + linf_clamp(moved - x0, -eps, eps), lo, hi);
}

// BIM's step with torchattacks' projection (torchattacks/attacks/bim.py: a = clamp(x0 - eps,
// min=0); b = max(x, a) written as (x >= a) * x + (a > x) * a; c = min(b, x0 + eps) the same way;
// clamp(c, max=1)), here with the bounds lo, hi: an iterate inside the ball and the bounds is kept
// exactly, where linf_step's x0 + (x - x0) may round to a neighbour. (A NaN iterate becomes
// max(x0 - eps, lo) here, where torchattacks' (x >= a) * x + (a > x) * a keeps the NaN; finite
// inputs never make one.)
template <typename T>
DL_HOST_DEVICE inline T linf_step_max_min(T x0, T xa, T g, T eps, T step, T lo, T hi) {
  const T moved = xa + step * linf_sign(g);
  const T floor_ = x0 - eps < lo ? lo : x0 - eps;  // torch.clamp(x0 - eps, min=lo)
  const T b = moved >= floor_ ? moved : floor_;
  const T ceil_ = x0 + eps;
  const T c = b > ceil_ ? ceil_ : b;
  return c > hi ? hi : c;                            // torch.clamp(c, max=hi)
}

}  // namespace driftlab
