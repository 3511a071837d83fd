#include "kernels/cpu/registry.h"

#include <vector>

#include <omp.h>

#include "core/stop.h"

namespace driftlab {

void poll_stop_before_kernel(const char* op) {
  if (!omp_in_parallel()) poll_stop(op);
}

int default_threads() { return omp_get_max_threads(); }

KernelRegistry make_cpu_registry() {
  KernelRegistry r;
  r.conv2d.op = "conv2d";
  r.conv_block.op = "conv_block";
  r.gemm.op = "gemm";
  r.rnn.op = "rnn";
  r.batchnorm.op = "batchnorm";
  r.maxpool2d.op = "maxpool2d";
  r.avgpool2d.op = "avgpool2d";
  r.activation.op = "activation";
  r.softmax_xent.op = "softmax_xent";
  r.sgd.op = "sgd";
  r.adam.op = "adam";
  r.rmsprop.op = "rmsprop";
  r.binary.op = "binary";
  r.qconv2d.op = "qconv2d";
  r.qdense.op = "qdense";
  r.qmaxpool2d.op = "qmaxpool2d";
  r.quantize.op = "quantize";
  r.qadd.op = "qadd";
  r.qglobal_avg_pool.op = "qglobal_avg_pool";
  r.qdense_dynamic.op = "qdense_dynamic";
  register_conv2d_ref(r);
  register_conv2d_eigen(r);
  register_conv2d_onednn(r);
  register_conv_block_ref(r);
  register_conv_block_fast(r);
  register_gemm_ref(r);
  register_gemm_eigen(r);
  register_gemm_onednn(r);
  register_rnn_ref(r);
  register_rnn_fast(r);
  register_batchnorm_ref(r);
  register_batchnorm_fast(r);
  register_pool2d_ref(r);
  register_pool2d_fast(r);
  register_activation_ref(r);
  register_activation_fast(r);
  register_binary_ref(r);
  register_binary_fast(r);
  register_softmax_xent_ref(r);
  register_softmax_xent_fast(r);
  register_sgd_ref(r);
  register_sgd_fast(r);
  register_adaptive_ref(r);
  register_adaptive_fast(r);
  register_qconv2d_ref(r);
  register_qconv2d_fast(r);
  register_qdense_ref(r);
  register_qdense_fast(r);
  register_qpool_ref(r);
  register_qpool_fast(r);
  register_quantize_ref(r);
  register_quantize_fast(r);
  register_qadd_ref(r);
  register_qadd_fast(r);
  register_quant_dynamic_ref(r);
  register_quant_dynamic_fast(r);
  return r;
}

void warm_up_gemms(const KernelRegistry& reg) {
  GemmParams p;
  p.m = p.n = p.k = 32;
  std::vector<float> a(32 * 32, 1.0f), b(a), c(a);
  for (const GemmKernel& k : reg.gemm.slot)
    if (k.f32) k.f32(p, a.data(), b.data(), c.data());
}

std::vector<KernelListing> list_kernels(const KernelRegistry& reg) {
  std::vector<KernelListing> out;
  reg.for_each_op([&](const auto& table) {
    for (int b = 0; b < kNumKernelBackends; ++b) {
      const auto& k = table.slot[b];
      if (k.name)
        out.push_back({table.op, backend_name(static_cast<KernelBackend>(b)), k.name,
                       k.supports_doc ? k.supports_doc : ""});
    }
  });
  return out;
}

template <>
void run_gemm<float>(const GemmKernel& k, const GemmParams& p, const float* a, const float* b, float* c) {
  k.f32(p, a, b, c);
}
template <>
void run_gemm<double>(const GemmKernel& k, const GemmParams& p, const double* a, const double* b, double* c) {
  k.f64(p, a, b, c);
}

}  // namespace driftlab
