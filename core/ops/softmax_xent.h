// Softmax cross-entropy from logits z (N,K) and integer labels, in three formulations:
//   log_softmax:  L = logsumexp(z) - z_y                       (PyTorch cross_entropy)
//   softmax_clip: p = softmax(z); q = clip(p / sum p, eps, 1-eps); L = -log q_y  (Keras 2.2.4)
//   softmax_log:  p = softmax(z); L = -log p_y, no clip        (raw Theano graph, no rewrite)
// Backward differentiates each formulation as written: for softmax_clip the gradient of a
// sample whose q_y was clipped is exactly zero. reduction: mean divides by N, sum does not.
// Forward returns the reduced loss (in double); backward writes dz (=).
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "core/ops/common.h"

namespace driftlab {

enum class CeFormulation { log_softmax, softmax_clip, softmax_log };

struct SoftmaxXentParams {
  CeFormulation form = CeFormulation::log_softmax;
  double clip_eps = 1e-7;
  bool mean = true;  // reduction over the batch
  SumOrder sum_order = SumOrder::ascending;  // order of the sums over classes and over the batch
};

// z (N,K), labels (N) in 0..K-1: forward returns the reduced loss (double); backward writes dz (=).
struct SoftmaxXentKernel {
  const char* name = nullptr;
  const char* supports_doc = nullptr;
  bool (*supports)(const SoftmaxXentParams&, DType) = nullptr;
  double (*forward)(const SoftmaxXentParams&, const Tensor& z, const std::vector<int32_t>& labels) = nullptr;
  void (*backward)(const SoftmaxXentParams&, const Tensor& z, const std::vector<int32_t>& labels, Tensor& dz) = nullptr;
};


}  // namespace driftlab
