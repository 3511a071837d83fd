#include "engine/layers/sequential.h"

#include <cmath>

namespace driftlab {

const char* semantics_name(Semantics s) { return s == Semantics::train ? "train" : "inference"; }

Layer& Sequential::add(std::unique_ptr<Layer> layer) {
  out_ = layer->output_shape();
  layers_.push_back(std::move(layer));
  return *layers_.back();
}

Tensor Sequential::forward(RunContext& ctx, const Tensor& x) {
  Tensor h = x;
  for (auto& l : layers_) h = l->forward(ctx, h);
  return h;
}

Tensor Sequential::backward(RunContext& ctx, const Tensor& dy) {
  Tensor g = dy;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    ctx.need_dx = i > 0 || ctx.input_grad;
    g = layers_[i]->backward(ctx, g);
  }
  ctx.need_dx = true;
  return g;
}

void Layer::collect(const std::string& prefix, bool want_buffers, std::vector<std::pair<std::string, Param*>>& out) {
  for (Param* p : want_buffers ? buffers() : params()) out.emplace_back(prefix + "." + kind() + "." + p->name, p);
}

std::vector<std::pair<std::string, Param*>> Sequential::named_params() {
  std::vector<std::pair<std::string, Param*>> out;
  for (std::size_t i = 0; i < layers_.size(); ++i) layers_[i]->collect(std::to_string(i), false, out);
  return out;
}

std::vector<std::pair<std::string, Param*>> Sequential::named_buffers() {
  std::vector<std::pair<std::string, Param*>> out;
  for (std::size_t i = 0; i < layers_.size(); ++i) layers_[i]->collect(std::to_string(i), true, out);
  return out;
}

void Sequential::zero_grad() {
  for (auto& np : named_params()) np.second->grad.zero();
}

}  // namespace driftlab
