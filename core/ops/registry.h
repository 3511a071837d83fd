// KernelRegistry: one table per op, a slot per backend (reference, fast, eigen, onednn). Every
// CPU op of every layer runs through it: the layer asks for the backend its knob names
// (conv_backend, gemm_backend, rnn_backend, bn_backend, pool_backend, act_backend (binary ops too),
// loss_backend, sgd_backend: every optimiser step), the table hands out that kernel when it is registered and its
// supports() accepts the call's params and dtype, and the reference otherwise. Fast kernels are
// declared in no header: registration (kernels/cpu/registry.h) is the only way to reach them,
// so no layer can run one past its knob (tests/test_registry.cpp).
//
// This header is the ground floor (engine/core, engine/ops: no kernel, no Policy); the tables are
// filled by kernels/cpu/registry.cpp (make_cpu_registry).
//
// To add an op: 1) its params and a <Op>Kernel struct (name, supports_doc, supports, the entry
// points) in core/ops/<op>.h; 2) an OpTable member below and a line in for_each_op; 3) its
// reference kernel and register_<op>_ref in kernels/cpu/ref/; 4) a knob choosing the backend
// (engine/policy.*) resolved where the layer is built; 5) a row in tests/test_registry.cpp.
// To add a backend for an op: register_<op>_<backend> in kernels/cpu/<backend>/ filling its slot,
// called from make_cpu_registry(), and a fast-vs-reference test in tests/ops/.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "core/ops/activation.h"
#include "core/ops/adaptive.h"
#include "core/ops/batchnorm.h"
#include "core/ops/binary.h"
#include "core/ops/conv2d.h"
#include "core/ops/conv_block.h"
#include "core/ops/gemm.h"
#include "core/ops/pool2d.h"
#include "core/ops/qadd.h"
#include "core/ops/qconv2d.h"
#include "core/ops/qdense.h"
#include "core/ops/qpool.h"
#include "core/ops/quantize.h"
#include "core/ops/quant_dynamic.h"
#include "core/ops/rnn.h"
#include "core/ops/sgd.h"
#include "core/ops/softmax_xent.h"

namespace driftlab {

// The kernels of one op, one per backend. Every kernel struct has `name` (null: nothing
// registered in that slot), `supports_doc` (what supports() accepts, in words, for listings) and
// `supports(params, dtype)`.
template <typename Kernel>
struct OpTable {
  const char* op = nullptr;  // "conv2d", "batchnorm", ...
  std::array<Kernel, kNumKernelBackends> slot{};

  const Kernel& at(KernelBackend b) const { return slot[static_cast<int>(b)]; }
  Kernel& at(KernelBackend b) { return slot[static_cast<int>(b)]; }
  const Kernel& reference() const { return at(KernelBackend::reference); }
  // The kernel registered for `want` if it supports (p, dt), else the reference (which
  // supports every call).
  template <typename Params>
  const Kernel& select(KernelBackend want, const Params& p, DType dt) const {
    const Kernel& k = at(want);
    if (k.name && k.supports(p, dt)) return k;
    return reference();
  }
};

struct KernelRegistry {
  OpTable<Conv2dKernel> conv2d;
  // conv -> bias -> activation -> max pool as one op (core/ops/conv_block.h; Sequential fuses the
  // three layers when conv_block_backend names a kernel that supports them)
  OpTable<ConvBlockKernel> conv_block;
  OpTable<GemmKernel> gemm;
  OpTable<RnnKernel> rnn;
  OpTable<BatchNormKernel> batchnorm;
  OpTable<Pool2dKernel> maxpool2d, avgpool2d;
  OpTable<ActivationKernel> activation;
  OpTable<BinaryKernel> binary;  // a graph's add, sub, mul (act_backend)
  OpTable<SoftmaxXentKernel> softmax_xent;
  OpTable<SgdKernel> sgd;
  OpTable<AdamKernel> adam;
  OpTable<RmspropKernel> rmsprop;
  // int8 inference (quant/): quantized conv, dense, max pooling; quantize and dequantize.
  OpTable<QConv2dKernel> qconv2d;
  OpTable<QDenseKernel> qdense;
  OpTable<QMaxPool2dKernel> qmaxpool2d;
  OpTable<QuantizeKernel> quantize;
  OpTable<QAddKernel> qadd;
  OpTable<QGlobalAvgPoolKernel> qglobal_avg_pool;
  // dynamic-range (weights-only) int8: float in, float out (quantize_dynamic's Linear, LSTM, GRU)
  OpTable<QDenseDynamicKernel> qdense_dynamic;

  // f(table) for every op table, in a fixed order (listings, tests).
  template <typename F>
  void for_each_op(F&& f) const {
    f(conv2d), f(conv_block), f(gemm), f(rnn), f(batchnorm), f(maxpool2d), f(avgpool2d), f(activation), f(binary),
        f(softmax_xent), f(sgd),
        f(adam), f(rmsprop), f(qconv2d), f(qdense), f(qmaxpool2d), f(quantize), f(qadd),
        f(qglobal_avg_pool), f(qdense_dynamic);
  }
};

// One kernel choice: which op asked for which backend and which kernel ran.
struct KernelChoice {
  std::string op, kernel;
  KernelBackend asked;
};

// Calls the selected gemm for T.
template <typename T>
void run_gemm(const GemmKernel& k, const GemmParams& p, const T* a, const T* b, T* c);

}  // namespace driftlab
