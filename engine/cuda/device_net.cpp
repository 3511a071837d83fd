#include "engine/cuda/device_net.h"

#include <cstring>
#include <map>

#include "engine/layers/activation_layer.h"
#include "engine/layers/batchnorm_layer.h"
#include "engine/layers/conv2d_layer.h"
#include "engine/layers/dense_layer.h"
#include "engine/layers/dropout_layer.h"
#include "engine/layers/embedding_layer.h"
#include "engine/layers/flatten_layer.h"
#include "engine/layers/global_avg_pool_layer.h"
#include "engine/layers/pool_layer.h"
#include "engine/layers/residual_layer.h"
#include "engine/layers/rnn_layer.h"
#include "engine/random.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/ops.h"

namespace driftlab {

using cuda::CudaContext;
using cuda::DeviceTensor;

namespace {

const char* kCovered =
    "conv2d, maxpool2d, avgpool2d, dense, relu/tanh/sigmoid/hard_sigmoid, flatten, dropout, batchnorm, residual, "
    "global_avg_pool, embedding, lstm, gru; int8: quantize, dequantize, qconv2d, qdense, qmaxpool2d, qrelu, "
    "qglobal_avg_pool, qresidual";

// The first layer (path and kind) without a device counterpart, or "" when all have one.
std::string first_unsupported(Sequential& net, const std::string& prefix) {
  for (std::size_t i = 0; i < net.size(); ++i) {
    Layer& l = net.layer(i);
    const std::string path = prefix + std::to_string(i);
    if (auto* r = dynamic_cast<ResidualLayer*>(&l)) {
      std::string bad = first_unsupported(r->main(), path + ".residual.main.");
      if (bad.empty() && r->projection()) bad = first_unsupported(*r->projection(), path + ".residual.shortcut.");
      if (!bad.empty()) return bad;
      continue;
    }
    if (dynamic_cast<Conv2dLayer*>(&l) || dynamic_cast<Pool2dLayer*>(&l) || dynamic_cast<DenseLayer*>(&l) ||
        dynamic_cast<ActivationLayer*>(&l) || dynamic_cast<FlattenLayer*>(&l) || dynamic_cast<DropoutLayer*>(&l) ||
        dynamic_cast<BatchNormLayer*>(&l) || dynamic_cast<GlobalAvgPoolLayer*>(&l) ||
        dynamic_cast<EmbeddingLayer*>(&l) || dynamic_cast<RnnLayer*>(&l))
      continue;
    const std::string why = l.device_unsupported();  // layers outside engine/layers (quant/)
    if (why.empty()) continue;
    return path + " (" + l.kind() + "): " + why;
  }
  return "";
}

}  // namespace

// ---------------------------------------------------------------- building

void check_device_supported(Model& model) {
  std::string bad = first_unsupported(*model.net, "");
  check(bad.empty(), "cuda: model ", model.name, ": layer ", bad, " (the device path covers ", kCovered,
        "); run it with --device cpu");
}

cuda::CudaExecParams resolve_cuda_exec(const Policy& policy) {
  cuda::CudaExecParams p;
  const cuda::CudaBackend b =
      policy.cuda_kernels == CudaKernels::vendor ? cuda::CudaBackend::vendor : cuda::CudaBackend::own;
  p.gemm_backend = p.conv_backend = p.pool_backend = p.bn_backend = p.softmax_backend = p.rnn_backend = b;
  p.tf32_matmul = policy.tf32_matmul;
  p.tf32_conv = policy.tf32_conv;
  p.deterministic = policy.cuda_deterministic;
  p.algo_search = policy.cudnn_algo_search == AlgoSearch::exhaustive ? cuda::CudnnAlgoSearch::exhaustive
                                                                       : cuda::CudnnAlgoSearch::heuristic;
  return p;
}

std::unique_ptr<cuda::CudaContext> open_cuda_device(const cuda::CudaExecParams& params, const std::string& who) {
  std::string why;
  if (cuda::device_count(&why) == 0) fail("no CUDA device: ", why, " (", who, " needs one; see `driftlab device`)");
  return std::make_unique<cuda::CudaContext>(params, 0);
}

struct DeviceNetBuilder {
  DeviceNet& net;
  std::map<const Param*, std::string> param_names, buffer_names;

  DeviceParam* adopt(Param* p, bool trained) {
    auto& names = trained ? param_names : buffer_names;
    auto it = names.find(p);
    check(it != names.end(), "cuda: a layer parameter '", p->name, "' is not among the model's named ",
          trained ? "parameters" : "buffers");
    auto dp = std::make_unique<DeviceParam>();
    dp->name = it->second;
    dp->host = p;
    dp->is_bias = p->is_bias;
    dp->value = cuda::to_device(net.ctx_, p->value);
    if (trained) dp->grad = DeviceTensor::zeros(net.ctx_, p->value.shape(), p->value.dtype());
    (trained ? net.params_ : net.buffers_).push_back(std::move(dp));
    return (trained ? net.params_ : net.buffers_).back().get();
  }

  std::unique_ptr<DeviceLayer> make_layer(Layer& l, const std::string& path) {
    if (auto* c = dynamic_cast<Conv2dLayer*>(&l)) {
      auto ps = c->params();
      // One statement per adopt: the order of the device parameters is the CPU model's (function
      // arguments are evaluated in an unspecified order; GCC took the bias first).
      DeviceParam* w = adopt(ps[0], true);
      DeviceParam* b = ps.size() > 1 ? adopt(ps[1], true) : nullptr;
      return make_device_conv2d(*c, w, b);
    }
    if (auto* d = dynamic_cast<DenseLayer*>(&l)) {
      auto ps = d->params();
      DeviceParam* w = adopt(ps[0], true);
      DeviceParam* b = ps.size() > 1 ? adopt(ps[1], true) : nullptr;
      return make_device_dense(w, b);
    }
    if (auto* p = dynamic_cast<Pool2dLayer*>(&l)) return make_device_pool2d(*p);
    if (auto* a = dynamic_cast<ActivationLayer*>(&l)) return make_device_activation(*a);
    if (auto* f = dynamic_cast<FlattenLayer*>(&l)) return make_device_flatten(*f);
    if (auto* d = dynamic_cast<DropoutLayer*>(&l)) return make_device_dropout(*d);
    if (auto* g = dynamic_cast<GlobalAvgPoolLayer*>(&l)) return make_device_global_avg_pool(*g);
    if (auto* e = dynamic_cast<EmbeddingLayer*>(&l)) return make_device_embedding(*e, adopt(e->params()[0], true));
    if (auto* r = dynamic_cast<RnnLayer*>(&l)) {
      std::vector<DeviceParam*> ps;
      for (Param* q : r->params()) ps.push_back(adopt(q, true));
      return make_device_rnn(*r, ps);
    }
    if (auto* b = dynamic_cast<BatchNormLayer*>(&l)) {
      auto ps = b->params();
      DeviceParam* gamma = adopt(ps[0], true);
      DeviceParam* beta = adopt(ps[1], true);
      const bool debias = b->op_params().zero_debias;
      std::vector<DeviceParam*> state;
      auto rs = b->running_state();
      for (std::size_t i = 0; i < rs.size(); ++i) state.push_back(i < 2 || debias ? adopt(rs[i], false) : nullptr);
      return make_device_batchnorm(*b, gamma, beta, std::move(state));
    }
    if (auto* r = dynamic_cast<ResidualLayer*>(&l)) {
      auto main = make_seq(r->main(), path + ".residual.main.");
      auto proj = r->projection() ? make_seq(*r->projection(), path + ".residual.shortcut.") : nullptr;
      return make_device_residual(*r, std::move(main), std::move(proj));
    }
    const std::string why = l.device_unsupported();
    check(why.empty(), "cuda: layer ", path, " (", l.kind(), "): ", why);
    return l.make_device(net.ctx_);  // a layer defined outside engine/layers (quant/'s int8 layers)
  }

  std::unique_ptr<DeviceSequential> make_seq(Sequential& seq, const std::string& prefix) {
    std::vector<DeviceSequential::Entry> entries;
    for (std::size_t i = 0; i < seq.size(); ++i) {
      const std::string path = prefix + std::to_string(i);
      entries.push_back({path, seq.layer(i).kind(), make_layer(seq.layer(i), path)});
    }
    return std::make_unique<DeviceSequential>(std::move(entries));
  }
};

// ---------------------------------------------------------------- DeviceNet

DeviceNet::DeviceNet(cuda::CudaContext& ctx, Model& model) : ctx_(ctx), model_(model) {
  check_device_supported(model);
  DeviceNetBuilder b{*this, {}, {}};
  for (auto& np : model.net->named_params()) b.param_names[np.second] = np.first;
  for (auto& np : model.net->named_buffers()) b.buffer_names[np.second] = np.first;
  // BatchNorm's zero-debias state is adopted only when used; it is then among the buffers.
  net_ = b.make_seq(*model.net, "");
}

DeviceValue DeviceNet::forward(DeviceRunContext& run, const Tensor& x) {
  const Tensor& xt = x.dtype() == model_.dtype() ? x : x.to(model_.dtype());
  DeviceValue dx;
  try {
    dx = std::make_shared<DeviceTensor>(cuda::to_device(ctx_, xt));
  } catch (const Error& err) {
    fail("cuda: copying the input ", shape_str(xt.shape()), " to the device, batch ", xt.rank() ? xt.dim(0) : 0, ": ",
         err.what());
  }
  return net_->forward(run, dx);
}

DeviceValue DeviceNet::backward(DeviceRunContext& run, const DeviceValue& dlogits) {
  return net_->backward(run, dlogits);
}

Tensor DeviceNet::predict(const Tensor& x, int64_t max_batch) {
  check(max_batch >= 0, "predict: --max-batch ", max_batch, " must be >= 0 (0: the whole input at once)");
  check(x.rank() >= 1, "predict: input has no batch axis");
  DeviceRunContext run = DeviceRunContext::inference(ctx_);
  const int64_t n = x.dim(0);
  if (max_batch == 0 || max_batch >= n) return cuda::to_host(ctx_, *forward(run, x));
  const int64_t per = n > 0 ? x.numel() / n : 0;
  Tensor out;
  for (int64_t b = 0; b < n; b += max_batch) {
    const int64_t cnt = std::min(max_batch, n - b);
    Shape s = x.shape();
    s[0] = cnt;
    Tensor chunk = Tensor::empty(s, x.dtype());
    std::memcpy(chunk.raw(), static_cast<const char*>(x.raw()) + b * per * dtype_size(x.dtype()), chunk.nbytes());
    Tensor y = cuda::to_host(ctx_, *forward(run, chunk));
    if (!out.defined()) {
      Shape os = y.shape();
      os[0] = n;
      out = Tensor::empty(os, y.dtype());
    }
    std::memcpy(static_cast<char*>(out.raw()) + b * (y.numel() / cnt) * dtype_size(y.dtype()), y.raw(), y.nbytes());
  }
  return out;
}

void DeviceNet::zero_grad() {
  for (auto& p : params_) cuda::fill_zero(ctx_, p->grad);
}

std::vector<DeviceParam*> DeviceNet::params() {
  std::vector<DeviceParam*> out;
  for (auto& p : params_) out.push_back(p.get());
  return out;
}

void DeviceNet::download() {
  for (auto* list : {&params_, &buffers_})
    for (auto& p : *list) cuda::copy_to_host(ctx_, p->value, p->host->value);
}

}  // namespace driftlab
