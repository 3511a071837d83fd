// The CPU kernels, as the engine sees them: make_cpu_registry() fills every op's table
// (core/ops/registry.h) by calling each backend's register_<op>_<backend> function, and
// ExecContext carries that registry and the thread count into every layer. Nothing else of
// kernels/cpu is visible above this floor but the reference kernels (kernels/cpu/ref/ref.h).
//
// To add a kernel: 1) kernels/cpu/<backend>/<op>_<backend>.cpp with its entry points in an
// anonymous namespace and register_<op>_<backend>(KernelRegistry&) filling its slot (name,
// supports_doc, supports, entry points); 2) declare that function below; 3) call it from
// make_cpu_registry(); 4) a fast-vs-reference test in tests/ops/ and the kernel's row in
// tests/test_registry.cpp.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/ops/registry.h"

namespace driftlab {

KernelRegistry make_cpu_registry();

void register_conv2d_ref(KernelRegistry&);
void register_conv2d_eigen(KernelRegistry&);
void register_conv2d_onednn(KernelRegistry&);
void register_conv_block_ref(KernelRegistry&);   // conv+bias+activation+maxpool: the three reference kernels
void register_conv_block_fast(KernelRegistry&);  // the same per image, fused (LeNet-shaped blocks)
void register_gemm_ref(KernelRegistry&);
void register_gemm_eigen(KernelRegistry&);
void register_gemm_onednn(KernelRegistry&);
void register_rnn_ref(KernelRegistry&);
void register_rnn_fast(KernelRegistry&);
void register_batchnorm_ref(KernelRegistry&);
void register_batchnorm_fast(KernelRegistry&);
void register_pool2d_ref(KernelRegistry&);   // max and average
void register_pool2d_fast(KernelRegistry&);  // max and average
void register_activation_ref(KernelRegistry&);
void register_activation_fast(KernelRegistry&);
void register_binary_ref(KernelRegistry&);
void register_binary_fast(KernelRegistry&);
void register_softmax_xent_ref(KernelRegistry&);
void register_softmax_xent_fast(KernelRegistry&);
void register_sgd_ref(KernelRegistry&);
void register_sgd_fast(KernelRegistry&);
void register_adaptive_ref(KernelRegistry&);   // adam, rmsprop
void register_adaptive_fast(KernelRegistry&);
void register_qconv2d_ref(KernelRegistry&);
void register_qconv2d_fast(KernelRegistry&);   // AVX-512 VNNI where the CPU has it
void register_qdense_ref(KernelRegistry&);
void register_qdense_fast(KernelRegistry&);    // AVX-512 VNNI where the CPU has it
void register_qpool_ref(KernelRegistry&);      // qmaxpool2d, qglobal_avg_pool
void register_qpool_fast(KernelRegistry&);     // the same two
void register_quantize_ref(KernelRegistry&);   // quantize and dequantize
void register_quantize_fast(KernelRegistry&);  // the same, per tensor
void register_qadd_ref(KernelRegistry&);
void register_qadd_fast(KernelRegistry&);
void register_quant_dynamic_ref(KernelRegistry&);   // qdense_dynamic (float in/out, int8 weights)
void register_quant_dynamic_fast(KernelRegistry&);  // the same, AVX-512 VNNI where the CPU has it

// Runs each registered float32 GEMM once on 32x32x32 (result discarded): a library that sets
// itself up on its first real call does it here, before a timed loop. oneDNN's sgemm takes
// ~30 ms on its first call of that size or larger on this machine (CPU dispatch, JIT), ~0.01 ms
// after (measured); a 1x1x1 call does not trigger it.
void warm_up_gemms(const KernelRegistry&);

// OpenMP's current thread count (omp_get_max_threads: OMP_NUM_THREADS or the CLI's --threads).
int default_threads();

// core/stop.h's poll between two kernels: every layer's forward and backward picks its kernels
// here, so a StopScope on the calling thread ends any long call within one kernel. Not inside an
// OpenMP parallel region (an exception must not leave one).
void poll_stop_before_kernel(const char* op);

// What a layer's kernels run with: the registry and the thread count (no global state).
struct ExecContext {
  KernelRegistry kernels = make_cpu_registry();
  // Threads used by fast kernels: by default what OpenMP is set to, so every command and
  // library call runs at the thread count the user chose. Results are reproducible per count.
  int threads = default_threads();
  // When set, every kernel selection is appended here (tests: which kernel ran for which op).
  std::vector<KernelChoice>* trace = nullptr;
  // When set, Sequential calls it on every forward pass with each of its layers' index and input
  // as that layer receives it (maybe channel-blocked); a fused conv block gives the convolution's
  // input and, when the pass is recorded, its activation's input z; a graph layer (GraphLayer)
  // gives each of its layer nodes' input by node index (tests: the ReLU, ReLU6 and max-pool
  // decisions a training step took, tests/oracles/test_torch_oracle.cpp, test_graph_oracle_torch.cpp).
  std::function<void(std::size_t layer, const Tensor& input)> layer_inputs;
  // When set, called before each unfused Sequential layer and each graph layer node (indices as
  // above) runs: a defined result replaces that layer's input for that layer alone (the tensor it
  // was given, which earlier layers may keep for their backward, is left as it is). Tests: a
  // float64 run made to take a float32 run's decision at a tie, so that the two steps compare
  // like with like (tests/oracles/test_graph_oracle_torch.cpp).
  std::function<Tensor(std::size_t layer, const Tensor& input)> replace_layer_input;
  // Whether Sequential may keep activations channel-blocked between the layers that take them
  // (engine/layers/layout.h; the convolutions compute the same bits either way, BatchNorm sums in
  // another order). false: every layer sees plain tensors (the comparison the tests make).
  bool channel_blocks = true;
  // Whether Sequential may run a batchnorm followed by a ReLU as one op (BatchNormParams::relu: the
  // two layers' bits, one pass fewer each way, no tensor for the ReLU's input), and a graph's
  // prediction a batchnorm and a ReLU or clip, or a batchnorm, an add and a ReLU, or a depthwise
  // convolution with the batchnorm and ReLU or clip before it and the ones after it
  // (GraphLayer::fused_span).
  // false: the layers one by one (what the tests compare it with).
  bool fuse_bn_relu = true;
  // Within fuse_bn_relu: whether a graph's prediction runs a depthwise convolution with the
  // batchnorms (and their ReLU or clip) before and after it as one op (Conv2dKernel::forward_fused).
  // false: those batchnorms (with their activations) run on their own (bench/bm_graph's mode 4
  // measures what it buys).
  bool fuse_conv_channel_ops = true;

  // The kernel of `table` for backend `want` (see OpTable::select), recorded in `trace`.
  template <typename Kernel, typename Params>
  const Kernel& pick(const OpTable<Kernel>& table, KernelBackend want, const Params& p, DType dt) const {
    poll_stop_before_kernel(table.op);
    const Kernel& k = table.select(want, p, dt);
    if (trace) trace->push_back({table.op, k.name, want});
    return k;
  }
};

// One line per op and registered kernel: "conv2d  onednn  float32 only; ..." (driftlab kernels,
// tests/test_registry.cpp).
struct KernelListing {
  std::string op, backend, kernel, supports;
};
std::vector<KernelListing> list_kernels(const KernelRegistry&);

}  // namespace driftlab
