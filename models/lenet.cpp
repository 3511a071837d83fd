// LeNet-1 and LeNet-5 as in Guo et al.'s framework study (ASE 2019, docs/GLOSSARY.md): 'valid'
// 5x5 convolutions on 28x28 input, which is what makes the trainable-parameter counts exactly
// 3,246 and 44,426.
#include <memory>

#include "engine/layers/activation_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/pool_layer.h"
#include "models/models.h"

namespace driftlab {
namespace {

void conv(Model& m, Rng& rng, int64_t out_channels) {
  Conv2dSpec s;
  s.out_channels = out_channels;
  s.kernel_h = s.kernel_w = 5;
  s.pad = PadMode::valid;
  m.net->add(std::make_unique<Conv2dLayer>(s, m.net->current_shape(), m.policy, rng));
}
void relu(Model& m) { m.net->add(std::make_unique<ActivationLayer>(ActKind::relu, m.net->current_shape(), m.policy)); }
void maxpool(Model& m) {
  Pool2dSpec s;
  s.kind = PoolKind::max;
  s.window = 2;
  m.net->add(std::make_unique<Pool2dLayer>(s, m.net->current_shape(), m.policy));
}
void flatten(Model& m) { m.net->add(std::make_unique<FlattenLayer>(m.net->current_shape(), m.policy)); }
void dense(Model& m, Rng& rng, int64_t units) {
  m.net->add(std::make_unique<DenseLayer>(units, m.net->current_shape(), m.policy, rng));
}

}  // namespace

void build_lenet1(Model& m, Rng& rng) {
  conv(m, rng, 4);  // 28 -> 24
  relu(m);
  maxpool(m);  // 12
  conv(m, rng, 12);  // 8
  relu(m);
  maxpool(m);  // 4
  flatten(m);  // 192
  dense(m, rng, 10);
}

void build_lenet5(Model& m, Rng& rng) {
  conv(m, rng, 6);  // 28 -> 24
  relu(m);
  maxpool(m);  // 12
  conv(m, rng, 16);  // 8
  relu(m);
  maxpool(m);  // 4
  flatten(m);  // 256
  dense(m, rng, 120);
  relu(m);
  dense(m, rng, 84);
  relu(m);
  dense(m, rng, 10);
}

}  // namespace driftlab
