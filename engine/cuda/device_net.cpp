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
#include "engine/layers/math_mode.h"
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

// Whether the device path has a counterpart of each layer: one visit per kind (the capability
// table's cuda column comes from support()). Containers are looked into.
class DeviceSupport : public LayerVisitor {
 public:
  std::string path;  // where the layer sits
  std::string bad;   // the first layer without a counterpart: "<path> (<kind>): <why>"

  void visit(Conv2dLayer& c) override {
    if (c.op_params().groups != 1) bad = path + " (conv2d): grouped convolution (groups " + std::to_string(c.op_params().groups) + ") has no CUDA kernel yet";
  }
  void visit(Pool2dLayer&) override {}
  void visit(DenseLayer&) override {}
  void visit(ActivationLayer&) override {}
  void visit(BatchNormLayer&) override {}
  void visit(DropoutLayer&) override {}
  void visit(FlattenLayer&) override {}
  void visit(GlobalAvgPoolLayer&) override {}
  void visit(EmbeddingLayer&) override {}
  void visit(RnnLayer&) override {}
  void visit(ResidualLayer& r) override {
    const std::string at = path;
    check_seq(r.main(), at + ".residual.main.");
    if (bad.empty() && r.projection()) check_seq(*r.projection(), at + ".residual.shortcut.");
  }
  void visit(GraphLayer&) override { bad = path + " (graph): graph models run on the CPU only so far"; }
  // Layers of a library above the engine (quant/'s int8 layers) say for themselves.
  void visit(ExternalLayer& l) override {
    const std::string why = l.device_unsupported();
    if (!why.empty()) bad = path + " (" + l.kind() + "): " + why;
  }

  void check_seq(Sequential& net, const std::string& prefix) {
    for (std::size_t i = 0; i < net.size() && bad.empty(); ++i) {
      path = prefix + std::to_string(i);
      net.layer(i).accept(*this);
    }
  }

  static Support support(Kind<Conv2dLayer>) { return Support::some("own kernel, cuDNN; groups 1 only"); }
  static Support support(Kind<Pool2dLayer>) { return Support::all("own kernel, cuDNN"); }
  static Support support(Kind<DenseLayer>) { return Support::all("own GEMM, cuBLAS"); }
  static Support support(Kind<ActivationLayer>) { return Support::all("relu, tanh, sigmoid, hard_sigmoid, clip"); }
  static Support support(Kind<BatchNormLayer>) { return Support::all("own kernel, cuDNN"); }
  static Support support(Kind<DropoutLayer>) { return Support::all(); }
  static Support support(Kind<FlattenLayer>) { return Support::all(); }
  static Support support(Kind<GlobalAvgPoolLayer>) { return Support::all(); }
  static Support support(Kind<EmbeddingLayer>) { return Support::all(); }
  static Support support(Kind<RnnLayer>) { return Support::all("own kernels, cuDNN RNN for the cells it has"); }
  static Support support(Kind<ResidualLayer>) { return Support::all(); }
  static Support support(Kind<GraphLayer>) { return Support::none("graph models run on the CPU only so far"); }
  static Support support(Kind<ExternalLayer>) { return Support::some("as the layer says (device_unsupported)"); }
};

// The layers the device path covers, for the refusal's message: the kinds support() accepts.
std::string covered_kinds() {
  const SupportColumn col = device_support();
  std::string out;
  for (std::size_t k = 0; k + 1 < kLayerKindCount; ++k)
    if (col[k].level != Support::Level::none) out += std::string(out.empty() ? "" : ", ") + layer_kind_name(LayerKind(k));
  return out + "; int8: quantize, dequantize, qconv2d, qdense, qmaxpool2d, qrelu, qglobal_avg_pool, qresidual";
}

}  // namespace

// ---------------------------------------------------------------- building

SupportColumn device_support() { return support_of<DeviceSupport>(); }

void check_device_supported(Model& model) {
  DeviceSupport s;
  s.check_seq(*model.net, "");
  check(s.bad.empty(), "cuda: model ", model.name, ": layer ", s.bad, " (the device path covers ", covered_kinds(),
        "); run it with --device cpu");
}

cuda::CudaExecParams resolve_cuda_exec(const Policy& policy) {
  // On the device a tf32 math mode is the libraries' TF32 mode: it needs the tf32_* knob that turns
  // that on (the GPU variants set both); float16 / bfloat16 have no device path yet.
  struct Mode {
    const char* knob;
    MathMode mode;
    const char* device_knob;
    bool device_tf32;
  };
  for (const Mode& m : {Mode{"math_conv", policy.math_conv, "tf32_conv", policy.tf32_conv},
                        Mode{"math_matmul", policy.math_matmul, "tf32_matmul", policy.tf32_matmul},
                        Mode{"math_rnn", policy.math_rnn, "tf32_conv", policy.tf32_conv}}) {
    check(m.mode == MathMode::float32 || m.mode == MathMode::tf32, "cuda: ", m.knob, "=", math_mode_name(m.mode),
          " is emulated on the CPU only (--device cpu); float16 / bfloat16 are not built for the device yet");
    check(m.mode != MathMode::tf32 || m.device_tf32, "cuda: ", m.knob, "=tf32 needs ", m.device_knob,
          "=true on the device (it lets the library choose TF32 kernels); ", m.knob, "=tf32 alone is the CPU emulation");
  }
  check(policy.conv_algorithm == ConvAlgorithm::direct,
        "cuda: conv_algorithm=winograd is built for the CPU's oneDNN kernel only (--device cpu); on the device "
        "cuDNN's algorithm choice is cudnn_algo_search's");
  check(policy.loss_scale == LossScale::none, "cuda: loss_scale=", policy.get("loss_scale"),
        " is built in the CPU runner only (--device cpu)");
  check(policy.autocast == Autocast::off, "cuda: autocast=", policy.get("autocast"),
        " is emulated on the CPU only (--device cpu); the device's float16 / bfloat16 kernels are not built yet");
  cuda::CudaExecParams p;
  const cuda::CudaBackend b =
      policy.cuda_kernels == CudaKernels::vendor ? cuda::CudaBackend::vendor : cuda::CudaBackend::own;
  p.gemm_backend = p.conv_backend = p.pool_backend = p.bn_backend = p.softmax_backend = p.rnn_backend = b;
  p.tf32_matmul = policy.tf32_matmul;
  p.tf32_conv = policy.tf32_conv;
  p.deterministic = policy.cuda_deterministic;
  p.algo_search = policy.cudnn_algo_search == AlgoSearch::exhaustive ? cuda::CudnnAlgoSearch::exhaustive
                                                                       : cuda::CudnnAlgoSearch::heuristic;
  p.rnn_persist_small_h = policy.cudnn_rnn_algo == RnnAlgoRule::torch_heuristic;
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

  // The device counterpart of one layer: one visit per kind.
  struct Make : LayerVisitor {
    DeviceNetBuilder& b;
    std::string path;
    std::unique_ptr<DeviceLayer> out;
    Make(DeviceNetBuilder& builder, std::string at) : b(builder), path(std::move(at)) {}

    void visit(Conv2dLayer& c) override {
      auto ps = c.params();
      // One statement per adopt: the order of the device parameters is the CPU model's (function
      // arguments are evaluated in an unspecified order; GCC took the bias first).
      DeviceParam* w = b.adopt(ps[0], true);
      DeviceParam* bias = ps.size() > 1 ? b.adopt(ps[1], true) : nullptr;
      out = make_device_conv2d(c, w, bias);
    }
    void visit(DenseLayer& d) override {
      auto ps = d.params();
      DeviceParam* w = b.adopt(ps[0], true);
      DeviceParam* bias = ps.size() > 1 ? b.adopt(ps[1], true) : nullptr;
      out = make_device_dense(w, bias);
    }
    void visit(Pool2dLayer& p) override { out = make_device_pool2d(p); }
    void visit(ActivationLayer& a) override { out = make_device_activation(a); }
    void visit(FlattenLayer& f) override { out = make_device_flatten(f); }
    void visit(DropoutLayer& d) override { out = make_device_dropout(d); }
    void visit(GlobalAvgPoolLayer& g) override { out = make_device_global_avg_pool(g); }
    void visit(EmbeddingLayer& e) override { out = make_device_embedding(e, b.adopt(e.params()[0], true)); }
    void visit(RnnLayer& r) override {
      std::vector<DeviceParam*> ps;
      for (Param* q : r.params()) ps.push_back(b.adopt(q, true));
      out = make_device_rnn(r, ps);
    }
    void visit(BatchNormLayer& bn) override {
      auto ps = bn.params();
      DeviceParam* gamma = b.adopt(ps[0], true);
      DeviceParam* beta = b.adopt(ps[1], true);
      const bool debias = bn.op_params().zero_debias;
      std::vector<DeviceParam*> state;
      auto rs = bn.running_state();
      for (std::size_t i = 0; i < rs.size(); ++i) state.push_back(i < 2 || debias ? b.adopt(rs[i], false) : nullptr);
      out = make_device_batchnorm(bn, gamma, beta, std::move(state));
    }
    void visit(ResidualLayer& r) override {
      auto main = b.make_seq(r.main(), path + ".residual.main.");
      auto proj = r.projection() ? b.make_seq(*r.projection(), path + ".residual.shortcut.") : nullptr;
      out = make_device_residual(r, std::move(main), std::move(proj));
    }
    void visit(GraphLayer&) override { fail("cuda: layer ", path, " (graph): graph models run on the CPU only so far"); }
    // A layer defined outside engine/layers (quant/'s int8 layers) makes its own.
    void visit(ExternalLayer& l) override {
      const std::string why = l.device_unsupported();
      check(why.empty(), "cuda: layer ", path, " (", l.kind(), "): ", why);
      out = l.make_device(b.net.ctx_);
    }
  };

  std::unique_ptr<DeviceLayer> make_layer(Layer& l, const std::string& path) {
    Make m(*this, path);
    l.accept(m);
    return std::move(m.out);
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
  const Tensor xt = model_.in_dtype(x);
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
