#include "engine/layers/sequential.h"

#include <cmath>

#include "engine/cuda/device_layer.h"
#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/graph_layer.h"
#include "engine/layers/layout.h"
#include "engine/layers/math_mode.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"

namespace driftlab {

const char* semantics_name(Semantics s) { return s == Semantics::train ? "train" : "inference"; }

namespace {

// The parameters of the block's one op for a batch of n.
ConvBlockParams block_params(const Conv2dLayer& conv, const ActivationLayer& act, const Pool2dLayer& pool, int64_t n) {
  ConvBlockParams p;
  p.conv = conv.op_params();
  p.conv.n = n;
  p.bias = conv.has_bias();
  p.act = act.op_params();
  p.pool = pool.op_params();
  p.pool.n = n;
  return p;
}

}  // namespace

Layer& Sequential::add(std::unique_ptr<Layer> layer) {
  out_ = layer->output_shape();
  formats_.push_back(layer->set_input_format(formats_.empty() ? in_format_ : formats_.back()));
  layers_.push_back(std::move(layer));
  if (layers_.size() >= 2) {  // the last two appended: a batchnorm or residual -> ReLU pair?
    const auto* act = layer_as<ActivationLayer>(*layers_.back());
    const std::size_t first = layers_.size() - 2;
    if (act && act->op_params().kind == ActKind::relu) {
      if (layer_as<BatchNormLayer>(*layers_[first])) bn_relu_.push_back(first);
      if (layer_as<ResidualLayer>(*layers_[first])) res_relu_.push_back(first);
    }
  }
  if (layers_.size() >= 3) {  // the last three appended: a conv -> activation -> max-pool run?
    Block b;
    b.first = layers_.size() - 3;
    b.conv = layer_as<Conv2dLayer>(*layers_[b.first]);
    b.act = layer_as<ActivationLayer>(*layers_[b.first + 1]);
    b.pool = layer_as<Pool2dLayer>(*layers_[b.first + 2]);
    if (b.conv && b.act && b.pool && b.pool->pool_kind() == PoolKind::max &&
        b.conv->block_backend() != KernelBackend::reference && !b.conv->math().active()) {
      blocks_.push_back(b);
      note_block(blocks_.back());
    }
  }
  return *layers_.back();
}

// The conv layer's describe() says whether its block runs fused (the default registry, the
// layer's dtype; a registry without the kernel falls back the same way at run time).
void Sequential::note_block(const Block& b) {
  static const KernelRegistry kRegistry = make_cpu_registry();
  const KernelBackend want = b.conv->block_backend();
  const ConvBlockKernel& k = kRegistry.conv_block.at(want);
  const DType dt = b.conv->weight().value.dtype();
  if (k.name && k.supports(block_params(*b.conv, *b.act, *b.pool, 1), dt))
    b.conv->set_block_note(std::string("conv_block ") + backend_name(want) + ": fused with " +
                           act_name(b.act->op_params().kind) + ", maxpool");
  else
    b.conv->set_block_note(std::string(backend_name(b.conv->op_backend())) + "; not fused: conv_block " +
                           backend_name(want) + (k.name ? std::string(" supports ") + k.supports_doc : " not built"));
}

ResidualLayer* Sequential::res_relu_at(std::size_t i) const {
  for (std::size_t first : res_relu_)
    if (first == i) return layer_as<ResidualLayer>(*layers_[i]);
  return nullptr;
}

BatchNormLayer* Sequential::bn_relu_at(std::size_t i) const {
  for (std::size_t first : bn_relu_)
    if (first == i) return layer_as<BatchNormLayer>(*layers_[i]);
  return nullptr;
}

Sequential::Block* Sequential::block_at(std::size_t first) {
  for (Block& b : blocks_)
    if (b.first == first) return &b;
  return nullptr;
}

Sequential::Block* Sequential::block_ending_at(std::size_t last) {
  for (Block& b : blocks_)
    if (b.first + 2 == last) return &b;
  return nullptr;
}

bool Sequential::forward_block(RunContext& ctx, Block& blk, Tensor& h) {
  const Conv2dParams& cp = blk.conv->op_params();
  check_input("conv2d", h, {cp.c, cp.h, cp.w});
  const ConvBlockParams p = block_params(*blk.conv, *blk.act, *blk.pool, h.dim(0));
  const KernelBackend want = blk.conv->block_backend();
  const ConvBlockKernel& k = ctx.exec.kernels.conv_block.at(want);
  blk.fused = false;
  blk.x = blk.z = Tensor();
  if (!k.name || !k.supports(p, h.dtype())) return false;
  // The fused loops sum directly; conv_algorithm=winograd asks for oneDNN's Winograd where it has one.
  if (cp.algorithm == ConvAlgorithm::winograd) return false;
  ctx.exec.pick(ctx.exec.kernels.conv_block, want, p, h.dtype());  // the trace
  h = to_plain(h);  // the fused blocks take plain tensors
  Tensor y = Tensor::empty(p.y_shape(), h.dtype());
  if (ctx.record) blk.z = Tensor::empty(p.z_shape(), h.dtype());
  k.forward(p, h, blk.conv->weight().value, p.bias ? &blk.conv->bias().value : nullptr, y,
            ctx.record ? &blk.z : nullptr);
  if (ctx.record) blk.x = h;
  blk.fused = true;
  h = y;
  return true;
}

MathMode Sequential::set_input_format(MathMode in) {
  in_format_ = in;
  MathMode f = in;
  for (std::size_t i = 0; i < layers_.size(); ++i) f = formats_[i] = layers_[i]->set_input_format(f);
  return f;
}

void Sequential::apply_input_cast(const Policy& policy) {
  const MathMode f = autocast_format(policy);
  if (!reduced_format(f) || policy.autocast_input_cast != AutocastInputCast::every_layer) return;
  cast_input_ = true;
  for (auto& l : layers_)
    if (auto* g = layer_as<GraphLayer>(*l)) g->cast_every_input(true);
  set_input_format(f);
}

int Sequential::input_block(const ExecContext& exec, DType dt) const {
  for (const auto& l : layers_)
    if (int b = l->input_block(exec, dt); b != kAnyBlock) return b;
  return kAnyBlock;
}

Tensor Sequential::forward(RunContext& ctx, const Tensor& x) { return run(ctx, x, 0, layers_.size()); }

Tensor Sequential::forward_prefix(RunContext& ctx, const Tensor& x, std::size_t upto) {
  check(upto < layers_.size(), "sequential: a prefix of ", upto, " of ", layers_.size(), " layers");
  return run(ctx, x, 0, upto);
}

Tensor Sequential::forward_from(RunContext& ctx, const Tensor& h, std::size_t from) {
  check(from < layers_.size(), "sequential: layers from ", from, " of ", layers_.size());
  check(!ctx.record, "sequential: forward_from keeps nothing for a backward (a prediction only)");
  return run(ctx, h, from, layers_.size());
}

Tensor Sequential::run(RunContext& ctx, const Tensor& x, std::size_t from, std::size_t upto) {
  const int outer = ctx.out_block;
  const std::size_t n = layers_.size();
  // takes[i]: the block layer i takes (kAnyBlock: any); wants[i]: the block layer i's input may
  // have, looking past the layers that take any, to what the caller allows after the last one.
  std::vector<int> takes(n), wants(n + 1);
  wants[n] = outer;
  for (std::size_t i = n; i-- > 0;) {
    takes[i] = ctx.exec.channel_blocks ? layers_[i]->input_block(ctx.exec, x.dtype()) : 0;
    wants[i] = takes[i] == kAnyBlock ? wants[i + 1] : takes[i];
  }
  in_block_ = x.channel_block();
  out_blocks_.assign(n, 0);
  fused_bn_relu_.assign(n, 0);
  const bool may_fuse = ctx.exec.fuse_bn_relu && !ctx.exec.layer_inputs && !ctx.exec.replace_layer_input;
  Tensor h = cast_input_ && from == 0 ? rounded_to(x, in_format_) : x;
  for (std::size_t i = from; i < upto;) {
    if (Block* b = i + 3 <= upto ? block_at(i) : nullptr) {
      const Tensor in = ctx.exec.layer_inputs ? h : Tensor();  // kept only for the tap
      if (forward_block(ctx, *b, h)) {
        if (ctx.exec.layer_inputs) {
          ctx.exec.layer_inputs(i, in);
          if (b->z.defined()) ctx.exec.layer_inputs(i + 1, b->z);
        }
        i += 3;
        continue;
      }
    }
    if (h.channel_block() != 0 && !takes_block(takes[i], h.channel_block())) h = to_plain(h);
    const bool pair_fits = may_fuse && i + 2 <= upto && formats_[i] == MathMode::float32 &&
                           i + 1 < n && formats_[i + 1] == MathMode::float32;
    if (ResidualLayer* res = pair_fits && ctx.semantics == Semantics::inference && !ctx.record ? res_relu_at(i) : nullptr;
        res && res->fuses_tail(ctx.exec, h.dtype())) {
      ctx.out_block = wants[i + 2];
      h = res->forward_relu(ctx, h, layer_as<ActivationLayer>(*layers_[i + 1])->op_params());
      out_blocks_[i] = out_blocks_[i + 1] = h.channel_block();
      i += 2;
      continue;
    }
    if (BatchNormLayer* bn = pair_fits ? bn_relu_at(i) : nullptr) {
      ctx.out_block = wants[i + 2];
      h = bn->forward_relu(ctx, h, layer_as<ActivationLayer>(*layers_[i + 1])->op_params());
      out_blocks_[i] = out_blocks_[i + 1] = h.channel_block();
      fused_bn_relu_[i] = 1;
      i += 2;
      continue;
    }
    if (ctx.exec.replace_layer_input)
      if (Tensor r = ctx.exec.replace_layer_input(i, h); r.defined()) h = r;
    if (ctx.exec.layer_inputs) ctx.exec.layer_inputs(i, h);
    ctx.out_block = wants[i + 1];
    h = layers_[i]->forward(ctx, h);
    round_to_format(h, formats_[i]);  // autocast: a result in a 16-bit format (nothing when off)
    out_blocks_[i] = h.channel_block();
    ++i;
  }
  ctx.out_block = outer;
  if (upto < n) return h;  // a prefix: in the layout its last layer left it
  if (h.channel_block() != 0 && !takes_block(outer, h.channel_block())) h = to_plain(h);
  final_block_ = h.channel_block();
  return h;
}

Tensor Sequential::backward(RunContext& ctx, const Tensor& dy) {
  check(dy.channel_block() == final_block_ || dy.channel_block() == 0, "sequential backward: dy in channel block ",
        dy.channel_block(), ", the forward's output in ", final_block_);
  Tensor g = to_block(dy, final_block_);
  for (std::size_t i = layers_.size(); i-- > 0;) {
    if (g.defined()) g = to_block(g, out_blocks_.size() == layers_.size() ? out_blocks_[i] : 0);
    Block* blk = block_ending_at(i);
    if (blk && blk->fused) {
      check(blk->x.defined(), "conv_block: backward without a recorded forward");
      Conv2dLayer& conv = *blk->conv;
      const ConvBlockParams p = block_params(conv, *blk->act, *blk->pool, blk->x.dim(0));
      const ConvBlockKernel& k = ctx.exec.pick(ctx.exec.kernels.conv_block, conv.block_backend(), p, g.dtype());
      const bool need_dx = blk->first > 0 || ctx.input_grad;
      Tensor dx = need_dx ? Tensor::empty(p.x_shape(), g.dtype()) : Tensor();
      k.backward(p, blk->x, conv.weight().value, blk->z, g, need_dx ? &dx : nullptr,
                 ctx.param_grads ? &conv.weight().grad : nullptr, ctx.param_grads && p.bias ? &conv.bias().grad : nullptr);
      blk->x = blk->z = Tensor();  // the backward takes the recording (engine/layers/layer.h)
      g = dx;
      i = blk->first;  // the loop's i-- moves past the block
      continue;
    }
    if (i > 0 && fused_bn_relu_.size() == layers_.size() && fused_bn_relu_[i - 1]) {
      --i;  // the ReLU's gradient goes to the batchnorm, which ran both (the loop's i-- moves past it)
      ctx.need_dx = i > 0 || ctx.input_grad;
      g = layers_[i]->backward(ctx, g);
      continue;
    }
    ctx.need_dx = i > 0 || ctx.input_grad;
    if (g.defined()) g = rounded_to(g, formats_[i]);  // autocast: the gradient of a 16-bit tensor
    g = layers_[i]->backward(ctx, g);
  }
  ctx.need_dx = true;
  if (g.defined() && cast_input_) g = rounded_to(g, in_format_);  // the gradient of the cast input
  if (g.defined()) g = to_block(g, in_block_);
  return g;
}

void Layer::collect(const std::string& prefix, bool want_buffers, std::vector<std::pair<std::string, Param*>>& out) {
  for (Param* p : want_buffers ? buffers() : params()) out.emplace_back(prefix + "." + kind() + "." + p->name, p);
}

std::string ExternalLayer::device_unsupported() const { return "no CUDA implementation yet"; }

std::unique_ptr<DeviceLayer> ExternalLayer::make_device(cuda::CudaContext&) {
  fail("cuda: layer ", kind(), " has no CUDA implementation yet");
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
