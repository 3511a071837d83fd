// CIFAR-10 models of the studies of Guo et al. and Openja et al. (docs/GLOSSARY.md): ResNet-20
// (He et al. 2016, CIFAR variant: 3 stages of 3 basic blocks, 16/32/64 channels, option A
// shortcuts; "resnet20b" uses option B), ResNet-18 (CIFAR variant: 3x3 stem, 4 stages of 2 basic
// blocks, 64..512 channels, option B shortcuts), and VGG-16 with the 4096-4096-10 head on 32x32 input.
// The 3x3 convolutions keep the size: the model_conv_padding knob says how they are written,
// padding='same' as Keras model code writes them (conv_same_pad then splits odd totals), or
// padding=1 on every side as PyTorch's reference implementations write them (PyTorch refuses
// 'same' with stride 2, and the CIFAR ResNets downsample with stride-2 3x3 convolutions). With
// stride 2 on an even input the two differ: 'same' pads only after (TF), padding=1 both sides.
// Convolutions followed by BatchNorm have no bias (PyTorch's references; a bias before BN
// only shifts the batch mean away).
#include <memory>

#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/global_avg_pool_layer.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "models/models.h"

namespace driftlab {
namespace {

Conv2dSpec conv3x3(int64_t out, int64_t stride, bool bias, const Policy& p) {
  Conv2dSpec s;
  s.out_channels = out;
  s.kernel_h = s.kernel_w = 3;
  s.stride = stride;
  s.bias = bias;
  if (p.model_conv_padding == ModelConvPadding::explicit_half) {
    s.pad = PadMode::explicit_pad;
    s.pad_h = s.pad_w = 1;
  } else {
    s.pad = PadMode::same;
  }
  return s;
}

void conv_bn_relu(Sequential& net, const Policy& p, Rng& rng, int64_t out, int64_t stride, bool relu = true) {
  net.add(std::make_unique<Conv2dLayer>(conv3x3(out, stride, false, p), net.current_shape(), p, rng));
  net.add(std::make_unique<BatchNormLayer>(net.current_shape(), p));
  if (relu) net.add(std::make_unique<ActivationLayer>(ActKind::relu, net.current_shape(), p));
}

}  // namespace

void add_basic_block(Sequential& net, const Policy& p, Rng& rng, int64_t planes, int64_t stride, Shortcut sc) {
  auto main = std::make_unique<Sequential>(net.current_shape());
  conv_bn_relu(*main, p, rng, planes, stride);
  conv_bn_relu(*main, p, rng, planes, 1, false);
  net.add(std::make_unique<ResidualLayer>(std::move(main), sc, p, rng));
  net.add(std::make_unique<ActivationLayer>(ActKind::relu, net.current_shape(), p));
}

namespace {

void head(Sequential& net, const Policy& p, Rng& rng) {
  net.add(std::make_unique<GlobalAvgPoolLayer>(net.current_shape(), p));
  net.add(std::make_unique<DenseLayer>(10, net.current_shape(), p, rng));
}

void resnet_cifar(Model& m, Rng& rng, Shortcut sc) {
  Sequential& net = *m.net;
  conv_bn_relu(net, m.policy, rng, 16, 1);
  const int64_t planes[] = {16, 32, 64};
  for (int stage = 0; stage < 3; ++stage)
    for (int b = 0; b < 3; ++b) add_basic_block(net, m.policy, rng, planes[stage], (stage > 0 && b == 0) ? 2 : 1, sc);
  head(net, m.policy, rng);
}

}  // namespace

void build_resnet20(Model& m, Rng& rng) { resnet_cifar(m, rng, Shortcut::option_a); }
void build_resnet20b(Model& m, Rng& rng) { resnet_cifar(m, rng, Shortcut::option_b); }

void build_resnet18(Model& m, Rng& rng) {
  Sequential& net = *m.net;
  conv_bn_relu(net, m.policy, rng, 64, 1);
  const int64_t planes[] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage)
    for (int b = 0; b < 2; ++b)
      add_basic_block(net, m.policy, rng, planes[stage], (stage > 0 && b == 0) ? 2 : 1, Shortcut::option_b);
  head(net, m.policy, rng);
}

void build_vgg16(Model& m, Rng& rng) {
  Sequential& net = *m.net;
  const int64_t cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
  for (int64_t c : cfg) {
    if (c == 0) {
      Pool2dSpec s;
      s.window = 2;
      net.add(std::make_unique<Pool2dLayer>(s, net.current_shape(), m.policy));
      continue;
    }
    net.add(std::make_unique<Conv2dLayer>(conv3x3(c, 1, true, m.policy), net.current_shape(), m.policy, rng));
    net.add(std::make_unique<ActivationLayer>(ActKind::relu, net.current_shape(), m.policy));
  }
  net.add(std::make_unique<FlattenLayer>(net.current_shape(), m.policy));
  for (int64_t units : {4096, 4096}) {
    net.add(std::make_unique<DenseLayer>(units, net.current_shape(), m.policy, rng));
    net.add(std::make_unique<ActivationLayer>(ActKind::relu, net.current_shape(), m.policy));
  }
  net.add(std::make_unique<DenseLayer>(10, net.current_shape(), m.policy, rng));
}

}  // namespace driftlab
