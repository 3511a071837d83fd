// Reference conv_block: the reference kernels of conv2d, the activation and max pooling, one after
// the other over the whole batch (what the three layers compute unfused), float32 and float64.
#include "kernels/cpu/ref/ref.h"
#include "kernels/cpu/registry.h"

namespace driftlab {

void conv_block_forward_ref(const ConvBlockParams& p, const Tensor& x, const Tensor& w, const Tensor* b, Tensor& y,
                            Tensor* z) {
  p.validate();
  Tensor zt = z ? *z : Tensor::empty(p.z_shape(), x.dtype());
  conv2d_forward_ref(p.conv, x, w, p.bias ? b : nullptr, zt);
  Tensor a = Tensor::empty(p.z_shape(), x.dtype());
  activation_forward_ref(p.act, zt, a);
  maxpool2d_forward_ref(p.pool, a, y);
}

void conv_block_backward_ref(const ConvBlockParams& p, const Tensor& x, const Tensor& w, const Tensor& z,
                             const Tensor& dy, Tensor* dx, Tensor* dw, Tensor* db) {
  p.validate();
  Tensor a = Tensor::empty(p.z_shape(), z.dtype());
  activation_forward_ref(p.act, z, a);
  Tensor da = Tensor::empty(p.z_shape(), z.dtype());
  maxpool2d_backward_ref(p.pool, a, dy, da);
  Tensor dz = Tensor::empty(p.z_shape(), z.dtype());
  activation_backward_ref(p.act, z, a, da, dz);
  if (dx) conv2d_backward_data_ref(p.conv, dz, w, *dx);
  if (dw) conv2d_backward_weight_ref(p.conv, x, dz, *dw, p.bias ? db : nullptr);
}

void register_conv_block_ref(KernelRegistry& reg) {
  ConvBlockKernel k;
  k.name = "reference";
  k.supports_doc = "every params field, float32 and float64 (the conv2d, activation and maxpool2d references)";
  k.supports = [](const ConvBlockParams&, DType) { return true; };
  k.forward = conv_block_forward_ref;
  k.backward = conv_block_backward_ref;
  reg.conv_block.at(KernelBackend::reference) = k;
}

}  // namespace driftlab
